//! One VirtualService's HTTP routes as Envoy routes: a route per match block that applies to
//! the gateway (or `mesh`) and port, in the VirtualService's order, each with its match
//! ([`super::matching`]) and action ([`super::action`]).

use envoy_types::pb::envoy::config::route::v3::Route;

use super::action;
use super::matching::route_match;
use crate::model::config::Config;
use crate::model::istio::{HttpMatchRequest, VirtualService};
use crate::model::push_context::PushContext;

/// The Envoy routes of one VirtualService, for a gateway on `port`.
pub(super) fn translate_routes(
    ctx: &PushContext,
    config: &Config,
    vs: &VirtualService,
    gateway: &str,
    port: u32,
) -> Vec<Route> {
    let mut out = Vec::new();
    for http in &vs.http {
        let Some(template) = action::translate(ctx, config.namespace(), http, port) else {
            continue;
        };
        let matches: Vec<Option<&HttpMatchRequest>> = if http.matches.is_empty() {
            vec![None]
        } else {
            http.matches
                .iter()
                .filter(|m| applies(m, gateway, port, config.namespace()))
                .map(Some)
                .collect()
        };
        for m in matches {
            out.push(Route {
                name: http.name.clone(),
                r#match: Some(route_match(m)),
                ..template.clone()
            });
        }
    }
    out
}

/// A match applies to this gateway and port unless it names other gateways or ports.
fn applies(m: &HttpMatchRequest, gateway: &str, port: u32, namespace: &str) -> bool {
    let gateway_ok = m.gateways.is_empty()
        || m.gateways
            .iter()
            .any(|g| crate::model::push_context::gateway_ref(g, namespace) == gateway);
    gateway_ok && m.port.is_none_or(|p| p == port)
}
