//! End-to-end: tracing as istiod configures it (issue 38), through a real ingress gateway
//! Envoy to a Zipkin collector of the test's own (`support/zipkin.rs`): MeshConfig
//! `extensionProviders` names a `zipkin` provider at `zipkin.istio-system.svc.cluster.local:9411`
//! (a ServiceEntry whose endpoint is the collector), and a Telemetry in the root namespace
//! picks it.
//!
//! - Sampling 100%: a request's span reaches the collector with the gateway's service name
//!   (Envoy's `node.cluster`), the Telemetry's custom tags (a literal, a request header and its
//!   default when the header is absent) and istiod's Istio tags (canonical service and
//!   revision, namespace, mesh and cluster ids).
//! - Sampling 0%: a plain request sends no span; a request sampled upstream (`x-b3-sampled: 1`)
//!   is traced anyway, under its own trace id.
//! - A sidecar without capture (`INTERCEPTION_MODE: NONE`, an egress listener bound on a
//!   loopback address of the test's own), importing the collector's namespace: its outbound
//!   span carries its own service cluster (`productpage.a`) and namespace.
//! - No Telemetry: `enableTracing` is on, but without a provider the connection manager has no
//!   tracer and nothing is sent, even for a request sampled upstream; a Telemetry written
//!   afterwards turns the tracer on.
//!
//! Envoy's zipkin tracer sends its spans every 5 s. To show a request sent no span, a request
//! the same Envoy (one worker, one span buffer) traces is sent after it, and its span waited for.

use crate::support;
use crate::support::scenario;
use crate::support::sidecar::{NODE_A, REVIEWS, SERVICE_PORT, sidecar_options};
use crate::support::zipkin::{Zipkin, span_tag};

use std::time::Duration;

use scenario::*;
use serde_json::Value;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
/// How long a span may take to reach the collector (Envoy flushes every 5 s).
const SPAN_WAIT: Duration = Duration::from_secs(30);
const APP_HOST: &str = "app.example.com";
const ZIPKIN: &str = "zipkin.istio-system.svc.cluster.local";
const ZIPKIN_CLUSTER: &str = "outbound|9411||zipkin.istio-system.svc.cluster.local";
const BACKEND_CLUSTER: &str = "outbound|80||backend.demo.svc.cluster.local";
/// The gateway's canonical service (its label), mesh and cluster ids (its node metadata).
const CANONICAL: &str = "ingress-canonical";
const MESH_ID: &str = "mesh-e2e";
const CLUSTER_ID: &str = "cluster-e2e";

const MESH: &str = r#"extensionProviders:
- name: zipkin
  zipkin:
    service: zipkin.istio-system.svc.cluster.local
    port: 9411
"#;

/// Telemetry `mesh-default` in istio-system: the zipkin provider at `sampling` percent, with
/// a literal tag and a request header tag.
fn tracing_telemetry(sampling: u32) -> String {
    format!(
        r#"apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {{name: mesh-default, namespace: istio-system}}
spec:
  tracing:
  - providers: [{{name: zipkin}}]
    randomSamplingPercentage: {sampling}
    customTags:
      my-literal: {{literal: {{value: v1}}}}
      my-header: {{header: {{name: x-user, defaultValue: none}}}}
"#
    )
}

/// One test's world. Field order = drop order: Envoy goes before axon.
struct World {
    envoy: Envoy,
    axon: Axon,
    config: ConfigDir,
    gw_port: u16,
    zipkin: Zipkin,
    _backend: Upstream,
}

impl World {
    /// The collector and its ServiceEntry, the backend behind the gateway, `telemetry` (if
    /// any), axon reading [`MESH`], and the gateway once it answers.
    fn start(telemetry: Option<&str>) -> World {
        let zipkin = Zipkin::start();
        let backend = Upstream::start("backend");
        let config = ConfigDir::new();
        let gw_port = free_port();
        config.write("gateway.yaml", &gateway_yaml(gw_port));
        let routes = virtual_service_yaml(
            "v1",
            "backend",
            "demo",
            &["*"],
            &["istio-system/ingress"],
            &[http_rule("", &[destination(BACKEND, None, 80, None)])],
        );
        let services = [
            service_entry_yaml(
                "backend",
                "demo",
                BACKEND,
                http_port(80),
                &[(backend.port(), None)],
            ),
            service_entry_yaml(
                "zipkin",
                "istio-system",
                ZIPKIN,
                http_port(9411),
                &[(zipkin.port(), None)],
            ),
            routes,
        ];
        config.write("services.yaml", &documents(&services));
        if let Some(t) = telemetry {
            config.write("telemetry.yaml", t);
        }
        let axon = Axon::start_with_mesh_config(config.path(), MESH);
        let mut options = gateway_options();
        options
            .labels
            .push(("service.istio.io/canonical-name".into(), CANONICAL.into()));
        options
            .extra_metadata
            .push(("MESH_ID".into(), serde_json::json!(MESH_ID)));
        options
            .extra_metadata
            .push(("CLUSTER_ID".into(), serde_json::json!(CLUSTER_ID)));
        let (envoy, gw_port) = start_gateway_listening_with(
            &axon,
            &config,
            gw_port,
            axon.xds_addr(),
            &options,
            CONVERGE,
        );
        wait_gateway_route(&envoy, gw_port, "*", &[BACKEND_CLUSTER], CONVERGE);
        let gw = Envoy::local(gw_port);
        wait_for_answer("the gateway", CONVERGE, "backend", &envoy, || {
            http_get(gw, "/warmup", &[("Host", APP_HOST)])
        });
        World {
            envoy,
            axon,
            config,
            gw_port,
            zipkin,
            _backend: backend,
        }
    }

    /// `GET path` through the gateway with `headers`: its status.
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> u16 {
        let mut all = vec![("Host", APP_HOST)];
        all.extend_from_slice(headers);
        http_get(Envoy::local(self.gw_port), path, &all).0
    }

    /// The gateway's connection manager's `tracing` (Null when it has none).
    fn hcm_tracing(&self) -> Value {
        let dump = self.envoy.config_dump();
        let name = format!("0.0.0.0_{}", self.gw_port);
        let Some(l) = dynamic_listener(&dump, &name) else {
            return Value::Null;
        };
        l["active_state"]["listener"]["filter_chains"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["filters"].as_array().cloned().unwrap_or_default())
            .find(|f| f["name"] == "envoy.filters.network.http_connection_manager")
            .map(|f| f["typed_config"]["tracing"].clone())
            .unwrap_or(Value::Null)
    }

    /// Waits for the span of the request to `path` that carries the Telemetry's tags (the
    /// gateway's own span; its upstream span has neither).
    fn wait_span_of(&self, path: &str) -> Value {
        let pred = |s: &Value| {
            span_tag(s, "http.url").ends_with(path) && s["tags"].get("my-literal").is_some()
        };
        self.zipkin
            .wait_for_span(SPAN_WAIT, pred)
            .unwrap_or_else(|| {
                panic!(
                    "no span of {path} with the custom tags within {SPAN_WAIT:?}\n{}\n\
                 the gateway's tracing: {}\n{}",
                    self.zipkin.describe(),
                    self.hcm_tracing(),
                    describe_envoy(&self.envoy)
                )
            })
    }

    /// Waits for a span of trace `trace_id`.
    fn wait_trace(&self, trace_id: &str) -> Value {
        let pred = |s: &Value| s["traceId"] == trace_id;
        self.zipkin.wait_for_span(SPAN_WAIT, pred).unwrap_or_else(|| {
            panic!(
                "no span of trace {trace_id} within {SPAN_WAIT:?}\n{}\nthe gateway's tracing: {}",
                self.zipkin.describe(),
                self.hcm_tracing()
            )
        })
    }
}

/// The headers of a request sampled upstream, in trace `trace_id`.
fn b3_sampled(trace_id: &'static str) -> [(&'static str, &'static str); 3] {
    [
        ("x-b3-traceid", trace_id),
        ("x-b3-spanid", "a2fb4a1d1a96d312"),
        ("x-b3-sampled", "1"),
    ]
}

#[test]
fn every_request_is_traced_at_100_percent_with_the_telemetry_s_tags() {
    let w = World::start(Some(&tracing_telemetry(100)));
    let tracing = w.hcm_tracing();
    assert!(tracing.to_string().contains(ZIPKIN_CLUSTER), "{tracing}");

    assert_eq!(w.get("/traced", &[("x-user", "alice")]), 200);
    assert_eq!(w.get("/anonymous", &[]), 200);
    let span = w.wait_span_of("/traced");
    assert_eq!(
        span["localEndpoint"]["serviceName"], "istio-ingressgateway",
        "the service name is the node's cluster: {span}"
    );
    let want = [
        ("my-literal", "v1"),
        ("my-header", "alice"),
        ("istio.canonical_service", CANONICAL),
        ("istio.canonical_revision", "latest"),
        ("istio.namespace", "istio-system"),
        ("istio.mesh_id", MESH_ID),
        ("istio.cluster_id", CLUSTER_ID),
    ];
    for (tag, value) in want {
        assert_eq!(span_tag(&span, tag), value, "tag {tag}: {span}");
    }
    // Without the header, the header tag takes its default.
    let anonymous = w.wait_span_of("/anonymous");
    assert_eq!(span_tag(&anonymous, "my-header"), "none", "{anonymous}");
    assert_eq!(span_tag(&anonymous, "my-literal"), "v1", "{anonymous}");
    assert!(w.zipkin.rejected().is_empty(), "{}", w.zipkin.describe());
    assert_no_rejected_updates(&w.envoy);
}

#[test]
fn at_0_percent_only_a_request_sampled_upstream_is_traced() {
    const TRACE: &str = "463ac35c9f6413ad48485a3953bb6124";
    let w = World::start(Some(&tracing_telemetry(0)));
    let tracing = w.hcm_tracing();
    assert!(tracing.to_string().contains(ZIPKIN_CLUSTER), "{tracing}");

    assert_eq!(w.get("/plain", &[("x-user", "bob")]), 200);
    assert_eq!(w.get("/sampled", &b3_sampled(TRACE)), 200);
    let span = w.wait_trace(TRACE);
    assert_eq!(
        span["localEndpoint"]["serviceName"], "istio-ingressgateway",
        "{span}"
    );
    // The plain request (and the warm-up ones), handled before it, sent nothing.
    let others = w.zipkin.spans_where(|s| s["traceId"] != TRACE);
    assert!(
        others.is_empty(),
        "untraced requests sent spans:\n{}",
        w.zipkin.describe()
    );
    let sampled = w
        .zipkin
        .spans_where(|s| span_tag(s, "http.url").ends_with("/sampled"));
    assert!(!sampled.is_empty(), "{}", w.zipkin.describe());
    assert_no_rejected_updates(&w.envoy);
}

#[test]
fn without_a_telemetry_no_span_is_sent_until_one_names_the_provider() {
    const BEFORE: &str = "11111111111111111111111111111111";
    const AFTER: &str = "22222222222222222222222222222222";
    let w = World::start(None);
    // enableTracing (on by default) without a provider: sampling, no tracer.
    let tracing = w.hcm_tracing();
    assert!(
        tracing.get("provider").is_none(),
        "a tracer without a Telemetry: {tracing}"
    );
    assert_eq!(w.get("/before", &b3_sampled(BEFORE)), 200);

    let before = w.axon.built_version();
    w.config.write("telemetry.yaml", &tracing_telemetry(100));
    assert!(
        w.axon.wait_built_after(before, CONVERGE).is_some(),
        "axon built nothing for the Telemetry: {}",
        w.axon.push_status()
    );
    assert!(
        wait_until(CONVERGE, || w
            .hcm_tracing()
            .to_string()
            .contains(ZIPKIN_CLUSTER)),
        "the tracer never reached the gateway: {}\n{}",
        w.hcm_tracing(),
        describe_envoy(&w.envoy)
    );
    assert_eq!(w.get("/after", &b3_sampled(AFTER)), 200);
    w.wait_trace(AFTER);
    let early = w.zipkin.spans_where(|s| s["traceId"] == BEFORE);
    assert!(
        early.is_empty(),
        "a span without a provider:\n{}",
        w.zipkin.describe()
    );
    assert_no_rejected_updates(&w.envoy);
}

#[test]
fn a_sidecar_s_outbound_spans_carry_its_service_cluster() {
    let zipkin = Zipkin::start();
    let reviews = Upstream::start("reviews");
    let egress_ip = own_loopback(&[SERVICE_PORT]);
    let config = ConfigDir::new();
    // The sidecar imports its namespace and the collector's (else the collector's cluster is
    // not the proxy's, and Envoy refuses a tracer whose cluster it does not have).
    let sidecar = format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  egress:
  - port: {{number: {SERVICE_PORT}, protocol: HTTP, name: http}}
    bind: {egress_ip}
    captureMode: NONE
    hosts: ["./*", "istio-system/*"]
"#
    );
    let docs = [
        service_entry_yaml(
            "reviews",
            "a",
            REVIEWS,
            http_port(SERVICE_PORT),
            &[(reviews.port(), None)],
        ),
        service_entry_yaml(
            "zipkin",
            "istio-system",
            ZIPKIN,
            http_port(9411),
            &[(zipkin.port(), None)],
        ),
        sidecar,
        tracing_telemetry(100),
    ];
    config.write("config.yaml", &documents(&docs));
    let axon = Axon::start_with_mesh_config(config.path(), MESH);
    let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
    let egress = std::net::SocketAddr::from((egress_ip, SERVICE_PORT));
    wait_for_answer("the sidecar's egress", CONVERGE, "reviews", &envoy, || {
        http_get(egress, "/warmup", &[("Host", REVIEWS)])
    });
    let (status, _) = http_get(
        egress,
        "/sidecar-traced",
        &[("Host", REVIEWS), ("x-user", "carol")],
    );
    assert_eq!(status, 200);
    let pred = |s: &Value| span_tag(s, "http.url").ends_with("/sidecar-traced");
    let span = zipkin.wait_for_span(SPAN_WAIT, pred).unwrap_or_else(|| {
        panic!(
            "no span of the sidecar's request\n{}\n{}",
            zipkin.describe(),
            describe_envoy(&envoy)
        )
    });
    assert_eq!(
        span["localEndpoint"]["serviceName"], "productpage.a",
        "{span}"
    );
    for (tag, value) in [
        ("my-literal", "v1"),
        ("my-header", "carol"),
        ("istio.namespace", "a"),
    ] {
        assert_eq!(span_tag(&span, tag), value, "tag {tag}: {span}");
    }
    assert_no_rejected_updates(&envoy);
}
