//! HTTPS listeners: `HTTPRouteHTTPSListener` on Gateway `same-namespace-with-https-listener`,
//! its certificate a Secret the test makes (the suite's `tls-validity-checks-certificate`)
//! served over SDS as `kubernetes-gateway://NAMESPACE/NAME`; requests by SNI and Host.

use std::process::Command;

use super::Conformance;
use crate::support::pki::Pki;
use crate::support::wait_until;

/// The suite's TLS Secret `NAME` of `namespace`, for the hosts of `san`.
pub(super) fn tls_secret(pki: &Pki, namespace: &str, name: &str, san: &str) -> serde_json::Value {
    pki.issue(name, san);
    let read = |f: String| std::fs::read_to_string(pki.path(&f)).unwrap();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": read(format!("{name}.crt")), "tls.key": read(format!("{name}.key"))},
    })
}

/// `GET https://HOST:PORT/` through the gateway (SNI and Host HOST, the test CA trusted):
/// the upstream that answered, or the status, or curl's error.
fn https(pki: &Pki, host: &str, port: u16) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}", "--cacert"])
        .arg(pki.path("ca.crt"))
        .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
        .arg(format!("https://{host}:{port}/"))
        .output()
        .expect("curl must be installed");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return format!("error: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let (body, status) = text.rsplit_once('\n').unwrap_or((&text, ""));
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["upstream"].as_str().map(String::from))
        .unwrap_or_else(|| format!("status {status}"))
}

#[test]
fn httproute_https_listener() {
    let pki = Pki::new();
    let secret = tls_secret(
        &pki,
        "gateway-conformance-infra",
        "tls-validity-checks-certificate",
        "DNS:example.org,DNS:second-example.org,DNS:unknown-example.org,DNS:*.wildcard.org",
    );
    let Some(world) = Conformance::start_with(
        "httproute-https-listener.yaml",
        "same-namespace-with-https-listener",
        vec![secret],
    ) else {
        return;
    };
    let port = world.ports[&443];
    let mut last = String::new();
    assert!(
        wait_until(super::CONVERGE, || {
            last = https(&pki, "example.org", port);
            last == "infra-backend-v1"
        }),
        "https://example.org never reached infra-backend-v1: {last}\n{}",
        crate::support::scenario::describe_envoy(&world.envoy)
    );
    // The route without hostnames is bound to the listener of second-example.org.
    assert_eq!(https(&pki, "second-example.org", port), "infra-backend-v2");
    // A host no route names: the listener takes it (its certificate is valid) and 404s.
    assert_eq!(https(&pki, "unknown-example.org", port), "status 404");
}

/// The `gateway_api` status of the Gateway `name` of the suite's namespace, from
/// `/debug/configz`.
fn gateway_status(world: &Conformance, name: &str) -> serde_json::Value {
    let configz = world.axon.debug_json("/debug/configz");
    configz["gateway_api"]["status"][format!("KubernetesGateway/gateway-conformance-infra/{name}")]
        .clone()
}

fn listener_condition(status: &serde_json::Value, kind: &str) -> (String, String) {
    let c = status["listeners"][0]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or_default();
    (
        c["status"].as_str().unwrap_or_default().to_string(),
        c["reason"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn gateway_secret_reference_grant_specific() {
    let pki = Pki::new();
    let secret = tls_secret(
        &pki,
        "gateway-conformance-web-backend",
        "certificate",
        "DNS:example.com",
    );
    let gw = "gateway-secret-reference-grant-specific";
    let Some(world) = Conformance::start_with(
        "gateway-secret-reference-grant-specific.yaml",
        gw,
        vec![secret],
    ) else {
        return;
    };
    let port = world.ports[&443];
    // The certificate of another namespace, granted: served (no route: 404 over TLS).
    let mut last = String::new();
    assert!(
        wait_until(super::CONVERGE, || {
            last = https(&pki, "example.com", port);
            last == "status 404"
        }),
        "the granted certificate is not served: {last}\n{}",
        crate::support::scenario::describe_envoy(&world.envoy)
    );
    let status = gateway_status(&world, gw);
    assert_eq!(
        listener_condition(&status, "ResolvedRefs").0,
        "True",
        "{status}"
    );
    assert_eq!(
        listener_condition(&status, "Programmed").0,
        "True",
        "{status}"
    );
    // Without the grant: not permitted, and no certificate is served for the listener.
    let text = std::fs::read_to_string(world.config.file("manifests.yaml")).unwrap();
    let without: Vec<&str> = text
        .split("---\n")
        .filter(|d| !d.contains("name: reference-grant-specific"))
        .collect();
    world.config.write("manifests.yaml", &without.join("---\n"));
    assert!(
        wait_until(super::CONVERGE, || listener_condition(
            &gateway_status(&world, gw),
            "ResolvedRefs"
        ) == (
            "False".to_string(),
            "RefNotPermitted".to_string()
        )),
        "{}",
        gateway_status(&world, gw)
    );
    assert!(
        wait_until(super::CONVERGE, || https(&pki, "example.com", port)
            .starts_with("error")),
        "the certificate is still served without its grant"
    );
}
