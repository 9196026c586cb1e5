//! End-to-end: Gateway TLS and L4 servers through a real Envoy, with certificates the test
//! makes ([`Pki`]) read from files (SDS `file-cert:`/`file-root:`):
//!
//! - two HTTPS servers on one port, each with its host and certificate (SIMPLE, MUTUAL): the
//!   right SNI is answered with the right certificate, an SNI no server has is refused;
//!   MUTUAL accepts a client with a certificate and refuses one without;
//! - OPTIONAL_MUTUAL accepts both;
//! - `httpsRedirect` answers 301 to `https://`;
//! - PASSTHROUGH reaches the TLS upstream that the `tls` route picks by SNI (the upstream
//!   sees the client's SNI: the gateway did not terminate);
//! - a TCP server's `tcp` route splits connections between two echo servers by weight;
//!
//! and Envoy rejects no update.

use crate::support;
use crate::support::pki;
use crate::support::scenario;
use crate::support::tcp_echo;
use crate::support::tls_upstream;

use std::process::Command;
use std::time::Duration;

use pki::Pki;
use scenario::*;
use support::*;
use tcp_echo::{tcp_call, tcp_echo};
use tls_upstream::TlsEchoUpstream;

const CONVERGE: Duration = Duration::from_secs(30);

/// `curl` with `args`: whether it succeeded, and its output (the body, then the status).
fn curl(args: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", " %{http_code}"])
        .args(args)
        .output()
        .expect("curl must be installed");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `https://HOST:PORT/` through the gateway, with `HOST` resolved to it (the SNI is HOST).
fn https(pki: &Pki, host: &str, port: u16, extra: &[&str]) -> (bool, String) {
    let resolve = format!("{host}:{port}:127.0.0.1");
    let url = format!("https://{host}:{port}/");
    let ca = pki.file("ca.crt");
    let mut args = vec!["--cacert", &ca, "--resolve", &resolve];
    args.extend_from_slice(extra);
    args.push(&url);
    curl(&args)
}

struct Ports {
    http: u16,
    https: u16,
    optional: u16,
    pass: u16,
    tcp: u16,
}

fn config(pki: &Pki, p: &Ports, web: u16, tls_up: u16, echo1: u16, echo2: u16) -> String {
    let f = |n: &str| pki.file(n);
    let gateway = format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: ingress, namespace: istio-system}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {http}, name: http, protocol: HTTP}}
    hosts: [a.example.com]
    tls: {{httpsRedirect: true}}
  - port: {{number: {https}, name: https-a, protocol: HTTPS}}
    hosts: [a.example.com]
    tls: {{mode: SIMPLE, serverCertificate: {a_crt}, privateKey: {a_key}}}
  - port: {{number: {https}, name: https-b, protocol: HTTPS}}
    hosts: [b.example.com]
    tls: {{mode: MUTUAL, serverCertificate: {b_crt}, privateKey: {b_key}, caCertificates: {ca}, minProtocolVersion: TLSV1_2}}
  - port: {{number: {optional}, name: https-o, protocol: HTTPS}}
    hosts: [o.example.com]
    tls: {{mode: OPTIONAL_MUTUAL, serverCertificate: {o_crt}, privateKey: {o_key}, caCertificates: {ca}}}
  - port: {{number: {pass}, name: tls-pass, protocol: TLS}}
    hosts: ["*.example.org"]
    tls: {{mode: PASSTHROUGH}}
  - port: {{number: {tcp}, name: tcp, protocol: TCP}}
    hosts: ["*"]
"#,
        http = p.http,
        https = p.https,
        optional = p.optional,
        pass = p.pass,
        tcp = p.tcp,
        a_crt = f("a.crt"),
        a_key = f("a.key"),
        b_crt = f("b.crt"),
        b_key = f("b.key"),
        o_crt = f("o.crt"),
        o_key = f("o.key"),
        ca = f("ca.crt"),
    );
    let tcp_port = |name| Port {
        number: 9000,
        name,
        protocol: "TCP",
    };
    let routes = format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: demo}}
spec:
  hosts: [a.example.com, b.example.com, o.example.com]
  gateways: [istio-system/ingress]
  http: [{{route: [{{destination: {{host: web.demo.svc.cluster.local}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: l4, namespace: demo}}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  tcp:
  - match: [{{port: {tcp}}}]
    route:
    - {{destination: {{host: echo.demo.svc.cluster.local, subset: v1}}, weight: 50}}
    - {{destination: {{host: echo.demo.svc.cluster.local, subset: v2}}, weight: 50}}
  tls:
  - match: [{{port: {pass}, sniHosts: [x.example.org]}}]
    route: [{{destination: {{host: secure.demo.svc.cluster.local}}}}]
"#,
        tcp = p.tcp,
        pass = p.pass,
    );
    documents(&[
        gateway,
        service_entry_yaml(
            "web",
            "demo",
            "web.demo.svc.cluster.local",
            http_port(80),
            &[(web, None)],
        ),
        service_entry_yaml(
            "echo",
            "demo",
            "echo.demo.svc.cluster.local",
            tcp_port("tcp"),
            &[(echo1, Some("v1")), (echo2, Some("v2"))],
        ),
        destination_rule_yaml("echo", "demo", "echo.demo.svc.cluster.local"),
        service_entry_yaml(
            "secure",
            "demo",
            "secure.demo.svc.cluster.local",
            Port {
                number: 443,
                name: "tls",
                protocol: "TLS",
            },
            &[(tls_up, None)],
        ),
        routes,
    ])
}

#[test]
fn tls_and_l4_gateway_servers() {
    let pki = Pki::new();
    for (name, san) in [
        ("a", "DNS:a.example.com"),
        ("b", "DNS:b.example.com"),
        ("o", "DNS:o.example.com"),
        ("x", "DNS:x.example.org"),
        ("client", "URI:spiffe://cluster.local/ns/demo/sa/client"),
    ] {
        pki.issue(name, san);
    }
    let web = Upstream::start("web");
    let secure = TlsEchoUpstream::start("secure", &pki.path("x.crt"), &pki.path("x.key"), None);
    let (echo1, echo2) = (tcp_echo("echo-1"), tcp_echo("echo-2"));
    let p = Ports {
        http: free_port(),
        https: free_port(),
        optional: free_port(),
        pass: free_port(),
        tcp: free_port(),
    };
    let dir = ConfigDir::new();
    dir.write(
        "mesh.yaml",
        &config(&pki, &p, web.port(), secure.port(), echo1, echo2),
    );
    let axon = Axon::start(dir.path());
    let envoy = Envoy::start(axon.xds_addr(), gateway_options());
    let all = [p.http, p.https, p.optional, p.pass, p.tcp];
    let active = wait_until(CONVERGE, || {
        let dump = envoy.config_dump();
        all.iter().all(|port| {
            dynamic_listener(&dump, &format!("0.0.0.0_{port}"))
                .is_some_and(|l| l.get("active_state").is_some())
        })
    });
    assert!(active, "listeners not active:\n{}", describe_envoy(&envoy));

    // Two HTTPS servers on one port, by SNI.
    let client = [
        "--cert",
        &pki.file("client.crt"),
        "--key",
        &pki.file("client.key"),
    ]
    .map(str::to_string);
    let client: Vec<&str> = client.iter().map(String::as_str).collect();
    let mut last = (false, String::new());
    let ok = wait_until(CONVERGE, || {
        last = https(&pki, "a.example.com", p.https, &[]);
        last.0 && last.1 == "web 200"
    });
    assert!(
        ok,
        "HTTPS a.example.com: {last:?}\n{}",
        describe_envoy(&envoy)
    );
    let wrong = https(&pki, "c.example.com", p.https, &[]);
    assert!(!wrong.0, "an SNI no server has is refused: {wrong:?}");
    assert_eq!(
        https(&pki, "b.example.com", p.https, &client),
        (true, "web 200".to_string()),
        "MUTUAL with a client certificate"
    );
    let without = https(&pki, "b.example.com", p.https, &[]);
    assert!(
        !without.0,
        "MUTUAL without a client certificate is refused: {without:?}"
    );

    // OPTIONAL_MUTUAL: both.
    assert_eq!(
        https(&pki, "o.example.com", p.optional, &client),
        (true, "web 200".to_string())
    );
    assert_eq!(
        https(&pki, "o.example.com", p.optional, &[]),
        (true, "web 200".to_string())
    );

    // httpsRedirect.
    let (ok, out) = curl(&[
        "-i",
        "-H",
        "Host: a.example.com",
        &format!("http://127.0.0.1:{}/path", p.http),
    ]);
    assert!(ok, "{out}");
    assert!(out.ends_with(" 301"), "{out}");
    assert!(
        out.to_ascii_lowercase()
            .contains("location: https://a.example.com/path"),
        "{out}"
    );

    // PASSTHROUGH: the upstream terminates, and sees the client's SNI.
    assert_eq!(
        https(&pki, "x.example.org", p.pass, &[]),
        (true, "secure 200".to_string())
    );
    assert!(
        secure
            .handshakes()
            .iter()
            .any(|h| h.sni.as_deref() == Some("x.example.org")),
        "{:?}",
        secure.handshakes()
    );
    let unknown = https(&pki, "y.example.org", p.pass, &[]);
    assert!(
        !unknown.0,
        "an SNI no tls route has is refused: {unknown:?}"
    );

    // TCP, weighted 50/50.
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..30 {
        *seen.entry(tcp_call(p.tcp)).or_insert(0) += 1;
    }
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        ["echo-1:hi", "echo-2:hi"],
        "{seen:?}"
    );

    assert_no_rejected_updates(&envoy);
}

/// The gateway's own Service (here a ServiceEntry with an endpoint at the gateway's
/// address, as a Kubernetes Service of the gateway pod becomes) maps the server's port 80 to
/// the port the gateway listens on: Envoy listens there, and routes as for port 80.
#[test]
fn a_server_port_is_listened_on_at_the_port_the_gateways_service_maps_it_to() {
    let web = Upstream::start("web");
    let listen = free_port();
    let dir = ConfigDir::new();
    let gateway = r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [a.example.com]
"#;
    let route = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: demo}
spec:
  hosts: [a.example.com]
  gateways: [istio-system/ingress]
  http: [{route: [{destination: {host: web.demo.svc.cluster.local}}]}]
"#;
    dir.write(
        "mesh.yaml",
        &documents(&[
            gateway.to_string(),
            service_entry_yaml(
                "ingressgateway",
                "istio-system",
                "istio-ingressgateway.istio-system.svc.cluster.local",
                http_port(80),
                &[(listen, None)],
            ),
            service_entry_yaml(
                "web",
                "demo",
                "web.demo.svc.cluster.local",
                http_port(8000),
                &[(web.port(), None)],
            ),
            route.to_string(),
        ]),
    );
    let axon = Axon::start(dir.path());
    let envoy = Envoy::start(axon.xds_addr(), gateway_options());
    let name = format!("0.0.0.0_{listen}");
    let active = wait_until(CONVERGE, || {
        dynamic_listener(&envoy.config_dump(), &name)
            .is_some_and(|l| l.get("active_state").is_some())
    });
    assert!(active, "no listener {name}:\n{}", describe_envoy(&envoy));
    assert!(
        dynamic_route_config_names(&envoy.config_dump()).contains(&format!("http.{listen}")),
        "{}",
        describe_envoy(&envoy)
    );
    let what = format!("GET / Host a.example.com on {listen}");
    wait_for_answer(&what, CONVERGE, "web", &envoy, || {
        http_get(Envoy::local(listen), "/", &[("host", "a.example.com")])
    });
    assert_no_rejected_updates(&envoy);
}
