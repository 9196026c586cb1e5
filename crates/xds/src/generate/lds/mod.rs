//! LDS. A gateway's listeners are `lds/gateway.rs`'s. A sidecar's, as istiod builds them:
//! - outbound (`lds/outbound.rs`): a listener per service address and port it sees
//!   (`VIP_PORT` for TCP and sniffed ports of a service with an address, `0.0.0.0_PORT`
//!   for HTTP ports and services without one, a listener per endpoint of a headless
//!   service), not bound and reached through `virtualOutbound` on 15001; a bound one per
//!   Sidecar egress listener with `captureMode: NONE` (how an application calls it without
//!   iptables); the TCP and TLS chains are `lds/sidecar_l4.rs`'s;
//! - inbound (`lds/inbound.rs`): `virtualInbound` on 15006 with a chain per workload port
//!   and the passthrough chains (a Sidecar ingress listener bound to its port,
//!   `captureMode: NONE`, gets a listener `BIND_PORT` instead).
//!
//! What no listener claims falls through as the scope's outbound traffic policy says
//! (`fallthrough_cluster()`). A proxy that runs with `INTERCEPTION_MODE: NONE` gets no
//! virtual listeners; one with `TPROXY` gets transparent ones.

use envoy_types::pb::envoy::config::core::v3::{
    Address, HttpProtocolOptions, SocketAddress, TrafficDirection, address,
    socket_address::PortSpecifier,
};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, filter,
};
use envoy_types::pb::envoy::config::route::v3::{
    RetryPolicy, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
    route::Action,
    route_action::{ClusterSpecifier, MaxStreamDuration},
    route_match::PathSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault as Fault;
use envoy_types::pb::envoy::extensions::filters::http::grpc_stats::v3::{
    FilterConfig as GrpcStats, filter_config::PerMethodStatSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter,
    http_connection_manager::{PathWithEscapedSlashesAction, RouteSpecifier, UpgradeConfig},
    http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier as TcpCluster,
};
use envoy_types::pb::google::protobuf::{Any, BoolValue, Duration, UInt32Value};

mod authn;
mod authz;
mod gateway;
mod gateway_l4;
mod inbound;
mod inbound_mtls;
mod l4;
mod outbound;
mod server_tls;
mod sidecar_l4;
mod telemetry;

use super::cds::{BLACK_HOLE, PASSTHROUGH};
use crate::resource::{Resource, any};
use axon_model::proxy::{Proxy, ProxyType};
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::{InboundPort, SidecarScope};

/// istiod's outbound capture port.
pub const VIRTUAL_OUTBOUND_PORT: u32 = 15001;
/// istiod's inbound capture port.
pub const VIRTUAL_INBOUND_PORT: u32 = 15006;

pub fn generate(ctx: &PushContext, proxy: &Proxy, scope: &SidecarScope) -> Vec<Resource> {
    let tel = telemetry::ProxyTelemetry::of(ctx, proxy, scope);
    match proxy.proxy_type {
        ProxyType::Router => gateway::listeners(ctx, proxy, &tel.client),
        ProxyType::Sidecar => sidecar_listeners(ctx, proxy, scope, &tel),
    }
}

fn sidecar_listeners(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    tel: &telemetry::ProxyTelemetry,
) -> Vec<Resource> {
    let fallthrough = fallthrough_cluster(scope);
    let mut out = outbound::listeners(ctx, proxy, scope, &fallthrough, &tel.client);
    for inbound in &scope.inbound {
        if let Some(bind) = &inbound.bind {
            let mode = scope.mtls.for_port(inbound.port);
            let authz = inbound::Authz::of(ctx, proxy);
            let chains = inbound::port_chains(
                inbound,
                mode,
                inbound::Inbound::of(proxy, &ctx.mesh, &authz),
            );
            out.push(inbound_listener(bind, inbound, chains, &tel.server));
        }
    }
    if !proxy.interception_none {
        out.push(virtual_outbound(
            &fallthrough,
            proxy.tproxy,
            proxy.idle_timeout,
            &tel.client,
        ));
        out.push(inbound::virtual_inbound(ctx, scope, proxy, &tel.server));
    }
    out
}

/// Where a sidecar sends what no listener or chain claims (istiod's
/// `buildOutboundCatchAllNetworkFiltersOnly`): the original destination, the `egressProxy`
/// cluster, or, under REGISTRY_ONLY, nowhere (`BlackHoleCluster`).
fn fallthrough_cluster(scope: &SidecarScope) -> String {
    if scope.outbound.registry_only {
        BLACK_HOLE.to_string()
    } else {
        scope
            .outbound
            .egress_cluster
            .clone()
            .unwrap_or_else(|| PASSTHROUGH.to_string())
    }
}

/// istiod's `buildVirtualOutboundListener`: where iptables sends outbound traffic, handed
/// to the listener of its original destination; a connection to 15001 itself is refused
/// (`virtualOutbound-blackhole`), anything no listener claims falls through.
fn virtual_outbound(
    fallthrough: &str,
    tproxy: bool,
    idle_timeout: Option<i128>,
    tel: &telemetry::SideTelemetry,
) -> Resource {
    let mut listener = Listener {
        name: "virtualOutbound".to_string(),
        address: Some(socket_address("0.0.0.0", VIRTUAL_OUTBOUND_PORT)),
        transparent: tproxy.then_some(BoolValue { value: true }),
        use_original_dst: Some(BoolValue { value: true }),
        traffic_direction: TrafficDirection::Outbound as i32,
        filter_chains: vec![
            FilterChain {
                name: "virtualOutbound-blackhole".to_string(),
                filter_chain_match: Some(FilterChainMatch {
                    destination_port: Some(UInt32Value {
                        value: VIRTUAL_OUTBOUND_PORT,
                    }),
                    ..Default::default()
                }),
                filters: vec![tcp_proxy(BLACK_HOLE, BLACK_HOLE)],
                ..Default::default()
            },
            FilterChain {
                name: "virtualOutbound-catchall-tcp".to_string(),
                filters: vec![fallthrough_proxy(fallthrough, idle_timeout)],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    tel.apply(&mut listener, true);
    Resource::new("virtualOutbound", &listener)
}

/// A bound inbound listener of a Sidecar ingress listener (istiod's
/// `inboundCustomListener`): `BIND_PORT`, its chains and the inspectors they need.
fn inbound_listener(
    bind: &str,
    inbound: &InboundPort,
    chains: Vec<FilterChain>,
    tel: &telemetry::SideTelemetry,
) -> Resource {
    let name = format!("{bind}_{}", inbound.port);
    let mut listener = Listener {
        name: name.clone(),
        address: Some(socket_address(bind, inbound.port)),
        traffic_direction: TrafficDirection::Inbound as i32,
        continue_on_listener_filters_timeout: true,
        listener_filters: inbound::inspectors(&chains),
        filter_chains: chains,
        ..Default::default()
    };
    tel.apply(&mut listener, true);
    Resource::new(name, &listener)
}

/// istiod's inbound route (`BuildDefaultHTTPInboundRoute`): everything to the workload's
/// cluster with no timeout (Envoy's default would be 15 s) and no stream duration limit
/// (`grpc-timeout` headers honoured, unbounded), and, but for gRPC ports (streams do not
/// take well to it), istiod's default inbound retries (`reset-before-request`, 2).
fn inbound_route(name: &str, cluster: &str, port: u32, protocol: &str) -> RouteConfiguration {
    let none = || Duration {
        seconds: 0,
        nanos: 0,
    };
    let grpc = matches!(protocol.to_ascii_uppercase().as_str(), "GRPC" | "GRPC-WEB");
    RouteConfiguration {
        name: name.to_string(),
        // As istiod: Envoy would otherwise check an inline configuration's clusters.
        validate_clusters: Some(BoolValue { value: false }),
        virtual_hosts: vec![VirtualHost {
            name: format!("inbound|http|{port}"),
            domains: vec!["*".to_string()],
            routes: vec![Route {
                name: "default".to_string(),
                r#match: Some(RouteMatch {
                    path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
                    ..Default::default()
                }),
                action: Some(Action::Route(RouteAction {
                    cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.to_string())),
                    timeout: Some(none()),
                    max_stream_duration: Some(MaxStreamDuration {
                        max_stream_duration: Some(none()),
                        grpc_timeout_header_max: Some(none()),
                        ..Default::default()
                    }),
                    retry_policy: (!grpc).then(|| RetryPolicy {
                        num_retries: Some(UInt32Value { value: 2 }),
                        retry_on: "reset-before-request".to_string(),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// An IP or CIDR as an address prefix and length, the address masked (`10.1.2.3/8` is
/// `10.0.0.0`, 8; an IP alone is a /32 or /128); `None` if it is neither.
pub(super) fn cidr_range(text: &str) -> Option<(String, u32)> {
    let (ip, len) = match text.split_once('/') {
        Some((ip, len)) => (
            ip.parse::<std::net::IpAddr>().ok()?,
            Some(len.parse::<u32>().ok()?),
        ),
        None => (text.parse::<std::net::IpAddr>().ok()?, None),
    };
    Some(match ip {
        std::net::IpAddr::V4(v4) => {
            let len = len.unwrap_or(32).min(32);
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (
                std::net::Ipv4Addr::from(u32::from(v4) & mask).to_string(),
                len,
            )
        }
        std::net::IpAddr::V6(v6) => {
            let len = len.unwrap_or(128).min(128);
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            (
                std::net::Ipv6Addr::from(u128::from(v6) & mask).to_string(),
                len,
            )
        }
    })
}

pub fn socket_address(ip: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: ip.to_string(),
            port_specifier: Some(PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

/// istiod's `buildOutboundCatchAllNetworkFiltersOnly`: a `tcp_proxy` to `cluster` with the
/// node's `IDLE_TIMEOUT`, if any.
fn fallthrough_proxy(cluster: &str, idle_timeout: Option<i128>) -> Filter {
    let proxy = TcpProxy {
        stat_prefix: cluster.to_string(),
        cluster_specifier: Some(TcpCluster::Cluster(cluster.to_string())),
        idle_timeout: idle_timeout.map(l4::duration),
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.tcp_proxy".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
    }
}

fn tcp_proxy(stat_prefix: &str, cluster: &str) -> Filter {
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_string(),
        cluster_specifier: Some(TcpCluster::Cluster(cluster.to_string())),
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.tcp_proxy".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
    }
}

/// An HTTP connection manager filter with the given route source, and the proxy's
/// `IDLE_TIMEOUT`, if any, as its connections' idle timeout (istiod's listener builder).
fn http_connection_manager(
    stat_prefix: &str,
    routes: RouteSpecifier,
    kind: HcmKind,
    idle_timeout: Option<i128>,
) -> Filter {
    hcm_filter(hcm_config(stat_prefix, routes, kind), idle_timeout)
}

/// `hcm` as a filter, with the proxy's `IDLE_TIMEOUT`, if any, as its connections' idle
/// timeout (istiod's listener builder).
fn hcm_filter(mut hcm: HttpConnectionManager, idle_timeout: Option<i128>) -> Filter {
    if let Some(nanos) = idle_timeout {
        hcm.common_http_protocol_options = Some(HttpProtocolOptions {
            idle_timeout: Some(l4::duration(nanos)),
            ..Default::default()
        });
    }
    Filter {
        name: "envoy.filters.network.http_connection_manager".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
    }
}

/// Whose HTTP connection manager it is: istiod's settings differ by proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HcmKind {
    /// A gateway's listener: the client's address is the remote address.
    Gateway,
    /// A sidecar's outbound or inbound listener.
    Sidecar,
    /// A proxyless gRPC client's API listener (none of Envoy's connection settings apply).
    Proxyless,
}

/// An HTTP connection manager with the router filter and the given route source, with
/// istiod's settings (`buildHTTPConnectionManager` and the mesh defaults): its gRPC stats,
/// fault and CORS filters before the router, WebSocket upgrades
/// allowed, paths normalized (the default mesh config's `BASE`), escaped slashes kept, no
/// stream idle timeout, and the remote address used on gateways only.
pub(super) fn hcm_config(
    stat_prefix: &str,
    routes: RouteSpecifier,
    kind: HcmKind,
) -> HttpConnectionManager {
    let mut hcm = HttpConnectionManager {
        stat_prefix: stat_prefix.to_string(),
        route_specifier: Some(routes),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(
                any(&Router::default()),
            )),
            ..Default::default()
        }],
        ..Default::default()
    };
    if kind != HcmKind::Proxyless {
        let empty_filter = |name: &str, config: Any| HttpFilter {
            name: name.to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(config)),
            ..Default::default()
        };
        // istiod's `GrpcStats` (gRPC message counts in the filter state, for Istio's
        // metrics), then the filters a route's fault and CORS policies configure.
        let grpc_stats = GrpcStats {
            emit_filter_state: true,
            per_method_stat_specifier: Some(PerMethodStatSpecifier::StatsForAllMethods(
                BoolValue { value: false },
            )),
            ..Default::default()
        };
        hcm.http_filters.splice(
            0..0,
            [
                empty_filter("envoy.filters.http.grpc_stats", any(&grpc_stats)),
                empty_filter("envoy.filters.http.fault", any(&Fault::default())),
                empty_filter("envoy.filters.http.cors", any(&Cors::default())),
            ],
        );
        hcm.upgrade_configs = vec![UpgradeConfig {
            upgrade_type: "websocket".to_string(),
            ..Default::default()
        }];
        hcm.normalize_path = Some(BoolValue { value: true });
        hcm.path_with_escaped_slashes_action = PathWithEscapedSlashesAction::KeepUnchanged as i32;
        hcm.stream_idle_timeout = Some(Duration {
            seconds: 0,
            nanos: 0,
        });
        hcm.use_remote_address = Some(BoolValue {
            value: kind == HcmKind::Gateway,
        });
    }
    hcm
}
