//! Access logs, as istiod writes them (`pilot/pkg/model/telemetry_logging.go`,
//! `networking/core/accesslog.go`): MeshConfig `accessLogFile` in its TEXT format or JSON
//! labels, and the providers a Telemetry names (a file, the HTTP, TCP and OpenTelemetry gRPC
//! services), each with the Telemetry's CEL filter; at the listener level, only connections
//! no filter chain took (`NR`).

use envoy_types::pb::envoy::config::accesslog::v3::{
    AccessLog, AccessLogFilter, ExtensionFilter, ResponseFlagFilter, access_log, access_log_filter,
    extension_filter,
};
use envoy_types::pb::envoy::config::core::v3::{
    ApiVersion, DataSource, GrpcService, JsonFormatOptions, SubstitutionFormatString,
    TypedExtensionConfig, data_source, grpc_service, substitution_format_string,
};
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::FileAccessLog;
use envoy_types::pb::envoy::extensions::access_loggers::filters::cel::v3::ExpressionFilter;
use envoy_types::pb::envoy::extensions::access_loggers::grpc::v3::{
    CommonGrpcAccessLogConfig, HttpGrpcAccessLogConfig, TcpGrpcAccessLogConfig,
};
use envoy_types::pb::envoy::extensions::access_loggers::open_telemetry::v3::OpenTelemetryAccessLogConfig;
use std::collections::BTreeMap;

use envoy_types::pb::google::protobuf::{Any, Value, value};
use envoy_types::pb::opentelemetry::proto::common::v1::{
    AnyValue, KeyValue, KeyValueList, any_value,
};
use prost::{Message, Name};

use axon_config::mesh::{LogFormat, MeshTelemetry, ProviderKind, TelemetryProvider};
use axon_model::telemetry::LogChoice;

use super::Collectors;
use crate::resource::{SortedStruct, any, json_value};

/// istiod's `EnvoyTextLogFormat`.
const TEXT_FORMAT: &str = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% \
%PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% \
\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% \
%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \
\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" %UPSTREAM_CLUSTER_RAW% \
%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% \
%REQUESTED_SERVER_NAME% %ROUTE_NAME%\n";

/// istiod's `EnvoyJSONLogFormatIstio`.
const JSON_LABELS: [(&str, &str); 24] = [
    ("start_time", "%START_TIME%"),
    ("route_name", "%ROUTE_NAME%"),
    ("method", "%REQ(:METHOD)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    (
        "connection_termination_details",
        "%CONNECTION_TERMINATION_DETAILS%",
    ),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("duration", "%DURATION%"),
    (
        "upstream_service_time",
        "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    ),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("authority", "%REQ(:AUTHORITY)%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER_RAW%"),
    ("upstream_local_address", "%UPSTREAM_LOCAL_ADDRESS%"),
    ("downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"),
    ("downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"),
    ("requested_server_name", "%REQUESTED_SERVER_NAME%"),
    (
        "upstream_transport_failure_reason",
        "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    ),
];

const FILE_LOG: &str = "envoy.access_loggers.file";
const HTTP_GRPC_LOG: &str = "envoy.access_loggers.http_grpc";
const TCP_GRPC_LOG: &str = "envoy.access_loggers.tcp_grpc";
const OTEL_LOG: &str = "envoy.access_loggers.open_telemetry";
const CEL_FILTER: &str = "envoy.access_loggers.extension_filters.cel";
const REQ_WITHOUT_QUERY: &str = "envoy.formatter.req_without_query";
/// The filter state the gRPC loggers send by default (istiod's `envoyStateToLog`, and
/// `envoyWasmStateToLog` for OpenTelemetry).
const STATE_TO_LOG: [&str; 2] = ["upstream_peer", "downstream_peer"];
const WASM_STATE_TO_LOG: [&str; 6] = [
    "upstream_peer",
    "downstream_peer",
    "wasm.upstream_peer",
    "wasm.upstream_peer_id",
    "wasm.downstream_peer",
    "wasm.downstream_peer_id",
];

/// The access logs of a connection manager or TCP proxy: `None` when the Telemetries leave
/// it to MeshConfig (or leave nothing to build), so that the caller falls back to
/// [`mesh_log`].
pub(super) fn telemetry_logs(
    choices: Option<&[LogChoice]>,
    mesh: &MeshTelemetry,
    collectors: &Collectors,
) -> Option<Vec<AccessLog>> {
    let mut built = Vec::new();
    for choice in choices? {
        let Some(mut log) = provider_log(&choice.provider, mesh, collectors) else {
            continue;
        };
        if choice.disabled {
            // Counts as configured (no fallback), logs nothing.
            built.push(None);
            continue;
        }
        if let Some(expression) = &choice.filter {
            log.filter = Some(cel_filter(expression));
        }
        built.push(Some(log));
    }
    if built.is_empty() {
        return None;
    }
    Some(built.into_iter().flatten().collect())
}

/// MeshConfig's `accessLogFile` log, if any (istiod's `FileAccessLogFromMeshConfig`).
pub(super) fn mesh_log(mesh: &MeshTelemetry) -> Option<AccessLog> {
    if mesh.access_log_file.is_empty() {
        return None;
    }
    Some(mesh_file_log(&mesh.access_log_file, mesh))
}

fn mesh_file_log(path: &str, mesh: &MeshTelemetry) -> AccessLog {
    let format = if mesh.access_log_json {
        let labels = serde_json::from_str(&mesh.access_log_format).ok();
        json_format(labels.as_ref(), false)
    } else {
        text_format(&mesh.access_log_format, false)
    };
    file_log(path, format)
}

/// A listener's access log: the connection-level one, for connections no chain took.
pub(super) fn listener_log(mut log: AccessLog) -> AccessLog {
    let nr = AccessLogFilter {
        filter_specifier: Some(access_log_filter::FilterSpecifier::ResponseFlagFilter(
            ResponseFlagFilter {
                flags: vec!["NR".to_string()],
            },
        )),
    };
    log.filter = Some(match log.filter.take() {
        None => nr,
        Some(other) => AccessLogFilter {
            filter_specifier: Some(access_log_filter::FilterSpecifier::AndFilter(
                envoy_types::pb::envoy::config::accesslog::v3::AndFilter {
                    filters: vec![nr, other],
                },
            )),
        },
    });
    log
}

fn cel_filter(expression: &str) -> AccessLogFilter {
    AccessLogFilter {
        filter_specifier: Some(access_log_filter::FilterSpecifier::ExtensionFilter(
            ExtensionFilter {
                name: CEL_FILTER.to_string(),
                config_type: Some(extension_filter::ConfigType::TypedConfig(any(
                    &ExpressionFilter {
                        expression: expression.to_string(),
                        ..Default::default()
                    },
                ))),
            },
        )),
    }
}

/// istiod's `telemetryAccessLog` (it sets the gRPC loggers' `common_config`, which Envoy
/// has deprecated for OpenTelemetry and still reads): `None` for a provider that logs nothing (a tracer,
/// Prometheus) or whose collector is not a known service.
#[allow(deprecated)]
fn provider_log(
    provider: &TelemetryProvider,
    mesh: &MeshTelemetry,
    collectors: &Collectors,
) -> Option<AccessLog> {
    match &provider.kind {
        ProviderKind::FileLog {
            path,
            format,
            omit_empty_values,
        } => {
            // The built-in `envoy` provider without a format takes MeshConfig's.
            if provider.name == "envoy" && format.is_none() && !omit_empty_values {
                return Some(mesh_file_log(path, mesh));
            }
            let path = if path.is_empty() { "/dev/stdout" } else { path };
            let format = match format {
                Some(LogFormat::Labels(labels)) => json_format(Some(labels), *omit_empty_values),
                Some(LogFormat::Text(text)) => text_format(text, *omit_empty_values),
                None => text_format("", *omit_empty_values),
            };
            Some(file_log(path, format))
        }
        ProviderKind::HttpAls {
            at,
            log_name,
            filter_state_objects,
            request_headers,
            response_headers,
            response_trailers,
        } => {
            let (host, cluster) = collectors.resolve(at)?;
            let config = HttpGrpcAccessLogConfig {
                common_config: Some(common(
                    log_name,
                    "http_envoy_accesslog",
                    &host,
                    &cluster,
                    filter_state_objects,
                    &STATE_TO_LOG,
                )),
                additional_request_headers_to_log: request_headers.clone(),
                additional_response_headers_to_log: response_headers.clone(),
                additional_response_trailers_to_log: response_trailers.clone(),
            };
            Some(typed_log(HTTP_GRPC_LOG, any(&config)))
        }
        ProviderKind::TcpAls {
            at,
            log_name,
            filter_state_objects,
        } => {
            let (host, cluster) = collectors.resolve(at)?;
            let config = TcpGrpcAccessLogConfig {
                common_config: Some(common(
                    log_name,
                    "tcp_envoy_accesslog",
                    &host,
                    &cluster,
                    filter_state_objects,
                    &STATE_TO_LOG,
                )),
            };
            Some(typed_log(TCP_GRPC_LOG, any(&config)))
        }
        ProviderKind::OtelAls {
            at,
            log_name,
            text,
            labels,
        } => {
            let (host, cluster) = collectors.resolve(at)?;
            let body = if text.is_empty() { TEXT_FORMAT } else { text };
            let mut config = OpenTelemetryAccessLogConfig {
                common_config: Some(common(
                    log_name,
                    "otel_envoy_accesslog",
                    &host,
                    &cluster,
                    &[],
                    &WASM_STATE_TO_LOG,
                )),
                disable_builtin_labels: true,
                body: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(body.to_string())),
                }),
                ..Default::default()
            };
            if let Some(labels) = labels.as_ref().filter(|l| !l.is_empty()) {
                config.attributes = Some(KeyValueList {
                    values: labels
                        .iter()
                        .map(|(k, v)| KeyValue {
                            key: k.clone(),
                            value: Some(AnyValue {
                                value: Some(any_value::Value::StringValue(
                                    v.as_str().unwrap_or_default().to_string(),
                                )),
                            }),
                            ..Default::default()
                        })
                        .collect(),
                });
            }
            let label_texts = labels.iter().flatten().filter_map(|(_, v)| v.as_str());
            config.formatters = formatters(std::iter::once(body).chain(label_texts));
            Some(typed_log(OTEL_LOG, any(&config)))
        }
        _ => None,
    }
}

fn common(
    log_name: &str,
    default_name: &str,
    host: &str,
    cluster: &str,
    objects: &[String],
    default_objects: &[&str],
) -> CommonGrpcAccessLogConfig {
    CommonGrpcAccessLogConfig {
        log_name: if log_name.is_empty() {
            default_name.to_string()
        } else {
            log_name.to_string()
        },
        grpc_service: Some(GrpcService {
            target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                grpc_service::EnvoyGrpc {
                    cluster_name: cluster.to_string(),
                    authority: host.to_string(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        }),
        transport_api_version: ApiVersion::V3 as i32,
        filter_state_objects_to_log: if objects.is_empty() {
            default_objects.iter().map(|s| s.to_string()).collect()
        } else {
            objects.to_vec()
        },
        ..Default::default()
    }
}

fn typed_log(name: &str, config: envoy_types::pb::google::protobuf::Any) -> AccessLog {
    AccessLog {
        name: name.to_string(),
        config_type: Some(access_log::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// A format: the substitution format string, and, for JSON, its labels apart (a
/// `google.protobuf.Struct` is a hash map to prost: encoded here in key order, so that the
/// same labels always encode alike).
struct Format {
    text: SubstitutionFormatString,
    json: Option<BTreeMap<String, Value>>,
}

/// `SubstitutionFormatString.json_format`'s and `FileAccessLog.log_format`'s tags.
const JSON_FORMAT_TAG: u32 = 2;
const LOG_FORMAT_TAG: u32 = 5;

fn file_log(path: &str, format: Format) -> AccessLog {
    let mut value = FileAccessLog {
        path: path.to_string(),
        access_log_format: None,
    }
    .encode_to_vec();
    let mut sfs = format.text.encode_to_vec();
    if let Some(fields) = format.json {
        prost::encoding::message::encode(JSON_FORMAT_TAG, &SortedStruct { fields }, &mut sfs);
    }
    prost::encoding::bytes::encode(LOG_FORMAT_TAG, &sfs, &mut value);
    typed_log(
        FILE_LOG,
        Any {
            type_url: FileAccessLog::type_url(),
            value,
        },
    )
}

/// The formatters a format of `texts` needs (istiod's `accessLogFormatters`): the
/// `REQ_WITHOUT_QUERY` command's extension if one of them uses it.
fn formatters<'a>(mut texts: impl Iterator<Item = &'a str>) -> Vec<TypedExtensionConfig> {
    if !texts.any(|t| t.contains("%REQ_WITHOUT_QUERY")) {
        return Vec::new();
    }
    vec![TypedExtensionConfig {
        name: REQ_WITHOUT_QUERY.to_string(),
        typed_config: Some(any(
            &envoy_types::pb::envoy::extensions::formatter::req_without_query::v3::ReqWithoutQuery::default(),
        )),
    }]
}

/// istiod's `fileAccessLogFormat` as text: the default format, or the given one ending in a
/// newline.
fn text_format(text: &str, omit_empty_values: bool) -> Format {
    let format = if text.is_empty() {
        TEXT_FORMAT.to_string()
    } else if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    };
    let text = SubstitutionFormatString {
        formatters: formatters(std::iter::once(format.as_str())),
        format: Some(substitution_format_string::Format::TextFormatSource(
            DataSource {
                specifier: Some(data_source::Specifier::InlineString(format)),
                ..Default::default()
            },
        )),
        omit_empty_values,
        ..Default::default()
    };
    Format { text, json: None }
}

/// JSON labels: the given ones, or istiod's when there are none (with istiod's
/// `JsonFormatOptions`, whose one field Envoy has deprecated).
#[allow(deprecated)]
fn json_format(
    labels: Option<&serde_json::Map<String, serde_json::Value>>,
    omit_empty_values: bool,
) -> Format {
    let fields: BTreeMap<String, Value> = match labels.filter(|l| !l.is_empty()) {
        Some(labels) => labels
            .iter()
            .map(|(k, v)| (k.clone(), json_value(v)))
            .collect(),
        None => JSON_LABELS
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    Value {
                        kind: Some(value::Kind::StringValue(v.to_string())),
                    },
                )
            })
            .collect(),
    };
    let label_texts = fields.values().filter_map(|v| match &v.kind {
        Some(value::Kind::StringValue(s)) => Some(s.as_str()),
        _ => None,
    });
    let text = SubstitutionFormatString {
        formatters: formatters(label_texts),
        format: None,
        json_format_options: Some(JsonFormatOptions {
            sort_properties: false,
        }),
        omit_empty_values,
        ..Default::default()
    };
    Format {
        text,
        json: Some(fields),
    }
}
