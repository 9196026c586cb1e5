//! End-to-end: xDS over TLS (`--xds-tls-addr`). Certificates are made by the test with
//! openssl: a CA, axon's serving certificate, and client certificates with SPIFFE URI SANs.
//! A real gateway Envoy with a certificate for its namespace gets its config and routes
//! traffic; the same certificate on an Envoy claiming another namespace is refused with
//! PERMISSION_DENIED and gets nothing; an Envoy without a certificate is refused with
//! UNAUTHENTICATED; a rotated serving certificate is used for new handshakes without a
//! restart. With `--token-auth kubernetes`, an Envoy without a certificate proves its
//! service account with a bearer token, reviewed by the fake API server's TokenReview: a
//! token it accepts is served, a forged one or one for another audience is not.

use crate::support;
use crate::support::fake_kube;
use crate::support::pki;
use crate::support::scenario;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fake_kube::FakeKube;
use pki::Pki;
use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

fn routes_yaml() -> String {
    backend_routes_yaml("v1", false, false, &[("v1", 100)])
}

fn tls_options(pki: &Pki, node_id: &str, namespace: &str, client: Option<&str>) -> EnvoyOptions {
    let mut options = EnvoyOptions::gateway(node_id, &[("istio", "ingressgateway")], namespace);
    options.xds_tls = Some(XdsTls {
        ca: pki.path("ca.crt"),
        sni: "localhost".to_string(),
        client: client.map(|c| (pki.path(&format!("{c}.crt")), pki.path(&format!("{c}.key")))),
        token: None,
    });
    options
}

/// The serial of the certificate axon presents on `addr`, as openssl shows it.
fn served_serial(addr: std::net::SocketAddr, pki: &Pki) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} -servername localhost -alpn h2 -CAfile {} </dev/null 2>/dev/null | openssl x509 -noout -serial",
            pki.path("ca.crt").display()
        ))
        .output()
        .expect("openssl s_client");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn envoy_over_tls_is_served_as_its_certificate_allows() {
    let pki = Pki::new();
    pki.issue_with_serial("axon", "DNS:localhost,IP:127.0.0.1", 1);
    pki.issue_with_serial(
        "gateway",
        "URI:spiffe://cluster.local/ns/istio-system/sa/istio-ingressgateway",
        2,
    );
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", &routes_yaml());
    let (cert, key, ca) = (
        pki.path("axon.crt"),
        pki.path("axon.key"),
        pki.path("ca.crt"),
    );
    let axon = Axon::start_with_args(
        config.path(),
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--client-ca",
            ca.to_str().unwrap(),
        ],
    );
    let tls_addr = axon
        .xds_tls_addr()
        .expect("the axon listening line names xds_tls_addr");

    // The gateway, with a certificate for istio-system: served, and routes.
    let options = tls_options(&pki, GATEWAY_NODE_ID, "istio-system", Some("gateway"));
    let (envoy, gw_port) = start_envoy_listening(
        &axon,
        gw_port,
        |port| format!("0.0.0.0_{port}"),
        |port| config.write("gateway.yaml", &gateway_yaml(port)),
        || Envoy::start(tls_addr, options.clone()),
        CONVERGE,
    );
    wait_for_answer("over TLS", CONVERGE, "backend-v1", &envoy, || {
        http_get(Envoy::local(gw_port), "/", &[])
    });
    assert_no_rejected_updates(&envoy);

    // The same certificate on an Envoy that claims another namespace: refused, nothing sent.
    let claims = "router~127.0.0.1~ingress-2.secret~secret.svc.cluster.local";
    let impostor = Envoy::start(
        tls_addr,
        tls_options(&pki, claims, "secret", Some("gateway")),
    );
    let denied = |reason: &str| {
        axon.metric(&format!("pilot_xds_auth_failures{{type=\"{reason}\"}}"))
            .unwrap_or(0.0)
    };
    assert!(
        wait_until(CONVERGE, || denied("namespace") >= 1.0),
        "the impostor was not refused: {}",
        axon.metrics()
    );
    assert!(axon.wait_for_log("xDS: permission denied", Duration::from_secs(5)));
    assert!(
        dynamic_listener_names(&impostor.config_dump()).is_empty(),
        "the impostor got listeners"
    );
    assert!(
        !axon.connections().iter().any(|c| c["proxy"] == claims),
        "the impostor is connected: {:?}",
        axon.connections()
    );

    // No certificate at all: UNAUTHENTICATED.
    let anonymous_id = "router~127.0.0.1~ingress-3.istio-system~istio-system.svc.cluster.local";
    let _anonymous = Envoy::start(
        tls_addr,
        tls_options(&pki, anonymous_id, "istio-system", None),
    );
    assert!(
        wait_until(CONVERGE, || denied("unauthenticated") >= 1.0),
        "the anonymous client was not refused: {}",
        axon.metrics()
    );

    // A rotated serving certificate: new handshakes get it, without a restart; the gateway
    // stays connected.
    assert_eq!(served_serial(tls_addr, &pki), "serial=01");
    pki.issue_with_serial("axon", "DNS:localhost,IP:127.0.0.1", 3);
    assert!(
        wait_until(Duration::from_secs(10), || served_serial(tls_addr, &pki)
            == "serial=03"),
        "the rotated certificate is not served: {}",
        served_serial(tls_addr, &pki)
    );
    assert!(axon.wait_for_log("xDS TLS certificate files changed", Duration::from_secs(5)));
    assert_eq!(
        http_get(Envoy::local(gw_port), "/", &[]),
        (200, "backend-v1".to_string())
    );
    assert!(
        axon.connections()
            .iter()
            .any(|c| c["proxy"] == GATEWAY_NODE_ID),
        "the gateway's stream was dropped by the rotation"
    );
}

/// `config/envoy-gateway-bootstrap-tls.yaml`, pointed at `localhost:port` with the test's
/// CA and token file and an ephemeral admin port; nothing else changed.
fn example_bootstrap(port: u16, ca: &Path, token: &Path) -> serde_json::Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/envoy-gateway-bootstrap-tls.yaml");
    let text = std::fs::read_to_string(&path).expect("the TLS bootstrap example");
    let text = text
        .replace("axon.axon-system.svc:15012", &format!("localhost:{port}"))
        .replace("/var/run/secrets/axon/ca.crt", ca.to_str().unwrap())
        .replace(
            "/var/run/secrets/tokens/istio-token",
            token.to_str().unwrap(),
        )
        .replace("port_value: 15000", "port_value: 0");
    let bootstrap: serde_json::Value = serde_norway::from_str(&text).expect("YAML");
    assert_eq!(
        bootstrap["dynamic_resources"]["ads_config"]["grpc_services"][0]["google_grpc"]["target_uri"],
        format!("localhost:{port}"),
        "the example no longer points at axon.axon-system.svc:15012"
    );
    bootstrap
}

fn token_options(node_id: &str, namespace: &str, pki: &Pki, token: &str) -> EnvoyOptions {
    let mut options = tls_options(pki, node_id, namespace, None);
    options.xds_tls.as_mut().unwrap().token = Some(token.to_string());
    options
}

#[test]
fn envoy_with_a_service_account_token_is_served_as_the_token_review_allows() {
    let pki = Pki::new();
    pki.issue_with_serial("axon", "DNS:localhost,IP:127.0.0.1", 1);
    let api = FakeKube::start();
    api.accept_token(
        "gateway-token",
        "istio-system",
        "istio-ingressgateway",
        &["istio-ca"],
    );
    api.accept_token(
        "kube-audience-token",
        "istio-system",
        "istio-ingressgateway",
        &["https://kubernetes.default.svc"],
    );
    let kube_dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.write_kubeconfig(kube_dir.path());
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", &routes_yaml());
    let (cert, key) = (pki.path("axon.crt"), pki.path("axon.key"));
    let axon = Axon::start_with_env(
        Some(config.path()),
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--token-auth",
            "kubernetes",
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    let tls_addr = axon.xds_tls_addr().expect("xds_tls_addr");
    let metric = |name: &str| axon.metric(name).unwrap_or(0.0);

    // The gateway, from the TLS bootstrap example (its token from a file, as a projected
    // service-account token): reviewed once, served, routes.
    let token_file = kube_dir.path().join("istio-token");
    // No newline: Envoy sends the file as it is, and a header value cannot hold one.
    std::fs::write(&token_file, "gateway-token").unwrap();
    let example = example_bootstrap(tls_addr.port(), &pki.path("ca.crt"), &token_file);
    let gateway_id = example["node"]["id"].as_str().unwrap().to_string();
    let mut options =
        EnvoyOptions::gateway(&gateway_id, &[("istio", "ingressgateway")], "istio-system");
    options.bootstrap_override = Some(example);
    let (envoy, gw_port) = start_envoy_listening(
        &axon,
        gw_port,
        |port| format!("0.0.0.0_{port}"),
        |port| config.write("gateway.yaml", &gateway_yaml(port)),
        || Envoy::start(tls_addr, options.clone()),
        CONVERGE,
    );
    wait_for_answer("with a token", CONVERGE, "backend-v1", &envoy, || {
        http_get(Envoy::local(gw_port), "/", &[])
    });
    assert_eq!(metric("axon_token_reviews{type=\"authenticated\"}"), 1.0);

    // A forged token, and a real one for the API server's audience, not istio-ca: refused
    // with UNAUTHENTICATED, no listeners.
    let forged_id = "router~127.0.0.1~ingress-2.istio-system~istio-system.svc.cluster.local";
    let forged = Envoy::start(
        tls_addr,
        token_options(forged_id, "istio-system", &pki, "forged-token"),
    );
    let wrong_aud_id = "router~127.0.0.1~ingress-3.istio-system~istio-system.svc.cluster.local";
    let wrong_aud = Envoy::start(
        tls_addr,
        token_options(wrong_aud_id, "istio-system", &pki, "kube-audience-token"),
    );
    assert!(
        wait_until(CONVERGE, || metric("axon_token_reviews{type=\"rejected\"}")
            >= 2.0
            && metric("pilot_xds_auth_failures{type=\"unauthenticated\"}")
                >= 2.0),
        "the forged tokens were not refused: {}",
        axon.metrics()
    );
    assert!(axon.wait_for_log(
        "the bearer token proves no identity",
        Duration::from_secs(5)
    ));

    // The gateway's own token on an Envoy claiming another namespace: PERMISSION_DENIED.
    let claims = "router~127.0.0.1~ingress-4.secret~secret.svc.cluster.local";
    let impostor = Envoy::start(
        tls_addr,
        token_options(claims, "secret", &pki, "gateway-token"),
    );
    assert!(
        wait_until(CONVERGE, || metric(
            "pilot_xds_auth_failures{type=\"namespace\"}"
        ) >= 1.0),
        "the impostor was not refused: {}",
        axon.metrics()
    );
    assert!(
        metric("axon_token_reviews{type=\"cached\"}") >= 1.0,
        "the gateway's token was reviewed again: {}",
        axon.metrics()
    );
    assert!(
        api.token_reviews() <= 3 + 2,
        "every retry was reviewed again: {} reviews",
        api.token_reviews()
    );
    for refused in [&forged, &wrong_aud, &impostor] {
        assert!(
            dynamic_listener_names(&refused.config_dump()).is_empty(),
            "a refused Envoy got listeners"
        );
    }
    let connected: Vec<_> = axon
        .connections()
        .iter()
        .map(|c| c["proxy"].clone())
        .collect();
    assert_eq!(connected, vec![serde_json::json!(gateway_id)]);
    assert_eq!(
        http_get(Envoy::local(gw_port), "/", &[]),
        (200, "backend-v1".to_string())
    );
}
