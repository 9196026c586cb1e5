//! `ServiceEntry`: services that a registry does not know, with inline or selected endpoints.

use serde::{Deserialize, Serialize};

use super::{Labels, WorkloadEntry};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEntry {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub ports: Vec<ServicePort>,
    #[serde(default)]
    pub location: Location,
    #[serde(default)]
    pub resolution: Resolution,
    #[serde(default)]
    pub endpoints: Vec<WorkloadEntry>,
    pub workload_selector: Option<WorkloadSelector>,
    #[serde(default)]
    pub export_to: Vec<String>,
    #[serde(default)]
    pub subject_alt_names: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[serde(default)]
    pub number: u32,
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub name: String,
    pub target_port: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Location {
    #[default]
    MeshExternal,
    MeshInternal,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Resolution {
    #[default]
    None,
    Static,
    Dns,
    DnsRoundRobin,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSelector {
    #[serde(default)]
    pub labels: Labels,
}
