//! `BackendTLSPolicy`: the gateway originates TLS to a backend Service as the policy says
//! (its SNI, the CA of a ConfigMap), through a real Envoy to a TLS upstream: the policy's
//! CA verifies the backend's certificate (200, the upstream saw the policy's SNI); another
//! policy's hostname is the SNI sent; a policy whose CA did not sign the backend's
//! certificate fails the request.

use super::{Conformance, answered_by};
use crate::support::pki::Pki;
use crate::support::tls_upstream::TlsEchoUpstream;
use crate::support::wait_until;

/// A ConfigMap `name` of the suite's namespace holding `ca` as its `ca.crt`.
fn ca_config_map(name: &str, ca: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "gateway-conformance-infra"},
        "data": {"ca.crt": ca},
    })
}

#[test]
fn backend_tls_policy_originates_tls_with_its_sni_and_ca() {
    let pki = Pki::new();
    pki.issue("backend", "DNS:abc.example.com");
    let other = Pki::new();
    let backend = TlsEchoUpstream::start(
        "tls-backend",
        &pki.path("backend.crt"),
        &pki.path("backend.key"),
        None,
    );
    let ca = std::fs::read_to_string(pki.path("ca.crt")).unwrap();
    let wrong = std::fs::read_to_string(other.path("ca.crt")).unwrap();
    let services = [
        "backendtlspolicy-test",
        "backendtlspolicy-host-mismatch-test",
        "backendtlspolicy-cert-mismatch-test",
        "backendtlspolicy-reconcile-test",
    ];
    let upstreams: Vec<(&str, &str, u16)> = services
        .iter()
        .map(|s| (*s, "btls", backend.port()))
        .collect();
    let Some(world) = Conformance::start_full(
        "backendtlspolicy.yaml",
        "same-namespace",
        vec![
            ca_config_map("tls-checks-ca-certificate", &ca),
            ca_config_map("mismatch-ca-certificate", &wrong),
        ],
        &upstreams,
    ) else {
        return;
    };
    let get = |path: &str| world.request(80, "GET", "abc.example.com", path, &[]);
    let mut last = Default::default();
    assert!(
        wait_until(super::CONVERGE, || {
            last = get("/backendtlspolicy");
            last.status == 200
        }),
        "never reached the TLS backend: {last:?}\n{}",
        crate::support::scenario::describe_envoy(&world.envoy)
    );
    assert_eq!(
        answered_by(&last),
        None,
        "answered in plaintext by an echo: {last:?}"
    );
    assert!(last.body.contains("tls-backend"), "{last:?}");
    let snis: Vec<Option<String>> = backend.handshakes().into_iter().map(|h| h.sni).collect();
    assert!(snis.contains(&Some("abc.example.com".into())), "{snis:?}");
    // The other policy's hostname is the SNI sent.
    let r = get("/backendtlspolicy-host-mismatch");
    assert_eq!(r.status, 200, "{r:?}");
    let snis: Vec<Option<String>> = backend.handshakes().into_iter().map(|h| h.sni).collect();
    assert!(
        snis.contains(&Some("mismatch.example.com".into())),
        "{snis:?}"
    );
    // A CA that did not sign the backend's certificate: no connection.
    let r = get("/backendtlspolicy-cert-mismatch");
    assert!(r.status >= 500, "{r:?}");
}
