//! Generator tests: a small mesh in YAML, one gateway proxy, the four types out.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{
    RouteConfiguration, route::Action, route_action::ClusterSpecifier,
};
use prost::Message;

use super::*;
use crate::model::fixtures::{configs, context};
use crate::model::proxy::NodeInfo;
use crate::model::push_context::PushContext;
use crate::model::push_request::{PushRequest, TriggerReason};

const MESH: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 8443, name: tcp, protocol: TCP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1beta1
kind: ServiceEntry
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP}]
  endpoints:
  - {address: 10.0.0.1, ports: {http: 9081}, labels: {version: v1}}
  - {address: 10.0.0.2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ratings, namespace: shop}
spec:
  hosts: [ratings.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP, targetPort: 7070}]
  workloadSelector: {labels: {app: ratings}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ratings-1, namespace: shop}
spec: {address: 10.0.1.1, labels: {app: ratings}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: elsewhere, namespace: other}
spec: {address: 10.9.9.9, labels: {app: ratings}}
---
apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: shop}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - match: [{headers: {end-user: {exact: jason}}}, {uri: {regex: "/v2/.*"}}]
    route: [{destination: {host: reviews, subset: v2}}]
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 90}
    - {destination: {host: reviews, subset: v2}, weight: 10}
"#;

fn gateway_proxy(labels: &[(&str, &str)]) -> Proxy {
    Proxy::from_node(NodeInfo {
        id: "router~10.1.1.1~gw-1.istio-system~istio-system.svc.cluster.local".into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    })
    .unwrap()
}

/// Generates one type for `proxy`, through its scope.
fn generate_for(
    type_url: ResourceType,
    ctx: &PushContext,
    proxy: &Proxy,
    names: &BTreeSet<String>,
) -> Vec<Resource> {
    let scope = crate::model::sidecar_scope::SidecarScope::compute(ctx, proxy);
    generate(type_url, ctx, proxy, &scope, names)
}

fn decode<M: Message + Default>(resources: &[Resource]) -> Vec<M> {
    resources
        .iter()
        .map(|r| M::decode(r.value.as_ref()).unwrap())
        .collect()
}

fn names(set: &[&str]) -> BTreeSet<String> {
    set.iter().map(|s| s.to_string()).collect()
}

#[test]
fn gateway_gets_a_listener_per_http_server_port() {
    let ctx = context(MESH);
    let listeners: Vec<Listener> = decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[]),
    ));
    let listener_names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        listener_names,
        ["0.0.0.0_8080"],
        "TCP servers are not served yet"
    );
    let other = generate_for(
        ResourceType::Listener,
        &ctx,
        &gateway_proxy(&[("istio", "egress")]),
        &names(&[]),
    );
    assert!(
        other.is_empty(),
        "a gateway whose labels match no selector gets no listener"
    );
}

#[test]
fn clusters_per_port_and_subset() {
    let ctx = context(MESH);
    let clusters: Vec<Cluster> = decode(&generate_for(
        ResourceType::Cluster,
        &ctx,
        &gateway_proxy(&[]),
        &names(&[]),
    ));
    let got: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        got,
        [
            "BlackHoleCluster",
            "outbound|9080||ratings.shop.svc.cluster.local",
            "outbound|9080||reviews.shop.svc.cluster.local",
            "outbound|9080|v1|reviews.shop.svc.cluster.local",
            "outbound|9080|v2|reviews.shop.svc.cluster.local",
        ]
    );
}

#[test]
fn endpoints_follow_subsets_ports_and_selectors() {
    let ctx = context(MESH);
    let wanted = names(&[
        "outbound|9080|v1|reviews.shop.svc.cluster.local",
        "outbound|9080||reviews.shop.svc.cluster.local",
        "outbound|9080||ratings.shop.svc.cluster.local",
        "outbound|9080|nope|reviews.shop.svc.cluster.local",
        "not-a-cluster",
    ]);
    let clas: Vec<ClusterLoadAssignment> = decode(&generate_for(
        ResourceType::Endpoint,
        &ctx,
        &gateway_proxy(&[]),
        &wanted,
    ));
    let addrs = |cla: &ClusterLoadAssignment| -> Vec<String> {
        cla.endpoints
            .iter()
            .flat_map(|l| &l.lb_endpoints)
            .map(|e| format!("{e:?}"))
            .map(|dbg| {
                let ip = dbg
                    .split("address: \"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string();
                let port = dbg
                    .split("PortValue(")
                    .nth(1)
                    .unwrap()
                    .split(')')
                    .next()
                    .unwrap()
                    .to_string();
                format!("{ip}:{port}")
            })
            .collect()
    };
    let by_name = |n: &str| clas.iter().find(|c| c.cluster_name == n).unwrap();
    assert_eq!(
        addrs(by_name("outbound|9080|v1|reviews.shop.svc.cluster.local")),
        ["10.0.0.1:9081"]
    );
    assert_eq!(
        addrs(by_name("outbound|9080||reviews.shop.svc.cluster.local")),
        ["10.0.0.1:9081", "10.0.0.2:9080"]
    );
    assert_eq!(
        addrs(by_name("outbound|9080||ratings.shop.svc.cluster.local")),
        ["10.0.1.1:7070"],
        "WorkloadEntries of other namespaces are not selected; targetPort applies"
    );
    assert!(addrs(by_name("outbound|9080|nope|reviews.shop.svc.cluster.local")).is_empty());
    assert!(by_name("not-a-cluster").endpoints.is_empty());
}

#[test]
fn routes_per_virtual_service_in_order() {
    let ctx = context(MESH);
    let proxy = gateway_proxy(&[("istio", "ingressgateway")]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["http.8080", "http.9999"]),
    ));
    assert_eq!(routes.len(), 2);
    let rc = &routes[0];
    assert_eq!(rc.name, "http.8080");
    assert_eq!(rc.virtual_hosts.len(), 1);
    let vh = &rc.virtual_hosts[0];
    assert_eq!(
        (vh.name.as_str(), vh.domains.as_slice()),
        ("*:8080", &["*".to_string()][..])
    );
    assert_eq!(vh.routes.len(), 3, "one route per match, then the default");
    let cluster = |i: usize| match &vh.routes[i].action {
        Some(Action::Route(a)) => a.cluster_specifier.clone().unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        cluster(0),
        ClusterSpecifier::Cluster("outbound|9080|v2|reviews.shop.svc.cluster.local".into())
    );
    let ClusterSpecifier::WeightedClusters(w) = cluster(2) else {
        panic!("weighted")
    };
    let weights: Vec<(String, u32)> = w
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.weight.unwrap().value))
        .collect();
    assert_eq!(
        weights,
        [
            (
                "outbound|9080|v1|reviews.shop.svc.cluster.local".to_string(),
                90
            ),
            (
                "outbound|9080|v2|reviews.shop.svc.cluster.local".to_string(),
                10
            )
        ]
    );
    let blackhole = &routes[1].virtual_hosts;
    assert_eq!(blackhole.len(), 1);
    assert_eq!(blackhole[0].name, "blackhole:9999");
    assert!(blackhole[0].routes.is_empty(), "unmatched requests get 404");
}

#[test]
fn virtual_service_hosts_must_be_exposed_by_the_server() {
    let mesh = MESH.replace(
        "hosts: [\"*\"]\n  gateways",
        "hosts: [shop.example.com]\n  gateways",
    );
    let mesh = mesh.replacen("hosts: [\"*\"]", "hosts: [\"shop/*.example.com\"]", 1);
    let ctx = context(&mesh);
    let proxy = gateway_proxy(&[("istio", "ingressgateway")]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["http.8080"]),
    ));
    let vh = &routes[0].virtual_hosts[0];
    assert_eq!(vh.name, "shop.example.com:8080");
    assert_eq!(vh.domains, ["shop.example.com", "shop.example.com:8080"]);
}

#[test]
fn a_virtual_service_change_reuses_the_other_indexes() {
    let set = configs(MESH);
    let mesh = Arc::default();
    let first = PushContext::build(
        None,
        &set,
        &PushRequest::full_push(TriggerReason::Config, Instant::now()),
        &mesh,
    );
    let vs_key = set
        .keys()
        .find(|k| k.kind == crate::model::config::ConfigKind::VirtualService)
        .unwrap();
    let req = PushRequest::config_change(BTreeSet::from([vs_key.clone()]), Instant::now());
    let next = PushContext::build(Some(&first), &set, &req, &mesh);
    assert_eq!(next.version, first.version + 1);
    assert!(Arc::ptr_eq(&first.services, &next.services));
    assert!(Arc::ptr_eq(&first.endpoints, &next.endpoints));
    assert!(Arc::ptr_eq(
        &first.destination_rules,
        &next.destination_rules
    ));
    assert!(Arc::ptr_eq(&first.gateways, &next.gateways));
    assert!(!Arc::ptr_eq(
        &first.virtual_services,
        &next.virtual_services
    ));
}

const SIDECAR_MESH: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  egress:
  - port: {number: 15123, protocol: HTTP, name: egress}
    captureMode: NONE
    hosts: ["./*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-mesh, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews, subset: v2}}]
"#;

fn sidecar_proxy(ip: &str, namespace: &str, interception_none: bool) -> Proxy {
    let mut p = crate::model::fixtures::proxy("sidecar", ip, namespace, &[]);
    p.interception_none = interception_none;
    p
}

#[test]
fn sidecar_listeners_follow_the_sidecar_resource() {
    let ctx = context(&format!("{MESH}---{SIDECAR_MESH}"));
    let listener_names = |p: &Proxy| -> Vec<String> {
        decode::<Listener>(&generate_for(ResourceType::Listener, &ctx, p, &names(&[])))
            .into_iter()
            .map(|l| l.name)
            .collect()
    };
    // In shop, the Sidecar declares one egress listener: bound, on localhost.
    assert_eq!(
        listener_names(&sidecar_proxy("10.9.0.1", "shop", true)),
        ["127.0.0.1_15123"]
    );
    // Elsewhere, no Sidecar: a listener per HTTP service port, and the capture listeners.
    assert_eq!(
        listener_names(&sidecar_proxy("10.9.0.1", "web", false)),
        ["0.0.0.0_9080", "virtualOutbound", "virtualInbound"]
    );
    let bound = decode::<Listener>(&generate_for(
        ResourceType::Listener,
        &ctx,
        &sidecar_proxy("10.9.0.1", "web", false),
        &names(&[]),
    ));
    assert_eq!(
        bound[0].bind_to_port.map(|b| b.value),
        Some(false),
        "outbound listeners are not bound"
    );
}

#[test]
fn sidecar_routes_and_clusters() {
    let ctx = context(&format!("{MESH}---{SIDECAR_MESH}"));
    let proxy = sidecar_proxy("10.0.0.1", "shop", true);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["15123"]),
    ));
    let vh = &routes[0].virtual_hosts;
    let vh_names: Vec<&str> = vh.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        vh_names,
        [
            "ratings.shop.svc.cluster.local:15123",
            "reviews.shop.svc.cluster.local:15123",
            "allow_any"
        ]
    );
    assert!(vh[1].domains.contains(&"reviews".to_string()));
    assert!(vh[1].domains.contains(&"reviews.shop:15123".to_string()));
    let Some(Action::Route(action)) = &vh[1].routes[0].action else {
        panic!("a route")
    };
    assert_eq!(
        action.cluster_specifier,
        Some(ClusterSpecifier::Cluster(
            "outbound|9080|v2|reviews.shop.svc.cluster.local".into()
        )),
        "routed by the mesh VirtualService"
    );
    let clusters: Vec<String> = decode::<Cluster>(&generate_for(
        ResourceType::Cluster,
        &ctx,
        &proxy,
        &names(&[]),
    ))
    .into_iter()
    .map(|c| c.name)
    .collect();
    assert!(clusters.contains(&"PassthroughCluster".to_string()));
    assert!(
        clusters.contains(&"inbound|9081||".to_string()),
        "10.0.0.1 is a reviews endpoint: {clusters:?}"
    );
}

#[test]
fn endpoint_changes_are_seen_per_watched_cluster() {
    let before = context(MESH);
    let after = context(&MESH.replace("10.0.1.1", "10.0.1.2"));
    let ratings = names(&["outbound|9080||ratings.shop.svc.cluster.local"]);
    let reviews = names(&["outbound|9080|v1|reviews.shop.svc.cluster.local"]);
    use crate::model::push_context::changed_clusters;
    assert_eq!(changed_clusters(&before, &after, &ratings), ratings);
    assert!(changed_clusters(&before, &after, &reviews).is_empty());
}

#[test]
fn an_endpoint_change_recomputes_only_the_changed_services() {
    let mesh = Arc::default();
    let before = configs(MESH);
    let first = PushContext::build(
        None,
        &before,
        &PushRequest::full_push(TriggerReason::Config, Instant::now()),
        &mesh,
    );
    let after = configs(&MESH.replace("10.0.0.2", "10.0.0.3"));
    let key = crate::model::config::ConfigKey::new(
        crate::model::config::ConfigKind::ServiceEntry,
        "shop",
        "reviews",
    );
    let req = PushRequest::endpoint_change(BTreeSet::from([key]), Instant::now());
    let next = PushContext::build(Some(&first), &after, &req, &mesh);
    let scratch = context(&MESH.replace("10.0.0.2", "10.0.0.3"));
    assert_eq!(
        next.endpoints.by_service_port, scratch.endpoints.by_service_port,
        "the same endpoints as a rebuild from scratch"
    );
    assert_eq!(next.endpoints.by_address, scratch.endpoints.by_address);
    let ratings = ("ratings.shop.svc.cluster.local".to_string(), 9080);
    assert!(
        Arc::ptr_eq(
            &first.endpoints.by_service_port[&ratings],
            &next.endpoints.by_service_port[&ratings]
        ),
        "an unchanged service's endpoints are shared"
    );
    assert!(Arc::ptr_eq(&first.services, &next.services));
    assert_eq!(
        next.endpoint_changes.as_deref(),
        Some(&BTreeSet::from([(
            "reviews.shop.svc.cluster.local".to_string(),
            9080
        )]))
    );
}

#[test]
fn static_type_urls_are_the_protos_own() {
    use prost::Name;
    assert_eq!(ResourceType::Cluster.as_str(), Cluster::type_url());
    assert_eq!(
        ResourceType::Endpoint.as_str(),
        ClusterLoadAssignment::type_url()
    );
    assert_eq!(ResourceType::Listener.as_str(), Listener::type_url());
    assert_eq!(ResourceType::Route.as_str(), RouteConfiguration::type_url());
    for t in ResourceType::PUSH_ORDER {
        assert_eq!(ResourceType::parse(t.as_str()), Some(t));
    }
}

#[test]
fn a_proxy_that_skipped_a_context_sees_every_endpoint_change() {
    use crate::model::config::{ConfigKey, ConfigKind};
    use crate::model::push_context::changed_clusters;
    let mesh = Arc::default();
    let full = PushRequest::full_push(TriggerReason::Config, Instant::now());
    let v1 = PushContext::build(None, &configs(MESH), &full, &mesh);
    let reviews_moved = MESH.replace("10.0.0.2", "10.0.0.3");
    let eds = |kind, name: &str| {
        PushRequest::endpoint_change(
            BTreeSet::from([ConfigKey::new(kind, "shop", name)]),
            Instant::now(),
        )
    };
    let v2 = PushContext::build(
        Some(&v1),
        &configs(&reviews_moved),
        &eds(ConfigKind::ServiceEntry, "reviews"),
        &mesh,
    );
    let both_moved = reviews_moved.replace("10.0.1.1", "10.0.1.2");
    let v3 = PushContext::build(
        Some(&v2),
        &configs(&both_moved),
        &eds(ConfigKind::WorkloadEntry, "ratings-1"),
        &mesh,
    );
    let watched = names(&[
        "outbound|9080||ratings.shop.svc.cluster.local",
        "outbound|9080|v2|reviews.shop.svc.cluster.local",
    ]);
    assert_eq!(
        changed_clusters(&v2, &v3, &watched),
        names(&["outbound|9080||ratings.shop.svc.cluster.local"])
    );
    assert_eq!(
        changed_clusters(&v1, &v3, &watched),
        watched,
        "from v1, the change made in v2 counts too"
    );
}

#[test]
fn an_endpoint_only_context_keeps_a_proxys_scope_unless_its_own_ports_moved() {
    use crate::model::config::{ConfigKey, ConfigKind};
    let mesh = Arc::default();
    let full = PushRequest::full_push(TriggerReason::Config, Instant::now());
    let v1 = PushContext::build(None, &configs(MESH), &full, &mesh);
    let eds = PushRequest::endpoint_change(
        BTreeSet::from([ConfigKey::new(ConfigKind::ServiceEntry, "shop", "reviews")]),
        Instant::now(),
    );
    // 10.0.0.2 moves; the proxy at 10.0.0.1 (a reviews endpoint) keeps its ports.
    let moved = MESH.replace("10.0.0.2", "10.0.0.3");
    let v2 = PushContext::build(Some(&v1), &configs(&moved), &eds, &mesh);
    let proxy = sidecar_proxy("10.0.0.1", "shop", false);
    let scope = SidecarScope::of(&v1, &proxy);
    assert!(Arc::ptr_eq(
        &SidecarScope::next(Some((&v1, &scope)), &v2, &proxy),
        &scope
    ));
    // Its own endpoint's port changes: recomputed.
    let ported = moved.replace("ports: {http: 9081}", "ports: {http: 9082}");
    let v3 = PushContext::build(Some(&v2), &configs(&ported), &eds, &mesh);
    let next = SidecarScope::next(Some((&v2, &scope)), &v3, &proxy);
    assert!(!Arc::ptr_eq(&next, &scope));
    assert_eq!(next.inbound, SidecarScope::compute(&v3, &proxy).inbound);
    // A context skipped in between: recomputed.
    assert!(!Arc::ptr_eq(
        &SidecarScope::next(Some((&v1, &scope)), &v3, &proxy),
        &scope
    ));
}
