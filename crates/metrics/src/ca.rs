//! The CA's families, with istiod's names (`security/pkg/server/ca/monitoring.go`).

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// What `CreateCertificate` counts.
#[derive(Clone)]
pub struct CaMetrics {
    /// `citadel_server_csr_count`: CSRs received.
    pub csr: IntCounter,
    /// `citadel_server_authentication_failure_count`: callers who proved no identity.
    pub authn_failures: IntCounter,
    /// `axon_ca_permission_denied{reason}`: callers whose identity this CA does not sign
    /// (`trust_domain`); istiod has no such refusal.
    pub permission_denied: IntCounterVec,
    /// `citadel_server_csr_parsing_err_count`: requests or CSRs that do not parse.
    pub csr_parsing_errors: IntCounter,
    /// `citadel_server_csr_sign_err_count{error}`: signings refused, by istiod's error type
    /// (`CSR_ERROR`, `TTL_ERROR`, `CA_NOT_READY`, `CERT_GEN_ERROR`).
    pub sign_errors: IntCounterVec,
    /// `citadel_server_success_cert_issuance_count`: certificates issued.
    pub success: IntCounter,
    /// `citadel_server_root_cert_expiry_timestamp`: when the root expires (unix seconds).
    pub root_expiry: IntGauge,
}

impl CaMetrics {
    pub(crate) fn register(registry: &Registry) -> CaMetrics {
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let by = |name: &str, help: &str, label: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let root_expiry = IntGauge::new(
            "citadel_server_root_cert_expiry_timestamp",
            "The unix timestamp, in seconds, when the root cert will expire.",
        )
        .expect("valid metric");
        registry
            .register(Box::new(root_expiry.clone()))
            .expect("unique metric");
        let m = CaMetrics {
            csr: counter(
                "citadel_server_csr_count",
                "The number of CSRs received by Citadel server.",
            ),
            authn_failures: counter(
                "citadel_server_authentication_failure_count",
                "The number of authentication failures.",
            ),
            permission_denied: by(
                "axon_ca_permission_denied",
                "CSRs refused for an identity this CA does not sign, by reason (trust_domain).",
                "reason",
            ),
            csr_parsing_errors: counter(
                "citadel_server_csr_parsing_err_count",
                "The number of errors occurred when parsing the CSR.",
            ),
            sign_errors: by(
                "citadel_server_csr_sign_err_count",
                "The number of errors occurred when signing the CSR.",
                "error",
            ),
            success: counter(
                "citadel_server_success_cert_issuance_count",
                "The number of certificates issuances that have succeeded.",
            ),
            root_expiry,
        };
        m.permission_denied.with_label_values(&["trust_domain"]);
        m
    }
}
