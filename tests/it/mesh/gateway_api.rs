//! Mesh routes (the Gateway API's GAMMA) through real sidecars under capture: an HTTPRoute
//! whose parent is a Service routes the sidecars' traffic to that Service, as istiod
//! translates it (a VirtualService for the Service's host, bound to `mesh`, with gateway
//! semantics). The suite's `MeshTrafficSplit` (a producer route in the Service's namespace
//! splits by path) and `MeshConsumerRoute` (a route in the client's namespace applies to
//! that namespace's sidecars only).

use std::net::Ipv4Addr;

use super::kubernetes::cluster;
use super::{APP_PORT, CONVERGE, answered_by};
use crate::support::mesh::{Mesh, PodSpec};
use crate::support::scenario::documents;
use crate::support::{Axon, ConfigDir, wait_until};

const MESH_NS: &str = "gateway-conformance-mesh";
const CONSUMER_NS: &str = "gateway-conformance-mesh-consumer";

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
    config.write("routes.yaml", &documents(&[SPLIT, CONSUMER]));
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
