//! VirtualService `tcp` and `tls` routes as network filters, as istiod's
//! `buildOutboundNetworkFilters` makes them (`networkfilter.go`): one destination is a
//! `tcp_proxy` to its cluster (stat prefix: the cluster), several are weighted clusters (stat
//! prefix `NAME.NAMESPACE` of the VirtualService; a destination of weight 0 left out); the
//! cluster is `outbound|PORT|SUBSET|HOST`, the port the destination's, else the service's
//! only one, else the listener's (`GetDestinationCluster`). The DestinationRule of the first
//! destination's host gives the idle timeout (`connectionPool.tcp.idleTimeout`, else the
//! node's `IDLE_TIMEOUT`), the connection's longest life (`maxConnectionDuration`) and a
//! source-IP hash. A MONGO port gets the `mongo_proxy` filter before it (istiod's default).
//!
//! And the match of a route's `match` blocks (istiod's `l4MultiMatch`, `l4SingleMatch`): by
//! port and gateway. Gateways and sidecars alike call these; the gateway's choice of routes
//! is in `gateway_l4`.

use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::extensions::filters::network::mongo_proxy::v3::MongoProxy;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy,
    tcp_proxy::{ClusterSpecifier, WeightedCluster, weighted_cluster::ClusterWeight},
};
use envoy_types::pb::envoy::r#type::v3::{HashPolicy, hash_policy};
use envoy_types::pb::google::protobuf::Duration;

use crate::resource::any;
use axon_config::config::{Config, Spec};
use axon_config::host;
use axon_config::istio::{DestinationRule, L4MatchAttributes, RouteDestination};
use axon_model::proxy::Proxy;
use axon_model::push_context::{PushContext, gateway_ref};
use axon_model::service::outbound_cluster_name;

/// The listener port routes are generated for.
#[derive(Debug, Clone, Copy)]
pub(super) struct L4Port<'a> {
    pub number: u32,
    pub protocol: &'a str,
}

/// istiod's `buildOutboundNetworkFilters` for the routes of VirtualService `config` (none
/// for no destination).
pub(super) fn route_filters(
    ctx: &PushContext,
    proxy: &Proxy,
    config: &Config,
    routes: &[RouteDestination],
    port: L4Port,
) -> Vec<Filter> {
    let namespace = config.namespace();
    let destinations: Vec<_> = routes
        .iter()
        .filter_map(|r| Some((r.destination.as_ref()?, r.weight)))
        .collect();
    let Some((first, _)) = destinations.first() else {
        return Vec::new();
    };
    // A Gateway API route's hosts are taken as they are (istiod resolves no shortname of it).
    let resolve = |h: &str| match &config.spec {
        Spec::VirtualService(vs) => vs.resolve_host(h, namespace),
        _ => host::resolve(h, namespace),
    };
    let first_host = resolve(&first.host);
    let cluster_of = |d: &axon_config::istio::Destination| {
        let hostname = resolve(&d.host);
        let explicit = d.port.as_ref().map(|p| p.number).filter(|p| *p != 0);
        let only = ctx
            .service(&hostname)
            .filter(|s| s.ports.len() == 1)
            .map(|s| s.ports[0].number);
        outbound_cluster_name(
            explicit.or(only).unwrap_or(port.number),
            &d.subset,
            &hostname,
        )
    };
    let (stat_prefix, specifier, subset) = if destinations.len() == 1 {
        let cluster = cluster_of(first);
        (
            cluster.clone(),
            ClusterSpecifier::Cluster(cluster),
            first.subset.as_str(),
        )
    } else {
        let clusters: Vec<ClusterWeight> = destinations
            .iter()
            .filter(|(_, w)| *w > 0)
            .map(|(d, w)| ClusterWeight {
                name: cluster_of(d),
                weight: u32::try_from(*w).unwrap_or(0),
                metadata_match: None,
            })
            .collect();
        if clusters.is_empty() {
            return Vec::new();
        }
        let specifier = ClusterSpecifier::WeightedClusters(WeightedCluster { clusters });
        (format!("{}.{namespace}", config.name()), specifier, "")
    };
    network_filters(
        ctx,
        proxy,
        &first_host,
        subset,
        stat_prefix,
        specifier,
        port,
    )
}

/// istiod's `buildOutboundNetworkFiltersWithSingleDestination` for a sidecar's TCP or TLS
/// port with no route of its own: a `tcp_proxy` to `cluster` (the stat prefix), with the
/// DestinationRule of `hostname`.
pub(super) fn single_destination_filters(
    ctx: &PushContext,
    proxy: &Proxy,
    hostname: &str,
    cluster: String,
    port: L4Port,
) -> Vec<Filter> {
    let specifier = ClusterSpecifier::Cluster(cluster.clone());
    network_filters(ctx, proxy, hostname, "", cluster, specifier, port)
}

/// The `tcp_proxy` (after a `mongo_proxy` on a MONGO port) of `specifier`, with the policy of
/// the DestinationRule of `first_host` and the first destination's `subset`.
fn network_filters(
    ctx: &PushContext,
    proxy: &Proxy,
    first_host: &str,
    subset: &str,
    stat_prefix: String,
    specifier: ClusterSpecifier,
    port: L4Port,
) -> Vec<Filter> {
    let chosen =
        ctx.destination_rule_for_workload(first_host, &proxy.namespace, Some(&proxy.labels));
    let rule = chosen.as_ref().map(|c| c.rule.as_ref());
    let tcp = rule
        .and_then(|r| r.traffic_policy.as_ref())
        .and_then(|p| p.policy.connection_pool.as_ref())
        .and_then(|c| c.tcp.as_ref());
    let idle = tcp
        .and_then(|t| t.idle_timeout.as_deref())
        .and_then(axon_config::validate::parse_duration)
        .or(proxy.idle_timeout);
    let longest = tcp
        .and_then(|t| t.max_connection_duration.as_deref())
        .and_then(axon_config::validate::parse_duration);
    let proxy_config = TcpProxy {
        stat_prefix: stat_prefix.clone(),
        cluster_specifier: Some(specifier),
        idle_timeout: idle.map(duration),
        max_downstream_connection_duration: longest.map(duration),
        hash_policy: rule
            .filter(|r| use_source_ip(r, subset))
            .map(|_| HashPolicy {
                policy_specifier: Some(hash_policy::PolicySpecifier::SourceIp(Default::default())),
            })
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let mut out = Vec::new();
    if port.protocol.eq_ignore_ascii_case("MONGO") {
        let mongo = MongoProxy {
            stat_prefix: stat_prefix.clone(),
            ..Default::default()
        };
        out.push(Filter {
            name: "envoy.filters.network.mongo_proxy".to_string(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&mongo))),
        });
    }
    out.push(Filter {
        name: "envoy.filters.network.tcp_proxy".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&proxy_config))),
    });
    out
}

/// istiod's `maybeSetHashPolicy`: the rule's `consistentHash.useSourceIp`, overridden by the
/// subset's load balancer when it has one.
fn use_source_ip(rule: &DestinationRule, subset: &str) -> bool {
    let lb_source_ip = |p: &axon_config::istio::TrafficPolicy| {
        p.load_balancer.as_ref().map(|lb| {
            lb.consistent_hash
                .as_ref()
                .is_some_and(|h| h.use_source_ip == Some(true))
        })
    };
    let top = rule
        .traffic_policy
        .as_ref()
        .and_then(|p| lb_source_ip(&p.policy))
        .unwrap_or(false);
    rule.subsets
        .iter()
        .find(|s| s.name == subset)
        .and_then(|s| s.traffic_policy.as_ref())
        .and_then(|p| lb_source_ip(&p.policy))
        .unwrap_or(top)
}

/// Nanoseconds as a protobuf Duration.
pub(super) fn duration(nanos: i128) -> Duration {
    Duration {
        seconds: i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX),
        nanos: i32::try_from(nanos % 1_000_000_000).unwrap_or(0),
    }
}

/// istiod's `l4MultiMatch`: no match block matches; else one of them must.
pub(super) fn multi_match(
    matches: &[L4MatchAttributes],
    port: u32,
    gateway: &str,
    vs_namespace: &str,
) -> bool {
    matches.is_empty()
        || matches
            .iter()
            .any(|m| single_match(m, port, gateway, vs_namespace))
}

/// istiod's `l4SingleMatch` on a gateway: the block's port (0: any) and its gateways (none:
/// any), names resolved in the VirtualService's namespace.
pub(super) fn single_match(
    m: &L4MatchAttributes,
    port: u32,
    gateway: &str,
    vs_namespace: &str,
) -> bool {
    (m.port == 0 || m.port == port)
        && (m.gateways.is_empty()
            || m.gateways
                .iter()
                .any(|g| gateway_ref(g, vs_namespace) == gateway))
}
