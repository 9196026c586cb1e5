//! The telemetry a listener is given, compared with what istiod generates for the same
//! Telemetry and mesh config (`telemetry_test.go`'s stats filter cases, `accesslog.go`,
//! `tracing.go`).

use super::*;
use axon_model::fixtures::{configs, proxy};
use envoy_types::pb::envoy::config::listener::v3::FilterChain;
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::FileAccessLog;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter;
use envoy_types::pb::google::protobuf::Any;

use crate::resource::any;

const COLLECTOR: &str = "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zipkin, namespace: istio-system}
spec:
  hosts: [zipkin.istio-system.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9411, name: http, protocol: HTTP}]
  endpoints: [{address: 10.9.0.1}]
";

/// A listener with one HTTP connection manager (fault, cors, router) and one TCP proxy.
fn listener() -> Listener {
    let hcm = crate::generate::lds::hcm_config(
        "outbound_0.0.0.0_80",
        envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier::Rds(Default::default()),
        crate::generate::lds::HcmKind::Sidecar,
    );
    let tcp = TcpProxy {
        stat_prefix: "x".into(),
        ..Default::default()
    };
    Listener {
        filter_chains: vec![
            FilterChain {
                filters: vec![Filter {
                    name: HCM.into(),
                    config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
                }],
                ..Default::default()
            },
            FilterChain {
                filters: vec![Filter {
                    name: TCP_PROXY.into(),
                    config_type: Some(filter::ConfigType::TypedConfig(any(&tcp))),
                }],
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

fn typed(f: &Filter) -> &Any {
    match &f.config_type {
        Some(filter::ConfigType::TypedConfig(a)) => a,
        _ => panic!("typed config"),
    }
}

fn hcm_of(l: &Listener) -> HttpConnectionManager {
    HttpConnectionManager::decode(typed(&l.filter_chains[0].filters[0]).value.as_slice()).unwrap()
}

/// `which` side of a sidecar in `a` with `labels`, in a context of `yaml` under the mesh
/// config `mesh_yaml`; `istio`: run by istio's agent on Istio's Envoy.
fn side_with(
    yaml: &str,
    mesh_yaml: &str,
    labels: &[(&str, &str)],
    istio: bool,
    which: Side,
) -> SideTelemetry {
    use axon_model::push_request::{PushRequest, TriggerReason};
    let req = PushRequest::full_push(TriggerReason::Config, std::time::Instant::now());
    let mesh = std::sync::Arc::new(axon_config::mesh::parse(mesh_yaml).unwrap().mesh);
    let ctx = PushContext::build(None, &configs(yaml), &req, &mesh);
    let mut p = proxy("sidecar", "10.1.0.1", "a", labels);
    p.istio_stats = istio;
    p.istio_agent = istio;
    let scope = SidecarScope::compute(&ctx, &p);
    SideTelemetry::of(&ctx, &p, &scope, which)
}

#[test]
fn mesh_access_log_file_in_istiods_text_format_on_every_hcm_and_tcp_proxy() {
    let tel = side_with(
        COLLECTOR,
        "accessLogFile: /tmp/a.log\n",
        &[],
        false,
        Side::Client,
    );
    let mut l = listener();
    tel.apply(&mut l, true);
    let hcm = hcm_of(&l);
    assert_eq!(hcm.access_log.len(), 1);
    let log = FileAccessLog::decode(match &hcm.access_log[0].config_type {
        Some(
            envoy_types::pb::envoy::config::accesslog::v3::access_log::ConfigType::TypedConfig(a),
        ) => a.value.as_slice(),
        _ => panic!(),
    })
    .unwrap();
    assert_eq!(log.path, "/tmp/a.log");
    let text = format!("{log:?}");
    assert!(text.contains("%UPSTREAM_CLUSTER_RAW%"), "{text}");
    // The router stays last; the request ID extension and default tracing (1%) are set.
    assert_eq!(hcm.http_filters.last().unwrap().name, ROUTER);
    assert!(hcm.request_id_extension.is_some());
    let tracing = hcm.tracing.expect("enableTracing's default");
    assert_eq!(tracing.random_sampling.unwrap().value, 1.0);
    assert!(tracing.provider.is_none());
    assert!(
        tracing
            .custom_tags
            .iter()
            .any(|t| t.tag == "istio.canonical_service")
    );
    let tcp = TcpProxy::decode(typed(&l.filter_chains[1].filters[0]).value.as_slice()).unwrap();
    assert_eq!(tcp.access_log.len(), 1);
    assert_eq!(tcp.stat_prefix, "x", "appending keeps what was there");
    // The listener logs only what no chain took.
    assert_eq!(l.access_log.len(), 1);
    assert!(l.access_log[0].filter.is_some());
}

#[test]
fn json_labels_encode_alike_every_time() {
    let a = side_with(
        "",
        "accessLogFile: /tmp/a.log\naccessLogEncoding: JSON\n",
        &[],
        false,
        Side::Client,
    );
    let b = side_with(
        "",
        "accessLogFile: /tmp/a.log\naccessLogEncoding: JSON\n",
        &[],
        false,
        Side::Client,
    );
    assert_eq!(a.hcm_extra, b.hcm_extra);
    assert!(!a.logs.is_empty());
}

#[test]
fn no_access_log_and_tracing_off_when_the_mesh_says_so() {
    let tel = side_with("", "enableTracing: false\n", &[], false, Side::Client);
    let mut l = listener();
    tel.apply(&mut l, true);
    let hcm = hcm_of(&l);
    assert!(hcm.access_log.is_empty() && hcm.tracing.is_none() && l.access_log.is_empty());
}

const ZIPKIN_MESH: &str = "extensionProviders: [{name: zipkin, zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}}]\n";

#[test]
fn a_telemetrys_zipkin_provider_and_tags() {
    let yaml = format!(
        "{COLLECTOR}---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing: [{{providers: [{{name: zipkin}}], randomSamplingPercentage: 100, customTags: {{my-tag: {{header: {{name: x-user, defaultValue: none}}}}}}}}]\n"
    );
    let tel = side_with(
        &yaml,
        ZIPKIN_MESH,
        &[("service.istio.io/canonical-name", "reviews")],
        false,
        Side::Client,
    );
    let mut l = listener();
    tel.apply(&mut l, false);
    let tracing = hcm_of(&l).tracing.expect("tracing");
    assert_eq!(tracing.random_sampling.unwrap().value, 100.0);
    let provider = tracing.provider.expect("zipkin");
    assert_eq!(provider.name, "envoy.tracers.zipkin");
    let Some(envoy_types::pb::envoy::config::trace::v3::tracing::http::ConfigType::TypedConfig(
        cfg,
    )) = provider.config_type
    else {
        panic!()
    };
    let zipkin =
        envoy_types::pb::envoy::config::trace::v3::ZipkinConfig::decode(cfg.value.as_slice())
            .unwrap();
    assert_eq!(
        zipkin.collector_cluster,
        "outbound|9411||zipkin.istio-system.svc.cluster.local"
    );
    assert_eq!(zipkin.collector_endpoint, "/api/v2/spans");
    assert!(zipkin.trace_id_128bit);
    let tags: Vec<&str> = tracing.custom_tags.iter().map(|t| t.tag.as_str()).collect();
    assert!(tags.contains(&"my-tag") && tags.contains(&"istio.canonical_service"));
    let mut sorted = tags.clone();
    sorted.sort();
    assert_eq!(tags, sorted, "sorted by name, as istiod");
    // A collector the proxy's scope does not have: no tracing rather than a listener Envoy
    // would reject.
    let tel = side_with(
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  tracing: [{providers: [{name: zipkin}]}]\n",
        ZIPKIN_MESH,
        &[],
        false,
        Side::Client,
    );
    assert!(tel.tracing.is_none());
}

/// istiod's stats filter for istio.io's "remove response_code" Telemetry
/// (`ref-telemetry-8`), on the server side of a proxy with Istio's filters: each metric by
/// its Prometheus name, the tag removed, no host header fallback.
#[test]
fn stats_filter_as_istiod_generates_it() {
    let yaml = "apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: remove-response-code, namespace: a}
spec:
  selector: {matchLabels: {service.istio.io/canonical-name: bar}}
  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - match: {metric: REQUEST_COUNT}
      tagOverrides: {response_code: {operation: REMOVE}}
    - match: {metric: REQUEST_DURATION}
      tagOverrides: {response_code: {operation: REMOVE}}
";
    let labels = [("service.istio.io/canonical-name", "bar")];
    let tel = side_with(yaml, "", &labels, true, Side::Server);
    let expected = PluginConfig {
        disable_host_header_fallback: true,
        tcp_reporting_duration: None,
        metrics: ["request_duration_milliseconds", "requests_total"]
            .iter()
            .map(|name| stats::MetricConfig {
                name: name.to_string(),
                tags_to_remove: vec!["response_code".into()],
                ..Default::default()
            })
            .collect(),
        reporter: 0,
    };
    // istiod orders overrides by metric name: REQUEST_COUNT, then REQUEST_DURATION.
    let mut expected_sorted = expected.clone();
    expected_sorted.metrics.reverse();
    assert_eq!(tel.http_stats.len(), 1);
    let got = PluginConfig::decode(match &tel.http_stats[0].config_type {
        Some(http_filter::ConfigType::TypedConfig(a)) => {
            assert_eq!(a.type_url, "type.googleapis.com/stats.PluginConfig");
            a.value.as_slice()
        }
        _ => panic!(),
    })
    .unwrap();
    assert_eq!(got, expected_sorted);
    // The client side keeps host header fallback.
    let client = side_with(yaml, "", &labels, true, Side::Client);
    let got = PluginConfig::decode(match &client.http_stats[0].config_type {
        Some(http_filter::ConfigType::TypedConfig(a)) => a.value.as_slice(),
        _ => panic!(),
    })
    .unwrap();
    assert!(!got.disable_host_header_fallback);
    // Applied: the metadata exchange first, the stats filter before the router.
    let mut l = listener();
    tel.apply(&mut l, false);
    let names: Vec<String> = hcm_of(&l)
        .http_filters
        .iter()
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(names.first().map(String::as_str), Some(MX_FILTER));
    assert_eq!(&names[names.len() - 2..], [STATS_FILTER, ROUTER]);
    // The TCP chain: inbound metadata exchange, stats, then the proxy.
    let tcp: Vec<&str> = l.filter_chains[1]
        .filters
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(tcp, [MX_FILTER, STATS_FILTER, TCP_PROXY]);
    // An upstream Envoy (no Istio filters) gets none of them.
    let upstream = side_with(yaml, "", &labels, false, Side::Server);
    assert!(
        upstream.http_stats.is_empty() && upstream.tcp_stats.is_empty() && upstream.mx.is_none()
    );
    // All metrics disabled: no filter.
    let off = side_with(
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: off, namespace: istio-system}\nspec:\n  metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: ALL_METRICS, mode: CLIENT_AND_SERVER}, disabled: true}]}]\n",
        "",
        &[],
        true,
        Side::Client,
    );
    assert!(off.http_stats.is_empty());
}

/// A proxy's own `PROXY_CONFIG.tracing` (the pod's `proxy.istio.io/config`) wins over the
/// mesh's `defaultConfig.tracing`, as istiod's `ProxyConfigOrDefault`.
#[test]
fn a_proxys_own_tracing_settings_win_over_the_mesh() {
    use axon_model::push_request::{PushRequest, TriggerReason};
    let req = PushRequest::full_push(TriggerReason::Config, std::time::Instant::now());
    let mesh = std::sync::Arc::new(
        axon_config::mesh::parse("defaultConfig: {tracing: {sampling: 5}}\n")
            .unwrap()
            .mesh,
    );
    let ctx = PushContext::build(None, &configs(""), &req, &mesh);
    let mut p = proxy("sidecar", "10.1.0.1", "a", &[]);
    let sampling = |p: &axon_model::proxy::Proxy| {
        let scope = SidecarScope::compute(&ctx, p);
        let tel = SideTelemetry::of(&ctx, p, &scope, Side::Client);
        tel.tracing.unwrap().random_sampling.unwrap().value
    };
    assert_eq!(sampling(&p), 5.0);
    p.proxy_tracing = axon_config::mesh::proxy_tracing_of(&serde_json::json!({
        "sampling": 42.0,
        "maxPathTagLength": 64.0,
    }));
    assert_eq!(sampling(&p), 42.0);
}
