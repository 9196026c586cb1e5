//! `CreateCertificate`: a caller proving its identity with a service-account token (the fake
//! API server's TokenReview) gets a certificate for that identity only, whatever its CSR
//! asks; the chain verifies with openssl against the CA's root; the certificate then
//! authenticates a renewal; no credential, a forged token, a TTL above the maximum and the
//! plaintext port are refused with istiod's codes. Without `--tls-cert`, the TLS port
//! presents a certificate the CA issued for istiod's DNS names and `--xds-dns-names`.

use std::time::Duration;

use crate::support::ca_client::*;
use crate::support::fake_kube::FakeKube;
use crate::support::*;

const ME: &str = "spiffe://cluster.local/ns/default/sa/me";

#[test]
fn a_caller_is_issued_its_proven_identity_only_and_renews_with_it() {
    let api = FakeKube::start();
    api.accept_token("me-token", "default", "me", &["istio-ca"]);
    let kube_dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(kube_dir.path());
    let config = ConfigDir::new();
    let work = tempfile::tempdir().unwrap();
    let ca_dir = work.path().join("ca");
    let axon = Axon::start_with_env(
        Some(config.path()),
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--ca-dir",
            ca_dir.to_str().unwrap(),
            "--xds-dns-names",
            "localhost",
            "--token-auth",
            "kubernetes",
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    let addr = axon.xds_tls_addr().expect("xds_tls_addr");
    let root = ca_dir.join("root-cert.pem");
    assert!(root.exists(), "the self-signed root was not written");
    let call = CaCall::new(&root, "localhost");
    let dir = work.path();

    // The TLS port's own certificate: issued by the CA, for istiod's names and ours.
    let served = served_certificate(addr, "localhost");
    let text = x509_text(dir, &served);
    for name in [
        "DNS:istiod.istio-system.svc",
        "DNS:istiod-remote.istio-system.svc",
        "DNS:istio-pilot.istio-system.svc",
        "DNS:localhost",
    ] {
        assert!(
            text.contains(name),
            "{name} not in the served certificate:\n{text}"
        );
    }

    // A token for default/me, a CSR asking for another identity, a DNS name and a subject:
    // the certificate carries default/me alone.
    let csr = Csr::new(
        dir,
        "me",
        "URI:spiffe://cluster.local/ns/other/sa/x,DNS:evil.example.com",
    );
    let chain = call
        .clone()
        .with_token("me-token")
        .create_certificate(addr, &csr.pem, 0)
        .expect("issued");
    assert_eq!(chain.len(), 2, "leaf and root: {chain:?}");
    assert_eq!(chain[1], std::fs::read_to_string(&root).unwrap());
    let issued = write_chain(dir, "me", &chain);
    openssl_verify(dir, "me", &root).expect("the chain verifies");
    let text = x509_text(dir, &chain[0]);
    assert!(text.contains(&format!("URI:{ME}")), "{text}");
    for asked in ["ns/other", "evil.example.com", "CN", "O=evil", "CA:TRUE"] {
        assert!(
            !text.contains(asked),
            "the CSR's {asked} was copied:\n{text}"
        );
    }
    assert!(text.contains("TLS Web Server Authentication, TLS Web Client Authentication"));
    assert!(
        text.contains("Digital Signature, Key Encipherment"),
        "{text}"
    );

    // Renewal: the issued certificate (no token) authenticates; the same identity again,
    // for the lifetime asked.
    let renewal = Csr::new(
        dir,
        "renew",
        "URI:spiffe://cluster.local/ns/kube-system/sa/admin",
    );
    let chain = call
        .clone()
        .with_client(&issued, &csr.key)
        .create_certificate(addr, &renewal.pem, 3600)
        .expect("renewed with the issued certificate");
    let text = x509_text(dir, &chain[0]);
    assert!(text.contains(&format!("URI:{ME}")), "{text}");
    assert!(!text.contains("kube-system"), "{text}");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl x509 -noout -checkend 3500 -in {0} >/dev/null && ! openssl x509 -noout -checkend 3700 -in {0} >/dev/null",
            dir.join("inspect.crt").display()
        ))
        .status()
        .unwrap();
    assert!(
        out.success(),
        "validity_duration 3600 not honoured:\n{text}"
    );

    // Above the maximum (90 days): INVALID_ARGUMENT, as istiod.
    let refused = call
        .clone()
        .with_token("me-token")
        .create_certificate(addr, &csr.pem, 91 * 86400)
        .unwrap_err();
    assert_eq!(refused.code, INVALID_ARGUMENT, "{refused:?}");
    assert!(refused.message.contains("max allowed TTL"), "{refused:?}");

    // A request above max_csr_bytes (64 KiB): RESOURCE_EXHAUSTED.
    let refused = call
        .clone()
        .with_token("me-token")
        .create_certificate(addr, &"x".repeat(70 << 10), 0)
        .unwrap_err();
    assert_eq!(refused.code, RESOURCE_EXHAUSTED, "{refused:?}");

    // No certificate and no token; a forged token: UNAUTHENTICATED.
    let refused = call.create_certificate(addr, &csr.pem, 0).unwrap_err();
    assert_eq!(refused.code, UNAUTHENTICATED, "{refused:?}");
    let refused = call
        .clone()
        .with_token("forged")
        .create_certificate(addr, &csr.pem, 0)
        .unwrap_err();
    assert_eq!(refused.code, UNAUTHENTICATED, "{refused:?}");
    assert!(axon.wait_for_log("(logged at most once a second)", Duration::from_secs(5)));

    // The plaintext port serves no CA.
    let plaintext = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut send = raw_h2::h2_connect(axon.xds_addr()).await;
            let request = http::Request::builder()
                .method("POST")
                .uri(format!("http://axon{}", axon_transport::CA_PATH))
                .header("content-type", "application/grpc")
                .body(())
                .unwrap();
            let mut ready = send.clone().ready().await.unwrap();
            let (response, _body) = ready.send_request(request, false).unwrap();
            send = ready;
            let _ = send;
            raw_h2::grpc_status(response, Duration::from_secs(5)).await
        });
    assert_eq!(plaintext.0, UNIMPLEMENTED, "{plaintext:?}");

    let metric = |name: &str| axon.metric(name).unwrap_or(0.0);
    assert_eq!(metric("citadel_server_success_cert_issuance_count"), 2.0);
    assert_eq!(metric("citadel_server_authentication_failure_count"), 2.0);
    assert_eq!(
        metric("citadel_server_csr_sign_err_count{error=\"TTL_ERROR\"}"),
        1.0
    );
    assert_eq!(metric("citadel_server_csr_count"), 6.0);
    assert_eq!(metric("citadel_server_csr_parsing_err_count"), 1.0);
}
