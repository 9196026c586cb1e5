//! Locality load balancing through `generate_shared`: load assignments are shared by every
//! proxy until a DestinationRule orders endpoints by locality; then each locality gets its
//! own priorities, and proxies of one locality still share them.

use super::*;
use axon_model::locality::Locality;

const ZONED: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zoned, namespace: shop}
spec:
  hosts: [zoned.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints:
  - {address: 10.0.0.1, locality: r1/z1}
  - {address: 10.0.0.2, locality: r2/z1}
"#;

const OUTLIER: &str = r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: zoned, namespace: shop}
spec:
  host: zoned.shop.svc.cluster.local
  trafficPolicy: {outlierDetection: {consecutive5xxErrors: 1}}
"#;

const CLUSTER: &str = "outbound|80||zoned.shop.svc.cluster.local";

fn proxy_in(locality: &str) -> Proxy {
    let mut p = gateway_proxy(&[("istio", "ingressgateway")]);
    p.locality = Locality::parse(locality);
    p
}

fn shared_eds(ctx: &PushContext, proxy: &Proxy) -> Arc<ResourceSet> {
    let scope = axon_model::sidecar_scope::SidecarScope::compute(ctx, proxy);
    generate_shared(
        ResourceType::Endpoint,
        ctx,
        proxy,
        &scope,
        &names(&[CLUSTER]),
    )
}

/// `(region, priority)` of each locality of the assignment.
fn priorities(set: &ResourceSet) -> Vec<(String, u32)> {
    let cla = ClusterLoadAssignment::decode(set[0].value.as_ref()).unwrap();
    cla.endpoints
        .iter()
        .map(|l| (l.locality.clone().unwrap_or_default().region, l.priority))
        .collect()
}

#[test]
fn without_a_locality_rule_every_proxy_shares_one_assignment() {
    let ctx = context(&format!("{MESH}---{ZONED}"));
    let (a, b) = (proxy_in("r1/z1"), proxy_in("r2/z1"));
    let (ea, eb) = (shared_eds(&ctx, &a), shared_eds(&ctx, &b));
    assert!(Arc::ptr_eq(&ea, &eb));
    assert_eq!(priorities(&ea), [("r1".into(), 0), ("r2".into(), 0)]);
}

#[test]
fn with_outlier_detection_each_locality_gets_its_own_priorities() {
    let ctx = context(&format!("{MESH}---{ZONED}---{OUTLIER}"));
    let (a, a2, b) = (proxy_in("r1/z1"), proxy_in("r1/z1"), proxy_in("r2/z1"));
    let (ea, ea2, eb) = (
        shared_eds(&ctx, &a),
        shared_eds(&ctx, &a2),
        shared_eds(&ctx, &b),
    );
    assert!(Arc::ptr_eq(&ea, &ea2), "one locality, one scope: shared");
    assert_eq!(priorities(&ea), [("r1".into(), 0), ("r2".into(), 1)]);
    assert_eq!(priorities(&eb), [("r1".into(), 1), ("r2".into(), 0)]);
    // Another cluster of the same proxies is still shared across localities.
    let other = names(&["outbound|9080||ratings.shop.svc.cluster.local"]);
    let scope = axon_model::sidecar_scope::SidecarScope::compute(&ctx, &a);
    let oa = generate_shared(ResourceType::Endpoint, &ctx, &a, &scope, &other);
    let scope = axon_model::sidecar_scope::SidecarScope::compute(&ctx, &b);
    let ob = generate_shared(ResourceType::Endpoint, &ctx, &b, &scope, &other);
    assert_eq!(oa[0].value, ob[0].value);
}

#[test]
fn a_proxy_takes_its_locality_from_the_node() {
    let proxy = Proxy::from_node(NodeInfo {
        id: "router~10.1.1.1~gw-1.istio-system~istio-system.svc.cluster.local".into(),
        locality: Some(Locality::parse("r1/z1/s1")),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(proxy.locality.label(), "r1/z1/s1");
}
