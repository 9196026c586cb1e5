//! `DestinationRule`: subsets of a host, by labels, and the traffic policies of the host, of
//! its ports and of its subsets (typed in [`super::traffic_policy`], merged by
//! `axon_model::traffic_policy`).

use serde::{Deserialize, Serialize};

use super::Labels;
use super::traffic_policy::PolicyDoc;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationRule {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub subsets: Vec<Subset>,
    #[serde(default)]
    pub export_to: Vec<String>,
    pub workload_selector: Option<MatchLabels>,
    pub traffic_policy: Option<PolicyDoc>,
    /// Made of a Gateway API BackendTLSPolicy (istiod's `internal.istio.io/parents` on a
    /// DestinationRule): merged under a user's rule for the same host, the user's fields
    /// winning ([`PolicyDoc::under`]).
    #[serde(skip)]
    pub backend_policy: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subset {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    pub traffic_policy: Option<PolicyDoc>,
}

/// `istio.type.v1beta1.WorkloadSelector`: the workloads (by their labels) a rule applies to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchLabels {
    #[serde(default)]
    pub match_labels: Labels,
}
