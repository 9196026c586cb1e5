//! A test mesh made of Linux network namespaces: pods built the way a Kubernetes node,
//! `istio-iptables` and pilot-agent build them, so that sidecar Envoys fed by axon run under
//! real iptables capture.
//!
//! ```text
//!   test process (host netns)                 node netns `axm-PID-M-n`
//!   axon 127.0.0.1:X ◄──────────┐             br0 10.10.0.1/16
//!   admin relay 127.0.0.1:Y ──┐ │              │ v1        │ v2
//!                             │ │        ┌─────┴─────┐ ┌───┴─────────┐
//!                             │ └─ xDS ──┤ pod netns │ │ pod netns   │
//!                             └── admin ─┤ eth0 .2   │ │ eth0 .3     │
//!                                        │ iptables  │ │ (no sidecar)│
//!                                        │ Envoy 1337│ │ app         │
//!                                        │ app       │ └─────────────┘
//!                                        └───────────┘
//! ```
//!
//! [`Mesh::new`] makes the node namespace with the bridge (the pods' gateway); [`Mesh::pod`]
//! a pod: its namespace, a veth pair into the bridge, its IP and default route, and with a
//! sidecar ([`PodSpec::sidecar`]) the capture rules (`capture.rs`), an XDS proxy in the pod
//! on 127.0.0.1:15010 relayed to axon, and Envoy as uid/gid 1337 with the bootstrap
//! pilot-agent writes (admin on the pod's 127.0.0.1:15000, relayed to the test's loopback so
//! that the [`Envoy`] helpers work). A [`Pod`] plays its application: a server
//! ([`Pod::serve_http`], [`Pod::serve_tcp`]) or a client whose connections are made in the
//! pod as root, so they are captured ([`Pod::connect`], [`Pod::http_get`],
//! [`Pod::tcp_banner`]). Names resolve through the mesh's host table ([`Mesh::service`]),
//! also written to `/etc/netns/NS/hosts` for programs started with `ip netns exec`
//! ([`Pod::command`]); a pod has no DNS server.
//!
//! Every Mesh has its own node namespace, so meshes of concurrent tests never meet (their
//! addresses may repeat). Nothing is added to the machine's own interfaces and no traffic
//! leaves it. Dropping a pod, or the mesh, kills what runs in its namespaces and deletes
//! them, even when the test panics; namespaces left by a killed test process are deleted
//! by the next mesh (`netns::sweep_stale`). Needs root, `ip` and `iptables-restore`:
//! without them [`Mesh::new`] panics saying so.
//!
//! | file | owns |
//! |---|---|
//! | `netns.rs` | named network namespaces: add, enter, delete, stale sweep, preflight |
//! | `capture.rs` | the `istio-iptables` nat rules of a pod |
//! | `relay.rs` | the TCP relay: the XDS proxy and the admin relay |
//! | `apps.rs` | the pods' TCP application |

mod apps;
mod capture;
mod netns;
mod relay;

pub use apps::TcpApp;
pub use capture::{
    INBOUND_CAPTURED, OUTBOUND_CAPTURED, PROXY_TO_SELF_CAPTURED, PROXY_UID, istio_iptables_rules,
};

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::scenario::describe_envoy;
use crate::support::{
    EchoUpstream, Envoy, EnvoyOptions, HttpResponse, InPod, dynamic_listener, http_request_on,
    wait_until,
};
use netns::Netns;
use relay::Relay;

/// The pods' network: the bridge is `.0.1`, pod N is `.0.N+1`.
const POD_NET: [u8; 2] = [10, 10];
/// Where a sidecar's XDS proxy listens in its pod (pilot-agent's is a unix socket).
pub const XDS_PROXY_PORT: u16 = 15010;
/// The sidecar's admin port in its pod.
pub const ADMIN_PORT: u16 = 15000;
/// The Istio release the sidecars say they are (`ISTIO_VERSION`).
pub const ISTIO_VERSION: &str = "1.24.0";
/// How long a sidecar may take to get a listener from axon.
const CONVERGE: Duration = Duration::from_secs(30);
/// How long a connection made in a pod may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A pod to make: its name, namespace, labels and service account, and whether it runs a
/// sidecar (capture rules and Envoy) or is a plain namespace.
#[derive(Debug, Clone)]
pub struct PodSpec<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub labels: &'a [(&'a str, &'a str)],
    pub service_account: &'a str,
    pub sidecar: bool,
}

impl<'a> PodSpec<'a> {
    /// An injected pod (service account `default`).
    pub fn sidecar(name: &'a str, namespace: &'a str, labels: &'a [(&'a str, &'a str)]) -> Self {
        PodSpec {
            name,
            namespace,
            labels,
            service_account: "default",
            sidecar: true,
        }
    }

    /// A pod without a sidecar: no capture, no Envoy.
    pub fn plain(name: &'a str, namespace: &'a str, labels: &'a [(&'a str, &'a str)]) -> Self {
        PodSpec {
            sidecar: false,
            ..Self::sidecar(name, namespace, labels)
        }
    }
}

/// A mesh: the node namespace and its bridge, the pods' host table, and what it must delete.
pub struct Mesh {
    shared: Arc<Shared>,
    xds: SocketAddr,
    node: Netns,
    next_pod: AtomicU32,
}

/// What the mesh and its pods share.
struct Shared {
    /// `axm-PID-M-`: every namespace of this mesh starts with it.
    prefix: String,
    /// Service hostnames (every form a pod may use) and their ClusterIPs.
    services: Mutex<BTreeMap<String, Ipv4Addr>>,
    /// The live pods: netns name → (pod namespace, pod name, IP).
    pods: Mutex<BTreeMap<String, (String, String, Ipv4Addr)>>,
}

impl Mesh {
    /// A mesh whose sidecars talk to axon's xDS server at `axon_xds` (on the test's
    /// loopback). Panics, saying what is missing, if this process cannot build one.
    pub fn new(axon_xds: SocketAddr) -> Mesh {
        static MESHES: AtomicU32 = AtomicU32::new(0);
        netns::preflight();
        netns::sweep_stale();
        let n = MESHES.fetch_add(1, Ordering::SeqCst);
        let prefix = format!("{}{}-", netns::prefix(), netns::base36(n));
        let node = Netns::add(&format!("{prefix}n"));
        let mesh = Mesh {
            shared: Arc::new(Shared {
                prefix,
                services: Mutex::default(),
                pods: Mutex::default(),
            }),
            xds: axon_xds,
            node,
            next_pod: AtomicU32::new(1),
        };
        let gateway = format!("{}/16", gateway());
        mesh.node.ip(&["link", "set", "lo", "up"]);
        mesh.node.ip(&["link", "add", "br0", "type", "bridge"]);
        mesh.node.ip(&["addr", "add", &gateway, "dev", "br0"]);
        mesh.node.ip(&["link", "set", "br0", "up"]);
        mesh
    }

    /// Makes a pod (and starts its sidecar, waiting for its admin API).
    pub fn pod(&self, spec: PodSpec) -> Pod {
        let n = self.next_pod.fetch_add(1, Ordering::SeqCst);
        assert!(n < 250, "a mesh has at most 249 pods");
        let ip = Ipv4Addr::new(POD_NET[0], POD_NET[1], 0, n as u8 + 1);
        let netns = Arc::new(Netns::add(&format!(
            "{}{}",
            self.shared.prefix,
            netns::base36(n)
        )));
        let mut pod = Pod {
            name: spec.name.to_string(),
            namespace: spec.namespace.to_string(),
            ip,
            netns: netns.clone(),
            shared: self.shared.clone(),
            envoy: None,
            relays: Vec::new(),
            rules: None,
        };
        let veth = format!("v{}", netns::base36(n));
        self.node.ip(&[
            "link",
            "add",
            &veth,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            netns.name(),
        ]);
        self.node.ip(&["link", "set", &veth, "master", "br0", "up"]);
        netns.ip(&["addr", "add", &format!("{ip}/16"), "dev", "eth0"]);
        netns.ip(&["link", "set", "eth0", "up"]);
        netns.ip(&["link", "set", "lo", "up"]);
        netns.ip(&["route", "add", "default", "via", &gateway().to_string()]);
        self.shared.pods.lock().unwrap().insert(
            netns.name().to_string(),
            (spec.namespace.to_string(), spec.name.to_string(), ip),
        );
        self.shared.write_hosts_files();
        if spec.sidecar {
            let rules = istio_iptables_rules();
            netns.iptables_restore(&rules);
            pod.rules = Some(rules);
            pod.start_sidecar(self.xds, &spec);
        }
        pod
    }

    /// Records Service `name` in `namespace` at `cluster_ip` for name resolution (the
    /// Service itself is the test's config); returns its host,
    /// `NAME.NAMESPACE.svc.cluster.local`. Pods resolve it by that host, `NAME.NAMESPACE`,
    /// `NAME.NAMESPACE.svc`, and, in its namespace, `NAME`.
    pub fn service(&self, name: &str, namespace: &str, cluster_ip: Ipv4Addr) -> String {
        let host = format!("{name}.{namespace}.svc.cluster.local");
        {
            let mut services = self.shared.services.lock().unwrap();
            for alias in [
                host.clone(),
                format!("{name}.{namespace}"),
                format!("{name}.{namespace}.svc"),
            ] {
                services.insert(alias, cluster_ip);
            }
        }
        self.shared.write_hosts_files();
        host
    }

    pub fn xds_addr(&self) -> SocketAddr {
        self.xds
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        let left: Vec<String> = self.shared.pods.lock().unwrap().keys().cloned().collect();
        for name in left {
            netns::delete(&name);
        }
        netns::delete(self.node.name());
    }
}

/// The pods' default gateway: the bridge's address.
fn gateway() -> Ipv4Addr {
    Ipv4Addr::new(POD_NET[0], POD_NET[1], 0, 1)
}

impl Shared {
    /// The IP of `host` as a pod in `namespace` resolves it: an IP is itself; a service by any
    /// of its names; a short name in the pod's namespace.
    fn resolve(&self, namespace: &str, host: &str) -> Option<Ipv4Addr> {
        if let Ok(ip) = host.parse() {
            return Some(ip);
        }
        let services = self.services.lock().unwrap();
        services
            .get(host)
            .or_else(|| services.get(&format!("{host}.{namespace}")))
            .copied()
    }

    /// Writes `/etc/netns/NS/hosts` (and `resolv.conf`) of every live pod.
    fn write_hosts_files(&self) {
        let pods = self.pods.lock().unwrap().clone();
        let services = self.services.lock().unwrap().clone();
        for (netns_name, (namespace, pod_name, ip)) in pods {
            let mut text = format!("127.0.0.1 localhost\n{ip} {pod_name}\n");
            for (host, vip) in &services {
                text.push_str(&format!("{vip} {host}\n"));
                if let Some(short) = host.strip_suffix(&format!(".{namespace}"))
                    && !short.contains('.')
                {
                    text.push_str(&format!("{vip} {short}\n"));
                }
            }
            let dir = netns::etc_dir(&netns_name);
            fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
            // No DNS server in a pod: a lookup missing from `hosts` fails at once (loopback
            // refuses it) instead of waiting on the machine's nameserver, unreachable here.
            let resolv = "# a mesh pod: names come from /etc/hosts\nnameserver 127.0.0.1\n\
                          options timeout:1 attempts:1\n";
            for (file, text) in [("hosts", text.as_str()), ("resolv.conf", resolv)] {
                let path = dir.join(file);
                fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
            }
        }
    }
}

/// A pod of a [`Mesh`]: its namespace, and its sidecar if it has one.
pub struct Pod {
    name: String,
    namespace: String,
    ip: Ipv4Addr,
    netns: Arc<Netns>,
    shared: Arc<Shared>,
    envoy: Option<Envoy>,
    /// The XDS proxy and the admin relay.
    relays: Vec<Relay>,
    rules: Option<String>,
}

impl Pod {
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

    /// The pod's nat table with its packet counters (`iptables-save -c -t nat`).
    pub fn nat_table(&self) -> String {
        let out = self
            .command("iptables-save")
            .args(["-c", "-t", "nat"])
            .output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
            Err(e) => format!("(iptables-save failed: {e})"),
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
        self.nat_table()
            .lines()
            .find(|l| l.contains(rule))
            .and_then(|l| l.strip_prefix('['))
            .and_then(|l| l.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// The sidecar's state and the pod's nat counters, for a failure message.
    pub fn describe(&self) -> String {
        let envoy = self.envoy.as_ref().map(describe_envoy).unwrap_or_default();
        format!(
            "pod {} ({}):\n{envoy}\n{}",
            self.name,
            self.ip,
            self.nat_table()
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
        self.shared
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
            Ok(stream) => http_request_on(stream, &authority, "GET", path, &all, timeout),
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

    /// Starts the XDS proxy, the admin relay and Envoy as pilot-agent would.
    fn start_sidecar(&mut self, axon_xds: SocketAddr, spec: &PodSpec) {
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
            move || {
                let _ = TcpStream::connect_timeout(&admin_relay, CONNECT_TIMEOUT);
            },
        ));
        let mut options = EnvoyOptions::sidecar(&self.node_id(), spec.labels, spec.namespace);
        let ip = self.ip.to_string();
        for (key, value) in [
            ("INTERCEPTION_MODE", "REDIRECT"),
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
        let mut wrapper = self.netns.exec_prefix();
        wrapper.extend(
            [
                "setpriv",
                &format!("--reuid={PROXY_UID}"),
                &format!("--regid={PROXY_UID}"),
                "--clear-groups",
                "--",
            ]
            .map(str::to_string),
        );
        options.pod = Some(InPod {
            wrapper,
            uid: PROXY_UID,
            gid: PROXY_UID,
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
                "===== pod {} nat table =====\n{}",
                self.name,
                self.nat_table()
            );
        }
        drop(self.envoy.take());
        self.relays.clear();
        self.shared.pods.lock().unwrap().remove(self.netns.name());
        netns::delete(self.netns.name());
    }
}
