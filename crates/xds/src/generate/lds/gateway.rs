//! A gateway's listeners, as istiod's `buildGatewayListeners` makes them from the merged
//! gateway (`model::gateway`): one bound listener `BIND_PORT` per port and bind, with a filter
//! chain per server (one for all plaintext HTTP servers of a port):
//!
//! - plaintext HTTP: an HTTP connection manager taking `http.PORT` over RDS (with the
//!   `grpc_web` filter on a GRPC-WEB port);
//! - HTTPS terminated: matched by SNI (the server's hosts), TLS from `server_tls`, an HTTP
//!   connection manager taking `https.PORT.PORT_NAME.GATEWAY.NAMESPACE`;
//! - TCP, and TLS terminated: the server's `tcp` route as a `tcp_proxy` (`gateway_l4`), behind
//!   TLS and matched by SNI for the latter;
//! - PASSTHROUGH: a chain per `tls` route match block, by its `sniHosts`, to its `tcp_proxy`.
//!
//! A listener matching by SNI or terminating TLS has the `tls_inspector`; every chain has
//! istiod's 15 s transport-socket connect timeout. A terminating server whose credential is
//! not available ([`gateway::credential_available`]) has no chain; a listener with no chain
//! is not sent, as istiod.

use envoy_types::pb::envoy::config::core::v3::{
    TrafficDirection, TransportSocket, transport_socket,
};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::http::grpc_web::v3::GrpcWeb;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, Rds,
    http_connection_manager::{
        ForwardClientCertDetails, RouteSpecifier, SetCurrentClientCertDetails,
    },
    http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use envoy_types::pb::google::protobuf::{BoolValue, Duration};

use super::authn;
use super::gateway_l4::{TakenSni, passthrough_chains, tcp_filters};
use super::server_tls::downstream_context;
use super::{HcmKind, hcm_config, hcm_filter, socket_address};
use crate::generate::cds::ads_config_source;
use crate::resource::{Resource, any};
use axon_model::gateway::{self, GatewayServer, MergedServers, ServerKind, ServerProtocol};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;

/// istiod's `gatewayTransportSocketConnectTimeout` default.
const TRANSPORT_SOCKET_CONNECT_TIMEOUT: i64 = 15;

/// One filter chain before it is built (istiod's `filterChainOpts`).
struct Chain {
    sni_hosts: Vec<String>,
    tls: Option<DownstreamTlsContext>,
    filters: Vec<Filter>,
}

pub(super) fn listeners(
    ctx: &PushContext,
    proxy: &Proxy,
    tel: &super::telemetry::SideTelemetry,
) -> Vec<Resource> {
    let merged = gateway::merge(ctx, proxy);
    // Listeners by name, in the order their first port was seen.
    let mut built: Vec<(String, &str, u32, Vec<Chain>)> = Vec::new();
    let mut taken: std::collections::BTreeMap<String, TakenSni> = Default::default();
    for ms in &merged.ports {
        let bind = ms.port.bind_address();
        let name = format!("{bind}_{}", ms.port.number);
        let chains = port_chains(ctx, proxy, ms, taken.entry(name.clone()).or_default());
        match built.iter_mut().find(|(n, ..)| *n == name) {
            Some((_, _, _, existing)) => existing.extend(chains),
            None => built.push((name, bind, ms.port.number, chains)),
        }
    }
    built
        .into_iter()
        .filter(|(.., chains)| !chains.is_empty())
        .map(|(name, bind, port, chains)| listener(name, bind, port, chains, tel))
        .collect()
}

/// The chains of the servers on one server port.
fn port_chains(
    ctx: &PushContext,
    proxy: &Proxy,
    ms: &MergedServers,
    taken: &mut TakenSni,
) -> Vec<Chain> {
    let listener_name = format!("{}_{}", ms.port.bind_address(), ms.port.number);
    if ServerProtocol::parse(&ms.port.protocol) == ServerProtocol::Http {
        let grpc_web = ms.port.protocol.eq_ignore_ascii_case("GRPC-WEB");
        let stat_prefix = format!("outbound_{listener_name}");
        return vec![Chain {
            sni_hosts: Vec::new(),
            tls: None,
            filters: vec![hcm(ctx, &stat_prefix, &ms.route_name, grpc_web, proxy)],
        }];
    }
    let mut out = Vec::new();
    for server in &ms.servers {
        let Some(tls) = &server.tls else {
            let filters = tcp_filters(ctx, proxy, server);
            if !filters.is_empty() {
                out.push(Chain {
                    sni_hosts: Vec::new(),
                    tls: None,
                    filters,
                });
            }
            continue;
        };
        match server.kind() {
            ServerKind::HttpsTerminated | ServerKind::TlsTerminated
                if !credentials_available(ctx, proxy, server) => {}
            ServerKind::HttpsTerminated => {
                let stat_prefix = if server.server.name.is_empty() {
                    format!("outbound_{listener_name}")
                } else {
                    server.server.name.clone()
                };
                let grpc_web = false;
                out.push(Chain {
                    sni_hosts: server.sni_hosts.clone(),
                    tls: Some(downstream_context(tls, false, proxy.istio_agent)),
                    filters: vec![hcm(ctx, &stat_prefix, &server.route_name, grpc_web, proxy)],
                });
            }
            ServerKind::TlsTerminated => {
                let filters = tcp_filters(ctx, proxy, server);
                if !filters.is_empty() {
                    out.push(Chain {
                        sni_hosts: server.sni_hosts.clone(),
                        tls: Some(downstream_context(tls, true, proxy.istio_agent)),
                        filters,
                    });
                }
            }
            ServerKind::Passthrough => {
                out.extend(
                    passthrough_chains(ctx, proxy, server, taken)
                        .into_iter()
                        .map(|c| Chain {
                            sni_hosts: c.sni_hosts,
                            tls: None,
                            filters: c.filters,
                        }),
                );
            }
            // Reported at load (`model::applied`): no SNI-DNAT clusters to forward to.
            ServerKind::AutoPassthrough | ServerKind::Http | ServerKind::Tcp => {}
        }
    }
    // The AuthorizationPolicies of the gateway, before each TCP chain's proxy.
    let rbac = super::authz::network_filters(ctx, proxy);
    if !rbac.is_empty() {
        for chain in out.iter_mut().filter(|c| !is_hcm(&c.filters)) {
            chain.filters.splice(0..0, rbac.iter().cloned());
        }
    }
    out
}

fn is_hcm(filters: &[Filter]) -> bool {
    filters
        .iter()
        .any(|f| f.name == "envoy.filters.network.http_connection_manager")
}

/// Whether every credential a terminating server names is available to `proxy`.
fn credentials_available(ctx: &PushContext, proxy: &Proxy, server: &GatewayServer) -> bool {
    let Some(tls) = &server.tls else { return true };
    std::iter::once(&tls.credential_name)
        .chain(&tls.credential_names)
        .filter(|c| !c.is_empty())
        .all(|c| gateway::credential_available(ctx, &proxy.namespace, c))
}

/// A gateway's HTTP connection manager (istiod's `buildGatewayConnectionManager`): routes
/// over RDS as `route`, the client certificate's details forwarded (`SANITIZE_SET`), and the
/// `grpc_web` filter on a GRPC-WEB port, after the authorization and authentication filters
/// (CUSTOM's, the JWT filter of its RequestAuthentications (`authn`), the other policies').
fn hcm(ctx: &PushContext, stat_prefix: &str, route: &str, grpc_web: bool, proxy: &Proxy) -> Filter {
    let mut hcm = hcm_config(
        stat_prefix,
        RouteSpecifier::Rds(Rds {
            config_source: Some(ads_config_source()),
            route_config_name: route.to_string(),
        }),
        HcmKind::Gateway,
    );
    hcm.forward_client_cert_details = ForwardClientCertDetails::SanitizeSet as i32;
    // istiod's `gatewayTopology.numTrustedProxies` (the client is then the address that many
    // hops back in `X-Forwarded-For`: `remote.ip`, `remoteIpBlocks`).
    hcm.xff_num_trusted_hops = proxy.num_trusted_proxies;
    hcm.set_current_client_cert_details = Some(SetCurrentClientCertDetails {
        subject: Some(BoolValue { value: true }),
        cert: true,
        dns: true,
        uri: true,
        ..Default::default()
    });
    if grpc_web {
        hcm.http_filters.insert(
            0,
            HttpFilter {
                name: "envoy.filters.http.grpc_web".to_string(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(
                    &GrpcWeb::default(),
                ))),
                ..Default::default()
            },
        );
    }
    // istiod's order: CUSTOM authorization, authentication, then the other policies.
    let (custom, local) = super::authz::http_filters(ctx, proxy);
    let jwt = authn::jwt_filter(ctx, proxy);
    hcm.http_filters
        .splice(0..0, custom.into_iter().chain(jwt).chain(local));
    hcm_filter(hcm, proxy.idle_timeout)
}

/// istiod's `buildGatewayListener`.
fn listener(
    name: String,
    bind: &str,
    port: u32,
    chains: Vec<Chain>,
    tel: &super::telemetry::SideTelemetry,
) -> Resource {
    let inspect = chains.iter().any(|c| {
        !c.sni_hosts.is_empty()
            || c.tls
                .as_ref()
                .and_then(|t| t.common_tls_context.as_ref())
                .is_some_and(|t| !t.alpn_protocols.is_empty())
    });
    let listener_filters = if inspect {
        vec![ListenerFilter {
            name: "envoy.filters.listener.tls_inspector".to_string(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &TlsInspector::default(),
            ))),
            ..Default::default()
        }]
    } else {
        Vec::new()
    };
    let mut listener = Listener {
        name: name.clone(),
        address: Some(socket_address(bind, port)),
        traffic_direction: TrafficDirection::Outbound as i32,
        listener_filters,
        filter_chains: chains.into_iter().map(filter_chain).collect(),
        ..Default::default()
    };
    tel.apply(&mut listener, true);
    Resource::new(name, &listener)
}

/// istiod's `toFilterChainMatch` (the SNI hosts, sorted; none when one is `*`) and
/// `buildDownstreamTLSTransportSocket`.
fn filter_chain(chain: Chain) -> FilterChain {
    let mut sni = chain.sni_hosts;
    sni.sort();
    let filter_chain_match = (!sni.is_empty()).then(|| FilterChainMatch {
        server_names: if sni.iter().any(|h| h == "*") {
            Vec::new()
        } else {
            sni
        },
        ..Default::default()
    });
    FilterChain {
        filter_chain_match,
        filters: chain.filters,
        transport_socket: chain.tls.map(|t| TransportSocket {
            name: "envoy.transport_sockets.tls".to_string(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(&t))),
        }),
        transport_socket_connect_timeout: Some(Duration {
            seconds: TRANSPORT_SOCKET_CONNECT_TIMEOUT,
            nanos: 0,
        }),
        ..Default::default()
    }
}
