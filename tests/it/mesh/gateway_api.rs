//! Mesh routes (the Gateway API's GAMMA) through real sidecars under capture: an HTTPRoute
//! whose parent is a Service routes the sidecars' traffic to that Service, as istiod
//! translates it (a VirtualService for the Service's host, bound to `mesh`, with gateway
//! semantics). The suite's `MeshTrafficSplit` (a producer route in the Service's namespace
//! splits by path) and `MeshConsumerRoute` (a route in the client's namespace applies to
//! that namespace's sidecars only). The routes are the suite's manifests: read from the
//! real-world corpus when `AXON_REALWORLD_CORPUS` names it (as CI sets it), else the same
//! routes written here.

use std::net::Ipv4Addr;

use super::kubernetes::cluster;
use super::{APP_PORT, CONVERGE, answered_by};
use crate::support::mesh::{Mesh, PodSpec};
use crate::support::scenario::documents;
use crate::support::{Axon, ConfigDir, wait_until};

const MESH_NS: &str = "gateway-conformance-mesh";
const CONSUMER_NS: &str = "gateway-conformance-mesh-consumer";

/// The suite's mesh manifest `file` (`gateway-api/mesh__FILE` of the corpus) when
/// `AXON_REALWORLD_CORPUS` is set, else `written`, the same route written here. A set
/// variable naming no such file fails.
fn manifest(file: &str, written: &str) -> String {
    match std::env::var("AXON_REALWORLD_CORPUS") {
        Ok(dir) => {
            let path = std::path::Path::new(&dir)
                .join("gateway-api")
                .join(format!("mesh__{file}"));
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        }
        Err(_) => written.to_string(),
    }
}

/// The producer's route: `echo` split by path to `echo-v1` and `echo-v2`.
const SPLIT: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mesh-split, namespace: gateway-conformance-mesh}
spec:
  parentRefs: [{group: '', kind: Service, name: echo}]
  rules:
  - matches: [{path: {type: Exact, value: /v1}}]
    backendRefs: [{name: echo-v1, port: 80}]
  - matches: [{path: {type: Exact, value: /v2}}]
    backendRefs: [{name: echo-v2, port: 80}]
";

/// A consumer's route for `echo-v1`, in the consumer's namespace: it sets a response header.
const CONSUMER: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mesh-echo-add-header, namespace: gateway-conformance-mesh-consumer}
spec:
  parentRefs: [{group: '', kind: Service, name: echo-v1, namespace: gateway-conformance-mesh}]
  rules:
  - filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: X-Header-Set, value: set}]}
    backendRefs: [{name: echo-v1, namespace: gateway-conformance-mesh, port: 80}]
";

#[test]
fn mesh_routes_split_by_path_and_consumer_routes_apply_to_their_namespace_only() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let ips = [
        Ipv4Addr::new(10, 96, 7, 1),
        Ipv4Addr::new(10, 96, 7, 2),
        Ipv4Addr::new(10, 96, 7, 3),
    ];
    let echo = mesh.service("echo", MESH_NS, ips[0]);
    let echo_v1 = mesh.service("echo-v1", MESH_NS, ips[1]);
    mesh.service("echo-v2", MESH_NS, ips[2]);
    let client = mesh.pod(PodSpec::sidecar("client", MESH_NS, &[("app", "client")]));
    let consumer = mesh.pod(PodSpec::sidecar(
        "consumer",
        CONSUMER_NS,
        &[("app", "consumer")],
    ));
    let v1 = mesh.pod(PodSpec::sidecar(
        "echo-v1-0",
        MESH_NS,
        &[("app", "echo-v1")],
    ));
    let v2 = mesh.pod(PodSpec::sidecar(
        "echo-v2-0",
        MESH_NS,
        &[("app", "echo-v2")],
    ));
    let _apps = (
        v1.serve_http(APP_PORT, "echo-v1"),
        v2.serve_http(APP_PORT, "echo-v2"),
    );
    // `echo` selects both versions; `echo-v1` and `echo-v2` one each.
    config.write(
        "services.yaml",
        &documents(&[
            cluster(
                "echo",
                MESH_NS,
                ips[0],
                "http",
                80,
                APP_PORT,
                &[(&v1, "v1"), (&v2, "v2")],
            ),
            cluster(
                "echo-v1",
                MESH_NS,
                ips[1],
                "http",
                80,
                APP_PORT,
                &[(&v1, "v1")],
            ),
            cluster(
                "echo-v2",
                MESH_NS,
                ips[2],
                "http",
                80,
                APP_PORT,
                &[(&v2, "v2")],
            ),
        ]),
    );
    config.write(
        "routes.yaml",
        &documents(&[
            manifest("mesh-split.yaml", SPLIT),
            manifest("mesh-consumer-route.yaml", CONSUMER),
        ]),
    );
    let who = |host: &str, path: &str| {
        let (status, body) = client.http_get(host, 80, path, &[]);
        (status, answered_by(&body).map(|(name, _)| name))
    };
    let mut last = (0, None);
    assert!(
        wait_until(CONVERGE, || {
            last = (who(&echo, "/v1"), who(&echo, "/v2")).0;
            last == (200, Some("echo-v1".to_string()))
                && who(&echo, "/v2").1.as_deref() == Some("echo-v2")
        }),
        "the mesh route never split echo by path: {last:?}\n{}",
        client.describe()
    );
    for _ in 0..10 {
        assert_eq!(who(&echo, "/v1").1.as_deref(), Some("echo-v1"));
        assert_eq!(who(&echo, "/v2").1.as_deref(), Some("echo-v2"));
    }
    // The route's matches are all there is for echo: another path is not routed.
    assert_eq!(who(&echo, "/other").0, 404);

    // The consumer route: its namespace's sidecar sets the header, the producer's does not.
    let mut seen = None;
    assert!(
        wait_until(CONVERGE, || {
            let r = consumer.http_request(&echo_v1, 80, "/", &[]);
            seen = r.header("x-header-set").map(String::from);
            r.status == 200 && seen.as_deref() == Some("set")
        }),
        "the consumer's sidecar never applied its route: {seen:?}\n{}",
        consumer.describe()
    );
    let r = client.http_request(&echo_v1, 80, "/", &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-header-set"), None, "{r:?}");
}

/// `MeshGRPCRouteWeight`: a GRPCRoute on Service `echo`'s gRPC port splits the sidecar's
/// calls 70/30 between `echo-v1` and `echo-v2` (never `echo-v3`, weight 0), with real gRPC
/// clients and servers in the pods.
const GRPC_WEIGHT: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: mesh-grpc-weighted-backends, namespace: gateway-conformance-mesh}
spec:
  parentRefs: [{group: '', kind: Service, name: echo, port: 7070}]
  rules:
  - backendRefs:
    - {name: echo-v1, port: 7070, weight: 70}
    - {name: echo-v2, port: 7070, weight: 30}
    - {name: echo-v3, port: 7070, weight: 0}
";

#[test]
fn a_mesh_grpc_route_splits_by_weight() {
    use crate::support::grpc_echo::{EchoServer, client_call_in};
    const GRPC: u16 = 7070;
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let ips = [1, 2, 3, 4].map(|i| Ipv4Addr::new(10, 96, 8, i));
    let echo = mesh.service("echo", MESH_NS, ips[0]);
    for (i, name) in ["echo-v1", "echo-v2", "echo-v3"].iter().enumerate() {
        mesh.service(name, MESH_NS, ips[i + 1]);
    }
    let client = mesh.pod(PodSpec::sidecar("client", MESH_NS, &[("app", "client")]));
    let pods: Vec<_> = ["echo-v1", "echo-v2", "echo-v3"]
        .iter()
        .map(|name| {
            mesh.pod(PodSpec::sidecar(
                &format!("{name}-0"),
                MESH_NS,
                &[("app", name)],
            ))
        })
        .collect();
    let _servers: Vec<EchoServer> = ["echo-v1", "echo-v2", "echo-v3"]
        .iter()
        .zip(&pods)
        .map(|(name, pod)| EchoServer::start_in(pod, GRPC, &format!("{name}:")))
        .collect();
    let all: Vec<(&crate::support::mesh::Pod, &str)> = pods.iter().map(|p| (p, "v1")).collect();
    let mut docs = vec![cluster("echo", MESH_NS, ips[0], "grpc", GRPC, GRPC, &all)];
    for (i, name) in ["echo-v1", "echo-v2", "echo-v3"].iter().enumerate() {
        docs.push(cluster(
            name,
            MESH_NS,
            ips[i + 1],
            "grpc",
            GRPC,
            GRPC,
            &[(&pods[i], "v1")],
        ));
    }
    config.write("services.yaml", &documents(&docs));
    config.write(
        "routes.yaml",
        &manifest("grpcroute-weight.yaml", GRPC_WEIGHT),
    );
    let target = format!("{echo}:{GRPC}");
    // Until the route is there (echo-v3 answers only without it), then 100 calls.
    let mut replies = Vec::new();
    let routed = crate::support::wait_until(CONVERGE, || {
        let (_, out) = client_call_in(&client, &target, &["--repeat", "99"]);
        replies = out
            .lines()
            .filter_map(|l| l.strip_prefix("reply: "))
            .map(|r| r.split(':').next().unwrap_or_default().to_string())
            .collect();
        replies.len() == 100 && !replies.iter().any(|r| r == "echo-v3")
    });
    assert!(
        routed,
        "the route never split echo: {replies:?}\n{}",
        client.describe()
    );
    let v1 = replies.iter().filter(|r| *r == "echo-v1").count();
    let v2 = replies.iter().filter(|r| *r == "echo-v2").count();
    // 70/30 of 100: well within ±20 (over 4 sigma).
    assert_eq!(v1 + v2, 100, "{replies:?}");
    assert!((50..=90).contains(&v1), "v1 {v1}, v2 {v2}");
}
