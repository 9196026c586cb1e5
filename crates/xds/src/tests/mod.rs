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
use axon_model::fixtures::{configs, context};
use axon_model::proxy::{NodeInfo, Proxy};
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};
use axon_model::sidecar_scope::SidecarScope;

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
    let scope = axon_model::sidecar_scope::SidecarScope::compute(ctx, proxy);
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
        "a TCP server no tcp route applies to gets no listener, as istiod"
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
    assert!(
        routes[1].virtual_hosts.is_empty(),
        "a route name no server has gets no virtual host, as istiod (Envoy answers 404)"
    );
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
    // As istiod: the host alone, the port ignored in host matching.
    assert_eq!(vh.domains, ["shop.example.com"]);
    assert!(routes[0].ignore_port_in_host_matching);
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
        .find(|k| k.kind == axon_config::config::ConfigKind::VirtualService)
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

/// istiod's route names (`ROUTE`, `ROUTE.MATCH`, `.MATCH` when only the match is named) and
/// the match block's `stat_prefix`.
#[test]
fn routes_are_named_route_dot_match_and_carry_the_stat_prefix() {
    let named = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: shop}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - name: api
    match: [{name: v2, uri: {prefix: /v2}, statPrefix: shop_api_v2}, {uri: {prefix: /api}}]
    route: [{destination: {host: reviews, subset: v2}}]
  - match: [{name: beta, headers: {x-beta: {}}}]
    route: [{destination: {host: reviews, subset: v2}}]
  - name: default
    route: [{destination: {host: reviews, subset: v1}}]
"#;
    let yaml = MESH
        .split("---")
        .filter(|d| !d.contains("kind: VirtualService"))
        .chain([named])
        .collect::<Vec<_>>()
        .join("---");
    let ctx = context(&yaml);
    let proxy = gateway_proxy(&[("istio", "ingressgateway")]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["http.8080"]),
    ));
    let got: Vec<(&str, &str)> = routes[0].virtual_hosts[0]
        .routes
        .iter()
        .map(|r| (r.name.as_str(), r.stat_prefix.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("api.v2", "shop_api_v2"),
            ("api", ""),
            (".beta", ""),
            ("default", "")
        ]
    );
}

mod delegate;
mod gamma;
mod gateway_hosts;
mod gateway_semantics;
mod gateway_tls;
mod hash;
mod locality;
mod mesh_order;
mod sidecar;
mod sidecar_hosts;
mod source_match;
mod timeouts;

#[test]
fn connection_managers_allow_websockets_and_gateways_use_the_remote_address() {
    use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
    let ctx = context(MESH);
    let listeners: Vec<Listener> = decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[]),
    ));
    let filter = &listeners[0].filter_chains[0].filters[0];
    let Some(ConfigType::TypedConfig(any)) = &filter.config_type else {
        panic!("{filter:?}")
    };
    let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
    assert_eq!(hcm.upgrade_configs[0].upgrade_type, "websocket");
    assert_eq!(hcm.use_remote_address.map(|b| b.value), Some(true));
    assert_eq!(hcm.normalize_path.map(|b| b.value), Some(true));
    assert_eq!(hcm.stream_idle_timeout.map(|d| d.seconds), Some(0));
}

#[test]
fn grpc_and_http2_ports_get_http2_upstream_clusters() {
    let mesh = format!(
        "{MESH}---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: g, namespace: shop}}\nspec:\n  hosts: [g.shop.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 7070, name: grpc, protocol: GRPC}}, {{number: 8080, name: h2, protocol: HTTP2}}, {{number: 80, name: http, protocol: HTTP}}]\n  endpoints: [{{address: 10.0.3.1}}]\n"
    );
    let ctx = context(&mesh);
    let clusters: Vec<Cluster> = decode(&generate_for(
        ResourceType::Cluster,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[]),
    ));
    let h2 = |name: &str| {
        let c = clusters
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name}"));
        c.typed_extension_protocol_options
            .contains_key("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
    };
    assert!(h2("outbound|7070||g.shop.svc.cluster.local"));
    assert!(h2("outbound|8080||g.shop.svc.cluster.local"));
    assert!(!h2("outbound|80||g.shop.svc.cluster.local"));
}
