//! A sidecar's inbound clusters with the connection pool istiod gives them: the circuit
//! breakers, connect timeout and upstream HTTP options of the pool its own service's
//! DestinationRule (or its Sidecar) sets, and nothing of the rule's other parts.

use super::*;

const OWN: &str = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: shop}
spec:
  hosts: [app.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  endpoints: [{address: 10.0.0.5}]
";

/// The sidecar at 10.0.0.5's cluster `inbound|8080||` with `more` configs.
fn inbound(more: &str) -> Cluster {
    let ctx = context(&format!("{OWN}---\n{more}"));
    let sidecar = proxy("sidecar", "10.0.0.5", "shop", &[("app", "app")]);
    let scope = SidecarScope::compute(&ctx, &sidecar);
    generate(&ctx, &sidecar, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .find(|c| c.name == "inbound|8080||")
        .expect("the inbound cluster")
}

#[test]
fn the_own_services_rule_sets_the_inbound_pool() {
    let c = inbound(
        "apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: app, namespace: shop}
spec:
  host: app.shop.svc.cluster.local
  trafficPolicy:
    loadBalancer: {simple: RANDOM}
    outlierDetection: {consecutive5xxErrors: 1}
    tls: {mode: SIMPLE}
    connectionPool:
      tcp: {maxConnections: 2, connectTimeout: 3s}
      http: {http1MaxPendingRequests: 1, http2MaxRequests: 4, maxRetries: 5, idleTimeout: 30s}
",
    );
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_connections.unwrap().value, 2);
    assert_eq!(t.max_pending_requests.unwrap().value, 1);
    assert_eq!(t.max_requests.unwrap().value, 4);
    assert_eq!(t.max_retries.unwrap().value, 5);
    assert!(t.track_remaining);
    assert_eq!(c.connect_timeout.unwrap().seconds, 3);
    let http = http_options(&c);
    assert_eq!(
        http.common_http_protocol_options
            .unwrap()
            .idle_timeout
            .unwrap()
            .seconds,
        30
    );
    // Envoy requires an upstream protocol: HTTP/1.1, no upgrade inbound.
    assert!(matches!(
        http.upstream_protocol_options,
        Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::HttpProtocolOptions(_))
            }
        ))
    ));
    // Only the pool applies inbound.
    assert!(c.outlier_detection.is_none() && c.transport_socket.is_none());
    // The mesh's default inbound policy (PASSTHROUGH): the original destination, from
    // 127.0.0.6 so that iptables lets it reach the application.
    assert_eq!(c.lb_policy, LbPolicy::ClusterProvided as i32);
    let bind = c.upstream_bind_config.unwrap().source_address.unwrap();
    assert_eq!(bind.address, "127.0.0.6");
}

#[test]
fn without_a_pool_the_largest_circuit_breakers_and_no_http_options() {
    let c = inbound("");
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_pending_requests.unwrap().value, u32::MAX);
    assert!(c.typed_extension_protocol_options.is_empty());
    assert_eq!(c.connect_timeout.unwrap().seconds, 10);
}

#[test]
fn the_sidecars_inbound_pool_wins_over_the_rule() {
    let c = inbound(
        "apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: app, namespace: shop}
spec:
  host: app.shop.svc.cluster.local
  trafficPolicy: {connectionPool: {http: {http1MaxPendingRequests: 1}}}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  inboundConnectionPool: {http: {http1MaxPendingRequests: 9}}
",
    );
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_pending_requests.unwrap().value, 9);
}

#[test]
fn inbound_traffic_policy_localhost_sends_to_loopback() {
    use axon_model::push_request::{PushRequest, TriggerReason};
    let mesh = axon_config::mesh::parse("inboundTrafficPolicy: {mode: LOCALHOST}\n")
        .unwrap()
        .mesh;
    let req = PushRequest::full_push(TriggerReason::Config, std::time::Instant::now());
    let ctx = axon_model::push_context::PushContext::build(
        None,
        &axon_model::fixtures::configs(OWN),
        &req,
        &std::sync::Arc::new(mesh),
    );
    let sidecar = proxy("sidecar", "10.0.0.5", "shop", &[("app", "app")]);
    let scope = SidecarScope::compute(&ctx, &sidecar);
    let c = generate(&ctx, &sidecar, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .find(|c| c.name == "inbound|8080||")
        .expect("the inbound cluster");
    // Static to 127.0.0.1:8080, with no 127.0.0.6 source (loopback is not captured).
    assert!(c.upstream_bind_config.is_none());
    let endpoint = format!("{:?}", c.load_assignment);
    assert!(
        endpoint.contains("127.0.0.1") && endpoint.contains("8080"),
        "{endpoint}"
    );
}

#[test]
fn inbound_and_passthrough_clusters_speak_the_applications_protocol() {
    let ctx = context(
        "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: shop}
spec:
  hosts: [app.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9090, name: grpc-api, protocol: GRPC}, {number: 8080, name: web}]
  endpoints: [{address: 10.0.0.5}]
",
    );
    let sidecar = proxy("sidecar", "10.0.0.5", "shop", &[("app", "app")]);
    let scope = SidecarScope::compute(&ctx, &sidecar);
    let clusters: std::collections::BTreeMap<String, Cluster> = generate(&ctx, &sidecar, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .map(|c| (c.name.clone(), c))
        .collect();
    assert!(matches!(
        http_options(&clusters["inbound|9090||"]).upstream_protocol_options,
        Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(_))
            }
        ))
    ));
    assert!(matches!(
        http_options(&clusters["inbound|8080||"]).upstream_protocol_options,
        Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(_))
    ));
    for name in ["PassthroughCluster", "InboundPassthroughCluster"] {
        let http = http_options(&clusters[name]);
        assert!(
            matches!(
                http.upstream_protocol_options,
                Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(_))
            ),
            "{name}"
        );
        let idle = http
            .common_http_protocol_options
            .unwrap()
            .idle_timeout
            .unwrap();
        assert_eq!(idle.seconds, 300, "{name}");
    }
}
