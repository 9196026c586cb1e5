//! Mutual TLS between sidecars, as istiod's PeerAuthentication and auto mTLS make it, through
//! real Envoys under capture, each beside its agent (certificates over SDS): two sidecars
//! talk mTLS by default and the server's application sees the client's SPIFFE identity in
//! `x-forwarded-client-cert`; STRICT refuses a plaintext client that PERMISSIVE serves; a
//! port-level DISABLE under a STRICT namespace serves plaintext on that port only; a
//! workload's policy overrides its namespace's; auto mTLS calls a pod without the
//! `security.istio.io/tlsMode` label in plaintext; a DestinationRule `tls: DISABLE` wins;
//! certificates renewed under load fail no request.
//!
//! The agents get their certificates from axon itself, as pilot-agent does from istiod:
//! `CreateCertificate` on axon's TLS port (`--ca-dir`, a self-signed root), each proving its
//! pod's service account with a token the fake API server's TokenReview maps to it.

use std::net::Ipv4Addr;
use std::time::Duration;

use super::{APP_PORT, CONVERGE, stat, wait_answer};
use crate::support::agent::AgentOptions;
use crate::support::axon_ca::AxonCa;
use crate::support::mesh::{Mesh, Pod, PodSpec};
use crate::support::scenario::documents;
use crate::support::{ConfigDir, EchoUpstream, wait_until};

/// axon as the mesh's CA, and a mesh whose agents ask it for their certificates.
pub(super) struct AxonMesh {
    pub(super) mesh: Mesh,
    pub(super) ca: AxonCa,
}

pub(super) fn axon_mesh(config: &ConfigDir, options: AgentOptions) -> AxonMesh {
    axon_mesh_with(config, options, None)
}

/// [`axon_mesh`] with a MeshConfig.
pub(super) fn axon_mesh_with(
    config: &ConfigDir,
    options: AgentOptions,
    mesh: Option<&str>,
) -> AxonMesh {
    let ca = AxonCa::start_with_mesh_config(config, mesh);
    AxonMesh {
        mesh: Mesh::with_ca(ca.axon.xds_addr(), ca.mesh_ca(options)),
        ca,
    }
}

/// The injector's label on a pod whose sidecar runs istio's agent.
pub(super) const TLS_MODE: (&str, &str) = ("security.istio.io/tlsMode", "istio");
/// A second port of the server.
const OTHER_PORT: u16 = 9090;

/// A MESH_INTERNAL ServiceEntry `name.ns.svc.cluster.local` at `vip` on `ports` (HTTP), its
/// endpoint `pod` with `labels` and service account `name`.
pub(super) fn service(
    name: &str,
    ns: &str,
    vip: Ipv4Addr,
    ports: &[u16],
    pod: &Pod,
    labels: &str,
) -> String {
    let port_list: Vec<String> = ports
        .iter()
        .map(|p| format!("{{number: {p}, name: http-{p}, protocol: HTTP}}"))
        .collect();
    format!(
        "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: {name}, namespace: {ns}}}
spec:
  hosts: [{name}.{ns}.svc.cluster.local]
  addresses: [{vip}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{}]
  endpoints: [{{address: {}, labels: {{{labels}}}, serviceAccount: {name}}}]
",
        port_list.join(", "),
        pod.ip()
    )
}

fn peer_authentication(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
    )
}

/// A sidecar pod running as service account `sa`.
pub(super) fn sidecar<'a>(
    name: &'a str,
    ns: &'a str,
    labels: &'a [(&'a str, &'a str)],
    sa: &'a str,
) -> PodSpec<'a> {
    PodSpec {
        service_account: sa,
        ..PodSpec::sidecar(name, ns, labels)
    }
}

/// The `x-forwarded-client-cert` of the last request `app` got.
fn xfcc(app: &EchoUpstream) -> Option<String> {
    app.requests()
        .last()
        .and_then(|r| r.headers.get("x-forwarded-client-cert").cloned())
}

/// The status `client` gets for `GET host:port/` (0: no answer).
pub(super) fn status(client: &Pod, host: &str, port: u16) -> u16 {
    client.http_get(host, port, "/", &[]).0
}

/// Waits until `client` gets `want` (a status, or any failure for 0) from `host:port`.
pub(super) fn wait_status(client: &Pod, host: &str, port: u16, want: u16, server: &Pod) {
    let mut last = 0;
    let ok = wait_until(CONVERGE, || {
        last = status(client, host, port);
        if want == 0 { last != 200 } else { last == want }
    });
    assert!(
        ok,
        "{host}:{port}: wanted {} from {}, last {last}\n{}\n{}",
        if want == 0 {
            "a refusal".to_string()
        } else {
            want.to_string()
        },
        client.name(),
        client.describe(),
        server.describe()
    );
}

#[test]
fn two_sidecars_talk_mtls_by_default_and_the_server_sees_the_clients_identity() {
    let config = ConfigDir::new();
    let m = axon_mesh(&config, AgentOptions::default());
    let mesh = &m.mesh;
    let vip = Ipv4Addr::new(10, 96, 7, 1);
    let host = mesh.service("server", "b", vip);
    let server = mesh.pod(sidecar(
        "server",
        "b",
        &[("app", "server"), TLS_MODE],
        "server",
    ));
    let client = mesh.pod(sidecar("client", "a", &[("app", "client")], "client"));
    let app = server.serve_http(APP_PORT, "server");
    config.write(
        "mesh.yaml",
        &service(
            "server",
            "b",
            vip,
            &[APP_PORT],
            &server,
            "app: server, security.istio.io/tlsMode: istio",
        ),
    );
    wait_answer(&client, &host, APP_PORT, &[], "server", &server);
    let identity = xfcc(&app).unwrap_or_default();
    assert!(
        identity.contains("URI=spiffe://cluster.local/ns/a/sa/client"),
        "x-forwarded-client-cert: {identity:?}\n{}",
        server.describe()
    );
    let cluster = format!("cluster.outbound|{APP_PORT}||{host}.ssl.handshake");
    assert!(stat(&client, &cluster) >= 1, "{}", client.describe());
    // Both certificates are axon's CA's.
    for pod in [&server, &client] {
        assert_eq!(
            pod.agent().root_pem().as_deref(),
            Some(m.ca.root_pem.as_str())
        );
    }
}

#[test]
fn strict_refuses_a_plaintext_client_that_permissive_serves() {
    let config = ConfigDir::new();
    let m = axon_mesh(&config, AgentOptions::default());
    let mesh = &m.mesh;
    let vip = Ipv4Addr::new(10, 96, 7, 2);
    let host = mesh.service("server", "b", vip);
    let server = mesh.pod(sidecar(
        "server",
        "b",
        &[("app", "server"), TLS_MODE],
        "server",
    ));
    let client = mesh.pod(sidecar("client", "a", &[("app", "client")], "client"));
    let plain = mesh.pod(PodSpec::plain("legacy", "legacy", &[("app", "legacy")]));
    let _app = server.serve_http(APP_PORT, "server");
    let svc = service(
        "server",
        "b",
        vip,
        &[APP_PORT],
        &server,
        "app: server, security.istio.io/tlsMode: istio",
    );
    config.write("mesh.yaml", &svc);
    let target = server.ip().to_string();
    // PERMISSIVE (no policy): the plaintext client is served, and so is the sidecar.
    wait_status(&plain, &target, APP_PORT, 200, &server);
    wait_answer(&client, &host, APP_PORT, &[], "server", &server);
    // STRICT in b: the plaintext client is refused; the sidecar still gets through (mTLS).
    config.write(
        "mesh.yaml",
        &documents(&[
            svc,
            peer_authentication("b", "default", "{mtls: {mode: STRICT}}"),
        ]),
    );
    wait_status(&plain, &target, APP_PORT, 0, &server);
    for _ in 0..3 {
        assert_eq!(
            status(&plain, &target, APP_PORT),
            0,
            "STRICT served plaintext"
        );
    }
    wait_answer(&client, &host, APP_PORT, &[], "server", &server);
}

#[test]
fn a_port_level_disable_under_strict_and_a_workload_policy_over_its_namespace() {
    let config = ConfigDir::new();
    let m = axon_mesh(&config, AgentOptions::default());
    let mesh = &m.mesh;
    let server = mesh.pod(sidecar(
        "server",
        "b",
        &[("app", "server"), TLS_MODE],
        "server",
    ));
    let other = mesh.pod(sidecar(
        "other",
        "b",
        &[("app", "other"), TLS_MODE],
        "other",
    ));
    let plain = mesh.pod(PodSpec::plain("legacy", "legacy", &[("app", "legacy")]));
    let _apps = (
        server.serve_http(APP_PORT, "server"),
        server.serve_http(OTHER_PORT, "server-9090"),
        other.serve_http(APP_PORT, "other"),
    );
    let labels = |app: &str| format!("app: {app}, security.istio.io/tlsMode: istio");
    let services = vec![
        service(
            "server",
            "b",
            Ipv4Addr::new(10, 96, 7, 3),
            &[APP_PORT, OTHER_PORT],
            &server,
            &labels("server"),
        ),
        service(
            "other",
            "b",
            Ipv4Addr::new(10, 96, 7, 4),
            &[APP_PORT],
            &other,
            &labels("other"),
        ),
    ];
    let mut docs = services.clone();
    docs.push(peer_authentication(
        "b",
        "default",
        "{mtls: {mode: STRICT}}",
    ));
    docs.push(peer_authentication(
        "b",
        "server",
        "{selector: {matchLabels: {app: server}}, portLevelMtls: {9090: {mode: DISABLE}}}",
    ));
    config.write("mesh.yaml", &documents(&docs));
    let (server_ip, other_ip) = (server.ip().to_string(), other.ip().to_string());
    // STRICT in force first, then the port-level DISABLE: plaintext on 9090 only.
    wait_status(&plain, &server_ip, APP_PORT, 0, &server);
    wait_status(&plain, &other_ip, APP_PORT, 0, &other);
    wait_status(&plain, &server_ip, OTHER_PORT, 200, &server);
    assert_eq!(status(&plain, &server_ip, APP_PORT), 0);

    // A workload policy PERMISSIVE for `other` overrides b's STRICT; `server` stays STRICT.
    let mut docs = services;
    docs.push(peer_authentication(
        "b",
        "default",
        "{mtls: {mode: STRICT}}",
    ));
    docs.push(peer_authentication(
        "b",
        "other",
        "{selector: {matchLabels: {app: other}}, mtls: {mode: PERMISSIVE}}",
    ));
    config.write("mesh.yaml", &documents(&docs));
    wait_status(&plain, &other_ip, APP_PORT, 200, &other);
    wait_status(&plain, &server_ip, APP_PORT, 0, &server);
    wait_status(&plain, &server_ip, OTHER_PORT, 0, &server);
}

#[test]
fn auto_mtls_calls_a_pod_without_the_label_in_plaintext_and_a_rules_disable_wins() {
    let config = ConfigDir::new();
    let m = axon_mesh(&config, AgentOptions::default());
    let mesh = &m.mesh;
    let (plain_vip, mesh_vip) = (Ipv4Addr::new(10, 96, 7, 5), Ipv4Addr::new(10, 96, 7, 6));
    let plain_host = mesh.service("plain", "b", plain_vip);
    let mesh_host = mesh.service("server", "b", mesh_vip);
    // A pod without a sidecar and without the label: called in plaintext, it answers.
    let plain = mesh.pod(PodSpec::plain("plain", "b", &[("app", "plain")]));
    let server = mesh.pod(sidecar(
        "server",
        "b",
        &[("app", "server"), TLS_MODE],
        "server",
    ));
    let client = mesh.pod(sidecar("client", "a", &[("app", "client")], "client"));
    let _plain_app = plain.serve_http(APP_PORT, "plain");
    let app = server.serve_http(APP_PORT, "server");
    let services = vec![
        service("plain", "b", plain_vip, &[APP_PORT], &plain, "app: plain"),
        service(
            "server",
            "b",
            mesh_vip,
            &[APP_PORT],
            &server,
            "app: server, security.istio.io/tlsMode: istio",
        ),
    ];
    config.write("mesh.yaml", &documents(&services));
    wait_answer(&client, &plain_host, APP_PORT, &[], "plain", &plain);
    wait_answer(&client, &mesh_host, APP_PORT, &[], "server", &server);
    assert!(xfcc(&app).is_some_and(|x| x.contains("spiffe://cluster.local/ns/a/sa/client")));
    // A DestinationRule `tls: DISABLE` wins over auto mTLS: plaintext, so no client identity.
    let mut docs = services;
    docs.push(format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: server, namespace: b}}\nspec: {{host: {mesh_host}, trafficPolicy: {{tls: {{mode: DISABLE}}}}}}\n"
    ));
    config.write("mesh.yaml", &documents(&docs));
    let before = app.requests().len();
    let plaintext = wait_until(CONVERGE, || {
        let answered = client.http_get(&mesh_host, APP_PORT, "/", &[]).0 == 200;
        answered && app.requests().len() > before && xfcc(&app).is_none()
    });
    assert!(
        plaintext,
        "still mTLS after tls: DISABLE\n{}",
        client.describe()
    );
}

#[test]
fn certificates_renewed_under_load_fail_no_request() {
    let config = ConfigDir::new();
    let options = AgentOptions {
        validity: Duration::from_secs(8),
        ..AgentOptions::default()
    };
    let m = axon_mesh(&config, options);
    let mesh = &m.mesh;
    let vip = Ipv4Addr::new(10, 96, 7, 7);
    let host = mesh.service("server", "b", vip);
    let server = mesh.pod(sidecar(
        "server",
        "b",
        &[("app", "server"), TLS_MODE],
        "server",
    ));
    let client = mesh.pod(sidecar("client", "a", &[("app", "client")], "client"));
    let _app = server.serve_http(APP_PORT, "server");
    config.write(
        "mesh.yaml",
        &documents(&[
            service(
                "server",
                "b",
                vip,
                &[APP_PORT],
                &server,
                "app: server, security.istio.io/tlsMode: istio",
            ),
            peer_authentication("b", "default", "{mtls: {mode: STRICT}}"),
        ]),
    );
    wait_answer(&client, &host, APP_PORT, &[], "server", &server);
    // Requests all the while both sides renew twice.
    let (server_first, client_first) = (
        server.agent().status().issued,
        client.agent().status().issued,
    );
    let mut failures = Vec::new();
    let mut sent = 0;
    let renewed = wait_until(Duration::from_secs(60), || {
        let (code, body) = client.http_get(&host, APP_PORT, "/", &[]);
        sent += 1;
        if code != 200 {
            failures.push((code, body));
        }
        server.agent().status().issued >= server_first + 2
            && client.agent().status().issued >= client_first + 2
    });
    assert!(renewed, "no renewal: {:?}", server.agent().status());
    assert!(
        failures.is_empty(),
        "{} of {sent} requests failed: {failures:?}",
        failures.len()
    );
}

#[test]
fn a_destination_rule_istio_mutual_reaches_a_strict_pod_auto_mtls_does_not_know() {
    let config = ConfigDir::new();
    let m = axon_mesh(&config, AgentOptions::default());
    let mesh = &m.mesh;
    let vip = Ipv4Addr::new(10, 96, 7, 8);
    let host = mesh.service("server", "b", vip);
    // A sidecar without the injector's label: auto mTLS calls it in plaintext.
    let server = mesh.pod(sidecar("server", "b", &[("app", "server")], "server"));
    let client = mesh.pod(sidecar("client", "a", &[("app", "client")], "client"));
    let app = server.serve_http(APP_PORT, "server");
    let services = vec![
        service("server", "b", vip, &[APP_PORT], &server, "app: server"),
        peer_authentication("b", "default", "{mtls: {mode: STRICT}}"),
    ];
    config.write("mesh.yaml", &documents(&services));
    client.wait_listener(&format!("0.0.0.0_{APP_PORT}"));
    server.wait_listener("virtualInbound");
    // Plaintext from the client's sidecar, refused by the STRICT server, every time.
    let strict = wait_until(CONVERGE, || {
        server
            .envoy()
            .config_dump()
            .to_string()
            .contains("\"0.0.0.0_8080\"")
    });
    assert!(strict, "{}", server.describe());
    // (The client's sidecar answers 503: the server reset the plaintext connection.)
    for _ in 0..3 {
        assert_ne!(
            status(&client, &host, APP_PORT),
            200,
            "plaintext reached a STRICT pod"
        );
    }
    // The rule's ISTIO_MUTUAL: the workload certificate, verified against its SAN.
    let mut docs = services;
    docs.push(format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: server, namespace: b}}\nspec: {{host: {host}, trafficPolicy: {{tls: {{mode: ISTIO_MUTUAL}}}}}}\n"
    ));
    config.write("mesh.yaml", &documents(&docs));
    wait_answer(&client, &host, APP_PORT, &[], "server", &server);
    assert!(xfcc(&app).is_some_and(|x| x.contains("spiffe://cluster.local/ns/a/sa/client")));
}
