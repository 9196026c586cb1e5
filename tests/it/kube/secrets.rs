//! End-to-end: TLS Secrets from a Kubernetes API (kube's real client in `axon serve
//! --kubernetes`, against the in-process fake API server) served over SDS to a real gateway
//! Envoy for a DestinationRule's `credentialName` (the mesh config from a directory beside).
//! The Secret's `data` is base64, as the API server stores it; Secrets without TLS keys are
//! not held. A watch event that changes the Secret gives Envoy the new certificate over SDS
//! only (its CDS and LDS update counts stay), and an update whose key is not its
//! certificate's is refused, named in `/debug/configz`, and the previous one kept.

use crate::support;
use crate::support::fake_kube;
use crate::support::pki;
use crate::support::scenario;
use crate::support::tls_upstream;

use std::time::Duration;

use base64::Engine as _;
use fake_kube::*;
use pki::Pki;
use scenario::*;
use support::*;
use tls_upstream::*;

const CONVERGE: Duration = Duration::from_secs(30);
const SAN: &str = "URI:spiffe://cluster.local/ns/istio-system/sa/gw";

/// The Secret `client-cred` of istio-system as the API server holds it: `data` in base64.
fn secret(pki: &Pki, cert: &str, key: &str) -> serde_json::Value {
    let b64 = |f: &str| {
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(pki.path(f)).unwrap())
    };
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "client-cred", "namespace": "istio-system"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(cert), "tls.key": b64(key), "ca.crt": b64("ca.crt")},
    })
}

fn mesh(port: u16) -> String {
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

/// The errors the Kubernetes registries report in `/debug/configz`.
fn kubernetes_errors(axon: &Axon) -> Vec<String> {
    let configz = axon.debug_json("/debug/configz");
    configz["kubernetes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["errors"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_kubernetes_secret_is_served_and_a_watch_event_rotates_it_over_sds_only() {
    let pki = Pki::new();
    pki.issue("server", "DNS:server.example.com");
    pki.issue_with_serial("client", SAN, 2001);
    let upstream = TlsEchoUpstream::start(
        "mtls",
        &pki.path("server.crt"),
        &pki.path("server.key"),
        Some(&pki.path("ca.crt")),
    );
    let api = FakeKube::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path()).display().to_string();
    api.apply(secret(&pki, "client.crt", "client.key"));
    // Not TLS material: neither held nor reported.
    api.apply(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-password", "namespace": "istio-system"},
        "type": "Opaque", "data": {"password": "aHVudGVyMg=="},
    }));
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("mesh.yaml", &mesh(upstream.port()));
    let axon = Axon::start_with_env(
        Some(config.path()),
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.as_str())],
    );
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
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
    wait_for_answer(
        "mutual from a Kubernetes Secret",
        CONVERGE,
        "mtls",
        &envoy,
        get,
    );
    assert!(upstream.handshakes().iter().all(|h| h.client_certificate));
    assert!(envoy_serials(&envoy).contains(&format!("{:x}", 2001)));
    let configz = axon.debug_get("/debug/configz").body;
    assert!(!configz.contains("db-password"), "{configz}");
    assert!(
        !configz.contains("BEGIN") && !configz.contains("aHVudGVyMg"),
        "{configz}"
    );

    let updates = |envoy: &Envoy| {
        (
            stat(envoy, "cluster_manager.cds.update_success"),
            stat(envoy, "listener_manager.lds.update_success"),
            stat(envoy, "cluster.xds-grpc.upstream_cx_total"),
        )
    };
    let before = updates(&envoy);
    pki.issue_with_serial("client", SAN, 2002);
    api.apply(secret(&pki, "client.crt", "client.key"));
    let rotated = wait_until(CONVERGE, || {
        envoy_serials(&envoy).contains(&format!("{:x}", 2002))
    });
    assert!(rotated, "{:?}\n{}", envoy_serials(&envoy), axon.logs());
    assert_eq!(updates(&envoy), before, "(cds, lds, ADS connections) moved");
    wait_for_answer("mutual after the rotation", CONVERGE, "mtls", &envoy, get);

    // A key that is not the certificate's: refused and named, the previous Secret kept.
    pki.issue_with_serial("other", "DNS:other.example.com", 2003);
    api.apply(secret(&pki, "client.crt", "other.key"));
    let named = wait_until(CONVERGE, || {
        kubernetes_errors(&axon).iter().any(|e| {
            e.contains("istio-system/client-cred")
                && e.contains("tls.key is not the private key")
                && e.contains("kept")
        })
    });
    assert!(named, "{:?}", kubernetes_errors(&axon));
    assert!(
        axon.metric("pilot_sds_certificate_errors_total")
            .unwrap_or(0.0)
            >= 1.0
    );
    assert!(envoy_serials(&envoy).contains(&format!("{:x}", 2002)));
    wait_for_answer("the previous Secret kept", CONVERGE, "mtls", &envoy, get);
    assert_no_rejected_updates(&envoy);
}
