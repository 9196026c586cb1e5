//! The mesh's `defaultTrafficPolicy` in the clusters, as istiod's `applyDefaultTrafficPolicy`
//! and `buildDefaultPassthroughCluster` put it: outbound clusters without a rule's pool or
//! outlier detection take the mesh's, the PassthroughCluster its pool's circuit breakers, and
//! a rule's own pool wins.

use std::sync::Arc;
use std::time::Instant;

use super::*;
use axon_model::fixtures::configs;
use axon_model::push_request::{PushRequest, TriggerReason};

/// The clusters a sidecar in `shop` gets for `SERVICES`, `rule` and the mesh's default of
/// three connections and outlier detection after two 5xx.
fn clusters_with_default(rule: &str) -> std::collections::BTreeMap<String, Cluster> {
    let file = axon_config::mesh::parse(
        "defaultTrafficPolicy:\n  connectionPool: {tcp: {maxConnections: 3}, http: {idleTimeout: 9s}}\n  outlierDetection: {consecutive5xxErrors: 2}\n",
    )
    .unwrap();
    let yaml = format!(
        "{SERVICES}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr, namespace: shop}}\nspec:\n{rule}"
    );
    let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
    let ctx = PushContext::build(None, &configs(&yaml), &req, &Arc::new(file.mesh));
    let sidecar = proxy("sidecar", "10.1.0.9", "shop", &[("app", "x")]);
    let scope = SidecarScope::compute(&ctx, &sidecar);
    generate(&ctx, &sidecar, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .map(|c| (c.name.clone(), c))
        .collect()
}

fn max_connections(c: &Cluster) -> u32 {
    c.circuit_breakers.as_ref().unwrap().thresholds[0]
        .max_connections
        .unwrap()
        .value
}

#[test]
fn clusters_without_a_rules_pool_take_the_meshs() {
    let cs = clusters_with_default("  host: other.example.com\n");
    let c = &cs[PLAIN];
    assert_eq!(max_connections(c), 3);
    assert_eq!(
        c.outlier_detection
            .as_ref()
            .unwrap()
            .consecutive_5xx
            .unwrap()
            .value,
        2
    );
    let idle = http_options(c)
        .common_http_protocol_options
        .unwrap()
        .idle_timeout
        .unwrap();
    assert_eq!(idle.seconds, 9);
    // The PassthroughCluster: the pool's circuit breakers, not its HTTP options (istiod's:
    // its own, a 5-minute idle timeout).
    let pass = &cs[PASSTHROUGH];
    assert_eq!(max_connections(pass), 3);
    let idle = http_options(pass)
        .common_http_protocol_options
        .unwrap()
        .idle_timeout
        .unwrap();
    assert_eq!(idle.seconds, 300);
    assert!(pass.outlier_detection.is_none());
}

#[test]
fn a_rules_pool_replaces_the_meshs_whole() {
    let cs = clusters_with_default(
        "  host: shop.example.com\n  trafficPolicy: {connectionPool: {http: {http1MaxPendingRequests: 1}}}\n",
    );
    let c = &cs[PLAIN];
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_connections.unwrap().value, u32::MAX);
    assert_eq!(t.max_pending_requests.unwrap().value, 1);
    // The outlier detection the rule does not set is still the mesh's.
    assert!(c.outlier_detection.is_some());
}
