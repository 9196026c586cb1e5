//! End-to-end: istiod's mesh config (`--mesh-config`), through a real gateway Envoy to a real
//! gRPC server behind a port declared `http`. With `h2UpgradePolicy: UPGRADE` the HTTP port's
//! cluster speaks HTTP/2 to its upstream, so a gRPC call through it is answered; without the
//! mesh config, or with a DestinationRule saying `DO_NOT_UPGRADE`, the upstream gets HTTP/1.1
//! and the call fails. The mesh's `connectTimeout` becomes the clusters' connect timeout, and a
//! field axon does not apply is logged as such.

use crate::support;
use crate::support::grpc_echo;
use crate::support::scenario;

use std::time::Duration;

use grpc_echo::{EchoServer, client_call};
use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const CLUSTER: &str = "outbound|80||grpc-echo.demo.svc.cluster.local";

const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: grpc, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - route: [{destination: {host: grpc-echo, port: {number: 80}}}]
"#;

const DO_NOT_UPGRADE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: grpc-echo, namespace: demo}
spec:
  host: grpc-echo.demo.svc.cluster.local
  trafficPolicy: {connectionPool: {http: {h2UpgradePolicy: DO_NOT_UPGRADE}}, loadBalancer: {simple: RANDOM}}
"#;

/// Serves a gRPC server's port as `http` (HTTP/1.1 unless upgraded) with `extra` configs (a
/// DestinationRule choosing RANDOM, waited for), axon reading `mesh` as its mesh config;
/// calls it through the gateway: whether it was answered, the client's output, the gateway's
/// config dump and axon's log.
fn call_through(mesh: Option<&str>, extra: &str) -> (bool, String, serde_json::Value, String) {
    let grpc = EchoServer::start("grpc:");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    let service = service_entry_yaml(
        "grpc-echo",
        "demo",
        "grpc-echo.demo.svc.cluster.local",
        http_port(80),
        &[(grpc.port, None)],
    );
    config.write("services.yaml", &documents(&[service.as_str(), ROUTES]));
    if !extra.is_empty() {
        config.write("extra.yaml", extra);
    }
    let mesh_dir = tempfile::tempdir().unwrap();
    let mesh_path = mesh_dir.path().join("mesh.yaml");
    let axon = match mesh {
        Some(text) => {
            std::fs::write(&mesh_path, text).unwrap();
            Axon::start_with_args(
                config.path(),
                &["--mesh-config", mesh_path.to_str().unwrap()],
            )
        }
        None => Axon::start(config.path()),
    };
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let ok = wait_until(CONVERGE, || {
        envoy.config_dump().to_string().contains(CLUSTER)
    });
    assert!(ok, "{CLUSTER} never arrived:\n{}", describe_envoy(&envoy));
    if !extra.is_empty() {
        let ok = wait_until(CONVERGE, || {
            envoy
                .config_dump()
                .to_string()
                .contains("\"lb_policy\":\"RANDOM\"")
        });
        assert!(ok, "the DestinationRule never arrived");
    }
    let (ok, output) = client_call(&format!("127.0.0.1:{gw_port}"), &["--deadline", "5"]);
    assert_no_rejected_updates(&envoy);
    (ok, output, envoy.config_dump(), axon.logs())
}

/// The dump of `CLUSTER`.
fn cluster(dump: &serde_json::Value) -> serde_json::Value {
    dynamic_cluster(dump, CLUSTER).expect("the cluster is in the dump")
}

#[test]
fn the_mesh_h2_upgrade_policy_upgrades_http_ports_unless_a_rule_says_not_to() {
    let mesh = "h2UpgradePolicy: UPGRADE\nconnectTimeout: 3s\nenableEnvoyAccessLogService: true\n";
    let (ok, output, dump, logs) = call_through(Some(mesh), "");
    assert!(ok && output.contains("reply: grpc:hello"), "{output}");
    let c = cluster(&dump);
    assert!(c.to_string().contains("http2_protocol_options"), "{c}");
    assert_eq!(c["connect_timeout"], "3s");
    assert!(
        logs.contains("enableEnvoyAccessLogService: accepted but not applied by axon"),
        "{logs}"
    );

    // A DestinationRule's DO_NOT_UPGRADE wins over the mesh: HTTP/1.1, the call fails.
    let (ok, output, dump, _) = call_through(Some(mesh), DO_NOT_UPGRADE);
    assert!(!ok, "answered over HTTP/1.1?\n{output}");
    assert!(
        !cluster(&dump)
            .to_string()
            .contains("http2_protocol_options")
    );
}

#[test]
fn without_a_mesh_config_an_http_port_stays_http1() {
    let (ok, output, dump, _) = call_through(None, "");
    assert!(!ok, "answered over HTTP/1.1?\n{output}");
    let c = cluster(&dump);
    assert!(!c.to_string().contains("http2_protocol_options"), "{c}");
    assert_eq!(c["connect_timeout"], "10s");
}
