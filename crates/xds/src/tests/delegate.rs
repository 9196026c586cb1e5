//! Delegation through the generators: a root VirtualService's delegating route replaced by
//! its child's routes on a gateway and on a sidecar, and proxies depending on the child.

use envoy_types::pb::envoy::config::route::v3::{Route, route_match::PathSpecifier};

use super::*;
use axon_config::config::{ConfigKey, ConfigKind};
use axon_model::sidecar_scope::{SidecarScope, needs_push};

const DELEGATES: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: istio-system}
spec:
  hosts: [shop.example.com, reviews.shop.svc.cluster.local]
  gateways: [ingress, mesh]
  http:
  - name: reviews
    match: [{uri: {prefix: /reviews}}]
    delegate: {name: reviews-routes, namespace: shop}
    timeout: 3s
  - name: rest
    route: [{destination: {host: ratings.shop.svc.cluster.local}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-routes, namespace: shop}
spec:
  http:
  - name: v2
    match: [{uri: {prefix: /reviews/v2}}]
    route: [{destination: {host: reviews, subset: v2}}]
  - name: elsewhere
    match: [{uri: {prefix: /other}}]
    route: [{destination: {host: reviews, subset: v2}}]
  - name: v1
    route: [{destination: {host: reviews, subset: v1}}]
"#;

/// `name prefix cluster timeout` of each route.
fn summary(routes: &[Route]) -> Vec<String> {
    routes
        .iter()
        .map(|r| {
            let path = match r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
                Some(PathSpecifier::Prefix(p)) => p.clone(),
                other => format!("{other:?}"),
            };
            let Some(Action::Route(a)) = &r.action else {
                return format!("{} {path} -", r.name);
            };
            let cluster = match &a.cluster_specifier {
                Some(ClusterSpecifier::Cluster(c)) => c.clone(),
                other => format!("{other:?}"),
            };
            let timeout = a.timeout.map_or(0, |t| t.seconds);
            format!("{} {path} {cluster} {timeout}s", r.name)
        })
        .collect()
}

#[test]
fn a_gateway_serves_the_child_routes_inside_the_root_match() {
    // MESH's own `*` VirtualService is left out: only the root serves the gateway here.
    let mesh = MESH
        .split("kind: VirtualService")
        .next()
        .unwrap_or_default();
    let mesh = mesh
        .trim_end()
        .trim_end_matches("apiVersion: networking.istio.io/v1");
    let ctx = context(&format!("{mesh}\n---{DELEGATES}"));
    let proxy = gateway_proxy(&[("istio", "ingressgateway")]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["http.8080"]),
    ));
    let hosts: Vec<&str> = routes[0]
        .virtual_hosts
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(
        hosts,
        [
            "reviews.shop.svc.cluster.local:8080",
            "shop.example.com:8080"
        ]
    );
    assert_eq!(
        summary(&routes[0].virtual_hosts[1].routes),
        [
            "reviews-v2 /reviews/v2 outbound|9080|v2|reviews.shop.svc.cluster.local 3s",
            "reviews-v1 /reviews outbound|9080|v1|reviews.shop.svc.cluster.local 3s",
            "rest / outbound|9080||ratings.shop.svc.cluster.local 0s",
        ]
    );
    let problems = &ctx.virtual_services.problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].message.contains("\"elsewhere\""),
        "{problems:?}"
    );
}

#[test]
fn a_sidecar_serves_the_merged_routes_and_depends_on_the_child() {
    let ctx = context(&format!("{MESH}---{DELEGATES}"));
    let proxy = axon_model::fixtures::proxy("sidecar", "10.9.0.1", "web", &[]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["9080"]),
    ));
    let reviews = routes[0]
        .virtual_hosts
        .iter()
        .find(|v| v.name == "reviews.shop.svc.cluster.local:9080")
        .expect("a reviews host");
    assert_eq!(
        summary(&reviews.routes),
        [
            "reviews-v2 /reviews/v2 outbound|9080|v2|reviews.shop.svc.cluster.local 3s",
            "reviews-v1 /reviews outbound|9080|v1|reviews.shop.svc.cluster.local 3s",
            "rest / outbound|9080||ratings.shop.svc.cluster.local 0s",
        ]
    );
    // The child is no VirtualService of its own: only the root binds.
    let mesh_bound: Vec<String> = ctx
        .virtual_services_for_gateway("mesh")
        .map(|(c, _)| c.key.to_string())
        .collect();
    assert_eq!(mesh_bound, ["VirtualService/istio-system/root"]);
    // A change to the child reaches the proxy.
    let scope = SidecarScope::compute(&ctx, &proxy);
    let child = ConfigKey::new(ConfigKind::VirtualService, "shop", "reviews-routes");
    assert!(scope.deps.contains(&child));
    let request = PushRequest::config_change([child].into(), Instant::now());
    assert!(needs_push(Some(&scope), &scope, &request));
}
