//! End-to-end: DestinationRule traffic policies as istiod translates them, through a real
//! gateway Envoy to upstreams that record what they received. Each policy is checked with
//! traffic it must act on and traffic it must leave alone: a consistent hash on a header
//! keeps one user on one endpoint of three while other users spread; outlier detection
//! ejects the endpoint that answers 500s after `consecutive5xxErrors` and traffic moves to the
//! healthy one (which is never ejected); `http1MaxPendingRequests: 1` (one connection) turns
//! the request beyond the queue into a 503 that Envoy's `upstream_rq_pending_overflow`
//! counts, while requests one at a time pass; `proxyProtocol` puts a PROXY header ahead of
//! the request, and a service without it sends none to the same upstream. No update is
//! rejected.

use crate::support;
use crate::support::scenario;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const ECHO: &str = "echo.demo.svc.cluster.local";
const CLUSTER: &str = "outbound|80||echo.demo.svc.cluster.local";

/// A VirtualService on the ingress gateway: everything to `echo:80`, without retries (so
/// that every answer is the upstream's, or Envoy's own).
const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - retries: {attempts: 0}
    route: [{destination: {host: echo, port: {number: 80}}}]
"#;

/// The ServiceEntry `echo` with one endpoint per port in `ports`, and a DestinationRule for it
/// with `policy` (YAML under `trafficPolicy:`, indented by four).
fn mesh_yaml(ports: &[u16], policy: &str) -> String {
    let endpoints: Vec<(u16, Option<&str>)> = ports.iter().map(|p| (*p, None)).collect();
    documents(&[
        service_entry_yaml("echo", "demo", ECHO, http_port(80), &endpoints),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: demo}}\nspec:\n  host: {ECHO}\n  trafficPolicy:\n{policy}"
        ),
        ROUTES.to_string(),
    ])
}

/// Starts axon and the gateway Envoy on `mesh`; returns them once `CLUSTER` answers.
fn start(mesh: &str) -> (ConfigDir, Axon, Envoy, u16) {
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("mesh.yaml", mesh);
    let axon = Axon::start(config.path());
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    (config, axon, envoy, gw_port)
}

fn get(gw_port: u16, headers: &[(&str, &str)]) -> HttpResponse {
    http_request(
        Envoy::local(gw_port),
        "GET",
        "/",
        headers,
        Duration::from_secs(10),
    )
}

/// Waits until Envoy's cluster `CLUSTER` has `key` in its config dump (the policy arrived).
fn wait_for_cluster_field(envoy: &Envoy, key: &str) {
    let ok = wait_until(CONVERGE, || {
        dynamic_cluster(&envoy.config_dump(), CLUSTER).is_some_and(|c| c.get(key).is_some())
    });
    assert!(ok, "{CLUSTER} never had {key}:\n{}", describe_envoy(envoy));
}

#[test]
fn a_header_hash_keeps_a_user_on_one_endpoint_of_three() {
    let echoes: Vec<EchoUpstream> = ["a", "b", "c"]
        .iter()
        .map(|n| EchoUpstream::start(n))
        .collect();
    let ports: Vec<u16> = echoes.iter().map(EchoUpstream::port).collect();
    let (_config, _axon, envoy, gw) = start(&mesh_yaml(
        &ports,
        "    loadBalancer: {consistentHash: {httpHeaderName: x-user}}\n",
    ));
    wait_for_cluster_field(&envoy, "ring_hash_lb_config");
    let upstream_of = |user: &str| {
        let r = get(gw, &[("x-user", user)]);
        assert_eq!(r.status, 200, "{r:?}");
        r.header("x-upstream").unwrap_or_default().to_string()
    };
    // Wait until all three endpoints are in (EDS), seen as several users landing apart.
    let ok = wait_until(CONVERGE, || {
        (0..30)
            .map(|i| upstream_of(&format!("probe-{i}")))
            .collect::<BTreeSet<_>>()
            .len()
            == 3
    });
    assert!(ok, "30 users never spread over the three endpoints");
    assert_no_rejected_updates(&envoy);

    // One user, many requests: always the same endpoint.
    let alice = upstream_of("alice");
    for _ in 0..30 {
        assert_eq!(upstream_of("alice"), alice, "alice moved");
    }
    // Other users land elsewhere too: the hash is on the header, not a fixed endpoint.
    let spread: BTreeSet<String> = (0..20).map(|i| upstream_of(&format!("user-{i}"))).collect();
    assert!(spread.len() > 1, "every user on {spread:?}");
    // The route carries the hash policy, the cluster the ring.
    let dump = envoy.config_dump().to_string();
    assert!(
        dump.contains("\"header_name\":\"x-user\""),
        "no hash policy in the route"
    );
}

#[test]
fn an_endpoint_answering_500s_is_ejected_and_traffic_moves_to_the_healthy_one() {
    let healthy = EchoUpstream::start("healthy");
    let broken = StatusUpstream::start("broken", 500);
    let (_config, _axon, envoy, gw) = start(&mesh_yaml(
        &[healthy.port(), broken.port()],
        "    outlierDetection: {consecutive5xxErrors: 2, interval: 1s, baseEjectionTime: 5m, maxEjectionPercent: 100}\n",
    ));
    wait_for_cluster_field(&envoy, "outlier_detection");
    let ejected = format!("cluster.{CLUSTER}.outlier_detection.ejections_enforced_consecutive_5xx");
    // Before the ejection the broken endpoint's 500s reach the client.
    let mut saw_500 = false;
    let ok = wait_until(CONVERGE, || {
        saw_500 |= get(gw, &[]).status == 500;
        stat(&envoy, &ejected) >= 1
    });
    assert!(ok, "never ejected:\n{}", describe_envoy(&envoy));
    assert!(saw_500, "the broken endpoint never answered");
    assert_eq!(
        stat(&envoy, &ejected),
        1,
        "only the broken endpoint is ejected"
    );
    // Now every request goes to the healthy endpoint.
    let hits_before = broken.hits();
    for _ in 0..30 {
        let r = get(gw, &[]);
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("x-upstream"), Some("healthy"));
    }
    assert_eq!(broken.hits(), hits_before);
    assert_no_rejected_updates(&envoy);
}

#[test]
fn a_pending_request_limit_of_one_overflows_with_503() {
    let echo = EchoUpstream::start("echo");
    let (_config, _axon, envoy, gw) = start(&mesh_yaml(
        &[echo.port()],
        "    connectionPool: {tcp: {maxConnections: 1}, http: {http1MaxPendingRequests: 1}}\n",
    ));
    wait_for_cluster_field(&envoy, "circuit_breakers");
    let overflow = format!("cluster.{CLUSTER}.upstream_rq_pending_overflow");
    // One at a time: no overflow.
    wait_for_answer("echo", CONVERGE, "echo", &envoy, || {
        let r = get(gw, &[]);
        (
            r.status,
            r.header("x-upstream").unwrap_or_default().to_string(),
        )
    });
    for _ in 0..5 {
        assert_eq!(get(gw, &[]).status, 200);
    }
    assert_eq!(stat(&envoy, &overflow), 0);

    // A slow request holds the one connection, a second waits in the queue of one, and the
    // ones beyond overflow.
    let slow = thread::spawn(move || get(gw, &[("x-delay-ms", "3000"), ("x-request-key", "slow")]));
    assert!(wait_until(CONVERGE, || !echo
        .requests_with_key("slow")
        .is_empty()));
    let others: Vec<_> = (0..3)
        .map(|i| {
            thread::spawn(move || {
                get(
                    gw,
                    &[("x-delay-ms", "500"), ("x-request-key", &format!("q{i}"))],
                )
            })
        })
        .collect();
    let answers: Vec<HttpResponse> = others.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(slow.join().unwrap().status, 200);
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert!(statuses.contains(&503), "no overflow: {statuses:?}");
    assert!(
        statuses.contains(&200),
        "the queued request was not served: {statuses:?}"
    );
    let overloaded = answers.iter().find(|r| r.status == 503).unwrap();
    assert_eq!(overloaded.header("x-envoy-overloaded"), Some("true"));
    assert!(stat(&envoy, &overflow) >= 1, "{}", describe_envoy(&envoy));
    assert_no_rejected_updates(&envoy);
}

/// An HTTP/1.1 server on 127.0.0.1 that accepts a PROXY protocol (v1) header ahead of the
/// request; answers 200 with `proxy: SOURCE` or `plain`, and records that per connection.
fn proxy_protocol_upstream() -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let record = record.clone();
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let mut header: Option<String> = None;
                while let Ok(n @ 1..) = conn.read(&mut chunk) {
                    buf.extend_from_slice(&chunk[..n]);
                    if header.is_none() {
                        if buf.starts_with(b"PROXY ") {
                            let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
                                continue;
                            };
                            let line = String::from_utf8_lossy(&buf[..end]).into_owned();
                            buf.drain(..end + 2);
                            header = Some(format!("proxy: {line}"));
                        } else {
                            header = Some("plain".to_string());
                        }
                        record.lock().unwrap().push(header.clone().unwrap());
                    }
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let body = header.clone().unwrap_or_default();
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, seen)
}

#[test]
fn the_proxy_protocol_header_precedes_the_request_upstream() {
    let (port, seen) = proxy_protocol_upstream();
    let pp = "pp.demo.svc.cluster.local";
    let mesh = documents(&[
        service_entry_yaml("echo", "demo", ECHO, http_port(80), &[(port, None)]),
        service_entry_yaml("pp", "demo", pp, http_port(80), &[(port, None)]),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: pp, namespace: demo}}\nspec:\n  host: {pp}\n  trafficPolicy:\n    proxyProtocol: {{version: V1}}\n"
        ),
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - match: [{uri: {prefix: /pp}}]
    retries: {attempts: 0}
    route: [{destination: {host: pp, port: {number: 80}}}]
  - retries: {attempts: 0}
    route: [{destination: {host: echo, port: {number: 80}}}]
"#
        .to_string(),
    ]);
    let (_config, _axon, envoy, gw) = start(&mesh);
    let path_get =
        |path: &str| http_request(Envoy::local(gw), "GET", path, &[], Duration::from_secs(10));
    // With the rule: a PROXY v1 header (TCP4, from the gateway's side) ahead of the request.
    wait_for_answer("pp", CONVERGE, "", &envoy, || {
        let r = path_get("/pp");
        let proxied = r.body.starts_with("proxy: PROXY TCP4 127.0.0.1 127.0.0.1 ");
        (r.status, if proxied { String::new() } else { r.body })
    });
    // Without it, the same upstream sees the request alone.
    let plain = path_get("/plain");
    assert_eq!(
        (plain.status, plain.body.as_str()),
        (200, "plain"),
        "{plain:?}"
    );
    assert!(seen.lock().unwrap().iter().any(|h| h == "plain"));
    assert_no_rejected_updates(&envoy);
}
