//! Through real sidecar Envoys under iptables capture, in pods made of network namespaces
//! (`support::mesh`): each test starts axon on a config directory of its own, a mesh, and
//! pods playing clients and servers. Needs root, `ip` and `iptables` (the tests fail, saying
//! so, without them).
//!
//! | file | what |
//! |---|---|
//! | `authz.rs` | AuthorizationPolicy: principals, namespaces, operations, conditions, ALLOW-nothing, mesh-wide DENY, TCP, dry-run, AUDIT, CUSTOM |
//! | `capture.rs` | capture itself: outbound through `virtualOutbound` to the PassthroughCluster, inbound through `virtualInbound` |
//! | `service_entry.rs` | a ServiceEntry with WorkloadEntries at pod IPs, and a VirtualService's header match |
//! | `identity.rs` | the test agent: certificates from the (stub) CA, served to Envoy over SDS, renewed; a mesh sidecar with its agent |
//! | `mtls.rs` | PeerAuthentication and auto mTLS between sidecars: XFCC, STRICT, port-level and workload policies, a rule's DISABLE, renewal under load |
//! | `kubernetes.rs` | Services, EndpointSlices and Pods in the config directory: ClusterIPs on one port, a port without protocol sniffed |
//! | `registry_only.rs` | `outboundTrafficPolicy: REGISTRY_ONLY` refuses what no service names |
//! | `tproxy.rs` | TPROXY capture: the app sees the client's address; transparent listeners and `original_src`; REGISTRY_ONLY from a TPROXY client |
//! | `telemetry.rs` | access logs under capture, scoped by Telemetries per workload and side |
//! | `vip.rs` | listeners per service address: VIPs, sniffed ports, ServiceEntry IPs and CIDRs, headless services, a VirtualService edit |

mod authz;
mod capture;
mod gateway_api;
mod identity;
mod kubernetes;
mod mtls;
mod registry_only;
mod service_entry;
mod telemetry;
mod tproxy;
mod vip;

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::support::mesh::Pod;
use crate::support::wait_until;

/// How long the first configuration may take to carry traffic.
const CONVERGE: Duration = Duration::from_secs(30);

/// The port every pod's HTTP application listens on.
const APP_PORT: u16 = 8080;

/// Which application answered an echo body (`upstream`), and the peer it saw (`peer`).
fn answered_by(body: &str) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    Some((
        v["upstream"].as_str()?.to_string(),
        v["peer"].as_str().unwrap_or_default().to_string(),
    ))
}

/// Waits until `GET http://HOST:PORT/` from `client` is answered 200 by application `app`;
/// returns the peer that application saw. Panics, describing the pods, otherwise.
fn wait_answer(
    client: &Pod,
    host: &str,
    port: u16,
    headers: &[(&str, &str)],
    app: &str,
    server: &Pod,
) -> String {
    let mut last = (0, String::new());
    let answered = wait_until(CONVERGE, || {
        last = client.http_get(host, port, "/", headers);
        last.0 == 200 && answered_by(&last.1).is_some_and(|(name, _)| name == app)
    });
    assert!(
        answered,
        "{host}:{port} never answered by {app}; last: {last:?}\n{}\n{}",
        client.describe(),
        server.describe()
    );
    answered_by(&last.1)
        .map(|(_, peer)| peer)
        .unwrap_or_default()
}

/// Which application answers `GET http://HOST:PORT/` from `client` with `headers`: the
/// request is sent again while it gets no 200 (a connection refused or timed out on a busy
/// machine), never when a 200 came from another application, so a misroute fails the test.
fn answer(client: &Pod, host: &str, port: u16, headers: &[(&str, &str)]) -> String {
    let mut last = (0, String::new());
    let answered = wait_until(CONVERGE, || {
        last = client.http_get(host, port, "/", headers);
        last.0 == 200
    });
    assert!(
        answered,
        "{host}:{port} never answered 200; last: {last:?}\n{}",
        client.describe()
    );
    answered_by(&last.1)
        .map(|(name, _)| name)
        .unwrap_or_else(|| panic!("not an echo answer: {last:?}"))
}

/// ServiceEntry `name` in `ns` (host `NAME.NS.svc.cluster.local`, address `vip`, port 80
/// `http` to target 8080) selecting `app: NAME`, and a WorkloadEntry per `(pod IP, version)`.
fn service_yaml(name: &str, ns: &str, vip: Ipv4Addr, endpoints: &[(Ipv4Addr, &str)]) -> String {
    let mut yaml = format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: {name}, namespace: {ns}}}
spec:
  hosts: [{name}.{ns}.svc.cluster.local]
  addresses: [{vip}]
  ports:
  - {{number: 80, name: http, protocol: HTTP, targetPort: {APP_PORT}}}
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector:
    labels: {{app: {name}}}
"#
    );
    for (ip, version) in endpoints {
        yaml.push_str(&format!(
            r#"---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: {name}-{version}, namespace: {ns}}}
spec:
  address: {ip}
  ports: {{http: {APP_PORT}}}
  labels: {{app: {name}, version: {version}}}
"#
        ));
    }
    yaml
}

/// Counter `name` of `pod`'s sidecar (0 when absent).
fn stat(pod: &Pod, name: &str) -> u64 {
    pod.envoy().stats().get(name).copied().unwrap_or(0)
}
