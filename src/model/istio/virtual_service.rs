//! `VirtualService`: HTTP routes for hosts, bound to gateways or the mesh.

use serde::{Deserialize, Serialize};

use super::Labels;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualService {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub http: Vec<HttpRoute>,
    /// TCP and TLS routes are accepted and validated, not served yet.
    #[serde(default)]
    pub tcp: Vec<serde_json::Value>,
    #[serde(default)]
    pub tls: Vec<serde_json::Value>,
    #[serde(default)]
    pub export_to: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRoute {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "match")]
    pub matches: Vec<HttpMatchRequest>,
    #[serde(default)]
    pub route: Vec<HttpRouteDestination>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpMatchRequest {
    #[serde(default)]
    pub name: String,
    pub uri: Option<StringMatch>,
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, StringMatch>,
    pub port: Option<u32>,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub source_labels: Labels,
}

/// One of `exact`, `prefix`, `regex` (and Istio's newer `suffix`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringMatch {
    pub exact: Option<String>,
    pub prefix: Option<String>,
    pub regex: Option<String>,
    pub suffix: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteDestination {
    pub destination: Option<Destination>,
    #[serde(default)]
    pub weight: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub subset: String,
    pub port: Option<PortSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortSelector {
    #[serde(default)]
    pub number: u32,
}
