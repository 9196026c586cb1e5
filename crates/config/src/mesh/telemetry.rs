//! The MeshConfig fields of telemetry (istio/api `mesh/v1alpha1/config.proto` and
//! `proxy.proto`'s `Tracing`): `accessLogFile`, `accessLogFormat`, `accessLogEncoding`,
//! `enableTracing`, `defaultConfig.tracing` (what istiod itself reads of it: sampling, custom
//! tags, the path tag length and the Istio tags; the tracer's address is the proxy's
//! bootstrap's, which pilot-agent writes), `defaultProviders`, and the telemetry providers of
//! `extensionProviders`, with istiod's built-in `prometheus`, `stackdriver` and `envoy`
//! (stdout) providers always there (`mesh.DefaultMeshConfig`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::istio::{CustomTag, TagSource, TagValue};

mod providers;
pub(super) use providers::providers;

/// The telemetry part of a mesh config.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshTelemetry {
    /// `accessLogFile`: empty, no access log unless a Telemetry asks for one.
    pub access_log_file: String,
    /// `accessLogFormat`: empty, istiod's default format for the encoding.
    pub access_log_format: String,
    pub access_log_json: bool,
    /// `enableTracing` (istiod's default: on).
    pub enable_tracing: bool,
    /// `defaultConfig.tracing`.
    pub proxy_tracing: ProxyTracing,
    /// `defaultProviders`.
    pub default_providers: DefaultProviders,
    /// The telemetry providers of `extensionProviders`, istiod's built-in ones first.
    pub providers: Vec<TelemetryProvider>,
}

impl Default for MeshTelemetry {
    fn default() -> Self {
        MeshTelemetry {
            access_log_file: String::new(),
            access_log_format: String::new(),
            access_log_json: false,
            enable_tracing: true,
            proxy_tracing: ProxyTracing::default(),
            default_providers: DefaultProviders::default(),
            providers: builtin_providers(),
        }
    }
}

impl MeshTelemetry {
    /// The provider called `name` (istiod's `fetchProvider`: case-insensitive).
    pub fn provider(&self, name: &str) -> Option<&TelemetryProvider> {
        self.providers
            .iter()
            .rev()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }
}

/// The MeshConfig fields of telemetry but the providers, as read.
pub(super) struct Fields {
    pub enable_tracing: Option<bool>,
    pub access_log_file: Option<String>,
    pub access_log_format: Option<String>,
    pub access_log_encoding: Option<String>,
    pub default_providers: Option<DefaultProviders>,
    pub default_config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Reads `fields` into `telemetry`: the notes of what is not applied (with the lines `line`
/// gives), or the field that is invalid and why. `defaultConfig`'s fields but `tracing` are
/// noted one by one.
pub(super) fn read(
    fields: Fields,
    telemetry: &mut MeshTelemetry,
    line: &impl Fn(&str) -> usize,
) -> Result<Vec<String>, (&'static str, String)> {
    let mut not_applied = Vec::new();
    if let Some(on) = fields.enable_tracing {
        telemetry.enable_tracing = on;
    }
    telemetry.access_log_file = fields.access_log_file.unwrap_or_default();
    telemetry.access_log_format = fields.access_log_format.unwrap_or_default();
    match fields.access_log_encoding.as_deref() {
        None | Some("TEXT") => {}
        Some("JSON") => telemetry.access_log_json = true,
        Some(other) => {
            return Err((
                "accessLogEncoding",
                format!("{other:?} is not TEXT or JSON"),
            ));
        }
    }
    if telemetry.access_log_json
        && !telemetry.access_log_format.is_empty()
        && serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(
            &telemetry.access_log_format,
        )
        .is_err()
    {
        return Err((
            "accessLogFormat",
            "with accessLogEncoding JSON, the format must be a JSON object".to_string(),
        ));
    }
    if let Some(d) = fields.default_providers {
        telemetry.default_providers = d;
    }
    for (field, v) in fields.default_config.iter().flatten() {
        if field == "tracing" && !v.is_null() {
            let (tracing, notes) = proxy_tracing(v)
                .map_err(|reason| ("defaultConfig", format!("tracing: {reason}")))?;
            telemetry.proxy_tracing = tracing;
            let at = line("defaultConfig");
            not_applied.extend(notes.into_iter().map(|n| format!("line {at}: {n}")));
        } else if !v.is_null() {
            not_applied.push(format!(
                "line {}: defaultConfig.{field}: accepted but not applied by axon",
                line("defaultConfig")
            ));
        }
    }
    Ok(not_applied)
}

/// What istiod reads of `defaultConfig.tracing` when it builds a proxy's listeners.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyTracing {
    /// `sampling` (percent); istiod's `PILOT_TRACE_SAMPLING` (1%) when unset or 0, and 1%
    /// when above 100.
    pub sampling: Option<f64>,
    pub custom_tags: BTreeMap<String, CustomTag>,
    pub max_path_tag_length: u32,
    pub enable_istio_tags: Option<bool>,
}

impl ProxyTracing {
    /// istiod's `proxyConfigSamplingValue`.
    pub fn sampling_percent(&self) -> f64 {
        match self.sampling {
            Some(s) if s > 100.0 => 1.0,
            Some(s) if s != 0.0 => s,
            _ => 1.0,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultProviders {
    #[serde(default)]
    pub tracing: Vec<String>,
    #[serde(default)]
    pub metrics: Vec<String>,
    #[serde(default)]
    pub access_logging: Vec<String>,
}

/// A named telemetry provider.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryProvider {
    pub name: String,
    pub kind: ProviderKind,
}

/// Where a provider's service is: `ns/host` or `host`, and a port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderService {
    pub service: String,
    pub port: u32,
}

impl ProviderService {
    /// The namespace `service` names (`ns/host`), if any, and its host.
    pub fn namespace_and_host(&self) -> (Option<&str>, &str) {
        match self.service.split_once('/') {
            Some((ns, host)) => (Some(ns), host),
            None => (None, &self.service),
        }
    }
}

/// A header a collector is sent: a value, or the value of an environment variable of axon's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderHeader {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProviderKind {
    Prometheus,
    /// Has no effect in istiod (its filter is gone): none here.
    Stackdriver,
    FileLog {
        path: String,
        format: Option<LogFormat>,
        omit_empty_values: bool,
    },
    HttpAls {
        at: ProviderService,
        log_name: String,
        filter_state_objects: Vec<String>,
        request_headers: Vec<String>,
        response_headers: Vec<String>,
        response_trailers: Vec<String>,
    },
    TcpAls {
        at: ProviderService,
        log_name: String,
        filter_state_objects: Vec<String>,
    },
    OtelAls {
        at: ProviderService,
        log_name: String,
        text: String,
        labels: Option<serde_json::Map<String, serde_json::Value>>,
    },
    Zipkin {
        at: ProviderService,
        max_tag_length: u32,
        enable_64bit_trace_id: bool,
        path: String,
        w3c: bool,
        timeout_nanos: Option<i128>,
        headers: Vec<ProviderHeader>,
    },
    Datadog {
        at: ProviderService,
        max_tag_length: u32,
    },
    Skywalking {
        at: ProviderService,
    },
    OpenTelemetry {
        at: ProviderService,
        max_tag_length: u32,
        /// OTLP over HTTP (`http`), else gRPC.
        http: Option<OtelHttp>,
        grpc_timeout_nanos: Option<i128>,
        grpc_metadata: Vec<ProviderHeader>,
    },
    /// Lightstep and OpenCensus (deprecated: istiod configures nothing for them), SDS (not a
    /// telemetry provider).
    Inert,
}

impl ProviderKind {
    /// The collector service of a provider that sends to one.
    pub fn service(&self) -> Option<&ProviderService> {
        match self {
            ProviderKind::Zipkin { at, .. }
            | ProviderKind::Datadog { at, .. }
            | ProviderKind::Skywalking { at }
            | ProviderKind::OpenTelemetry { at, .. }
            | ProviderKind::HttpAls { at, .. }
            | ProviderKind::TcpAls { at, .. }
            | ProviderKind::OtelAls { at, .. } => Some(at),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OtelHttp {
    pub path: String,
    pub timeout_nanos: Option<i128>,
    pub headers: Vec<ProviderHeader>,
}

/// `EnvoyFileAccessLogProvider.LogFormat`.
#[derive(Debug, Clone, PartialEq)]
pub enum LogFormat {
    Text(String),
    Labels(serde_json::Map<String, serde_json::Value>),
}

/// istiod's `DefaultMeshConfig().ExtensionProviders`.
fn builtin_providers() -> Vec<TelemetryProvider> {
    vec![
        TelemetryProvider {
            name: "prometheus".into(),
            kind: ProviderKind::Prometheus,
        },
        TelemetryProvider {
            name: "stackdriver".into(),
            kind: ProviderKind::Stackdriver,
        },
        TelemetryProvider {
            name: "envoy".into(),
            kind: ProviderKind::FileLog {
                path: "/dev/stdout".into(),
                format: None,
                omit_empty_values: false,
            },
        },
    ]
}

/// `defaultConfig.tracing`, typed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TracingDoc {
    zipkin: Option<serde_json::Value>,
    lightstep: Option<serde_json::Value>,
    datadog: Option<serde_json::Value>,
    stackdriver: Option<serde_json::Value>,
    open_census_agent: Option<serde_json::Value>,
    #[serde(default)]
    custom_tags: BTreeMap<String, ProxyTagDoc>,
    #[serde(default)]
    max_path_tag_length: u32,
    sampling: Option<f64>,
    tls_settings: Option<serde_json::Value>,
    enable_istio_tags: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyTagDoc {
    literal: Option<TagValue>,
    environment: Option<TagSource>,
    header: Option<TagSource>,
}

/// A proxy's own `tracing` (its node's `PROXY_CONFIG`, which pilot-agent merges from the
/// mesh's `defaultConfig` and the pod's `proxy.istio.io/config`), if it reads as one.
pub fn proxy_tracing_of(value: &serde_json::Value) -> Option<ProxyTracing> {
    // Integers come as JSON numbers with a fraction from protobuf's `Struct`.
    let mut value = value.clone();
    if let Some(n) = value
        .get("maxPathTagLength")
        .and_then(serde_json::Value::as_f64)
    {
        value["maxPathTagLength"] = serde_json::json!(n as u32);
    }
    proxy_tracing(&value).ok().map(|(t, _)| t)
}

/// Reads `defaultConfig.tracing`: what istiod applies, and the notes for what only the
/// proxy's bootstrap reads (the tracer and its TLS).
pub(super) fn proxy_tracing(
    value: &serde_json::Value,
) -> Result<(ProxyTracing, Vec<String>), String> {
    let doc: TracingDoc = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    if doc.sampling.is_some_and(|s| !(0.0..=100.0).contains(&s)) {
        return Err("sampling must be in range [0.0, 100.0]".into());
    }
    let mut notes = Vec::new();
    for (field, set) in [
        ("zipkin", doc.zipkin.is_some()),
        ("lightstep", doc.lightstep.is_some()),
        ("datadog", doc.datadog.is_some()),
        ("stackdriver", doc.stackdriver.is_some()),
        ("openCensusAgent", doc.open_census_agent.is_some()),
        ("tlsSettings", doc.tls_settings.is_some()),
    ] {
        if set {
            notes.push(format!(
                "defaultConfig.tracing.{field}: the tracer of the proxy's bootstrap (written by \
                 pilot-agent, not sent over xDS): not applied by axon; name the tracer in \
                 extensionProviders and a Telemetry"
            ));
        }
    }
    let custom_tags = doc
        .custom_tags
        .into_iter()
        .map(|(name, t)| {
            (
                name,
                CustomTag {
                    literal: t.literal,
                    environment: t.environment,
                    header: t.header,
                    formatter: None,
                },
            )
        })
        .collect();
    Ok((
        ProxyTracing {
            sampling: doc.sampling,
            custom_tags,
            max_path_tag_length: doc.max_path_tag_length,
            enable_istio_tags: doc.enable_istio_tags,
        },
        notes,
    ))
}
