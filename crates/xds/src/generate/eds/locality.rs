//! Locality load balancing on a load assignment, relative to the proxy that receives it, as
//! istiod's `loadbalancer` package sets it (`ApplyLocalityLoadBalancer`,
//! `ApplyZoneAwareLoadBalancer`):
//!
//! - `distribute`: for a proxy in a rule's `from`, each destination locality's weight becomes
//!   its share of the rule's `to` (split by weight among the localities a wildcard matches);
//!   localities the rule does not name lose their endpoints;
//! - failover (only with outlier detection, else Envoy would never leave priority 0): the
//!   proxy's own subzone first, then its zone, its region, the `failover` region its region
//!   names, the rest; `failoverPriority` labels first split each locality by how many of the
//!   labels an endpoint shares with the proxy (a `label=value` entry compares with `value`);
//! - zone-aware: every endpoint of the proxy's region at priority 0 (Envoy balances zones
//!   there), the `failover` region next, the other regions last.
//!
//! Priorities are then renumbered from 0 without gaps, as Envoy requires.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::endpoint::v3::LocalityLbEndpoints;
use envoy_types::pb::google::protobuf::UInt32Value;

use axon_config::istio::Labels;
use axon_config::istio::traffic_policy::{LocalityDistribute, LocalityFailover};
use axon_model::locality::{LbSetting, Locality, NETWORK_LABEL, priority_label};
use axon_model::service::Endpoint;

/// One locality's endpoints, with the model endpoints they came from (same order).
#[derive(Debug, Clone)]
pub(super) struct Group<'a> {
    pub locality: Locality,
    pub envoy: LocalityLbEndpoints,
    pub endpoints: Vec<&'a Endpoint>,
}

/// Who receives the load assignment.
pub struct Receiver<'a> {
    pub locality: &'a Locality,
    /// Its labels with its topology labels added.
    pub labels: &'a Labels,
}

/// Applies `setting` for `receiver` (`outlier_detection`: the cluster's policy has it).
pub(super) fn apply(
    groups: Vec<Group<'_>>,
    receiver: &Receiver<'_>,
    setting: LbSetting<'_>,
    outlier_detection: bool,
) -> Vec<LocalityLbEndpoints> {
    let mut groups = groups;
    match setting {
        LbSetting::Locality(l) if !l.distribute.is_empty() => {
            distribute(&mut groups, receiver.locality, &l.distribute);
        }
        LbSetting::Locality(l) if outlier_detection => {
            if !l.failover_priority.is_empty() {
                groups = failover_priorities(groups, receiver.labels, &l.failover_priority);
                if !l.failover.is_empty() {
                    locality_failover(&mut groups, receiver.locality, &l.failover);
                }
            } else {
                locality_failover(&mut groups, receiver.locality, &l.failover);
            }
        }
        LbSetting::Locality(_) => {}
        LbSetting::ZoneAware(z) if z.enabled == Some(false) => {}
        LbSetting::ZoneAware(z) => {
            if !z.failover_priority.is_empty() {
                groups = failover_priorities(groups, receiver.labels, &z.failover_priority);
            }
            zone_aware_regions(&mut groups, receiver.locality, &z.failover);
        }
    }
    groups.into_iter().map(|g| g.envoy).collect()
}

/// istiod's `applyLocalityWeights`.
fn distribute(groups: &mut [Group<'_>], proxy: &Locality, rules: &[LocalityDistribute]) {
    let Some(rule) = rules.iter().find(|r| proxy.matches(&r.from)) else {
        return;
    };
    let mut unmatched: Vec<bool> = vec![true; groups.len()];
    for (to, weight) in &rule.to {
        let matched: Vec<(usize, u32)> = groups
            .iter()
            .enumerate()
            .filter(|(i, g)| unmatched[*i] && g.locality.matches(to))
            .map(|(i, g)| (i, g.envoy.load_balancing_weight.map_or(1, |w| w.value)))
            .collect();
        let total: u64 = matched.iter().map(|(_, w)| u64::from(*w)).sum();
        for (i, original) in matched {
            unmatched[i] = false;
            let share = (u64::from(original) * u64::from(*weight)) as f64 / total as f64;
            if share > 0.0 {
                groups[i].envoy.load_balancing_weight = Some(UInt32Value {
                    value: share.ceil() as u32,
                });
            }
        }
    }
    for (group, unmatched) in groups.iter_mut().zip(unmatched) {
        if unmatched {
            group.envoy.lb_endpoints.clear();
            group.endpoints.clear();
        }
    }
}

/// istiod's `applyLocalityFailover`, composing with priorities already set (× 5).
fn locality_failover(groups: &mut [Group<'_>], proxy: &Locality, failover: &[LocalityFailover]) {
    for group in groups.iter_mut() {
        let mut priority = proxy.lb_priority(&group.locality);
        if priority == 3
            && let Some(f) = failover.iter().find(|f| f.from == proxy.region)
            && group.locality.region != f.to
        {
            priority = 4;
        }
        group.envoy.priority = group.envoy.priority * 5 + priority;
    }
    compact(groups);
}

/// istiod's `applyZoneAwareRegionalFailover`, composing with priorities already set (× 3).
fn zone_aware_regions(groups: &mut [Group<'_>], proxy: &Locality, failover: &[LocalityFailover]) {
    for group in groups.iter_mut() {
        let region = &group.locality.region;
        let priority = if *region == proxy.region {
            0
        } else {
            match failover.iter().find(|f| f.from == proxy.region) {
                Some(f) if f.to == *region => 1,
                _ => 2,
            }
        };
        group.envoy.priority = group.envoy.priority * 3 + priority;
    }
    compact(groups);
}

/// istiod's `applyFailoverPriorities`: each locality split by the priority its endpoints'
/// labels give them, then renumbered. Nothing happens without proxy labels.
fn failover_priorities<'a>(
    groups: Vec<Group<'a>>,
    proxy_labels: &Labels,
    priorities: &[String],
) -> Vec<Group<'a>> {
    if proxy_labels.is_empty() || groups.is_empty() {
        return groups;
    }
    let mut out: Vec<Group<'a>> = groups
        .into_iter()
        .flat_map(|g| split_by_labels(g, proxy_labels, priorities))
        .collect();
    compact(&mut out);
    out
}

fn split_by_labels<'a>(
    group: Group<'a>,
    proxy_labels: &Labels,
    priorities: &[String],
) -> Vec<Group<'a>> {
    let lowest = priorities.len() as u32;
    let includes_network = priorities.first().is_some_and(|p| p == NETWORK_LABEL);
    let mut by_priority: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, ep) in group.endpoints.iter().enumerate() {
        let ep_labels = Locality::parse(&ep.locality).augment(&ep.labels, &ep.network);
        let mut priority = 0;
        let mut adjust = 0;
        for (j, entry) in priorities.iter().enumerate() {
            let (label, value) = priority_label(entry);
            let for_proxy = value.or(proxy_labels.get(label).map(String::as_str));
            let for_endpoint = ep_labels.get(label).map(String::as_str);
            if for_proxy.unwrap_or("") != for_endpoint.unwrap_or("") {
                if j == 0 && includes_network {
                    adjust = lowest;
                    continue;
                }
                priority = lowest - j as u32;
                break;
            }
        }
        by_priority.entry(priority + adjust).or_default().push(i);
    }
    by_priority
        .into_iter()
        .map(|(priority, indexes)| {
            let lb_endpoints: Vec<_> = indexes
                .iter()
                .map(|&i| group.envoy.lb_endpoints[i].clone())
                .collect();
            let weight = lb_endpoints
                .iter()
                .map(|e| e.load_balancing_weight.map_or(0, |w| w.value))
                .sum();
            Group {
                locality: group.locality.clone(),
                envoy: LocalityLbEndpoints {
                    lb_endpoints,
                    priority,
                    load_balancing_weight: Some(UInt32Value { value: weight }),
                    ..group.envoy.clone()
                },
                endpoints: indexes.iter().map(|&i| group.endpoints[i]).collect(),
            }
        })
        .collect()
}

/// Renumbers the priorities in use as 0, 1, 2, ... in their order.
fn compact(groups: &mut [Group<'_>]) {
    let used: std::collections::BTreeSet<u32> = groups.iter().map(|g| g.envoy.priority).collect();
    let rank: BTreeMap<u32, u32> = used.into_iter().zip(0..).collect();
    for group in groups {
        group.envoy.priority = rank[&group.envoy.priority];
    }
}

#[cfg(test)]
#[path = "locality_tests.rs"]
mod tests;
