//! RDS. For a gateway, each route configuration of its servers (`http.PORT` for the plaintext
//! HTTP servers of a port, `https.PORT.PORT_NAME.GATEWAY.NAMESPACE` for each terminated HTTPS
//! server, as istiod names them): one virtual host per host the servers serve of the
//! VirtualServices bound to their gateways (`require_tls` for an `httpsRedirect` server)
//! (the more specific of server host and VirtualService host, its domain alone, the port
//! ignored in host matching), holding the routes of every such VirtualService in istiod's
//! order with the catch-all routes last; a request that no host or route matches gets
//! Envoy's 404, as from istiod. For a sidecar, the route configuration named by port
//! (`rds/sidecar.rs`), ending in `allow_any` (the original destination, or the `egressProxy`)
//! or, under REGISTRY_ONLY, `block_all` (502).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, VirtualHost, virtual_host::TlsRequirementType as RequireTls,
};
use envoy_types::pb::google::protobuf::Duration;

mod action;
mod filters;
mod hash;
mod headers;
mod hosts;
mod matching;
mod route;
mod sidecar;

pub(super) use sidecar::sidecar_virtual_host;

use crate::resource::Resource;
use axon_config::config::ConfigKey;
use axon_config::host;
use axon_model::gateway::{self, GatewayServer};
use axon_model::proxy::{Proxy, ProxyType};
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::SidecarScope;
use route::{RouteTarget, translate_routes};

pub fn generate(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    names: &BTreeSet<String>,
) -> Vec<Resource> {
    match proxy.proxy_type {
        ProxyType::Router => gateway_routes(ctx, proxy, names),
        ProxyType::Sidecar => names
            .iter()
            .map(|name| {
                let config = sidecar::route_configuration(ctx, proxy, scope, name);
                Resource::new(name.clone(), &config)
            })
            .collect(),
    }
}

fn gateway_routes(ctx: &PushContext, proxy: &Proxy, names: &BTreeSet<String>) -> Vec<Resource> {
    let merged = gateway::merge(ctx, proxy);
    names
        .iter()
        .map(|name| {
            // As istiod: a name no server has (a gateway just removed) gets no virtual host.
            let virtual_hosts = merged
                .by_route_name
                .get(name)
                .filter(|servers| !servers.is_empty())
                .map(|servers| gateway_virtual_hosts(ctx, proxy, servers))
                .unwrap_or_default();
            let config = RouteConfiguration {
                name: name.clone(),
                virtual_hosts,
                validate_clusters: Some(Default::default()),
                // As istiod for every proxy but proxyless gRPC: a virtual host's domain
                // matches `Host: a.example.com` and `Host: a.example.com:ANY`.
                ignore_port_in_host_matching: true,
                ..Default::default()
            };
            Resource::new(name.clone(), &config)
        })
        .collect()
}

/// istiod's `buildGatewayHTTPRouteConfig` for the servers of one route configuration: for
/// each server, each VirtualService the proxy serves for its gateway
/// ([`PushContext::virtual_services_for_gateway_proxy`]), each host the server serves of it
/// ([`GatewayServer::hosts_for`]): the VirtualService's routes go into that host's one virtual
/// host, after those of the VirtualServices before it. A server with `httpsRedirect` makes its
/// hosts' virtual hosts require TLS (Envoy answers 301 to `https://`), adding one for each of
/// its hosts no VirtualService routes. Then each virtual host's catch-all routes move last
/// ([`route::sort_vhost_routes`]), and the virtual hosts are sorted by name.
fn gateway_virtual_hosts(
    ctx: &PushContext,
    proxy: &Proxy,
    servers: &[GatewayServer],
) -> Vec<VirtualHost> {
    let mut vhosts: BTreeMap<String, VirtualHost> = BTreeMap::new();
    // Routes per (gateway, VirtualService), made once, as istiod's `gatewayRoutes`.
    let mut translated: BTreeMap<(&str, &ConfigKey), Vec<Route>> = BTreeMap::new();
    // A host served by two servers of one gateway takes a VirtualService's routes once
    // (istiod appends them twice; the second copy could never be reached).
    let mut added = BTreeSet::new();
    let require_tls = RequireTls::All as i32;
    for server in servers {
        let port = server.port_number();
        let redirect = server.https_redirect();
        for (config, vs) in
            ctx.virtual_services_for_gateway_proxy(&server.gateway, &proxy.namespace)
        {
            let vs_hosts: Vec<String> = vs
                .hosts
                .iter()
                .map(|h| vs.resolve_host(h, config.namespace()))
                .collect();
            let hosts = server.hosts_for(&vs_hosts, config.namespace());
            if hosts.is_empty() {
                continue;
            }
            let routes = translated
                .entry((&server.gateway, &config.key))
                .or_insert_with(|| {
                    let target = RouteTarget {
                        proxy,
                        gateway: &server.gateway,
                        port,
                    };
                    translate_routes(ctx, config, vs, target)
                });
            // As istiod: a VirtualService with no route here (no HTTP route, or no match
            // block that applies to this gateway) makes no virtual host.
            if routes.is_empty() {
                continue;
            }
            for hostname in hosts {
                if !added.insert((hostname.clone(), &server.gateway, &config.key)) {
                    continue;
                }
                let vhost = vhosts
                    .entry(hostname.clone())
                    .or_insert_with(|| VirtualHost {
                        name: format!("{hostname}:{port}"),
                        domains: vec![hostname],
                        ..Default::default()
                    });
                vhost.routes.extend(routes.iter().cloned());
                if redirect {
                    vhost.require_tls = require_tls;
                }
            }
        }
        if redirect {
            // The server's own hosts (without their namespace part: istiod keeps a
            // `namespace/` there, which no request's host could match).
            for h in &server.server.hosts {
                let hostname = host::split_namespaced(h).1.to_ascii_lowercase();
                let vhost = vhosts
                    .entry(hostname.clone())
                    .or_insert_with(|| VirtualHost {
                        name: format!("{hostname}:{port}"),
                        domains: vec![hostname],
                        ..Default::default()
                    });
                vhost.require_tls = require_tls;
            }
        }
    }
    if vhosts.is_empty() {
        // istiod's blackhole host: every request gets 404.
        let port = servers.first().map_or(0, GatewayServer::port_number);
        return vec![VirtualHost {
            name: format!("blackhole:{port}"),
            domains: vec!["*".to_string()],
            ..Default::default()
        }];
    }
    let mut out: Vec<VirtualHost> = vhosts
        .into_values()
        .map(|mut v| {
            v.routes = route::sort_vhost_routes(std::mem::take(&mut v.routes));
            v
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// A duration as Envoy's; none (or one that does not parse: validation rejected it) is 0,
/// which Envoy reads as no timeout.
fn duration(text: Option<&str>) -> Duration {
    let nanos = text
        .and_then(axon_config::validate::parse_duration)
        .unwrap_or(0)
        .max(0);
    Duration {
        seconds: i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX),
        nanos: i32::try_from(nanos % 1_000_000_000).unwrap_or(0),
    }
}
