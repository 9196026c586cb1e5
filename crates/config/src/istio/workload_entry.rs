//! `WorkloadEntry` (also the shape of a ServiceEntry's inline endpoints) and `WorkloadGroup`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Labels;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadEntry {
    #[serde(default)]
    pub address: String,
    /// Port name → port number on this workload.
    #[serde(default)]
    pub ports: BTreeMap<String, u32>,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub network: String,
    #[serde(default)]
    pub locality: String,
    pub weight: Option<u32>,
    #[serde(default)]
    pub service_account: String,
}

/// Accepted and validated, not served yet: axon has no auto-registration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadGroup {
    pub metadata: Option<serde_json::Value>,
    pub template: Option<WorkloadEntry>,
    pub probe: Option<serde_json::Value>,
}
