//! A cluster's load balancer, as istiod's `applyLoadBalancer` and `ApplyRingHashLoadBalancer`
//! set it (`cluster_traffic_policy.go`): LEAST_REQUEST unless the policy says otherwise,
//! ROUND_ROBIN or RANDOM on request, PASSTHROUGH as an original-destination cluster, a
//! consistent hash as RING_HASH (minimum ring size 1024 unless given) or MAGLEV, and the
//! slow-start window of `warmup` or `warmupDurationSecs`.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, LbConfig, LbPolicy, LeastRequestLbConfig, MaglevLbConfig,
    RingHashLbConfig, RoundRobinLbConfig, SlowStartConfig,
};
use envoy_types::pb::envoy::config::core::v3::RuntimeDouble;
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt64Value;

use super::duration;
use axon_config::istio::traffic_policy::{LoadBalancerSettings, SimpleLb};

/// Envoy's default minimum ring size, which istiod sets when a consistent hash names none.
const DEFAULT_MINIMUM_RING_SIZE: u64 = 1024;

/// Sets `cluster`'s load balancer from `lb` (none: istiod's default).
pub(super) fn apply(cluster: &mut Cluster, lb: Option<&LoadBalancerSettings>) {
    if cluster.lb_policy == LbPolicy::ClusterProvided as i32 {
        return;
    }
    let slow_start = lb.and_then(slow_start);
    match lb.and_then(|lb| lb.simple).unwrap_or_default() {
        SimpleLb::Random => cluster.lb_policy = LbPolicy::Random as i32,
        SimpleLb::RoundRobin => {
            cluster.lb_policy = LbPolicy::RoundRobin as i32;
            if let Some(slow_start) = slow_start {
                cluster.lb_config = Some(LbConfig::RoundRobinLbConfig(RoundRobinLbConfig {
                    slow_start_config: Some(slow_start),
                }));
            }
        }
        SimpleLb::Passthrough => {
            cluster.lb_policy = LbPolicy::ClusterProvided as i32;
            cluster.cluster_discovery_type = Some(ClusterDiscoveryType::Type(
                DiscoveryType::OriginalDst as i32,
            ));
            cluster.load_assignment = None;
        }
        SimpleLb::Unspecified | SimpleLb::LeastConn | SimpleLb::LeastRequest => {
            cluster.lb_policy = LbPolicy::LeastRequest as i32;
            if let Some(slow_start) = slow_start {
                cluster.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                    slow_start_config: Some(slow_start),
                    ..Default::default()
                }));
            }
        }
    }
    if let Some(hash) = lb.and_then(|lb| lb.consistent_hash.as_ref()) {
        if let Some(maglev) = &hash.maglev {
            cluster.lb_policy = LbPolicy::Maglev as i32;
            // istiod leaves any config set above when the table size is 0.
            if let Some(size) = maglev.table_size.filter(|s| *s != 0) {
                cluster.lb_config = Some(LbConfig::MaglevLbConfig(MaglevLbConfig {
                    table_size: Some(UInt64Value { value: size }),
                }));
            }
        } else if let Some(ring) = &hash.ring_hash {
            cluster.lb_policy = LbPolicy::RingHash as i32;
            if let Some(size) = ring.minimum_ring_size.filter(|s| *s != 0) {
                cluster.lb_config = Some(ring_hash(size));
            }
        } else {
            cluster.lb_policy = LbPolicy::RingHash as i32;
            let size = hash
                .minimum_ring_size
                .filter(|s| *s != 0)
                .unwrap_or(DEFAULT_MINIMUM_RING_SIZE);
            cluster.lb_config = Some(ring_hash(size));
        }
    }
}

fn ring_hash(minimum_ring_size: u64) -> LbConfig {
    LbConfig::RingHashLbConfig(RingHashLbConfig {
        minimum_ring_size: Some(UInt64Value {
            value: minimum_ring_size,
        }),
        ..Default::default()
    })
}

/// istiod's `setWarmup` (aggression 1 and a minimum weight of 10% unless given; the runtime
/// key is one no runtime can set), else `setSlowStartConfig` for `warmupDurationSecs`.
fn slow_start(lb: &LoadBalancerSettings) -> Option<SlowStartConfig> {
    if let Some(warmup) = &lb.warmup {
        return Some(SlowStartConfig {
            slow_start_window: warmup.duration.as_deref().and_then(duration),
            aggression: Some(RuntimeDouble {
                default_value: warmup.aggression.unwrap_or(1.0),
                runtime_key: "(".to_string(),
            }),
            min_weight_percent: Some(Percent {
                value: warmup.minimum_percent.unwrap_or(10.0),
            }),
        });
    }
    let window = duration(lb.warmup_duration_secs.as_deref()?)?;
    Some(SlowStartConfig {
        slow_start_window: Some(window),
        ..Default::default()
    })
}
