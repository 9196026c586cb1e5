//! The VirtualService index of a `PushContext`, as istiod's `initVirtualServices` over its
//! merged VirtualServices: root VirtualServices with their delegates merged in
//! ([`super::delegate`]), by the gateway (`namespace/name`, or `mesh`) they bind and by the
//! hosts they route; delegates (no hosts) are not indexed, so never served on their own.
//! Those made from Gateway API routes (`RouteSemantics::Gateway`) merge no delegates and
//! keep their hosts as written (istiod's `mergeVirtualServices`).
//! Also the order in which a proxy sees them ([`PushContext::virtual_services_for_gateway_proxy`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{PushContext, of_kind};
use crate::visibility::ExportTo;
use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::config_set::ConfigSet;
use axon_config::istio::{Labels, VirtualService};

/// VirtualServices by the gateway (`namespace/name`, or `mesh`) they bind, and by the
/// resolved hosts they route, in key order; and every `sourceLabels` of their HTTP matches.
#[derive(Debug, Default)]
pub struct VirtualServiceIndex {
    pub by_gateway: BTreeMap<String, Vec<Arc<Config>>>,
    pub by_host: BTreeMap<String, Vec<Arc<Config>>>,
    /// The distinct non-empty `sourceLabels` of HTTP match blocks (those that name no
    /// gateways: istiod ignores the labels of the others): which of them a proxy's labels
    /// include decides which match blocks apply to it, so it is part of its scope key.
    pub source_selectors: BTreeSet<Labels>,
    /// The delegates each root VirtualService names (found or not): a proxy that reads the
    /// root depends on them.
    pub delegates: BTreeMap<ConfigKey, BTreeSet<ConfigKey>>,
    /// What the merge dropped, and why, one each (logged when the index is built, shown in
    /// `/debug/push_status` and `/debug/configz`, printed by `axon validate`), and the hosts
    /// in `duplicate_hosts`.
    pub problems: Vec<VirtualServiceProblem>,
    /// Hosts that several mesh VirtualServices name: a sidecar serves one of them
    /// (`pilot_vservice_dup_domain` counts them).
    pub duplicate_hosts: Vec<String>,
}

/// A VirtualService not applied in full, as only the built index shows: a delegate missing,
/// not exported or with a match outside its root's, a host several mesh VirtualServices
/// name. `configs` are the VirtualServices to look at (the root for a delegate problem; for
/// a host, those a sidecar does not take when it sees all of them); `message` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualServiceProblem {
    pub configs: Vec<ConfigKey>,
    pub message: String,
}

impl std::fmt::Display for VirtualServiceProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl VirtualServiceIndex {
    /// The keys a proxy that reads `key` depends on: it, and its delegates.
    pub fn with_delegates<'a>(&'a self, key: &'a ConfigKey) -> impl Iterator<Item = &'a ConfigKey> {
        std::iter::once(key).chain(self.delegates.get(key).into_iter().flatten())
    }
}

pub(super) fn index_virtual_services(
    configs: &ConfigSet,
    default_export_to: &[String],
) -> VirtualServiceIndex {
    let mut index = VirtualServiceIndex::default();
    for config in of_kind(configs, ConfigKind::VirtualService) {
        let Spec::VirtualService(vs) = &config.spec else {
            continue;
        };
        // A delegate is served only through its roots.
        if vs.hosts.is_empty() {
            continue;
        }
        // Gateway API routes merge no delegates (istiod's `mergeVirtualServices`).
        let config = if super::delegate::is_root(vs) && !vs.gateway_semantics() {
            let merged = super::delegate::merge_root(
                config,
                vs,
                |ns, name| configs.get(&ConfigKey::new(ConfigKind::VirtualService, ns, name)),
                default_export_to,
            );
            index
                .problems
                .extend(
                    merged
                        .problems
                        .into_iter()
                        .map(|message| VirtualServiceProblem {
                            configs: vec![config.key.clone()],
                            message,
                        }),
                );
            index.delegates.insert(config.key.clone(), merged.children);
            Arc::new(Config {
                spec: Spec::VirtualService(merged.spec),
                ..Config::clone(config)
            })
        } else {
            config.clone()
        };
        let Spec::VirtualService(vs) = &config.spec else {
            continue;
        };
        index.source_selectors.extend(
            vs.http
                .iter()
                .flat_map(|http| &http.matches)
                .filter(|m| m.gateways.is_empty() && !m.source_labels.is_empty())
                .map(|m| m.source_labels.clone()),
        );
        // And the `tcp` and `tls` match blocks' (sidecars' TCP listeners).
        let l4 = vs
            .tcp_routes()
            .into_iter()
            .flat_map(|t| t.matches)
            .chain(
                vs.tls_routes()
                    .into_iter()
                    .flat_map(|t| t.matches.into_iter().map(|m| m.to_l4())),
            )
            .filter(|m| !m.source_labels.is_empty())
            .map(|m| m.source_labels);
        index.source_selectors.extend(l4);
        let hosts: BTreeSet<String> = vs
            .hosts
            .iter()
            .map(|h| vs.resolve_host(h, config.namespace()))
            .collect();
        for h in hosts {
            index.by_host.entry(h).or_default().push(config.clone());
        }
        let gateways: BTreeSet<String> = if vs.gateways.is_empty() {
            BTreeSet::from(["mesh".to_string()])
        } else {
            vs.gateways
                .iter()
                .map(|g| gateway_ref(g, config.namespace()))
                .collect()
        };
        for gateway in gateways {
            index
                .by_gateway
                .entry(gateway)
                .or_default()
                .push(config.clone());
        }
    }
    let conflicts = mesh_host_conflicts(&index);
    for (host, problem) in conflicts {
        index.duplicate_hosts.push(host);
        index.problems.push(problem);
    }
    index
}

/// istiod gives a sidecar one VirtualService per host (the first it sees, in
/// [`PushContext::in_proxy_order`]; the others' virtual hosts are duplicates, which istiod
/// counts in `pilot_vservice_dup_domain`): hosts that several mesh VirtualServices name.
fn mesh_host_conflicts(index: &VirtualServiceIndex) -> Vec<(String, VirtualServiceProblem)> {
    let mesh: BTreeSet<&ConfigKey> = index
        .by_gateway
        .get("mesh")
        .into_iter()
        .flatten()
        .map(|c| &c.key)
        .collect();
    index
        .by_host
        .iter()
        .filter_map(|(host, configs)| {
            let mut on_mesh: Vec<&Arc<Config>> =
                configs.iter().filter(|c| mesh.contains(&c.key)).collect();
            if on_mesh.len() < 2 {
                return None;
            }
            on_mesh.sort_by(|a, b| a.creation_order(b));
            let names: Vec<String> = on_mesh.iter().map(|c| c.key.to_string()).collect();
            let message = format!(
                "host {host} is routed by {} for sidecars: a sidecar takes the first it sees (exported to its namespace only, then to it, then everywhere; each by creation time, name, namespace) and not the others",
                names.join(", ")
            );
            let configs = on_mesh[1..].iter().map(|c| c.key.clone()).collect();
            Some((host.clone(), VirtualServiceProblem { configs, message }))
        })
        .collect()
}

/// A VirtualService's gateway reference as `namespace/name` (or `mesh`).
pub fn gateway_ref(reference: &str, namespace: &str) -> String {
    if reference == "mesh" || reference.contains('/') {
        reference.to_string()
    } else {
        format!("{namespace}/{reference}")
    }
}

impl PushContext {
    /// VirtualServices bound to a gateway named `namespace/name` (or `mesh`), in key order.
    pub fn virtual_services_for_gateway(
        &self,
        gateway: &str,
    ) -> impl Iterator<Item = (&Config, &VirtualService)> {
        self.virtual_services
            .by_gateway
            .get(gateway)
            .into_iter()
            .flatten()
            .filter_map(|c| match &c.spec {
                Spec::VirtualService(vs) => Some((c.as_ref(), vs)),
                _ => None,
            })
    }

    /// The VirtualServices a proxy in `proxy_namespace` sees for the gateway named
    /// `namespace/name` (or `mesh`), in istiod's order (`VirtualServicesForGateway`): those
    /// exported to their own namespace only when it is the proxy's, then those of other
    /// namespaces exported to the proxy's, then those exported everywhere, of which those
    /// made from Gateway API routes in the proxy's namespace first (istiod's "consumer
    /// override"); each group by creation time, then name, then namespace
    /// ([`Config::creation_order`]). `exportTo` is read against the namespace of the proxy
    /// (for a gateway, its Envoy's, not the Gateway resource's), as istiod.
    pub fn virtual_services_for_gateway_proxy(
        &self,
        gateway: &str,
        proxy_namespace: &str,
    ) -> Vec<(&Config, &VirtualService)> {
        let configs = self.virtual_services.by_gateway.get(gateway);
        self.ordered(configs.into_iter().flatten(), proxy_namespace, false)
            .into_iter()
            .filter_map(|c| match &c.spec {
                Spec::VirtualService(vs) => Some((c.as_ref(), vs)),
                _ => None,
            })
            .collect()
    }

    /// `configs` (mesh VirtualServices) that a sidecar in `proxy_namespace` sees, in istiod's
    /// order (`SelectVirtualServices`): the groups of
    /// [`Self::virtual_services_for_gateway_proxy`], in each of which those made from Gateway
    /// API routes in the proxy's namespace come first.
    pub fn in_proxy_order<'a>(
        &self,
        configs: impl IntoIterator<Item = &'a Arc<Config>>,
        proxy_namespace: &str,
    ) -> Vec<&'a Arc<Config>> {
        self.ordered(configs, proxy_namespace, true)
    }

    /// The order of both: by exportTo group, then (in every group for a sidecar, in the
    /// public one for a gateway) Gateway API routes of the proxy's namespace first, then
    /// by creation.
    fn ordered<'a>(
        &self,
        configs: impl IntoIterator<Item = &'a Arc<Config>>,
        proxy_namespace: &str,
        sidecar: bool,
    ) -> Vec<&'a Arc<Config>> {
        let mut out: Vec<((u8, bool), &Arc<Config>)> = configs
            .into_iter()
            .filter_map(|c| {
                let Spec::VirtualService(vs) = &c.spec else {
                    return None;
                };
                let group = match self.export_to(
                    ConfigKind::VirtualService,
                    &vs.export_to,
                    c.namespace(),
                ) {
                    ExportTo::All => 2,
                    e if !e.visible_from(proxy_namespace) => return None,
                    _ if c.namespace() == proxy_namespace => 0,
                    _ => 1,
                };
                let consumer = vs.gateway_semantics() && c.namespace() == proxy_namespace;
                let first = consumer && (sidecar || group == 2);
                Some(((group, !first), c))
            })
            .collect();
        out.sort_by(|(ga, a), (gb, b)| ga.cmp(gb).then_with(|| a.creation_order(b)));
        out.into_iter().map(|(_, c)| c).collect()
    }
}

#[cfg(test)]
mod tests;
