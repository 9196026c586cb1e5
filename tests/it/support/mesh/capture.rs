//! The rules `istio-iptables` writes into an injected pod, as one `iptables-restore` text
//! ([`istio_iptables_rules_for`]): what `istio-iptables -p 15001 -z 15006 -u 1337 -g 1337
//! -m MODE -i '*' -x "" -b '*' -d 15090,15021,15020` makes (istio's
//! `tools/istio-iptables/pkg/capture/run.go`; its golden files `testdata/*.golden`, e.g.
//! `inbound-ports-wildcard-tproxy.golden`, list the same rules for other flags).
//!
//! - REDIRECT (the default): the nat table only. Inbound TCP to any port but the excluded
//!   ones goes to Envoy's 15006; outbound TCP to 15001, except the proxy's own (uid/gid
//!   1337), loopback between local processes, and what Envoy's inbound passthrough sends
//!   from 127.0.0.6.
//! - TPROXY: inbound moves to the mangle table, where new connections are handed to 15006
//!   by `-j TPROXY` (destination and source kept, the packet marked 1337), the packets of
//!   established ones are marked 1337 (`ISTIO_DIVERT`), and marked packets are routed to
//!   the loopback by `ip rule add fwmark 1337 lookup 133` and `ip route add local default
//!   dev lo table 133` ([`TPROXY_ROUTES`], pilot-agent's `tools/common/tproxy`). Envoy's
//!   connections to the app carry `original_src`'s mark 1337 and are not taken again; the
//!   proxy's own connections to the pod's address over `lo` are marked 1338 and are. The
//!   nat table keeps outbound (REDIRECT to 15001) and its loopback rules. The proxy runs as
//!   uid 0, gid 1337 ([`InterceptionMode::proxy_user`]), which those rules depend on.

/// The uid and gid the sidecar runs as (istio-proxy's), whose traffic is not captured.
pub const PROXY_UID: u32 = 1337;
/// Envoy's outbound capture port (`virtualOutbound`).
pub const OUTBOUND_CAPTURE_PORT: u16 = 15001;
/// Envoy's inbound capture port (`virtualInbound`).
pub const INBOUND_CAPTURE_PORT: u16 = 15006;
/// The HBONE tunnel port, never captured inbound.
pub const TUNNEL_PORT: u16 = 15008;
/// Inbound ports the injector excludes: Envoy's Prometheus port, the health port and the
/// agent's status port; and SSH's 22, which earlier `istio-iptables` releases always returned
/// (today's leave it to `-d`).
pub const EXCLUDED_INBOUND_PORTS: [u16; 4] = [22, 15090, 15021, 15020];

/// The mark of TPROXY-captured packets (`--tproxy-mark`, `ISTIO_DIVERT`'s) and of Envoy's
/// `original_src` connections (istio-iptables' `INBOUND_TPROXY_MARK`).
pub const TPROXY_MARK: u32 = 1337;
/// The mark of the proxy's own connections over `lo` to a local non-loopback address
/// (istio-iptables' `OutboundMark`): taken to 15006 again.
pub const OUTBOUND_MARK: u32 = 1338;
/// The `ip` commands pilot-agent runs in a TPROXY pod (istio's `configureTProxyRoutes`):
/// packets marked [`TPROXY_MARK`] look up table 133 (`INBOUND_TPROXY_ROUTE_TABLE`), which
/// delivers everything locally.
pub const TPROXY_ROUTES: [&[&str]; 2] = [
    &["rule", "add", "fwmark", "1337", "lookup", "133"],
    &[
        "route", "add", "local", "default", "dev", "lo", "table", "133",
    ],
];

/// How a pod's inbound traffic is captured (`sidecar.istio.io/interceptionMode`; the
/// sidecar's `INTERCEPTION_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterceptionMode {
    /// nat `REDIRECT`: the app sees Envoy's address as the peer.
    #[default]
    Redirect,
    /// mangle `TPROXY`: the original source and destination are kept.
    Tproxy,
}

impl InterceptionMode {
    /// The uid and gid the sidecar runs as. istio's injector runs a TPROXY proxy as root in
    /// group 1337 (`runAsUser: 0`, `runAsGroup: 1337`, `NET_ADMIN` added): its connections
    /// over `lo` are then not `--uid-owner 1337`, so nat's `! --uid-owner 1337 -j RETURN`
    /// leaves them (original_src's to the app among them) to the mangle rules, and its
    /// other connections are told from the app's by `--gid-owner 1337` (the test's app
    /// clients are root too, in group 0).
    pub fn proxy_user(self) -> (u32, u32) {
        match self {
            InterceptionMode::Redirect => (PROXY_UID, PROXY_UID),
            InterceptionMode::Tproxy => (0, PROXY_UID),
        }
    }

    /// As istio spells it: `REDIRECT`, `TPROXY`.
    pub fn as_str(self) -> &'static str {
        match self {
            InterceptionMode::Redirect => "REDIRECT",
            InterceptionMode::Tproxy => "TPROXY",
        }
    }
}

/// The `iptables-restore` input of a REDIRECT pod's capture (the nat table only: IPv4, no
/// DNS capture). Printable: a failing test can show what the pod ran.
pub fn istio_iptables_rules() -> String {
    istio_iptables_rules_for(InterceptionMode::Redirect)
}

/// The `iptables-restore` input of a pod's capture in `mode` (IPv4, no DNS capture): for
/// TPROXY the mangle table, then the nat table, in istio-iptables' order (its `-I` rules
/// too). The routes of a TPROXY pod are [`TPROXY_ROUTES`].
pub fn istio_iptables_rules_for(mode: InterceptionMode) -> String {
    let mut rules = match mode {
        InterceptionMode::Redirect => Vec::new(),
        InterceptionMode::Tproxy => tproxy_mangle_rules(),
    };
    rules.extend(nat_rules(mode));
    let mut text = rules.join("\n");
    text.push('\n');
    text
}

/// The mangle table of a TPROXY pod (istio-iptables' `handleInboundPortsInclude` and the
/// end of its `Run`).
fn tproxy_mangle_rules() -> Vec<String> {
    let (uid, mark, outbound_mark) = (PROXY_UID, TPROXY_MARK, OUTBOUND_MARK);
    let mut rules = vec![
        "*mangle".to_string(),
        "-N ISTIO_DIVERT".to_string(),
        "-N ISTIO_TPROXY".to_string(),
        "-N ISTIO_INBOUND".to_string(),
        format!("-A ISTIO_DIVERT -j MARK --set-mark {mark}"),
        "-A ISTIO_DIVERT -j ACCEPT".to_string(),
        format!(
            "-A ISTIO_TPROXY ! -d 127.0.0.1/32 -p tcp -j TPROXY --tproxy-mark {mark}/0xffffffff \
             --on-port {INBOUND_CAPTURE_PORT}"
        ),
        "-A PREROUTING -p tcp -j ISTIO_INBOUND".to_string(),
    ];
    rules.extend(
        EXCLUDED_INBOUND_PORTS
            .iter()
            .map(|port| format!("-A ISTIO_INBOUND -p tcp --dport {port} -j RETURN")),
    );
    rules.extend([
        // A packet of a connection already handed to Envoy: marked, so routed to it.
        "-A ISTIO_INBOUND -p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j ISTIO_DIVERT"
            .to_string(),
        // A new connection: to 15006, its addresses kept.
        "-A ISTIO_INBOUND -p tcp -j ISTIO_TPROXY".to_string(),
        // Keep original_src's mark on the connection, for the replies.
        format!("-A PREROUTING -p tcp -m mark --mark {mark} -j CONNMARK --save-mark"),
        // Envoy to the app (original_src's mark): not marked again.
        format!("-A OUTPUT -p tcp -o lo -m mark --mark {mark} -j RETURN"),
    ]);
    for owner in ["--uid-owner", "--gid-owner"] {
        // The proxy calling its own pod's address (app -> VIP -> this pod): inbound again.
        rules.push(format!(
            "-A OUTPUT ! -d 127.0.0.1/32 -p tcp -o lo -m owner {owner} {uid} \
             -j MARK --set-mark {outbound_mark}"
        ));
    }
    rules.extend([
        // The app's replies to a client whose address original_src kept: routed back to lo.
        format!("-A OUTPUT -p tcp -m connmark --mark {mark} -j CONNMARK --restore-mark"),
        // Envoy to the app: never to 15006 again.
        format!("-I ISTIO_INBOUND 1 -p tcp -m mark --mark {mark} -j RETURN"),
        // The inbound passthrough (and pilot-agent) from 127.0.0.6.
        "-I ISTIO_INBOUND 2 -p tcp -s 127.0.0.6/32 -i lo -j RETURN".to_string(),
        // The app calling itself by the pod IP: left alone.
        format!("-I ISTIO_INBOUND 3 -p tcp -i lo -m mark ! --mark {outbound_mark} -j RETURN"),
        "COMMIT".to_string(),
    ]);
    rules
}

/// The nat table: outbound to 15001 in both modes, inbound to 15006 under REDIRECT only
/// (under TPROXY its `ISTIO_INBOUND` keeps only the tunnel port's rule, and nothing jumps
/// to it, as istio-iptables leaves it).
fn nat_rules(mode: InterceptionMode) -> Vec<String> {
    let uid = PROXY_UID;
    let mut rules = vec![
        "*nat".to_string(),
        "-N ISTIO_INBOUND".to_string(),
        "-N ISTIO_REDIRECT".to_string(),
        "-N ISTIO_IN_REDIRECT".to_string(),
        "-N ISTIO_OUTPUT".to_string(),
        format!("-A ISTIO_INBOUND -p tcp --dport {TUNNEL_PORT} -j RETURN"),
        format!("-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports {OUTBOUND_CAPTURE_PORT}"),
        format!("-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports {INBOUND_CAPTURE_PORT}"),
    ];
    if mode == InterceptionMode::Redirect {
        rules.push("-A PREROUTING -p tcp -j ISTIO_INBOUND".to_string());
        rules.extend(
            EXCLUDED_INBOUND_PORTS
                .iter()
                .map(|port| format!("-A ISTIO_INBOUND -p tcp --dport {port} -j RETURN")),
        );
        rules.push(INBOUND_CAPTURED.to_string());
    }
    rules.push("-A OUTPUT -j ISTIO_OUTPUT".to_string());
    // Envoy's inbound passthrough binds 127.0.0.6 to reach the app at the pod IP.
    rules.push("-A ISTIO_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN".to_string());
    for owner in ["--uid-owner", "--gid-owner"] {
        // The proxy calling its own pod IP or a service VIP that lands here: inbound again.
        rules.push(format!(
            "-A ISTIO_OUTPUT -o lo ! -d 127.0.0.1/32 -p tcp ! --dport {TUNNEL_PORT} \
             -m owner {owner} {uid} -j ISTIO_IN_REDIRECT"
        ));
        // The app calling itself on loopback: left alone.
        rules.push(format!(
            "-A ISTIO_OUTPUT -o lo -m owner ! {owner} {uid} -j RETURN"
        ));
        // Everything else the proxy sends: never captured (no loop through 15001).
        rules.push(format!("-A ISTIO_OUTPUT -m owner {owner} {uid} -j RETURN"));
    }
    rules.push("-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN".to_string());
    rules.push("-A ISTIO_OUTPUT -j ISTIO_REDIRECT".to_string());
    rules.push("COMMIT".to_string());
    rules
}

/// The rule, as `iptables-save` prints it, that sends the application's outbound TCP to 15001
/// (for [`Pod::nat_packets`](super::Pod::nat_packets)).
pub const OUTBOUND_CAPTURED: &str = "-A ISTIO_OUTPUT -j ISTIO_REDIRECT";
/// The rule that sends inbound TCP to 15006.
pub const INBOUND_CAPTURED: &str = "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT";
/// The mangle rule, as `iptables-save` prints it, that hands a new inbound connection to
/// 15006 in a TPROXY pod (for [`Pod::mangle_packets`](super::Pod::mangle_packets)).
pub const TPROXY_CAPTURED: &str = "-j TPROXY --on-port 15006";
/// The mangle rule that lets Envoy's `original_src` connections (mark 1337) to the app
/// through, as `iptables-save` prints it.
pub const TPROXY_MARKED_RETURN: &str = "-A ISTIO_INBOUND -p tcp -m mark --mark 0x539 -j RETURN";
/// The rule that sends the proxy's own connection to a local address other than 127.0.0.1
/// (its pod IP, from anything but 127.0.0.6) back to 15006.
pub const PROXY_TO_SELF_CAPTURED: &str = "--uid-owner 1337 -j ISTIO_IN_REDIRECT";
