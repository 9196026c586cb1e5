//! EDS: a `ClusterLoadAssignment` per subscribed cluster, from the endpoint index, filtered
//! by the DestinationRule subset's labels and grouped by locality.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::{
    Address, Locality, Pipe, SocketAddress, address, socket_address::PortSpecifier,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
    lb_endpoint::HostIdentifier,
};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::resource::Resource;
use crate::model::istio::DestinationRule;
use crate::model::proxy::Proxy;
use crate::model::push_context::PushContext;
use crate::model::service::{Endpoint, labels_match, parse_outbound_cluster_name};

/// One load assignment per subscribed name; a name axon does not know gets an empty one, so
/// that Envoy's cluster warming completes.
pub fn generate(ctx: &PushContext, names: &BTreeSet<String>) -> Vec<Resource> {
    names
        .iter()
        .map(|name| {
            let cla = match parse_outbound_cluster_name(name) {
                Some((port, subset, host)) => {
                    load_assignment_for(ctx, name, port, subset, host, None)
                }
                None => ClusterLoadAssignment {
                    cluster_name: name.clone(),
                    ..Default::default()
                },
            };
            Resource::new(name.clone(), &cla)
        })
        .collect()
}

/// The endpoints of `host:port`, restricted to `subset` (empty for all). The subset's labels
/// come from the DestinationRule `proxy` uses, or (EDS names carry no proxy) from the first
/// one of the host that defines the subset.
pub fn load_assignment_for(
    ctx: &PushContext,
    cluster_name: &str,
    port: u32,
    subset: &str,
    host: &str,
    proxy: Option<&Proxy>,
) -> ClusterLoadAssignment {
    let selector = if subset.is_empty() {
        None
    } else {
        let labels_of = |dr: &DestinationRule| {
            dr.subsets
                .iter()
                .find(|s| s.name == subset)
                .map(|s| s.labels.clone())
        };
        // A subset that no DestinationRule defines selects nothing.
        Some(match proxy {
            Some(p) => ctx
                .destination_rule_for_workload(host, &p.namespace, Some(&p.labels))
                .and_then(|chosen| labels_of(&chosen.rule)),
            None => ctx
                .destination_rules_of(host)
                .find_map(|(_, dr)| labels_of(dr)),
        })
    };
    let mut by_locality: BTreeMap<&str, Vec<LbEndpoint>> = BTreeMap::new();
    for ep in ctx.endpoints(host, port) {
        let selected = match &selector {
            None => true,
            Some(None) => false,
            Some(Some(labels)) => labels_match(labels, &ep.labels),
        };
        if selected {
            by_locality
                .entry(ep.locality.as_str())
                .or_default()
                .push(to_lb_endpoint(ep));
        }
    }
    ClusterLoadAssignment {
        cluster_name: cluster_name.to_string(),
        endpoints: by_locality
            .into_iter()
            .map(|(locality, lb_endpoints)| LocalityLbEndpoints {
                locality: Some(to_locality(locality)),
                // gRPC drops a locality without a weight; istiod sums its endpoints'.
                load_balancing_weight: Some(UInt32Value {
                    value: lb_endpoints
                        .iter()
                        .map(|e| e.load_balancing_weight.map_or(1, |w| w.value))
                        .sum(),
                }),
                lb_endpoints,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Istio's locality form `region/zone/subzone`.
fn to_locality(locality: &str) -> Locality {
    let mut parts = locality.splitn(3, '/').map(str::to_string);
    Locality {
        region: parts.next().unwrap_or_default(),
        zone: parts.next().unwrap_or_default(),
        sub_zone: parts.next().unwrap_or_default(),
    }
}

fn to_lb_endpoint(ep: &Endpoint) -> LbEndpoint {
    let address = match ep.address.strip_prefix("unix://") {
        Some(path) => address::Address::Pipe(Pipe {
            path: path.to_string(),
            mode: 0,
        }),
        None => address::Address::SocketAddress(SocketAddress {
            address: ep.address.clone(),
            port_specifier: Some(PortSpecifier::PortValue(ep.port)),
            ..Default::default()
        }),
    };
    LbEndpoint {
        host_identifier: Some(HostIdentifier::Endpoint(EnvoyEndpoint {
            address: Some(Address {
                address: Some(address),
            }),
            ..Default::default()
        })),
        load_balancing_weight: Some(UInt32Value { value: ep.weight }),
        ..Default::default()
    }
}

/// A single endpoint on `127.0.0.1:port`: a proxy's own workload.
pub fn local_load_assignment(cluster_name: &str, port: u32) -> ClusterLoadAssignment {
    let endpoint = Endpoint {
        address: "127.0.0.1".to_string(),
        port,
        labels: Default::default(),
        weight: 1,
        locality: String::new(),
    };
    ClusterLoadAssignment {
        cluster_name: cluster_name.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            lb_endpoints: vec![to_lb_endpoint(&endpoint)],
            ..Default::default()
        }],
        ..Default::default()
    }
}
