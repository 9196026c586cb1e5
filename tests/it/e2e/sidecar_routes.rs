//! End-to-end: routing through a real sidecar Envoy under iptables capture (pod `productpage`
//! in namespace `a` of the namespace mesh, the world of `support/sidecar.rs`), whose Sidecar
//! declares two egress ports: grpc-echo's (GRPC) and reviews' (HTTP).
//!
//! - gRPC: the application's call to `grpc-echo.a.svc.cluster.local:7070` (a GRPC service
//!   port at its own address, a Python `grpcio` server, `tests/grpc/echo.py`, in a pod of
//!   its own) is captured to the GRPC egress listener, sent upstream over HTTP/2 and
//!   answered; the HTTP service's cluster stays HTTP/1.1.
//! - Two mesh VirtualServices for `reviews`: the sidecar takes the older by
//!   `metadata.creationTimestamp` (`zz-older`, to v2), not the first by name (`aa-newer`, to
//!   v1), whose own header rule is then not served either; swapping the timestamps swaps
//!   the winner; the conflict is in `/debug/push_status` and `pilot_vservice_dup_domain`.
//!
//! No request is sent before Envoy's admin API shows the winner's route in force (and the
//! other subset in none of reviews' routes), so every answer counts.

use std::net::Ipv4Addr;

use crate::support;
use crate::support::grpc_echo;
use crate::support::mesh::PodSpec;
use crate::support::scenario;
use crate::support::sidecar;

use grpc_echo::{EchoServer, client_call_in};
use scenario::*;
use sidecar::{CAPTURED_LISTENER, CONVERGE, REVIEWS, SERVICE_PORT, Scenario, service_entry_at};
use support::*;

const GRPC_HOST: &str = "grpc-echo.a.svc.cluster.local";
const GRPC_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 20);
const GRPC_PORT: u16 = 7070;

/// Sidecar `default` in `a`: egress listeners on grpc-echo's port (GRPC) and on reviews'
/// (HTTP), importing namespace `a` (istiod serves on a declared listener only the services
/// with its port). No `bind`, no `captureMode`: iptables brings the traffic.
fn sidecar_yaml() -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  egress:
  - port: {{number: {GRPC_PORT}, protocol: GRPC, name: grpc-egress}}
    hosts: ["./*"]
  - port: {{number: {SERVICE_PORT}, protocol: HTTP, name: http-egress}}
    hosts: ["./*"]
"#
    )
}

/// A mesh VirtualService for reviews created at `created`: requests with `x-new: 1` to v1
/// when `header_rule`, and everything else to `subset`.
fn reviews_vs(name: &str, created: &str, subset: &str, header_rule: bool) -> String {
    let rule = if header_rule {
        "  - match: [{headers: {x-new: {exact: \"1\"}}}]\n    route: [{destination: {host: reviews, subset: v1}}]\n"
    } else {
        ""
    };
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: a\n  creationTimestamp: \"{created}\"\nspec:\n  hosts: [reviews]\n  http:\n{rule}  - route: [{{destination: {{host: reviews, subset: {subset}}}}}]\n"
    )
}

/// reviews' cluster of `subset`.
fn reviews_cluster(subset: &str) -> String {
    format!("outbound|{SERVICE_PORT}|{subset}|{REVIEWS}")
}

/// Waits until the `a` proxy routes reviews to subset `only`: its cluster in force, the
/// `other` subset's in none of reviews' routes.
fn wait_reviews_only(s: &Scenario, only: &str, other: &str) {
    let other = reviews_cluster(other);
    let mut routes = String::new();
    let gone = wait_until(CONVERGE, || {
        let dump = s.envoy().config_dump();
        routes = route_config(&dump, &SERVICE_PORT.to_string())
            .and_then(|r| r["virtual_hosts"].as_array().cloned())
            .into_iter()
            .flatten()
            .find(|vh| {
                vh["domains"]
                    .as_array()
                    .is_some_and(|d| d.contains(&REVIEWS.into()))
            })
            .map(|vh| vh["routes"].to_string())
            .unwrap_or_default();
        !routes.is_empty() && !routes.contains(&format!("\"{other}\""))
    });
    assert!(
        gone,
        "reviews still routed to {other}: {routes}\n{}",
        s.client.describe()
    );
    s.wait_reviews_route(&[&reviews_cluster(only)]);
}

#[test]
fn grpc_and_several_virtual_services_for_one_host_through_a_sidecar() {
    let s = Scenario::start(false);
    assert_eq!(s.mesh.service("grpc-echo", "a", GRPC_VIP), GRPC_HOST);
    let grpc_pod = s
        .mesh
        .pod(PodSpec::plain("grpc-echo", "a", &[("app", "grpc-echo")]));
    let _grpc = EchoServer::start_in(&grpc_pod, GRPC_PORT, "grpc:");
    let grpc_port = Port {
        number: GRPC_PORT,
        name: "grpc",
        protocol: "GRPC",
    };
    s.config.write(
        "grpc-echo.yaml",
        &service_entry_at(
            "grpc-echo",
            "a",
            GRPC_HOST,
            GRPC_VIP,
            grpc_port,
            &[(grpc_pod.ip(), None)],
        ),
    );
    s.config.write("sidecar-a.yaml", &sidecar_yaml());
    // By name, aa-newer would come first; by creation time, zz-older does.
    s.config.write(
        "reviews-vs.yaml",
        &documents(&[
            reviews_vs("aa-newer", "2024-06-01T00:00:00Z", "v1", true),
            reviews_vs("zz-older", "2024-01-01T00:00:00Z", "v2", false),
        ]),
    );

    // The older VirtualService routes reviews; the newer one's rules are not served.
    wait_reviews_only(&s, "v2", "v1");
    s.assert_all(REVIEWS, &[], "reviews-v2", 5);
    s.assert_all(REVIEWS, &[("x-new", "1")], "reviews-v2", 5);
    let status = s.axon.push_status();
    let problems = status["virtual_service_problems"].to_string();
    assert!(
        problems.contains(&format!(
            "host {REVIEWS} is routed by VirtualService/a/zz-older, VirtualService/a/aa-newer for sidecars"
        )),
        "{status}"
    );
    let metrics = s.axon.metrics();
    assert!(
        metrics.lines().any(|l| l == "pilot_vservice_dup_domain 1"),
        "{metrics}"
    );

    // gRPC by the service's name from the application: captured to the GRPC egress
    // listener, HTTP/2 upstream, answered. (The client resends while the call is
    // UNAVAILABLE; there is one server, so no wrong answer to hide.)
    let grpc_cluster = format!("outbound|{GRPC_PORT}||{GRPC_HOST}");
    let grpc_route = RouteInForce {
        listener: &format!("0.0.0.0_{GRPC_PORT}"),
        route_config: &GRPC_PORT.to_string(),
        domain: GRPC_HOST,
        clusters: &[&grpc_cluster],
    };
    wait_for_route(s.envoy(), &grpc_route, CONVERGE);
    let (ok, output) = client_call_in(&s.client, &format!("{GRPC_HOST}:{GRPC_PORT}"), &[]);
    assert!(
        ok && output.contains("reply: grpc:hello"),
        "{output}\n{}",
        s.client.describe()
    );
    assert!(
        stat(
            s.envoy(),
            &format!("cluster.{grpc_cluster}.upstream_rq_total")
        ) >= 1,
        "the call did not go through the sidecar\n{}",
        s.client.describe()
    );
    let dump = s.envoy().config_dump();
    let cluster = |name: &str| {
        dynamic_cluster(&dump, name)
            .map(|c| c.to_string())
            .unwrap_or_default()
    };
    assert!(cluster(&grpc_cluster).contains("http2_protocol_options"));
    let reviews_v2 = cluster(&reviews_cluster("v2"));
    assert!(!reviews_v2.is_empty() && !reviews_v2.contains("http2_protocol_options"));
    assert!(dynamic_listener(&dump, CAPTURED_LISTENER).is_some());

    // Swapped creation times: now aa-newer (no longer newer) wins, header rule and all.
    s.config.write(
        "reviews-vs.yaml",
        &documents(&[
            reviews_vs("aa-newer", "2023-01-01T00:00:00Z", "v1", true),
            reviews_vs("zz-older", "2024-01-01T00:00:00Z", "v2", false),
        ]),
    );
    wait_reviews_only(&s, "v1", "v2");
    s.assert_all(REVIEWS, &[], "reviews-v1", 5);
    s.assert_all(REVIEWS, &[("x-new", "1")], "reviews-v1", 5);
    assert_no_rejected_updates(s.envoy());
}
