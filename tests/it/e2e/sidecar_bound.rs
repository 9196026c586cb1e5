//! End-to-end: a sidecar Envoy without capture (`INTERCEPTION_MODE: NONE`, namespace `a`),
//! the mode whose listeners are bound to ports: the application (or a client) calls them
//! directly. These tests run without the namespace mesh because what they check exists only
//! so: listeners a Sidecar binds (`captureMode: NONE`, `bind`), which a captured sidecar has
//! not. Routing under capture is `sidecar.rs`, `sidecar_l4.rs` (TCP, TLS by SNI),
//! `sidecar_routes.rs` (gRPC, competing VirtualServices) and the `mesh` tests.
//!
//! - Bound listeners: TCP egress listeners on 127.0.0.1 (their own ports), an HTTP one on
//!   a loopback address of the test's own, an `ingress` listener (HTTP, `captureMode:
//!   NONE`, bound on 127.0.0.1) reaching the app at its `defaultEndpoint`; a second ingress
//!   port without one is not bound (it is a `virtualInbound` chain, to the original
//!   destination); no `virtualOutbound` / `virtualInbound` at all under NONE. The bound HTTP
//!   listener routes the known `reviews` and blocks an unknown host (REGISTRY_ONLY, istiod's
//!   `block_all` 502). No update is rejected.

use crate::support;
use crate::support::scenario;
use crate::support::sidecar;
use crate::support::tcp_echo;

use std::net::{Ipv4Addr, SocketAddr};

use scenario::*;
use sidecar::{CONVERGE, NODE_A, REVIEWS, SERVICE_PORT, reviews_se_yaml, sidecar_options};
use support::*;
use tcp_echo::{tcp_call, tcp_echo};

const ECHO: &str = "echo.a.svc.cluster.local";

/// Sidecar `default` in `a`: TCP egress listeners on `tcp_a` and `tcp_b` for `echo`, an HTTP
/// one on `http`:9080 (reviews' port) for the namespace, nothing unknown let out; an ingress
/// listener on `ingress.0` to the app on `ingress.1`, and one on `ingress.2` captured (not
/// bound).
fn sidecar_yaml(tcp_a: u16, tcp_b: u16, http: Ipv4Addr, ingress: (u16, u16, u16)) -> String {
    let (inbound, app, captured) = ingress;
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  outboundTrafficPolicy: {{mode: REGISTRY_ONLY}}
  ingress:
  - port: {{number: {inbound}, protocol: HTTP, name: http-in}}
    defaultEndpoint: 127.0.0.1:{app}
    captureMode: NONE
    bind: 127.0.0.1
  - port: {{number: {captured}, protocol: TCP, name: tcp-in}}
    captureMode: IPTABLES
  egress:
  - port: {{number: {tcp_a}, protocol: TCP, name: tcp-a}}
    bind: 127.0.0.1
    captureMode: NONE
    hosts: ["./{ECHO}"]
  - port: {{number: {tcp_b}, protocol: TCP, name: tcp-b}}
    bind: 127.0.0.1
    captureMode: NONE
    hosts: ["./{ECHO}"]
  - port: {{number: {SERVICE_PORT}, protocol: HTTP, name: http}}
    bind: {http}
    captureMode: NONE
    hosts: ["./*"]
"#
    )
}

/// `echo` (TCP 9000, endpoints v1, v2, v3), served on every TCP egress listener (its
/// routes by port are checked under capture, `sidecar_l4.rs`).
fn echo_yaml(ports: [u16; 3], tcp_a: u16, tcp_b: u16) -> String {
    // The egress listeners' ports are echo's too (istiod's egress listener takes only the
    // services that have its port), each endpoint serving them on its one port.
    let yaml = service_entry_yaml(
        "echo",
        "a",
        ECHO,
        Port {
            number: 9000,
            name: "tcp",
            protocol: "TCP",
        },
        &[
            (ports[0], Some("v1")),
            (ports[1], Some("v2")),
            (ports[2], Some("v3")),
        ],
    );
    let mut out = String::new();
    for line in yaml.lines() {
        out.push_str(line);
        out.push('\n');
        if let Some(target) = line.strip_prefix("      tcp: ") {
            out.push_str(&format!("      tcp-a: {target}\n      tcp-b: {target}\n"));
        }
    }
    out.replace(
        "  location: MESH_INTERNAL\n",
        &format!(
            "  - number: {tcp_a}\n    name: tcp-a\n    protocol: TCP\n  - number: {tcp_b}\n    name: tcp-b\n    protocol: TCP\n  location: MESH_INTERNAL\n"
        ),
    )
}

/// Waits until Envoy's listener `name` is active.
fn wait_listener_active(envoy: &Envoy, name: &str) {
    assert!(
        wait_until(CONVERGE, || dynamic_listener(&envoy.config_dump(), name)
            .is_some_and(|l| l.get("active_state").is_some())),
        "no active listener {name}\n{}",
        describe_envoy(envoy)
    );
}

#[test]
fn bound_listeners_without_capture() {
    let echoes = [tcp_echo("echo-1"), tcp_echo("echo-2"), tcp_echo("echo-3")];
    let reviews = Upstream::start("reviews-v1");
    let app = Upstream::start("the-app");
    let (tcp_a, tcp_b) = (free_port(), free_port());
    let http_addr = own_loopback(&[SERVICE_PORT]);
    let ingress = (free_port(), app.port(), free_port());
    let config = ConfigDir::new();
    config.write(
        "services.yaml",
        &documents(&[
            reviews_se_yaml(reviews.port(), reviews.port()),
            echo_yaml(echoes, tcp_a, tcp_b),
        ]),
    );
    config.write(
        "sidecar.yaml",
        &sidecar_yaml(tcp_a, tcp_b, http_addr, ingress),
    );
    let axon = Axon::start(config.path());
    let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
    wait_listener_active(&envoy, &format!("{http_addr}_{SERVICE_PORT}"));
    assert!(
        wait_until(CONVERGE, || tcp_call(tcp_a).starts_with("echo-")
            && tcp_call(tcp_b).starts_with("echo-")),
        "the TCP listeners never answered\n{}",
        describe_envoy(&envoy)
    );

    // REGISTRY_ONLY: the unknown host is blocked, the known one routed.
    let egress = SocketAddr::from((http_addr, SERVICE_PORT));
    wait_for_answer("reviews", CONVERGE, "reviews-v1", &envoy, || {
        http_get(egress, "/", &[("Host", REVIEWS)])
    });
    let (status, _) = http_get(egress, "/", &[("Host", "unknown.example.com")]);
    assert_eq!(status, 502, "{}", describe_envoy(&envoy));

    let dump = envoy.config_dump();
    // The 502 is istiod's `block_all`, not a failed passthrough.
    assert!(
        blocks_all(&dump, &SERVICE_PORT.to_string()),
        "{}",
        route_config(&dump, &SERVICE_PORT.to_string()).unwrap_or_default()
    );
    let names = dynamic_listener_names(&dump);
    for port in [tcp_a, tcp_b, ingress.0] {
        assert!(names.contains(&format!("127.0.0.1_{port}")), "{names:?}");
    }
    assert!(
        names.contains(&format!("{http_addr}_{SERVICE_PORT}")),
        "{names:?}"
    );
    for virtual_listener in ["virtualOutbound", "virtualInbound"] {
        assert!(
            !names.iter().any(|l| l == virtual_listener),
            "INTERCEPTION_MODE NONE must not get {virtual_listener}: {names:?}"
        );
    }

    // The ingress listener reaches the app at its defaultEndpoint; the captured one has no
    // listener of its own.
    wait_for_answer("the ingress listener", CONVERGE, "the-app", &envoy, || {
        http_get(Envoy::local(ingress.0), "/", &[("Host", "anything")])
    });
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(&format!("_{}", ingress.2))),
        "{names:?}"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", ingress.2)).is_err());
    assert_no_rejected_updates(&envoy);
}
