//! [`CaStore`]: the CA's directory (`--ca-dir`), as istiod keeps its signing material.
//!
//! With istiod's plug-in files (`ca-cert.pem` and `ca-key.pem`, `root-cert.pem`, and
//! `cert-chain.pem` if there is a chain) axon signs as `ca-cert.pem`. Without them it makes a
//! self-signed root once and writes it there under the names of istiod's `istio-ca-secret`
//! (`ca-cert.pem`, `ca-key.pem`, `root-cert.pem`), so that a restart keeps the mesh's trust.
//! The files' stamps are looked at most once a second (on use); changed files are read again
//! and the new material used from then on (logged); files that do not load keep the previous
//! material and say why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::authority::Authority;
use crate::{CA_CERT_FILE, CA_KEY_FILE, CERT_CHAIN_FILE, CaTtls, ROOT_CERT_FILE};

/// Why the directory could not give a CA.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{dir}: {reason}")]
    Invalid { dir: String, reason: String },
}

/// The CA of a directory, read again when its files change.
pub struct CaStore {
    dir: PathBuf,
    ttls: CaTtls,
    state: Mutex<State>,
}

struct State {
    authority: Arc<Authority>,
    stamps: Vec<Option<(SystemTime, u64)>>,
    checked: Instant,
}

const FILES: [&str; 4] = [CA_CERT_FILE, CA_KEY_FILE, CERT_CHAIN_FILE, ROOT_CERT_FILE];

impl CaStore {
    /// Opens `dir` (made if missing): its plug-in files, else a self-signed root for
    /// `trust_domain` made now and written there. Start-up fails on files that do not load.
    pub fn open(dir: &Path, trust_domain: &str, ttls: CaTtls) -> Result<CaStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let (cert, key) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
        let authority = match (cert.exists(), key.exists()) {
            (true, true) => {
                let authority = load(dir)?;
                tracing::info!(
                    ca_dir = %dir.display(),
                    "CA: signing as {CA_CERT_FILE} of the CA directory"
                );
                authority
            }
            (false, false) => {
                let (authority, made) =
                    Authority::self_signed(trust_domain, ttls.root, SystemTime::now()).map_err(
                        |reason| StoreError::Invalid {
                            dir: dir.display().to_string(),
                            reason,
                        },
                    )?;
                // The certificate last: its presence says the directory holds a CA.
                write_file(&dir.join(CA_KEY_FILE), &made.key_pem, true)?;
                write_file(&dir.join(ROOT_CERT_FILE), &made.cert_pem, false)?;
                write_file(&cert, &made.cert_pem, false)?;
                tracing::info!(
                    ca_dir = %dir.display(),
                    root_ttl = ?ttls.root,
                    "CA: no plug-in certificate in the CA directory: made a self-signed root and wrote it there"
                );
                authority
            }
            _ => {
                return Err(StoreError::Invalid {
                    dir: dir.display().to_string(),
                    reason: format!(
                        "holds one of {CA_CERT_FILE} and {CA_KEY_FILE} without the other"
                    ),
                });
            }
        };
        Ok(CaStore {
            state: Mutex::new(State {
                authority: Arc::new(authority),
                stamps: stamps(dir),
                checked: Instant::now(),
            }),
            dir: dir.to_path_buf(),
            ttls,
        })
    }

    /// Writes signing material into `dir` (made if missing) under istiod's names, each file
    /// whole, the key readable by its owner only, `ca-cert.pem` last (its presence says the
    /// directory holds a CA); `cert-chain.pem` only when `chain` is not empty. For a root
    /// kept elsewhere (a Kubernetes Secret) that [`CaStore::open`] is then to use.
    pub fn write_files(
        dir: &Path,
        ca_cert: &str,
        ca_key: &str,
        chain: &str,
        root: &str,
    ) -> Result<(), StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        write_file(&dir.join(CA_KEY_FILE), ca_key, true)?;
        if !chain.is_empty() {
            write_file(&dir.join(CERT_CHAIN_FILE), chain, false)?;
        }
        write_file(&dir.join(ROOT_CERT_FILE), root, false)?;
        write_file(&dir.join(CA_CERT_FILE), ca_cert, false)
    }

    /// Whether `dir` holds a CA (`ca-cert.pem` and `ca-key.pem`).
    pub fn holds_ca(dir: &Path) -> bool {
        dir.join(CA_CERT_FILE).exists() && dir.join(CA_KEY_FILE).exists()
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lifetimes of what the CA issues.
    pub fn ttls(&self) -> &CaTtls {
        &self.ttls
    }

    /// The current signing material, read again first if the files changed (looked at most
    /// once a second). The same `Arc` until they change.
    pub fn current(&self) -> Arc<Authority> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= Duration::from_secs(1) {
            state.checked = Instant::now();
            let now = stamps(&self.dir);
            if now != state.stamps {
                state.stamps = now;
                match load(&self.dir) {
                    Ok(authority) => {
                        tracing::info!(
                            ca_dir = %self.dir.display(),
                            "CA files changed; new certificates are signed with them"
                        );
                        state.authority = Arc::new(authority);
                    }
                    Err(e) => tracing::warn!(
                        error = %e,
                        "CA files changed but cannot be loaded; the previous ones stay in use"
                    ),
                }
            }
        }
        state.authority.clone()
    }
}

/// The plug-in files of `dir` (`cert-chain.pem` may be absent).
fn load(dir: &Path) -> Result<Authority, StoreError> {
    let read = |name: &str, required: bool| -> Result<String, StoreError> {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(text),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(io(&path, e)),
        }
    };
    let (cert, key) = (read(CA_CERT_FILE, true)?, read(CA_KEY_FILE, true)?);
    let (chain, root) = (read(CERT_CHAIN_FILE, false)?, read(ROOT_CERT_FILE, true)?);
    Authority::from_pem(&cert, &key, &chain, &root).map_err(|reason| StoreError::Invalid {
        dir: dir.display().to_string(),
        reason,
    })
}

fn stamps(dir: &Path) -> Vec<Option<(SystemTime, u64)>> {
    FILES
        .iter()
        .map(|name| {
            std::fs::metadata(dir.join(name))
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
        })
        .collect()
}

/// Writes `path` whole (beside it, then renamed); a key readable by its owner only.
fn write_file(path: &Path, text: &str, secret: bool) -> Result<(), StoreError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| io(&tmp, e))?;
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io(&tmp, e))?;
    }
    #[cfg(not(unix))]
    let _ = secret;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))
}

fn io(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
