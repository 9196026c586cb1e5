//! AuthorizationPolicies, and which apply to a proxy, as istiod's `AuthorizationPolicies`
//! (`pilot/pkg/model/authorization.go`) and `WorkloadPolicyMatcher.ShouldAttachPolicy`
//! (`policyattachment.go`): the policies of the root namespace and of the proxy's namespace,
//! each oldest first; one without `targetRef(s)` applies when its selector (none: every
//! workload) is in the proxy's labels, unless the proxy is a Gateway API gateway (labelled
//! `gateway.networking.k8s.io/gateway-name`), to which only a policy of its namespace
//! targeting that Gateway applies; a policy with `targetRef(s)` applies to nothing else (the
//! Service and ServiceEntry kinds are waypoints' in istiod).

use std::collections::BTreeMap;
use std::sync::Arc;

use axon_config::config::{Config, ConfigKind, Spec};
use axon_config::config_set::{ConfigSet, by_namespace_oldest_first};
use axon_config::istio::{AuthorizationPolicy, AuthzAction, Labels};

/// The label of a Gateway API gateway's proxies: the Gateway's name.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// The AuthorizationPolicies of a context, by namespace, oldest first.
#[derive(Debug, Default)]
pub struct AuthzIndex {
    root_namespace: String,
    by_namespace: BTreeMap<String, Vec<Arc<Config>>>,
}

/// The policies that apply to one proxy, by action, each in istiod's order.
#[derive(Debug, Default, Clone)]
pub struct ProxyPolicies {
    pub allow: Vec<Arc<Config>>,
    pub deny: Vec<Arc<Config>>,
    pub audit: Vec<Arc<Config>>,
    pub custom: Vec<Arc<Config>>,
}

impl ProxyPolicies {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
            && self.deny.is_empty()
            && self.audit.is_empty()
            && self.custom.is_empty()
    }

    /// Every policy, by action then order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Config>> {
        self.custom
            .iter()
            .chain(&self.audit)
            .chain(&self.deny)
            .chain(&self.allow)
    }
}

/// The policy of a config of its kind.
pub fn policy(config: &Config) -> Option<&AuthorizationPolicy> {
    match &config.spec {
        Spec::AuthorizationPolicy(p) => Some(p),
        _ => None,
    }
}

impl AuthzIndex {
    pub fn build(configs: &ConfigSet, root_namespace: &str) -> AuthzIndex {
        AuthzIndex {
            root_namespace: root_namespace.to_string(),
            by_namespace: by_namespace_oldest_first(configs, ConfigKind::AuthorizationPolicy),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// Every policy's namespace and name.
    pub fn all_keys(&self) -> Vec<(String, String)> {
        self.by_namespace
            .values()
            .flatten()
            .map(|c| (c.namespace().to_string(), c.name().to_string()))
            .collect()
    }

    /// Every CUSTOM policy (`ns/name`) and the provider it names.
    pub fn custom_providers(&self) -> Vec<(String, String)> {
        self.by_namespace
            .values()
            .flatten()
            .filter_map(|c| {
                let p = policy(c).filter(|p| p.action == AuthzAction::Custom)?;
                let provider = p.provider.as_ref()?.name.clone();
                Some((format!("{}/{}", c.namespace(), c.name()), provider))
            })
            .collect()
    }

    /// istiod's `ListAuthorizationPolicies` for a workload of `namespace` with `labels`.
    pub fn for_workload(&self, namespace: &str, labels: &Labels) -> ProxyPolicies {
        let mut out = ProxyPolicies::default();
        let gateway = labels.get(GATEWAY_NAME_LABEL);
        let namespaces = [self.root_namespace.as_str(), namespace];
        let mut seen = Vec::new();
        for ns in namespaces {
            if seen.contains(&ns) {
                continue;
            }
            seen.push(ns);
            for config in self.by_namespace.get(ns).into_iter().flatten() {
                let Some(p) = policy(config) else { continue };
                if !attaches(p, config.namespace(), namespace, labels, gateway) {
                    continue;
                }
                match p.action {
                    AuthzAction::Allow => out.allow.push(config.clone()),
                    AuthzAction::Deny => out.deny.push(config.clone()),
                    AuthzAction::Audit => out.audit.push(config.clone()),
                    AuthzAction::Custom => out.custom.push(config.clone()),
                }
            }
        }
        out
    }
}

/// istiod's `ShouldAttachPolicy` for a sidecar or gateway (not a waypoint).
fn attaches(
    p: &AuthorizationPolicy,
    policy_namespace: &str,
    workload_namespace: &str,
    labels: &Labels,
    gateway: Option<&String>,
) -> bool {
    let selected = || {
        p.selector
            .as_ref()
            .is_none_or(|s| s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
    };
    let mut targets = p.target_refs().peekable();
    let Some(gateway) = gateway else {
        return targets.peek().is_none() && selected();
    };
    if targets.peek().is_none() {
        // istiod's `EnableSelectorBasedK8sGatewayPolicy` (default on) for a gateway.
        return selected();
    }
    targets.any(|t| {
        policy_namespace == workload_namespace
            && (t.namespace.is_empty() || t.namespace == workload_namespace)
            && t.kind == "Gateway"
            && t.group == "gateway.networking.k8s.io"
            && &t.name == gateway
    })
}

#[cfg(test)]
mod tests;
