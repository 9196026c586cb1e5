//! `Sidecar`: what a sidecar proxy sees (egress hosts) and how it listens.

use serde::{Deserialize, Serialize};

use super::WorkloadSelector;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    pub workload_selector: Option<WorkloadSelector>,
    #[serde(default)]
    pub egress: Vec<IstioEgressListener>,
    #[serde(default)]
    pub ingress: Vec<serde_json::Value>,
    pub outbound_traffic_policy: Option<serde_json::Value>,
    /// The connection pool of every inbound cluster an ingress listener's own
    /// `connectionPool` does not set (as validated at load; read by
    /// `traffic_policy::inbound`).
    pub inbound_connection_pool: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IstioEgressListener {
    pub port: Option<SidecarPort>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub capture_mode: CaptureMode,
    #[serde(default)]
    pub hosts: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarPort {
    #[serde(default)]
    pub number: u32,
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CaptureMode {
    #[default]
    Default,
    Iptables,
    None,
}
