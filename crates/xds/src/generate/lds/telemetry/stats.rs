//! Istio's metrics, as istiod's `generateStatsConfig` and `buildHTTPTelemetryFilter` write
//! them: the `istio.stats` filter (istio/api `envoy/extensions/stats/config.proto`,
//! `stats.PluginConfig`) for each Prometheus provider whose metrics a side keeps, with the
//! Telemetry overrides (metrics dropped, tags removed or set, the TCP reporting interval),
//! and the metadata exchange filters that give it the peer's labels. Only the Envoy of
//! istio's proxy has these filters: they are given to proxies run by its agent
//! (`ISTIO_VERSION`) only, as an upstream Envoy would reject the whole listener.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::google::protobuf::{Any, Duration, Struct, Value, value};
use prost::Message;

use super::super::l4::duration;
use crate::resource::SortedStruct;

use axon_config::validate::parse_duration;
use axon_model::telemetry::{ProxyTelemetry, Side, is_prometheus};

use axon_config::mesh::MeshTelemetry;

/// The filter's name (istiod's `xds.StatsFilterName`).
pub(super) const STATS_FILTER: &str = "istio.stats";
/// The metadata exchange filters' name (istiod's `MxFilterName`).
pub(super) const MX_FILTER: &str = "istio.metadata_exchange";
const PLUGIN_CONFIG_URL: &str = "type.googleapis.com/stats.PluginConfig";
const TYPED_STRUCT_URL: &str = "type.googleapis.com/xds.type.v3.TypedStruct";
const PEER_METADATA_URL: &str = "type.googleapis.com/io.istio.http.peer_metadata.Config";
const TCP_MX_URL: &str = "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange";

/// `stats.MetricConfig`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct MetricConfig {
    #[prost(btree_map = "string, string", tag = "1")]
    pub dimensions: BTreeMap<String, String>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, repeated, tag = "3")]
    pub tags_to_remove: Vec<String>,
    #[prost(string, tag = "4")]
    pub r#match: String,
    #[prost(bool, tag = "5")]
    pub drop: bool,
}

/// `stats.PluginConfig`, the fields istiod sets.
#[derive(Clone, PartialEq, Message)]
pub(super) struct PluginConfig {
    #[prost(bool, tag = "6")]
    pub disable_host_header_fallback: bool,
    #[prost(message, optional, tag = "7")]
    pub tcp_reporting_duration: Option<Duration>,
    #[prost(message, repeated, tag = "8")]
    pub metrics: Vec<MetricConfig>,
    /// `Reporter`: `SERVER_GATEWAY` (1) for waypoints only.
    #[prost(int32, tag = "10")]
    pub reporter: i32,
}

/// `xds.type.v3.TypedStruct` (the opaque config of a filter axon has no proto for), with
/// its fields in key order.
#[derive(Clone, PartialEq, Message)]
struct TypedStruct {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(message, optional, tag = "2")]
    value: Option<SortedStruct>,
}

/// istiod's `metricToPrometheusMetric`.
fn prometheus_name(metric: &str) -> &str {
    match metric {
        "REQUEST_COUNT" => "requests_total",
        "REQUEST_DURATION" => "request_duration_milliseconds",
        "REQUEST_SIZE" => "request_bytes",
        "RESPONSE_SIZE" => "response_bytes",
        "TCP_OPENED_CONNECTIONS" => "tcp_connections_opened_total",
        "TCP_CLOSED_CONNECTIONS" => "tcp_connections_closed_total",
        "TCP_SENT_BYTES" => "tcp_sent_bytes_total",
        "TCP_RECEIVED_BYTES" => "tcp_received_bytes_total",
        "GRPC_REQUEST_MESSAGES" => "request_messages_total",
        "GRPC_RESPONSE_MESSAGES" => "response_messages_total",
        custom => custom,
    }
}

/// The `istio.stats` configs of a side (one per Prometheus provider with metrics on it), in
/// provider name order; `gateway`: the listener is a gateway's (no host header fallback,
/// as inbound).
pub(super) fn plugin_configs(
    telemetry: &ProxyTelemetry,
    mesh: &MeshTelemetry,
    side: Side,
    gateway: bool,
) -> Vec<PluginConfig> {
    let log_providers = match side {
        Side::Client => &telemetry.client_log_providers,
        Side::Server => &telemetry.server_log_providers,
    };
    let mut names: Vec<&String> = telemetry.metrics.keys().chain(log_providers).collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let Some(provider) = mesh.provider(name) else {
            continue;
        };
        let Some(metrics) = telemetry.metrics.get(name) else {
            continue;
        };
        if !is_prometheus(provider) {
            continue;
        }
        let on_side = metrics.side(side);
        if on_side.disabled {
            continue;
        }
        out.push(PluginConfig {
            disable_host_header_fallback: side == Side::Server || gateway,
            tcp_reporting_duration: metrics
                .reporting_interval
                .as_deref()
                .and_then(parse_duration)
                .map(duration),
            metrics: on_side
                .overrides
                .iter()
                .map(|o| MetricConfig {
                    dimensions: o
                        .tags
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                        .collect(),
                    name: prometheus_name(&o.name).to_string(),
                    tags_to_remove: o
                        .tags
                        .iter()
                        .filter(|(_, v)| v.is_none())
                        .map(|(k, _)| k.clone())
                        .collect(),
                    r#match: String::new(),
                    drop: o.disabled,
                })
                .collect(),
            reporter: 0,
        });
    }
    out
}

fn plugin_any(config: &PluginConfig) -> Any {
    Any {
        type_url: PLUGIN_CONFIG_URL.to_string(),
        value: config.encode_to_vec(),
    }
}

/// The HTTP `istio.stats` filters of `configs`.
pub(super) fn http_filters(configs: &[PluginConfig]) -> Vec<HttpFilter> {
    configs
        .iter()
        .map(|c| HttpFilter {
            name: STATS_FILTER.to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(plugin_any(c))),
            ..Default::default()
        })
        .collect()
}

/// The network `istio.stats` filters of `configs`.
pub(super) fn network_filters(configs: &[PluginConfig]) -> Vec<Filter> {
    configs
        .iter()
        .map(|c| Filter {
            name: STATS_FILTER.to_string(),
            config_type: Some(filter::ConfigType::TypedConfig(plugin_any(c))),
        })
        .collect()
}

fn object(entries: Vec<(&str, Value)>) -> Value {
    Value {
        kind: Some(value::Kind::StructValue(Struct {
            fields: entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        })),
    }
}

fn list(values: Vec<Value>) -> Value {
    Value {
        kind: Some(value::Kind::ListValue(
            envoy_types::pb::google::protobuf::ListValue { values },
        )),
    }
}

fn typed_struct(type_url: &str, fields: Vec<(&str, Value)>) -> Any {
    let config = TypedStruct {
        type_url: type_url.to_string(),
        value: Some(SortedStruct {
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }),
    };
    Any {
        type_url: TYPED_STRUCT_URL.to_string(),
        value: config.encode_to_vec(),
    }
}

/// istiod's `SidecarInboundMetadataFilter` (server) or `SidecarOutboundMetadataFilter`.
pub(super) fn http_mx(side: Side) -> HttpFilter {
    let discovery = list(vec![
        object(vec![("istio_headers", object(vec![]))]),
        object(vec![("workload_discovery", object(vec![]))]),
    ]);
    let propagation = list(vec![object(vec![("istio_headers", object(vec![]))])]);
    let fields = match side {
        Side::Server => vec![
            ("downstream_discovery", discovery),
            ("downstream_propagation", propagation),
        ],
        Side::Client => vec![
            ("upstream_discovery", discovery),
            ("upstream_propagation", propagation),
        ],
    };
    HttpFilter {
        name: MX_FILTER.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(typed_struct(
            PEER_METADATA_URL,
            fields,
        ))),
        ..Default::default()
    }
}

/// istiod's `TCPListenerMx`: the inbound TCP metadata exchange.
pub(super) fn tcp_mx() -> Filter {
    let fields = vec![
        (
            "protocol",
            Value {
                kind: Some(value::Kind::StringValue("istio-peer-exchange".into())),
            },
        ),
        (
            "enable_discovery",
            Value {
                kind: Some(value::Kind::BoolValue(true)),
            },
        ),
    ];
    Filter {
        name: MX_FILTER.to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(typed_struct(
            TCP_MX_URL, fields,
        ))),
    }
}
