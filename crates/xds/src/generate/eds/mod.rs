//! EDS: a `ClusterLoadAssignment` per subscribed cluster, from the endpoint index, filtered
//! by the DestinationRule subset's labels and grouped by locality; where the proxy's
//! DestinationRule (or the mesh default) asks for locality load balancing, the localities are
//! ordered or weighed for that proxy (`eds/locality.rs`). An endpoint whose workload runs
//! istio's agent (label `security.istio.io/tlsMode`) carries it in its metadata, for auto mTLS.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::{
    Address, Locality as EnvoyLocality, Metadata, Pipe, SocketAddress, address,
    socket_address::PortSpecifier,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
    lb_endpoint::HostIdentifier,
};
use envoy_types::pb::google::protobuf::{Struct, UInt32Value, Value, value::Kind};

use crate::resource::Resource;
use axon_config::istio::DestinationRule;
use axon_model::locality::{LbSetting, Locality};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::service::{Endpoint, TLS_MODE_DISABLED, labels_match, parse_outbound_cluster_name};
use axon_model::traffic_policy::cluster_policy_in;

mod locality;

pub use locality::Receiver;

/// One load assignment per subscribed name; a name axon does not know gets an empty one, so
/// that Envoy's cluster warming completes. Without `proxy`, or where no locality setting
/// orders endpoints for it ([`per_proxy_setting`]), the assignment is the same for every
/// proxy.
pub fn generate(
    ctx: &PushContext,
    proxy: Option<&Proxy>,
    names: &BTreeSet<String>,
) -> Vec<Resource> {
    names
        .iter()
        .map(|name| {
            let cla = match parse_outbound_cluster_name(name) {
                Some((port, subset, host)) => proxy
                    .and_then(|p| ordered_for(ctx, p, name, port, subset, host))
                    .unwrap_or_else(|| shared_load_assignment(ctx, name, port, subset, host)),
                None => ClusterLoadAssignment {
                    cluster_name: name.clone(),
                    ..Default::default()
                },
            };
            Resource::new(name.clone(), &cla)
        })
        .collect()
}

/// Calls `f` with the locality setting that orders or weighs the endpoints of `host:port`
/// (`subset`) for `proxy`, and whether the cluster's policy has outlier detection; `None`
/// when the assignment is the same for every proxy.
pub fn per_proxy_setting<R>(
    ctx: &PushContext,
    proxy: &Proxy,
    host: &str,
    subset: &str,
    port: u32,
    f: impl FnOnce(LbSetting<'_>, bool) -> R,
) -> Option<R> {
    if !ctx.locality_dependent() {
        return None;
    }
    let chosen = ctx.destination_rule_for_workload(host, &proxy.namespace, Some(&proxy.labels));
    let policy = cluster_policy_in(
        &ctx.mesh,
        chosen.as_ref().map(|c| c.rule.as_ref()),
        subset,
        port,
    );
    let outlier = policy.outlier_detection.is_some();
    let setting = LbSetting::effective(policy.load_balancer, &ctx.mesh)?;
    setting.per_proxy(outlier).then(|| f(setting, outlier))
}

/// The endpoints of `host:port` restricted to `subset` (empty for all), the subset's labels
/// from the first DestinationRule of the host that defines it (for every proxy).
fn shared_load_assignment(
    ctx: &PushContext,
    cluster_name: &str,
    port: u32,
    subset: &str,
    host: &str,
) -> ClusterLoadAssignment {
    let groups = groups(ctx, port, subset, host, None);
    assignment(cluster_name, groups.into_iter().map(|g| g.envoy).collect())
}

/// The endpoints of `host:port` for `proxy`, restricted to `subset` (empty for all) by the
/// DestinationRule `proxy` uses, with the localities ordered or weighed for it when its
/// rule says so ([`per_proxy_setting`]).
pub fn load_assignment_for(
    ctx: &PushContext,
    cluster_name: &str,
    port: u32,
    subset: &str,
    host: &str,
    proxy: Option<&Proxy>,
) -> ClusterLoadAssignment {
    proxy
        .and_then(|p| ordered_for(ctx, p, cluster_name, port, subset, host))
        .unwrap_or_else(|| {
            let groups = groups(ctx, port, subset, host, proxy);
            assignment(cluster_name, groups.into_iter().map(|g| g.envoy).collect())
        })
}

/// The endpoints of `host:port` (`subset` by the DestinationRule `proxy` uses) with their
/// localities ordered or weighed for `proxy`; `None` when its rule does not ask for it
/// ([`per_proxy_setting`]), so that the assignment is the same for every proxy.
fn ordered_for(
    ctx: &PushContext,
    proxy: &Proxy,
    cluster_name: &str,
    port: u32,
    subset: &str,
    host: &str,
) -> Option<ClusterLoadAssignment> {
    per_proxy_setting(ctx, proxy, host, subset, port, |setting, outlier| {
        let labels = proxy.locality.augment(&proxy.labels, &proxy.network);
        let receiver = Receiver {
            locality: &proxy.locality,
            labels: &labels,
        };
        let groups = groups(ctx, port, subset, host, Some(proxy));
        assignment(
            cluster_name,
            locality::apply(groups, &receiver, setting, outlier),
        )
    })
}

fn assignment(cluster_name: &str, endpoints: Vec<LocalityLbEndpoints>) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster_name.to_string(),
        endpoints,
        ..Default::default()
    }
}

/// The selected endpoints of `host:port`, a group per locality in locality order. The
/// subset's labels come from the DestinationRule `proxy` uses, or (no proxy) from the first
/// one of the host that defines the subset.
fn groups<'a>(
    ctx: &'a PushContext,
    port: u32,
    subset: &str,
    host: &str,
    proxy: Option<&Proxy>,
) -> Vec<locality::Group<'a>> {
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
    let mut by_locality: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
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
                .push(ep);
        }
    }
    by_locality
        .into_iter()
        .map(|(locality, endpoints)| {
            let lb_endpoints: Vec<LbEndpoint> =
                endpoints.iter().map(|e| to_lb_endpoint(e)).collect();
            locality::Group {
                locality: Locality::parse(locality),
                envoy: LocalityLbEndpoints {
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
                },
                endpoints,
            }
        })
        .collect()
}

/// Istio's locality form `region/zone/subzone`.
fn to_locality(locality: &str) -> EnvoyLocality {
    let mut parts = locality.splitn(3, '/').map(str::to_string);
    EnvoyLocality {
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
        metadata: tls_mode_metadata(ep.tls_mode()),
        ..Default::default()
    }
}

/// istiod's `AppendLbEndpointMetadata`: an endpoint whose workload runs istio's agent says
/// so in `envoy.transport_socket_match` (`tlsMode`), which auto mTLS clusters match.
fn tls_mode_metadata(mode: &str) -> Option<Metadata> {
    if mode.is_empty() || mode == TLS_MODE_DISABLED {
        return None;
    }
    let fields = std::collections::HashMap::from([(
        "tlsMode".to_string(),
        Value {
            kind: Some(Kind::StringValue(mode.to_string())),
        },
    )]);
    Some(Metadata {
        filter_metadata: [(TRANSPORT_SOCKET_MATCH.to_string(), Struct { fields })].into(),
        ..Default::default()
    })
}

/// The filter metadata key Envoy matches `transport_socket_matches` against.
pub(crate) const TRANSPORT_SOCKET_MATCH: &str = "envoy.transport_socket_match";

/// A single endpoint on `127.0.0.1:port`: a proxy's own workload.
pub fn local_load_assignment(cluster_name: &str, port: u32) -> ClusterLoadAssignment {
    load_assignment_at(cluster_name, "127.0.0.1", port)
}

/// One endpoint, `address:port`, for `cluster_name` (an inbound cluster's).
pub fn load_assignment_at(cluster_name: &str, address: &str, port: u32) -> ClusterLoadAssignment {
    let endpoint = Endpoint {
        address: address.to_string(),
        port,
        labels: Default::default(),
        weight: 1,
        locality: String::new(),
        network: String::new(),
        service_account: String::new(),
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
