//! `GatewayClass` and `Gateway` (`apis/v1/gatewayclass_types.go`, `gateway_types.go`), with
//! the CRD defaults: a listener allows routes from its own namespace, TLS terminates, a
//! certificate is a core Secret, an address is an IP address.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{LabelSelector, ObjectReference, SecretObjectReference, group_default};

/// `GatewayClassSpec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayClassSpec {
    pub controller_name: String,
    pub description: Option<String>,
    pub parameters_ref: Option<ParametersReference>,
}

/// `ParametersReference` (a GatewayClass's, with an optional namespace) and
/// `LocalParametersReference` (a Gateway's `infrastructure.parametersRef`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParametersReference {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

/// `GatewaySpec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    #[serde(default)]
    pub addresses: Vec<GatewayAddress>,
    pub infrastructure: Option<GatewayInfrastructure>,
    pub tls: Option<GatewayTlsConfig>,
    /// Which ListenerSets may attach (experimental; axon serves no ListenerSet).
    pub allowed_listeners: Option<serde_json::Value>,
    /// Experimental (`All` or `None`): which routes without parents attach.
    pub default_scope: Option<String>,
    /// Removed from the API; still accepted by older CRDs.
    pub backend_tls: Option<serde_json::Value>,
}

/// `Listener`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Listener {
    pub name: String,
    pub hostname: Option<String>,
    pub port: u32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP`, or a domain-prefixed protocol.
    pub protocol: String,
    pub tls: Option<ListenerTls>,
    #[serde(default)]
    pub allowed_routes: AllowedRoutes,
}

/// `GatewayTLSConfig` of a listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerTls {
    #[serde(default)]
    pub mode: TlsMode,
    #[serde(default)]
    pub certificate_refs: Vec<SecretObjectReference>,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// Older CRDs' per-listener client validation (moved to `spec.tls.frontend`).
    pub frontend_validation: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TlsMode {
    #[default]
    Terminate,
    Passthrough,
}

/// `AllowedRoutes`; the default allows every route kind of the listener's protocol from the
/// Gateway's namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedRoutes {
    #[serde(default)]
    pub namespaces: RouteNamespaces,
    #[serde(default)]
    pub kinds: Vec<RouteGroupKind>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteNamespaces {
    #[serde(default)]
    pub from: FromNamespaces,
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromNamespaces {
    All,
    Selector,
    #[default]
    Same,
    /// Only in `allowedListeners`.
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteGroupKind {
    #[serde(default = "group_default")]
    pub group: String,
    pub kind: String,
}

/// `GatewaySpecAddress`: `IPAddress` (the default), `Hostname`, or a domain-prefixed type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayAddress {
    #[serde(default = "ip_address", rename = "type")]
    pub address_type: String,
    #[serde(default)]
    pub value: String,
}

fn ip_address() -> String {
    "IPAddress".to_string()
}

/// `GatewayInfrastructure`: labels and annotations for what a Gateway's deployment makes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayInfrastructure {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    pub parameters_ref: Option<ParametersReference>,
}

/// A Gateway's `spec.tls`: client certificate validation per port (`frontend`) and the
/// certificate it presents to backends (`backend`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayTlsConfig {
    pub frontend: Option<FrontendTls>,
    pub backend: Option<BackendTls>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontendTls {
    pub default: TlsConfig,
    #[serde(default)]
    pub per_port: Vec<TlsPortConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsPortConfig {
    pub port: u32,
    pub tls: TlsConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsConfig {
    pub validation: Option<FrontendValidation>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontendValidation {
    pub ca_certificate_refs: Vec<ObjectReference>,
    #[serde(default = "allow_valid_only")]
    pub mode: String,
}

fn allow_valid_only() -> String {
    "AllowValidOnly".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendTls {
    pub client_certificate_ref: Option<SecretObjectReference>,
}
