//! The telemetry providers of MeshConfig `extensionProviders` as written (each provider
//! kind's fields, unknown ones refused), read into [`super::TelemetryProvider`]s with
//! istiod's checks (a service and a port in range; durations), and a note per field axon
//! does not apply.

use serde::Deserialize;

use super::{
    LogFormat, OtelHttp, ProviderHeader, ProviderKind, ProviderService, TelemetryProvider,
    builtin_providers,
};

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
pub(crate) fn providers(
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
