//! A cluster's upstream TLS, as istiod's `buildUpstreamClusterTLSContext` and
//! `constructUpstreamTLS` build it (`cluster_tls.go`) for `SIMPLE` and `MUTUAL` with
//! certificates from files: TLS 1.2 to 1.3, the `sni` (else Envoy's `auto_sni` from the
//! request's host), the upstream's certificate checked against `caCertificates` (else the
//! system's roots, as istio-agent's `system`) and `subjectAltNames` (else `auto_san_validation`
//! against the host), or not checked with `insecureSkipVerify`; `h2` as the only ALPN on an
//! HTTP/2 cluster.
//!
//! The files reach Envoy over SDS, as istiod's do (its agent serves them): the secrets
//! `file-cert:CERT~KEY` and `file-root:CA`, which axon serves itself (`sds`), pointing Envoy
//! at the files, so that a file Envoy cannot read fails that secret and not the whole CDS
//! update. The CRL, as istiod's, is read from its file directly.
//!
//! `credentialName` (istiod's `ApplyCustomSDSToClientCommonTLSContext`): the client
//! certificate of MUTUAL is the SDS secret `kubernetes://NAME` and the roots (unless
//! `insecureSkipVerify`) `kubernetes://NAME-cacert`, which `sds` serves from the Secret of the
//! proxy's namespace. As istiod, a sidecar whose DestinationRule has no `workloadSelector`
//! sends no TLS for it (the credential would reach every sidecar of the rule's scope) unless
//! it is a `configmap://` CA, which any proxy may read.
//!
//! `ISTIO_MUTUAL` (istiod's `buildUpstreamTLSSettings` and its `ISTIO_MUTUAL` context): the
//! workload certificate `default` and roots `ROOTCA` over the agent's `sds-grpc` cluster, the
//! SNI `outbound_.PORT_.SUBSET_.HOST` unless the rule sets one, the destination's service
//! accounts unless it names `subjectAltNames`, ALPN `istio-peer-exchange`, `istio` (and `h2`).
//! Only a proxy run by istio's pilot-agent has that cluster (`Proxy::istio_agent`); to any
//! other, Envoy would refuse the cluster, so it gets plaintext, as `model::applied` says. A
//! proxy whose metadata names client certificate files (`TLS_CLIENT_CERT_CHAIN`, ...) uses
//! them instead, as `MUTUAL` (istiod's `metadataCerts`; for `MUTUAL` too, but to a
//! MESH_EXTERNAL service, whose rule's own certificates win).

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ApiVersion, ConfigSource, DataSource, GrpcService, TransportSocket,
    UpstreamHttpProtocolOptions,
    api_config_source::ApiType,
    config_source::ConfigSourceSpecifier,
    data_source::Specifier,
    grpc_service::{EnvoyGrpc, TargetSpecifier},
    transport_socket::ConfigType,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, SdsSecretConfig, TlsParameters,
    UpstreamTlsContext,
    certificate_validation_context::SystemRootCerts,
    common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
    tls_parameters::TlsProtocol,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::Duration;

use crate::generate::sds;
use crate::resource::any;
use axon_config::istio::traffic_policy::{ClientTls, TlsMode};
use axon_model::proxy::MetadataCerts;
use axon_model::secrets;

/// Envoy's name of the TLS transport socket.
const TLS_SOCKET: &str = "envoy.transport_sockets.tls";

/// Whether axon translates `tls` (the other modes are reported).
pub(super) fn is_translated(tls: &ClientTls) -> bool {
    matches!(
        tls.mode,
        TlsMode::Simple | TlsMode::Mutual | TlsMode::IstioMutual
    )
}

/// The agent's SDS cluster, in istio's bootstrap.
const SDS_GRPC: &str = "sds-grpc";
/// istio-agent's secret of the workload certificate.
pub(crate) const WORKLOAD_CERT: &str = "default";
/// istio-agent's secret of the mesh's roots.
pub(crate) const WORKLOAD_ROOTS: &str = "ROOTCA";

/// What `ISTIO_MUTUAL` (and the metadata certificates) need to know of the proxy and the
/// destination.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mesh<'a> {
    /// The proxy's metadata certificates.
    pub client_certs: Option<&'a MetadataCerts>,
    /// The proxy runs beside istio's agent (its bootstrap has `sds-grpc`).
    pub istio_agent: bool,
    /// `outbound_.PORT_.SUBSET_.HOST`: istiod's SNI of `ISTIO_MUTUAL`.
    pub sni: &'a str,
    /// The destination's service accounts (`PushContext::service_accounts`).
    pub service_accounts: &'a [String],
    /// The destination is MESH_EXTERNAL.
    pub mesh_external: bool,
}

/// Sets `cluster`'s transport socket from `tls`; `http2`: whether the cluster speaks HTTP/2.
/// `service_sans`: the ServiceEntry's `subjectAltNames`, checked when `tls` names none (istiod
/// does so for ServiceEntry services, after deciding on the automatic SAN check).
/// `sidecar_without_selector`: the proxy is a sidecar and its DestinationRule has no
/// `workloadSelector`, so a `credentialName` is not used (istiod's
/// `buildUpstreamClusterTLSContext`).
pub(super) fn apply(
    cluster: &mut Cluster,
    http: &mut Option<HttpProtocolOptions>,
    tls: Option<&ClientTls>,
    http2: bool,
    service_sans: &[String],
    sidecar_without_selector: bool,
    mesh: Mesh<'_>,
) {
    let Some(tls) = tls.filter(|t| is_translated(t)) else {
        return;
    };
    // istiod's `privilegedCredentialLookup`: a ConfigMap's CA is anyone's to read.
    if !tls.credential_name.is_empty()
        && !tls
            .credential_name
            .starts_with(secrets::KUBERNETES_CONFIGMAP_PREFIX)
        && sidecar_without_selector
    {
        return;
    }
    // istiod's `buildUpstreamTLSSettings`: the metadata certificates replace MUTUAL's and
    // ISTIO_MUTUAL's, but not for a MESH_EXTERNAL destination.
    let from_metadata;
    let tls = match mesh.client_certs {
        Some(certs) if tls.mode != TlsMode::Simple && !mesh.mesh_external => {
            from_metadata = ClientTls {
                mode: TlsMode::Mutual,
                client_certificate: certs.cert_chain.clone(),
                private_key: certs.key.clone(),
                ca_certificates: certs.root_cert.clone(),
                credential_name: String::new(),
                subject_alt_names: tls.subject_alt_names.clone(),
                sni: tls.sni.clone(),
                insecure_skip_verify: tls.insecure_skip_verify,
                ..ClientTls::default()
            };
            &from_metadata
        }
        _ => tls,
    };
    if tls.mode == TlsMode::IstioMutual {
        if !mesh.istio_agent {
            return;
        }
        let context = istio_mutual_context(tls, http2, mesh);
        cluster.transport_socket = Some(TransportSocket {
            name: TLS_SOCKET.to_string(),
            config_type: Some(ConfigType::TypedConfig(any(&context))),
        });
        return;
    }
    apply_auto_sni_and_san(http, tls);
    let defaulted;
    let tls =
        if tls.subject_alt_names.as_ref().is_none_or(Vec::is_empty) && !service_sans.is_empty() {
            defaulted = ClientTls {
                subject_alt_names: Some(service_sans.to_vec()),
                ..tls.clone()
            };
            &defaulted
        } else {
            tls
        };
    let context = upstream_context(tls, http2);
    cluster.transport_socket = Some(TransportSocket {
        name: TLS_SOCKET.to_string(),
        config_type: Some(ConfigType::TypedConfig(any(&context))),
    });
}

/// istiod's `ISTIO_MUTUAL` context: the agent's workload certificate and roots, the rule's
/// SNI or `outbound_.PORT_.SUBSET_.HOST`, its SANs or the destination's service accounts.
fn istio_mutual_context(tls: &ClientTls, http2: bool, mesh: Mesh<'_>) -> UpstreamTlsContext {
    let sans = match tls.subject_alt_names.as_deref() {
        Some(sans) if !sans.is_empty() => sans.to_vec(),
        _ => mesh.service_accounts.to_vec(),
    };
    #[allow(deprecated)]
    let checks = CertificateValidationContext {
        match_subject_alt_names: sans
            .into_iter()
            .map(|san| StringMatcher {
                match_pattern: Some(MatchPattern::Exact(san)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let alpn: &[&str] = if http2 {
        &["istio-peer-exchange", "istio", "h2"]
    } else {
        &["istio-peer-exchange", "istio"]
    };
    UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_params: Some(TlsParameters {
                tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
                tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
                ..Default::default()
            }),
            tls_certificate_sds_secret_configs: vec![agent_secret(WORKLOAD_CERT)],
            validation_context_type: Some(ValidationContextType::CombinedValidationContext(
                CombinedCertificateValidationContext {
                    default_validation_context: Some(checks),
                    validation_context_sds_secret_config: Some(agent_secret(WORKLOAD_ROOTS)),
                    ..Default::default()
                },
            )),
            alpn_protocols: alpn.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }),
        sni: if tls.sni.is_empty() {
            mesh.sni.to_string()
        } else {
            tls.sni.clone()
        },
        ..Default::default()
    }
}

/// A secret of the agent beside Envoy (`sds-grpc`), waited for without a timeout, as
/// istiod's `default` and `ROOTCA`.
pub(crate) fn agent_secret(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.to_string(),
        sds_config: Some(ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::ApiConfigSource(
                ApiConfigSource {
                    api_type: ApiType::Grpc as i32,
                    set_node_on_first_message_only: true,
                    transport_api_version: ApiVersion::V3 as i32,
                    grpc_services: vec![GrpcService {
                        target_specifier: Some(TargetSpecifier::EnvoyGrpc(EnvoyGrpc {
                            cluster_name: SDS_GRPC.to_string(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )),
            resource_api_version: ApiVersion::V3 as i32,
            initial_fetch_timeout: Some(Duration {
                seconds: 0,
                nanos: 0,
            }),
            ..Default::default()
        }),
    }
}

/// The `UpstreamTlsContext` of a SIMPLE or MUTUAL `tls`.
pub(super) fn upstream_context(tls: &ClientTls, http2: bool) -> UpstreamTlsContext {
    let mut common = CommonTlsContext {
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
            tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
            ..Default::default()
        }),
        ..Default::default()
    };
    if !tls.credential_name.is_empty() {
        credential_context(&mut common, tls);
    } else {
        file_context(&mut common, tls);
    }
    if http2 {
        common.alpn_protocols = vec!["h2".to_string()];
    }
    UpstreamTlsContext {
        common_tls_context: Some(common),
        sni: tls.sni.clone(),
        ..Default::default()
    }
}

/// istiod's `ApplyCustomSDSToClientCommonTLSContext`: the credential's certificate (MUTUAL)
/// and roots, over SDS.
fn credential_context(common: &mut CommonTlsContext, tls: &ClientTls) {
    if tls.mode == TlsMode::Mutual {
        common.tls_certificate_sds_secret_configs =
            vec![secret_config(secrets::resource_name(&tls.credential_name))];
    }
    if tls.insecure_skip_verify == Some(true) {
        return;
    }
    #[allow(deprecated)]
    let checks = CertificateValidationContext {
        match_subject_alt_names: exact_sans(tls),
        ..Default::default()
    };
    common.validation_context_type = Some(ValidationContextType::CombinedValidationContext(
        CombinedCertificateValidationContext {
            default_validation_context: Some(checks),
            validation_context_sds_secret_config: Some(secret_config(secrets::ca_resource_name(
                &tls.credential_name,
            ))),
            ..Default::default()
        },
    ));
}

/// istiod's `StringToExactMatch`: each name exactly, whatever its type.
fn exact_sans(tls: &ClientTls) -> Vec<StringMatcher> {
    tls.subject_alt_names
        .iter()
        .flatten()
        .map(|san| StringMatcher {
            match_pattern: Some(MatchPattern::Exact(san.clone())),
            ..Default::default()
        })
        .collect()
}

/// The certificates of file paths, by istio-agent's SDS names.
fn file_context(common: &mut CommonTlsContext, tls: &ClientTls) {
    if tls.mode == TlsMode::Mutual {
        common
            .tls_certificate_sds_secret_configs
            .push(secret_config(sds::cert_secret_name(
                &tls.client_certificate,
                &tls.private_key,
            )));
    }
    common.validation_context_type = Some(if tls.insecure_skip_verify == Some(true) {
        ValidationContextType::ValidationContext(CertificateValidationContext::default())
    } else {
        #[allow(deprecated)]
        let checks = CertificateValidationContext {
            // istiod's `StringToExactMatch`: each name exactly, whatever its type.
            match_subject_alt_names: exact_sans(tls),
            crl: (!tls.ca_crl.is_empty()).then(|| file(&tls.ca_crl)),
            ..Default::default()
        };
        if tls.ca_certificates.is_empty() {
            // istio-agent's `system` roots, which Envoy has itself.
            ValidationContextType::ValidationContext(CertificateValidationContext {
                system_root_certs: Some(SystemRootCerts {}),
                ..checks
            })
        } else {
            ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
                default_validation_context: Some(checks),
                validation_context_sds_secret_config: Some(secret_config(sds::root_secret_name(
                    &tls.ca_certificates,
                ))),
                ..Default::default()
            })
        }
    });
}

/// istiod's `setAutoSniAndAutoSanValidation`: without an `sni`, the SNI is the request's
/// host, and without `subjectAltNames` either the certificate must name that host.
fn apply_auto_sni_and_san(http: &mut Option<HttpProtocolOptions>, tls: &ClientTls) {
    let auto_sni = tls.sni.is_empty();
    let no_sans = tls.subject_alt_names.as_ref().is_none_or(Vec::is_empty);
    let auto_san = auto_sni && no_sans && tls.insecure_skip_verify != Some(true);
    if !auto_sni && !auto_san {
        return;
    }
    let options = http
        .get_or_insert_with(Default::default)
        .upstream_http_protocol_options
        .get_or_insert_with(UpstreamHttpProtocolOptions::default);
    options.auto_sni |= auto_sni;
    options.auto_san_validation |= auto_san;
}

/// A reference to the secret `name`, served over ADS (`sds`).
fn secret_config(name: String) -> SdsSecretConfig {
    SdsSecretConfig {
        name,
        sds_config: Some(super::ads_config_source()),
    }
}

fn file(path: &str) -> DataSource {
    DataSource {
        specifier: Some(Specifier::Filename(path.to_string())),
        ..Default::default()
    }
}
