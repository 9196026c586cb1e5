//! A sidecar's inbound listeners, as istiod's `buildInboundListeners` builds them
//! (`listener_inbound.go`) for a mesh without mutual TLS (plaintext chains only; mTLS is a
//! later issue).
//!
//! `virtualInbound` on 15006, where iptables sends inbound traffic: the original
//! destination is recovered by the `original_dst` listener filter (and, under TPROXY, the
//! original source kept by `original_src`, mark 1337). Its chains, in istiod's order:
//! - `virtualInbound-blackhole`: a connection to 15006 itself goes nowhere (it would loop);
//! - the passthrough chains for ports no service names: `virtualInbound-catchall-http`
//!   (sniffed HTTP, routed as `InboundPassthroughCluster`) and `virtualInbound` (the rest),
//!   both to `InboundPassthroughCluster`, which connects from 127.0.0.6 so that iptables
//!   lets the connection reach the application instead of capturing it again;
//! - per workload port (the target ports of the services whose endpoints are this proxy),
//!   named `0.0.0.0_PORT`, matched by destination port over `raw_buffer`: an HTTP port one
//!   HTTP chain, a TCP port one TCP chain, a sniffed port both (the HTTP one matching the
//!   plaintext HTTP ALPNs), each to `inbound|PORT||`.
//!
//! The HTTP inspector runs only where a chain needs it: it is disabled for the ports whose
//! chains match no ALPN (istiod's `buildHTTPInspector`).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, FilterChainMatch, Listener, ListenerFilter, ListenerFilterChainMatchPredicate,
    listener_filter, listener_filter_chain_match_predicate::{MatchSet, Rule},
};
use envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector;
use envoy_types::pb::envoy::extensions::filters::listener::original_dst::v3::OriginalDst;
use envoy_types::pb::envoy::extensions::filters::listener::original_src::v3::OriginalSrc;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::r#type::v3::Int32Range;
use envoy_types::pb::google::protobuf::{BoolValue, Duration, UInt32Value};

use super::outbound::{ListenerProtocol, PLAINTEXT_HTTP_ALPNS, RAW_BUFFER, listener_protocol};
use super::{
    HcmKind, VIRTUAL_INBOUND_PORT, http_connection_manager, inbound_route, socket_address,
    tcp_proxy,
};
use crate::generate::cds::{BLACK_HOLE, INBOUND_PASSTHROUGH, inbound_cluster_name};
use crate::resource::{Resource, any};
use axon_model::proxy::Proxy;
use axon_model::sidecar_scope::{InboundPort, SidecarScope};

/// The mark `original_src` sets under TPROXY (istio-iptables routes it back to Envoy).
const TPROXY_MARK: u32 = 1337;

/// What a chain carries: an HTTP connection manager or a `tcp_proxy`, to `cluster`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Http,
    Tcp,
}

/// One inbound chain: its name, the port it matches (none: any), whether it matches the
/// sniffed HTTP ALPNs, what it carries and where to.
struct Spec<'a> {
    name: &'a str,
    port: Option<u32>,
    sniffed_http: bool,
    kind: Kind,
    cluster: &'a str,
    /// The HTTP route configuration's name and its virtual host's port.
    route: (&'a str, u32),
    protocol: &'a str,
}

fn chain(spec: Spec, idle_timeout: Option<i128>) -> FilterChain {
    let filter = match spec.kind {
        Kind::Http => http_connection_manager(
            &format!("inbound_{}", spec.name),
            RouteSpecifier::RouteConfig(inbound_route(
                spec.route.0,
                spec.cluster,
                spec.route.1,
                spec.protocol,
            )),
            HcmKind::Sidecar,
            idle_timeout,
        ),
        Kind::Tcp => tcp_proxy(spec.cluster, spec.cluster),
    };
    FilterChain {
        name: spec.name.to_string(),
        filter_chain_match: Some(FilterChainMatch {
            destination_port: spec.port.map(|value| UInt32Value { value }),
            application_protocols: if spec.sniffed_http {
                PLAINTEXT_HTTP_ALPNS.iter().map(|s| s.to_string()).collect()
            } else {
                Vec::new()
            },
            transport_protocol: RAW_BUFFER.to_string(),
            ..Default::default()
        }),
        filters: vec![filter],
        ..Default::default()
    }
}

/// The chains of one workload port (istiod's `inboundChainForOpts` with the plaintext
/// match options of its protocol).
pub(super) fn port_chains(inbound: &InboundPort, idle_timeout: Option<i128>) -> Vec<FilterChain> {
    let cluster = inbound_cluster_name(inbound.port);
    let name = format!("0.0.0.0_{}", inbound.port);
    let spec = |kind, sniffed_http| Spec {
        name: &name,
        port: Some(inbound.port),
        sniffed_http,
        kind,
        cluster: &cluster,
        route: (&cluster, inbound.port),
        protocol: &inbound.protocol,
    };
    match listener_protocol(&inbound.protocol) {
        Some(ListenerProtocol::Http) => vec![chain(spec(Kind::Http, false), idle_timeout)],
        Some(ListenerProtocol::Auto) => vec![
            chain(spec(Kind::Http, true), idle_timeout),
            chain(spec(Kind::Tcp, false), idle_timeout),
        ],
        Some(ListenerProtocol::Tcp) | None => vec![chain(spec(Kind::Tcp, false), idle_timeout)],
    }
}

/// istiod's `inboundVirtualListener`.
pub(super) fn virtual_inbound(scope: &SidecarScope, proxy: &Proxy) -> Resource {
    let idle_timeout = proxy.idle_timeout;
    let mut chains = vec![FilterChain {
        name: "virtualInbound-blackhole".to_string(),
        filter_chain_match: Some(FilterChainMatch {
            destination_port: Some(UInt32Value {
                value: VIRTUAL_INBOUND_PORT,
            }),
            ..Default::default()
        }),
        filters: vec![tcp_proxy(BLACK_HOLE, BLACK_HOLE)],
        ..Default::default()
    }];
    let passthrough = |name, kind, sniffed_http| Spec {
        name,
        port: None,
        sniffed_http,
        kind,
        cluster: INBOUND_PASSTHROUGH,
        route: (INBOUND_PASSTHROUGH, 0),
        protocol: "",
    };
    chains.push(chain(
        passthrough("virtualInbound-catchall-http", Kind::Http, true),
        idle_timeout,
    ));
    chains.push(chain(
        passthrough("virtualInbound", Kind::Tcp, false),
        idle_timeout,
    ));
    for inbound in scope.inbound.iter().filter(|i| i.bind.is_none()) {
        chains.extend(port_chains(inbound, idle_timeout));
    }
    let mut listener_filters = vec![ListenerFilter {
        name: "envoy.filters.listener.original_dst".to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &OriginalDst::default(),
        ))),
        ..Default::default()
    }];
    if proxy.tproxy {
        listener_filters.push(ListenerFilter {
            name: "envoy.filters.listener.original_src".to_string(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &OriginalSrc {
                    mark: TPROXY_MARK,
                    ..Default::default()
                },
            ))),
            ..Default::default()
        });
    }
    listener_filters.push(http_inspector(&chains));
    let listener = Listener {
        name: "virtualInbound".to_string(),
        address: Some(socket_address("0.0.0.0", VIRTUAL_INBOUND_PORT)),
        transparent: proxy.tproxy.then_some(BoolValue { value: true }),
        traffic_direction: TrafficDirection::Inbound as i32,
        continue_on_listener_filters_timeout: true,
        listener_filters,
        // The mesh's `protocolDetectionTimeout` (istiod's default: none).
        listener_filters_timeout: Some(Duration {
            seconds: 0,
            nanos: 0,
        }),
        filter_chains: chains,
        ..Default::default()
    };
    Resource::new("virtualInbound", &listener)
}

/// istiod's `buildHTTPInspector`: the HTTP inspector, disabled for the destination ports
/// whose chains need no ALPN (the passthrough chains, port 0, always do).
fn http_inspector(chains: &[FilterChain]) -> ListenerFilter {
    let mut needs: BTreeMap<u32, bool> = BTreeMap::new();
    for chain in chains {
        let m = chain.filter_chain_match.clone().unwrap_or_default();
        let port = m.destination_port.map_or(0, |p| p.value);
        let http = m
            .application_protocols
            .iter()
            .any(|p| PLAINTEXT_HTTP_ALPNS.contains(&p.as_str()));
        *needs.entry(port).or_default() |= http;
    }
    let disabled: Vec<Rule> = needs
        .into_iter()
        .filter(|(_, http)| !http)
        .map(|(port, _)| {
            Rule::DestinationPortRange(Int32Range {
                start: port as i32,
                end: port as i32 + 1,
            })
        })
        .collect();
    let filter_disabled = match disabled.len() {
        0 => None,
        1 => disabled
            .into_iter()
            .next()
            .map(|rule| ListenerFilterChainMatchPredicate { rule: Some(rule) }),
        _ => Some(ListenerFilterChainMatchPredicate {
            rule: Some(Rule::OrMatch(MatchSet {
                rules: disabled
                    .into_iter()
                    .map(|rule| ListenerFilterChainMatchPredicate { rule: Some(rule) })
                    .collect(),
            })),
        }),
    };
    ListenerFilter {
        name: "envoy.filters.listener.http_inspector".to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &HttpInspector::default(),
        ))),
        filter_disabled,
    }
}
