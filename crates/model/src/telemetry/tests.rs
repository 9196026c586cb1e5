//! Telemetry resolution, case by case against istiod's (`telemetry_test.go`,
//! `telemetry_logging_test.go`, `telemetry_metric_test.go`).

use super::*;
use axon_config::mesh;

fn telemetry(yaml: &str) -> Telemetry {
    serde_norway::from_str(yaml).expect("a Telemetry spec")
}

fn mesh_of(yaml: &str) -> MeshTelemetry {
    mesh::parse(yaml).expect("a mesh config").mesh.telemetry
}

fn with_prometheus() -> MeshTelemetry {
    mesh_of("defaultProviders: {metrics: [prometheus]}\n")
}

fn metrics(applied: &[&str], mesh: &MeshTelemetry) -> BTreeMap<String, MetricsConfig> {
    let specs: Vec<Telemetry> = applied.iter().map(|y| telemetry(y)).collect();
    let refs: Vec<&Telemetry> = specs.iter().collect();
    resolve(&refs, mesh).metrics
}

const DISABLE_ALL: &str = "metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: ALL_METRICS, mode: CLIENT_AND_SERVER}, disabled: true}]}]";

#[test]
fn merge_metrics_as_istiod() {
    let plain = MeshTelemetry::default();
    // No metrics, no default provider: nothing.
    assert!(metrics(&[], &plain).is_empty());
    // Enabled by a Telemetry, or by the default provider: the provider, no overrides.
    let enabled = metrics(&["metrics: [{providers: [{name: prometheus}]}]"], &plain);
    assert_eq!(enabled["prometheus"], MetricsConfig::default());
    assert_eq!(
        metrics(&[], &with_prometheus())["prometheus"],
        MetricsConfig::default()
    );
    // Disabling all metrics, with or without a mode, on both sides or one.
    let all = &metrics(&[DISABLE_ALL], &with_prometheus())["prometheus"];
    assert!(all.client.disabled && all.server.disabled);
    let no_mode = &metrics(
        &[
            "metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: ALL_METRICS}, disabled: true}]}]",
        ],
        &with_prometheus(),
    )["prometheus"];
    assert!(no_mode.client.disabled && no_mode.server.disabled);
    let server = &metrics(
        &[
            "metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: ALL_METRICS, mode: SERVER}, disabled: true}]}]",
        ],
        &with_prometheus(),
    )["prometheus"];
    assert!(server.server.disabled && !server.client.disabled);
    // istiod's "disable server and custom client metrics".
    let custom = &metrics(
        &[
            "metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: ALL_METRICS, mode: SERVER}, disabled: true}, {match: {metric: REQUEST_COUNT, mode: CLIENT}, tagOverrides: {destination_canonical_service: {operation: REMOVE}}}]}]",
        ],
        &with_prometheus(),
    )["prometheus"];
    assert!(custom.server.disabled);
    assert_eq!(
        custom.client,
        MetricConfig {
            disabled: false,
            overrides: vec![MetricOverride {
                name: "REQUEST_COUNT".into(),
                disabled: false,
                tags: vec![("destination_canonical_service".into(), None)],
            }],
        }
    );
}

#[test]
fn a_namespace_reenables_what_the_root_disabled_and_overrides_deepen() {
    let merged = metrics(
        &[
            DISABLE_ALL,
            "metrics: [{overrides: [{match: {metric: REQUEST_COUNT}, tagOverrides: {request_host: {value: request.host}}}], reportingInterval: 10s}]",
        ],
        &with_prometheus(),
    );
    let p = &merged["prometheus"];
    assert!(!p.client.disabled && !p.server.disabled);
    assert_eq!(p.reporting_interval.as_deref(), Some("10s"));
    for side in [&p.client, &p.server] {
        assert_eq!(side.overrides.len(), 1);
        assert_eq!(
            side.overrides[0].tags,
            [("request_host".to_string(), Some("request.host".to_string()))]
        );
    }
    // ALL_METRICS in an override that is not a disable: every Istio metric, by name.
    let all = metrics(
        &[
            "metrics: [{providers: [{name: prometheus}], overrides: [{tagOverrides: {x: {value: y}}}]}]",
        ],
        &MeshTelemetry::default(),
    );
    assert_eq!(all["prometheus"].client.overrides.len(), 10);
}

fn logs(
    applied: &[&str],
    mesh: &MeshTelemetry,
    side: Side,
) -> Option<Vec<(String, bool, Option<String>)>> {
    let specs: Vec<Telemetry> = applied.iter().map(|y| telemetry(y)).collect();
    let refs: Vec<&Telemetry> = specs.iter().collect();
    let resolved = resolve(&refs, mesh);
    resolved.logs(side).map(|l| {
        l.iter()
            .map(|c| (c.provider.name.clone(), c.disabled, c.filter.clone()))
            .collect()
    })
}

#[test]
fn access_logging_falls_back_to_the_mesh_and_merges_as_istiod() {
    let plain = MeshTelemetry::default();
    // No Telemetry logging, no default provider: MeshConfig's accessLogFile (None).
    assert_eq!(logs(&[], &plain, Side::Client), None);
    // The built-in envoy provider by a mesh Telemetry, filtered.
    let root = "accessLogging: [{providers: [{name: envoy}], filter: {expression: 'response.code >= 500'}}]";
    assert_eq!(
        logs(&[root], &plain, Side::Client),
        Some(vec![(
            "envoy".into(),
            false,
            Some("response.code >= 500".into())
        )])
    );
    // A workload's Telemetry disables it, on the server side only.
    let off = "accessLogging: [{match: {mode: SERVER}, disabled: true}]";
    assert_eq!(
        logs(&[root, off], &plain, Side::Server),
        Some(vec![("envoy".into(), true, None)])
    );
    assert_eq!(
        logs(&[root, off], &plain, Side::Client),
        Some(vec![(
            "envoy".into(),
            false,
            Some("response.code >= 500".into())
        )])
    );
    // A default provider applies without a Telemetry; an unknown provider is skipped.
    let defaults = mesh_of("defaultProviders: {accessLogging: [envoy]}\n");
    assert_eq!(
        logs(&[], &defaults, Side::Server),
        Some(vec![("envoy".into(), false, None)])
    );
    assert_eq!(
        logs(
            &["accessLogging: [{providers: [{name: nowhere}]}]"],
            &plain,
            Side::Client
        ),
        Some(vec![])
    );
    // A lower level that names another provider puts the parent's out of scope.
    let file =
        mesh_of("extensionProviders: [{name: file, envoyFileAccessLog: {path: /tmp/a.log}}]\n");
    assert_eq!(
        logs(
            &[root, "accessLogging: [{providers: [{name: file}]}]"],
            &file,
            Side::Client
        ),
        Some(vec![("file".into(), false, None)])
    );
}

fn tracing_of(applied: &[&str], mesh: &MeshTelemetry) -> Option<TracingConfig> {
    let specs: Vec<Telemetry> = applied.iter().map(|y| telemetry(y)).collect();
    let refs: Vec<&Telemetry> = specs.iter().collect();
    resolve(&refs, mesh).tracing
}

#[test]
fn tracing_merges_shallowly_by_mode_as_istiod() {
    let zipkin = mesh_of(
        "extensionProviders: [{name: zipkin, zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}}]\n",
    );
    assert_eq!(tracing_of(&[], &zipkin), None);
    let config = tracing_of(
        &[
            "tracing: [{providers: [{name: zipkin}], randomSamplingPercentage: 10, customTags: {a: {literal: {value: b}}}}]",
            "tracing: [{match: {mode: SERVER}, disableSpanReporting: true}, {match: {mode: CLIENT}, randomSamplingPercentage: 50}]",
        ],
        &zipkin,
    )
    .unwrap();
    assert_eq!(config.client.provider.as_ref().unwrap().name, "zipkin");
    assert_eq!(config.client.random_sampling_percentage, Some(50.0));
    assert!(!config.client.disabled && config.server.disabled);
    assert_eq!(config.server.random_sampling_percentage, Some(10.0));
    assert_eq!(config.client.custom_tags.as_ref().unwrap().len(), 1);
    assert!(config.client.use_request_id_for_trace_sampling && config.client.enable_istio_tags);
    // Without a provider (none named, no default), tracing is off on both sides.
    let off = tracing_of(&["tracing: [{randomSamplingPercentage: 10}]"], &zipkin).unwrap();
    assert!(off.client.disabled && off.server.disabled);
    // The default provider, when no Telemetry names one.
    let mut defaults = zipkin.clone();
    defaults.default_providers.tracing = vec!["zipkin".into()];
    let by_default = tracing_of(&[], &defaults).unwrap();
    assert!(!by_default.client.disabled);
}

const TELEMETRIES: &str = "apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging: [{providers: [{name: envoy}]}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns, namespace: a}
spec:
  tracing: [{randomSamplingPercentage: 5}]
---
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata: {name: quiet, namespace: a}
spec:
  selector: {matchLabels: {app: quiet}}
  accessLogging: [{disabled: true}]
";

#[test]
fn which_telemetries_apply_and_which_changes_push_to_whom() {
    use crate::fixtures::{context, proxy};
    use crate::push_request::PushRequest;
    use crate::sidecar_scope::{SidecarScope, needs_push};
    let ctx = context(TELEMETRIES);
    let key = |ns: &str, name: &str| ConfigKey::new(ConfigKind::Telemetry, ns, name);
    let quiet = proxy("sidecar", "10.1.0.1", "a", &[("app", "quiet")]);
    let loud = proxy("sidecar", "10.1.0.2", "a", &[("app", "loud")]);
    let other = proxy("sidecar", "10.1.0.3", "b", &[("app", "quiet")]);
    let names = |p: &crate::proxy::Proxy| -> Vec<String> {
        ctx.telemetry
            .keys_for(&p.namespace, &p.labels)
            .iter()
            .map(|k| k.to_string())
            .collect()
    };
    assert_eq!(
        names(&quiet),
        [
            "Telemetry/istio-system/mesh-default",
            "Telemetry/a/ns",
            "Telemetry/a/quiet"
        ]
    );
    assert_eq!(
        names(&loud),
        ["Telemetry/istio-system/mesh-default", "Telemetry/a/ns"]
    );
    assert_eq!(names(&other), ["Telemetry/istio-system/mesh-default"]);
    let scopes: Vec<SidecarScope> = [&quiet, &loud, &other]
        .iter()
        .map(|p| SidecarScope::compute(&ctx, p))
        .collect();
    assert!(scopes[0].telemetry.logs(Side::Client).unwrap()[0].disabled);
    assert!(!scopes[1].telemetry.logs(Side::Client).unwrap()[0].disabled);
    // A change to the workload's Telemetry pushes to it alone; the namespace's to a's; the
    // mesh's to all.
    let pushed = |k: ConfigKey| -> Vec<bool> {
        let request = PushRequest::config_change([k].into(), std::time::Instant::now());
        scopes
            .iter()
            .map(|s| needs_push(Some(s), s, &request))
            .collect()
    };
    assert_eq!(pushed(key("a", "quiet")), [true, false, false]);
    assert_eq!(pushed(key("a", "ns")), [true, true, false]);
    assert_eq!(
        pushed(key("istio-system", "mesh-default")),
        [true, true, true]
    );
}
