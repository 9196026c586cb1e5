//! Which match blocks apply to which proxy (istiod's `sourceMatchHTTP`): `sourceLabels` and
//! `sourceNamespace` against the proxy's labels and namespace, on gateways and sidecars;
//! `gateways` overriding both; `port: 0` as no port; a VirtualService left with no route;
//! proxies that differ only in labels sharing generated routes only when no `sourceLabels`
//! tells them apart.

use envoy_types::pb::envoy::config::route::v3::{VirtualHost, route_match::PathSpecifier};

use super::*;
use axon_model::fixtures::proxy;
use axon_model::sidecar_scope::SidecarScope;

const SOURCES: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.1, labels: {version: v1}}, {address: 10.0.0.2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: edge, namespace: shop}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - match:
    - {uri: {prefix: /zone-a}, sourceLabels: {zone: a}}
    - {uri: {prefix: /ns}, sourceNamespace: istio-system}
    - {uri: {prefix: /elsewhere}, sourceNamespace: elsewhere}
    - {uri: {prefix: /gw}, gateways: [istio-system/ingress], sourceLabels: {zone: nowhere}}
    - {uri: {prefix: /port-zero}, port: 0}
    - {uri: {prefix: /port-other}, port: 9999}
    route: [{destination: {host: reviews, subset: v2}}]
  - route: [{destination: {host: reviews, subset: v1}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: only-b, namespace: shop}
spec:
  hosts: [b.example.com]
  gateways: [istio-system/ingress]
  http:
  - match: [{sourceLabels: {zone: b}}]
    route: [{destination: {host: reviews, subset: v2}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - match: [{sourceLabels: {app: web}, uri: {prefix: /web}}]
    route: [{destination: {host: reviews, subset: v2}}]
"#;

fn gateway(zone: &str) -> Proxy {
    proxy(
        "router",
        "10.1.1.1",
        "istio-system",
        &[("istio", "ingressgateway"), ("zone", zone)],
    )
}

fn virtual_hosts(ctx: &PushContext, proxy: &Proxy, name: &str) -> Vec<VirtualHost> {
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        ctx,
        proxy,
        &names(&[name]),
    ));
    routes[0].virtual_hosts.clone()
}

/// Each route's path prefix ("/" for a catch-all).
fn prefixes(vhost: &VirtualHost) -> Vec<String> {
    vhost
        .routes
        .iter()
        .map(
            |r| match r.r#match.as_ref().and_then(|m| m.path_specifier.clone()) {
                Some(PathSpecifier::Prefix(p)) => p,
                other => panic!("{other:?}"),
            },
        )
        .collect()
}

#[test]
fn on_a_gateway_source_labels_and_namespace_are_the_gateways_own() {
    let ctx = context(SOURCES);
    let a = virtual_hosts(&ctx, &gateway("a"), "http.8080");
    let names: Vec<&str> = a.iter().map(|v| v.name.as_str()).collect();
    // only-b has no match block for zone a: no virtual host, as istiod.
    assert_eq!(names, ["*:8080"]);
    // Port 0 is no port, as istiod reads it.
    assert_eq!(
        prefixes(&a[0]),
        ["/zone-a", "/ns", "/gw", "/port-zero", "/"]
    );

    let b = virtual_hosts(&ctx, &gateway("b"), "http.8080");
    let names: Vec<&str> = b.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["*:8080", "b.example.com:8080"]);
    // A match block that names gateways applies on them whatever its sourceLabels.
    assert_eq!(prefixes(&b[0]), ["/ns", "/gw", "/port-zero", "/"]);
    assert_eq!(prefixes(&b[1]), ["/"]);
}

#[test]
fn a_gateway_left_with_no_virtual_host_has_the_blackhole() {
    let only_b = SOURCES
        .split("---")
        .filter(|d| !d.contains("name: edge"))
        .collect::<Vec<_>>()
        .join("---");
    let ctx = context(&only_b);
    let a = virtual_hosts(&ctx, &gateway("a"), "http.8080");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].name, "blackhole:8080");
    assert!(a[0].routes.is_empty());
}

#[test]
fn on_a_sidecar_a_virtual_service_with_no_match_left_routes_to_the_service() {
    let ctx = context(SOURCES);
    let route = |labels: &[(&str, &str)]| {
        let p = proxy("sidecar", "10.2.0.1", "shop", labels);
        let vhosts = virtual_hosts(&ctx, &p, "9080");
        let reviews = vhosts
            .iter()
            .find(|v| v.name == "reviews.shop.svc.cluster.local:9080")
            .expect("a reviews host")
            .clone();
        let clusters: Vec<String> = reviews
            .routes
            .iter()
            .map(|r| match &r.action {
                Some(Action::Route(a)) => match &a.cluster_specifier {
                    Some(ClusterSpecifier::Cluster(c)) => c.clone(),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            })
            .collect();
        (prefixes(&reviews), clusters)
    };
    assert_eq!(
        route(&[("app", "web")]),
        (
            vec!["/web".to_string()],
            vec!["outbound|9080|v2|reviews.shop.svc.cluster.local".to_string()]
        )
    );
    assert_eq!(
        route(&[("app", "api")]),
        (
            vec!["/".to_string()],
            vec!["outbound|9080||reviews.shop.svc.cluster.local".to_string()]
        ),
        "the VirtualService gives this proxy no route: the service's default route"
    );
}

#[test]
fn proxies_differing_in_labels_share_routes_unless_a_source_label_tells_them_apart() {
    let ctx = context(SOURCES);
    let key = |p: &Proxy| SidecarScope::of(&ctx, p).key.clone();
    // Neither has zone a or b: the same view, one generated copy.
    let (c, d) = (gateway("c"), gateway("d"));
    assert_eq!(key(&c), key(&d));
    let shared = |p: &Proxy| {
        let scope = SidecarScope::of(&ctx, p);
        generate_shared(ResourceType::Route, &ctx, p, &scope, &names(&["http.8080"]))
    };
    assert!(Arc::ptr_eq(&shared(&c), &shared(&d)));
    // zone a and zone b each match a sourceLabels selector.
    let (a, b) = (gateway("a"), gateway("b"));
    assert_ne!(key(&a), key(&b));
    assert_ne!(key(&a), key(&c));
    assert!(!Arc::ptr_eq(&shared(&a), &shared(&b)));
    let routes = |p: &Proxy| decode::<RouteConfiguration>(&shared(p))[0].clone();
    assert_ne!(routes(&a), routes(&b));
    assert_eq!(routes(&c), routes(&d));
}
