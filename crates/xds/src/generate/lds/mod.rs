//! LDS. A gateway's listeners are `lds/gateway.rs`'s. A sidecar gets an outbound listener per service port it sees (`0.0.0.0_PORT`, not bound,
//! reached through `virtualOutbound` on 15001: an HTTP one for HTTP ports, a TCP one,
//! `lds/sidecar_l4.rs`'s, for the others), a bound listener per Sidecar egress listener
//! with a port (`captureMode: NONE` is how an application calls it without iptables), and
//! `virtualInbound` on 15006 for its own workload's ports (a Sidecar ingress listener bound
//! to its port, `captureMode: NONE`, gets a listener `BIND_PORT` instead). What no listener claims falls
//! through as the scope's outbound traffic policy says (`fallthrough_cluster()`). A proxy
//! that runs with `INTERCEPTION_MODE: NONE` gets no virtual listeners.

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
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds,
    http_connection_manager::{PathWithEscapedSlashesAction, RouteSpecifier, UpgradeConfig},
    http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier as TcpCluster,
};
use envoy_types::pb::google::protobuf::{Any, BoolValue, Duration, UInt32Value};

mod gateway;
mod gateway_l4;
mod l4;
mod server_tls;
mod sidecar_l4;

use super::cds::{BLACK_HOLE, PASSTHROUGH, ads_config_source, inbound_cluster_name};
use crate::is_http;
use crate::resource::{Resource, any};
use axon_model::proxy::{Proxy, ProxyType};
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::{InboundPort, SidecarScope};
use l4::L4Port;
use sidecar_l4::{TcpEntry, WILDCARD};

/// istiod's outbound capture port.
pub const VIRTUAL_OUTBOUND_PORT: u32 = 15001;
/// istiod's inbound capture port.
pub const VIRTUAL_INBOUND_PORT: u32 = 15006;

pub fn generate(ctx: &PushContext, proxy: &Proxy, scope: &SidecarScope) -> Vec<Resource> {
    match proxy.proxy_type {
        ProxyType::Router => gateway::listeners(ctx, proxy),
        ProxyType::Sidecar => sidecar_listeners(ctx, proxy, scope),
    }
}

fn sidecar_listeners(ctx: &PushContext, proxy: &Proxy, scope: &SidecarScope) -> Vec<Resource> {
    let fallthrough = fallthrough_cluster(scope);
    let mut out = Vec::new();
    let mut ports = std::collections::BTreeSet::new();
    for egress in &scope.egress {
        let Some(port) = egress.port else { continue };
        let capture_none = egress.capture_none || proxy.interception_none;
        let default_bind = if capture_none { "127.0.0.1" } else { "0.0.0.0" };
        let bind = egress.bind.as_deref().unwrap_or(default_bind);
        ports.insert(port);
        if !egress.protocol.is_empty() && sidecar_l4::is_tcp(&egress.protocol) {
            let listen = L4Port {
                number: port,
                protocol: &egress.protocol,
            };
            let mut entry = TcpEntry::new(bind, port, capture_none);
            for service in egress
                .services
                .iter()
                .filter(|s| !s.hostname.starts_with('*'))
            {
                entry.merge(sidecar_l4::service_chains(
                    ctx, proxy, egress, service, listen, bind,
                ));
            }
            out.push(entry.build(&fallthrough));
            continue;
        }
        out.push(listener(
            bind,
            port,
            capture_none,
            &port.to_string(),
            HcmKind::Sidecar,
            proxy.idle_timeout,
        ));
    }
    if let Some(egress) = scope.default_egress() {
        let service_ports: std::collections::BTreeSet<u32> = egress
            .services
            .iter()
            .flat_map(|s| s.ports.iter())
            .filter(|p| is_http(&p.protocol))
            .map(|p| p.number)
            .filter(|p| !ports.contains(p))
            .collect();
        // TCP ports: one listener per port (a port some service serves as HTTP keeps its
        // HTTP listener), the services' chains merged in host order.
        let mut tcp: std::collections::BTreeMap<u32, TcpEntry> = Default::default();
        for service in egress
            .services
            .iter()
            .filter(|s| !s.hostname.starts_with('*'))
        {
            for p in &service.ports {
                let number = p.number;
                if !sidecar_l4::is_tcp(&p.protocol)
                    || ports.contains(&number)
                    || service_ports.contains(&number)
                    || [VIRTUAL_OUTBOUND_PORT, VIRTUAL_INBOUND_PORT].contains(&number)
                {
                    continue;
                }
                let listen = L4Port {
                    number,
                    protocol: &p.protocol,
                };
                let chains =
                    sidecar_l4::service_chains(ctx, proxy, egress, service, listen, WILDCARD);
                tcp.entry(number)
                    .or_insert_with(|| TcpEntry::new(WILDCARD, number, false))
                    .merge(chains);
            }
        }
        for port in service_ports {
            out.push(listener(
                "0.0.0.0",
                port,
                false,
                &port.to_string(),
                HcmKind::Sidecar,
                proxy.idle_timeout,
            ));
        }
        out.extend(tcp.into_values().map(|entry| entry.build(&fallthrough)));
    }
    for inbound in &scope.inbound {
        if let Some(bind) = &inbound.bind {
            out.push(inbound_listener(bind, inbound, proxy.idle_timeout));
        }
    }
    if !proxy.interception_none {
        out.push(virtual_outbound(&fallthrough));
        out.push(virtual_inbound(scope, proxy.idle_timeout));
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

/// An HTTP listener on `bind:port` whose routes come over RDS as `route`.
fn listener(
    bind: &str,
    port: u32,
    bound: bool,
    route: &str,
    kind: HcmKind,
    idle_timeout: Option<i128>,
) -> Resource {
    let name = format!("{bind}_{port}");
    let listener = Listener {
        name: name.clone(),
        address: Some(socket_address(bind, port)),
        bind_to_port: (!bound).then_some(BoolValue { value: false }),
        filter_chains: vec![FilterChain {
            filters: vec![http_connection_manager(
                &format!("outbound_{bind}_{port}"),
                RouteSpecifier::Rds(Rds {
                    config_source: Some(ads_config_source()),
                    route_config_name: route.to_string(),
                }),
                kind,
                idle_timeout,
            )],
            ..Default::default()
        }],
        ..Default::default()
    };
    Resource::new(name, &listener)
}

fn virtual_outbound(fallthrough: &str) -> Resource {
    let listener = Listener {
        name: "virtualOutbound".to_string(),
        address: Some(socket_address("0.0.0.0", VIRTUAL_OUTBOUND_PORT)),
        use_original_dst: Some(BoolValue { value: true }),
        filter_chains: vec![FilterChain {
            name: "virtualOutbound-catchall-tcp".to_string(),
            filters: vec![tcp_proxy(fallthrough, fallthrough)],
            ..Default::default()
        }],
        ..Default::default()
    };
    Resource::new("virtualOutbound", &listener)
}

/// The filter chain of one inbound port, to `inbound|PORT||`: an HTTP connection manager
/// with istiod's inbound route, or a `tcp_proxy`.
fn inbound_chain(inbound: &InboundPort, idle_timeout: Option<i128>) -> FilterChain {
    let cluster = inbound_cluster_name(inbound.port);
    let filter = if is_http(&inbound.protocol) {
        http_connection_manager(
            &cluster,
            RouteSpecifier::RouteConfig(inbound_route(&cluster, inbound.port, &inbound.protocol)),
            HcmKind::Sidecar,
            idle_timeout,
        )
    } else {
        tcp_proxy(&cluster, &cluster)
    };
    FilterChain {
        name: format!("0.0.0.0_{}", inbound.port),
        filter_chain_match: Some(FilterChainMatch {
            destination_port: Some(UInt32Value {
                value: inbound.port,
            }),
            ..Default::default()
        }),
        filters: vec![filter],
        ..Default::default()
    }
}

/// A bound inbound listener of a Sidecar ingress listener (istiod's
/// `inboundCustomListener`): `BIND_PORT`, its one chain.
fn inbound_listener(bind: &str, inbound: &InboundPort, idle_timeout: Option<i128>) -> Resource {
    let name = format!("{bind}_{}", inbound.port);
    let listener = Listener {
        name: name.clone(),
        address: Some(socket_address(bind, inbound.port)),
        traffic_direction: TrafficDirection::Inbound as i32,
        continue_on_listener_filters_timeout: true,
        filter_chains: vec![inbound_chain(inbound, idle_timeout)],
        ..Default::default()
    };
    Resource::new(name, &listener)
}

/// `virtualInbound`: a filter chain per workload port not bound to a listener of its own.
fn virtual_inbound(scope: &SidecarScope, idle_timeout: Option<i128>) -> Resource {
    let mut chains: Vec<FilterChain> = scope
        .inbound
        .iter()
        .filter(|inbound| inbound.bind.is_none())
        .map(|inbound| inbound_chain(inbound, idle_timeout))
        .collect();
    chains.push(FilterChain {
        name: "virtualInbound-catchall-tcp".to_string(),
        filters: vec![tcp_proxy("InboundPassthroughCluster", PASSTHROUGH)],
        ..Default::default()
    });
    let listener = Listener {
        name: "virtualInbound".to_string(),
        address: Some(socket_address("0.0.0.0", VIRTUAL_INBOUND_PORT)),
        use_original_dst: Some(BoolValue { value: true }),
        filter_chains: chains,
        ..Default::default()
    };
    Resource::new("virtualInbound", &listener)
}

/// istiod's inbound route (`BuildDefaultHTTPInboundRoute`): everything to the workload's
/// cluster with no timeout (Envoy's default would be 15 s) and no stream duration limit
/// (`grpc-timeout` headers honoured, unbounded), and, but for gRPC ports (streams do not
/// take well to it), istiod's default inbound retries (`reset-before-request`, 2).
fn inbound_route(cluster: &str, port: u32, protocol: &str) -> RouteConfiguration {
    let none = || Duration {
        seconds: 0,
        nanos: 0,
    };
    let grpc = matches!(protocol.to_ascii_uppercase().as_str(), "GRPC" | "GRPC-WEB");
    RouteConfiguration {
        name: format!("inbound|{port}||"),
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

pub fn socket_address(ip: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: ip.to_string(),
            port_specifier: Some(PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
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
            idle_timeout: Some(Duration {
                seconds: i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX),
                nanos: i32::try_from(nanos % 1_000_000_000).unwrap_or(0),
            }),
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
/// istiod's settings (`buildHTTPConnectionManager` and the mesh defaults): WebSocket upgrades
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
        // The filters a route's fault and CORS policies configure, before the router.
        let empty_filter = |name: &str, config: Any| HttpFilter {
            name: name.to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(config)),
            ..Default::default()
        };
        hcm.http_filters.splice(
            0..0,
            [
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
