//! The nat rules `istio-iptables` writes into an injected pod in REDIRECT mode, as one
//! `iptables-restore` text ([`istio_iptables_rules`]): what `istio-iptables -p 15001 -z 15006
//! -u 1337 -g 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020` makes (istio's
//! `tools/istio-iptables/pkg/capture/run.go`; its golden files `testdata/*.golden` list the
//! same rules for other flags). Inbound TCP to any port but the excluded ones goes to
//! Envoy's 15006; outbound TCP to 15001, except the proxy's own (uid/gid 1337), loopback
//! between local processes, and what Envoy's inbound passthrough sends from 127.0.0.6.

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

/// The `iptables-restore` input of a pod's capture (the nat table only: IPv4, no DNS
/// capture, no TPROXY). Printable: a failing test can show what the pod ran.
pub fn istio_iptables_rules() -> String {
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
        "-A PREROUTING -p tcp -j ISTIO_INBOUND".to_string(),
    ];
    rules.extend(
        EXCLUDED_INBOUND_PORTS
            .iter()
            .map(|port| format!("-A ISTIO_INBOUND -p tcp --dport {port} -j RETURN")),
    );
    rules.push("-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT".to_string());
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
    let mut text = rules.join("\n");
    text.push('\n');
    text
}

/// The rule, as `iptables-save` prints it, that sends the application's outbound TCP to 15001
/// (for [`Pod::nat_packets`](super::Pod::nat_packets)).
pub const OUTBOUND_CAPTURED: &str = "-A ISTIO_OUTPUT -j ISTIO_REDIRECT";
/// The rule that sends inbound TCP to 15006.
pub const INBOUND_CAPTURED: &str = "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT";
/// The rule that sends the proxy's own connection to a local address other than 127.0.0.1
/// (its pod IP, from anything but 127.0.0.6) back to 15006.
pub const PROXY_TO_SELF_CAPTURED: &str = "--uid-owner 1337 -j ISTIO_IN_REDIRECT";
