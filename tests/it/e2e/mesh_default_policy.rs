//! End-to-end: the mesh config's `defaultTrafficPolicy` (`--mesh-config`), as istiod's
//! `applyDefaultTrafficPolicy` applies it, through a real gateway Envoy to an echo upstream.
//! The mesh's pool (one connection, one pending request) limits a service without a
//! DestinationRule: of a burst behind a slow request, the ones beyond the queue get 503 and
//! Envoy's `upstream_rq_pending_overflow` counts them. A service whose rule sets its own
//! `connectionPool` (no pending limit) replaces the mesh's whole: the same burst is served.
//! A field of it axon does not apply is logged. No update is rejected.

use crate::support;
use crate::support::scenario;

use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

const MESH: &str = "defaultTrafficPolicy:\n  connectionPool:\n    tcp: {maxConnections: 1}\n    http: {http1MaxPendingRequests: 1, http2ProtocolOptions: {}}\n  outlierDetection: {consecutive5xxErrors: 50}\n";

/// ServiceEntry `name` (host `name.example.com`) to the echo on `port`, routed from the
/// gateway for the host `name.test` without retries.
fn service(name: &str, port: u16) -> String {
    let host = format!("{name}.example.com");
    documents(&[
        service_entry_yaml(name, "demo", &host, http_port(80), &[(port, None)]),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: demo}}\nspec:\n  hosts: [{name}.test]\n  gateways: [istio-system/ingress]\n  http:\n  - retries: {{attempts: 0}}\n    route: [{{destination: {{host: {host}, port: {{number: 80}}}}}}]\n"
        ),
    ])
}

fn get(port: u16, host: &str, headers: &[(&str, &str)]) -> HttpResponse {
    let mut all = vec![("host", host)];
    all.extend_from_slice(headers);
    http_request(
        Envoy::local(port),
        "GET",
        "/",
        &all,
        Duration::from_secs(10),
    )
}

/// A slow request for `host`, held until the echo has it, then three more at once: their
/// statuses.
fn burst(port: u16, host: &'static str, echo: &EchoUpstream) -> Vec<u16> {
    pool_burst(echo, host, |headers| get(port, host, headers).status)
}

#[test]
fn the_meshs_default_pool_limits_services_whose_rule_sets_none() {
    let echo = EchoUpstream::start("echo");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write(
        "mesh.yaml",
        &documents(&[
            service("limited", echo.port()),
            service("free", echo.port()),
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: free, namespace: demo}\nspec:\n  host: free.example.com\n  trafficPolicy: {connectionPool: {tcp: {maxConnections: 100}}}\n".to_string(),
        ]),
    );
    let mesh_dir = tempfile::tempdir().unwrap();
    let mesh_path = mesh_dir.path().join("mesh.yaml");
    std::fs::write(&mesh_path, MESH).unwrap();
    let axon = Axon::start_with_args(
        config.path(),
        &["--mesh-config", mesh_path.to_str().unwrap()],
    );
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    for host in ["limited.test", "free.test"] {
        wait_for_answer(host, CONVERGE, "echo", &envoy, || {
            let r = get(gw_port, host, &[]);
            (
                r.status,
                r.header("x-upstream").unwrap_or_default().to_string(),
            )
        });
    }
    let limited = dynamic_cluster(&envoy.config_dump(), "outbound|80||limited.example.com")
        .expect("the cluster without a rule");
    assert_eq!(
        limited.pointer("/circuit_breakers/thresholds/0/max_pending_requests"),
        Some(&serde_json::json!(1)),
        "{limited}"
    );
    assert!(limited.get("outlier_detection").is_some(), "{limited}");

    // The mesh's pool: the burst overflows, Envoy counts it.
    let statuses = burst(gw_port, "limited.test", &echo);
    assert!(statuses.contains(&503), "no overflow: {statuses:?}");
    assert!(statuses.contains(&200), "nothing served: {statuses:?}");
    let overflow = "cluster.outbound|80||limited.example.com.upstream_rq_pending_overflow";
    assert!(stat(&envoy, overflow) >= 1, "{}", describe_envoy(&envoy));

    // The rule's own pool replaces the mesh's: no pending limit, the burst is served.
    let statuses = burst(gw_port, "free.test", &echo);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(
        stat(
            &envoy,
            "cluster.outbound|80||free.example.com.upstream_rq_pending_overflow"
        ),
        0
    );
    assert!(
        axon.logs()
            .contains("defaultTrafficPolicy.connectionPool.http.http2ProtocolOptions"),
        "the field axon does not apply was not logged"
    );
    assert_no_rejected_updates(&envoy);
}
