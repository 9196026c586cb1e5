//! One VirtualService's HTTP routes as Envoy routes, as istiod's
//! `BuildHTTPRoutesForVirtualService` and `TranslateRoute` make them: a route per match
//! block that applies to the proxy, the gateway (or `mesh`) and the port (`sourceMatchHTTP`),
//! in the VirtualService's order, each with its match ([`super::matching`]), its name
//! (`ROUTE.MATCH`), its `stat_prefix` and its action ([`super::action`]). An HTTPRoute none of
//! whose match blocks applies gives no route. Nothing after a catch-all is kept: not the
//! HTTPRoutes after one with no match block, nor anything after a match block whose route
//! is a catch-all ([`is_catch_all`]). On a gateway, the routes of several VirtualServices
//! share a virtual host, their catch-alls moved last ([`sort_vhost_routes`]). A VirtualService
//! made from Gateway API routes (`RouteSemantics::Gateway`) reads as istiod's
//! `UseGatewaySemantics` makes it: path-separated prefixes, a prefix-stripping rewrite, 500
//! for a destination that is no cluster.

use envoy_types::pb::envoy::config::route::v3::{
    Route, route::Action, route_action::MaxStreamDuration, route_match::PathSpecifier,
};

use super::action;
use super::matching::route_match;
use axon_config::config::Config;
use axon_config::istio::{HttpMatchRequest, HttpRoute, VirtualService};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;

/// Where routes are generated: for which proxy, on which gateway (`namespace/name`, or
/// `mesh` for a sidecar), for which port.
#[derive(Clone, Copy)]
pub(super) struct RouteTarget<'a> {
    pub proxy: &'a Proxy,
    pub gateway: &'a str,
    pub port: u32,
}

/// The Envoy routes of one VirtualService at `target`.
pub(super) fn translate_routes(
    ctx: &PushContext,
    config: &Config,
    vs: &VirtualService,
    target: RouteTarget,
) -> Vec<Route> {
    let mut out = translate_all(ctx, config, vs, target);
    if target.proxy.generator.as_deref() == Some("grpc") {
        out.iter_mut().for_each(proxyless_timeout);
    }
    out
}

/// istiod's `setTimeout` for proxyless gRPC clients: the route's timeout bounds the stream
/// as `max_stream_duration` (gRPC's xDS client reads no `max_grpc_timeout`).
fn proxyless_timeout(route: &mut Route) {
    let Some(Action::Route(action)) = &mut route.action else {
        return;
    };
    action.max_stream_duration = Some(MaxStreamDuration {
        max_stream_duration: action.timeout,
        ..Default::default()
    });
    #[allow(deprecated)]
    {
        action.max_grpc_timeout = None;
    }
}

fn translate_all(
    ctx: &PushContext,
    config: &Config,
    vs: &VirtualService,
    target: RouteTarget,
) -> Vec<Route> {
    let mut out = Vec::new();
    let gateway_semantics = vs.gateway_semantics();
    for http in &vs.http {
        let hosts = action::Hosts {
            namespace: config.namespace(),
            gateway_semantics,
        };
        let Some(template) = action::translate(ctx, target.proxy, hosts, http, target.port) else {
            // As istiod: an HTTPRoute without match blocks ends the list, routed or not.
            if http.matches.is_empty() {
                break;
            }
            continue;
        };
        let matches: Vec<Option<&HttpMatchRequest>> = if http.matches.is_empty() {
            vec![None]
        } else {
            http.matches
                .iter()
                .filter(|m| applies(m, target, config.namespace()))
                .map(Some)
                .collect()
        };
        for m in &matches {
            let mut route = Route {
                name: route_name(http, *m),
                r#match: Some(route_match(*m, gateway_semantics)),
                stat_prefix: m.map(|m| m.stat_prefix.clone()).unwrap_or_default(),
                ..template.clone()
            };
            if gateway_semantics {
                action::strip_matched_prefix(&mut route, http);
            }
            let catch_all = is_catch_all(&route);
            out.push(route);
            // Routes are matched in order: nothing after a catch-all is ever reached.
            if catch_all {
                return out;
            }
        }
        if http.matches.is_empty() {
            break;
        }
    }
    out
}

/// istiod's `IsCatchAllRoute`: the route matches every path (prefix `/`, path-separated
/// prefix `/` or regex `.*`) and no header, query parameter or metadata.
pub(super) fn is_catch_all(route: &Route) -> bool {
    let Some(m) = &route.r#match else {
        return false;
    };
    let every_path = match &m.path_specifier {
        Some(PathSpecifier::Prefix(p)) | Some(PathSpecifier::PathSeparatedPrefix(p)) => p == "/",
        Some(PathSpecifier::SafeRegex(r)) => r.regex == ".*",
        _ => false,
    };
    every_path
        && m.headers.is_empty()
        && m.query_parameters.is_empty()
        && m.dynamic_metadata.is_empty()
}

/// istiod's `SortVHostRoutes`: the catch-all routes moved last, the others keeping their
/// order.
pub(super) fn sort_vhost_routes(routes: Vec<Route>) -> Vec<Route> {
    let (mut out, catch_alls): (Vec<Route>, Vec<Route>) =
        routes.into_iter().partition(|r| !is_catch_all(r));
    out.extend(catch_alls);
    out
}

/// The HTTPRoute's name, and `.MATCH` when the match block has a name (as istiod, even
/// when the HTTPRoute has none: `.MATCH`).
fn route_name(http: &HttpRoute, m: Option<&HttpMatchRequest>) -> String {
    match m {
        Some(m) if !m.name.is_empty() => format!("{}.{}", http.name, m.name),
        _ => http.name.clone(),
    }
}

/// Whether a match block applies at `target` (istiod's port check and `sourceMatchHTTP`):
/// its `port`, if any (0 is none), is the target's; then, if it names gateways, one of them
/// is the target's, and its source labels and namespace are not looked at; else the proxy
/// has every `sourceLabels` label and is in `sourceNamespace`, if given. On a gateway, the
/// proxy is the gateway's own Envoy.
fn applies(m: &HttpMatchRequest, target: RouteTarget, namespace: &str) -> bool {
    if m.port.is_some_and(|p| p != 0 && p != target.port) {
        return false;
    }
    if !m.gateways.is_empty() {
        return m
            .gateways
            .iter()
            .any(|g| axon_model::push_context::gateway_ref(g, namespace) == target.gateway);
    }
    target.proxy.matches_selector(&m.source_labels)
        && (m.source_namespace.is_empty() || m.source_namespace == target.proxy.namespace)
}
