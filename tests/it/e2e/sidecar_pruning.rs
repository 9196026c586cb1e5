//! End-to-end: two real Envoys acting as Istio sidecars under iptables capture, in pods of
//! the namespace mesh, on one axon (the world of `support/sidecar.rs`): `a` (a Sidecar
//! importing `./*`) and `b` (no Sidecar: `*/*`). Checked: a change in namespace `b` reaches
//! the `b` proxy and sends the `a` proxy nothing; a change in `a` reaches both, once;
//! `/debug/distribution` counts only the affected proxies. axon's side is read from its
//! debug endpoints, not its log.

use crate::support;
use crate::support::ads_client;
use crate::support::scenario;
use crate::support::sidecar;

use std::time::{Duration, Instant};

use scenario::*;
use sidecar::*;
use support::*;

/// Two sidecars on one axon: `a` (Sidecar importing `./*`) and `b` (no Sidecar: `*/*`). A
/// change in namespace `b` reaches the `b` proxy and sends the `a` proxy nothing; a change in
/// `a` reaches both.
#[test]
fn sidecar_pruning_between_two_proxies() {
    let s = Scenario::start(true);
    let b = s.envoy_b();
    let (node_a, node_b) = (s.node_a(), s.node_b());
    let (node_a, node_b) = (node_a.as_str(), node_b.as_str());
    let b_route = SERVICE_PORT.to_string();

    let cluster_v1 = format!("outbound|{SERVICE_PORT}|v1|{REVIEWS}");
    s.wait_reviews_route(&[&cluster_v1]);
    s.wait_for_body(REVIEWS, &[], "reviews-v1");
    // The `b` proxy (catch-all egress) gets the captured outbound listener 0.0.0.0_9080
    // with route config `9080` holding both services.
    let mut last = String::new();
    let ok = wait_until(CONVERGE, || {
        let dump = b.config_dump();
        last = route_config(&dump, &b_route)
            .map(|r| r.to_string())
            .unwrap_or_default();
        last.contains(REVIEWS) && last.contains(RATINGS) && last.contains("/rev-1")
    });
    assert!(
        ok,
        "the b proxy never got route config {b_route} with reviews, ratings and /rev-1: \
         {last}\n{}",
        describe_envoy(b)
    );
    assert!(
        s.axon
            .wait_synced(&[node_a, node_b], Duration::from_secs(10)),
        "axon did not report both proxies synced: {:?}",
        s.axon.connections()
    );
    let b_clusters = dynamic_cluster_names(&b.config_dump());
    assert!(
        b_clusters.iter().any(|c| c.contains(RATINGS)),
        "the b proxy imports */* and must have a ratings cluster: {b_clusters:?}"
    );
    let mut a_listeners = dynamic_listener_names(&s.envoy().config_dump());
    a_listeners.sort();
    assert_eq!(
        a_listeners,
        [CAPTURED_LISTENER, "virtualInbound", "virtualOutbound"],
        "the a proxy's Sidecar declares one egress port: its listener and capture's own"
    );

    // A change in `b`: the b proxy's route shows it; the a proxy is sent nothing.
    let a_before = XdsAttempts::read(s.envoy());
    let b_before = XdsAttempts::read(b);
    let built = s.axon.built_version();
    let (sent_a, sent_b) = (s.axon.sent_nonces(node_a), s.axon.sent_nonces(node_b));
    s.config.write("ratings-vs.yaml", &ratings_vs_yaml(2));
    let ok = wait_until(Duration::from_secs(10), || {
        let dump = b.config_dump();
        last = route_config(&dump, &b_route)
            .map(|r| r.to_string())
            .unwrap_or_default();
        last.contains("/rev-2")
    });
    assert!(
        ok,
        "the b proxy never saw the new ratings route: {last}\n{}",
        describe_envoy(b)
    );
    let b_delta = XdsAttempts::read(b).delta(&b_before);
    eprintln!("[e2e] b proxy, ratings change: {b_delta:?}");
    assert_eq!(
        (b_delta.cds, b_delta.lds, s_sum(&b_delta.rds)),
        (0, 0, 1),
        "the b proxy must get one push, of the changed routes only: {b_delta:?}"
    );
    // axon has pushed the b proxy; the a proxy's connection has handled the same push.
    let status = s.wait_push_context_built(built, "VirtualService ratings in b");
    let ratings_version = status["version"].as_u64().expect("a version");
    assert!(
        s.axon
            .wait_push_reached(node_a, ratings_version, Duration::from_secs(10)),
        "the push of version {ratings_version} never reached {node_a}: {:?}",
        s.axon.syncz_of(node_a)
    );
    let a_delta = XdsAttempts::read(s.envoy()).delta(&a_before);
    eprintln!("[e2e] a proxy, ratings change: {a_delta:?}");
    assert!(
        a_delta.is_zero(),
        "a change in namespace b (not imported by a's Sidecar) sent the a proxy responses: \
         {a_delta:?}\naxon's syncz of it: {:?}",
        s.axon.syncz_of(node_a)
    );
    // axon's own account (every response carries a fresh nonce): nothing sent to a, RDS
    // sent to b.
    assert_eq!(
        s.axon.sent_nonces(node_a),
        sent_a,
        "axon sent the a proxy responses"
    );
    let now_b = s.axon.sent_nonces(node_b);
    assert_ne!(
        now_b["rds"], sent_b["rds"],
        "axon sent the b proxy no rds: {now_b:?}"
    );

    // A change in `a`: both proxies get exactly one push.
    let b_before = XdsAttempts::read(b);
    let written = Instant::now();
    s.config.write("reviews-vs.yaml", &reviews_vs_yaml("v2"));
    let took = s.time_to_switch("VirtualService reviews → v2", written, &[], "reviews-v2");
    assert!(took < FAST, "the route change took {took:?}");
    let a_delta = XdsAttempts::read(s.envoy()).delta(&a_before);
    eprintln!("[e2e] a proxy, over both changes: {a_delta:?}");
    assert_eq!(
        (a_delta.cds, a_delta.lds, s_sum(&a_delta.rds)),
        (0, 0, 1),
        "over both changes the a proxy must have had exactly one push, of its routes: {a_delta:?}"
    );
    let ok = wait_until(Duration::from_secs(10), || {
        let b_delta = XdsAttempts::read(b).delta(&b_before);
        s_sum(&b_delta.rds) >= 1
    });
    let b_delta = XdsAttempts::read(b).delta(&b_before);
    assert!(
        ok,
        "the b proxy (imports */*) got no push for the reviews change: {b_delta:?}"
    );
    assert_eq!(
        (b_delta.cds, b_delta.lds, s_sum(&b_delta.rds)),
        (0, 0, 1),
        "the b proxy must get exactly one push, of its routes, for the reviews change: {b_delta:?}"
    );

    // Config distribution status, as an operator asks it: the ratings change (namespace b)
    // counted only the b proxy; the reviews change (namespace a) both, and both ACKed it.
    let distribution = |key: &str| {
        let mut last = serde_json::Value::Null;
        let complete = wait_until(Duration::from_secs(10), || {
            last = ads_client::debug_json(&s.axon, &format!("/debug/distribution?key={key}"));
            last[0]["complete"] == true
        });
        assert!(complete, "{key} reached every affected proxy: {last}");
        last[0].clone()
    };
    let ratings = distribution("VirtualService/b/ratings");
    assert_eq!(
        ratings["affected"], 1,
        "the a proxy is not counted: {ratings}"
    );
    let reviews = distribution("VirtualService/a/reviews");
    assert_eq!(reviews["affected"], 2, "{reviews}");
    assert_eq!(reviews["acked"], 2, "{reviews}");

    assert_no_rejections(s.envoy());
    assert_no_rejections(b);
}
