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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderDoc {
    #[serde(default)]
    name: String,
    zipkin: Option<ZipkinDoc>,
    lightstep: Option<serde_json::Value>,
    datadog: Option<DatadogDoc>,
    stackdriver: Option<serde_json::Value>,
    opencensus: Option<serde_json::Value>,
    skywalking: Option<SkywalkingDoc>,
    opentelemetry: Option<OtelDoc>,
    prometheus: Option<serde_json::Value>,
    envoy_file_access_log: Option<FileLogDoc>,
    envoy_http_als: Option<HttpAlsDoc>,
    envoy_tcp_als: Option<TcpAlsDoc>,
    envoy_otel_als: Option<OtelAlsDoc>,
    sds: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ZipkinDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    #[serde(default)]
    max_tag_length: u32,
    #[serde(default, rename = "enable64bitTraceId")]
    enable_64bit_trace_id: bool,
    #[serde(default)]
    path: String,
    trace_context_option: Option<String>,
    timeout: Option<String>,
    #[serde(default)]
    headers: Vec<HeaderDoc>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DatadogDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    #[serde(default)]
    max_tag_length: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SkywalkingDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    #[serde(default)]
    access_token: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OtelDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    #[serde(default)]
    max_tag_length: u32,
    http: Option<HttpServiceDoc>,
    grpc: Option<GrpcServiceDoc>,
    resource_detectors: Option<serde_json::Value>,
    service_attribute_enrichment: Option<String>,
    dynatrace_sampler: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpServiceDoc {
    #[serde(default)]
    path: String,
    timeout: Option<String>,
    #[serde(default)]
    headers: Vec<HeaderDoc>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GrpcServiceDoc {
    timeout: Option<String>,
    #[serde(default)]
    initial_metadata: Vec<HeaderDoc>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HeaderDoc {
    #[serde(default)]
    name: String,
    value: Option<String>,
    env_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileLogDoc {
    #[serde(default)]
    path: String,
    log_format: Option<LogFormatDoc>,
    #[serde(default)]
    omit_empty_values: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LogFormatDoc {
    text: Option<String>,
    labels: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpAlsDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    #[serde(default)]
    log_name: String,
    #[serde(default)]
    filter_state_objects_to_log: Vec<String>,
    #[serde(default)]
    additional_request_headers_to_log: Vec<String>,
    #[serde(default)]
    additional_response_headers_to_log: Vec<String>,
    #[serde(default)]
    additional_response_trailers_to_log: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TcpAlsDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    #[serde(default)]
    log_name: String,
    #[serde(default)]
    filter_state_objects_to_log: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OtelAlsDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    #[serde(default)]
    log_name: String,
    log_format: Option<LogFormatDoc>,
}

fn headers(docs: Vec<HeaderDoc>) -> Vec<ProviderHeader> {
    docs.into_iter()
        .map(|h| ProviderHeader {
            value: match (h.value, h.env_name) {
                (Some(v), _) => v,
                (None, Some(env)) => std::env::var(env).unwrap_or_default(),
                (None, None) => String::new(),
            },
            name: h.name,
        })
        .collect()
}

fn service(service: String, port: u32) -> Result<ProviderService, String> {
    if service.is_empty() {
        return Err("service must not be empty".into());
    }
    if !(1..=65535).contains(&port) {
        return Err(format!(
            "port must be in the range [1, 65535], found: {port}"
        ));
    }
    Ok(ProviderService { service, port })
}

fn timeout(t: Option<String>) -> Result<Option<i128>, String> {
    t.map(|t| crate::validate::parse_duration(&t).ok_or(format!("invalid timeout {t:?}")))
        .transpose()
}

/// The telemetry providers of `extensionProviders` (the others, external authorizers, are
/// `super::providers`'), after istiod's built-in ones, and a note per field not applied. An
/// error names the provider and the reason.
pub(super) fn providers(
    value: &serde_json::Value,
) -> Result<(Vec<TelemetryProvider>, Vec<String>), String> {
    let docs: Vec<ProviderDoc> =
        serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let mut out = builtin_providers();
    let mut notes = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let name = doc.name.clone();
        let at = |reason: String| format!("extensionProviders[{i}] ({name}): {reason}");
        let kind = if let Some(z) = doc.zipkin {
            if z.timeout.is_some() || !z.headers.is_empty() {
                notes.push(format!(
                    "extensionProviders[{i}] ({name}): zipkin.timeout and zipkin.headers: \
                     accepted but not applied by axon (they need Envoy's collector_service, \
                     which axon's Envoy API does not have)"
                ));
            }
            let w3c = match z.trace_context_option.as_deref() {
                None | Some("USE_B3") => false,
                Some("USE_B3_WITH_W3C_PROPAGATION") => true,
                Some(other) => {
                    return Err(at(format!(
                        "traceContextOption {other:?} is not USE_B3 or USE_B3_WITH_W3C_PROPAGATION"
                    )));
                }
            };
            ProviderKind::Zipkin {
                at: service(z.service, z.port).map_err(at)?,
                max_tag_length: z.max_tag_length,
                enable_64bit_trace_id: z.enable_64bit_trace_id,
                path: z.path,
                w3c,
                timeout_nanos: timeout(z.timeout).map_err(at)?,
                headers: headers(z.headers),
            }
        } else if let Some(d) = doc.datadog {
            ProviderKind::Datadog {
                at: service(d.service, d.port).map_err(at)?,
                max_tag_length: d.max_tag_length,
            }
        } else if let Some(s) = doc.skywalking {
            if !s.access_token.is_empty() {
                notes.push(format!(
                    "extensionProviders[{i}] ({name}): skywalking.accessToken: accepted but not \
                     applied (istiod does not send it either)"
                ));
            }
            ProviderKind::Skywalking {
                at: service(s.service, s.port).map_err(at)?,
            }
        } else if let Some(o) = doc.opentelemetry {
            for (field, set) in [
                ("resourceDetectors", o.resource_detectors.is_some()),
                (
                    "serviceAttributeEnrichment",
                    o.service_attribute_enrichment
                        .as_deref()
                        .is_some_and(|e| e != "ISTIO_CANONICAL"),
                ),
                ("dynatraceSampler", o.dynatrace_sampler.is_some()),
            ] {
                if set {
                    notes.push(format!(
                        "extensionProviders[{i}] ({name}): opentelemetry.{field}: accepted but \
                         not applied by axon"
                    ));
                }
            }
            let http = o
                .http
                .map(|h| {
                    Ok::<_, String>(OtelHttp {
                        path: h.path,
                        timeout_nanos: timeout(h.timeout)?,
                        headers: headers(h.headers),
                    })
                })
                .transpose()
                .map_err(at)?;
            let (grpc_timeout_nanos, grpc_metadata) = match o.grpc {
                Some(g) => (timeout(g.timeout).map_err(at)?, headers(g.initial_metadata)),
                None => (None, Vec::new()),
            };
            ProviderKind::OpenTelemetry {
                at: service(o.service, o.port).map_err(at)?,
                max_tag_length: o.max_tag_length,
                http,
                grpc_timeout_nanos,
                grpc_metadata,
            }
        } else if doc.prometheus.is_some() {
            ProviderKind::Prometheus
        } else if doc.stackdriver.is_some() {
            ProviderKind::Stackdriver
        } else if let Some(f) = doc.envoy_file_access_log {
            let format = match f.log_format {
                None => None,
                Some(LogFormatDoc {
                    text: Some(_),
                    labels: Some(_),
                }) => {
                    return Err(at(
                        "logFormat: only one of text and labels may be set".into()
                    ));
                }
                Some(LogFormatDoc { text: Some(t), .. }) => Some(LogFormat::Text(t)),
                Some(LogFormatDoc {
                    labels: Some(l), ..
                }) => Some(LogFormat::Labels(l)),
                Some(_) => None,
            };
            ProviderKind::FileLog {
                path: f.path,
                format,
                omit_empty_values: f.omit_empty_values,
            }
        } else if let Some(h) = doc.envoy_http_als {
            ProviderKind::HttpAls {
                at: service(h.service, h.port).map_err(at)?,
                log_name: h.log_name,
                filter_state_objects: h.filter_state_objects_to_log,
                request_headers: h.additional_request_headers_to_log,
                response_headers: h.additional_response_headers_to_log,
                response_trailers: h.additional_response_trailers_to_log,
            }
        } else if let Some(t) = doc.envoy_tcp_als {
            ProviderKind::TcpAls {
                at: service(t.service, t.port).map_err(at)?,
                log_name: t.log_name,
                filter_state_objects: t.filter_state_objects_to_log,
            }
        } else if let Some(o) = doc.envoy_otel_als {
            let (text, labels) = match o.log_format {
                Some(f) => (f.text.unwrap_or_default(), f.labels),
                None => (String::new(), None),
            };
            ProviderKind::OtelAls {
                at: service(o.service, o.port).map_err(at)?,
                log_name: o.log_name,
                text,
                labels,
            }
        } else if doc.lightstep.is_some() || doc.opencensus.is_some() {
            notes.push(format!(
                "extensionProviders[{i}] ({name}): a deprecated tracer (lightstep, opencensus): \
                 istiod configures nothing for it, nor does axon"
            ));
            ProviderKind::Inert
        } else if doc.sds.is_some() {
            notes.push(format!(
                "extensionProviders[{i}] ({name}): sds: accepted but not applied by axon"
            ));
            ProviderKind::Inert
        } else {
            // An external authorizer (`super::providers`), or nothing: not telemetry.
            continue;
        };
        // A user's provider may replace a built-in one of its name.
        out.retain(|p| !p.name.eq_ignore_ascii_case(&name));
        out.push(TelemetryProvider { name, kind });
    }
    Ok((out, notes))
}
