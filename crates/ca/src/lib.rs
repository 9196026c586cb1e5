//! axon-ca: the mesh's certificate authority, as istiod's (`security/pkg/pki/ca`).
//!
//! - [`Authority`] (`authority.rs`): the signing material (the signing certificate and key,
//!   the chain above it, the root) and what it signs: a workload certificate from a CSR for
//!   the caller's proven identity only ([`Authority::sign_csr`]), and a serving certificate
//!   for axon's own DNS names ([`Authority::issue_server`]). Pure: the time is passed in.
//! - [`CaStore`] (`store.rs`): the directory (`--ca-dir`) in istiod's plug-in layout
//!   (`ca-cert.pem`, `ca-key.pem`, `cert-chain.pem`, `root-cert.pem`); without those files a
//!   self-signed root made once and written there, so that a restart keeps it; the files
//!   read again when they change (polled at most once a second).
//!
//! The transport serves `CreateCertificate` over it and maps [`SignError`] to gRPC codes.

mod authority;
mod store;

pub use authority::{Authority, IssuedServer};
pub use store::{CaStore, StoreError};

use std::time::Duration;

/// istiod's plug-in and self-signed file names (`security/pkg/pki/ca/ca.go`).
pub const CA_CERT_FILE: &str = "ca-cert.pem";
pub const CA_KEY_FILE: &str = "ca-key.pem";
pub const CERT_CHAIN_FILE: &str = "cert-chain.pem";
pub const ROOT_CERT_FILE: &str = "root-cert.pem";

/// How long istiod backdates what it issues (`util.ClockSkewGracePeriod`).
pub const CLOCK_SKEW_GRACE: Duration = Duration::from_secs(120);

/// The lifetimes of what the CA issues (limits keys `workload_cert_ttl`,
/// `max_workload_cert_ttl`, `self_signed_root_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaTtls {
    /// A workload certificate's lifetime when the request asks none (istiod: 24h).
    pub default: Duration,
    /// The longest a request may ask (istiod: 90 days); longer is refused.
    pub max: Duration,
    /// The self-signed root's lifetime (istiod: 10 years).
    pub root: Duration,
}

impl Default for CaTtls {
    fn default() -> CaTtls {
        CaTtls {
            default: Duration::from_secs(24 * 3600),
            max: Duration::from_secs(90 * 24 * 3600),
            root: Duration::from_secs(10 * 365 * 24 * 3600),
        }
    }
}

/// Why a signing was refused; istiod's error types (`security/pkg/pki/error`), whose gRPC
/// codes the transport uses: a bad CSR or TTL is INVALID_ARGUMENT, the rest INTERNAL.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The CSR does not parse, or its signature does not verify (`CSR_ERROR`).
    #[error("{0}")]
    Csr(String),
    /// The requested lifetime is above the maximum (`TTL_ERROR`).
    #[error("requested TTL {requested:?} is greater than the max allowed TTL {max:?}")]
    Ttl { requested: Duration, max: Duration },
    /// The CA cannot sign now: its signing certificate has expired (`CA_NOT_READY`).
    #[error("{0}")]
    NotReady(String),
    /// The certificate could not be made (`CERT_GEN_ERROR`).
    #[error("{0}")]
    Generate(String),
}

impl SignError {
    /// istiod's `error` label of `citadel_server_csr_sign_err_count`.
    pub fn error_type(&self) -> &'static str {
        match self {
            SignError::Csr(_) => "CSR_ERROR",
            SignError::Ttl { .. } => "TTL_ERROR",
            SignError::NotReady(_) => "CA_NOT_READY",
            SignError::Generate(_) => "CERT_GEN_ERROR",
        }
    }

    /// Whether the request was at fault (INVALID_ARGUMENT) rather than the CA (INTERNAL).
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, SignError::Csr(_) | SignError::Ttl { .. })
    }
}
