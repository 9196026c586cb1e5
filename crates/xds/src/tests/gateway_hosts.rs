//! Gateway virtual hosts as istiod builds them: one virtual host per served host holding
//! the routes of every VirtualService for it (by name then namespace, catch-alls last,
//! nothing after a VirtualService's own catch-all), the more specific of server host and
//! VirtualService host, `namespace/host` server hosts, and `exportTo` read against the
//! gateway proxy's namespace.

use envoy_types::pb::envoy::config::route::v3::{VirtualHost, route_match::PathSpecifier};

use super::*;
use axon_model::fixtures::proxy;

const HOSTS: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: [shop.example.com, a.example.com, "./own.example.com", "team/team.example.com"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local, api.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a-site, namespace: shop}
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/ingress]
  http:
  - route: [{destination: {host: web.shop.svc.cluster.local}}]
  - match: [{uri: {prefix: /never}}]
    route: [{destination: {host: web.shop.svc.cluster.local}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b-api, namespace: shop}
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/ingress]
  http:
  - match: [{uri: {prefix: /api}}, {uri: {prefix: /}}, {uri: {prefix: /after}}]
    route: [{destination: {host: api.shop.svc.cluster.local}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: wildcard, namespace: shop}
spec:
  hosts: ["*.example.com"]
  gateways: [istio-system/ingress]
  http: [{route: [{destination: {host: web.shop.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: private, namespace: shop}
spec:
  hosts: [private.example.com]
  gateways: [istio-system/ingress]
  exportTo: ["."]
  http: [{route: [{destination: {host: web.shop.svc.cluster.local}}]}]
"#;

fn gateway(namespace: &str) -> Proxy {
    proxy(
        "router",
        "10.1.1.1",
        namespace,
        &[("istio", "ingressgateway")],
    )
}

fn virtual_hosts(mesh: &str, proxy: &Proxy) -> Vec<VirtualHost> {
    let ctx = context(mesh);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        proxy,
        &names(&["http.8080"]),
    ));
    assert!(routes[0].ignore_port_in_host_matching);
    routes[0].virtual_hosts.clone()
}

/// Each route as `prefix -> cluster host`.
fn routes(vhost: &VirtualHost) -> Vec<String> {
    vhost
        .routes
        .iter()
        .map(|r| {
            let Some(PathSpecifier::Prefix(p)) =
                r.r#match.as_ref().and_then(|m| m.path_specifier.clone())
            else {
                panic!("{r:?}")
            };
            let Some(Action::Route(a)) = &r.action else {
                panic!("{r:?}")
            };
            let Some(ClusterSpecifier::Cluster(c)) = &a.cluster_specifier else {
                panic!("{r:?}")
            };
            format!("{p} -> {}", c.rsplit('|').next().unwrap_or_default())
        })
        .collect()
}

fn by_name<'a>(vhosts: &'a [VirtualHost], name: &str) -> &'a VirtualHost {
    vhosts
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no {name} in {vhosts:?}"))
}

#[test]
fn virtual_services_for_one_host_share_its_virtual_host_catch_alls_last() {
    let vhosts = virtual_hosts(HOSTS, &gateway("istio-system"));
    let shop = by_name(&vhosts, "shop.example.com:8080");
    assert_eq!(shop.domains, ["shop.example.com"]);
    // a-site (by name, first) ends at its catch-all: `/never` is dropped; b-api's `/api`
    // comes before it, then b-api's own `/` ends b-api (`/after` dropped); the wildcard
    // VirtualService's catch-all last.
    assert_eq!(
        routes(shop),
        [
            "/api -> api.shop.svc.cluster.local",
            "/ -> web.shop.svc.cluster.local",
            "/ -> api.shop.svc.cluster.local",
            "/ -> web.shop.svc.cluster.local",
        ]
    );
}

#[test]
fn a_wildcard_host_is_served_as_the_more_specific_server_host() {
    let vhosts = virtual_hosts(HOSTS, &gateway("istio-system"));
    let names: Vec<&str> = vhosts.iter().map(|v| v.name.as_str()).collect();
    // `*.example.com` is served as each server host it covers that the server lets the
    // shop namespace use: not `./own` (the Gateway's namespace), not `team/`.
    assert_eq!(names, ["a.example.com:8080", "shop.example.com:8080"]);
    assert_eq!(
        by_name(&vhosts, "a.example.com:8080").domains,
        ["a.example.com"]
    );

    let mesh = HOSTS
        .replace(
            "namespace: istio-system}\nspec:\n  selector",
            "namespace: shop}\nspec:\n  selector",
        )
        .replace(
            "gateways: [istio-system/ingress]",
            "gateways: [shop/ingress]",
        );
    let vhosts = virtual_hosts(&mesh, &gateway("istio-system"));
    let names: Vec<&str> = vhosts.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "a.example.com:8080",
            "own.example.com:8080",
            "shop.example.com:8080"
        ],
        "`./` is the Gateway's namespace"
    );
}

#[test]
fn export_to_is_read_against_the_gateway_proxys_namespace() {
    let mesh = HOSTS
        .replace(
            "hosts: [shop.example.com, a.example.com",
            "hosts: [private.example.com",
        )
        .replace("\"*.example.com\"", "\"*.example.org\"");
    let served = |ns: &str| -> Vec<String> {
        virtual_hosts(&mesh, &gateway(ns))
            .iter()
            .map(|v| v.name.clone())
            .collect()
    };
    // Exported to `.` (shop): not served by a gateway proxy in istio-system, whatever the
    // Gateway's namespace; served by one running in shop.
    assert_eq!(served("istio-system"), ["blackhole:8080"]);
    assert_eq!(served("shop"), ["private.example.com:8080"]);
    let other = mesh.replace("exportTo: [\".\"]", "exportTo: [istio-system]");
    let vhosts = virtual_hosts(&other, &gateway("istio-system"));
    assert_eq!(vhosts[0].name, "private.example.com:8080");
}
