//! `DestinationRule`: subsets of a host, by labels.

use serde::{Deserialize, Serialize};

use super::{Labels, WorkloadSelector};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationRule {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub subsets: Vec<Subset>,
    #[serde(default)]
    pub export_to: Vec<String>,
    pub workload_selector: Option<WorkloadSelector>,
    /// Kept as JSON for validation; axon does not translate traffic policies yet.
    pub traffic_policy: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subset {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    pub traffic_policy: Option<serde_json::Value>,
}
