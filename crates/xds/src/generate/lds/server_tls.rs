//! A terminating gateway server's `DownstreamTlsContext`, as istiod's
//! `BuildListenerTLSContext` makes it (`listener.go`, with `security/model/authentication.go`):
//! ALPN `h2`, `http/1.1`; a client certificate required for MUTUAL (and ISTIO_MUTUAL),
//! checked when given for OPTIONAL_MUTUAL; the certificates over SDS on the ADS stream:
//!
//! - `credentialName: X` (or each of `credentialNames`): `kubernetes://X`, the client CA
//!   `kubernetes://X-cacert` (or `caCertCredentialName`), with `subjectAltNames`,
//!   `verifyCertificateSpki` and `verifyCertificateHash` checked for the mutual modes;
//! - file paths: `file-cert:CERT~KEY` (each of `tlsCertificates`, else `serverCertificate`
//!   and `privateKey`), the client CA `file-root:CA`, with `subjectAltNames` and `caCrl`;
//! - ISTIO_MUTUAL: the workload certificate `default` and roots `ROOTCA` (from istio's agent
//!   over `sds-grpc` for a proxy beside it).
//!
//! Then, for SIMPLE and the mutual modes, `minProtocolVersion`, `maxProtocolVersion` and
//! `cipherSuites` (those istiod knows, once each) as TLS parameters.

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    TlsParameters,
    certificate_validation_context::TrustChainVerification,
    common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
    tls_parameters::TlsProtocol,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::BoolValue;

use crate::generate::cds::ads_config_source;
use crate::generate::cds::tls::{WORKLOAD_CERT, WORKLOAD_ROOTS, agent_secret};
use crate::generate::sds;
use axon_config::istio::{ServerTlsMode, ServerTlsSettings};

/// istiod's `ALPNHttp`.
const ALPN_HTTP: [&str; 2] = ["h2", "http/1.1"];
/// istiod's `ALPNDownstreamWithMxc`, for a TCP server terminating ISTIO_MUTUAL.
const ALPN_DOWNSTREAM_MX: [&str; 3] = ["istio-peer-exchange", "h2", "http/1.1"];
/// The SDS name of a Kubernetes Secret (istiod's `KubernetesSecretTypeURI`).
const KUBERNETES: &str = "kubernetes://";
/// istiod's suffix of a credential's CA.
pub(super) const CA_SUFFIX: &str = "-cacert";

/// istiod's `ValidCipherSuites` (`bssl ciphers -openssl-name ALL`, without PSK).
const CIPHER_SUITES: [&str; 15] = [
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// The TLS context of a terminating server; `tcp_server`: a TCP/TLS server (not HTTPS);
/// `istio_agent`: the proxy runs beside istio's agent, which serves the workload
/// certificate `default` and roots `ROOTCA` over `sds-grpc` (istiod's
/// `ConstructSdsSecretConfig`); to any other proxy axon names them over ADS.
pub(super) fn downstream_context(
    tls: &ServerTlsSettings,
    tcp_server: bool,
    istio_agent: bool,
) -> DownstreamTlsContext {
    let workload = |name: &str| {
        if istio_agent {
            agent_secret(name)
        } else {
            secret(name.to_string())
        }
    };
    let alpn: &[&str] = if tcp_server && tls.mode == ServerTlsMode::IstioMutual {
        &ALPN_DOWNSTREAM_MX
    } else {
        &ALPN_HTTP
    };
    let mut common = CommonTlsContext {
        alpn_protocols: alpn.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let require = matches!(tls.mode, ServerTlsMode::Mutual | ServerTlsMode::IstioMutual);
    let validate_client = require || tls.mode == ServerTlsMode::OptionalMutual;
    if tls.mode == ServerTlsMode::IstioMutual {
        common.tls_certificate_sds_secret_configs = vec![workload(WORKLOAD_CERT)];
        common.validation_context_type = Some(combined(file_checks(tls), workload(WORKLOAD_ROOTS)));
    } else if !tls.credential_names.is_empty() || !tls.credential_name.is_empty() {
        credential_certificates(tls, &mut common);
    } else {
        file_certificates(tls, validate_client, &mut common);
    }
    if matches!(
        tls.mode,
        ServerTlsMode::Simple | ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
    ) {
        common.tls_params = tls_params(tls);
    }
    DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: Some(BoolValue { value: require }),
        ..Default::default()
    }
}

/// istiod's `ApplyCredentialSDSToServerCommonTLSContext`.
fn credential_certificates(tls: &ServerTlsSettings, common: &mut CommonTlsContext) {
    let (certs, first): (Vec<&String>, &str) = if tls.credential_names.is_empty() {
        (vec![&tls.credential_name], &tls.credential_name)
    } else {
        (
            tls.credential_names.iter().collect(),
            &tls.credential_names[0],
        )
    };
    common.tls_certificate_sds_secret_configs = certs
        .into_iter()
        .map(|name| secret(credential_resource(name)))
        .collect();
    let ca = if tls.ca_cert_credential_name.is_empty() {
        format!("{first}{CA_SUFFIX}")
    } else {
        tls.ca_cert_credential_name.clone()
    };
    if matches!(
        tls.mode,
        ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
    ) {
        let checks = CertificateValidationContext {
            verify_certificate_spki: tls.verify_certificate_spki.clone(),
            verify_certificate_hash: tls.verify_certificate_hash.clone(),
            trust_chain_verification: trust_chain(tls),
            ..san_checks(&tls.subject_alt_names)
        };
        common.validation_context_type = Some(combined(checks, secret(credential_resource(&ca))));
    } else if !tls.subject_alt_names.is_empty() {
        common.validation_context_type = Some(ValidationContextType::ValidationContext(
            san_checks(&tls.subject_alt_names),
        ));
    }
}

/// istiod's `ApplyToCommonTLSContext` for certificates from files.
fn file_certificates(
    tls: &ServerTlsSettings,
    validate_client: bool,
    common: &mut CommonTlsContext,
) {
    let pairs: Vec<(&str, &str)> = if tls.tls_certificates.is_empty() {
        vec![(&tls.server_certificate, &tls.private_key)]
    } else {
        tls.tls_certificates
            .iter()
            .map(|c| (c.server_certificate.as_str(), c.private_key.as_str()))
            .collect()
    };
    common.tls_certificate_sds_secret_configs = pairs
        .into_iter()
        .map(|(cert, key)| {
            secret(if cert.is_empty() || key.is_empty() {
                WORKLOAD_CERT.to_string()
            } else {
                sds::cert_secret_name(cert, key)
            })
        })
        .collect();
    if validate_client {
        let roots = if tls.ca_certificates.is_empty() {
            WORKLOAD_ROOTS.to_string()
        } else {
            sds::root_secret_name(&tls.ca_certificates)
        };
        common.validation_context_type = Some(combined(file_checks(tls), secret(roots)));
    }
}

/// The checks of a client certificate istiod makes beside files (and for ISTIO_MUTUAL):
/// `subjectAltNames`, `caCrl`, and `insecureSkipVerify`.
fn file_checks(tls: &ServerTlsSettings) -> CertificateValidationContext {
    CertificateValidationContext {
        crl: (!tls.ca_crl.is_empty()).then(|| DataSource {
            specifier: Some(Specifier::Filename(tls.ca_crl.clone())),
            ..Default::default()
        }),
        trust_chain_verification: trust_chain(tls),
        ..san_checks(&tls.subject_alt_names)
    }
}

fn trust_chain(tls: &ServerTlsSettings) -> i32 {
    if tls.insecure_skip_verify == Some(true) {
        TrustChainVerification::AcceptUntrusted as i32
    } else {
        TrustChainVerification::VerifyTrustChain as i32
    }
}

/// istiod's `StringToExactMatch`: each name exactly.
#[allow(deprecated)]
fn san_checks(sans: &[String]) -> CertificateValidationContext {
    CertificateValidationContext {
        match_subject_alt_names: sans
            .iter()
            .map(|san| StringMatcher {
                match_pattern: Some(MatchPattern::Exact(san.clone())),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn combined(checks: CertificateValidationContext, roots: SdsSecretConfig) -> ValidationContextType {
    ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
        default_validation_context: Some(checks),
        validation_context_sds_secret_config: Some(roots),
        ..Default::default()
    })
}

/// istiod's `ConstructSdsSecretConfigForCredential` name: `builtin://` is the workload
/// certificate, `sds://NAME` (no external SDS provider in axon) is `NAME` over ADS, and
/// istiod's `ToResourceName`: a name with its own type keeps it, others are Kubernetes
/// Secrets (`kubernetes://NAME`).
pub(super) fn credential_resource(name: &str) -> String {
    if name == "builtin://" {
        return WORKLOAD_CERT.to_string();
    }
    if name == format!("builtin://{CA_SUFFIX}") {
        return WORKLOAD_ROOTS.to_string();
    }
    let name = name.strip_prefix("sds://").unwrap_or(name);
    if name.starts_with("builtin://") {
        return WORKLOAD_CERT.to_string();
    }
    if name.starts_with("invalid://") {
        return "invalid://".to_string();
    }
    if ["configmap://", KUBERNETES, "kubernetes-gateway://"]
        .iter()
        .any(|p| name.starts_with(p))
    {
        return name.to_string();
    }
    format!("{KUBERNETES}{name}")
}

/// The secret `name` over ADS (istiod's `SDSAdsConfig`: Envoy's default initial fetch
/// timeout, so that a missing secret does not hold the listener forever).
fn secret(name: String) -> SdsSecretConfig {
    SdsSecretConfig {
        name,
        sds_config: Some(ads_config_source()),
    }
}

/// istiod's `applyServerTLSSettings`: only what the server sets.
fn tls_params(tls: &ServerTlsSettings) -> Option<TlsParameters> {
    let min = protocol(&tls.min_protocol_version);
    let max = protocol(&tls.max_protocol_version);
    let mut suites: Vec<String> = Vec::new();
    for s in &tls.cipher_suites {
        if valid_cipher_suite(s) && !suites.contains(s) {
            suites.push(s.clone());
        }
    }
    if min.is_none() && max.is_none() && suites.is_empty() {
        return None;
    }
    Some(TlsParameters {
        tls_minimum_protocol_version: min.unwrap_or(TlsProtocol::TlsAuto) as i32,
        tls_maximum_protocol_version: max.unwrap_or(TlsProtocol::TlsAuto) as i32,
        cipher_suites: suites,
        ..Default::default()
    })
}

/// A `TLSProtocol` other than `TLS_AUTO` (or none) as Envoy's.
fn protocol(name: &str) -> Option<TlsProtocol> {
    match name {
        "TLSV1_0" => Some(TlsProtocol::TlSv10),
        "TLSV1_1" => Some(TlsProtocol::TlSv11),
        "TLSV1_2" => Some(TlsProtocol::TlSv12),
        "TLSV1_3" => Some(TlsProtocol::TlSv13),
        _ => None,
    }
}

/// istiod's `IsValidCipherSuite`: a known suite, or an expression (`-`, `+`, `!`, `[`) istiod
/// passes on as is.
fn valid_cipher_suite(s: &str) -> bool {
    match s.chars().next() {
        None => true,
        Some(c) if !c.is_alphanumeric() => true,
        _ => s == "ALL" || CIPHER_SUITES.contains(&s),
    }
}

#[cfg(test)]
mod tests;
