//! One VirtualService's HTTP routes as Envoy routes, as istiod's `TranslateRoute` makes
//! them: a route per match block that applies to the proxy, the gateway (or `mesh`) and the
//! port (`sourceMatchHTTP`), in the VirtualService's order, each with its match
//! ([`super::matching`]) and action ([`super::action`]). An HTTPRoute none of whose match
//! blocks applies gives no route.

use envoy_types::pb::envoy::config::route::v3::{Route, route::Action};

use super::action::route_action;
use super::matching::route_match;
use crate::model::config::Config;
use crate::model::istio::{HttpMatchRequest, VirtualService};
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
        let Some(action) = route_action(ctx, config.namespace(), http) else {
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
                name: http.name.clone(),
                r#match: Some(route_match(m)),
                action: Some(Action::Route(action.clone())),
                ..Default::default()
            });
        }
    }
    out
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
