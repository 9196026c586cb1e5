//! Routes of VirtualServices made from Gateway API routes (`RouteSemantics::Gateway`), as
//! istiod's `UseGatewaySemantics` branches of `route.go` make them: a path-separated prefix
//! (`translateRouteMatch`), `rewrite.uri: /` as a regex stripping the matched prefix and
//! `cluster_not_found_response_code: INTERNAL_SERVER_ERROR` (`applyHTTPRouteDestination`);
//! the same VirtualService without the mark is read as a user's.

use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, route_action::ClusterNotFoundResponseCode, route_match::PathSpecifier,
};

use super::*;
use axon_config::config::Spec;
use axon_config::istio::RouteSemantics;
use axon_model::fixtures::{context_marked, proxy};

const ROUTES: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.example.com]
  gateways: [istio-system/gw]
  http:
  - name: strip
    match: [{uri: {prefix: /api/}}, {uri: {prefix: /a.b}}]
    rewrite: {uri: /}
    route: [{destination: {host: web.shop.svc.cluster.local}}]
  - name: regex
    match: [{uri: {prefix: /re}}]
    rewrite: {uriRegexRewrite: {match: "^/re", rewrite: /x}}
    route: [{destination: {host: web.shop.svc.cluster.local}}]
  - name: other
    match: [{uri: {prefix: /other}}]
    rewrite: {uri: /new}
    route: [{destination: {host: web.shop.svc.cluster.local}}]
  - name: exact
    match: [{uri: {exact: /exact}}]
    rewrite: {uri: /}
    route: [{destination: {host: web.shop.svc.cluster.local}}]
  - name: redirect
    match: [{uri: {prefix: /moved}}]
    redirect: {uri: /elsewhere}
  - name: root
    match: [{uri: {prefix: /}}]
    rewrite: {uri: /}
    route: [{destination: {host: web.shop.svc.cluster.local}}]
"#;

/// The routes of `web.example.com` on the gateway, the VirtualService marked with
/// `semantics`.
fn routes(semantics: RouteSemantics) -> Vec<Route> {
    let ctx = context_marked(ROUTES, |c| {
        if let Spec::VirtualService(vs) = &mut c.spec {
            vs.semantics = semantics;
            vs.parents = vec!["HTTPRoute/web.shop".into()];
        }
    });
    let gw = proxy(
        "router",
        "10.1.1.1",
        "istio-system",
        &[("istio", "ingressgateway")],
    );
    let configs: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &gw,
        &names(&["http.8080"]),
    ));
    configs[0].virtual_hosts[0].routes.clone()
}

fn path(r: &Route) -> PathSpecifier {
    r.r#match.as_ref().unwrap().path_specifier.clone().unwrap()
}

fn action(r: &Route) -> &RouteAction {
    match &r.action {
        Some(Action::Route(a)) => a,
        other => panic!("{other:?}"),
    }
}

/// `(regex, substitution)` of a route's regex rewrite, and its prefix rewrite.
fn rewrite(r: &Route) -> (Option<(String, String)>, String) {
    let a = action(r);
    let regex = a.regex_rewrite.as_ref().map(|rr| {
        (
            rr.pattern.as_ref().unwrap().regex.clone(),
            rr.substitution.clone(),
        )
    });
    (regex, a.prefix_rewrite.clone())
}

fn strip(regex: &str) -> (Option<(String, String)>, String) {
    (Some((regex.to_string(), r"/\2".to_string())), String::new())
}

#[test]
fn a_gateway_api_prefix_is_path_separated_without_its_trailing_slash() {
    let r = routes(RouteSemantics::Gateway);
    assert_eq!(
        path(&r[0]),
        PathSpecifier::PathSeparatedPrefix("/api".into())
    );
    assert_eq!(
        path(&r[1]),
        PathSpecifier::PathSeparatedPrefix("/a.b".into())
    );
    assert_eq!(path(&r[4]), PathSpecifier::Path("/exact".into()));
    // `/` stays a prefix: still the catch-all.
    assert_eq!(path(r.last().unwrap()), PathSpecifier::Prefix("/".into()));

    let user = routes(RouteSemantics::Istio);
    assert_eq!(path(&user[0]), PathSpecifier::Prefix("/api/".into()));
    assert_eq!(path(&user[1]), PathSpecifier::Prefix("/a.b".into()));
}

#[test]
fn a_gateway_api_rewrite_to_slash_strips_the_matched_prefix() {
    let r = routes(RouteSemantics::Gateway);
    assert_eq!(rewrite(&r[0]), strip("^/api(/?)(.*)"));
    assert_eq!(
        rewrite(&r[1]),
        strip(r"^/a\.b(/?)(.*)"),
        "the prefix quoted"
    );
    // A regex rewrite wins; another URI is a prefix rewrite still.
    assert_eq!(
        rewrite(&r[2]),
        (Some(("^/re".into(), "/x".into())), String::new())
    );
    assert_eq!(rewrite(&r[3]), (None, "/new".into()));
    // No path-separated prefix matched: the regex keeps the path.
    assert_eq!(rewrite(&r[4]), strip("^(/?)(.*)"));
    assert_eq!(rewrite(r.last().unwrap()), strip("^(/?)(.*)"));

    let user = routes(RouteSemantics::Istio);
    assert_eq!(rewrite(&user[0]), (None, "/".into()));
    assert_eq!(rewrite(user.last().unwrap()), (None, "/".into()));
}

#[test]
fn a_gateway_api_route_answers_500_for_a_missing_cluster() {
    let r = routes(RouteSemantics::Gateway);
    let code = ClusterNotFoundResponseCode::InternalServerError as i32;
    let routed: Vec<&Route> = r
        .iter()
        .filter(|r| matches!(r.action, Some(Action::Route(_))))
        .collect();
    assert_eq!(routed.len(), 6);
    assert!(
        routed
            .iter()
            .all(|r| action(r).cluster_not_found_response_code == code)
    );
    assert!(matches!(r[5].action, Some(Action::Redirect(_))));

    let user = routes(RouteSemantics::Istio);
    assert!(
        user.iter()
            .filter(|r| matches!(r.action, Some(Action::Route(_))))
            .all(|r| action(r).cluster_not_found_response_code == 0)
    );
}

#[test]
fn a_gateway_api_routes_destination_hosts_are_taken_as_they_are() {
    // Two shares: a short host, and a denied backend's empty destination (the converter's
    // `Destination{}`). Under gateway semantics neither is resolved in the namespace
    // (istiod resolves no shortname of such a VirtualService); both are clusters that do not
    // exist, answered 500.
    let yaml = ROUTES.replace(
        "  http:\n  - name: strip",
        "  http:\n  - name: shares\n    match: [{uri: {prefix: /shares}}]\n    route: [{destination: {host: web, port: {number: 80}}, weight: 50}, {destination: {host: denied}, weight: 50}]\n  - name: strip",
    );
    let clusters = |semantics: RouteSemantics| -> Vec<String> {
        let ctx = context_marked(&yaml, |c| {
            if let Spec::VirtualService(vs) = &mut c.spec {
                vs.semantics = semantics;
                vs.http[0].route[1].destination.as_mut().unwrap().host = String::new();
            }
        });
        let gw = proxy(
            "router",
            "10.1.1.1",
            "istio-system",
            &[("istio", "ingressgateway")],
        );
        let configs: Vec<RouteConfiguration> = decode(&generate_for(
            ResourceType::Route,
            &ctx,
            &gw,
            &names(&["http.8080"]),
        ));
        let r = &configs[0].virtual_hosts[0].routes[0];
        let Some(ClusterSpecifier::WeightedClusters(w)) = &action(r).cluster_specifier else {
            panic!("{r:?}")
        };
        w.clusters.iter().map(|c| c.name.clone()).collect()
    };
    assert_eq!(
        clusters(RouteSemantics::Gateway),
        ["outbound|80||web", "outbound|8080||"]
    );
    assert_eq!(
        clusters(RouteSemantics::Istio),
        [
            "outbound|80||web.shop.svc.cluster.local",
            "outbound|8080||.shop.svc.cluster.local"
        ]
    );
}
