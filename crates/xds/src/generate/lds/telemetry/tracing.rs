//! A connection manager's tracing, as istiod's `networking/core/tracing.go` configures it:
//! without a Telemetry, MeshConfig `enableTracing` with `defaultConfig.tracing`'s sampling
//! and tags (the tracer is then the bootstrap's); with one, its provider (Zipkin, Datadog,
//! SkyWalking, OpenTelemetry) to the collector's cluster, its sampling, custom tags and
//! Istio tags; and the UUID request ID extension, which decides sampling by request ID.

use envoy_types::pb::envoy::config::core::v3::{
    GrpcService, HeaderValue, HttpService, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::config::trace::v3::{
    DatadogConfig, OpenTelemetryConfig, SkyWalkingConfig, ZipkinConfig, tracing as trace,
    zipkin_config,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    RequestIdExtension, http_connection_manager::Tracing,
};
use envoy_types::pb::envoy::extensions::request_id::uuid::v3::UuidRequestIdConfig;
use envoy_types::pb::envoy::r#type::metadata::v3::{
    MetadataKey, MetadataKind, metadata_key, metadata_kind,
};
use envoy_types::pb::envoy::r#type::tracing::v3::{CustomTag as EnvoyTag, custom_tag};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::{Any, BoolValue, UInt32Value};

use axon_config::istio::CustomTag;
use axon_config::mesh::{
    MeshTelemetry, ProviderHeader, ProviderKind, ProxyTracing, TelemetryProvider,
};
use axon_model::proxy::{Proxy, ProxyType};
use axon_model::telemetry::{Side, TracingConfig};
use std::collections::BTreeMap;

use super::super::l4::duration;
use super::Collectors;
use crate::resource::any;

/// What a connection manager of `side` is given: its tracing, if any, and its request ID
/// extension (always: istiod sets one on every connection manager).
pub(super) fn tracing(
    config: Option<&TracingConfig>,
    mesh: &MeshTelemetry,
    proxy: &Proxy,
    side: Side,
    collectors: &Collectors,
) -> (Option<Tracing>, RequestIdExtension) {
    // The proxy's own tracing settings (`PROXY_CONFIG`), else the mesh's `defaultConfig`.
    let pt = proxy.proxy_tracing.as_ref().unwrap_or(&mesh.proxy_tracing);
    let Some(config) = config else {
        if !mesh.enable_tracing {
            return (None, request_id(true));
        }
        let mut t = Tracing::default();
        sampling(&mut t, pt.sampling_percent());
        let istio = pt.enable_istio_tags.unwrap_or(true);
        tag(&mut t, proxy, pt, istio, &pt.custom_tags);
        return (Some(t), request_id(true));
    };
    let spec = config.side(side);
    if spec.disabled {
        return (None, request_id(true));
    }
    let Some(provider) = &spec.provider else {
        return (None, request_id(true));
    };
    let Some(mut t) = provider_tracing(provider, proxy, collectors) else {
        return (None, request_id(true));
    };
    sampling(
        &mut t,
        spec.random_sampling_percentage
            .unwrap_or_else(|| pt.sampling_percent()),
    );
    let custom = spec.custom_tags.as_ref().filter(|t| !t.is_empty());
    tag(
        &mut t,
        proxy,
        pt,
        spec.enable_istio_tags,
        custom.unwrap_or(&pt.custom_tags),
    );
    t.no_context_propagation = spec.disable_context_propagation;
    (Some(t), request_id(spec.use_request_id_for_trace_sampling))
}

/// istiod's `configureCustomTags` and the path tag length: Istio's tags if `istio`, then
/// `custom`, sorted by name; the proxy config's `maxPathTagLength` where the provider set
/// none.
fn tag(
    t: &mut Tracing,
    proxy: &Proxy,
    pt: &ProxyTracing,
    istio: bool,
    custom: &BTreeMap<String, CustomTag>,
) {
    let mut tags = if istio { istio_tags(proxy) } else { Vec::new() };
    tags.extend(custom_tags(custom));
    tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    t.custom_tags = tags;
    if t.max_path_tag_length.is_none() && pt.max_path_tag_length != 0 {
        t.max_path_tag_length = Some(UInt32Value {
            value: pt.max_path_tag_length,
        });
    }
}

fn request_id(use_for_sampling: bool) -> RequestIdExtension {
    RequestIdExtension {
        typed_config: Some(any(&UuidRequestIdConfig {
            use_request_id_for_trace_sampling: Some(BoolValue {
                value: use_for_sampling,
            }),
            ..Default::default()
        })),
    }
}

/// istiod's `configureSampling`: every client-forced and overall request, `random` percent
/// of the others.
fn sampling(t: &mut Tracing, random: f64) {
    t.client_sampling = Some(Percent { value: 100.0 });
    t.overall_sampling = Some(Percent { value: 100.0 });
    t.random_sampling = Some(Percent { value: random });
}

/// istiod's `configureFromProviderConfig`: `None` when the provider does not trace or its
/// collector is not a service the proxy knows.
fn provider_tracing(
    provider: &TelemetryProvider,
    proxy: &Proxy,
    collectors: &Collectors,
) -> Option<Tracing> {
    let mut spawn_upstream = proxy.proxy_type == ProxyType::Router;
    let (name, config, max_tag): (&str, Any, u32) = match &provider.kind {
        ProviderKind::Zipkin {
            at,
            max_tag_length,
            enable_64bit_trace_id,
            path,
            w3c,
            ..
        } => {
            let (host, cluster) = collectors.resolve(at)?;
            let config = ZipkinConfig {
                collector_cluster: cluster,
                collector_endpoint: if path.is_empty() {
                    "/api/v2/spans".to_string()
                } else {
                    path.clone()
                },
                collector_hostname: host,
                collector_endpoint_version: zipkin_config::CollectorEndpointVersion::HttpJson
                    as i32,
                trace_id_128bit: !enable_64bit_trace_id,
                shared_span_context: Some(BoolValue { value: false }),
                trace_context_option: if *w3c {
                    zipkin_config::TraceContextOption::UseB3WithW3cPropagation as i32
                } else {
                    zipkin_config::TraceContextOption::UseB3 as i32
                },
                ..Default::default()
            };
            ("envoy.tracers.zipkin", any(&config), *max_tag_length)
        }
        ProviderKind::Datadog { at, max_tag_length } => {
            let (host, cluster) = collectors.resolve(at)?;
            let config = DatadogConfig {
                collector_cluster: cluster,
                service_name: proxy.cluster.clone(),
                collector_hostname: host,
                ..Default::default()
            };
            ("envoy.tracers.datadog", any(&config), *max_tag_length)
        }
        ProviderKind::Skywalking { at } => {
            let (host, cluster) = collectors.resolve(at)?;
            spawn_upstream = true;
            let config = SkyWalkingConfig {
                grpc_service: Some(envoy_grpc(&host, &cluster, None, &[])),
                ..Default::default()
            };
            ("envoy.tracers.skywalking", any(&config), 0)
        }
        ProviderKind::OpenTelemetry {
            at,
            max_tag_length,
            http,
            grpc_timeout_nanos,
            grpc_metadata,
        } => {
            let (host, cluster) = collectors.resolve(at)?;
            let mut config = OpenTelemetryConfig {
                service_name: proxy.cluster.clone(),
                ..Default::default()
            };
            match http {
                Some(h) => {
                    let path = h.path.trim_start_matches('/');
                    config.http_service = Some(HttpService {
                        http_uri: Some(HttpUri {
                            uri: if path.is_empty() {
                                host.clone()
                            } else {
                                format!("{host}/{path}")
                            },
                            timeout: h.timeout_nanos.map(duration),
                            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(
                                cluster.clone(),
                            )),
                        }),
                        request_headers_to_add: h
                            .headers
                            .iter()
                            .map(|hd| envoy_types::pb::envoy::config::core::v3::HeaderValueOption {
                                header: Some(header(hd)),
                                append_action: envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    });
                }
                None => {
                    config.grpc_service = Some(envoy_grpc(
                        &host,
                        &cluster,
                        *grpc_timeout_nanos,
                        grpc_metadata,
                    ));
                }
            }
            ("envoy.tracers.opentelemetry", any(&config), *max_tag_length)
        }
        _ => return None,
    };
    Some(Tracing {
        spawn_upstream_span: spawn_upstream.then_some(BoolValue { value: true }),
        provider: Some(envoy_types::pb::envoy::config::trace::v3::tracing::Http {
            name: name.to_string(),
            config_type: Some(trace::http::ConfigType::TypedConfig(config)),
        }),
        max_path_tag_length: (max_tag != 0).then_some(UInt32Value { value: max_tag }),
        ..Default::default()
    })
}

fn header(h: &ProviderHeader) -> HeaderValue {
    HeaderValue {
        key: h.name.clone(),
        value: h.value.clone(),
        ..Default::default()
    }
}

fn envoy_grpc(
    host: &str,
    cluster: &str,
    timeout: Option<i128>,
    metadata: &[ProviderHeader],
) -> GrpcService {
    GrpcService {
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
            grpc_service::EnvoyGrpc {
                cluster_name: cluster.to_string(),
                authority: host.to_string(),
                ..Default::default()
            },
        )),
        timeout: timeout.map(duration),
        initial_metadata: metadata.iter().map(header).collect(),
        ..Default::default()
    }
}

/// istiod's `buildServiceTags` and the dry-run policy tags (`optionalPolicyTags`).
fn istio_tags(proxy: &Proxy) -> Vec<EnvoyTag> {
    let label = |l: &str, default: &str| {
        proxy
            .labels
            .get(l)
            .filter(|v| !v.is_empty())
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let or_unknown = |v: &str| {
        if v.is_empty() {
            "unknown".to_string()
        } else {
            v.to_string()
        }
    };
    let literal = |tag: &str, value: String| EnvoyTag {
        tag: tag.to_string(),
        r#type: Some(custom_tag::Type::Literal(custom_tag::Literal { value })),
    };
    let mut tags = vec![
        literal(
            "istio.canonical_revision",
            label("service.istio.io/canonical-revision", "latest"),
        ),
        literal(
            "istio.canonical_service",
            label("service.istio.io/canonical-name", "unknown"),
        ),
        literal("istio.mesh_id", or_unknown(&proxy.mesh_id)),
        literal(
            "istio.namespace",
            if proxy.namespace.is_empty() {
                "default".to_string()
            } else {
                proxy.namespace.clone()
            },
        ),
        literal("istio.cluster_id", or_unknown(&proxy.cluster_id)),
    ];
    for (tag, prefix, key) in [
        (
            "istio.authorization.dry_run.allow_policy.name",
            "istio_dry_run_allow_",
            "shadow_effective_policy_id",
        ),
        (
            "istio.authorization.dry_run.allow_policy.result",
            "istio_dry_run_allow_",
            "shadow_engine_result",
        ),
        (
            "istio.authorization.dry_run.deny_policy.name",
            "istio_dry_run_deny_",
            "shadow_effective_policy_id",
        ),
        (
            "istio.authorization.dry_run.deny_policy.result",
            "istio_dry_run_deny_",
            "shadow_engine_result",
        ),
    ] {
        tags.push(EnvoyTag {
            tag: tag.to_string(),
            r#type: Some(custom_tag::Type::Metadata(custom_tag::Metadata {
                kind: Some(MetadataKind {
                    kind: Some(metadata_kind::Kind::Request(metadata_kind::Request {})),
                }),
                metadata_key: Some(MetadataKey {
                    key: "envoy.filters.http.rbac".to_string(),
                    path: vec![metadata_key::PathSegment {
                        segment: Some(metadata_key::path_segment::Segment::Key(format!(
                            "{prefix}{key}"
                        ))),
                    }],
                }),
                ..Default::default()
            })),
        });
    }
    tags
}

/// A Telemetry's (or `defaultConfig.tracing`'s) custom tags.
fn custom_tags(tags: &BTreeMap<String, CustomTag>) -> Vec<EnvoyTag> {
    tags.iter()
        .filter_map(|(name, t)| {
            let kind = if let Some(l) = &t.literal {
                custom_tag::Type::Literal(custom_tag::Literal {
                    value: l.value.clone(),
                })
            } else if let Some(e) = &t.environment {
                custom_tag::Type::Environment(custom_tag::Environment {
                    name: e.name.clone(),
                    default_value: e.default_value.clone(),
                })
            } else if let Some(h) = &t.header {
                custom_tag::Type::RequestHeader(custom_tag::Header {
                    name: h.name.clone(),
                    default_value: h.default_value.clone(),
                })
            } else if let Some(f) = &t.formatter {
                custom_tag::Type::Value(f.value.clone())
            } else {
                return None;
            };
            Some(EnvoyTag {
                tag: name.clone(),
                r#type: Some(kind),
            })
        })
        .collect()
}
