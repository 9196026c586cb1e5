//! End-to-end: the connection pool of a sidecar's inbound clusters, as istiod's
//! `buildInboundCluster` sets it, through a real sidecar Envoy under iptables capture (pod
//! `app` in namespace `a` of the namespace mesh) whose Sidecar declares three `ingress`
//! ports, each to the pod's app on 127.0.0.1 (chains of `virtualInbound`). A pod without a
//! sidecar sends the requests to the app pod's IP, so that only the server's inbound pool
//! stands between them and the app.
//!
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
use crate::support::mesh::{Mesh, Pod, PodSpec};
use crate::support::scenario;
use crate::support::sidecar;

use std::net::Ipv4Addr;

use scenario::*;
use sidecar::CONVERGE;
use support::*;

const APP: &str = "app.a.svc.cluster.local";
const ONE_AT_A_TIME: &str = "{tcp: {maxConnections: 1}, http: {http1MaxPendingRequests: 1}}";

/// The proxy's own service `app.a` (its endpoint at the pod's `ip` on `rule_port`) and its
/// DestinationRule with one connection and one pending request.
fn app_yaml(ip: Ipv4Addr, rule_port: u16) -> String {
    documents(&[
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: app, namespace: a}}\nspec:\n  hosts: [{APP}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 8000, name: http, protocol: HTTP}}]\n  endpoints: [{{address: {ip}, ports: {{http: {rule_port}}}}}]\n"
        ),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: app, namespace: a}}\nspec:\n  host: {APP}\n  trafficPolicy:\n    connectionPool: {ONE_AT_A_TIME}\n"
        ),
    ])
}

/// Sidecar `default` in `a`: ingress ports `ports` (the rule's, the listener's own pool,
/// none), each to the app on 127.0.0.1 on that port; `extra` at the end of its spec.
fn sidecar_yaml(ports: [u16; 3], extra: &str) -> String {
    let [rule, own, free] = ports;
    let listener = |port: u16, name: &str, pool: &str| {
        format!(
            "  - port: {{number: {port}, protocol: HTTP, name: {name}}}\n    defaultEndpoint: 127.0.0.1:{port}\n{pool}"
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

/// `GET /` from `client` to the app pod's `ip`:`port` (captured there, inbound).
fn get(client: &Pod, ip: Ipv4Addr, port: u16, headers: &[(&str, &str)]) -> HttpResponse {
    client.http_request(&ip.to_string(), port, "/", headers)
}

/// A slow request to `ip`:`port`, held until the app has it, then three more at once: their
/// statuses.
fn burst(client: &Pod, ip: Ipv4Addr, port: u16, echo: &EchoUpstream, round: &str) -> Vec<u16> {
    pool_burst(echo, &format!("{port}-{round}"), |headers| {
        get(client, ip, port, headers).status
    })
}

fn overflow_stat(port: u16) -> String {
    format!("cluster.inbound|{port}||.upstream_rq_pending_overflow")
}

fn wait_answers(client: &Pod, server: &Pod, port: u16) {
    wait_for_answer("the inbound port", CONVERGE, "app", server.envoy(), || {
        let r = get(client, server.ip(), port, &[]);
        (
            r.status,
            r.header("x-upstream").unwrap_or_default().to_string(),
        )
    });
}

#[test]
fn inbound_clusters_take_the_rules_and_the_sidecars_connection_pools() {
    let ports = [8001, 8002, 8003];
    let [rule, own, free] = ports;
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::plain("client", "c", &[("app", "client")]));
    let server = mesh.pod(PodSpec::sidecar("app", "a", &[("app", "app")]));
    let echoes: Vec<EchoUpstream> = ports.iter().map(|p| server.serve_http(*p, "app")).collect();
    let ip = server.ip();
    config.write("app.yaml", &app_yaml(ip, rule));
    config.write("sidecar.yaml", &sidecar_yaml(ports, ""));
    server.wait_listener("virtualInbound");
    for port in ports {
        wait_answers(&client, &server, port);
    }
    let envoy = server.envoy();
    // The answers may have come through the passthrough chains before the Sidecar's ingress
    // listeners arrived: wait for the inbound cluster itself.
    let mut cluster = None;
    let arrived = wait_until(CONVERGE, || {
        cluster = dynamic_cluster(&envoy.config_dump(), &format!("inbound|{rule}||"));
        cluster.is_some()
    });
    assert!(arrived, "no inbound cluster\n{}", server.describe());
    let cluster = cluster.expect("the inbound cluster");
    assert_eq!(
        cluster.pointer("/circuit_breakers/thresholds/0/max_pending_requests"),
        Some(&serde_json::json!(1)),
        "{cluster}"
    );

    // The rule's pool and the listener's own: the burst overflows, Envoy counts it.
    for (port, echo) in [(rule, &echoes[0]), (own, &echoes[1])] {
        let statuses = burst(&client, ip, port, echo, "limited");
        assert!(statuses.contains(&503), "{port}: no overflow: {statuses:?}");
        assert!(
            statuses.contains(&200),
            "{port}: nothing served: {statuses:?}"
        );
        assert!(
            stat(envoy, &overflow_stat(port)) >= 1,
            "{}",
            server.describe()
        );
    }
    // No pool: the same burst is served whole.
    let statuses = burst(&client, ip, free, &echoes[2], "free");
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(stat(envoy, &overflow_stat(free)), 0);

    // The Sidecar's `inboundConnectionPool` limits the port without a pool of its own.
    let before = axon.built_version();
    config.write(
        "sidecar.yaml",
        &sidecar_yaml(
            ports,
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
        server.describe()
    );
    let statuses = burst(&client, ip, free, &echoes[2], "limited");
    assert!(statuses.contains(&503), "no overflow: {statuses:?}");
    assert!(stat(envoy, &overflow_stat(free)) >= 1);
    assert_no_rejected_updates(envoy);
}
