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
//! sidecar ([`PodSpec::sidecar`]) the capture rules (`capture.rs`; REDIRECT, or TPROXY with
//! [`PodSpec::tproxy`], which also adds its routes and runs Envoy as uid 0, gid 1337 with
//! only `CAP_NET_ADMIN`, for transparent sockets, as istio's injector does), an XDS proxy in
//! the pod on 127.0.0.1:15010 relayed to axon, and Envoy as uid/gid 1337 with the bootstrap
//! pilot-agent writes (admin on the pod's 127.0.0.1:15000, relayed to the test's loopback so
//! that the [`Envoy`] helpers work). A [`Pod`] plays its application: a server
//! ([`Pod::serve_http`], [`Pod::serve_tls`], [`Pod::serve_tcp`]) or a client whose
//! connections are made in the pod as root, so they are captured ([`Pod::connect`],
//! [`Pod::http_get`], [`Pod::tcp_banner`]). Names resolve through the mesh's host table
//! ([`Mesh::service`]), also written to `/etc/netns/NS/hosts` for programs started with
//! `ip netns exec` ([`Pod::command`], e.g. `curl`, a gRPC client); a pod has no DNS server.
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
//! | `capture.rs` | the `istio-iptables` rules of a pod (REDIRECT, or TPROXY and its routes) |
//! | `pod.rs` | [`Pod`]: a pod's sidecar, applications and clients |
//! | `hosts.rs` | the pods and services a mesh knows: name resolution, `/etc/netns` files |
//! | `relay.rs` | the TCP relay: the XDS proxy and the admin relay |
//! | `apps.rs` | the pods' TCP application |
//! | `identity.rs` | [`MeshCa`]: with [`Mesh::with_ca`], an agent (SDS, certificates) beside every sidecar |

mod apps;
mod capture;
mod hosts;
mod identity;
mod netns;
mod pod;
mod relay;

#[allow(unused_imports)]
pub use apps::TcpApp;
pub use capture::{
    INBOUND_CAPTURED, InterceptionMode, OUTBOUND_CAPTURED, PROXY_TO_SELF_CAPTURED, TPROXY_CAPTURED,
    TPROXY_MARKED_RETURN, TPROXY_ROUTES, istio_iptables_rules, istio_iptables_rules_for,
};
#[allow(unused_imports)]
pub use identity::{MeshCa, SECRETS_LISTENER, SECRETS_LISTENER_PORT, TRUST_DOMAIN};
pub use pod::Pod;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::support::agent::StubCa;
use hosts::Registry;
use netns::Netns;

/// The pods' network: the bridge is `.0.1`, pod N is `.0.N+1`.
const POD_NET: [u8; 2] = [10, 10];
/// Where a sidecar's XDS proxy listens in its pod (pilot-agent's is a unix socket).
pub const XDS_PROXY_PORT: u16 = 15010;
/// The sidecar's admin port in its pod.
pub const ADMIN_PORT: u16 = 15000;
/// The Istio release the sidecars say they are (`ISTIO_VERSION`).
pub const ISTIO_VERSION: &str = "1.24.0";

/// A pod to make: its name, namespace, labels and service account, whether it runs a
/// sidecar (capture rules and Envoy) or is a plain namespace, and how its sidecar captures.
#[derive(Debug, Clone)]
pub struct PodSpec<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub labels: &'a [(&'a str, &'a str)],
    pub service_account: &'a str,
    pub sidecar: bool,
    pub interception: InterceptionMode,
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
            interception: InterceptionMode::Redirect,
        }
    }

    /// The same pod captured with TPROXY (`sidecar.istio.io/interceptionMode: TPROXY`).
    pub fn tproxy(self) -> Self {
        PodSpec {
            interception: InterceptionMode::Tproxy,
            ..self
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

/// A mesh: the node namespace and its bridge, and the registry of its pods and services.
pub struct Mesh {
    /// `axm-PID-M-`: every namespace of this mesh starts with it.
    prefix: String,
    registry: Arc<Registry>,
    xds: SocketAddr,
    /// Every sidecar runs an agent that gets its certificates from this CA.
    ca: Option<MeshCa>,
    /// The stub CA of a mesh made by [`Mesh::new`], kept for the mesh's life.
    _stub: Option<StubCa>,
    node: Netns,
    next_pod: AtomicU32,
}

impl Mesh {
    /// A mesh whose sidecars talk to axon's xDS server at `axon_xds` (on the test's
    /// loopback), each beside an agent whose certificates come from a stub CA of the mesh's
    /// own (for tests of something else than axon's CA: [`Mesh::with_ca`] names the CA).
    /// Panics, saying what is missing, if this process cannot build one.
    pub fn new(axon_xds: SocketAddr) -> Mesh {
        let stub = StubCa::start(identity::TRUST_DOMAIN);
        let mut mesh = Mesh::without_ca(axon_xds);
        mesh.ca = Some(stub.mesh_ca());
        mesh._stub = Some(stub);
        mesh
    }

    /// A mesh without a CA: its sidecars run no agent (their Envoys have no `sds-grpc`).
    fn without_ca(axon_xds: SocketAddr) -> Mesh {
        static MESHES: AtomicU32 = AtomicU32::new(0);
        netns::preflight();
        netns::sweep_stale();
        let n = MESHES.fetch_add(1, Ordering::SeqCst);
        let prefix = format!("{}{}-", netns::prefix(), netns::base36(n));
        let node = Netns::add(&format!("{prefix}n"));
        let mesh = Mesh {
            prefix,
            registry: Arc::default(),
            xds: axon_xds,
            ca: None,
            _stub: None,
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

    /// A mesh like [`Mesh::new`]'s whose sidecars each run an agent ([`crate::support::agent`])
    /// for their namespace and service account, getting certificates from `ca` and serving
    /// them to their Envoy over SDS ([`Pod::agent`]).
    pub fn with_ca(axon_xds: SocketAddr, ca: MeshCa) -> Mesh {
        let mut mesh = Mesh::without_ca(axon_xds);
        mesh.ca = Some(ca);
        mesh
    }

    /// Makes a pod (and starts its sidecar, waiting for its admin API).
    pub fn pod(&self, spec: PodSpec) -> Pod {
        let n = self.next_pod.fetch_add(1, Ordering::SeqCst);
        assert!(n < 250, "a mesh has at most 249 pods");
        let ip = Ipv4Addr::new(POD_NET[0], POD_NET[1], 0, n as u8 + 1);
        let netns = Arc::new(Netns::add(&format!("{}{}", self.prefix, netns::base36(n))));
        let mut pod = Pod::new(&spec, ip, netns.clone(), self.registry.clone());
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
        self.registry.pods.lock().unwrap().insert(
            netns.name().to_string(),
            (spec.namespace.to_string(), spec.name.to_string(), ip),
        );
        self.registry.write_etc_files();
        if spec.sidecar {
            pod.start_sidecar(self.xds, &spec, self.ca.as_ref());
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
            let mut services = self.registry.services.lock().unwrap();
            for alias in [
                host.clone(),
                format!("{name}.{namespace}"),
                format!("{name}.{namespace}.svc"),
            ] {
                services.insert(alias, cluster_ip);
            }
        }
        self.registry.write_etc_files();
        host
    }

    pub fn xds_addr(&self) -> SocketAddr {
        self.xds
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        let left: Vec<String> = self.registry.pods.lock().unwrap().keys().cloned().collect();
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
