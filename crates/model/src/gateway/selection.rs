//! Which Gateways apply to a proxy, and on which ports each server listens there: the one
//! answer [`super::merge`] and the proxy's scope (its dependencies and key) read, as
//! istiod's `mergeGateways` (`pilot/pkg/model/push_context.go`) and `resolvePorts`
//! (`pilot/pkg/model/gateway.go`).
//!
//! A user's Gateway applies when its `selector` matches the proxy's labels (an empty one
//! matches every gateway proxy); its server ports go through the proxy's own Service ports,
//! the first that matches, else as they are (istiod's legacy selector). A Gateway made from
//! a Gateway API Gateway ([`GatewayApiSelection`]) ignores `selector`: it applies when the
//! proxy is an endpoint of one of its Services in the Gateway's namespace (istiod's
//! `internal.istio.io/gateway-service` against the proxy's service targets), its server
//! ports then mapped through those Services only (each Service port to every target port,
//! a port none of them has serving nothing); or, for an automated deployment, when the
//! proxy runs in the Gateway's namespace with the label the generated Service selects
//! (`gateway.networking.k8s.io/gateway-name: NAME`), its server ports then as they are —
//! a directory has no generated Service to find it by.

use std::collections::{BTreeMap, BTreeSet};

use super::super::proxy::Proxy;
use super::super::push_context::PushContext;
use crate::authz::GATEWAY_NAME_LABEL;
use axon_config::config::Config;
use axon_config::istio::{Gateway, GatewayApiSelection};

/// A Gateway that applies to a proxy, with how its server ports map to listening ports.
#[derive(Debug, Clone)]
pub struct SelectedGateway<'a> {
    pub config: &'a Config,
    pub gateway: &'a Gateway,
    ports: Ports,
}

/// How a selected Gateway's server ports become the ports the proxy listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ports {
    /// By `selector`: through the proxy's own Service ports ([`super::workload_ports`]).
    Legacy(BTreeMap<u32, u32>),
    /// Through the Gateway API Gateway's Services at the proxy's address: each Service port
    /// to its endpoint ports; a server port none of them has listens nowhere.
    Services(BTreeMap<u32, BTreeSet<u32>>),
    /// An automated Gateway API deployment found by its label: the server port as it is.
    AsIs,
}

impl SelectedGateway<'_> {
    /// The ports a server of port `number` listens on (istiod's `resolvePorts`), in order.
    pub fn listen_ports(&self, number: u32) -> Vec<u32> {
        match &self.ports {
            Ports::Legacy(ports) => vec![super::resolve_port(number, ports)],
            Ports::Services(ports) => ports
                .get(&number)
                .map(|targets| targets.iter().copied().collect())
                .unwrap_or_default(),
            Ports::AsIs => vec![number],
        }
    }

    /// What of the selection a proxy's scope key needs beyond the Gateway's key: the port
    /// mapping of a Gateway API Gateway (a selector's is the proxy's workload ports, keyed
    /// once for all of them).
    pub fn key_part(&self) -> String {
        match &self.ports {
            Ports::Legacy(_) => self.config.key.to_string(),
            Ports::Services(ports) => format!("{}={ports:?}", self.config.key),
            Ports::AsIs => format!("{}=as-is", self.config.key),
        }
    }
}

/// The Gateways that apply to `proxy`, in the context's order.
pub fn gateways_for<'a>(ctx: &'a PushContext, proxy: &Proxy) -> Vec<SelectedGateway<'a>> {
    let mut legacy: Option<BTreeMap<u32, u32>> = None;
    let mut out = Vec::new();
    for (config, gateway) in ctx.gateways() {
        let ports = match &gateway.gateway_api {
            None if proxy.matches_selector(&gateway.selector) => Ports::Legacy(
                legacy
                    .get_or_insert_with(|| super::workload_ports(ctx, proxy))
                    .clone(),
            ),
            None => continue,
            Some(selection) => match gateway_api_ports(ctx, proxy, config, selection) {
                Some(ports) => ports,
                None => continue,
            },
        };
        out.push(SelectedGateway {
            config,
            gateway,
            ports,
        });
    }
    out
}

/// How a Gateway API Gateway applies to `proxy`, if it does.
fn gateway_api_ports(
    ctx: &PushContext,
    proxy: &Proxy,
    config: &Config,
    selection: &GatewayApiSelection,
) -> Option<Ports> {
    let mut targets: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    let mut found = false;
    for (host, service_port, endpoint_port) in ctx
        .endpoints
        .by_address
        .get(&proxy.ip)
        .into_iter()
        .flatten()
    {
        let ours = selection.services.iter().any(|s| s == host)
            && ctx
                .service(host)
                .is_some_and(|s| s.namespace == config.namespace());
        if !ours {
            continue;
        }
        found = true;
        let target = if *endpoint_port == 0 {
            *service_port
        } else {
            *endpoint_port
        };
        targets.entry(*service_port).or_default().insert(target);
    }
    if found {
        return Some(Ports::Services(targets));
    }
    let labelled = selection.managed
        && proxy.namespace == config.namespace()
        && proxy.labels.get(GATEWAY_NAME_LABEL) == Some(&selection.gateway_name);
    labelled.then_some(Ports::AsIs)
}

#[cfg(test)]
mod tests;
