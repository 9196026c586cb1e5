//! A cluster's locality load-balancing config, as istiod's `ApplyToCluster` sets it
//! (`loadbalancer.go`): Envoy's locality-weighted balancing where a `distribute` rule
//! weighs localities or a `failover`/`failoverPriority` orders them (with outlier detection);
//! for a zone-aware setting, Envoy's zone-aware balancing (`routing_enabled` 0% when the
//! setting says `enabled: false`) with its `minClusterSize`. The priorities and weights
//! themselves are on the load assignment (`eds`), also inline for DNS clusters.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
use envoy_types::pb::envoy::config::cluster::v3::cluster::common_lb_config::{
    LocalityConfigSpecifier, LocalityWeightedLbConfig, ZoneAwareLbConfig,
};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt64Value;

use axon_model::locality::LbSetting;

/// Sets `cluster`'s locality config for `setting` (`outlier_detection`: its policy has it).
pub(super) fn apply(
    cluster: &mut Cluster,
    setting: Option<LbSetting<'_>>,
    outlier_detection: bool,
) {
    if cluster.lb_policy == LbPolicy::ClusterProvided as i32 {
        return;
    }
    let specifier = match setting {
        Some(LbSetting::Locality(l))
            if !l.distribute.is_empty()
                || (outlier_detection
                    && (!l.failover.is_empty() || !l.failover_priority.is_empty())) =>
        {
            LocalityConfigSpecifier::LocalityWeightedLbConfig(LocalityWeightedLbConfig {})
        }
        Some(LbSetting::ZoneAware(z)) => {
            LocalityConfigSpecifier::ZoneAwareLbConfig(ZoneAwareLbConfig {
                routing_enabled: (z.enabled == Some(false)).then_some(Percent { value: 0.0 }),
                min_cluster_size: z.min_cluster_size.map(|v| UInt64Value { value: v.into() }),
                ..Default::default()
            })
        }
        _ => return,
    };
    cluster
        .common_lb_config
        .get_or_insert_with(Default::default)
        .locality_config_specifier = Some(specifier);
}

#[cfg(test)]
mod tests {
    use super::*;
    use axon_config::istio::traffic_policy::{
        LocalityDistribute, LocalityFailover, LocalityLbSetting, ZoneAwareLbSetting,
    };

    fn specifier(setting: Option<LbSetting<'_>>, outlier: bool) -> Option<LocalityConfigSpecifier> {
        let mut c = Cluster::default();
        apply(&mut c, setting, outlier);
        c.common_lb_config.and_then(|c| c.locality_config_specifier)
    }

    #[test]
    fn weighted_only_where_localities_are_weighed_or_ordered_by_rule() {
        let default = LocalityLbSetting {
            enabled: Some(true),
            ..Default::default()
        };
        // The mesh default fails over by priority alone: no weighted config.
        assert_eq!(specifier(Some(LbSetting::Locality(&default)), true), None);
        let failover = LocalityLbSetting {
            failover: vec![LocalityFailover {
                from: "r1".into(),
                to: "r2".into(),
            }],
            ..Default::default()
        };
        assert_eq!(specifier(Some(LbSetting::Locality(&failover)), false), None);
        assert!(matches!(
            specifier(Some(LbSetting::Locality(&failover)), true),
            Some(LocalityConfigSpecifier::LocalityWeightedLbConfig(_))
        ));
        let distribute = LocalityLbSetting {
            distribute: vec![LocalityDistribute {
                from: "r1/*".into(),
                to: [("r1/*".to_string(), 100)].into(),
            }],
            ..Default::default()
        };
        assert!(matches!(
            specifier(Some(LbSetting::Locality(&distribute)), false),
            Some(LocalityConfigSpecifier::LocalityWeightedLbConfig(_))
        ));
        assert_eq!(specifier(None, true), None);
    }

    #[test]
    fn zone_aware_config_with_min_cluster_size() {
        let on = ZoneAwareLbSetting {
            min_cluster_size: Some(3),
            ..Default::default()
        };
        let Some(LocalityConfigSpecifier::ZoneAwareLbConfig(z)) =
            specifier(Some(LbSetting::ZoneAware(&on)), false)
        else {
            panic!("no zone-aware config");
        };
        assert_eq!(z.routing_enabled, None);
        assert_eq!(z.min_cluster_size.map(|v| v.value), Some(3));
        let off = ZoneAwareLbSetting {
            enabled: Some(false),
            ..Default::default()
        };
        let Some(LocalityConfigSpecifier::ZoneAwareLbConfig(z)) =
            specifier(Some(LbSetting::ZoneAware(&off)), false)
        else {
            panic!("no zone-aware config");
        };
        assert_eq!(z.routing_enabled.map(|p| p.value), Some(0.0));
    }
}
