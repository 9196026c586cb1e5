//! The inbound side of a sidecar's scope when no Sidecar `ingress` listener replaces it: one
//! [`InboundPort`] per port of the proxy's own workload (the service endpoints at its IP), and
//! for each such port its primary service (istiod's first `ServiceTarget` of the port, in
//! `Proxy.SetServiceTargets` order: the service's creation time, then its host), whose
//! DestinationRule gives the inbound cluster its connection pool (`traffic_policy::inbound`).

use std::collections::{BTreeMap, BTreeSet};

use super::InboundPort;
use crate::proxy::{Proxy, ProxyType};
use crate::push_context::PushContext;
use axon_config::config::ConfigKey;

/// For each workload port (the endpoint's port) of the proxy, its primary service's host and
/// the service port that targets it.
pub(super) fn primary_services(ctx: &PushContext, proxy: &Proxy) -> BTreeMap<u32, (String, u32)> {
    let mut out: BTreeMap<u32, (Option<i64>, String, u32)> = BTreeMap::new();
    for (host, service_port, ep_port) in ctx
        .endpoints
        .by_address
        .get(&proxy.ip)
        .into_iter()
        .flatten()
    {
        let Some(service) = ctx.service(host) else {
            continue;
        };
        // Go's zero time (no timestamp) sorts first, as in istiod.
        let candidate = (service.created, host.clone(), *service_port);
        out.entry(*ep_port)
            .and_modify(|best| {
                if candidate < *best {
                    *best = candidate.clone();
                }
            })
            .or_insert(candidate);
    }
    out.into_iter()
        .map(|(port, (_, host, service_port))| (port, (host, service_port)))
        .collect()
}

/// The ports of the proxy's own workload: service endpoints at its IP, one per workload
/// port, with the protocol of its primary service's port (istiod's
/// `getFilterChainsByServicePort`: the first service target of a port wins). Their clusters
/// send to the original destination (the mesh's default `inboundTrafficPolicy` PASSTHROUGH:
/// the application sees the connection on the pod's address, from 127.0.0.6), or, under
/// `LOCALHOST`, to 127.0.0.1 and the port.
pub(super) fn inbound_ports(ctx: &PushContext, proxy: &Proxy) -> BTreeSet<InboundPort> {
    if proxy.proxy_type != ProxyType::Sidecar {
        return BTreeSet::new();
    }
    primary_services(ctx, proxy)
        .into_iter()
        .filter_map(|(ep_port, (host, service_port))| {
            let service = ctx.service(&host)?;
            Some(InboundPort {
                port: ep_port,
                protocol: service.port(service_port)?.protocol.clone(),
                endpoint: ctx
                    .mesh
                    .inbound_localhost
                    .then(|| ("127.0.0.1".to_string(), ep_port)),
                bind: None,
                service: Some((host, service_port)),
                tls: None,
            })
        })
        .collect()
}

/// The DestinationRules the inbound clusters of `inbound` read: each port's service's, as a
/// rule without a `workloadSelector` (istiod never applies a selector inbound).
pub(super) fn rule_deps(
    ctx: &PushContext,
    proxy: &Proxy,
    inbound: &[InboundPort],
) -> Vec<ConfigKey> {
    let hosts: BTreeSet<&str> = inbound
        .iter()
        .filter_map(|p| p.service.as_ref().map(|(h, _)| h.as_str()))
        .collect();
    hosts
        .into_iter()
        .filter_map(|host| ctx.destination_rule_for_workload(host, &proxy.namespace, None))
        .flat_map(|chosen| chosen.configs.into_iter().map(|c| c.key.clone()))
        .collect()
}
