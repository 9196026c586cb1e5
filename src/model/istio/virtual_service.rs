//! `VirtualService`: HTTP routes for hosts, bound to gateways or the mesh.

use std::collections::BTreeMap;

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

/// The conditions of one match block: what the request must carry (uri, scheme, method,
/// authority, headers, query parameters; headers it must not carry), and which proxies the
/// block applies to at all (listener port, gateways, source labels and namespace).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpMatchRequest {
    /// Appended to the HTTPRoute's name in the Envoy route's name (`ROUTE.MATCH`).
    #[serde(default)]
    pub name: String,
    pub uri: Option<StringMatch>,
    pub scheme: Option<StringMatch>,
    pub method: Option<StringMatch>,
    pub authority: Option<StringMatch>,
    #[serde(default)]
    pub headers: BTreeMap<String, StringMatch>,
    pub port: Option<u32>,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub source_labels: Labels,
    #[serde(default)]
    pub query_params: BTreeMap<String, StringMatch>,
    /// Exact and prefix `uri` matches ignore case.
    #[serde(default)]
    pub ignore_uri_case: bool,
    /// Headers whose match excludes the request (`{}`: the header's presence).
    #[serde(default)]
    pub without_headers: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub source_namespace: String,
    /// The Envoy route's `stat_prefix`.
    #[serde(default)]
    pub stat_prefix: String,
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
