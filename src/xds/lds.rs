//! LDS: for a gateway, one bound listener per Gateway server port, named like istiod's
//! `0.0.0.0_PORT`, with an HTTP connection manager that takes routes over RDS (`http.PORT`).

use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address::PortSpecifier};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager::RouteSpecifier, http_filter,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use super::cds::ads_config_source;
use super::resource::Resource;
use crate::model::gateway;
use crate::model::proxy::{Proxy, ProxyType};
use crate::model::push_context::PushContext;

pub fn generate(ctx: &PushContext, proxy: &Proxy) -> Vec<Resource> {
    match proxy.proxy_type {
        ProxyType::Router => gateway_listeners(ctx, proxy),
        ProxyType::Sidecar => Vec::new(),
    }
}

fn gateway_listeners(ctx: &PushContext, proxy: &Proxy) -> Vec<Resource> {
    let merged = gateway::merge(ctx, proxy);
    merged
        .ports
        .keys()
        .map(|&port| {
            let bind = merged.bind.get(&port).copied().unwrap_or("0.0.0.0");
            let name = format!("{bind}_{port}");
            let listener = Listener {
                name: name.clone(),
                address: Some(socket_address(bind, port)),
                filter_chains: vec![FilterChain {
                    filters: vec![http_connection_manager(
                        &format!("outbound_{bind}_{port}"),
                        &format!("http.{port}"),
                    )],
                    ..Default::default()
                }],
                ..Default::default()
            };
            Resource::new(name, &listener)
        })
        .collect()
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

fn any<M: Message + Name>(msg: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: msg.encode_to_vec(),
    }
}

/// An HTTP connection manager filter that fetches `route_name` over ADS.
pub fn http_connection_manager(stat_prefix: &str, route_name: &str) -> Filter {
    let hcm = HttpConnectionManager {
        stat_prefix: stat_prefix.to_string(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ads_config_source()),
            route_config_name: route_name.to_string(),
        })),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&Router::default()))),
            ..Default::default()
        }],
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.http_connection_manager".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
    }
}
