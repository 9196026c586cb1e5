//! The parts several Gateway API kinds share (`apis/v1/shared_types.go`,
//! `object_reference_types.go`): references to parents, backends and other objects, label
//! selectors, and the CRD defaults they carry.
//!
//! Every struct denies unknown fields (the API server prunes or rejects them; axon names
//! them), and every default the CRDs' OpenAPI schemas give is applied while decoding, as the
//! API server applies it when the object is created, so an object read from a file equals
//! the one Kubernetes would hand back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The Gateway API's group.
pub const GROUP: &str = "gateway.networking.k8s.io";

pub(crate) fn group_default() -> String {
    GROUP.to_string()
}
pub(crate) fn gateway_kind() -> String {
    "Gateway".to_string()
}
pub(crate) fn service_kind() -> String {
    "Service".to_string()
}
pub(crate) fn secret_kind() -> String {
    "Secret".to_string()
}
pub(crate) fn one() -> u32 {
    1
}

/// `ParentReference`: the Gateway (or, for mesh routes, the Service) a route attaches to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParentReference {
    #[serde(default = "group_default")]
    pub group: String,
    #[serde(default = "gateway_kind")]
    pub kind: String,
    /// The route's namespace when unset.
    pub namespace: Option<String>,
    pub name: String,
    /// A listener's name (a Gateway parent) or a port's name (a Service parent).
    pub section_name: Option<String>,
    pub port: Option<u32>,
}

impl ParentReference {
    /// Whether it names a Gateway API Gateway.
    pub fn is_gateway(&self) -> bool {
        self.group == GROUP && self.kind == "Gateway"
    }
    /// Whether it names a core Service (a mesh route, GAMMA).
    pub fn is_service(&self) -> bool {
        self.group.is_empty() && self.kind == "Service"
    }
}

/// `BackendObjectReference`: a backend without weight (a mirror's, an external
/// authorization's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendObjectReference {
    #[serde(default)]
    pub group: String,
    #[serde(default = "service_kind")]
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<u32>,
}

/// `BackendRef` of a TCPRoute or TLSRoute: a weighted backend without filters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendRef {
    #[serde(default)]
    pub group: String,
    #[serde(default = "service_kind")]
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<u32>,
    #[serde(default = "one")]
    pub weight: u32,
}

impl BackendRef {
    pub fn object(&self) -> BackendObjectReference {
        BackendObjectReference {
            group: self.group.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            port: self.port,
        }
    }
}

/// `SecretObjectReference`: a listener's certificate (a Secret unless said otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretObjectReference {
    #[serde(default)]
    pub group: String,
    #[serde(default = "secret_kind")]
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

/// `ObjectReference` with every part given (CA certificate references).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectReference {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

/// `LocalObjectReference`: an object of the same namespace (an `extensionRef`, a CA
/// ConfigMap of a BackendTLSPolicy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalObjectReference {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// A Kubernetes `LabelSelector` (`matchLabels` and `matchExpressions`, ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector, as `metav1.LabelSelectorAsSelector` reads it
    /// (an operator it does not know matches nothing).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator.as_str() {
                    "In" => value.is_some_and(|v| e.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !e.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

/// The header match types of HTTPRoute and GRPCRoute (default `Exact`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchType {
    #[default]
    Exact,
    RegularExpression,
}

/// `HTTPHeaderMatch` and `GRPCHeaderMatch`: a header, by name (case-insensitive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderMatch {
    #[serde(default, rename = "type")]
    pub match_type: MatchType,
    pub name: String,
    pub value: String,
}

/// `HTTPHeader`: a header to set or add.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeader {
    pub name: String,
    pub value: String,
}

/// `HTTPHeaderFilter`: the `requestHeaderModifier` and `responseHeaderModifier` filters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderModifier {
    #[serde(default)]
    pub set: Vec<HttpHeader>,
    #[serde(default)]
    pub add: Vec<HttpHeader>,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// `SessionPersistence` (experimental; istiod applies it to the backend Service's cluster).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPersistence {
    pub session_name: Option<String>,
    pub absolute_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    #[serde(rename = "type")]
    pub persistence_type: Option<String>,
    pub cookie_config: Option<serde_json::Value>,
    pub cookie: Option<serde_json::Value>,
    pub header: Option<serde_json::Value>,
}
