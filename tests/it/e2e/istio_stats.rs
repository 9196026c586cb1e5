//! End-to-end: Istio's metrics on a proxy that runs istio's agent (`ISTIO_VERSION`) on an
//! upstream Envoy, which has neither Istio's `istio.stats` nor its metadata exchange filter.
//! With `defaultProviders.metrics: [prometheus]` (what istio's chart sets) and a Telemetry
//! overriding a metric, istiod would give such a proxy both filters and Envoy would refuse
//! every listener; axon gives it neither (only an Envoy that lists `istio.stats` among its
//! extensions gets them: `lds::telemetry`'s unit tests check that config against istiod's),
//! says so when the proxy connects, and the gateway serves. The gRPC stats filter istiod puts
//! on every connection manager is there.

use crate::support;
use crate::support::scenario;

use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

/// Auto mTLS off: it would have the gateway's clusters wait for the agent's certificates
/// over `sds-grpc`, which this test has no agent to serve (`istio_mutual.rs` has those).
const MESH: &str = "defaultProviders: {metrics: [prometheus]}\nenableAutoMtls: false\n";

const TELEMETRY: &str = "apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - match: {metric: REQUEST_COUNT, mode: CLIENT_AND_SERVER}
      tagOverrides: {response_code: {operation: REMOVE}}
";

#[test]
fn an_upstream_envoy_under_istios_agent_accepts_what_it_is_sent() {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let config = ConfigDir::new();
    let mut gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write(
        "routes.yaml",
        &backend_routes_yaml("v1", false, false, &[("v1", 100)]),
    );
    config.write("telemetry.yaml", TELEMETRY);
    let axon = Axon::start_with_mesh_config(config.path(), MESH);
    let mut options = gateway_options();
    options.extra_metadata = vec![("ISTIO_VERSION".into(), "1.28.0".into())];
    let (envoy, port) =
        start_gateway_listening_with(&axon, &config, gw_port, axon.xds_addr(), &options, CONVERGE);
    gw_port = port;
    wait_gateway_serves_v1(&envoy, gw_port, "the gateway", CONVERGE);
    assert_no_rejected_updates(&envoy);
    let dump = envoy.config_dump().to_string();
    assert!(
        !dump.contains("istio.stats") && !dump.contains("istio.metadata_exchange"),
        "{dump}"
    );
    assert!(dump.contains("envoy.filters.http.grpc_stats"), "{dump}");
    assert!(
        axon.wait_for_log(
            "runs istio's agent on an Envoy without Istio's filters",
            CONVERGE
        ),
        "{}",
        axon.logs()
    );
}
