//! The mutual TLS of a sidecar's inbound chains, as istiod builds it
//! (`filterchain_options.go`, `security/authn/utils.BuildInboundTLS`, `listener_inbound.go`):
//! which chains a port gets for its protocol and PeerAuthentication mode, the TLS a chain
//! terminates, and the TLS inspector that tells them apart.
//!
//! | protocol | STRICT | PERMISSIVE | DISABLE |
//! |---|---|---|---|
//! | HTTP | HTTP over mTLS | HTTP over mTLS (Istio's ALPNs), HTTP | HTTP |
//! | TCP | TCP over mTLS | TCP over mTLS (Istio's ALPNs), TLS passed through, TCP | TCP |
//! | sniffed | HTTP over mTLS (`istio-http/*`, `istio-h2`), TCP over mTLS | those two, HTTP (plaintext ALPNs), TCP over mTLS (`istio-peer-exchange`, `istio`), TCP, TLS passed through | HTTP (plaintext ALPNs), TCP |
//!
//! The TLS: the agent's workload certificate `default` and roots `ROOTCA` (over `sds-grpc`),
//! a client certificate required and its SAN one of the mesh's trust domains
//! (`spiffe://TD/`, the trust domain and its aliases), TLS 1.2 (MeshConfig
//! `meshMTLS.minProtocolVersion: TLSV1_3`: 1.3) to 1.3, istiod's ciphers (or `meshMTLS`'s);
//! ALPN `h2`, `http/1.1` for HTTP, and `istio-peer-exchange` first for TCP.
//!
//! A sidecar without istio's agent (no `ISTIO_VERSION`: its bootstrap has no `sds-grpc`)
//! cannot terminate mutual TLS: its ports are plaintext, but a STRICT port refuses every
//! connection (a chain to the `BlackHoleCluster`) rather than accept plaintext.

use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, TlsParameters,
    common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
    tls_parameters::TlsProtocol,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::BoolValue;

use super::outbound::{ListenerProtocol, PLAINTEXT_HTTP_ALPNS};
use crate::generate::cds::tls::{WORKLOAD_CERT, WORKLOAD_ROOTS, agent_secret};
use axon_config::mesh::MeshConfig;
use axon_model::peer_authn::MtlsMode;

/// Envoy's transport protocol of TLS, as the TLS inspector reports it.
pub(super) const TLS: &str = "tls";
/// istiod's `mtlsHTTPALPNs`.
const MTLS_HTTP_ALPNS: &[&str] = &["istio-http/1.0", "istio-http/1.1", "istio-h2"];
/// istiod's `allIstioMtlsALPNs`.
const ALL_ISTIO_MTLS_ALPNS: &[&str] = &[
    "istio",
    "istio-peer-exchange",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
];
/// istiod's `mtlsTCPWithMxcALPNs`.
const MTLS_TCP_ALPNS: &[&str] = &["istio-peer-exchange", "istio"];
/// istiod's `ALPNHttp`, offered by an HTTP chain's TLS.
const ALPN_HTTP: &[&str] = &["h2", "http/1.1"];
/// istiod's `ALPNDownstreamWithMxc`, offered by a TCP chain's TLS.
const ALPN_TCP: &[&str] = &["istio-peer-exchange", "h2", "http/1.1"];
/// istiod's `SupportedCiphers` of inbound mutual TLS.
const SUPPORTED_CIPHERS: &[&str] = &[
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-GCM-SHA256",
];

/// What a chain carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Carries {
    Http,
    Tcp,
}

/// One chain of a port (istiod's `FilterChainMatchOptions`): the ALPNs and transport it
/// matches, what it carries, and whether it terminates mutual TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MatchOption {
    pub alpns: &'static [&'static str],
    /// Matches TLS (else `raw_buffer`).
    pub tls_transport: bool,
    pub carries: Carries,
    pub terminates: bool,
}

const fn opt(
    alpns: &'static [&'static str],
    tls_transport: bool,
    carries: Carries,
    terminates: bool,
) -> MatchOption {
    MatchOption {
        alpns,
        tls_transport,
        carries,
        terminates,
    }
}

use Carries::{Http, Tcp};

const HTTP_STRICT: &[MatchOption] = &[opt(&[], true, Http, true)];
const HTTP_PERMISSIVE: &[MatchOption] = &[
    opt(ALL_ISTIO_MTLS_ALPNS, true, Http, true),
    opt(&[], false, Http, false),
];
const HTTP_PLAIN: &[MatchOption] = &[opt(&[], false, Http, false)];
const TCP_STRICT: &[MatchOption] = &[opt(&[], true, Tcp, true)];
const TCP_PERMISSIVE: &[MatchOption] = &[
    opt(ALL_ISTIO_MTLS_ALPNS, true, Tcp, true),
    opt(&[], true, Tcp, false),
    opt(&[], false, Tcp, false),
];
const TCP_PLAIN: &[MatchOption] = &[opt(&[], false, Tcp, false)];
const AUTO_STRICT: &[MatchOption] = &[
    opt(MTLS_HTTP_ALPNS, true, Http, true),
    opt(&[], true, Tcp, true),
];
const AUTO_PERMISSIVE: &[MatchOption] = &[
    opt(MTLS_HTTP_ALPNS, true, Http, true),
    opt(&PLAINTEXT_HTTP_ALPNS, false, Http, false),
    opt(MTLS_TCP_ALPNS, true, Tcp, true),
    opt(&[], false, Tcp, false),
    opt(&[], true, Tcp, false),
];
const AUTO_PLAIN: &[MatchOption] = &[
    opt(&PLAINTEXT_HTTP_ALPNS, false, Http, false),
    opt(&[], false, Tcp, false),
];

/// istiod's `getFilterChainMatchOptions`: the chains of a port of `protocol` (`None`: TCP)
/// in `mode`.
pub(super) fn match_options(
    protocol: Option<ListenerProtocol>,
    mode: MtlsMode,
) -> &'static [MatchOption] {
    match (protocol, mode) {
        (Some(ListenerProtocol::Http), MtlsMode::Strict) => HTTP_STRICT,
        (Some(ListenerProtocol::Http), MtlsMode::Permissive) => HTTP_PERMISSIVE,
        (Some(ListenerProtocol::Http), MtlsMode::Disable) => HTTP_PLAIN,
        (Some(ListenerProtocol::Auto), MtlsMode::Strict) => AUTO_STRICT,
        (Some(ListenerProtocol::Auto), MtlsMode::Permissive) => AUTO_PERMISSIVE,
        (Some(ListenerProtocol::Auto), MtlsMode::Disable) => AUTO_PLAIN,
        (_, MtlsMode::Strict) => TCP_STRICT,
        (_, MtlsMode::Permissive) => TCP_PERMISSIVE,
        (_, MtlsMode::Disable) => TCP_PLAIN,
    }
}

/// How a port is served to a proxy: by its mode, or (STRICT without the agent) refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PortMtls {
    Mode(MtlsMode),
    Refuse,
}

impl PortMtls {
    /// `mode` for a proxy with or without istio's agent.
    pub(super) fn for_proxy(mode: MtlsMode, istio_agent: bool) -> PortMtls {
        match (mode, istio_agent) {
            (mode, true) => PortMtls::Mode(mode),
            (MtlsMode::Strict, false) => PortMtls::Refuse,
            (_, false) => PortMtls::Mode(MtlsMode::Disable),
        }
    }
}

/// istiod's `BuildInboundTLS`: the TLS a chain carrying `carries` terminates.
pub(super) fn inbound_tls(carries: Carries, mesh: &MeshConfig) -> DownstreamTlsContext {
    let alpn = match carries {
        Http => ALPN_HTTP,
        Tcp => ALPN_TCP,
    };
    let ciphers: Vec<String> = match &mesh.mesh_mtls.cipher_suites {
        Some(own) => own.clone(),
        None => SUPPORTED_CIPHERS.iter().map(|c| c.to_string()).collect(),
    };
    let mut domains = vec![mesh.trust_domain.as_str()];
    for alias in &mesh.trust_domain_aliases {
        if !alias.is_empty() && !domains.contains(&alias.as_str()) {
            domains.push(alias);
        }
    }
    #[allow(deprecated)]
    let checks = CertificateValidationContext {
        match_subject_alt_names: domains
            .into_iter()
            .filter(|d| !d.is_empty())
            .map(|td| StringMatcher {
                match_pattern: Some(MatchPattern::Prefix(format!("spiffe://{td}/"))),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let min = if mesh.mesh_mtls.min_tls13 {
        TlsProtocol::TlSv13
    } else {
        TlsProtocol::TlSv12
    };
    DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            alpn_protocols: alpn.iter().map(|a| a.to_string()).collect(),
            tls_params: Some(TlsParameters {
                tls_minimum_protocol_version: min as i32,
                tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
                cipher_suites: ciphers,
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
            ..Default::default()
        }),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
