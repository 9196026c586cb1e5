//! One VirtualService's HTTP routes as Envoy routes, as istiod's `TranslateRoute` makes
//! them: a route per match block that applies to the proxy, the gateway (or `mesh`) and the
//! port (`sourceMatchHTTP`), in the VirtualService's order, each with its match
//! ([`super::matching`]), its name (`ROUTE.MATCH`), its `stat_prefix` and its action
//! ([`super::action`]). An HTTPRoute none of whose match blocks applies gives no route.

use envoy_types::pb::envoy::config::route::v3::Route;

use super::action;
use super::matching::route_match;
use crate::model::config::Config;
use crate::model::istio::{HttpMatchRequest, HttpRoute, VirtualService};
use crate::model::proxy::Proxy;
use crate::model::push_context::PushContext;

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
    let mut out = Vec::new();
    for http in &vs.http {
        let Some(template) = action::translate(ctx, config.namespace(), http, target.port) else {
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
        for m in matches {
            out.push(Route {
                name: route_name(http, m),
                r#match: Some(route_match(m)),
                stat_prefix: m.map(|m| m.stat_prefix.clone()).unwrap_or_default(),
                ..template.clone()
            });
        }
    }
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
            .any(|g| crate::model::push_context::gateway_ref(g, namespace) == target.gateway);
    }
    target.proxy.matches_selector(&m.source_labels)
        && (m.source_namespace.is_empty() || m.source_namespace == target.proxy.namespace)
}
