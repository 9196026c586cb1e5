//! Sidecar RDS: the route configuration named by a listener port, as istiod's
//! `BuildSidecarOutboundVirtualHosts` makes it.
//!
//! The services the egress listener imports with an HTTP port of that number each get a
//! virtual host (on a listener the Sidecar declares, as on the catch-all one: istiod imports
//! on a declared listener only the services with its port). The mesh
//! VirtualServices the listener imports are taken in istiod's order: each one's hosts are
//! split as `separateVSHostsAndServices` does into services on the port (a host naming one
//! exactly, or a wildcard whose most specific VirtualService for a service it matches is this
//! one) and hosts that are no service here (an exact host matching none, a wildcard matching
//! none). A VirtualService with a service on the port routes those services' virtual hosts
//! (the first with routes for the proxy wins a service) and gets a virtual host for each of
//! its other hosts, the host alone as domain; a VirtualService with no service on the port
//! does so only on port 80 (istiod's "gross HACK"), and otherwise routes nothing there. A
//! service no VirtualService routes goes straight to its cluster. A VirtualService made from
//! Gateway API routes (GAMMA) expands no wildcard to services, and routes only where one of
//! its services, or the proxy, is in its namespace ([`gateway_route_applies`]). Domains are
//! unique over the configuration (the first virtual host keeps one); the virtual hosts are
//! sorted by name, and `allow_any` (`*`, to the original destination) comes last. As istiod
//! for an Envoy sidecar, domains carry no port and the port is ignored in host matching; a
//! proxyless gRPC client's (`xds/grpc.rs`) carry `host:port` too.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteAction, RouteConfiguration, VirtualHost, route::Action,
    route_action::ClusterSpecifier,
};
use envoy_types::pb::google::protobuf::Duration;

use super::action;
use super::hash;
use super::matching::route_match;
use super::route::{RouteTarget, translate_routes};
use crate::generate::cds::PASSTHROUGH;
use crate::is_http;
use axon_config::config::{Config, Spec};
use axon_config::host;
use axon_config::istio::{Resolution, VirtualService};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::service::{Service, is_sniffed_protocol, outbound_cluster_name};
use axon_model::sidecar_scope::{EgressScope, SidecarScope};

/// The listener port whose VirtualServices route hosts that are no service on it.
const NON_REGISTRY_PORT: u32 = 80;

/// The route configuration `name` of a sidecar: a port's (`PORT`, every service on it and
/// the catch-all `allow_any`), or a sniffed service's own (`HOST:PORT`, on the listener of
/// its address: its virtual host alone, for any domain, as istiod's
/// `getVirtualHostsForSniffedServicePort`).
pub(super) fn route_configuration(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    name: &str,
) -> RouteConfiguration {
    let (service_host, port) = match name.rsplit_once(':') {
        Some((host, port)) => (Some(host), port.parse().ok()),
        None => (None, name.parse().ok()),
    };
    let mut virtual_hosts = port
        .map(|port| sidecar_virtual_hosts(ctx, proxy, scope, port))
        .unwrap_or_default();
    if let Some(service_host) = service_host {
        virtual_hosts.retain(|v| v.domains.iter().any(|d| d == service_host || d == name));
        if let [only] = virtual_hosts.as_mut_slice() {
            only.domains = vec!["*".to_string()];
        }
    } else if port.is_some() {
        virtual_hosts.push(catch_all_virtual_host(scope));
    }
    RouteConfiguration {
        name: name.to_string(),
        virtual_hosts,
        validate_clusters: Some(Default::default()),
        // As istiod for every sidecar but a proxyless gRPC client (`SidecarIgnorePort`):
        // `Host: reviews:9080` matches the domain `reviews`.
        ignore_port_in_host_matching: true,
        ..Default::default()
    }
}

/// The services an egress listener serves on `port`: those it imports with an HTTP or
/// sniffed port `port` (istiod's `IsHTTPOrSniffed`), on the listener the Sidecar declares for the port as on the catch-all one (istiod
/// imports on a declared listener only the services with its port, `serviceMatchingListenerPort`,
/// and builds virtual hosts for their HTTP ports).
fn services_on_port(egress: &EgressScope, port: u32) -> Vec<&Service> {
    egress
        .services
        .iter()
        .filter(|service| {
            service
                .port(port)
                .is_some_and(|p| is_http(&p.protocol) || is_sniffed_protocol(&p.protocol))
        })
        .map(|service| service.as_ref())
        .collect()
}

/// A VirtualService's hosts on one port, as istiod's `separateVSHostsAndServices`.
struct HostSplit<'a> {
    /// Services on the port it names (exactly, or as the most specific wildcard).
    services: Vec<&'a Service>,
    /// Its hosts that are no service on the port, lowercased.
    others: Vec<String>,
}

fn split_hosts<'a>(
    egress: &EgressScope,
    config: &Config,
    vs: &VirtualService,
    on_port: &[&'a Service],
) -> HostSplit<'a> {
    let mut split = HostSplit {
        services: Vec::new(),
        others: Vec::new(),
    };
    for h in &vs.hosts {
        let h = vs.resolve_host(h, config.namespace()).to_lowercase();
        if !h.starts_with('*') {
            match on_port.iter().find(|s| s.hostname == h) {
                Some(found) => split.services.push(*found),
                None => split.others.push(h),
            }
            continue;
        }
        // A Gateway API route's wildcard names no service.
        if vs.gateway_semantics() {
            split.others.push(h);
            continue;
        }
        let matching: Vec<&&Service> = on_port
            .iter()
            .filter(|s| host::matches(&h, &s.hostname))
            .collect();
        if matching.is_empty() {
            split.others.push(h);
            continue;
        }
        // istiod's `mostSpecificWildcardVsIndex`: a service takes only the VirtualService
        // that names it exactly, else the one with its most specific wildcard.
        for found in matching {
            let owner = egress.virtual_services_for(&found.hostname);
            if owner.first().is_some_and(|(c, _)| c.key == config.key)
                && !split.services.iter().any(|s| s.hostname == found.hostname)
            {
                split.services.push(*found);
            }
        }
    }
    split
}

/// Whether a VirtualService made from Gateway API routes (of `config`) may route `service`
/// for `proxy`: the service or the proxy is in the route's namespace (istiod's
/// `buildSidecarVirtualHostsForVirtualService`: a producer route applies to every client, a
/// consumer route to its own namespace's). As there, a route none of whose services passes
/// routes nothing, not even its other hosts, and one with a service that passes routes all
/// of its services.
fn gateway_route_applies(config: &Config, service: &Service, proxy: &Proxy) -> bool {
    service.namespace == config.namespace() || proxy.namespace == config.namespace()
}

/// Virtual hosts with unique names and domains, as istiod's `buildVirtualHost` and
/// `dedupeDomains`: a name seen before is skipped, a domain seen before is dropped (and a
/// virtual host left with none is skipped).
#[derive(Default)]
struct VirtualHosts {
    names: BTreeSet<String>,
    domains: BTreeSet<String>,
    out: Vec<VirtualHost>,
}

impl VirtualHosts {
    fn new() -> VirtualHosts {
        let mut v = VirtualHosts::default();
        // `allow_any` holds `*`: Envoy refuses a domain twice in a configuration.
        v.domains.insert("*".to_string());
        v
    }

    fn has(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    fn add(&mut self, mut vhost: VirtualHost) {
        if !self.names.insert(vhost.name.clone()) {
            return;
        }
        vhost
            .domains
            .retain(|d| self.domains.insert(d.to_ascii_lowercase()));
        if !vhost.domains.is_empty() {
            self.out.push(vhost);
        }
    }
}

/// The virtual hosts of the sidecar route configuration for `port`: from the egress listener
/// declared on that port, else from the catch-all listener.
fn sidecar_virtual_hosts(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    port: u32,
) -> Vec<VirtualHost> {
    let Some(egress) = scope
        .egress_for_port(port)
        .or_else(|| scope.default_egress())
    else {
        return Vec::new();
    };
    let on_port = services_on_port(egress, port);
    let with_port = proxyless(proxy);
    let mut vhosts = VirtualHosts::new();
    for config in &egress.virtual_services {
        let Spec::VirtualService(vs) = &config.spec else {
            continue;
        };
        let split = split_hosts(egress, config, vs, &on_port);
        if split.services.is_empty() && port != NON_REGISTRY_PORT {
            continue;
        }
        if vs.gateway_semantics()
            && !split
                .services
                .iter()
                .any(|s| gateway_route_applies(config, s, proxy))
        {
            continue;
        }
        let target = RouteTarget {
            proxy,
            gateway: "mesh",
            port,
        };
        let routes = translate_routes(ctx, config, vs, target);
        // As istiod: a VirtualService with no route for the proxy here routes nothing.
        if routes.is_empty() {
            continue;
        }
        for h in &split.others {
            let name = format!("{h}:{port}");
            let mut domains = vec![h.clone()];
            if with_port {
                domains.push(name.clone());
            }
            vhosts.add(VirtualHost {
                name,
                domains,
                routes: routes.clone(),
                ..Default::default()
            });
        }
        for service in split.services {
            if !vhosts.has(&format!("{}:{port}", service.hostname)) {
                vhosts.add(service_vhost(proxy, service, port, routes.clone()));
            }
        }
    }
    for service in on_port {
        if !vhosts.has(&format!("{}:{port}", service.hostname)) {
            let routes = vec![default_route(ctx, proxy, service, port)];
            vhosts.add(service_vhost(proxy, service, port, routes));
        }
    }
    let mut out = vhosts.out;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// istiod's `buildCatchAllVirtualHost`: `allow_any` to the original destination (or the
/// `egressProxy` cluster), or, under REGISTRY_ONLY, `block_all`, answering 502.
fn catch_all_virtual_host(scope: &SidecarScope) -> VirtualHost {
    if scope.outbound.registry_only {
        return VirtualHost {
            name: "block_all".to_string(),
            domains: vec!["*".to_string()],
            routes: vec![Route {
                name: "block_all".to_string(),
                r#match: Some(route_match(None, false)),
                action: Some(Action::DirectResponse(DirectResponseAction {
                    status: 502,
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        };
    }
    let cluster = scope
        .outbound
        .egress_cluster
        .as_deref()
        .unwrap_or(PASSTHROUGH);
    VirtualHost {
        name: "allow_any".to_string(),
        domains: vec!["*".to_string()],
        routes: vec![Route {
            name: "allow_any".to_string(),
            r#match: Some(route_match(None, false)),
            action: Some(Action::Route(passthrough_action(cluster))),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn proxyless(proxy: &Proxy) -> bool {
    proxy.generator.as_deref() == Some("grpc")
}

/// istiod's `allow_any` action: the original destination (`cluster`: the passthrough, or
/// the `egressProxy`), no timeout, `max_grpc_timeout` 0.
#[allow(deprecated)]
fn passthrough_action(cluster: &str) -> RouteAction {
    RouteAction {
        cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.to_string())),
        timeout: Some(no_timeout()),
        max_grpc_timeout: Some(no_timeout()),
        ..Default::default()
    }
}

fn no_timeout() -> Duration {
    Duration {
        seconds: 0,
        nanos: 0,
    }
}

/// The virtual host of one service for one proxy (a proxyless gRPC client's `HOST:PORT`):
/// routed by the first VirtualService with routes here of those
/// [`EgressScope::virtual_services_for`] gives, else straight to the service's cluster.
pub(crate) fn sidecar_virtual_host(
    ctx: &PushContext,
    proxy: &Proxy,
    egress: &EgressScope,
    service: &Service,
    service_port: u32,
    listener_port: u32,
) -> VirtualHost {
    let routes = egress
        .virtual_services_for(&service.hostname)
        .into_iter()
        // A Gateway API route names the service itself, and applies here (one host each:
        // the route of a parent Service).
        .filter(|(config, vs)| {
            !vs.gateway_semantics()
                || (names_exactly(config, vs, &service.hostname)
                    && gateway_route_applies(config, service, proxy))
        })
        .map(|(config, vs)| {
            let target = RouteTarget {
                proxy,
                gateway: "mesh",
                port: service_port,
            };
            translate_routes(ctx, config, vs, target)
        })
        .find(|routes| !routes.is_empty())
        .unwrap_or_else(|| vec![default_route(ctx, proxy, service, service_port)]);
    service_vhost(proxy, service, listener_port, routes)
}

/// Whether `vs` (of `config`) names `hostname` itself, not by a wildcard.
fn names_exactly(config: &Config, vs: &VirtualService, hostname: &str) -> bool {
    vs.hosts.iter().any(|h| {
        vs.resolve_host(h, config.namespace())
            .eq_ignore_ascii_case(hostname)
    })
}

fn service_vhost(
    proxy: &Proxy,
    service: &Service,
    listener_port: u32,
    routes: Vec<Route>,
) -> VirtualHost {
    let port = proxyless(proxy).then_some(listener_port);
    let mut domains = service_domains(
        &service.hostname,
        &service.namespace,
        &proxy.namespace,
        port,
    );
    // istiod's `generateVirtualHostDomains`: a headless Kubernetes service is also reached
    // as `POD.HOST` (a StatefulSet's pods), and every service by its addresses.
    if service.from_kubernetes && service.resolution == Resolution::None {
        let wildcards: Vec<String> = domains.iter().map(|d| format!("*.{d}")).collect();
        domains.extend(wildcards);
    }
    for address in service.addresses.iter().filter(|a| !a.contains('/')) {
        domains.push(address.clone());
        if let Some(port) = port {
            domains.push(format!("{address}:{port}"));
        }
    }
    VirtualHost {
        name: format!("{}:{listener_port}", service.hostname),
        domains,
        routes,
        ..Default::default()
    }
}

/// istiod's `BuildDefaultHTTPOutboundRoute`: no timeout (a gRPC request's `grpc-timeout`
/// honoured, unbounded: `max_grpc_timeout` 0, for proxyless clients too), the default
/// retries.
fn default_route(ctx: &PushContext, proxy: &Proxy, service: &Service, service_port: u32) -> Route {
    #[allow(deprecated)]
    let action = RouteAction {
        cluster_specifier: Some(ClusterSpecifier::Cluster(outbound_cluster_name(
            service_port,
            "",
            &service.hostname,
        ))),
        timeout: Some(no_timeout()),
        max_grpc_timeout: Some(no_timeout()),
        retry_policy: action::retry_policy(None),
        hash_policy: hash::for_service(ctx, proxy, &service.hostname, service_port)
            .into_iter()
            .collect(),
        ..Default::default()
    };
    Route {
        name: "default".to_string(),
        r#match: Some(route_match(None, false)),
        action: Some(Action::Route(action)),
        ..Default::default()
    }
}

/// The names a client may use for a service: the full host, the short forms of a
/// `NAME.NAMESPACE.svc.DOMAIN` host (`NAME` only from the same namespace), each also with
/// `:port` when `port` is given (istiod's `generateVirtualHostDomains`).
fn service_domains(
    hostname: &str,
    namespace: &str,
    proxy_namespace: &str,
    port: Option<u32>,
) -> Vec<String> {
    let mut names = vec![hostname.to_string()];
    let suffix = format!(".{namespace}.{}", axon_config::host::DEFAULT_DOMAIN);
    if let Some(name) = hostname.strip_suffix(&suffix) {
        names.push(format!("{name}.{namespace}.svc"));
        names.push(format!("{name}.{namespace}"));
        if namespace == proxy_namespace {
            names.push(name.to_string());
        }
    }
    match port {
        Some(port) => names
            .iter()
            .flat_map(|n| [n.clone(), format!("{n}:{port}")])
            .collect(),
        None => names,
    }
}
