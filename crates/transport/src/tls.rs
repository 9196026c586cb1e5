//! TLS on the xDS port (`--xds-tls-addr`): axon's serving certificate and the roots client
//! certificates chain to, and the identity a client certificate carries (its SPIFFE URI SAN).
//!
//! The serving certificate is read from files (`--tls-cert`, `--tls-key`) or, without them,
//! issued by axon's CA for its DNS names and renewed at half its life. Client certificates
//! chain to `--client-ca` or to the CA's root (a certificate the CA issued renews itself).
//! The configuration is built once per change (files, the CA's material, a renewal), looked
//! at most once a second on accept: new handshakes use the new one, open connections keep
//! theirs; one that fails to build keeps the previous and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

use axon_ca::{Authority, CaStore};
use axon_model::identity::Identity;

/// Where axon's serving certificate comes from.
#[derive(Debug, Clone)]
pub enum ServingCert {
    /// `--tls-cert` (the chain, PEM) and `--tls-key`, re-read when they change.
    Files { cert: PathBuf, key: PathBuf },
    /// Issued by axon's CA for `dns_names`, valid `ttl`, renewed at half of it and whenever
    /// the CA's material changes.
    Ca {
        dns_names: Vec<String>,
        ttl: Duration,
    },
}

/// The TLS port's settings.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub serving: ServingCert,
    /// The CA bundle client certificates chain to, besides axon's CA root; with neither no
    /// client certificate is asked.
    pub client_ca: Option<PathBuf>,
    /// Offer HTTP/1.1 besides HTTP/2 in ALPN (the webhook: the API server and any HTTPS
    /// client); the xDS port offers HTTP/2 alone.
    pub http1: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error("{0}")]
    Config(String),
}

fn file_error(path: &Path, reason: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// The TLS configuration, built again when what it is made of changes (looked at most once a
/// second, on accept).
pub struct TlsReloader {
    settings: TlsSettings,
    ca: Option<Arc<CaStore>>,
    state: Mutex<Loaded>,
}

struct Loaded {
    stamps: Vec<Option<(SystemTime, u64)>>,
    /// The CA material the configuration was built with.
    authority: Option<Arc<Authority>>,
    /// When a CA-issued serving certificate is renewed.
    renew_at: Option<SystemTime>,
    acceptor: TlsAcceptor,
    checked: Instant,
}

impl TlsReloader {
    /// Builds the configuration; an error names the file and the reason (start-up fails on
    /// it). `ca` is axon's CA, if it runs one (`--ca-dir`).
    pub fn load(settings: TlsSettings, ca: Option<Arc<CaStore>>) -> Result<TlsReloader, TlsError> {
        if matches!(settings.serving, ServingCert::Ca { .. }) && ca.is_none() {
            return Err(TlsError::Config(
                "no serving certificate: give --tls-cert and --tls-key, or --ca-dir for axon's CA to issue one"
                    .to_string(),
            ));
        }
        let authority = ca.as_ref().map(|ca| ca.current());
        let (acceptor, renew_at) = build(&settings, authority.as_deref())?;
        Ok(TlsReloader {
            state: Mutex::new(Loaded {
                stamps: stamps(&settings),
                authority,
                renew_at,
                acceptor,
                checked: Instant::now(),
            }),
            settings,
            ca,
        })
    }

    /// The acceptor for a new handshake, built again first if what it is made of changed.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= Duration::from_secs(1) {
            state.checked = Instant::now();
            let stamps = stamps(&self.settings);
            let authority = self.ca.as_ref().map(|ca| ca.current());
            let files = stamps != state.stamps;
            let ca = match (&authority, &state.authority) {
                (Some(now), Some(then)) => !Arc::ptr_eq(now, then),
                _ => false,
            };
            let renew = state.renew_at.is_some_and(|at| SystemTime::now() >= at);
            if files || ca || renew {
                let why = if files {
                    "xDS TLS certificate files changed; new handshakes use them"
                } else if ca {
                    "the CA changed; new handshakes use its roots and a serving certificate it issued"
                } else {
                    "the xDS TLS serving certificate is past half its life; renewed"
                };
                match build(&self.settings, authority.as_deref()) {
                    Ok((acceptor, renew_at)) => {
                        tracing::info!("{why}");
                        state.acceptor = acceptor;
                        state.renew_at = renew_at;
                    }
                    Err(e) => {
                        // Keep serving with what worked; try again when something moves.
                        tracing::warn!(error = %e, "{why}, but the new TLS configuration cannot be built; the previous one stays in use");
                        state.renew_at = state
                            .renew_at
                            .map(|_| SystemTime::now() + Duration::from_secs(10));
                    }
                }
                state.stamps = stamps;
                state.authority = authority;
            }
        }
        state.acceptor.clone()
    }
}

fn stamps(settings: &TlsSettings) -> Vec<Option<(SystemTime, u64)>> {
    let files: Vec<&PathBuf> = match &settings.serving {
        ServingCert::Files { cert, key } => vec![cert, key],
        ServingCert::Ca { .. } => vec![],
    };
    files
        .into_iter()
        .chain(settings.client_ca.as_ref())
        .map(|p| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
        })
        .collect()
}

/// The acceptor, and when its serving certificate is to be renewed (issued by the CA).
fn build(
    settings: &TlsSettings,
    authority: Option<&Authority>,
) -> Result<(TlsAcceptor, Option<SystemTime>), TlsError> {
    let (certs, key, renew_at) = match &settings.serving {
        ServingCert::Files { cert, key } => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
                .map_err(|e| file_error(cert, e))?
                .collect::<Result<_, _>>()
                .map_err(|e| file_error(cert, e))?;
            if certs.is_empty() {
                return Err(file_error(cert, "no certificate in the file"));
            }
            let pkey = PrivateKeyDer::from_pem_file(key).map_err(|e| file_error(key, e))?;
            (certs, pkey, None)
        }
        ServingCert::Ca { dns_names, ttl } => {
            let Some(authority) = authority else {
                return Err(TlsError::Config(
                    "no CA to issue the serving certificate".into(),
                ));
            };
            let now = SystemTime::now();
            let issued = authority.issue_server(dns_names, *ttl, now).map_err(|e| {
                TlsError::Config(format!("issuing axon's serving certificate: {e}"))
            })?;
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(issued.chain_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| TlsError::Config(e.to_string()))?;
            let pkey = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes())
                .map_err(|e| TlsError::Config(e.to_string()))?;
            let life = issued.not_after.duration_since(now).unwrap_or_default();
            (certs, pkey, Some(now + life / 2))
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    if let Some(ca) = &settings.client_ca {
        for cert in CertificateDer::pem_file_iter(ca).map_err(|e| file_error(ca, e))? {
            roots
                .add(cert.map_err(|e| file_error(ca, e))?)
                .map_err(|e| file_error(ca, e))?;
        }
    }
    for anchor in authority.map(Authority::trust_anchors).unwrap_or_default() {
        roots
            .add(CertificateDer::from(anchor))
            .map_err(|e| TlsError::Config(format!("the CA's root: {e}")))?;
    }
    let builder = if roots.is_empty() {
        builder.with_no_client_auth()
    } else {
        // A client without a certificate may still present a token (checked per stream).
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::Config(format!("client certificate roots: {e}")))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        TlsError::Config(format!("the serving key does not fit its certificate: {e}"))
    })?;
    config.alpn_protocols = if settings.http1 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec()]
    };
    Ok((TlsAcceptor::from(Arc::new(config)), renew_at))
}

/// The SPIFFE identity of a (verified) client certificate: its first URI SAN that is one.
pub fn peer_identity(cert: &CertificateDer<'_>) -> Option<Identity> {
    use x509_parser::extensions::GeneralName;
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let san = parsed.subject_alternative_name().ok()??;
    san.value.general_names.iter().find_map(|name| match name {
        GeneralName::URI(uri) => Identity::from_spiffe(uri),
        _ => None,
    })
}
