//! End-to-end: TLS Secrets beside the config (`kind: Secret`, `apiVersion: v1`, as `kubectl
//! apply` takes it) served over SDS to a real gateway Envoy, for a DestinationRule's
//! `tls.credentialName` (MUTUAL to an upstream that requires a client certificate; the
//! certificates are made by the test with openssl). Rotating the Secret's file gives Envoy the
//! new certificate with no restart and no new ADS connection, and pushes SDS only: Envoy's CDS
//! and LDS update counts stay where they were; a gateway of another namespace, which asks for
//! the Secret by the same name, gets nothing (a warning, the counter) and is not pushed on
//! the rotation. A Secret whose key is not its certificate's is
//! refused with its path and reason, and the previous one stays served. `axon validate`
//! refuses a mismatched key and an expired certificate.

use crate::support;
use crate::support::pki;
use crate::support::scenario;
use crate::support::tls_upstream;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pki::Pki;
use scenario::*;
use support::*;
use tls_upstream::*;

const CONVERGE: Duration = Duration::from_secs(30);

/// A `kubernetes.io/tls` Secret `name` of istio-system (the gateway's namespace) with the
/// certificate `cert`, its key and the CA, from the files of `pki`.
fn secret_yaml(pki: &Pki, name: &str, cert: &str, key: &str) -> String {
    let read = |f: &str| std::fs::read_to_string(pki.path(f)).unwrap();
    let data = serde_json::json!({
        "tls.crt": read(cert),
        "tls.key": read(key),
        "ca.crt": read("ca.crt"),
    });
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: istio-system}}\ntype: kubernetes.io/tls\nstringData: {data}\n"
    )
}

/// ServiceEntry `mtls.example.com:443` to the upstream on `port`, a DestinationRule with
/// MUTUAL from `credentialName: client-cred`, and a gateway route for `mtls.test`.
fn backend(port: u16) -> String {
    let host = "mtls.example.com";
    documents(&[
        service_entry_yaml("mtls", "demo", host, http_port(443), &[(port, None)]),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: mtls, namespace: demo}}\nspec:\n  host: {host}\n  trafficPolicy:\n    tls: {{mode: MUTUAL, credentialName: client-cred, sni: server.example.com, subjectAltNames: [server.example.com]}}\n"
        ),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: mtls, namespace: demo}}\nspec:\n  hosts: [mtls.test]\n  gateways: [istio-system/ingress]\n  http:\n  - retries: {{attempts: 0}}\n    route: [{{destination: {{host: {host}, port: {{number: 443}}}}}}]\n"
        ),
    ])
}

/// The serial numbers of the certificates Envoy holds (`/certs`), lower-case hex.
fn envoy_serials(envoy: &Envoy) -> Vec<String> {
    let certs: serde_json::Value =
        serde_json::from_str(&envoy.admin_get("/certs")).unwrap_or_default();
    let mut serials = Vec::new();
    for entry in certs["certificates"].as_array().into_iter().flatten() {
        for cert in entry["cert_chain"].as_array().into_iter().flatten() {
            if let Some(s) = cert["serial_number"].as_str() {
                serials.push(s.trim_start_matches('0').to_ascii_lowercase());
            }
        }
    }
    serials
}

/// The node id of the gateway in namespace `edge`.
const EDGE_NODE_ID: &str = "router~10.0.0.31~edge-1.edge~edge.svc.cluster.local";

/// Envoy's CDS and LDS update counts and its ADS connections.
fn updates_of(envoy: &Envoy) -> (u64, u64, u64) {
    (
        stat(envoy, "cluster_manager.cds.update_success"),
        stat(envoy, "listener_manager.lds.update_success"),
        stat(envoy, "cluster.xds-grpc.upstream_cx_total"),
    )
}

#[test]
fn credential_name_from_a_secret_file_and_its_rotation_over_sds_only() {
    let pki = Pki::new();
    pki.issue("server", "DNS:server.example.com");
    pki.issue_with_serial(
        "client",
        "URI:spiffe://cluster.local/ns/istio-system/sa/gw",
        1001,
    );
    let mtls = TlsEchoUpstream::start(
        "mtls",
        &pki.path("server.crt"),
        &pki.path("server.key"),
        Some(&pki.path("ca.crt")),
    );
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("mesh.yaml", &backend(mtls.port()));
    config.write(
        "client-cred.yaml",
        &secret_yaml(&pki, "client-cred", "client.crt", "client.key"),
    );
    // A second gateway, in namespace `edge`: it has the cluster too (the rule is exported
    // everywhere), so it asks for `kubernetes://client-cred`, which is istio-system's only.
    let edge_port = free_port();
    config.write(
        "edge.yaml",
        &gateway_yaml(edge_port)
            .replace("name: ingress\n", "name: edge\n")
            .replace("namespace: istio-system", "namespace: edge")
            .replace("istio: ingressgateway", "istio: edge"),
    );
    let axon = Axon::start(config.path());
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let edge = Envoy::start(
        axon.xds_addr(),
        EnvoyOptions::gateway(EDGE_NODE_ID, &[("istio", "edge")], "edge"),
    );
    let get = || {
        let r = http_request(
            Envoy::local(gw_port),
            "GET",
            "/",
            &[("host", "mtls.test")],
            Duration::from_secs(10),
        );
        (r.status, r.body)
    };
    wait_for_answer("mutual from a Secret", CONVERGE, "mtls", &envoy, get);
    assert!(
        mtls.handshakes().iter().all(|h| h.client_certificate),
        "{:?}",
        mtls.handshakes()
    );
    assert!(
        envoy_serials(&envoy).contains(&format!("{:x}", 1001)),
        "{:?}",
        envoy_serials(&envoy)
    );
    // Nothing of the Secret's content in axon's logs or its debug pages.
    let key_line = std::fs::read_to_string(pki.path("client.key"))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    let configz = axon.debug_get("/debug/configz").body;
    assert!(
        configz.contains("Secret") && configz.contains("CN=client"),
        "{configz}"
    );
    let dump = axon
        .debug_get(&format!("/debug/config_dump?proxyID={GATEWAY_NODE_ID}"))
        .body;
    // Envoy's JSON, the private key redacted as Envoy redacts it: "[redacted]", base64; the
    // secret, by name, is the one the Envoy's own dump shows, field for field.
    assert!(dump.contains("W3JlZGFjdGVkXQ=="), "{dump}");
    let secrets =
        |dump: &serde_json::Value| -> std::collections::BTreeMap<String, serde_json::Value> {
            dump_section(dump, "SecretsConfigDump")
                .and_then(|s| s.get("dynamic_active_secrets"))
                .and_then(|l| l.as_array())
                .into_iter()
                .flatten()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or_default().to_string(),
                        s["secret"].clone(),
                    )
                })
                .collect()
        };
    let ours = secrets(&serde_json::from_str(&dump).expect("JSON"));
    let theirs = secrets(&envoy.config_dump());
    assert!(!theirs.is_empty(), "the Envoy has its secret");
    assert_eq!(
        ours, theirs,
        "axon's dump of the secrets is the Envoy's own"
    );
    for shown in [axon.logs(), configz, dump] {
        assert!(!shown.contains(&key_line), "secret bytes shown");
        assert!(!shown.contains("BEGIN"), "PEM shown");
    }

    // The edge gateway gets nothing for the Secret of another namespace, and axon says so.
    let warned = wait_until(CONVERGE, || {
        let logs = axon.logs();
        logs.contains("secret not found or invalid, not served")
            && logs.contains("edge-1.edge")
            && logs.contains("kubernetes://client-cred")
    });
    assert!(warned, "{}", axon.logs());
    assert!(
        axon.metric("pilot_sds_certificate_errors_total")
            .unwrap_or(0.0)
            >= 1.0,
        "{}",
        axon.metrics()
    );
    assert!(
        !envoy_serials(&edge).contains(&format!("{:x}", 1001)),
        "{:?}",
        envoy_serials(&edge)
    );
    let edge_sds = |edge: &Envoy| stat(edge, "sds.kubernetes_client-cred.update_attempt");
    let edge_before = (edge_sds(&edge), updates_of(&edge));

    // Rotation: a new client certificate in the same file. Envoy gets it over SDS; CDS and
    // LDS are not pushed again, and the ADS connection stays.
    let before = updates_of(&envoy);
    let sds_before = stat(&envoy, "sds.kubernetes_client-cred.update_success");
    pki.issue_with_serial(
        "client",
        "URI:spiffe://cluster.local/ns/istio-system/sa/gw",
        1002,
    );
    config.write(
        "client-cred.yaml",
        &secret_yaml(&pki, "client-cred", "client.crt", "client.key"),
    );
    let rotated = wait_until(CONVERGE, || {
        envoy_serials(&envoy).contains(&format!("{:x}", 1002))
    });
    assert!(
        rotated,
        "{:?}\n{}",
        envoy_serials(&envoy),
        describe_envoy(&envoy)
    );
    assert!(
        stat(&envoy, "sds.kubernetes_client-cred.update_success") > sds_before,
        "{:?}",
        envoy
            .stats()
            .iter()
            .filter(|(k, _)| k.contains("sds"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        updates_of(&envoy),
        before,
        "(cds, lds, ADS connections) moved"
    );
    // Only the proxies that watch the Secret are pushed: not the edge gateway.
    assert_eq!((edge_sds(&edge), updates_of(&edge)), edge_before);
    wait_for_answer("mutual after the rotation", CONVERGE, "mtls", &envoy, get);

    // A key of another certificate: refused with the path and reason, the previous kept.
    pki.issue_with_serial("other", "DNS:other.example.com", 1003);
    config.write(
        "client-cred.yaml",
        &secret_yaml(&pki, "client-cred", "client.crt", "other.key"),
    );
    let path = config.file("client-cred.yaml").display().to_string();
    let refused = wait_until(CONVERGE, || {
        let logs = axon.logs();
        logs.contains(&path)
            && logs.contains("tls.key is not the private key of the certificate in tls.crt")
    });
    assert!(refused, "{}", axon.logs());
    assert!(
        axon.metric("pilot_sds_certificate_errors_total")
            .unwrap_or(0.0)
            >= 1.0,
        "{}",
        axon.metrics()
    );
    assert!(envoy_serials(&envoy).contains(&format!("{:x}", 1002)));
    wait_for_answer("the previous Secret kept", CONVERGE, "mtls", &envoy, get);
    assert_no_rejected_updates(&envoy);
}

fn validate(dir: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_axon"))
        .args(["validate", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn validate_refuses_a_mismatched_key_and_an_expired_certificate() {
    let pki = Pki::new();
    pki.issue("good", "DNS:good.example.com");
    pki.issue("other", "DNS:other.example.com");
    // Expired: openssl's `-days -1` ends the validity before it starts.
    let dir = pki.path("");
    let ok = Command::new("openssl")
        .args([
            "x509",
            "-req",
            "-in",
            "good.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "7",
            "-days",
            "-1",
            "-out",
            "expired.crt",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let config = ConfigDir::new();
    config.write(
        "good.yaml",
        &secret_yaml(&pki, "good", "good.crt", "good.key"),
    );
    let (code, report) = validate(config.path());
    assert_eq!(code, Some(0), "{report}");
    config.write(
        "mismatch.yaml",
        &secret_yaml(&pki, "mismatch", "good.crt", "other.key"),
    );
    config.write(
        "expired.yaml",
        &secret_yaml(&pki, "expired", "expired.crt", "good.key"),
    );
    let (code, report) = validate(config.path());
    assert_eq!(code, Some(1), "{report}");
    let mismatch = config.file("mismatch.yaml").display().to_string();
    let expired = config.file("expired.yaml").display().to_string();
    assert!(
        report.contains(&format!(
            "{mismatch}: document 1 (line 1): Secret: tls.key is not the private key of the certificate in tls.crt"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "{expired}: document 1 (line 1): Secret: tls.crt: certificate"
        )) && report.contains("is expired or not yet valid"),
        "{report}"
    );
    assert!(!report.contains("BEGIN"), "{report}");
}

/// With `--plaintext-secrets false`, as istiod: the gateway whose identity the TLS port
/// verified gets the Secret; one on the plaintext port, claiming the same namespace, gets
/// nothing, and axon says why.
#[test]
fn without_plaintext_secrets_only_a_verified_gateway_gets_the_secret() {
    let pki = Pki::new();
    pki.issue("server", "DNS:server.example.com");
    pki.issue_with_serial(
        "client",
        "URI:spiffe://cluster.local/ns/istio-system/sa/gw",
        1101,
    );
    pki.issue("axon", "DNS:localhost,IP:127.0.0.1");
    pki.issue(
        "gateway",
        "URI:spiffe://cluster.local/ns/istio-system/sa/istio-ingressgateway",
    );
    let mtls = TlsEchoUpstream::start(
        "mtls",
        &pki.path("server.crt"),
        &pki.path("server.key"),
        Some(&pki.path("ca.crt")),
    );
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("mesh.yaml", &backend(mtls.port()));
    config.write(
        "client-cred.yaml",
        &secret_yaml(&pki, "client-cred", "client.crt", "client.key"),
    );
    let (cert, key, ca) = (
        pki.file("axon.crt"),
        pki.file("axon.key"),
        pki.file("ca.crt"),
    );
    let axon = Axon::start_with_args(
        config.path(),
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--client-ca",
            &ca,
            "--plaintext-secrets",
            "false",
        ],
    );
    let tls_addr = axon.xds_tls_addr().expect("xds_tls_addr");
    let mut options = gateway_options();
    options.xds_tls = Some(XdsTls {
        ca: pki.path("ca.crt"),
        sni: "localhost".to_string(),
        client: Some((pki.path("gateway.crt"), pki.path("gateway.key"))),
        token: None,
    });
    let (envoy, gw_port) =
        start_gateway_listening_with(&axon, &config, gw_port, tls_addr, &options, CONVERGE);
    wait_for_answer("mutual, verified", CONVERGE, "mtls", &envoy, || {
        let r = http_request(
            Envoy::local(gw_port),
            "GET",
            "/",
            &[("host", "mtls.test")],
            Duration::from_secs(10),
        );
        (r.status, r.body)
    });
    // The plaintext one (no listener of its own: another selector) has the cluster and asks.
    let plain_id = "router~10.0.0.41~plain-1.istio-system~istio-system.svc.cluster.local";
    let plain = Envoy::start(
        axon.xds_addr(),
        EnvoyOptions::gateway(plain_id, &[("istio", "plain")], "istio-system"),
    );
    let refused = wait_until(CONVERGE, || {
        let logs = axon.logs();
        logs.contains("unauthorized secret requested, not served")
            && logs.contains("plain-1.istio-system")
            && logs.contains("not verified")
    });
    assert!(refused, "{}", axon.logs());
    assert!(
        !envoy_serials(&plain).contains(&format!("{:x}", 1101)),
        "{:?}",
        envoy_serials(&plain)
    );
    assert!(envoy_serials(&envoy).contains(&format!("{:x}", 1101)));
    assert_no_rejected_updates(&envoy);
}
