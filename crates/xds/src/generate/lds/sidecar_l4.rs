//! The TCP and TLS filter chains of a service on a sidecar's outbound listener, as istiod
//! builds them (`tls.go` `buildSidecarOutboundTLSFilterChainOpts` /
//! `…TCPFilterChainOpts`); `lds/outbound.rs` places them on listeners.
//!
//! - a TCP port: the first mesh VirtualService `tcp` route of the service's host whose match
//!   blocks match (port, source labels, source namespace, gateway `mesh`), else a
//!   `tcp_proxy` to the service's cluster;
//! - a TLS or HTTPS port: a chain per matching `tls` match block, by its `sniHosts`; with
//!   none, one to the service's cluster, by SNI (the service's host) when the listener is
//!   bound to the wildcard (a service without an address of its own, or with a CIDR).
//!
//! Two chains conflict when they match alike (istiod's `conflictsWith`) or, as Envoy would
//! refuse them, share an SNI host.

use envoy_types::pb::envoy::config::listener::v3::Filter;

use super::l4::{L4Port, route_filters, single_destination_filters};
use axon_config::host;
use axon_config::istio::L4MatchAttributes;
use axon_model::proxy::Proxy;
use axon_model::push_context::{PushContext, gateway_ref};
use axon_model::service::{Service, outbound_cluster_name};
use axon_model::sidecar_scope::EgressScope;

/// istiod's wildcard bind.
pub(super) const WILDCARD: &str = "0.0.0.0";

/// One filter chain of a TCP listener: the SNI hosts it matches (none: all), the
/// destination subnets a route's match gives it (none: the listener's own), and its filters.
#[derive(Debug, Clone)]
pub(super) struct ChainOpts {
    pub sni_hosts: Vec<String>,
    pub destination_subnets: Vec<String>,
    pub filters: Vec<Filter>,
}

impl ChainOpts {
    /// istiod's `conflictsWith`: the same SNI hosts, in any order, `*` ignored; and, as
    /// Envoy refuses two chains that match one server name alike, chains that share one.
    pub(super) fn conflicts_with(&self, other: &ChainOpts) -> bool {
        let set = |c: &ChainOpts| {
            c.sni_hosts
                .iter()
                .filter(|h| *h != "*")
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
        };
        let (a, b) = (set(self), set(other));
        a == b || !a.is_disjoint(&b)
    }
}

/// TLS and HTTPS ports: filter chains by SNI.
pub(super) fn is_tls(protocol: &str) -> bool {
    matches!(protocol.to_ascii_uppercase().as_str(), "TLS" | "HTTPS")
}

/// istiod's `matchTCP` / `matchTLS` for a sidecar: the block's port (0: any), its
/// `sourceLabels` among the proxy's, its `sourceNamespace` the proxy's, its gateways (none:
/// any) including `mesh`.
pub(super) fn sidecar_match(m: &L4MatchAttributes, port: u32, proxy: &Proxy, vs_ns: &str) -> bool {
    (m.port == 0 || m.port == port)
        && proxy.matches_selector(&m.source_labels)
        && (m.source_namespace.is_empty() || m.source_namespace == proxy.namespace)
        && (m.gateways.is_empty() || m.gateways.iter().any(|g| gateway_ref(g, vs_ns) == "mesh"))
}

/// istiod's `buildSidecarOutboundTCPListenerOpts` for `service` on listener `port` bound to
/// `bind`.
pub(super) fn service_chains(
    ctx: &PushContext,
    proxy: &Proxy,
    egress: &EgressScope,
    service: &Service,
    port: L4Port,
    bind: &str,
) -> Vec<ChainOpts> {
    // istiod's `getConfigsForHost`: every imported VirtualService with a host matching it.
    let configs: Vec<_> = egress
        .virtual_services
        .iter()
        .filter_map(|c| match &c.spec {
            axon_config::config::Spec::VirtualService(vs) => vs
                .hosts
                .iter()
                .any(|h| host::matches(&vs.resolve_host(h, c.namespace()), &service.hostname))
                .then_some((c.as_ref(), vs)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    if is_tls(port.protocol) {
        let mut handled = std::collections::BTreeSet::new();
        for (config, vs) in &configs {
            for tls in vs.tls_routes().into_iter().filter(|t| !t.route.is_empty()) {
                for m in &tls.matches {
                    if !sidecar_match(&m.to_l4(), port.number, proxy, config.namespace()) {
                        continue;
                    }
                    // istiod's `hashRuntimeTLSMatchPredicates`: one chain per SNI set and
                    // destination subnets.
                    let hash = format!(
                        "{}|{}",
                        m.sni_hosts.join(","),
                        m.destination_subnets.join(",")
                    );
                    if !handled.insert(hash) {
                        continue;
                    }
                    out.push(ChainOpts {
                        sni_hosts: m.sni_hosts.clone(),
                        destination_subnets: m.destination_subnets.clone(),
                        filters: route_filters(ctx, proxy, config, &tls.route, port),
                    });
                }
            }
        }
        if !out.is_empty() {
            return out;
        }
        let sni_hosts = if bind == WILDCARD {
            vec![service.hostname.clone()]
        } else {
            Vec::new()
        };
        out.push(ChainOpts {
            sni_hosts,
            destination_subnets: Vec::new(),
            filters: default_filters(ctx, proxy, service, port),
        });
        return out;
    }
    // istiod's `buildSidecarOutboundTCPFilterChainOpts`: the first route whose match (or no
    // match) takes any destination ends the search; a route whose matching blocks all name
    // `destinationSubnets` is a chain for those subnets, and the search goes on.
    for (config, vs) in &configs {
        for tcp in vs.tcp_routes().into_iter().filter(|t| !t.route.is_empty()) {
            let filters = || route_filters(ctx, proxy, config, &tcp.route, port);
            let matching: Vec<&L4MatchAttributes> = tcp
                .matches
                .iter()
                .filter(|m| sidecar_match(m, port.number, proxy, config.namespace()))
                .collect();
            if tcp.matches.is_empty() || matching.iter().any(|m| m.destination_subnets.is_empty()) {
                out.push(ChainOpts {
                    sni_hosts: Vec::new(),
                    destination_subnets: Vec::new(),
                    filters: filters(),
                });
                return out;
            }
            let subnets: Vec<String> = matching
                .iter()
                .flat_map(|m| m.destination_subnets.iter().cloned())
                .collect();
            if !subnets.is_empty() {
                out.push(ChainOpts {
                    sni_hosts: Vec::new(),
                    destination_subnets: subnets,
                    filters: filters(),
                });
            }
        }
    }
    out.push(ChainOpts {
        sni_hosts: Vec::new(),
        destination_subnets: Vec::new(),
        filters: default_filters(ctx, proxy, service, port),
    });
    out
}

/// The service's own cluster: its only port's, else the listener's.
fn default_filters(
    ctx: &PushContext,
    proxy: &Proxy,
    service: &Service,
    port: L4Port,
) -> Vec<Filter> {
    let number = match service.ports.as_slice() {
        [only] => only.number,
        _ => port.number,
    };
    let cluster = outbound_cluster_name(number, "", &service.hostname);
    single_destination_filters(ctx, proxy, &service.hostname, cluster, port)
}

#[cfg(test)]
mod tests;
