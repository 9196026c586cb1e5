//! End-to-end: a sidecar's TCP and TLS listeners and its outbound traffic policy through a
//! real sidecar Envoy under iptables capture (pod `productpage` in namespace `a` of the
//! namespace mesh; the apps in pods of their own, reached at their pod IPs behind
//! ServiceEntry addresses, or by SNI). Sidecar listeners bound without capture are
//! `sidecar_bound.rs`.
//!
//! - A Sidecar declares two TCP egress ports for `echo` (9001, 9002, two of the service's
//!   ports, both to its apps' 9000: istiod's egress listener takes only the services that
//!   have its port): a captured connection to echo's address on either reaches its listener
//!   (`VIP_PORT`). A VirtualService `tcp` route matching the first port splits connections
//!   between `echo`'s v1 and v2 by weight (both seen, never v3); on the second port the route
//!   does not match, and connections go to the service's own cluster (v3 among them).
//! - The Sidecar's `outboundTrafficPolicy: REGISTRY_ONLY`: an HTTP request for an unknown
//!   host on the services' port gets istiod's `block_all` 502; the known `reviews` is still
//!   routed.
//! - The mesh's `outboundTrafficPolicy.mode: REGISTRY_ONLY` (`--mesh-config`) blocks unknown
//!   hosts for a Sidecar that sets no policy; a Sidecar's `ALLOW_ANY` wins over it.
//! - TLS services without addresses (`x.example.org`, `y.example.org` v1 and v2, port 443)
//!   share the wildcard listener `0.0.0.0_443`, whose `tls_inspector` reads the SNI of a
//!   captured connection (`curl` in the client pod): a VirtualService `tls` route by
//!   `sniHosts` takes every `y.example.org` connection to y's v2 (whose app sees the
//!   client's SNI: Envoy does not terminate), never v1; `x.example.org` is left to x's own
//!   chain.

use crate::support;
use crate::support::mesh::{Mesh, Pod, PodSpec};
use crate::support::pki::Pki;
use crate::support::scenario;
use crate::support::sidecar;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use scenario::*;
use sidecar::{
    CAPTURED_LISTENER, CONVERGE, REVIEWS, REVIEWS_VIP, SERVICE_PORT, app_of, reviews_se_at,
    service_entry_at,
};
use support::*;

const ECHO: &str = "echo.a.svc.cluster.local";
const ECHO_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 30);
/// echo's own port, where its apps listen.
const ECHO_PORT: u16 = 9000;
/// The Sidecar's two TCP egress ports for echo: the route matches the first.
const TCP_A: u16 = 9001;
const TCP_B: u16 = 9002;

/// Sidecar `default` in `a`: TCP egress listeners on TCP_A and TCP_B for `echo`, an HTTP one
/// on 9080 (reviews' port) for the namespace, and `policy` as its `outboundTrafficPolicy`
/// (none when empty). No `bind`, no `captureMode`: iptables brings the traffic.
fn sidecar_yaml(tcp: bool, policy: &str) -> String {
    let policy = if policy.is_empty() {
        String::new()
    } else {
        format!("  outboundTrafficPolicy: {{mode: {policy}}}\n")
    };
    let tcp = if tcp {
        format!(
            "  - port: {{number: {TCP_A}, protocol: TCP, name: tcp-a}}\n    hosts: [\"./{ECHO}\"]\n  - port: {{number: {TCP_B}, protocol: TCP, name: tcp-b}}\n    hosts: [\"./{ECHO}\"]\n"
        )
    } else {
        String::new()
    };
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
{policy}  egress:
{tcp}  - port: {{number: {SERVICE_PORT}, protocol: HTTP, name: http}}
    hosts: ["./*"]
"#
    )
}

/// `echo` (TCP 9000, 9001 and 9002 to 9000, at ECHO_VIP, endpoints the pods `ips`, v1 v2
/// v3), its subsets, and a
/// mesh `tcp` route on TCP_A only, 50/50 to v1 and v2.
fn echo_yaml(ips: [Ipv4Addr; 3]) -> String {
    let tcp = Port {
        number: ECHO_PORT,
        name: "tcp",
        protocol: "TCP",
    };
    // The Sidecar's egress ports are echo's too (to the apps' port).
    let se = service_entry_at(
        "echo",
        "a",
        ECHO,
        ECHO_VIP,
        tcp,
        &[
            (ips[0], Some("v1")),
            (ips[1], Some("v2")),
            (ips[2], Some("v3")),
        ],
    )
    .replace(
        "  location: MESH_INTERNAL\n",
        &format!(
            "  - {{number: {TCP_A}, name: tcp-a, protocol: TCP, targetPort: {ECHO_PORT}}}\n  - {{number: {TCP_B}, name: tcp-b, protocol: TCP, targetPort: {ECHO_PORT}}}\n  location: MESH_INTERNAL\n"
        ),
    );
    documents(&[
        se,
        format!(
            r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: echo, namespace: a}}
spec:
  host: {ECHO}
  subsets:
  - {{name: v1, labels: {{version: v1}}}}
  - {{name: v2, labels: {{version: v2}}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo, namespace: a}}
spec:
  hosts: [echo]
  tcp:
  - match: [{{port: {TCP_A}}}]
    route:
    - {{destination: {{host: echo, subset: v1}}, weight: 50}}
    - {{destination: {{host: echo, subset: v2}}, weight: 50}}
"#
        ),
    ])
}

/// The virtual host names of route configuration `name` in Envoy's config dump.
fn virtual_hosts(envoy: &Envoy, name: &str) -> Vec<String> {
    route_virtual_hosts(&envoy.config_dump(), name)
        .iter()
        .filter_map(|vh| vh["name"].as_str().map(str::to_string))
        .collect()
}

/// Who answered `n` captured connections from `client` to echo's address on `port` (the
/// apps' names, from their banners).
fn answers(client: &Pod, port: u16, n: usize) -> BTreeSet<String> {
    (0..n)
        .map(|_| {
            let banner = client.tcp_banner(&ECHO_VIP.to_string(), port);
            banner
                .split_once(' ')
                .map_or(banner.clone(), |(name, _)| name.to_string())
        })
        .collect()
}

/// `GET /` from `client` to reviews' address on its port with `Host: host`: the status and
/// the app that answered.
fn get(client: &Pod, host: &str) -> (u16, String) {
    let (status, body) = client.http_get(
        &REVIEWS_VIP.to_string(),
        SERVICE_PORT,
        "/",
        &[("Host", host)],
    );
    (status, app_of(&body))
}

/// The plain pod `reviews-v1` in `a` with its app on 9080, and the ServiceEntry of reviews
/// (both subsets on it) in the pods' host table.
fn reviews(mesh: &Mesh) -> (Pod, EchoUpstream, String) {
    mesh.service("reviews", "a", REVIEWS_VIP);
    let pod = mesh.pod(PodSpec::plain(
        "reviews-v1",
        "a",
        &[("app", "reviews"), ("version", "v1")],
    ));
    let app = pod.serve_http(SERVICE_PORT, "reviews-v1");
    let se = reviews_se_at(pod.ip(), pod.ip());
    (pod, app, se)
}

#[test]
fn tcp_routes_and_registry_only_through_a_sidecar() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    mesh.service("echo", "a", ECHO_VIP);
    let echo_pods: Vec<Pod> = (1..=3)
        .map(|n| {
            let (name, version) = (format!("echo-{n}"), format!("v{n}"));
            mesh.pod(PodSpec::plain(
                &name,
                "a",
                &[("app", "echo"), ("version", &version)],
            ))
        })
        .collect();
    let _echo_apps: Vec<_> = echo_pods
        .iter()
        .map(|p| p.serve_tcp(ECHO_PORT, p.name()))
        .collect();
    let (_reviews_pod, _reviews_app, reviews_se) = reviews(&mesh);
    config.write(
        "services.yaml",
        &documents(&[
            reviews_se,
            echo_yaml([echo_pods[0].ip(), echo_pods[1].ip(), echo_pods[2].ip()]),
        ]),
    );
    config.write("sidecar.yaml", &sidecar_yaml(true, "REGISTRY_ONLY"));
    let client = mesh.pod(PodSpec::sidecar(
        "productpage",
        "a",
        &[("app", "productpage")],
    ));
    // The TCP egress ports listen on echo's address, the HTTP one on the wildcard.
    for name in [
        format!("{ECHO_VIP}_{TCP_A}"),
        format!("{ECHO_VIP}_{TCP_B}"),
        CAPTURED_LISTENER.to_string(),
    ] {
        client.wait_listener(&name);
    }
    let echo = ECHO_VIP.to_string();
    assert!(
        wait_until(CONVERGE, || client
            .tcp_banner(&echo, TCP_A)
            .starts_with("echo-")
            && client.tcp_banner(&echo, TCP_B).starts_with("echo-")),
        "the TCP listeners never answered\n{}",
        client.describe()
    );

    // The route on TCP_A: both weighted destinations, never v3.
    let seen = answers(&client, TCP_A, 40);
    assert_eq!(
        seen,
        BTreeSet::from(["echo-1".to_string(), "echo-2".to_string()]),
        "{}",
        client.describe()
    );
    // On TCP_B the route does not match: the service's own cluster, v3 among its endpoints.
    let mut seen_b = BTreeSet::new();
    assert!(
        wait_until(CONVERGE, || {
            seen_b.extend(answers(&client, TCP_B, 5));
            seen_b.contains("echo-3")
        }),
        "TCP_B never reached v3: {seen_b:?}"
    );

    // REGISTRY_ONLY: the unknown host is blocked, the known one routed.
    wait_for_answer("reviews", CONVERGE, "reviews-v1", client.envoy(), || {
        get(&client, REVIEWS)
    });
    let (status, _) = get(&client, "unknown.example.com");
    assert_eq!(status, 502, "{}", client.describe());
    // The 502 is istiod's `block_all`, not a failed passthrough.
    let dump = client.envoy().config_dump();
    assert!(
        blocks_all(&dump, &SERVICE_PORT.to_string()),
        "{}",
        route_config(&dump, &SERVICE_PORT.to_string()).unwrap_or_default()
    );
    assert_no_rejected_updates(client.envoy());
}

#[test]
fn the_mesh_outbound_policy_applies_unless_the_sidecar_sets_one() {
    let config = ConfigDir::new();
    let axon = Axon::start_with_mesh_config(
        config.path(),
        "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
    );
    let mesh = Mesh::new(axon.xds_addr());
    let (_reviews_pod, _reviews_app, reviews_se) = reviews(&mesh);
    config.write("services.yaml", &reviews_se);
    config.write("sidecar.yaml", &sidecar_yaml(false, ""));
    let client = mesh.pod(PodSpec::sidecar(
        "productpage",
        "a",
        &[("app", "productpage")],
    ));
    client.wait_listener(CAPTURED_LISTENER);
    let envoy = client.envoy();
    wait_for_answer("reviews", CONVERGE, "reviews-v1", envoy, || {
        get(&client, REVIEWS)
    });
    let (status, _) = get(&client, "unknown.example.com");
    assert_eq!(status, 502, "{}", client.describe());
    assert_eq!(
        virtual_hosts(envoy, &SERVICE_PORT.to_string())
            .last()
            .map(String::as_str),
        Some("block_all")
    );

    // The Sidecar's own ALLOW_ANY wins over the mesh's mode.
    config.write("sidecar.yaml", &sidecar_yaml(false, "ALLOW_ANY"));
    assert!(
        wait_until(CONVERGE, || virtual_hosts(envoy, &SERVICE_PORT.to_string())
            .last()
            .is_some_and(|v| v == "allow_any")),
        "{:?}",
        virtual_hosts(envoy, &SERVICE_PORT.to_string())
    );
    assert_eq!(get(&client, REVIEWS), (200, "reviews-v1".to_string()));
    assert_no_rejected_updates(envoy);
}

/// Where the application's DNS would send `x.example.org` and `y.example.org`: no pod, no
/// service, no route out of the pods' network. Only the sidecar's chains by SNI answer.
const SOMEWHERE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 44);

/// A TLS ServiceEntry `name` in `a` for `host` on port 443, without addresses (so served on
/// the wildcard listener, by SNI), an endpoint per `(pod IP, version)`.
fn tls_entry(name: &str, host: &str, endpoints: &[(Ipv4Addr, &str)]) -> String {
    let port = Port {
        number: 443,
        name: "tls",
        protocol: "TLS",
    };
    let mut yaml = service_entry_head(name, "a", host, port);
    yaml.push_str("  endpoints:\n");
    for (ip, version) in endpoints {
        yaml.push_str(&format!(
            "  - address: {ip}\n    labels: {{version: {version}}}\n"
        ));
    }
    yaml
}

/// `curl https://HOST/` from `client`'s application (captured), to [`SOMEWHERE`], with the
/// test CA; sent again while curl gets no answer (a connection reset or refused before the
/// route is in force), never after one. The answer: the app's name and the status.
fn https(client: &Pod, pki: &Pki, host: &str) -> String {
    let mut last = String::new();
    let answered = wait_until(CONVERGE, || {
        let out = client
            .command("curl")
            .args(["-sS", "--max-time", "5", "-w", " %{http_code}", "--cacert"])
            .arg(pki.path("ca.crt"))
            .arg("--resolve")
            .arg(format!("{host}:443:{SOMEWHERE}"))
            .arg(format!("https://{host}/"))
            .output()
            .expect("curl must be installed");
        last = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        out.status.success()
    });
    assert!(
        answered,
        "https://{host}/ never answered: {last}\n{}",
        client.describe()
    );
    last
}

#[test]
fn tls_routes_by_sni_through_a_sidecar() {
    let pki = Pki::new();
    pki.issue("x", "DNS:x.example.org");
    pki.issue("y", "DNS:y.example.org");
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let pod = |name: &str, app: &str, version: &str| {
        mesh.pod(PodSpec::plain(
            name,
            "a",
            &[("app", app), ("version", version)],
        ))
    };
    let pods = [
        pod("secure-x", "x", "v1"),
        pod("secure-y-v1", "y", "v1"),
        pod("secure-y-v2", "y", "v2"),
    ];
    let serve = |pod: &Pod, cert: &str| {
        let (crt, key) = (
            pki.path(&format!("{cert}.crt")),
            pki.path(&format!("{cert}.key")),
        );
        pod.serve_tls(443, pod.name(), &crt, &key)
    };
    let (x, y1, y2) = (
        serve(&pods[0], "x"),
        serve(&pods[1], "y"),
        serve(&pods[2], "y"),
    );
    config.write(
        "services.yaml",
        &documents(&[
            tls_entry("x", "x.example.org", &[(pods[0].ip(), "v1")]),
            tls_entry(
                "y",
                "y.example.org",
                &[(pods[1].ip(), "v1"), (pods[2].ip(), "v2")],
            ),
            destination_rule_yaml("y", "a", "y.example.org"),
            r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: y, namespace: a}
spec:
  hosts: [y.example.org]
  tls:
  - match: [{sniHosts: [y.example.org]}]
    route: [{destination: {host: y.example.org, subset: v2, port: {number: 443}}}]
"#
            .to_string(),
        ]),
    );
    let client = mesh.pod(PodSpec::sidecar(
        "productpage",
        "a",
        &[("app", "productpage")],
    ));
    client.wait_listener("0.0.0.0_443");

    // The rule catches y.example.org: always v2, never v1 (which the service's own chain
    // would reach too). Envoy does not terminate: v2 sees the client's SNI.
    for _ in 0..10 {
        assert_eq!(
            https(&client, &pki, "y.example.org"),
            "secure-y-v2 200",
            "{}",
            client.describe()
        );
    }
    assert!(y1.handshakes().is_empty(), "{:?}", y1.handshakes());
    assert!(
        y2.handshakes()
            .iter()
            .all(|h| h.sni.as_deref() == Some("y.example.org")),
        "{:?}",
        y2.handshakes()
    );
    // It leaves x.example.org to x's own chain.
    assert_eq!(
        https(&client, &pki, "x.example.org"),
        "secure-x 200",
        "{}",
        client.describe()
    );
    assert!(
        x.handshakes()
            .iter()
            .all(|h| h.sni.as_deref() == Some("x.example.org"))
            && !x.handshakes().is_empty(),
        "{:?}",
        x.handshakes()
    );
    let dump = client.envoy().config_dump();
    let listener = dynamic_listener(&dump, "0.0.0.0_443").expect("the listener");
    assert!(
        listener
            .to_string()
            .contains("envoy.filters.listener.tls_inspector"),
        "{listener}"
    );
    assert_no_rejected_updates(client.envoy());
}
