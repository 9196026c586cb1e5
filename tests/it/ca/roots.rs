//! The signing root as istiod keeps it: the self-signed root axon writes into `--ca-dir`
//! survives a restart; istiod's plug-in files (root → intermediate) are signed with and their
//! chain returned whole, verifying with openssl; rewritten plug-in files are picked up
//! without a restart. Callers here prove their identity with a client certificate under
//! `--client-ca` (a VM's bootstrap certificate).

use std::path::Path;
use std::time::Duration;

use crate::support::ca_client::*;
use crate::support::pki::{Pki, plug_in_ca, plug_in_ca_rsa};
use crate::support::*;

/// axon on an empty config directory (kept while it runs) with its CA in `ca_dir`.
fn start(ca_dir: &Path, pki: &Pki) -> (Axon, ConfigDir) {
    let config = ConfigDir::new();
    let axon = Axon::start_with_args(
        config.path(),
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--ca-dir",
            ca_dir.to_str().unwrap(),
            "--xds-dns-names",
            "localhost",
            "--client-ca",
            pki.path("ca.crt").to_str().unwrap(),
        ],
    );
    (axon, config)
}

/// A bootstrap certificate for `spiffe://cluster.local/ns/vm/sa/web`, under `--client-ca`.
fn bootstrap(pki: &Pki, root: &Path) -> CaCall {
    pki.issue("vm", "URI:spiffe://cluster.local/ns/vm/sa/web");
    CaCall::new(root, "localhost").with_client(&pki.path("vm.crt"), &pki.path("vm.key"))
}

#[test]
fn a_restart_keeps_the_self_signed_root() {
    let pki = Pki::new();
    let work = tempfile::tempdir().unwrap();
    let ca_dir = work.path().join("ca");
    let root = ca_dir.join("root-cert.pem");
    let (mut axon, _config) = start(&ca_dir, &pki);
    let first = std::fs::read_to_string(&root).unwrap();
    let csr = Csr::new(
        work.path(),
        "web",
        "URI:spiffe://cluster.local/ns/vm/sa/web",
    );
    let call = bootstrap(&pki, &root);
    let chain = call
        .create_certificate(axon.xds_tls_addr().unwrap(), &csr.pem, 0)
        .expect("issued");
    assert_eq!(chain.last().unwrap(), &first);
    axon.stop();

    let (axon, _config) = start(&ca_dir, &pki);
    assert_eq!(std::fs::read_to_string(&root).unwrap(), first);
    let chain = call
        .create_certificate(axon.xds_tls_addr().unwrap(), &csr.pem, 0)
        .expect("issued after the restart");
    assert_eq!(chain.last().unwrap(), &first, "the root changed on restart");
    write_chain(work.path(), "web", &chain);
    openssl_verify(work.path(), "web", &root).expect("verifies against the kept root");
}

#[test]
fn a_plug_in_chain_is_returned_whole_and_a_rotated_one_is_picked_up() {
    let pki = Pki::new();
    let work = tempfile::tempdir().unwrap();
    let ca_dir = work.path().join("ca");
    let first_root = plug_in_ca(&ca_dir, "first");
    let (axon, _config) = start(&ca_dir, &pki);
    let addr = axon.xds_tls_addr().unwrap();
    let root = work.path().join("first-root.pem");
    std::fs::write(&root, &first_root).unwrap();
    let call = bootstrap(&pki, &root);
    let csr = Csr::new(
        work.path(),
        "web",
        "URI:spiffe://cluster.local/ns/vm/sa/web",
    );
    let chain = call.create_certificate(addr, &csr.pem, 0).expect("issued");
    // The leaf, cert-chain.pem's two certificates (intermediate, root), the root last.
    assert_eq!(chain.len(), 4, "{chain:?}");
    assert_eq!(chain.last().unwrap(), &first_root);
    write_chain(work.path(), "web", &chain);
    openssl_verify(work.path(), "web", &root).expect("the plug-in chain verifies");
    assert!(x509_text(work.path(), &chain[0]).contains("first intermediate"));
    // The TLS port's certificate is the intermediate's too (the client trusted the root).
    assert!(served_certificate(addr, "localhost").contains("BEGIN CERTIFICATE"));

    // A bootstrap certificate of another trust domain: PERMISSION_DENIED, with the reason.
    pki.issue("foreign", "URI:spiffe://other.example/ns/vm/sa/web");
    let refused = CaCall::new(&root, "localhost")
        .with_client(&pki.path("foreign.crt"), &pki.path("foreign.key"))
        .create_certificate(addr, &csr.pem, 0)
        .unwrap_err();
    assert_eq!(refused.code, PERMISSION_DENIED, "{refused:?}");
    assert!(
        refused.message.contains("trust domain other.example"),
        "{refused:?}"
    );
    assert_eq!(
        axon.metric("axon_ca_permission_denied{reason=\"trust_domain\"}"),
        Some(1.0)
    );

    // Rotated: new files in the directory, no restart.
    let second_root = plug_in_ca(&ca_dir, "second");
    let second = work.path().join("second-root.pem");
    std::fs::write(&second, &second_root).unwrap();
    let call = bootstrap(&pki, &second);
    let mut last = None;
    let picked_up = wait_until(Duration::from_secs(20), || {
        last = Some(call.create_certificate(addr, &csr.pem, 0));
        matches!(&last, Some(Ok(chain)) if chain.last() == Some(&second_root))
    });
    assert!(picked_up, "the rotated root is not used: {last:?}");
    assert!(axon.wait_for_log("CA files changed", Duration::from_secs(5)));
    let chain = last.unwrap().unwrap();
    write_chain(work.path(), "web2", &chain);
    openssl_verify(work.path(), "web2", &second).expect("the rotated chain verifies");
}

#[test]
fn the_served_certificate_is_renewed_at_half_its_life() {
    let pki = Pki::new();
    let work = tempfile::tempdir().unwrap();
    let ca_dir = work.path().join("ca");
    let limits = work.path().join("limits.toml");
    std::fs::write(&limits, "workload_cert_ttl = \"4s\"\n").unwrap();
    let config = ConfigDir::new();
    let axon = Axon::start_with_args(
        config.path(),
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--ca-dir",
            ca_dir.to_str().unwrap(),
            "--xds-dns-names",
            "localhost",
            "--client-ca",
            pki.path("ca.crt").to_str().unwrap(),
            "--limits",
            limits.to_str().unwrap(),
        ],
    );
    let addr = axon.xds_tls_addr().unwrap();
    let leaf = |pems: String| {
        pems.split_inclusive("-----END CERTIFICATE-----\n")
            .next()
            .map(str::to_string)
    };
    let first = leaf(served_certificate(addr, "localhost")).expect("a served certificate");
    assert!(
        wait_until(Duration::from_secs(15), || leaf(served_certificate(
            addr,
            "localhost"
        ))
        .is_some_and(|now| now != first)),
        "the serving certificate was not renewed"
    );
    assert!(axon.wait_for_log("past half its life; renewed", Duration::from_secs(5)));
    // The renewed one still chains to the CA's root.
    let root = ca_dir.join("root-cert.pem");
    let csr = Csr::new(
        work.path(),
        "web",
        "URI:spiffe://cluster.local/ns/vm/sa/web",
    );
    bootstrap(&pki, &root)
        .create_certificate(addr, &csr.pem, 0)
        .expect("a call over the renewed certificate");
}

#[test]
fn an_rsa_plug_in_signs_as_with_istiod_default_keys() {
    let pki = Pki::new();
    let work = tempfile::tempdir().unwrap();
    let ca_dir = work.path().join("ca");
    let root_pem = plug_in_ca_rsa(&ca_dir, "rsa");
    let (axon, _config) = start(&ca_dir, &pki);
    let root = work.path().join("rsa-root.pem");
    std::fs::write(&root, &root_pem).unwrap();
    let csr = Csr::new(
        work.path(),
        "web",
        "URI:spiffe://cluster.local/ns/vm/sa/web",
    );
    let chain = bootstrap(&pki, &root)
        .create_certificate(axon.xds_tls_addr().unwrap(), &csr.pem, 0)
        .expect("issued by the RSA intermediate");
    write_chain(work.path(), "web", &chain);
    openssl_verify(work.path(), "web", &root).expect("the RSA chain verifies");
    assert!(x509_text(work.path(), &chain[0]).contains("sha256WithRSAEncryption"));
}
