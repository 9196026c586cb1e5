//! End-to-end: a proxy's `IDLE_TIMEOUT` node metadata is its HTTP connection managers' idle
//! timeout, as istiod's listener builder makes it: a gateway Envoy started with
//! `IDLE_TIMEOUT: 1s` answers a request on a kept-alive client connection, then closes it
//! once it has stayed idle (Envoy's default would keep it an hour).

use crate::support;
use crate::support::scenario;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - route: [{destination: {host: backend.demo.svc.cluster.local, subset: v1, port: {number: 80}}}]
"#;

#[test]
fn an_idle_downstream_connection_is_closed_after_the_node_idle_timeout() {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let gw_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", ROUTES);
    let axon = Axon::start(config.path());
    let mut options = gateway_options();
    options
        .extra_metadata
        .push(("IDLE_TIMEOUT".to_string(), serde_json::json!("1s")));
    let (envoy, port) =
        start_gateway_listening_with(&axon, &config, gw_port, axon.xds_addr(), &options, CONVERGE);
    wait_for_answer("the route", CONVERGE, "backend-v1", &envoy, || {
        http_get(Envoy::local(port), "/", &[])
    });

    // A kept-alive connection: answered, then closed by Envoy once idle for 1 s (and its
    // drain, `drain_timeout`, 5 s by default, has passed).
    let mut conn = TcpStream::connect(Envoy::local(port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    conn.write_all(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let started = Instant::now();
    let closed = loop {
        match conn.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        closed && started.elapsed() < Duration::from_secs(20),
        "the idle connection was not closed within 20 s (after {:?})",
        started.elapsed()
    );
    let idle = format!("http.outbound_0.0.0.0_{port}.downstream_cx_idle_timeout");
    assert!(
        wait_until(CONVERGE, || stat(&envoy, &idle) >= 1),
        "{idle} stayed 0"
    );
}
