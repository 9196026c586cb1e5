//! xDS for proxyless gRPC clients (node metadata `GENERATOR: grpc`, istiod's convention).
//!
//! A gRPC channel to `xds:///HOST:PORT` asks LDS for the listener `HOST:PORT`: an API listener
//! whose connection manager takes the route configuration of the same name over RDS. CDS and
//! LDS are answered for the names asked (gRPC does not use wildcards), EDS as for Envoy.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    Rds, http_connection_manager::RouteSpecifier,
};

use super::cds::ads_config_source;
use super::lds::{HcmKind, hcm_config};
use super::rds::sidecar_virtual_host;
use crate::resource::Resource;
use crate::resource::any;
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::service::Service;
use axon_model::sidecar_scope::SidecarScope;

/// Whether a proxy asked for the gRPC generator.
pub fn is_grpc(proxy: &Proxy) -> bool {
    proxy.generator.as_deref() == Some("grpc")
}

/// `HOST:PORT` split, with the service in scope that it names.
fn target<'a>(scope: &'a SidecarScope, name: &str) -> Option<(&'a Service, u32)> {
    let (host, port) = name.rsplit_once(':')?;
    let port: u32 = port.parse().ok()?;
    let service = scope.services.iter().find(|s| s.hostname == host)?;
    service.port(port)?;
    Some((service, port))
}

/// The names to serve: those asked, or every `HOST:PORT` in scope for a wildcard request.
fn targets(scope: &SidecarScope, names: &BTreeSet<String>) -> Vec<String> {
    if names.is_empty() || names.contains("*") {
        scope
            .services
            .iter()
            .flat_map(|s| {
                s.ports
                    .iter()
                    .map(|p| format!("{}:{}", s.hostname, p.number))
            })
            .collect()
    } else {
        names.iter().cloned().collect()
    }
}

pub fn listeners(scope: &SidecarScope, names: &BTreeSet<String>) -> Vec<Resource> {
    targets(scope, names)
        .into_iter()
        .filter(|name| target(scope, name).is_some())
        .map(|name| {
            let hcm = hcm_config(
                &name,
                RouteSpecifier::Rds(Rds {
                    config_source: Some(ads_config_source()),
                    route_config_name: name.clone(),
                }),
                HcmKind::Proxyless,
            );
            let listener = Listener {
                name: name.clone(),
                api_listener: Some(ApiListener {
                    api_listener: Some(any(&hcm)),
                }),
                ..Default::default()
            };
            Resource::new(name, &listener)
        })
        .collect()
}

pub fn routes(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    names: &BTreeSet<String>,
) -> Vec<Resource> {
    let Some(egress) = scope.default_egress().or(scope.egress.first()) else {
        return Vec::new();
    };
    names
        .iter()
        .filter_map(|name| {
            let (service, port) = target(scope, name)?;
            let vhost = sidecar_virtual_host(ctx, proxy, egress, service, port, port);
            let config = RouteConfiguration {
                name: name.clone(),
                virtual_hosts: vec![vhost],
                ..Default::default()
            };
            Some(Resource::new(name.clone(), &config))
        })
        .collect()
}

/// Of the clusters generated for the proxy, those asked for (all when none are named).
pub fn clusters(all: Vec<Resource>, names: &BTreeSet<String>) -> Vec<Resource> {
    if names.is_empty() || names.contains("*") {
        all.into_iter()
            .filter(|r| r.name.starts_with("outbound|"))
            .collect()
    } else {
        all.into_iter()
            .filter(|r| names.contains(&r.name))
            .collect()
    }
}
