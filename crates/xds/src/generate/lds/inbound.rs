//! A sidecar's inbound listeners, as istiod's `buildInboundListeners` builds them
//! (`listener_inbound.go`), with the mutual TLS its PeerAuthentications ask for
//! (`inbound_mtls.rs`).
//!
//! `virtualInbound` on 15006, where iptables sends inbound traffic: the original
//! destination is recovered by the `original_dst` listener filter (and, under TPROXY, the
//! original source kept by `original_src`, mark 1337). Its chains, in istiod's order:
//! - `virtualInbound-blackhole`: a connection to 15006 itself goes nowhere (it would loop);
//! - the passthrough chains for ports no service names: `virtualInbound-catchall-http`
//!   (HTTP, routed as `InboundPassthroughCluster`) and `virtualInbound` (the rest), both to
//!   `InboundPassthroughCluster`, which connects from 127.0.0.6 so that iptables lets the
//!   connection reach the application instead of capturing it again; in the workload's
//!   mode, and again, matched by port, for each port its `portLevelMtls` names that no
//!   service does;
//! - per workload port (the target ports of the services whose endpoints are this proxy),
//!   named `0.0.0.0_PORT`, matched by destination port: the chains of its protocol and
//!   mode (`inbound_mtls::match_options`), each to `inbound|PORT||`.
//!
//! Inbound HTTP connection managers append the client certificate's subject, URI and DNS
//! SANs to `x-forwarded-client-cert` (istiod's `APPEND_FORWARD`). The TLS inspector and the
//! HTTP inspector run only on the ports whose chains need them (istiod's
//! `populateListenerFilters`).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::{TrafficDirection, TransportSocket, transport_socket};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, ListenerFilterChainMatchPredicate,
    listener_filter, listener_filter_chain_match_predicate::{MatchSet, Rule},
};
use envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector;
use envoy_types::pb::envoy::extensions::filters::listener::original_dst::v3::OriginalDst;
use envoy_types::pb::envoy::extensions::filters::listener::original_src::v3::OriginalSrc;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::{
    ForwardClientCertDetails, RouteSpecifier, SetCurrentClientCertDetails,
};
use envoy_types::pb::envoy::r#type::v3::Int32Range;
use envoy_types::pb::google::protobuf::{BoolValue, Duration, UInt32Value};

use super::inbound_mtls::{Carries, MatchOption, PortMtls, TLS, inbound_tls, match_options};
use super::outbound::{ListenerProtocol, PLAINTEXT_HTTP_ALPNS, RAW_BUFFER, listener_protocol};
use super::server_tls::downstream_context;
use super::{
    HcmKind, VIRTUAL_INBOUND_PORT, hcm_config, hcm_filter, inbound_route, socket_address, tcp_proxy,
};
use crate::generate::cds::{BLACK_HOLE, INBOUND_PASSTHROUGH, inbound_cluster_name};
use crate::resource::{Resource, any};
use axon_config::mesh::MeshConfig;
use axon_model::peer_authn::MtlsMode;
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::{InboundPort, SidecarScope};

/// The mark `original_src` sets under TPROXY (istio-iptables routes it back to Envoy).
const TPROXY_MARK: u32 = 1337;
/// Envoy's name of the TLS transport socket.
const TLS_SOCKET: &str = "envoy.transport_sockets.tls";

/// What the chains of one proxy share: its idle timeout, the mesh's TLS settings, whether
/// it runs beside istio's agent, and its security policies' filters.
#[derive(Clone, Copy)]
pub(super) struct Inbound<'a> {
    pub idle_timeout: Option<i128>,
    pub mesh: &'a MeshConfig,
    pub istio_agent: bool,
    pub authz: &'a Authz,
}

/// The security filters of a proxy: on HTTP chains CUSTOM authorization's, the JWT filter
/// of its RequestAuthentications (`authn`), the other AuthorizationPolicies' (`authz`); on
/// TCP chains the AuthorizationPolicies'.
#[derive(Default)]
pub(super) struct Authz {
    http_custom: Vec<HttpFilter>,
    jwt: Option<HttpFilter>,
    http: Vec<HttpFilter>,
    tcp: Vec<Filter>,
}

impl Authz {
    pub(super) fn of(ctx: &PushContext, proxy: &Proxy) -> Authz {
        let (http_custom, http) = super::authz::http_filters(ctx, proxy);
        Authz {
            http_custom,
            jwt: super::authn::jwt_filter(ctx, proxy),
            http,
            tcp: super::authz::network_filters(ctx, proxy),
        }
    }
}

impl<'a> Inbound<'a> {
    pub(super) fn of(proxy: &Proxy, mesh: &'a MeshConfig, authz: &'a Authz) -> Inbound<'a> {
        Inbound {
            idle_timeout: proxy.idle_timeout,
            mesh,
            istio_agent: proxy.istio_agent,
            authz,
        }
    }
}

/// One inbound chain's target: its name, the port it matches (none: any), where it goes.
struct Target<'a> {
    name: &'a str,
    port: Option<u32>,
    cluster: &'a str,
    /// The HTTP route configuration's name and its virtual host's port.
    route: (&'a str, u32),
    protocol: &'a str,
}

/// istiod's `inboundChainForOpts` for one match option.
fn chain(target: &Target, option: &MatchOption, inbound: Inbound) -> FilterChain {
    let filters = match option.carries {
        Carries::Http => {
            let mut hcm = hcm_config(
                &format!("inbound_{}", target.name),
                RouteSpecifier::RouteConfig(inbound_route(
                    target.route.0,
                    target.cluster,
                    target.route.1,
                    target.protocol,
                )),
                HcmKind::Sidecar,
            );
            hcm.forward_client_cert_details = ForwardClientCertDetails::AppendForward as i32;
            hcm.set_current_client_cert_details = Some(SetCurrentClientCertDetails {
                subject: Some(BoolValue { value: true }),
                uri: true,
                dns: true,
                ..Default::default()
            });
            // istiod's order: CUSTOM authorization, authentication, then the other policies.
            let authz = inbound.authz;
            let pre = authz
                .http_custom
                .iter()
                .chain(&authz.jwt)
                .chain(&authz.http)
                .cloned();
            hcm.http_filters.splice(0..0, pre);
            vec![hcm_filter(hcm, inbound.idle_timeout)]
        }
        Carries::Tcp => {
            let mut filters = inbound.authz.tcp.clone();
            filters.push(tcp_proxy(target.cluster, target.cluster));
            filters
        }
    };
    let name = match (target.cluster, option.carries) {
        // istiod's fixed names of the passthrough chains.
        (INBOUND_PASSTHROUGH, Carries::Http) => "virtualInbound-catchall-http",
        _ => target.name,
    };
    FilterChain {
        name: name.to_string(),
        filter_chain_match: Some(FilterChainMatch {
            destination_port: target.port.map(|value| UInt32Value { value }),
            application_protocols: option.alpns.iter().map(|s| s.to_string()).collect(),
            transport_protocol: if option.tls_transport {
                TLS
            } else {
                RAW_BUFFER
            }
            .to_string(),
            ..Default::default()
        }),
        filters,
        transport_socket: option.terminates.then(|| TransportSocket {
            name: TLS_SOCKET.to_string(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(
                &inbound_tls(option.carries, inbound.mesh),
            ))),
        }),
        ..Default::default()
    }
}

/// The chains of `target` of `protocol` in `mode`; a port refused (STRICT without the
/// agent) gets one chain to the `BlackHoleCluster`.
fn chains_for(
    target: &Target,
    protocol: &str,
    mode: MtlsMode,
    inbound: Inbound,
) -> Vec<FilterChain> {
    match PortMtls::for_proxy(mode, inbound.istio_agent) {
        PortMtls::Refuse => vec![FilterChain {
            name: target.name.to_string(),
            filter_chain_match: Some(FilterChainMatch {
                destination_port: target.port.map(|value| UInt32Value { value }),
                ..Default::default()
            }),
            filters: vec![tcp_proxy(BLACK_HOLE, BLACK_HOLE)],
            ..Default::default()
        }],
        PortMtls::Mode(mode) => match_options(listener_protocol(protocol), mode)
            .iter()
            .map(|option| chain(target, option, inbound))
            .collect(),
    }
}

/// The chains of one workload port in `mode`. A Sidecar ingress listener's own `tls`, where
/// the mode is DISABLE, is terminated instead (istiod's `buildInboundListeners`): one chain
/// of TLS, carrying the protocol inside it (HTTPS: HTTP, TLS: TCP).
pub(super) fn port_chains(
    inbound_port: &InboundPort,
    mode: MtlsMode,
    inbound: Inbound,
) -> Vec<FilterChain> {
    let cluster = inbound_cluster_name(inbound_port.port);
    let name = format!("0.0.0.0_{}", inbound_port.port);
    let target = Target {
        name: &name,
        port: Some(inbound_port.port),
        cluster: &cluster,
        route: (&cluster, inbound_port.port),
        protocol: &inbound_port.protocol,
    };
    let served = PortMtls::for_proxy(mode, inbound.istio_agent);
    if let (Some(tls), PortMtls::Mode(MtlsMode::Disable)) = (&inbound_port.tls, served) {
        let carries = match listener_protocol(after_tls_termination(&inbound_port.protocol)) {
            Some(ListenerProtocol::Http) => Carries::Http,
            _ => Carries::Tcp,
        };
        let option = MatchOption {
            alpns: &[],
            tls_transport: true,
            carries,
            terminates: false,
        };
        let mut chain = chain(&target, &option, inbound);
        chain.transport_socket = Some(TransportSocket {
            name: TLS_SOCKET.to_string(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(
                &downstream_context(tls, false, inbound.istio_agent),
            ))),
        });
        return vec![chain];
    }
    chains_for(&target, &inbound_port.protocol, mode, inbound)
}

/// istiod's `AfterTLSTermination`: the protocol inside a terminated TLS.
fn after_tls_termination(protocol: &str) -> &str {
    if protocol.eq_ignore_ascii_case("HTTPS") {
        "HTTP"
    } else if protocol.eq_ignore_ascii_case("TLS") {
        "TCP"
    } else {
        protocol
    }
}

/// istiod's `buildInboundPassthroughChains`: the workload's mode for any port, then each
/// port its `portLevelMtls` names that no workload port does.
fn passthrough_chains(scope: &SidecarScope, inbound: Inbound) -> Vec<FilterChain> {
    let declared = |port: &u32| scope.inbound.iter().any(|i| i.port == *port);
    let ports = std::iter::once((None, scope.mtls.mode)).chain(
        scope
            .mtls
            .per_port
            .iter()
            .filter(|(port, _)| !declared(port))
            .map(|(port, mode)| (Some(*port), *mode)),
    );
    let mut chains = Vec::new();
    for (port, mode) in ports {
        let target = Target {
            name: "virtualInbound",
            port,
            cluster: INBOUND_PASSTHROUGH,
            route: (INBOUND_PASSTHROUGH, 0),
            protocol: "",
        };
        chains.extend(chains_for(&target, "", mode, inbound));
    }
    chains
}

/// istiod's `inboundVirtualListener`.
pub(super) fn virtual_inbound(
    ctx: &PushContext,
    scope: &SidecarScope,
    proxy: &Proxy,
    tel: &super::telemetry::SideTelemetry,
) -> Resource {
    let authz = Authz::of(ctx, proxy);
    let inbound = Inbound::of(proxy, &ctx.mesh, &authz);
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
    chains.extend(passthrough_chains(scope, inbound));
    for port in scope.inbound.iter().filter(|i| i.bind.is_none()) {
        chains.extend(port_chains(port, scope.mtls.for_port(port.port), inbound));
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
    listener_filters.extend(inspectors(&chains));
    let mut listener = Listener {
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
    tel.apply(&mut listener, true);
    Resource::new("virtualInbound", &listener)
}

/// Which inspectors each destination port's chains need (port 0: the chains for any port).
#[derive(Default, Clone, Copy)]
struct Needs {
    tls: bool,
    http: bool,
}

/// istiod's `populateListenerFilters` inspectors: the TLS inspector, then the HTTP
/// inspector, each only where some chain needs it.
pub(super) fn inspectors(chains: &[FilterChain]) -> Vec<ListenerFilter> {
    let mut needs: BTreeMap<u32, Needs> = BTreeMap::new();
    for chain in chains {
        let m = chain.filter_chain_match.clone().unwrap_or_default();
        let port = m.destination_port.map_or(0, |p| p.value);
        let entry = needs.entry(port).or_default();
        entry.tls |= m.transport_protocol == TLS;
        entry.http |= m
            .application_protocols
            .iter()
            .any(|p| PLAINTEXT_HTTP_ALPNS.contains(&p.as_str()));
    }
    let mut out = Vec::new();
    if needs.values().any(|n| n.tls) {
        let default = needs.get(&0).is_some_and(|n| n.tls);
        // Enabled for every port but those that need none, or only for those that do.
        let ports: Vec<u32> = needs
            .iter()
            .filter(|(port, n)| **port != 0 && n.tls != default)
            .map(|(port, _)| *port)
            .collect();
        let disabled = ports_predicate(&ports).map(|p| {
            if default {
                p
            } else {
                ListenerFilterChainMatchPredicate {
                    rule: Some(Rule::NotMatch(Box::new(p))),
                }
            }
        });
        out.push(ListenerFilter {
            name: "envoy.filters.listener.tls_inspector".to_string(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &TlsInspector::default(),
            ))),
            filter_disabled: disabled,
        });
    }
    if needs.values().any(|n| n.http) {
        let ports: Vec<u32> = needs
            .iter()
            .filter(|(_, n)| !n.http)
            .map(|(port, _)| *port)
            .collect();
        out.push(ListenerFilter {
            name: "envoy.filters.listener.http_inspector".to_string(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &HttpInspector::default(),
            ))),
            filter_disabled: ports_predicate(&ports),
        });
    }
    out
}

/// istiod's `listenerPredicateExcludePorts`: matches the given destination ports.
fn ports_predicate(ports: &[u32]) -> Option<ListenerFilterChainMatchPredicate> {
    let mut rules: Vec<Rule> = ports
        .iter()
        .map(|port| {
            Rule::DestinationPortRange(Int32Range {
                start: *port as i32,
                end: *port as i32 + 1,
            })
        })
        .collect();
    match rules.len() {
        0 => None,
        1 => rules
            .pop()
            .map(|rule| ListenerFilterChainMatchPredicate { rule: Some(rule) }),
        _ => Some(ListenerFilterChainMatchPredicate {
            rule: Some(Rule::OrMatch(MatchSet {
                rules: rules
                    .into_iter()
                    .map(|rule| ListenerFilterChainMatchPredicate { rule: Some(rule) })
                    .collect(),
            })),
        }),
    }
}
