//! The CA's signing material kept in Kubernetes Secrets of axon's own namespace, as istiod
//! keeps it (`security/pkg/pki/ca/ca.go`), mirrored into `--ca-dir`, whose files the CA
//! (`axon_ca::CaStore`) signs from:
//!
//! 1. plug-in files already in the directory (the `cacerts` Secret mounted there, as istiod's
//!    deployment mounts it at /etc/cacerts) are used as they are;
//! 2. else the plug-in Secret `cacerts` (`ca-cert.pem`, `ca-key.pem`, `cert-chain.pem`,
//!    `root-cert.pem`) is written into the directory;
//! 3. else the self-signed root istiod keeps in `istio-ca-secret` (`ca-cert.pem`,
//!    `ca-key.pem`, `root-cert.pem`) is;
//! 4. else the CA makes a self-signed root in the directory and [`keep`] creates
//!    `istio-ca-secret` from it (type `istio.io/ca-root`, istiod's keys), so that a restart
//!    or another replica signs with the same root; a replica that loses the race to create it
//!    writes the winner's root into its directory instead (the CA picks it up within a
//!    second).
//!
//! A Secret changed after start-up is not followed (a mounted volume is: the CA re-reads its
//! files).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use thiserror::Error;

use axon_ca::{CA_CERT_FILE, CA_KEY_FILE, CERT_CHAIN_FILE, CaStore, ROOT_CERT_FILE};

/// istiod's self-signed root Secret (`ca.CASecret`).
pub const CA_SECRET: &str = "istio-ca-secret";
/// istiod's plug-in Secret (`ca.CACertsSecret`).
pub const CACERTS_SECRET: &str = "cacerts";
/// The type istiod gives `istio-ca-secret`.
const CA_SECRET_TYPE: &str = "istio.io/ca-root";

#[derive(Debug, Error)]
pub enum CaSecretError {
    #[error("Secret {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: &'static str,
        source: kube::Error,
    },
    #[error("Secret {namespace}/{name}: {reason}")]
    Invalid {
        namespace: String,
        name: &'static str,
        reason: String,
    },
    #[error(transparent)]
    Files(#[from] axon_ca::StoreError),
}

/// Where the directory's CA came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// Plug-in files were in the directory already.
    Files,
    /// Written from the Secret `cacerts`.
    PlugInSecret,
    /// Written from the Secret `istio-ca-secret`.
    SelfSignedSecret,
    /// Nothing: the CA makes a self-signed root, to be kept with [`keep`].
    Nothing,
}

/// Steps 1 to 3: fills `dir` from the Secrets of `namespace` unless it holds a CA already.
pub async fn restore(
    client: &kube::Client,
    namespace: &str,
    dir: &Path,
) -> Result<Restored, CaSecretError> {
    if CaStore::holds_ca(dir) {
        return Ok(Restored::Files);
    }
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    for (name, restored) in [
        (CACERTS_SECRET, Restored::PlugInSecret),
        (CA_SECRET, Restored::SelfSignedSecret),
    ] {
        let secret = api
            .get_opt(name)
            .await
            .map_err(|source| CaSecretError::Api {
                namespace: namespace.to_string(),
                name,
                source,
            })?;
        if let Some(secret) = secret {
            write(&secret, namespace, name, dir)?;
            tracing::info!(namespace, secret = name, ca_dir = %dir.display(), "CA: signing material read from the Secret");
            return Ok(restored);
        }
    }
    Ok(Restored::Nothing)
}

/// Step 4: keeps the self-signed root the CA made in `dir` in `istio-ca-secret`; if another
/// replica created it first, its root replaces the directory's.
pub async fn keep(client: &kube::Client, namespace: &str, dir: &Path) -> Result<(), CaSecretError> {
    let read = |file: &str| {
        std::fs::read(dir.join(file)).map_err(|e| CaSecretError::Invalid {
            namespace: namespace.to_string(),
            name: CA_SECRET,
            reason: format!("{}: {e}", dir.join(file).display()),
        })
    };
    let data = BTreeMap::from([
        (CA_CERT_FILE.to_string(), ByteString(read(CA_CERT_FILE)?)),
        (CA_KEY_FILE.to_string(), ByteString(read(CA_KEY_FILE)?)),
        (
            ROOT_CERT_FILE.to_string(),
            ByteString(read(ROOT_CERT_FILE)?),
        ),
        (CERT_CHAIN_FILE.to_string(), ByteString(Vec::new())),
        ("key.pem".to_string(), ByteString(Vec::new())),
    ]);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(CA_SECRET.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        type_: Some(CA_SECRET_TYPE.to_string()),
        data: Some(data),
        ..Secret::default()
    };
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    let api_error = |source| CaSecretError::Api {
        namespace: namespace.to_string(),
        name: CA_SECRET,
        source,
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(
                namespace,
                "CA: the self-signed root is kept in the Secret istio-ca-secret"
            );
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let theirs = api.get(CA_SECRET).await.map_err(api_error)?;
            write(&theirs, namespace, CA_SECRET, dir)?;
            tracing::info!(
                namespace,
                "CA: istio-ca-secret was made by another replica; signing with its root"
            );
            Ok(())
        }
        Err(e) => Err(api_error(e)),
    }
}

/// Writes a Secret's signing material into `dir`.
fn write(
    secret: &Secret,
    namespace: &str,
    name: &'static str,
    dir: &Path,
) -> Result<(), CaSecretError> {
    let get = |key: &str| -> Result<String, CaSecretError> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .unwrap_or_default();
        String::from_utf8(bytes).map_err(|_| CaSecretError::Invalid {
            namespace: namespace.to_string(),
            name,
            reason: format!("{key} is not text"),
        })
    };
    let (cert, key, chain, root) = (
        get(CA_CERT_FILE)?,
        get(CA_KEY_FILE)?,
        get(CERT_CHAIN_FILE)?,
        get(ROOT_CERT_FILE)?,
    );
    if cert.is_empty() || key.is_empty() || root.is_empty() {
        return Err(CaSecretError::Invalid {
            namespace: namespace.to_string(),
            name,
            reason: format!("needs {CA_CERT_FILE}, {CA_KEY_FILE} and {ROOT_CERT_FILE}"),
        });
    }
    CaStore::write_files(dir, &cert, &key, &chain, &root)?;
    Ok(())
}
