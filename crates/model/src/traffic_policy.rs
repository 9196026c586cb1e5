//! Which traffic policy of a DestinationRule a cluster gets, and which consistent hash a
//! route asks for, as istiod merges them.
//!
//! For a cluster (istiod's `GetPortLevelTrafficPolicy`, `MergeSubsetTrafficPolicy`,
//! `MergeTrafficPolicy`): a `portLevelSettings` entry for the cluster's port replaces the
//! rule's policy wholesale (a part it leaves out gets the default, it is not inherited); a
//! subset's policy, resolved for the port the same way, then overrides each part it sets, or
//! every part when it has an entry for the port.
//!
//! Below the rule's policy, the mesh's `defaultTrafficPolicy` (`connectionPool` and
//! `outlierDetection`) fills the parts it leaves out ([`cluster_policy_in`]).
//!
//! For a route (istiod's `HashForHTTPDestination`, `hashForService`): the consistent hash of
//! the subset's entry for the destination port, else the subset's, else the rule's entry for
//! the port, else the rule's, each taken only when it sets a consistent hash.

use axon_config::istio::DestinationRule;
use axon_config::istio::traffic_policy::{
    ClientTls, ConnectionPoolSettings, ConsistentHash, LoadBalancerSettings, OutlierDetection,
    ProxyProtocol, RetryBudget, TrafficPolicy,
};
use axon_config::mesh::MeshConfig;

/// The parts of a traffic policy that one cluster gets.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClusterPolicy<'a> {
    pub load_balancer: Option<&'a LoadBalancerSettings>,
    pub connection_pool: Option<&'a ConnectionPoolSettings>,
    pub outlier_detection: Option<&'a OutlierDetection>,
    pub tls: Option<&'a ClientTls>,
    /// Not part of a port entry, as the PROXY protocol: a port with one has neither (istiod's
    /// `shadowCopyPortTrafficPolicy`).
    pub retry_budget: Option<&'a RetryBudget>,
    pub proxy_protocol: Option<&'a ProxyProtocol>,
}

impl<'a> ClusterPolicy<'a> {
    /// istiod's `GetPortLevelTrafficPolicy`: the entry of `policy` for `port` when it has one
    /// (and `true`), else the policy itself.
    pub fn for_port(policy: &'a TrafficPolicy, port: u32) -> (ClusterPolicy<'a>, bool) {
        let entry = policy
            .port_level_settings
            .iter()
            .flatten()
            .find(|p| p.port.as_ref().is_some_and(|n| n.number == port));
        match entry {
            Some(p) => (
                ClusterPolicy {
                    load_balancer: p.load_balancer.as_ref(),
                    connection_pool: p.connection_pool.as_ref(),
                    outlier_detection: p.outlier_detection.as_ref(),
                    tls: p.tls.as_ref(),
                    retry_budget: None,
                    proxy_protocol: None,
                },
                true,
            ),
            None => (
                ClusterPolicy {
                    load_balancer: policy.load_balancer.as_ref(),
                    connection_pool: policy.connection_pool.as_ref(),
                    outlier_detection: policy.outlier_detection.as_ref(),
                    tls: policy.tls.as_ref(),
                    retry_budget: policy.retry_budget.as_ref(),
                    proxy_protocol: policy.proxy_protocol.as_ref(),
                },
                false,
            ),
        }
    }

    /// istiod's `MergeTrafficPolicy`: `over` replaces each part it sets, or every part when
    /// it comes from a port entry (`wholesale`; the retry budget and the PROXY protocol,
    /// which no port entry has, only when set).
    fn overridden_by(self, over: ClusterPolicy<'a>, wholesale: bool) -> ClusterPolicy<'a> {
        fn pick<T>(base: Option<T>, over: Option<T>, wholesale: bool) -> Option<T> {
            if over.is_some() || wholesale {
                over
            } else {
                base
            }
        }
        ClusterPolicy {
            load_balancer: pick(self.load_balancer, over.load_balancer, wholesale),
            connection_pool: pick(self.connection_pool, over.connection_pool, wholesale),
            outlier_detection: pick(self.outlier_detection, over.outlier_detection, wholesale),
            tls: pick(self.tls, over.tls, wholesale),
            retry_budget: pick(self.retry_budget, over.retry_budget, false),
            proxy_protocol: pick(self.proxy_protocol, over.proxy_protocol, false),
        }
    }
}

/// The policy of the cluster of `dr`'s host on `port`, for `subset` (`""`: the host's own
/// cluster). A subset `dr` does not have gets the rule's policy.
pub fn cluster_policy<'a>(dr: &'a DestinationRule, subset: &str, port: u32) -> ClusterPolicy<'a> {
    merged(Some(dr), subset, port, ClusterPolicy::default())
}

/// [`cluster_policy`] over the mesh's `defaultTrafficPolicy` (istiod's
/// `applyDefaultTrafficPolicy`): the rule's policy for the port (or none, without a rule)
/// takes the mesh's `connectionPool` and `outlierDetection` where it sets none, before the
/// subset's policy is merged over it (so a subset's port entry, which replaces every part,
/// drops them too, as in istiod).
pub fn cluster_policy_in<'a>(
    mesh: &'a MeshConfig,
    dr: Option<&'a DestinationRule>,
    subset: &str,
    port: u32,
) -> ClusterPolicy<'a> {
    let defaults = ClusterPolicy {
        connection_pool: mesh.default_connection_pool.as_ref(),
        outlier_detection: mesh.default_outlier_detection.as_ref(),
        ..ClusterPolicy::default()
    };
    merged(dr, subset, port, defaults)
}

fn merged<'a>(
    dr: Option<&'a DestinationRule>,
    subset: &str,
    port: u32,
    defaults: ClusterPolicy<'a>,
) -> ClusterPolicy<'a> {
    let base = dr
        .and_then(|dr| dr.traffic_policy.as_ref())
        .map(|doc| ClusterPolicy::for_port(&doc.policy, port).0);
    let base = if defaults.connection_pool.is_none() && defaults.outlier_detection.is_none() {
        base
    } else {
        let mut seeded = base.unwrap_or_default();
        seeded.connection_pool = seeded.connection_pool.or(defaults.connection_pool);
        seeded.outlier_detection = seeded.outlier_detection.or(defaults.outlier_detection);
        Some(seeded)
    };
    let subset_policy = dr
        .filter(|_| !subset.is_empty())
        .and_then(|dr| dr.subsets.iter().find(|s| s.name == subset))
        .and_then(|s| s.traffic_policy.as_ref());
    match (base, subset_policy) {
        (base, None) => base.unwrap_or_default(),
        (None, Some(doc)) => ClusterPolicy::for_port(&doc.policy, port).0,
        (Some(base), Some(doc)) => {
            let (over, wholesale) = ClusterPolicy::for_port(&doc.policy, port);
            base.overridden_by(over, wholesale)
        }
    }
}

/// The consistent hash a route to `dr`'s host asks for: for `subset` (`""`: none) and the
/// destination's `port` when the route names one.
pub fn route_hash<'a>(
    dr: &'a DestinationRule,
    subset: &str,
    port: Option<u32>,
) -> Option<&'a ConsistentHash> {
    let hash_of = |policy: Option<&'a TrafficPolicy>| {
        policy?.load_balancer.as_ref()?.consistent_hash.as_ref()
    };
    let port_hash_of = |policy: Option<&'a TrafficPolicy>| {
        let port = port?;
        policy?
            .port_level_settings
            .iter()
            .flatten()
            .find(|p| p.port.as_ref().is_some_and(|n| n.number == port))?
            .load_balancer
            .as_ref()?
            .consistent_hash
            .as_ref()
    };
    let rule = dr.traffic_policy.as_ref().map(|d| &*d.policy);
    let subset = dr
        .subsets
        .iter()
        .find(|s| !subset.is_empty() && s.name == subset)
        .and_then(|s| s.traffic_policy.as_ref())
        .map(|d| &*d.policy);
    port_hash_of(subset)
        .or_else(|| hash_of(subset))
        .or_else(|| port_hash_of(rule))
        .or_else(|| hash_of(rule))
}

/// The consistent hash of the route to a service port that no VirtualService routes
/// (istiod's `hashForService`): the rule's, or its entry's for `port` when that sets one.
pub fn service_hash(dr: &DestinationRule, port: u32) -> Option<&ConsistentHash> {
    route_hash(dr, "", Some(port))
}

pub mod inbound;

#[cfg(test)]
mod tests;
