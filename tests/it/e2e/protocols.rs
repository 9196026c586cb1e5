//! End-to-end: protocols as istiod serves them, through a real gateway Envoy. A service port
//! whose protocol is GRPC gets HTTP/2 to its upstream, so a gRPC call through the gateway
//! reaches a real gRPC server (Python `grpcio`, `tests/grpc/echo.py`) and is answered, while a
//! plain HTTP port stays HTTP/1.1; a WebSocket upgrade is let through (101, then the bytes
//! both ways), as istiod's connection managers allow it.

use crate::support;
use crate::support::grpc_echo;
use crate::support::scenario;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use grpc_echo::{EchoServer, client_call};
use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

fn services(grpc_port: u16, echo_port: u16) -> String {
    documents(&[
        service_entry_yaml(
            "grpc-echo",
            "demo",
            "grpc-echo.demo.svc.cluster.local",
            Port {
                number: 7070,
                name: "grpc",
                protocol: "GRPC",
            },
            &[(grpc_port, None)],
        ),
        service_entry_yaml(
            "echo",
            "demo",
            "echo.demo.svc.cluster.local",
            http_port(80),
            &[(echo_port, None)],
        ),
    ])
}

const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: protocols, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - match: [{uri: {prefix: /echo.Echo/}}]
    route: [{destination: {host: grpc-echo, port: {number: 7070}}}]
  - route: [{destination: {host: echo, port: {number: 80}}}]
"#;

/// `echo.py client` against `target` (plaintext HTTP/2); its output.

#[test]
fn grpc_gets_http2_upstream_and_websockets_upgrade() {
    let grpc = EchoServer::start("grpc:");
    let http = EchoUpstream::start("echo");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("services.yaml", &services(grpc.port, http.port()));
    config.write("routes.yaml", ROUTES);
    let axon = Axon::start(config.path());
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let gw = Envoy::local(gw_port);
    wait_for_answer("the HTTP route", CONVERGE, "echo", &envoy, || {
        let r = http_request(gw, "GET", "/", &[], Duration::from_secs(5));
        (
            r.status,
            r.header("x-upstream").unwrap_or_default().to_string(),
        )
    });

    // gRPC through the gateway: HTTP/2 to the GRPC port's upstream, answered.
    let (ok, output) = client_call(&format!("127.0.0.1:{gw_port}"), &[]);
    assert!(
        ok && output.contains("reply: grpc:hello"),
        "{output}\n{}",
        envoy.logs()
    );
    let clusters = envoy.config_dump();
    let text = clusters.to_string();
    assert!(
        text.contains("outbound|7070||grpc-echo.demo.svc.cluster.local")
            && text.contains("http2_protocol_options"),
        "the GRPC cluster has no HTTP/2 options"
    );
    // The HTTP port's upstream speaks HTTP/1.1 only, and is served.
    let r = http_request(gw, "GET", "/plain", &[], Duration::from_secs(5));
    assert_eq!(r.status, 200, "{r:?}");

    // A WebSocket upgrade: 101 from the upstream, then bytes both ways.
    let mut ws = TcpStream::connect(gw).expect("connect to the gateway");
    ws.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    ws.write_all(
        b"GET /socket HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            ws.read(&mut byte).expect("the upgrade's answer"),
            1,
            "closed: {head:?}"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    ws.write_all(b"ping").unwrap();
    let mut echoed = [0u8; 4];
    ws.read_exact(&mut echoed)
        .expect("the echo through the upgraded connection");
    assert_eq!(&echoed, b"ping");
}
