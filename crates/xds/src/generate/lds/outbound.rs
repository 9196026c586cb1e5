//! A sidecar's outbound listeners, as istiod's `buildSidecarOutboundListeners` and
//! `buildSidecarOutboundListener` build them (`listener.go`), conflicts and all.
//!
//! Every service port an egress listener imports becomes a listener entry keyed by bind and
//! port, by its listener protocol (`ModelProtocolToListenerProtocol`):
//! - **HTTP** (HTTP, HTTP2, GRPC, GRPC-WEB): `0.0.0.0_PORT` (or the egress listener's bind),
//!   one HTTP chain routed over RDS as `PORT`. On the wildcard the chain matches the sniffed
//!   plaintext HTTP ALPNs (`http/1.1`, `h2c`) and everything else falls through.
//! - **TCP** (TCP, TLS, HTTPS, MONGO, REDIS, MYSQL): the service's address: an IP gives a
//!   listener `VIP_PORT` of its own; a CIDR a chain matching it on `0.0.0.0_PORT`; none the
//!   wildcard listener (chains told apart by SNI for TLS). A headless service (resolution
//!   NONE, no address) gets a listener per endpoint IP (`ORIGINAL_DST` clusters), the
//!   proxy's own address left out; a ServiceEntry of that kind with no endpoints keeps the
//!   wildcard listener.
//! - **Auto** (no protocol, or one Istio does not know): the TCP chains and an HTTP chain
//!   matching the sniffed ALPNs, on the same address as TCP; on a VIP its routes are the
//!   service's own (`HOST:PORT`), on the wildcard the port's (`PORT`).
//!
//! Conflicts on one bind and port are resolved as istiod does: HTTP meeting TCP (either way)
//! or auto meeting TCP merges the chains and the listener becomes sniffed; auto meeting
//! HTTP replaces it; TCP meeting TCP or auto merges the chains, a chain matching like one
//! already there dropped (the oldest service wins, then by host) and reported; MONGO and
//! MYSQL never share a port with another protocol. A port an egress listener with a port
//! declares is locked: the catch-all listener adds nothing to it. UDP gets no listener.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, FilterChainMatch, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    Rds, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::google::protobuf::{BoolValue, Duration};

use super::super::cds::ads_config_source;
use super::l4::L4Port;
use super::sidecar_l4::{self, WILDCARD};
use super::{
    HcmKind, VIRTUAL_INBOUND_PORT, VIRTUAL_OUTBOUND_PORT, fallthrough_proxy,
    http_connection_manager, socket_address,
};
use crate::resource::{Resource, any};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::service::{Service, is_sniffed_protocol};
use axon_model::sidecar_scope::{EgressScope, SidecarScope};
use chain::{Body, Chain};

/// The ALPNs Envoy's HTTP inspector gives plaintext HTTP (istiod's `plaintextHTTPALPNs`).
pub(super) const PLAINTEXT_HTTP_ALPNS: [&str; 2] = ["http/1.1", "h2c"];
/// The proxy's own ports (capture, health, telemetry): no wildcard listener takes them.
const RESERVED_PORTS: [u32; 4] = [VIRTUAL_OUTBOUND_PORT, VIRTUAL_INBOUND_PORT, 15021, 15090];
/// The transport protocol of plaintext traffic (Envoy's `raw_buffer`).
pub(super) const RAW_BUFFER: &str = "raw_buffer";

/// istiod's `ListenerProtocol` of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListenerProtocol {
    Http,
    Tcp,
    Auto,
}

/// istiod's `ModelProtocolToListenerProtocol`; `None` for UDP (no listener).
pub(super) fn listener_protocol(protocol: &str) -> Option<ListenerProtocol> {
    let upper = protocol.to_ascii_uppercase();
    if upper == "UDP" {
        return None;
    }
    Some(if axon_model::service::is_http_protocol(&upper) {
        ListenerProtocol::Http
    } else if is_sniffed_protocol(&upper) {
        ListenerProtocol::Auto
    } else {
        ListenerProtocol::Tcp
    })
}

/// How an incoming service port meets the entry already on its bind and port.
enum Conflict {
    /// No entry yet.
    None,
    /// Auto over HTTP: the sniffed entry replaces the HTTP one.
    Replace,
    /// HTTP and TCP meet (or auto over TCP): chains merged, the listener sniffed.
    MergeAndSniff,
    /// TCP over TCP or auto: chains merged.
    Merge,
}

/// A listener being built (istiod's `outboundListenerEntry`).
#[derive(Debug)]
struct Entry {
    bind: String,
    port: u32,
    /// Bound to its port (`captureMode: NONE`), not reached through `virtualOutbound`.
    bound: bool,
    /// The protocol of the port it was made for, upper-cased; empty once sniffed.
    protocol: String,
    chains: Vec<Chain>,
    /// Made for an egress listener that declares its port: the catch-all adds nothing.
    locked: bool,
}

impl Entry {
    fn listener_protocol(&self) -> Option<ListenerProtocol> {
        listener_protocol(&self.protocol)
    }

    /// istiod's `mergeTCPFilterChains`.
    fn merge(&mut self, incoming: Vec<Chain>) {
        for chain in incoming {
            // A chain matching like one already there is dropped: the first service keeps
            // the traffic (reported by the model, `service::listener_conflicts`).
            if !self.chains.iter().any(|c| c.conflicts_with(&chain)) {
                self.chains.push(chain);
            }
        }
    }
}

/// One service port to place (istiod's `outboundListenerOpts`).
#[derive(Clone)]
struct Placement<'a> {
    service: &'a Service,
    /// The listener's port and protocol (an egress listener's own, else the service's).
    number: u32,
    protocol: &'a str,
    /// A bind the egress listener or the caller chose (else the service's address or the
    /// wildcard).
    bind: Option<String>,
    bound: bool,
    cidrs: Vec<String>,
}

/// The outbound listeners being built, by bind and port.
struct Listeners<'a> {
    ctx: &'a PushContext,
    proxy: &'a Proxy,
    entries: BTreeMap<(String, u32), Entry>,
}

pub(super) fn listeners(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    fallthrough: &str,
    tel: &super::telemetry::SideTelemetry,
) -> Vec<Resource> {
    let mut out = Listeners {
        ctx,
        proxy,
        entries: BTreeMap::new(),
    };
    for egress in &scope.egress {
        let bound = egress.capture_none || proxy.interception_none;
        let bind = egress
            .bind
            .clone()
            .or_else(|| bound.then(|| "127.0.0.1".to_string()));
        if let Some(port) = egress.port {
            // istiod's `serviceMatchingListenerPort`: a listener with a port takes the
            // services that have that port (an HTTP proxy port takes them all).
            let http_proxy = egress.protocol.eq_ignore_ascii_case("HTTP_PROXY");
            for service in by_creation(&egress.services)
                .into_iter()
                .filter(|s| http_proxy || s.port(port).is_some())
            {
                out.place(
                    egress,
                    Placement {
                        service,
                        number: port,
                        protocol: &egress.protocol,
                        bind: bind.clone(),
                        bound,
                        cidrs: Vec::new(),
                    },
                );
            }
            continue;
        }
        for entry in out.entries.values_mut() {
            entry.locked = true;
        }
        for service in by_creation(&egress.services) {
            for port in &service.ports {
                let placement = Placement {
                    service,
                    number: port.number,
                    protocol: &port.protocol,
                    bind: bind.clone(),
                    bound,
                    cidrs: Vec::new(),
                };
                out.place_service_port(egress, placement);
            }
        }
    }
    out.entries
        .into_values()
        .map(|entry| build(entry, fallthrough, proxy.idle_timeout, tel))
        .collect()
}

impl Listeners<'_> {
    /// A service port of the catch-all listener: a headless service's TCP and sniffed ports
    /// get a listener per endpoint (istiod: "statefulsets/headless services"), everything
    /// else one placement.
    fn place_service_port(&mut self, egress: &EgressScope, placement: Placement) {
        let service = placement.service;
        let tcp_like = matches!(
            listener_protocol(placement.protocol),
            Some(ListenerProtocol::Tcp | ListenerProtocol::Auto)
        );
        if placement.bind.is_some() || !service.is_headless() || !tcp_like {
            self.place(egress, placement);
            return;
        }
        let endpoints = self.ctx.endpoints(&service.hostname, placement.number);
        // istiod: only a plain ServiceEntry (no registry, no selector) with no endpoints
        // falls back to the wildcard listener.
        if !service.from_kubernetes && !service.selects_workloads && endpoints.is_empty() {
            self.place(egress, placement);
            return;
        }
        let mut addresses: Vec<&str> = endpoints
            .iter()
            .map(|e| e.address.as_str())
            .filter(|a| a.parse::<std::net::IpAddr>().is_ok() && *a != self.proxy.ip)
            .collect();
        addresses.sort();
        addresses.dedup();
        for address in addresses {
            self.place(
                egress,
                Placement {
                    bind: Some(address.to_string()),
                    ..placement.clone()
                },
            );
        }
    }

    /// istiod's `buildSidecarOutboundListener`: one service port into the entries.
    fn place(&mut self, egress: &EgressScope, placement: Placement) {
        let Some(protocol) = listener_protocol(placement.protocol) else {
            return;
        };
        let service = placement.service;
        let addresses: Vec<Option<&String>> = match (protocol, &placement.bind) {
            (_, Some(bind)) => vec![Some(bind)],
            (ListenerProtocol::Http, None) => vec![None],
            // istiod makes one service per ServiceEntry address: each gets its listener.
            (_, None) if service.addresses.is_empty() => vec![None],
            (_, None) => {
                let own: Vec<Option<&String>> = service
                    .addresses
                    .iter()
                    .filter(|a| same_family(a, &self.proxy.ip))
                    .map(Some)
                    .collect();
                if own.is_empty() {
                    service.addresses.iter().map(Some).collect()
                } else {
                    own
                }
            }
        };
        for address in addresses {
            let (bind, cidrs) = match address {
                Some(a) if placement.bind.is_some() || !a.contains('/') => {
                    (a.clone(), placement.cidrs.clone())
                }
                // A CIDR: the wildcard listener, a chain matching it.
                Some(cidr) => (WILDCARD.to_string(), vec![cidr.clone()]),
                None => (WILDCARD.to_string(), placement.cidrs.clone()),
            };
            self.place_at(egress, &placement, protocol, bind, cidrs);
        }
    }

    fn place_at(
        &mut self,
        egress: &EgressScope,
        placement: &Placement,
        protocol: ListenerProtocol,
        bind: String,
        cidrs: Vec<String>,
    ) {
        let service = placement.service;
        // istiod's `conflictWithReservedListener`: the proxy's own ports are never a
        // wildcard listener's.
        if bind == WILDCARD && RESERVED_PORTS.contains(&placement.number) {
            return;
        }
        let key = (bind.clone(), placement.number);
        let current = self.entries.get(&key);
        if current.is_some_and(|c| c.locked) {
            return;
        }
        let current_protocol = current.and_then(|c| c.listener_protocol());
        let wildcard = bind == WILDCARD;
        let tcp_chains = |me: &Self| -> Vec<Chain> {
            let listen = L4Port {
                number: placement.number,
                protocol: placement.protocol,
            };
            let sni_bind = if cidrs.is_empty() {
                bind.as_str()
            } else {
                WILDCARD
            };
            sidecar_l4::service_chains(me.ctx, me.proxy, egress, service, listen, sni_bind)
                .into_iter()
                .map(|opts| Chain::tcp(opts, &cidrs))
                .collect()
        };
        let mut entry_protocol = placement.protocol.to_ascii_uppercase();
        let sniffed = |me: &Self| me.sniffed_chains(placement, &bind, tcp_chains(me));
        let (chains, conflict) = match (protocol, current_protocol) {
            (ListenerProtocol::Http, None) => {
                if wildcard {
                    // On the wildcard the HTTP chain matches sniffed HTTP only, and the
                    // listener counts as sniffed.
                    entry_protocol = String::new();
                }
                let rds = placement.number.to_string();
                (vec![Chain::http(rds, wildcard)], Conflict::None)
            }
            (ListenerProtocol::Http, Some(ListenerProtocol::Tcp)) => {
                let rds = placement.number.to_string();
                (vec![Chain::http(rds, wildcard)], Conflict::MergeAndSniff)
            }
            (ListenerProtocol::Http, Some(_)) => return,
            (ListenerProtocol::Tcp, None) => (tcp_chains(self), Conflict::None),
            (ListenerProtocol::Tcp, Some(ListenerProtocol::Http)) => {
                (tcp_chains(self), Conflict::MergeAndSniff)
            }
            (ListenerProtocol::Tcp, Some(_)) => (tcp_chains(self), Conflict::Merge),
            (ListenerProtocol::Auto, None) => (sniffed(self), Conflict::None),
            (ListenerProtocol::Auto, Some(ListenerProtocol::Http)) => {
                (sniffed(self), Conflict::Replace)
            }
            (ListenerProtocol::Auto, Some(ListenerProtocol::Tcp)) => {
                (sniffed(self), Conflict::MergeAndSniff)
            }
            (ListenerProtocol::Auto, Some(ListenerProtocol::Auto)) => {
                (tcp_chains(self), Conflict::Merge)
            }
        };
        if let Some(current) = current {
            let well_known = ["MONGO", "MYSQL"];
            let incoming = placement.protocol.to_ascii_uppercase();
            // As istiod, a MONGO or MYSQL port shares its listener with no other protocol:
            // the later service port gets none.
            if (well_known.contains(&incoming.as_str())
                || well_known.contains(&current.protocol.as_str()))
                && incoming != current.protocol
            {
                return;
            }
        }
        match conflict {
            Conflict::None | Conflict::Replace => {
                self.entries.insert(
                    key,
                    Entry {
                        bind,
                        port: placement.number,
                        bound: placement.bound,
                        protocol: entry_protocol,
                        chains,
                        locked: false,
                    },
                );
            }
            Conflict::MergeAndSniff => {
                if let Some(entry) = self.entries.get_mut(&key) {
                    entry.merge(chains);
                    entry.protocol = String::new();
                }
            }
            Conflict::Merge => {
                if let Some(entry) = self.entries.get_mut(&key) {
                    entry.merge(chains);
                }
            }
        }
    }

    /// A sniffed port's chains: its TCP chains, then an HTTP chain matching the sniffed
    /// ALPNs, routed as the service's own `HOST:PORT` on an address of its own, else as the
    /// port's.
    fn sniffed_chains(&self, placement: &Placement, bind: &str, mut tcp: Vec<Chain>) -> Vec<Chain> {
        let rds = if bind != WILDCARD {
            format!("{}:{}", placement.service.hostname, placement.number)
        } else {
            placement.number.to_string()
        };
        tcp.push(Chain::http(rds, true));
        tcp
    }
}

/// Services in istiod's order for listener conflicts (`SortServicesByCreationTime`): the
/// oldest first (none with a timestamp before any), then by host and namespace.
fn by_creation(services: &[std::sync::Arc<Service>]) -> Vec<&Service> {
    let mut out: Vec<&Service> = services.iter().map(|s| s.as_ref()).collect();
    out.sort_by(|a, b| {
        (a.created, &a.hostname, &a.namespace).cmp(&(b.created, &b.hostname, &b.namespace))
    });
    out
}

/// Whether `address` (an IP or CIDR) is of the family of the proxy's `ip` (istiod listens on
/// a dual-stack service's addresses of the proxy's family only); any, if either is no IP.
fn same_family(address: &str, ip: &str) -> bool {
    let ip_of = |a: &str| a.split('/').next()?.parse::<std::net::IpAddr>().ok();
    match (ip_of(address), ip_of(ip)) {
        (Some(a), Some(b)) => a.is_ipv4() == b.is_ipv4(),
        _ => true,
    }
}

/// istiod's `buildListenerFromEntry`, falling through to `fallthrough_cluster`.
fn build(
    entry: Entry,
    fallthrough_cluster: &str,
    idle_timeout: Option<i128>,
    tel: &super::telemetry::SideTelemetry,
) -> Resource {
    let name = format!("{}_{}", entry.bind, entry.port);
    let tls = entry.chains.iter().any(|c| !c.sni_hosts.is_empty());
    let http = entry.chains.iter().any(|c| c.sniffed_http);
    let inspector = |name: &str, config| ListenerFilter {
        name: name.to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    };
    let mut listener_filters = Vec::new();
    if tls {
        listener_filters.push(inspector(
            "envoy.filters.listener.tls_inspector",
            any(&TlsInspector::default()),
        ));
    }
    if http {
        listener_filters.push(inspector(
            "envoy.filters.listener.http_inspector",
            any(&HttpInspector::default()),
        ));
    }
    let mut listener = Listener {
        name: name.clone(),
        address: Some(socket_address(&entry.bind, entry.port)),
        traffic_direction: TrafficDirection::Outbound as i32,
        continue_on_listener_filters_timeout: true,
        bind_to_port: (!entry.bound).then_some(BoolValue { value: false }),
        listener_filters,
        // The mesh's `protocolDetectionTimeout` (istiod's default: none).
        listener_filters_timeout: Some(Duration {
            seconds: 0,
            nanos: 0,
        }),
        ..Default::default()
    };
    let mut default_chain = None;
    for chain in entry.chains {
        let filters = match &chain.body {
            Body::Tcp(filters) => filters.clone(),
            Body::Http(rds) => vec![http_connection_manager(
                &format!("outbound_{name}"),
                RouteSpecifier::Rds(Rds {
                    config_source: Some(ads_config_source()),
                    route_config_name: rds.clone(),
                }),
                HcmKind::Sidecar,
                idle_timeout,
            )],
        };
        let mut built = FilterChain {
            filters,
            ..Default::default()
        };
        if chain.match_all() {
            default_chain = Some(built);
        } else {
            built.filter_chain_match = Some(chain.filter_chain_match());
            listener.filter_chains.push(built);
        }
    }
    match default_chain {
        Some(chain) if listener.filter_chains.is_empty() => listener.filter_chains = vec![chain],
        Some(chain) => listener.default_filter_chain = Some(chain),
        None => {
            listener.default_filter_chain = Some(FilterChain {
                name: "PassthroughFilterChain".to_string(),
                filter_chain_match: Some(FilterChainMatch::default()),
                filters: vec![fallthrough_proxy(fallthrough_cluster, idle_timeout)],
                ..Default::default()
            })
        }
    }
    tel.apply(&mut listener, false);
    Resource::new(name, &listener)
}

mod chain;
#[cfg(test)]
mod tests;
