//! `telemetry.istio.io` `Telemetry` (istio/api `telemetry/v1alpha1/telemetry.proto`, which
//! `v1` shares): which workloads it applies to (a selector, or `targetRef`/`targetRefs`), and
//! the tracing, metrics and access logging their proxies are given.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{MatchLabels, PolicyTargetReference};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Telemetry {
    /// The workloads it applies to; none: every workload of its namespace, or of the mesh in
    /// the root namespace.
    pub selector: Option<MatchLabels>,
    pub target_ref: Option<PolicyTargetReference>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub tracing: Vec<Tracing>,
    #[serde(default)]
    pub metrics: Vec<Metrics>,
    #[serde(default)]
    pub access_logging: Vec<AccessLogging>,
}

impl Telemetry {
    /// `targetRefs`, or `targetRef` alone when `targetRefs` is empty (istiod's `GetTargetRefs`).
    pub fn target_refs(&self) -> Vec<&PolicyTargetReference> {
        if self.target_refs.is_empty() {
            self.target_ref.iter().collect()
        } else {
            self.target_refs.iter().collect()
        }
    }

    /// Whether it applies to its whole namespace (no selector labels, no target reference).
    pub fn is_namespace_wide(&self) -> bool {
        self.selector
            .as_ref()
            .is_none_or(|s| s.match_labels.is_empty())
            && self.target_refs().is_empty()
    }
}

/// `WorkloadMode`: which side of a proxy's traffic a setting is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkloadMode {
    #[default]
    ClientAndServer,
    Client,
    Server,
}

impl WorkloadMode {
    /// Whether a setting for `self` applies to traffic of `side` (a client or a server).
    pub fn covers(self, side: WorkloadMode) -> bool {
        self == WorkloadMode::ClientAndServer || self == side
    }
}

/// `ProviderRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRef {
    #[serde(default)]
    pub name: String,
}

/// `{mode}`: `Tracing.TracingSelector`, `AccessLogging.LogSelector`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeSelector {
    #[serde(default)]
    pub mode: WorkloadMode,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tracing {
    #[serde(rename = "match")]
    pub match_: Option<ModeSelector>,
    #[serde(default)]
    pub providers: Vec<ProviderRef>,
    pub random_sampling_percentage: Option<f64>,
    pub disable_span_reporting: Option<bool>,
    /// Ordered by tag name (istiod sorts the tags it generates).
    pub custom_tags: Option<BTreeMap<String, CustomTag>>,
    pub use_request_id_for_trace_sampling: Option<bool>,
    pub enable_istio_tags: Option<bool>,
    pub disable_context_propagation: Option<bool>,
}

/// `Tracing.CustomTag`: one of its four kinds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomTag {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub literal: Option<TagValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<TagSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<TagSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formatter: Option<TagValue>,
}

/// `Tracing.Literal`, `Tracing.Formatter`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagValue {
    #[serde(default)]
    pub value: String,
}

/// `Tracing.Environment`, `Tracing.RequestHeader`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagSource {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub default_value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    #[serde(default)]
    pub providers: Vec<ProviderRef>,
    #[serde(default)]
    pub overrides: Vec<MetricsOverrides>,
    /// A duration (`5s`).
    pub reporting_interval: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsOverrides {
    #[serde(rename = "match")]
    pub match_: Option<MetricSelector>,
    pub disabled: Option<bool>,
    #[serde(default)]
    pub tag_overrides: BTreeMap<String, TagOverride>,
}

/// `MetricSelector`: an Istio metric by name (`REQUEST_COUNT`, `ALL_METRICS`) or a custom one,
/// and the side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricSelector {
    pub metric: Option<String>,
    pub custom_metric: Option<String>,
    #[serde(default)]
    pub mode: WorkloadMode,
}

/// The Istio metrics a `MetricSelector.metric` names (`IstioMetric`), `ALL_METRICS` first.
pub const ISTIO_METRICS: [&str; 11] = [
    "ALL_METRICS",
    "REQUEST_COUNT",
    "REQUEST_DURATION",
    "REQUEST_SIZE",
    "RESPONSE_SIZE",
    "TCP_OPENED_CONNECTIONS",
    "TCP_CLOSED_CONNECTIONS",
    "TCP_SENT_BYTES",
    "TCP_RECEIVED_BYTES",
    "GRPC_REQUEST_MESSAGES",
    "GRPC_RESPONSE_MESSAGES",
];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagOverride {
    /// `UPSERT` (the default) or `REMOVE`.
    pub operation: Option<String>,
    #[serde(default)]
    pub value: String,
}

impl TagOverride {
    pub fn is_remove(&self) -> bool {
        self.operation.as_deref() == Some("REMOVE")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessLogging {
    #[serde(rename = "match")]
    pub match_: Option<ModeSelector>,
    #[serde(default)]
    pub providers: Vec<ProviderRef>,
    pub disabled: Option<bool>,
    pub filter: Option<LogFilter>,
}

/// `AccessLogging.Filter`: a CEL expression.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFilter {
    #[serde(default)]
    pub expression: String,
}
