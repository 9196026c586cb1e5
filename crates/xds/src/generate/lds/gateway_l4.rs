//! Which VirtualService routes a gateway's TCP and TLS servers take, as istiod's
//! `buildGatewayNetworkFiltersFromTCPRoutes` and `…FromTLSRoutes` (`gateway.go`): of the
//! VirtualServices bound to the server's Gateway (in istiod's order) that have a host the
//! server serves, the first `tcp` route whose match blocks match the server's port and gateway
//! (opaque TCP, or TLS terminated), else, for a VirtualService made from a TLSRoute, its first
//! `tls` route with a matching block (a TLSRoute on a terminating listener); for
//! PASSTHROUGH, every `tls` route's match block that
//! matches, as a filter chain for its `sniHosts` (a block naming an SNI host an earlier one
//! on the listener took is skipped, as Envoy would refuse two chains that match alike).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::Filter;

use super::l4::{L4Port, multi_match, route_filters, single_match};
use axon_model::gateway::{GatewayServer, ServerKind};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;

/// A filter chain of a passthrough server: its SNI hosts and filters.
pub(super) struct SniChain {
    pub sni_hosts: Vec<String>,
    pub filters: Vec<Filter>,
}

/// Per listener, the SNI hosts the chains built so far match, and their bind (istiod's
/// `tlsHostsByPort`).
pub(super) type TakenSni = BTreeMap<String, String>;

fn l4_port<'a>(server: &'a GatewayServer) -> L4Port<'a> {
    L4Port {
        number: server.port_number(),
        protocol: server
            .server
            .port
            .as_ref()
            .map_or("", |p| p.protocol.as_str()),
    }
}

/// The filters of a TCP server (opaque, or its TLS terminated): none when no route applies.
pub(super) fn tcp_filters(ctx: &PushContext, proxy: &Proxy, server: &GatewayServer) -> Vec<Filter> {
    let port = server.port_number();
    for (config, vs) in ctx.virtual_services_for_gateway_proxy(&server.gateway, &proxy.namespace) {
        let hosts: Vec<String> = vs
            .hosts
            .iter()
            .map(|h| vs.resolve_host(h, config.namespace()))
            .collect();
        if !server.matches_any_host(&hosts, config.namespace()) {
            continue;
        }
        for tcp in vs.tcp_routes() {
            if tcp.route.is_empty()
                || !multi_match(&tcp.matches, port, &server.gateway, config.namespace())
            {
                continue;
            }
            return route_filters(ctx, proxy, config, &tcp.route, l4_port(server));
        }
        // A TLSRoute's VirtualService has `tls` blocks only: on a server that is not
        // passthrough (its TLS terminated), their first matching block is served as TCP.
        let passthrough = matches!(
            server.kind(),
            ServerKind::Passthrough | ServerKind::AutoPassthrough
        );
        if vs.from_tls_route() && !passthrough {
            for tls in vs.tls_routes() {
                if tls
                    .matches
                    .iter()
                    .any(|m| single_match(&m.to_l4(), port, &server.gateway, config.namespace()))
                {
                    return route_filters(ctx, proxy, config, &tls.route, l4_port(server));
                }
            }
        }
    }
    Vec::new()
}

/// The SNI filter chains of a PASSTHROUGH server.
pub(super) fn passthrough_chains(
    ctx: &PushContext,
    proxy: &Proxy,
    server: &GatewayServer,
    taken: &mut TakenSni,
) -> Vec<SniChain> {
    let port = server.port_number();
    let bind = &server.server.bind;
    let mut out = Vec::new();
    for (config, vs) in ctx.virtual_services_for_gateway_proxy(&server.gateway, &proxy.namespace) {
        let hosts: Vec<String> = vs
            .hosts
            .iter()
            .map(|h| vs.resolve_host(h, config.namespace()))
            .collect();
        if !server.matches_any_host(&hosts, config.namespace()) {
            continue;
        }
        for tls in vs.tls_routes() {
            if tls.route.is_empty() {
                continue;
            }
            for m in &tls.matches {
                if !single_match(&m.to_l4(), port, &server.gateway, config.namespace()) {
                    continue;
                }
                // istiod's `CheckDuplicates`: all of the block's hosts are new, or it is skipped.
                if m.sni_hosts.iter().any(|h| taken.get(h) == Some(bind)) {
                    continue;
                }
                for h in &m.sni_hosts {
                    taken.insert(h.clone(), bind.clone());
                }
                let filters = route_filters(ctx, proxy, config, &tls.route, l4_port(server));
                if filters.is_empty() {
                    continue;
                }
                out.push(SniChain {
                    sni_hosts: m.sni_hosts.clone(),
                    filters,
                });
            }
        }
    }
    out
}
