//! RequestAuthentication as istiod selects it (`model/authentication.go`
//! `GetJwtPoliciesForWorkload`, `model/policyattachment.go` `ShouldAttachPolicy`): which
//! policies apply to a proxy, and the JWKS axon fetched for their rules.
//!
//! - A proxy sees the policies of its namespace and of the root namespace (the mesh's).
//! - A proxy of a Gateway API Gateway (labelled `gateway.networking.k8s.io/gateway-name`)
//!   takes the policies whose `targetRef`/`targetRefs` name that Gateway (kind `Gateway`,
//!   group `gateway.networking.k8s.io`, in its own namespace), and those without target
//!   references whose selector its labels include (istiod's default
//!   `ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY`).
//! - Any other proxy takes the policies without target references whose selector (none: all)
//!   its labels include; a policy with target references never applies to it (istiod attaches
//!   `Service` and `ServiceEntry` targets to waypoints only, which axon does not serve).
//! - Of the policies that apply, the rules are joined and ordered by issuer (istiod's
//!   `newPolicyApplier`), each one provider of the JWT filter (`xds::lds::authn`).
//!
//! The JWKS of a rule without inline `jwks` comes from the binary's resolver as a
//! `ConfigKind::Jwks` config ([`JwksIndex`]); [`RequestAuthnIndex::jwks_sources`] is what the
//! resolver is asked to fetch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::config_set::{ConfigSet, by_namespace_oldest_first, of_kind};
use axon_config::istio::{
    JwksSource, JwtRule, Labels, MatchLabels, PolicyTargetReference, RequestAuthentication,
};
use axon_config::validate::parse_duration;

use super::service::labels_match;

/// The label of a Gateway API Gateway's proxies, naming the Gateway.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// istiod's JWKS fetch timeout when a rule sets none.
pub const DEFAULT_JWKS_TIMEOUT_NANOS: i128 = 5_000_000_000;

/// The RequestAuthentications of a context.
#[derive(Debug, Default)]
pub struct RequestAuthnIndex {
    root_namespace: String,
    /// By namespace, oldest first (istiod's creation order).
    by_namespace: BTreeMap<String, Vec<Arc<Config>>>,
}

fn spec(config: &Config) -> Option<&RequestAuthentication> {
    match &config.spec {
        Spec::RequestAuthentication(ra) => Some(ra),
        _ => None,
    }
}

impl RequestAuthnIndex {
    pub fn build(configs: &ConfigSet, root_namespace: &str) -> RequestAuthnIndex {
        RequestAuthnIndex {
            root_namespace: root_namespace.to_string(),
            by_namespace: by_namespace_oldest_first(configs, ConfigKind::RequestAuthentication),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// Every policy, by namespace then creation.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Config>> {
        self.by_namespace.values().flatten()
    }

    /// The policies that apply to a workload of `namespace` with `labels`: its namespace's,
    /// then the root namespace's (istiod's `getConfigsForWorkload`).
    pub fn for_workload(&self, namespace: &str, labels: &Labels) -> Vec<&Arc<Config>> {
        let mut namespaces = vec![namespace];
        if self.root_namespace != namespace {
            namespaces.push(&self.root_namespace);
        }
        namespaces
            .into_iter()
            .filter_map(|ns| self.by_namespace.get(ns))
            .flatten()
            .filter(|c| spec(c).is_some_and(|ra| attaches(ra, c.namespace(), namespace, labels)))
            .collect()
    }

    /// The keys of the policies that apply to a workload, in [`Self::for_workload`]'s order.
    pub fn keys_for(&self, namespace: &str, labels: &Labels) -> Vec<ConfigKey> {
        self.for_workload(namespace, labels)
            .into_iter()
            .map(|c| c.key.clone())
            .collect()
    }

    /// The JWT rules of the policies that apply to a workload, ordered by issuer (stable),
    /// as istiod's policy applier orders them.
    pub fn rules_for(&self, namespace: &str, labels: &Labels) -> Vec<&JwtRule> {
        let mut rules: Vec<&JwtRule> = self
            .for_workload(namespace, labels)
            .into_iter()
            .filter_map(|c| spec(c))
            .flat_map(|ra| &ra.jwt_rules)
            .collect();
        rules.sort_by(|a, b| a.issuer.cmp(&b.issuer));
        rules
    }

    /// How many workloads among `workloads` (namespace, labels) each policy applies to,
    /// by key (`/debug/configz`, `axon validate`).
    pub fn selected_counts<'a>(
        &self,
        workloads: impl IntoIterator<Item = (&'a str, &'a Labels)>,
    ) -> BTreeMap<ConfigKey, usize> {
        let mut counts: BTreeMap<ConfigKey, usize> =
            self.all().map(|c| (c.key.clone(), 0)).collect();
        for (namespace, labels) in workloads {
            for config in self.for_workload(namespace, labels) {
                *counts.entry(config.key.clone()).or_default() += 1;
            }
        }
        counts
    }

    /// What the JWKS resolver fetches: every rule's source without inline keys, with the
    /// rule's fetch timeout in nanoseconds (istiod's default 5s; of several rules naming one
    /// source, the longest).
    pub fn jwks_sources(&self) -> BTreeMap<JwksSource, i128> {
        let mut out: BTreeMap<JwksSource, i128> = BTreeMap::new();
        for rule in self
            .all()
            .filter_map(|c| spec(c))
            .flat_map(|ra| &ra.jwt_rules)
        {
            let Some(source) = rule.jwks_source() else {
                continue;
            };
            let timeout = jwks_timeout(rule);
            let entry = out.entry(source).or_insert(timeout);
            *entry = (*entry).max(timeout);
        }
        out
    }
}

/// A rule's JWKS fetch timeout in nanoseconds (5s when it sets none or one that does not
/// parse).
pub fn jwks_timeout(rule: &JwtRule) -> i128 {
    rule.timeout
        .as_deref()
        .and_then(parse_duration)
        .filter(|t| *t > 0)
        .unwrap_or(DEFAULT_JWKS_TIMEOUT_NANOS)
}

/// istiod's `ShouldAttachPolicy` for a proxy that is not a waypoint.
fn attaches(
    ra: &RequestAuthentication,
    policy_namespace: &str,
    namespace: &str,
    labels: &Labels,
) -> bool {
    attaches_policy(
        ra.selector.as_ref(),
        &ra.target_refs(),
        policy_namespace,
        namespace,
        labels,
    )
}

/// istiod's `ShouldAttachPolicy` for a proxy that is not a waypoint, of a policy of
/// `policy_namespace` with `selector` and `targets`: a gateway of the Gateway API (labelled
/// with its name) takes the policies that target it, or those without targets it is
/// selected by; any other proxy those without targets it is selected by.
pub(crate) fn attaches_policy(
    selector: Option<&MatchLabels>,
    targets: &[&PolicyTargetReference],
    policy_namespace: &str,
    namespace: &str,
    labels: &Labels,
) -> bool {
    let selected = || selector.is_none_or(|s| labels_match(&s.match_labels, labels));
    let Some(gateway_name) = labels.get(GATEWAY_NAME_LABEL) else {
        return targets.is_empty() && selected();
    };
    if targets.is_empty() {
        return selected();
    }
    policy_namespace == namespace
        && targets.iter().any(|t| {
            (t.namespace.is_empty() || t.namespace == namespace)
                && t.is_gateway_api_gateway()
                && t.name == *gateway_name
        })
}

/// The JWKS the resolver fetched, by the URL first fetched ([`JwksSource::url`]).
#[derive(Debug, Default)]
pub struct JwksIndex {
    by_url: BTreeMap<String, Option<Arc<str>>>,
}

impl JwksIndex {
    pub fn build(configs: &ConfigSet) -> JwksIndex {
        let by_url = of_kind(configs, ConfigKind::Jwks)
            .filter_map(|c| match &c.spec {
                Spec::Jwks(fetched) => {
                    Some((c.name().to_string(), fetched.keys.as_deref().map(Arc::from)))
                }
                _ => None,
            })
            .collect();
        JwksIndex { by_url }
    }

    /// The key set fetched for `source`: `None` when it was not fetched (yet) or its fetch
    /// failed with nothing fetched before (a proxy then gets the fail-closed set).
    pub fn keys(&self, source: &JwksSource) -> Option<&str> {
        self.by_url.get(&source.url()).and_then(|k| k.as_deref())
    }

    /// The URLs fetched (present or failed).
    pub fn urls(&self) -> BTreeSet<&str> {
        self.by_url.keys().map(String::as_str).collect()
    }
}

/// The key of the fetched JWKS config of `source`.
pub fn jwks_config_key(source: &JwksSource) -> ConfigKey {
    ConfigKey::new(ConfigKind::Jwks, "", source.url())
}

#[cfg(test)]
mod tests;
