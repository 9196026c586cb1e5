//! End-to-end: the connection pool of a sidecar's inbound clusters, as istiod's
//! `buildInboundCluster` sets it, through a real sidecar Envoy (`INTERCEPTION_MODE: NONE`,
//! namespace `a`) whose Sidecar binds three `ingress` listeners on 127.0.0.1 to one echo app.
//! With one connection and a pending-request limit of one, a slow request holds the
//! connection, one more waits, and the ones beyond overflow with 503 that Envoy's
//! `upstream_rq_pending_overflow` counts:
//!
//! - on the port that the proxy's own service (`app.a`, its endpoint at the proxy's IP)
//!   targets, from that service's DestinationRule;
//! - on the port whose ingress listener sets its own `connectionPool`;
//! - not on the third port, which has neither (istiod's largest circuit breakers): the same
//!   burst is served whole; until the Sidecar's `inboundConnectionPool` limits it too.
//!
//! No update is rejected.

use crate::support;
use crate::support::scenario;
use crate::support::sidecar;

use std::thread;

use scenario::*;
use sidecar::{CONVERGE, NODE_A, sidecar_options};
use support::*;

const APP: &str = "app.a.svc.cluster.local";
const ONE_AT_A_TIME: &str = "{tcp: {maxConnections: 1}, http: {http1MaxPendingRequests: 1}}";

/// The proxy's own service `app.a` (its endpoint at NODE_A's IP on `rule_port`) and its
/// DestinationRule with one connection and one pending request.
fn app_yaml(rule_port: u16) -> String {
    documents(&[
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: app, namespace: a}}\nspec:\n  hosts: [{APP}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 8000, name: http, protocol: HTTP}}]\n  endpoints: [{{address: 127.0.0.2, ports: {{http: {rule_port}}}}}]\n"
        ),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: app, namespace: a}}\nspec:\n  host: {APP}\n  trafficPolicy:\n    connectionPool: {ONE_AT_A_TIME}\n"
        ),
    ])
}

/// Sidecar `default` in `a`: ingress listeners on `ports` (the rule's, the listener's own
/// pool, none) to the app on `app`; `extra` at the end of its spec.
fn sidecar_yaml(ports: [u16; 3], app: u16, extra: &str) -> String {
    let [rule, own, free] = ports;
    let listener = |port: u16, name: &str, pool: &str| {
        format!(
            "  - port: {{number: {port}, protocol: HTTP, name: {name}}}\n    defaultEndpoint: 127.0.0.1:{app}\n    captureMode: NONE\n    bind: 127.0.0.1\n{pool}"
        )
    };
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\nspec:\n  egress: [{{hosts: [\"./*\"]}}]\n  ingress:\n{}{}{}{extra}",
        listener(rule, "http-rule", ""),
        listener(
            own,
            "http-own",
            &format!("    connectionPool: {ONE_AT_A_TIME}\n")
        ),
        listener(free, "http-free", ""),
    )
}

fn get(port: u16, headers: &[(&str, &str)]) -> HttpResponse {
    http_request(
        Envoy::local(port),
        "GET",
        "/",
        headers,
        std::time::Duration::from_secs(10),
    )
}

/// A slow request on `port`, held until the app has it, then three more at once: their
/// statuses.
fn burst(port: u16, echo: &EchoUpstream, round: &str) -> Vec<u16> {
    let key = format!("slow-{port}-{round}");
    let slow = {
        let key = key.clone();
        thread::spawn(move || get(port, &[("x-delay-ms", "3000"), ("x-request-key", &key)]))
    };
    assert!(wait_until(CONVERGE, || !echo
        .requests_with_key(&key)
        .is_empty()));
    let others: Vec<_> = (0..3)
        .map(|i| {
            let key = format!("q{i}-{port}-{round}");
            thread::spawn(move || get(port, &[("x-delay-ms", "500"), ("x-request-key", &key)]))
        })
        .collect();
    let mut statuses: Vec<u16> = others
        .into_iter()
        .map(|t| t.join().unwrap().status)
        .collect();
    statuses.push(slow.join().unwrap().status);
    statuses
}

fn overflow_stat(port: u16) -> String {
    format!("cluster.inbound|{port}||.upstream_rq_pending_overflow")
}

fn wait_answers(envoy: &Envoy, port: u16) {
    wait_for_answer("the ingress listener", CONVERGE, "app", envoy, || {
        let r = get(port, &[]);
        (
            r.status,
            r.header("x-upstream").unwrap_or_default().to_string(),
        )
    });
}

#[test]
fn inbound_clusters_take_the_rules_and_the_sidecars_connection_pools() {
    let echo = EchoUpstream::start("app");
    let ports = [free_port(), free_port(), free_port()];
    let [rule, own, free] = ports;
    let config = ConfigDir::new();
    config.write("app.yaml", &app_yaml(rule));
    config.write("sidecar.yaml", &sidecar_yaml(ports, echo.port(), ""));
    let axon = Axon::start(config.path());
    let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "app", "a"));
    for port in ports {
        wait_answers(&envoy, port);
    }
    let cluster = dynamic_cluster(&envoy.config_dump(), &format!("inbound|{rule}||"))
        .expect("the inbound cluster");
    assert_eq!(
        cluster.pointer("/circuit_breakers/thresholds/0/max_pending_requests"),
        Some(&serde_json::json!(1)),
        "{cluster}"
    );

    // The rule's pool and the listener's own: the burst overflows, Envoy counts it.
    for port in [rule, own] {
        let statuses = burst(port, &echo, "limited");
        assert!(statuses.contains(&503), "{port}: no overflow: {statuses:?}");
        assert!(
            statuses.contains(&200),
            "{port}: nothing served: {statuses:?}"
        );
        assert!(
            stat(&envoy, &overflow_stat(port)) >= 1,
            "{}",
            describe_envoy(&envoy)
        );
    }
    // No pool: the same burst is served whole.
    let statuses = burst(free, &echo, "free");
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(stat(&envoy, &overflow_stat(free)), 0);

    // The Sidecar's `inboundConnectionPool` limits the port without a pool of its own.
    let before = axon.built_version();
    config.write(
        "sidecar.yaml",
        &sidecar_yaml(
            ports,
            echo.port(),
            &format!("  inboundConnectionPool: {ONE_AT_A_TIME}\n"),
        ),
    );
    axon.wait_built_after(before, CONVERGE)
        .expect("a context with the new Sidecar");
    let name = format!("inbound|{free}||");
    assert!(
        wait_until(CONVERGE, || dynamic_cluster(&envoy.config_dump(), &name)
            .and_then(|c| c
                .pointer("/circuit_breakers/thresholds/0/max_pending_requests")
                .cloned())
            == Some(serde_json::json!(1))),
        "{}",
        describe_envoy(&envoy)
    );
    let statuses = burst(free, &echo, "limited");
    assert!(statuses.contains(&503), "no overflow: {statuses:?}");
    assert!(stat(&envoy, &overflow_stat(free)) >= 1);
    assert_no_rejected_updates(&envoy);
}
