use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType as V;

use super::*;

fn settings(yaml: &str) -> ServerTlsSettings {
    serde_norway::from_str(yaml).unwrap()
}

fn names(ctx: &DownstreamTlsContext) -> (Vec<String>, Option<String>) {
    let common = ctx.common_tls_context.as_ref().unwrap();
    let certs = common
        .tls_certificate_sds_secret_configs
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let ca = match &common.validation_context_type {
        Some(V::CombinedValidationContext(c)) => c
            .validation_context_sds_secret_config
            .as_ref()
            .map(|s| s.name.clone()),
        _ => None,
    };
    (certs, ca)
}

#[test]
fn simple_with_a_credential_is_its_kubernetes_secret_without_client_checks() {
    let ctx = downstream_context(
        &settings("{mode: SIMPLE, credentialName: web}"),
        false,
        false,
    );
    assert_eq!(names(&ctx), (vec!["kubernetes://web".to_string()], None));
    assert_eq!(
        ctx.require_client_certificate,
        Some(BoolValue { value: false })
    );
    let common = ctx.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
    assert!(common.tls_params.is_none());
    assert!(common.validation_context_type.is_none());
}

#[test]
#[allow(deprecated)]
fn mutual_checks_the_client_against_the_credentials_ca() {
    let ctx = downstream_context(
        &settings(
            "{mode: MUTUAL, credentialName: web, subjectAltNames: [spiffe://a], verifyCertificateSpki: [abc], verifyCertificateHash: ['01:02']}",
        ),
        false,
        false,
    );
    assert_eq!(
        names(&ctx),
        (
            vec!["kubernetes://web".to_string()],
            Some("kubernetes://web-cacert".to_string())
        )
    );
    assert_eq!(
        ctx.require_client_certificate,
        Some(BoolValue { value: true })
    );
    let Some(V::CombinedValidationContext(c)) =
        ctx.common_tls_context.unwrap().validation_context_type
    else {
        panic!()
    };
    let checks = c.default_validation_context.unwrap();
    assert_eq!(checks.verify_certificate_spki, ["abc"]);
    assert_eq!(checks.verify_certificate_hash, ["01:02"]);
    assert_eq!(checks.match_subject_alt_names.len(), 1);
}

#[test]
fn optional_mutual_with_files_checks_a_certificate_it_is_given() {
    let ctx = downstream_context(
        &settings(
            "{mode: OPTIONAL_MUTUAL, serverCertificate: /c.pem, privateKey: /k.pem, caCertificates: /ca.pem, minProtocolVersion: TLSV1_2, maxProtocolVersion: TLSV1_3, cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256, NOT-A-SUITE, ECDHE-RSA-AES128-GCM-SHA256]}",
        ),
        false,
        false,
    );
    assert_eq!(
        names(&ctx),
        (
            vec!["file-cert:/c.pem~/k.pem".to_string()],
            Some("file-root:/ca.pem".to_string())
        )
    );
    assert_eq!(
        ctx.require_client_certificate,
        Some(BoolValue { value: false })
    );
    let params = ctx.common_tls_context.unwrap().tls_params.unwrap();
    assert_eq!(
        params.tls_minimum_protocol_version,
        TlsProtocol::TlSv12 as i32
    );
    assert_eq!(
        params.tls_maximum_protocol_version,
        TlsProtocol::TlSv13 as i32
    );
    assert_eq!(params.cipher_suites, ["ECDHE-RSA-AES128-GCM-SHA256"]);
}

#[test]
fn istio_mutual_is_the_workload_certificate() {
    let ctx = downstream_context(&settings("{mode: ISTIO_MUTUAL}"), true, false);
    assert_eq!(
        names(&ctx),
        (vec!["default".to_string()], Some("ROOTCA".to_string()))
    );
    assert_eq!(
        ctx.common_tls_context.clone().unwrap().alpn_protocols[0],
        "istio-peer-exchange"
    );
    assert!(!format!("{ctx:?}").contains("sds-grpc"));
    // Beside istio's agent, the agent serves them (`sds-grpc`), as istiod's.
    let agent = downstream_context(&settings("{mode: ISTIO_MUTUAL}"), true, true);
    assert_eq!(names(&agent), names(&ctx));
    assert!(format!("{agent:?}").contains("sds-grpc"));
}

#[test]
fn credential_names_as_istiod_resolves_them() {
    assert_eq!(credential_resource("web"), "kubernetes://web");
    assert_eq!(credential_resource("kubernetes://web"), "kubernetes://web");
    assert_eq!(credential_resource("builtin://"), "default");
    assert_eq!(credential_resource("sds://ext"), "kubernetes://ext");
    let several = downstream_context(
        &settings("{mode: MUTUAL, credentialNames: [rsa, ecdsa]}"),
        false,
        false,
    );
    assert_eq!(
        names(&several),
        (
            vec![
                "kubernetes://rsa".to_string(),
                "kubernetes://ecdsa".to_string()
            ],
            Some("kubernetes://rsa-cacert".to_string())
        )
    );
}
