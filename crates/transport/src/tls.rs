//! TLS on the xDS port (`--xds-tls-addr`): axon's certificate and key, and the CA that client
//! certificates chain to, read from files and read again when they change (new handshakes use
//! the new ones; open connections keep theirs), and the identity a client certificate
//! carries: its SPIFFE URI SAN.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

use axon_model::identity::Identity;

/// The files of the TLS port.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA bundle client certificates chain to; without it no client certificate is asked.
    pub client_ca: Option<PathBuf>,
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

/// The TLS configuration, reloaded when its files change (looked at most once a second, on
/// accept). A reload that fails keeps the previous configuration and says why.
pub struct TlsReloader {
    files: TlsFiles,
    state: Mutex<Loaded>,
}

struct Loaded {
    stamps: Vec<Option<(SystemTime, u64)>>,
    acceptor: TlsAcceptor,
    checked: Instant,
}

impl TlsReloader {
    /// Loads the files; an error names the file and the reason (start-up fails on it).
    pub fn load(files: TlsFiles) -> Result<TlsReloader, TlsError> {
        let acceptor = acceptor(&files)?;
        let stamps = stamps(&files);
        Ok(TlsReloader {
            files,
            state: Mutex::new(Loaded {
                stamps,
                acceptor,
                checked: Instant::now(),
            }),
        })
    }

    /// The acceptor for a new handshake, reloaded first if the files changed.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= Duration::from_secs(1) {
            state.checked = Instant::now();
            let now = stamps(&self.files);
            if now != state.stamps {
                match acceptor(&self.files) {
                    Ok(acceptor) => {
                        tracing::info!(cert = %self.files.cert.display(), "xDS TLS certificate files changed; new handshakes use them");
                        state.acceptor = acceptor;
                        state.stamps = now;
                    }
                    Err(e) => {
                        // Keep serving with what worked; try again when the files move again.
                        tracing::warn!(error = %e, "xDS TLS files changed but cannot be loaded; the previous ones stay in use");
                        state.stamps = now;
                    }
                }
            }
        }
        state.acceptor.clone()
    }
}

fn stamps(files: &TlsFiles) -> Vec<Option<(SystemTime, u64)>> {
    [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|p| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
    })
    .collect()
}

fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| file_error(&files.cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(&files.cert, e))?;
    if certs.is_empty() {
        return Err(file_error(&files.cert, "no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| file_error(&files.key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca).map_err(|e| file_error(ca, e))? {
                roots
                    .add(cert.map_err(|e| file_error(ca, e))?)
                    .map_err(|e| file_error(ca, e))?;
            }
            // A client without a certificate may still present a token (checked per stream).
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| file_error(ca, e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| file_error(&files.key, format!("does not fit the certificate: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
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
