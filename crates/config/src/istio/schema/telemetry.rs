//! The table of `telemetry.istio.io` `Telemetry` (istio/api `telemetry/v1alpha1/telemetry.proto`,
//! which `v1` shares), field by field, in the conventions of [`super::tables`]. Every field is
//! applied: `model::telemetry` resolves and merges them per proxy as istiod's
//! `pilot/pkg/model/telemetry.go` does, `xds::lds::telemetry` writes the access logs, tracing
//! and stats filters.

use super::tables::{POLICY_TARGET_REFERENCE, TYPE_WORKLOAD_SELECTOR};
use super::{Applied, Field, Kind, Message};

const fn yes(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        applied: Applied::Yes,
    }
}

pub static TELEMETRY: Message = Message {
    name: "Telemetry",
    fields: &[
        // Applied: `model::telemetry` (which workloads).
        yes("selector", Kind::Message(&TYPE_WORKLOAD_SELECTOR)),
        yes("targetRef", Kind::Message(&POLICY_TARGET_REFERENCE)),
        yes("targetRefs", Kind::Message(&POLICY_TARGET_REFERENCE)),
        // Applied: `model::telemetry::tracing`, `xds::lds::telemetry` (the HCM's tracing).
        yes("tracing", Kind::Message(&TRACING)),
        // Applied: `model::telemetry::metrics`, `xds::lds::telemetry` (`istio.stats`, for
        // proxies run by istio's agent: no other Envoy has the filter).
        yes("metrics", Kind::Message(&METRICS)),
        // Applied: `model::telemetry::logging`, `xds::lds::telemetry` (access logs).
        yes("accessLogging", Kind::Message(&ACCESS_LOGGING)),
    ],
};

static MODE_SELECTOR: Message = Message {
    name: "WorkloadModeSelector",
    fields: &[yes("mode", Kind::Scalar)],
};

static PROVIDER_REF: Message = Message {
    name: "ProviderRef",
    fields: &[yes("name", Kind::Scalar)],
};

static TRACING: Message = Message {
    name: "Tracing",
    fields: &[
        yes("match", Kind::Message(&MODE_SELECTOR)),
        yes("providers", Kind::Message(&PROVIDER_REF)),
        yes("randomSamplingPercentage", Kind::Scalar),
        yes("disableSpanReporting", Kind::Scalar),
        yes("customTags", Kind::MapOf(&CUSTOM_TAG)),
        yes("useRequestIdForTraceSampling", Kind::Scalar),
        yes("enableIstioTags", Kind::Scalar),
        yes("disableContextPropagation", Kind::Scalar),
    ],
};

static CUSTOM_TAG: Message = Message {
    name: "Tracing.CustomTag",
    fields: &[
        yes("literal", Kind::Message(&TAG_VALUE)),
        yes("environment", Kind::Message(&TAG_SOURCE)),
        yes("header", Kind::Message(&TAG_SOURCE)),
        yes("formatter", Kind::Message(&TAG_VALUE)),
    ],
};

static TAG_VALUE: Message = Message {
    name: "Tracing.Literal",
    fields: &[yes("value", Kind::Scalar)],
};

static TAG_SOURCE: Message = Message {
    name: "Tracing.RequestHeader",
    fields: &[yes("name", Kind::Scalar), yes("defaultValue", Kind::Scalar)],
};

static METRICS: Message = Message {
    name: "Metrics",
    fields: &[
        yes("providers", Kind::Message(&PROVIDER_REF)),
        yes("overrides", Kind::Message(&METRICS_OVERRIDES)),
        yes("reportingInterval", Kind::Scalar),
    ],
};

static METRICS_OVERRIDES: Message = Message {
    name: "MetricsOverrides",
    fields: &[
        yes("match", Kind::Message(&METRIC_SELECTOR)),
        yes("disabled", Kind::Scalar),
        yes("tagOverrides", Kind::MapOf(&TAG_OVERRIDE)),
    ],
};

static METRIC_SELECTOR: Message = Message {
    name: "MetricSelector",
    fields: &[
        yes("metric", Kind::Scalar),
        yes("customMetric", Kind::Scalar),
        yes("mode", Kind::Scalar),
    ],
};

static TAG_OVERRIDE: Message = Message {
    name: "MetricsOverrides.TagOverride",
    fields: &[yes("operation", Kind::Scalar), yes("value", Kind::Scalar)],
};

static ACCESS_LOGGING: Message = Message {
    name: "AccessLogging",
    fields: &[
        yes("match", Kind::Message(&MODE_SELECTOR)),
        yes("providers", Kind::Message(&PROVIDER_REF)),
        yes("disabled", Kind::Scalar),
        yes("filter", Kind::Message(&LOG_FILTER)),
    ],
};

static LOG_FILTER: Message = Message {
    name: "AccessLogging.Filter",
    fields: &[yes("expression", Kind::Scalar)],
};
