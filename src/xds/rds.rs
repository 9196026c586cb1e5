//! RDS: for a gateway, the route configuration `http.PORT` of each server port: a virtual host
//! per VirtualService host bound to a gateway on that port, routes in the VirtualService's
//! order. A request that no host or route matches gets Envoy's 404, as from istiod.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
    WeightedCluster, header_matcher::HeaderMatchSpecifier, route::Action,
    route_action::ClusterSpecifier, route_match::PathSpecifier, weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};

use super::resource::Resource;
use crate::model::config::Config;
use crate::model::gateway::{self, GatewayServer};
use crate::model::host;
use crate::model::istio::{HttpMatchRequest, HttpRoute, StringMatch, VirtualService};
use crate::model::proxy::{Proxy, ProxyType};
use crate::model::push_context::PushContext;
use crate::model::service::outbound_cluster_name;

pub fn generate(ctx: &PushContext, proxy: &Proxy, names: &BTreeSet<String>) -> Vec<Resource> {
    match proxy.proxy_type {
        ProxyType::Router => gateway_routes(ctx, proxy, names),
        ProxyType::Sidecar => Vec::new(),
    }
}

fn gateway_routes(ctx: &PushContext, proxy: &Proxy, names: &BTreeSet<String>) -> Vec<Resource> {
    let merged = gateway::merge(ctx, proxy);
    names
        .iter()
        .filter_map(|name| {
            let port: u32 = name.strip_prefix("http.")?.parse().ok()?;
            let servers = merged.ports.get(&port).map(Vec::as_slice).unwrap_or(&[]);
            let config = RouteConfiguration {
                name: name.clone(),
                virtual_hosts: gateway_virtual_hosts(ctx, port, servers),
                validate_clusters: Some(Default::default()),
                ..Default::default()
            };
            Some(Resource::new(name.clone(), &config))
        })
        .collect()
}

fn gateway_virtual_hosts(ctx: &PushContext, port: u32, servers: &[GatewayServer]) -> Vec<VirtualHost> {
    let mut vhosts: BTreeMap<String, VirtualHost> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for server in servers {
        for (config, vs) in ctx.virtual_services_for_gateway(&server.gateway) {
            if !seen.insert((server.gateway.clone(), config.key.clone())) {
                continue;
            }
            let routes = translate_routes(ctx, config, vs, &server.gateway, port);
            for vs_host in &vs.hosts {
                if !server.exposes(vs_host, config.namespace()) {
                    continue;
                }
                let vhost = vhosts.entry(vs_host.clone()).or_insert_with(|| VirtualHost {
                    name: format!("{vs_host}:{port}"),
                    domains: domains(vs_host, port),
                    ..Default::default()
                });
                vhost.routes.extend(routes.iter().cloned());
            }
        }
    }
    if vhosts.is_empty() {
        // istiod's blackhole host: every request gets 404.
        vhosts.insert(
            String::new(),
            VirtualHost {
                name: format!("blackhole:{port}"),
                domains: vec!["*".to_string()],
                ..Default::default()
            },
        );
    }
    vhosts.into_values().collect()
}

fn domains(vs_host: &str, port: u32) -> Vec<String> {
    if vs_host == "*" {
        vec!["*".to_string()]
    } else {
        vec![vs_host.to_string(), format!("{vs_host}:{port}")]
    }
}

/// The Envoy routes of one VirtualService, for a gateway on `port`.
fn translate_routes(
    ctx: &PushContext,
    config: &Config,
    vs: &VirtualService,
    gateway: &str,
    port: u32,
) -> Vec<Route> {
    let mut out = Vec::new();
    for http in &vs.http {
        let Some(action) = route_action(ctx, config.namespace(), http) else {
            continue;
        };
        let matches: Vec<Option<&HttpMatchRequest>> = if http.matches.is_empty() {
            vec![None]
        } else {
            http.matches
                .iter()
                .filter(|m| applies(m, gateway, port, config.namespace()))
                .map(Some)
                .collect()
        };
        for m in matches {
            out.push(Route {
                name: http.name.clone(),
                r#match: Some(route_match(m)),
                action: Some(Action::Route(action.clone())),
                ..Default::default()
            });
        }
    }
    out
}

/// A match applies to this gateway and port unless it names other gateways or ports.
fn applies(m: &HttpMatchRequest, gateway: &str, port: u32, namespace: &str) -> bool {
    let gateway_ok = m.gateways.is_empty()
        || m.gateways
            .iter()
            .any(|g| crate::model::push_context::gateway_ref(g, namespace) == gateway);
    gateway_ok && m.port.is_none_or(|p| p == port)
}

fn route_match(m: Option<&HttpMatchRequest>) -> RouteMatch {
    let mut out = RouteMatch {
        path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
        ..Default::default()
    };
    let Some(m) = m else { return out };
    if let Some(uri) = &m.uri {
        out.path_specifier = Some(if let Some(exact) = &uri.exact {
            PathSpecifier::Path(exact.clone())
        } else if let Some(prefix) = &uri.prefix {
            PathSpecifier::Prefix(prefix.clone())
        } else if let Some(regex) = &uri.regex {
            PathSpecifier::SafeRegex(regex_matcher(regex))
        } else if let Some(suffix) = &uri.suffix {
            PathSpecifier::SafeRegex(regex_matcher(&format!(".*{}", regex::escape(suffix))))
        } else {
            PathSpecifier::Prefix("/".to_string())
        });
    }
    out.headers = m
        .headers
        .iter()
        .filter_map(|(name, sm)| {
            Some(HeaderMatcher {
                name: name.to_ascii_lowercase(),
                header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(string_matcher(sm)?)),
                ..Default::default()
            })
        })
        .collect();
    out
}

fn regex_matcher(regex: &str) -> RegexMatcher {
    RegexMatcher {
        regex: regex.to_string(),
        ..Default::default()
    }
}

fn string_matcher(sm: &StringMatch) -> Option<StringMatcher> {
    let pattern = if let Some(v) = &sm.exact {
        MatchPattern::Exact(v.clone())
    } else if let Some(v) = &sm.prefix {
        MatchPattern::Prefix(v.clone())
    } else if let Some(v) = &sm.regex {
        MatchPattern::SafeRegex(regex_matcher(v))
    } else if let Some(v) = &sm.suffix {
        MatchPattern::Suffix(v.clone())
    } else {
        return None;
    };
    Some(StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    })
}

/// The route action of an HTTP route: one cluster, or weighted clusters. `None` when the
/// route has no destination.
fn route_action(ctx: &PushContext, namespace: &str, http: &HttpRoute) -> Option<RouteAction> {
    let destinations: Vec<(String, u32)> = http
        .route
        .iter()
        .filter_map(|rd| {
            let d = rd.destination.as_ref()?;
            let hostname = host::resolve(&d.host, namespace);
            let port = d
                .port
                .as_ref()
                .map(|p| p.number)
                .filter(|p| *p != 0)
                .or_else(|| ctx.service(&hostname).and_then(|s| s.ports.first()).map(|p| p.number))
                .unwrap_or(80);
            let name = outbound_cluster_name(port, &d.subset, &hostname);
            Some((name, u32::try_from(rd.weight).unwrap_or(0)))
        })
        .collect();
    let cluster_specifier = match destinations.as_slice() {
        [] => return None,
        [(name, _)] => ClusterSpecifier::Cluster(name.clone()),
        many => {
            let total: u32 = many.iter().map(|(_, w)| w).sum();
            ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters: many
                    .iter()
                    .filter(|(_, w)| total == 0 || *w > 0)
                    .map(|(name, w)| ClusterWeight {
                        name: name.clone(),
                        weight: Some(UInt32Value {
                            value: if total == 0 { 1 } else { *w },
                        }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        }
    };
    Some(RouteAction {
        cluster_specifier: Some(cluster_specifier),
        // istiod disables Envoy's 15 s default route timeout.
        timeout: Some(Duration { seconds: 0, nanos: 0 }),
        ..Default::default()
    })
}
