//! The signing, at fixed times: what a workload certificate carries whatever the CSR asks,
//! its lifetime, the chain returned, and the refusals.

use std::time::{Duration, SystemTime};

use rcgen::string::Ia5String;
use rcgen::{CertificateParams, KeyPair, SanType};
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::parse_x509_certificate;

use super::*;
use crate::{CaTtls, SignError};

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

const NOW: u64 = 1_800_000_000;
const ME: &str = "spiffe://cluster.local/ns/default/sa/me";

/// A CSR asking for a DNS name, another identity and a subject.
fn greedy_csr() -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["evil.example.com".to_string()]).unwrap();
    params.subject_alt_names.push(SanType::URI(
        Ia5String::try_from("spiffe://cluster.local/ns/other/sa/x").unwrap(),
    ));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn der(pem: &str) -> Vec<u8> {
    pem_certs(pem).unwrap().remove(0)
}

fn root() -> Authority {
    Authority::self_signed(
        "cluster.local",
        Duration::from_secs(10 * 365 * 86400),
        at(NOW),
    )
    .unwrap()
    .0
}

#[test]
fn a_workload_certificate_carries_the_proven_identity_only() {
    let ca = root();
    let chain = ca
        .sign_csr(&greedy_csr(), ME, 0, &CaTtls::default(), at(NOW + 10))
        .unwrap();
    assert_eq!(chain.len(), 2, "leaf and root: {chain:?}");
    assert_eq!(chain[1], ca.root_pem());
    let leaf_der = der(&chain[0]);
    let (_, leaf) = parse_x509_certificate(&leaf_der).unwrap();
    let sans: Vec<_> = leaf
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .clone();
    assert_eq!(sans, vec![GeneralName::URI(ME)]);
    assert!(leaf.subject_alternative_name().unwrap().unwrap().critical);
    assert_eq!(leaf.subject().iter_attributes().count(), 0, "empty subject");
    let bc = leaf.basic_constraints().unwrap().unwrap().value;
    assert!(!bc.ca);
    let ku = leaf.key_usage().unwrap().unwrap().value;
    assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && eku.client_auth);
    // Default TTL (24h), backdated 2 minutes.
    assert_eq!(
        leaf.validity().not_before.timestamp(),
        (NOW + 10 - 120) as i64
    );
    assert_eq!(
        leaf.validity().not_after.timestamp(),
        (NOW + 10 + 86400) as i64
    );
    let root_der = der(ca.root_pem());
    let (_, root) = parse_x509_certificate(&root_der).unwrap();
    leaf.verify_signature(Some(root.public_key())).unwrap();
    assert!(root.is_ca());
    for ext in leaf.extensions() {
        assert!(
            !matches!(
                ext.parsed_extension(),
                ParsedExtension::UnsupportedExtension { .. }
            ),
            "an extension from the CSR: {ext:?}"
        );
    }
}

#[test]
fn validity_duration_is_honoured_up_to_the_maximum() {
    let ca = root();
    let ttls = CaTtls::default();
    let not_after = |secs: i64| {
        let chain = ca
            .sign_csr(&greedy_csr(), ME, secs, &ttls, at(NOW))
            .unwrap();
        let d = der(&chain[0]);
        let (_, leaf) = parse_x509_certificate(&d).unwrap();
        leaf.validity().not_after.timestamp() - NOW as i64
    };
    assert_eq!(not_after(3600), 3600);
    assert_eq!(not_after(0), 86400, "0 is the default");
    assert_eq!(not_after(-5), 86400, "negative is the default, as istiod");
    assert_eq!(not_after(90 * 86400), 90 * 86400, "the maximum itself");
    let over = ca.sign_csr(&greedy_csr(), ME, 90 * 86400 + 1, &ttls, at(NOW));
    assert!(
        matches!(over, Err(SignError::Ttl { .. })),
        "above the maximum: refused"
    );
    let e = over.unwrap_err();
    assert!(e.is_invalid_argument());
    assert_eq!(e.error_type(), "TTL_ERROR");
}

/// A root and an intermediate it signed, as plug-in files: (ca-cert, ca-key, root).
fn plug_in(intermediate_days: u64) -> (String, String, String) {
    let root_key = KeyPair::generate().unwrap();
    let mut rp = CertificateParams::new(Vec::<String>::new()).unwrap();
    rp.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    rp.not_before = at(NOW - 86400).into();
    rp.not_after = at(NOW + 3650 * 86400).into();
    let root_cert = rp.self_signed(&root_key).unwrap();
    let issuer = Issuer::new(rp, root_key);
    let key = KeyPair::generate().unwrap();
    let mut ip = CertificateParams::new(Vec::<String>::new()).unwrap();
    ip.distinguished_name
        .push(DnType::CommonName, "intermediate");
    ip.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ip.not_before = at(NOW - 86400).into();
    ip.not_after = at(NOW + intermediate_days * 86400).into();
    let cert = ip.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem(), root_cert.pem())
}

#[test]
fn a_plug_in_intermediate_signs_and_its_chain_is_returned_whole() {
    let (cert, key, root) = plug_in(365);
    let ca = Authority::from_pem(&cert, &key, &cert, &root).unwrap();
    let chain = ca
        .sign_csr(&greedy_csr(), ME, 0, &CaTtls::default(), at(NOW))
        .unwrap();
    assert_eq!(chain.len(), 3);
    assert_eq!(der(&chain[1]), der(&cert));
    assert_eq!(der(&chain[2]), der(&root));
    let leaf_der = der(&chain[0]);
    let leaf = parse_x509_certificate(&leaf_der)
        .unwrap()
        .1
        .issuer()
        .to_string();
    assert!(leaf.contains("intermediate"), "{leaf}");
    // Without cert-chain.pem, the intermediate still goes between the leaf and the root.
    let ca = Authority::from_pem(&cert, &key, "", &root).unwrap();
    let chain = ca
        .sign_csr(&greedy_csr(), ME, 0, &CaTtls::default(), at(NOW))
        .unwrap();
    assert_eq!(chain.len(), 3);
    assert_eq!(ca.trust_anchors().len(), 2);
}

#[test]
fn a_certificate_never_outlives_its_signer_and_an_expired_signer_signs_nothing() {
    let (cert, key, root) = plug_in(1);
    let ca = Authority::from_pem(&cert, &key, "", &root).unwrap();
    let chain = ca
        .sign_csr(&greedy_csr(), ME, 7 * 86400, &CaTtls::default(), at(NOW))
        .unwrap();
    let d = der(&chain[0]);
    let (_, leaf) = parse_x509_certificate(&d).unwrap();
    assert_eq!(leaf.validity().not_after.timestamp(), (NOW + 86400) as i64);
    let late = ca.sign_csr(
        &greedy_csr(),
        ME,
        0,
        &CaTtls::default(),
        at(NOW + 2 * 86400),
    );
    assert!(matches!(late, Err(SignError::NotReady(_))), "{late:?}");
}

#[test]
fn a_csr_whose_signature_does_not_verify_is_refused() {
    let ca = root();
    let pem = greedy_csr();
    let (_, parsed) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let mut bytes = parsed.contents.clone();
    let n = bytes.len();
    bytes[n - 3] ^= 0x55;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let forged =
        format!("-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n");
    let refused = ca.sign_csr(&forged, ME, 0, &CaTtls::default(), at(NOW));
    assert!(matches!(refused, Err(SignError::Csr(_))), "{refused:?}");
    let refused = ca.sign_csr("not pem", ME, 0, &CaTtls::default(), at(NOW));
    assert!(matches!(refused, Err(SignError::Csr(_))), "{refused:?}");
}

#[test]
fn mismatched_plug_in_files_are_refused() {
    let (cert, _, root) = plug_in(365);
    let other = KeyPair::generate().unwrap().serialize_pem();
    let e = Authority::from_pem(&cert, &other, "", &root).err().unwrap();
    assert!(e.contains("not the key"), "{e}");
}

#[test]
fn a_serving_certificate_names_the_dns_names() {
    let ca = root();
    let names = vec![
        "istiod.istio-system.svc".to_string(),
        "localhost".to_string(),
    ];
    let issued = ca
        .issue_server(&names, Duration::from_secs(3600), at(NOW))
        .unwrap();
    let d = der(&issued.chain_pem);
    let (_, leaf) = parse_x509_certificate(&d).unwrap();
    let sans = &leaf
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names;
    assert_eq!(
        sans,
        &vec![
            GeneralName::DNSName("istiod.istio-system.svc"),
            GeneralName::DNSName("localhost")
        ]
    );
    assert_eq!(issued.not_after, at(NOW + 3600));
    KeyPair::from_pem(&issued.key_pem).unwrap();
}
