//! A sidecar's outbound TCP listeners, as istiod builds them (`listener.go`
//! `buildSidecarOutboundListener` for a TCP port, `tls.go`
//! `buildSidecarOutboundTLSFilterChainOpts` / `…TCPFilterChainOpts`, `buildListenerFromEntry`).
//!
//! A service port whose protocol is not an HTTP one (TCP, TLS, HTTPS, MONGO, …, or none)
//! gets a listener `BIND_PORT` (axon's services have no VIP, so the bind is istiod's
//! `0.0.0.0` for a ServiceEntry without addresses, not bound and reached through
//! `virtualOutbound`; an egress listener's own bind when it declares a TCP port). Each
//! service on that port adds its filter chains, dropped when they match like one already
//! there (istiod's `mergeTCPFilterChains`: the first service, in host order, wins; also
//! when they share an SNI host, which Envoy would refuse):
//! - a TCP port: the first mesh VirtualService `tcp` route of the service's host whose match
//!   blocks match (port, source labels, source namespace, gateway `mesh`), else a
//!   `tcp_proxy` to the service's cluster;
//! - a TLS or HTTPS port: a chain per matching `tls` match block, by its `sniHosts`; with
//!   none, one to the service's cluster, by SNI (the service's host) when the listener is
//!   bound to the wildcard.
//!
//! A listener with SNI chains gets `tls_inspector`; a match-all chain beside others becomes
//! the default chain, and a listener without one falls through to `PassthroughFilterChain`
//! (the original destination, the `egressProxy`, or `BlackHoleCluster` under REGISTRY_ONLY).

use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::google::protobuf::{BoolValue, Duration};

use super::l4::{L4Port, route_filters, single_destination_filters};
use super::{socket_address, tcp_proxy};
use crate::resource::{Resource, any};
use axon_config::host;
use axon_config::istio::L4MatchAttributes;
use axon_model::proxy::Proxy;
use axon_model::push_context::{PushContext, gateway_ref};
use axon_model::service::{Service, is_http_protocol, outbound_cluster_name};
use axon_model::sidecar_scope::EgressScope;

/// istiod's wildcard bind.
pub(super) const WILDCARD: &str = "0.0.0.0";

/// One filter chain of a TCP listener: the SNI hosts it matches (none: all) and its filters.
#[derive(Debug, Clone)]
pub(super) struct ChainOpts {
    pub sni_hosts: Vec<String>,
    pub filters: Vec<Filter>,
}

impl ChainOpts {
    fn match_all(&self) -> bool {
        self.sni_hosts.is_empty() || self.sni_hosts.iter().any(|h| h == "*")
    }

    /// istiod's `conflictsWith`: the same SNI hosts, in any order, `*` ignored; and, as
    /// Envoy refuses two chains that match one server name alike, chains that share one.
    fn conflicts_with(&self, other: &ChainOpts) -> bool {
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

/// Whether a sidecar port of `protocol` gets a TCP listener: every protocol but the HTTP
/// ones and UDP (which istiod gives no listener). istiod sniffs a port with no protocol
/// (HTTP and TCP chains); axon proxies it as TCP.
pub(super) fn is_tcp(protocol: &str) -> bool {
    !is_http_protocol(protocol) && !protocol.eq_ignore_ascii_case("UDP")
}

/// A TCP listener being built (istiod's `outboundListenerEntry`).
#[derive(Debug)]
pub(super) struct TcpEntry {
    pub bind: String,
    pub port: u32,
    /// Bound to its port (an egress listener with `captureMode: NONE`), not reached through
    /// `virtualOutbound`.
    pub bound: bool,
    pub chains: Vec<ChainOpts>,
}

impl TcpEntry {
    pub(super) fn new(bind: &str, port: u32, bound: bool) -> TcpEntry {
        TcpEntry {
            bind: bind.to_string(),
            port,
            bound,
            chains: Vec::new(),
        }
    }

    /// istiod's `mergeTCPFilterChains`: a chain that matches like one already there is
    /// dropped.
    pub(super) fn merge(&mut self, incoming: Vec<ChainOpts>) {
        for chain in incoming {
            if !self.chains.iter().any(|c| c.conflicts_with(&chain)) {
                self.chains.push(chain);
            }
        }
    }

    /// istiod's `buildListenerFromEntry`, falling through to `fallthrough_cluster`.
    pub(super) fn build(self, fallthrough_cluster: &str) -> Resource {
        let name = format!("{}_{}", self.bind, self.port);
        let sni = self.chains.iter().any(|c| !c.sni_hosts.is_empty());
        let mut listener = Listener {
            name: name.clone(),
            address: Some(socket_address(&self.bind, self.port)),
            traffic_direction: TrafficDirection::Outbound as i32,
            continue_on_listener_filters_timeout: true,
            bind_to_port: (!self.bound).then_some(BoolValue { value: false }),
            listener_filters: sni
                .then(|| ListenerFilter {
                    name: "envoy.filters.listener.tls_inspector".to_string(),
                    config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                        &TlsInspector::default(),
                    ))),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            listener_filters_timeout: Some(Duration {
                seconds: 0,
                nanos: 0,
            }),
            ..Default::default()
        };
        let mut default_chain = None;
        for opts in self.chains {
            let mut chain = FilterChain {
                filters: opts.filters.clone(),
                ..Default::default()
            };
            if opts.match_all() {
                default_chain = Some(chain);
            } else {
                let mut names = opts.sni_hosts.clone();
                names.sort();
                chain.filter_chain_match = Some(FilterChainMatch {
                    server_names: names,
                    ..Default::default()
                });
                listener.filter_chains.push(chain);
            }
        }
        match default_chain {
            Some(chain) if listener.filter_chains.is_empty() => {
                listener.filter_chains = vec![chain]
            }
            Some(chain) => listener.default_filter_chain = Some(chain),
            None => {
                listener.default_filter_chain = Some(FilterChain {
                    name: "PassthroughFilterChain".to_string(),
                    filter_chain_match: Some(FilterChainMatch::default()),
                    filters: vec![tcp_proxy(fallthrough_cluster, fallthrough_cluster)],
                    ..Default::default()
                })
            }
        }
        Resource::new(name, &listener)
    }
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
                .any(|h| host::matches(&host::resolve(h, c.namespace()), &service.hostname))
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
                    // istiod's `hashRuntimeTLSMatchPredicates`: one chain per SNI set.
                    if !handled.insert(m.sni_hosts.join(",")) {
                        continue;
                    }
                    out.push(ChainOpts {
                        sni_hosts: m.sni_hosts.clone(),
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
            filters: default_filters(ctx, proxy, service, port),
        });
        return out;
    }
    for (config, vs) in &configs {
        for tcp in vs.tcp_routes().into_iter().filter(|t| !t.route.is_empty()) {
            if tcp.matches.is_empty()
                || tcp
                    .matches
                    .iter()
                    .any(|m| sidecar_match(m, port.number, proxy, config.namespace()))
            {
                out.push(ChainOpts {
                    sni_hosts: Vec::new(),
                    filters: route_filters(ctx, proxy, config, &tcp.route, port),
                });
                return out;
            }
        }
    }
    out.push(ChainOpts {
        sni_hosts: Vec::new(),
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
