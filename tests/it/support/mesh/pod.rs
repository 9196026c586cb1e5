//! [`Pod`]: a pod of a mesh, as the test sees it: its address, its sidecar (started here as
//! pilot-agent starts it: capture rules (and a TPROXY pod's routes), the XDS proxy, Envoy with
//! its bootstrap as uid/gid 1337 (under TPROXY as uid 0, gid 1337, with `CAP_NET_ADMIN` only),
//! the admin relay, and, in a mesh with a CA, the agent serving it certificates over SDS), its
//! applications (HTTP, HTTPS and TCP servers made in the pod) and its
//! application's client side (connections made in the pod as root, so captured). Dropping it
//! kills its sidecar and deletes its namespace.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use super::apps::{self, TcpApp};
use super::capture::{InterceptionMode, TPROXY_ROUTES, istio_iptables_rules_for};
use super::hosts::Registry;
use super::identity::MeshCa;
use super::netns::{self, Netns};
use super::relay::Relay;
use super::{ADMIN_PORT, ISTIO_VERSION, PodSpec, XDS_PROXY_PORT};
use crate::support::accept::poke_at;
use crate::support::agent::Agent;
use crate::support::scenario::describe_envoy;
use crate::support::tls_upstream::TlsEchoUpstream;
use crate::support::{
    EchoUpstream, Envoy, EnvoyOptions, HttpResponse, InPod, dynamic_listener, http_request_on,
    wait_until,
};

/// How long a sidecar may take to get a listener from axon.
const CONVERGE: Duration = Duration::from_secs(30);
/// How long a connection made in a pod may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A pod of a [`Mesh`](super::Mesh): its namespace, and its sidecar if it has one.
pub struct Pod {
    name: String,
    namespace: String,
    ip: Ipv4Addr,
    netns: Arc<Netns>,
    registry: Arc<Registry>,
    envoy: Option<Envoy>,
    /// The sidecar's agent, in a mesh with a CA.
    agent: Option<Agent>,
    /// The XDS proxy and the admin relay.
    relays: Vec<Relay>,
    rules: Option<String>,
    interception: InterceptionMode,
}

impl Pod {
    /// A pod in `netns` (already wired to the bridge), with no sidecar yet.
    pub(super) fn new(
        spec: &PodSpec,
        ip: Ipv4Addr,
        netns: Arc<Netns>,
        registry: Arc<Registry>,
    ) -> Pod {
        Pod {
            name: spec.name.to_string(),
            namespace: spec.namespace.to_string(),
            ip,
            netns,
            registry,
            envoy: None,
            agent: None,
            relays: Vec::new(),
            rules: None,
            interception: spec.interception,
        }
    }

    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pod's sidecar Envoy (panics for a pod without one).
    pub fn envoy(&self) -> &Envoy {
        self.envoy
            .as_ref()
            .unwrap_or_else(|| panic!("pod {} has no sidecar", self.name))
    }

    /// The sidecar's agent (panics for a pod without one: no sidecar, or a mesh without a CA).
    pub fn agent(&self) -> &Agent {
        self.agent
            .as_ref()
            .unwrap_or_else(|| panic!("pod {} has no agent", self.name))
    }

    /// The sidecar's node id, `sidecar~IP~NAME.NAMESPACE~NAMESPACE.svc.cluster.local`.
    pub fn node_id(&self) -> String {
        format!(
            "sidecar~{}~{}.{}~{}.svc.cluster.local",
            self.ip, self.name, self.namespace, self.namespace
        )
    }

    /// The capture rules the pod runs (none without a sidecar).
    pub fn capture_rules(&self) -> Option<&str> {
        self.rules.as_deref()
    }

    /// How the pod's sidecar captures (REDIRECT for a pod without one).
    pub fn interception(&self) -> InterceptionMode {
        self.interception
    }

    /// The pod's nat table with its packet counters (`iptables-save -c -t nat`).
    pub fn nat_table(&self) -> String {
        self.table("nat")
    }

    /// The pod's mangle table with its packet counters (a TPROXY pod's inbound capture).
    pub fn mangle_table(&self) -> String {
        self.table("mangle")
    }

    /// `iptables-save -c -t TABLE` in the pod.
    fn table(&self, table: &str) -> String {
        let out = self
            .command("iptables-save")
            .args(["-c", "-t", table])
            .output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
            Err(e) => format!("(iptables-save -t {table} failed: {e})"),
        }
    }

    /// The tables the pod's capture uses, with their counters: nat, and mangle under TPROXY.
    fn capture_tables(&self) -> String {
        match self.interception {
            InterceptionMode::Redirect => self.nat_table(),
            InterceptionMode::Tproxy => format!("{}{}", self.mangle_table(), self.nat_table()),
        }
    }

    /// `PROGRAM` to run in the pod (`ip netns exec NS PROGRAM`, so with the pod's
    /// `/etc/hosts`), as root.
    pub fn command(&self, program: &str) -> Command {
        let prefix = self.netns.exec_prefix();
        let mut cmd = Command::new(&prefix[0]);
        cmd.args(&prefix[1..]).arg(program);
        cmd
    }

    /// How many packets the pod's nat rule containing `rule` (as `iptables-save` prints it,
    /// e.g. `--uid-owner 1337 -j ISTIO_IN_REDIRECT`) has matched; 0 if no rule has it. A
    /// connection is one packet (nat sees its first).
    pub fn nat_packets(&self, rule: &str) -> u64 {
        packets(&self.nat_table(), rule)
    }

    /// Like [`Pod::nat_packets`], in the mangle table (e.g.
    /// [`TPROXY_CAPTURED`](super::TPROXY_CAPTURED)), where every packet of a connection
    /// counts, not only its first.
    pub fn mangle_packets(&self, rule: &str) -> u64 {
        packets(&self.mangle_table(), rule)
    }

    /// The sidecar's state and the pod's capture counters, for a failure message.
    pub fn describe(&self) -> String {
        let envoy = self.envoy.as_ref().map(describe_envoy).unwrap_or_default();
        format!(
            "pod {} ({}, {}):\n{envoy}\n{}",
            self.name,
            self.ip,
            self.interception.as_str(),
            self.capture_tables()
        )
    }

    /// A TCP connection to `addr` made in the pod as root: as the application's, it is
    /// captured (to 15001) when the pod has a sidecar.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        self.netns
            .run(|| TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT))
    }

    /// A listener on `addr` in the pod.
    pub fn listen(&self, addr: SocketAddr) -> TcpListener {
        self.netns
            .run(|| TcpListener::bind(addr))
            .unwrap_or_else(|e| panic!("bind {addr} in pod {}: {e}", self.name))
    }

    /// The pod's HTTP application `name` on 0.0.0.0:`port`: answers with its name, the
    /// request and the peer it saw, and records each request.
    pub fn serve_http(&self, port: u16, name: &str) -> EchoUpstream {
        let listener = self.listen(SocketAddr::from(([0, 0, 0, 0], port)));
        EchoUpstream::serve(listener, name, self.poker(port))
    }

    /// The pod's TCP application `name` on 0.0.0.0:`port`: a banner line `NAME PEER`, then an
    /// echo.
    pub fn serve_tcp(&self, port: u16, name: &str) -> TcpApp {
        let listener = self.listen(SocketAddr::from(([0, 0, 0, 0], port)));
        TcpApp::serve(listener, name, self.poker(port))
    }

    /// An application of the test's own on 0.0.0.0:`port` in the pod: `serve` gets each
    /// connection (on a thread of its own); it stops when the returned acceptor drops.
    pub fn serve_with(
        &self,
        port: u16,
        name: &str,
        serve: impl Fn(TcpStream) + Send + Sync + 'static,
    ) -> crate::support::accept::Acceptor {
        let listener = self.listen(SocketAddr::from(([0, 0, 0, 0], port)));
        crate::support::accept::Acceptor::spawn(name, listener, self.poker(port), serve)
    }

    /// The pod's HTTPS application `name` on 0.0.0.0:`port`, serving `cert`/`key`: answers
    /// with its name and records each handshake (the SNI it got).
    pub fn serve_tls(&self, port: u16, name: &str, cert: &Path, key: &Path) -> TlsEchoUpstream {
        let listener = self.listen(SocketAddr::from(([0, 0, 0, 0], port)));
        TlsEchoUpstream::serve(listener, name, cert, key, None, self.poker(port))
    }

    /// Connects to the pod's loopback `port` from inside the pod (ends an accept loop).
    fn poker(&self, port: u16) -> impl Fn() + Send + Sync + 'static {
        let netns = self.netns.clone();
        move || {
            netns.run(|| {
                let _ = TcpStream::connect_timeout(
                    &SocketAddr::from(([127, 0, 0, 1], port)),
                    CONNECT_TIMEOUT,
                );
            })
        }
    }

    /// The address of `host` (a service name, a ClusterIP or a pod IP) as this pod resolves
    /// it. Panics on an unknown name.
    pub fn resolve(&self, host: &str) -> Ipv4Addr {
        self.registry
            .resolve(&self.namespace, host)
            .unwrap_or_else(|| panic!("pod {}: no address for {host:?}", self.name))
    }

    /// `GET http://HOST:PORT/PATH` from the application (captured), `Host: HOST` unless
    /// `headers` has one. `(status, body)`, status 0 when the connection failed.
    pub fn http_get(
        &self,
        host: &str,
        port: u16,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, String) {
        let r = self.http_request(host, port, path, headers);
        (r.status, r.body)
    }

    /// Like [`Pod::http_get`], with the response's headers.
    pub fn http_request(
        &self,
        host: &str,
        port: u16,
        path: &str,
        headers: &[(&str, &str)],
    ) -> HttpResponse {
        self.http_method(host, port, "GET", path, headers)
    }

    /// Like [`Pod::http_request`], with `method`.
    pub fn http_method(
        &self,
        host: &str,
        port: u16,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> HttpResponse {
        let addr = SocketAddr::from((self.resolve(host), port));
        let authority = if host.parse::<Ipv4Addr>().is_ok() {
            format!("{host}:{port}")
        } else {
            host.to_string()
        };
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            all.push(("Host", &authority));
        }
        let timeout = Duration::from_secs(5);
        match self.connect(addr) {
            Ok(stream) => http_request_on(stream, &authority, method, path, &all, timeout),
            Err(e) => HttpResponse {
                status: 0,
                headers: Vec::new(),
                body: format!("connect to {addr} from pod {}: {e}", self.name),
            },
        }
    }

    /// The banner line of the [`TcpApp`] at `host`:`port`, from the application (captured);
    /// empty when the connection failed or closed first.
    pub fn tcp_banner(&self, host: &str, port: u16) -> String {
        match self.connect(SocketAddr::from((self.resolve(host), port))) {
            Ok(conn) => apps::read_banner(conn),
            Err(_) => String::new(),
        }
    }

    /// Waits until the sidecar has listener `name` active; panics, describing the pod,
    /// otherwise.
    pub fn wait_listener(&self, name: &str) {
        let envoy = self.envoy();
        assert!(
            wait_until(CONVERGE, || dynamic_listener(&envoy.config_dump(), name)
                .is_some_and(|l| l.get("active_state").is_some())),
            "pod {}: no active listener {name}\n{}",
            self.name,
            self.describe()
        );
    }

    /// Installs the capture rules, then starts the XDS proxy, the admin relay, the agent
    /// (with `ca`) and Envoy as pilot-agent would.
    pub(super) fn start_sidecar(
        &mut self,
        axon_xds: SocketAddr,
        spec: &PodSpec,
        ca: Option<&MeshCa>,
    ) {
        let rules = istio_iptables_rules_for(spec.interception);
        self.netns.iptables_restore(&rules);
        self.rules = Some(rules);
        if spec.interception == InterceptionMode::Tproxy {
            for route in TPROXY_ROUTES {
                self.netns.ip(route);
            }
        }
        let in_pod = SocketAddr::from(([127, 0, 0, 1], XDS_PROXY_PORT));
        let xds_listener = self.listen(in_pod);
        self.relays.push(Relay::start(
            "xds",
            xds_listener,
            move || TcpStream::connect_timeout(&axon_xds, CONNECT_TIMEOUT),
            self.poker(XDS_PROXY_PORT),
        ));
        let admin_listener = TcpListener::bind("127.0.0.1:0").expect("bind the admin relay");
        let admin_relay = admin_listener.local_addr().expect("its address");
        let netns = self.netns.clone();
        self.relays.push(Relay::start(
            "admin",
            admin_listener,
            move || {
                netns.run(|| {
                    TcpStream::connect_timeout(
                        &SocketAddr::from(([127, 0, 0, 1], ADMIN_PORT)),
                        CONNECT_TIMEOUT,
                    )
                })
            },
            poke_at(admin_relay),
        ));
        let mut options = EnvoyOptions::sidecar(&self.node_id(), spec.labels, spec.namespace);
        let ip = self.ip.to_string();
        for (key, value) in [
            ("INTERCEPTION_MODE", spec.interception.as_str()),
            ("SERVICE_ACCOUNT", spec.service_account),
            ("INSTANCE_IPS", &ip),
            ("ISTIO_VERSION", ISTIO_VERSION),
            ("WORKLOAD_NAME", spec.name),
            ("NAME", spec.name),
            ("CLUSTER_ID", "Kubernetes"),
        ] {
            options
                .extra_metadata
                .push((key.to_string(), serde_json::json!(value)));
        }
        if let Some(ca) = ca {
            let agent = ca.start_agent(spec.namespace, spec.service_account, &mut options);
            self.agent = Some(agent);
        }
        let (uid, gid) = spec.interception.proxy_user();
        let mut wrapper = self.netns.exec_prefix();
        wrapper.extend(
            [
                "setpriv",
                &format!("--reuid={uid}"),
                &format!("--regid={gid}"),
                "--clear-groups",
            ]
            .map(str::to_string),
        );
        if spec.interception == InterceptionMode::Tproxy {
            // As istio's injector runs a TPROXY proxy: root with every capability dropped
            // but NET_ADMIN (transparent listeners, original_src's IP_TRANSPARENT sockets).
            wrapper
                .extend(["--inh-caps=-all", "--bounding-set=-all,+net_admin"].map(str::to_string));
        }
        wrapper.push("--".to_string());
        options.pod = Some(InPod {
            wrapper,
            uid,
            gid,
            admin_port: ADMIN_PORT,
            admin_relay,
        });
        self.envoy = Some(Envoy::start(in_pod, options));
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "===== pod {} capture tables =====\n{}",
                self.name,
                self.capture_tables()
            );
        }
        drop(self.envoy.take());
        drop(self.agent.take());
        self.relays.clear();
        self.registry.pods.lock().unwrap().remove(self.netns.name());
        netns::delete(self.netns.name());
    }
}

/// The packet counter of the first rule of `table` (an `iptables-save -c` text) containing
/// `rule`; 0 if none has it.
fn packets(table: &str, rule: &str) -> u64 {
    table
        .lines()
        .find(|l| l.contains(rule))
        .and_then(|l| l.strip_prefix('['))
        .and_then(|l| l.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
