//! The connection pool of an inbound cluster `inbound|PORT||`, as istiod's
//! `buildInboundCluster` chooses it (`cluster_builder.go`), so that the receiving side has the
//! capacity its clients are given:
//!
//! 1. the DestinationRule of the port's primary service ([`InboundPort::service`]), as the
//!    proxy's scope sees it (the service must be in the scope; a rule's `workloadSelector`
//!    never applies inbound), its `portLevelSettings` entry for the service port (an ingress
//!    listener's port) replacing the rule's policy wholesale: that policy's `connectionPool`
//!    and `retryBudget`;
//! 2. where that sets no `connectionPool`, the mesh's `defaultTrafficPolicy.connectionPool`;
//! 3. over both, the Sidecar's: the `connectionPool` of the first `ingress` listener on the
//!    port that sets one, else its `inboundConnectionPool` (istiod's
//!    `InboundConnectionPoolForPort`).
//!
//! No pool at all is istiod's empty one: the largest circuit breakers. Only the connection
//! pool (and retry budget) apply inbound: no load balancer, outlier detection or TLS.

use serde::Deserialize;

use crate::proxy::Proxy;
use crate::push_context::PushContext;
use crate::sidecar_scope::{InboundPort, SidecarScope};
use axon_config::istio::Sidecar;
use axon_config::istio::traffic_policy::{ConnectionPoolSettings, RetryBudget};

use super::ClusterPolicy;

/// What an inbound cluster gets of the policies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InboundPolicy {
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub retry_budget: Option<RetryBudget>,
}

/// The policy of `inbound`'s cluster for `proxy` in `scope`.
pub fn inbound_policy(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    inbound: &InboundPort,
) -> InboundPolicy {
    let mut out = InboundPolicy::default();
    if let Some((host, port)) = &inbound.service
        && scope.services.iter().any(|s| s.hostname == *host)
        && let Some(chosen) = ctx.destination_rule_for_workload(host, &proxy.namespace, None)
        && let Some(doc) = &chosen.rule.traffic_policy
    {
        let (policy, _) = ClusterPolicy::for_port(&doc.policy, *port);
        out.connection_pool = policy.connection_pool.cloned();
        out.retry_budget = policy.retry_budget.cloned();
    }
    if out.connection_pool.is_none() {
        out.connection_pool = ctx.mesh.default_connection_pool.clone();
    }
    if let Some(pool) = sidecar_pool(ctx, scope, inbound.port) {
        out.connection_pool = Some(pool);
    }
    out
}

/// istiod's `InboundConnectionPoolForPort`: the first ingress listener on `port` with a
/// `connectionPool`, else the Sidecar's `inboundConnectionPool`.
fn sidecar_pool(
    ctx: &PushContext,
    scope: &SidecarScope,
    port: u32,
) -> Option<ConnectionPoolSettings> {
    let key = scope.sidecar.as_ref()?;
    let (_, sidecar) = ctx
        .sidecars_in(&key.namespace)
        .find(|(c, _)| c.key == *key)?;
    ingress_pool(sidecar, port).or_else(|| {
        sidecar
            .inbound_connection_pool
            .as_ref()
            .and_then(|v| ConnectionPoolSettings::deserialize(v).ok())
    })
}

fn ingress_pool(sidecar: &Sidecar, port: u32) -> Option<ConnectionPoolSettings> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Ingress {
        port: Option<Port>,
        connection_pool: Option<ConnectionPoolSettings>,
    }
    #[derive(Deserialize)]
    struct Port {
        #[serde(default)]
        number: u32,
    }
    sidecar
        .ingress
        .iter()
        .filter_map(|v| Ingress::deserialize(v).ok())
        .filter(|i| i.port.as_ref().is_some_and(|p| p.number == port))
        .find_map(|i| i.connection_pool)
}

#[cfg(test)]
mod tests;
