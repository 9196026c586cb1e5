//! `security.istio.io` `AuthorizationPolicy` (istio/api `security/v1/authorization_policy.proto`,
//! which `v1beta1` shares): which workloads it applies to (`selector`, `targetRef(s)`), its
//! action, and its rules (`from` sources, `to` operations, `when` conditions).

use serde::{Deserialize, Serialize};

use super::MatchLabels;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationPolicy {
    pub selector: Option<MatchLabels>,
    pub target_ref: Option<PolicyTargetRef>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetRef>,
    /// `None`: the rules key is absent (a DENY or CUSTOM without rules is invalid; an ALLOW
    /// without rules denies everything).
    pub rules: Option<Vec<Rule>>,
    #[serde(default)]
    pub action: Action,
    pub provider: Option<ExtensionProvider>,
    /// The `istio.io/dry-run` annotation (from the object's metadata, not the spec).
    #[serde(skip)]
    pub dry_run: bool,
}

impl AuthorizationPolicy {
    /// Its `targetRef` and `targetRefs`, together.
    pub fn target_refs(&self) -> impl Iterator<Item = &PolicyTargetRef> {
        self.target_ref.iter().chain(&self.target_refs)
    }
}

/// `istio.type.v1beta1.PolicyTargetReference`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetRef {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtensionProvider {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    #[default]
    Allow,
    Deny,
    Audit,
    Custom,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub from: Option<Vec<From>>,
    pub to: Option<Vec<To>>,
    #[serde(default)]
    pub when: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct From {
    pub source: Option<Source>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct To {
    pub operation: Option<Operation>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    #[serde(default)]
    pub principals: Vec<String>,
    #[serde(default)]
    pub not_principals: Vec<String>,
    #[serde(default)]
    pub request_principals: Vec<String>,
    #[serde(default)]
    pub not_request_principals: Vec<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub not_namespaces: Vec<String>,
    #[serde(default)]
    pub service_accounts: Vec<String>,
    #[serde(default)]
    pub not_service_accounts: Vec<String>,
    #[serde(default)]
    pub trust_domains: Vec<String>,
    #[serde(default)]
    pub not_trust_domains: Vec<String>,
    #[serde(default)]
    pub ip_blocks: Vec<String>,
    #[serde(default)]
    pub not_ip_blocks: Vec<String>,
    #[serde(default)]
    pub remote_ip_blocks: Vec<String>,
    #[serde(default)]
    pub not_remote_ip_blocks: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub not_hosts: Vec<String>,
    #[serde(default)]
    pub ports: Vec<String>,
    #[serde(default)]
    pub not_ports: Vec<String>,
    #[serde(default)]
    pub methods: Vec<String>,
    #[serde(default)]
    pub not_methods: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub not_paths: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub values: Vec<String>,
    #[serde(default)]
    pub not_values: Vec<String>,
}
