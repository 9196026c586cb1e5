//! TLS Secrets: what a `kind: Secret` holds for SDS, the names proxies ask them by, and the
//! index a `PushContext` keeps of them.
//!
//! - [`TlsSecret`]: a certificate chain and its key, and/or trusted roots (with their CRL), as
//!   istiod's credentials controller reads them (`pilot/pkg/credentials/kube/secrets.go`):
//!   `cert`/`key`/`crl` or `tls.crt`/`tls.key`/`tls.ocsp-staple`/`ca.crl`, and roots from
//!   `cacert`/`crl` or `ca.crt`/`ca.crl`. Decoded and checked in `axon_config::secret`: a key that is
//!   not its certificate's, or a certificate that is expired or does not parse, is refused.
//!   Its `Debug` and `Serialize` show the certificate's subject, expiry and a digest, never
//!   the bytes.
//! - Names ([`resource_name`], [`SecretRef::parse`]): istiod's `kubernetes://NAME` (the proxy's
//!   namespace) and `kubernetes://NAMESPACE/NAME`, and the `-cacert` suffix that asks for the
//!   roots only (`pilot/pkg/model/credentials/resource.go`).
//! - [`SecretIndex`]: the valid Secrets by namespace and name. It answers the questions other
//!   generators ask: [`SecretIndex::certificate`] ("does Secret X of namespace N hold a valid
//!   certificate and key?") and [`SecretIndex::roots`] (the CA of `X-cacert`, from the Secret
//!   `X-cacert` or else from `X`), and [`SecretIndex::credential`] for a Gateway's or a
//!   DestinationRule's `credentialName` as a whole.
//!
//! Secrets are configs of [`ConfigKind::Secret`]: a change to one is a `ConfigKey` of that
//! kind, which pushes SDS only, to the proxies that watch it (`xds::stream`); a generator whose
//! output depends on a Secret's presence puts [`config_key`] in the scope's `deps`.

#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use thiserror::Error;

use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::config_set::{ConfigSet, of_kind};
pub use axon_config::secret::{
    CertInfo, CertificateKey, Roots, SecretError, TlsSecret, decode_secret,
};

/// istiod's prefix of a Kubernetes Secret's SDS name.
pub const KUBERNETES_PREFIX: &str = "kubernetes://";
/// istiod's prefix of the SDS name of a Secret a Gateway API listener refers to
/// (`KubernetesGatewaySecretType`): always `kubernetes-gateway://NAMESPACE/NAME`, possibly of
/// another namespace than the proxy's (a ReferenceGrant allowed it).
pub const KUBERNETES_GATEWAY_PREFIX: &str = "kubernetes-gateway://";
/// istiod's prefix of the SDS name of a ConfigMap's CA (`KubernetesConfigMapType`):
/// `configmap://NAMESPACE/NAME`, the roots of its `ca.crt`, readable by any proxy (a CA is
/// public). Held in the index as the Secret `configmap/NAME` of its namespace
/// ([`configmap_secret_name`]).
pub const KUBERNETES_CONFIGMAP_PREFIX: &str = "configmap://";
/// istiod's suffix of the SDS name of a Secret's roots (`SdsCaSuffix`).
pub const CA_SUFFIX: &str = "-cacert";

/// The SDS name of a `credentialName` (istiod's `ToResourceName`): `kubernetes://NAME`, or the
/// name as is when it already has that prefix.
pub fn resource_name(credential_name: &str) -> String {
    if credential_name.starts_with(KUBERNETES_PREFIX)
        || credential_name.starts_with(KUBERNETES_GATEWAY_PREFIX)
        || credential_name.starts_with(KUBERNETES_CONFIGMAP_PREFIX)
    {
        credential_name.to_string()
    } else {
        format!("{KUBERNETES_PREFIX}{credential_name}")
    }
}

/// The SDS name of the roots of a `credentialName`: `kubernetes://NAME-cacert`.
pub fn ca_resource_name(credential_name: &str) -> String {
    resource_name(&format!("{credential_name}{CA_SUFFIX}"))
}

/// The name a ConfigMap's CA is held by in the index (no Secret can have it: a `/`).
pub fn configmap_secret_name(name: &str) -> String {
    format!("configmap/{name}")
}

/// The key a Secret is pushed by.
pub fn config_key(namespace: &str, name: &str) -> ConfigKey {
    ConfigKey::new(ConfigKind::Secret, namespace, name)
}

/// A `kubernetes://` SDS name, resolved for a proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    /// The name as asked, with its `-cacert` suffix if any.
    pub name: String,
    /// `-cacert`: the roots only.
    pub ca_only: bool,
    /// A `kubernetes-gateway://` name: a Gateway API listener's certificate, which a proxy
    /// may read from another namespace when its Gateway refers to it.
    pub gateway: bool,
    /// A `configmap://` name: a ConfigMap's CA, public.
    pub configmap: bool,
}

impl SecretRef {
    /// istiod's `ParseResourceName` for `kubernetes://`: `NAME` is in `proxy_namespace`,
    /// `NAMESPACE/NAME` names its namespace. `None` for any other name.
    pub fn parse(resource_name: &str, proxy_namespace: &str) -> Option<SecretRef> {
        if let Some(rest) = resource_name.strip_prefix(KUBERNETES_CONFIGMAP_PREFIX) {
            let (namespace, name) = rest.split_once('/')?;
            if namespace.is_empty() || name.is_empty() || name.contains('/') {
                return None;
            }
            return Some(SecretRef {
                namespace: namespace.to_string(),
                name: configmap_secret_name(name),
                ca_only: true,
                gateway: false,
                configmap: true,
            });
        }
        let (rest, gateway) = match resource_name.strip_prefix(KUBERNETES_GATEWAY_PREFIX) {
            Some(rest) => (rest, true),
            None => (resource_name.strip_prefix(KUBERNETES_PREFIX)?, false),
        };
        let mut parts = rest.split('/');
        let first = parts.next().unwrap_or_default();
        let (namespace, name) = match parts.next() {
            Some(name) => (first, name),
            None if gateway => return None,
            None => (proxy_namespace, first),
        };
        if name.is_empty() || namespace.is_empty() {
            return None;
        }
        Some(SecretRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
            ca_only: name.ends_with(CA_SUFFIX),
            gateway,
            configmap: false,
        })
    }

    /// The Secrets whose change can change this reference (istiod's `relatedConfigs`): the
    /// name and its `-cacert` twin.
    pub fn related(&self) -> [ConfigKey; 2] {
        let twin = match self.name.strip_suffix(CA_SUFFIX) {
            Some(base) => base.to_string(),
            None => format!("{}{CA_SUFFIX}", self.name),
        };
        [
            config_key(&self.namespace, &self.name),
            config_key(&self.namespace, &twin),
        ]
    }
}

/// Why a Secret reference cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecretProblem {
    #[error("secret {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("secret {namespace}/{name} has no certificate and key")]
    NoCertificate { namespace: String, name: String },
    #[error("secret {namespace}/{name} has no CA certificate (cacert or ca.crt)")]
    NoRoots { namespace: String, name: String },
    #[error("secret {namespace}/{name} is not of the proxy's namespace {proxy_namespace}")]
    OtherNamespace {
        namespace: String,
        name: String,
        proxy_namespace: String,
    },
}

/// The valid Secrets of a context, by `(namespace, name)`. Invalid ones never get here: the
/// registries refuse them and keep the previous version.
#[derive(Debug, Default)]
pub struct SecretIndex {
    pub by_name: BTreeMap<(String, String), Arc<Config>>,
}

impl SecretIndex {
    pub fn build(configs: &ConfigSet) -> SecretIndex {
        let by_name = of_kind(configs, ConfigKind::Secret)
            .map(|c| ((c.namespace().to_string(), c.name().to_string()), c.clone()))
            .collect();
        SecretIndex { by_name }
    }

    /// The Secret `name` of `namespace`, if it exists (and was valid when loaded).
    pub fn get(&self, namespace: &str, name: &str) -> Option<&TlsSecret> {
        match &self
            .by_name
            .get(&(namespace.to_string(), name.to_string()))?
            .spec
        {
            Spec::Secret(secret) => Some(secret),
            _ => None,
        }
    }

    /// The certificate and key of Secret `name` (istiod's `GetCertInfo`).
    pub fn certificate(&self, namespace: &str, name: &str) -> Result<&TlsSecret, SecretProblem> {
        let secret = self
            .get(namespace, name)
            .ok_or_else(|| SecretProblem::NotFound {
                namespace: namespace.into(),
                name: name.into(),
            })?;
        if secret.certificate.is_none() {
            return Err(SecretProblem::NoCertificate {
                namespace: namespace.into(),
                name: name.into(),
            });
        }
        Ok(secret)
    }

    /// The roots of `name` (istiod's `GetCaCert`): the Secret of that very name, else, for a
    /// `-cacert` name, the Secret without the suffix.
    pub fn roots(&self, namespace: &str, name: &str) -> Result<&TlsSecret, SecretProblem> {
        let found = self.get(namespace, name).or_else(|| {
            name.strip_suffix(CA_SUFFIX)
                .and_then(|base| self.get(namespace, base))
        });
        let base = name.strip_suffix(CA_SUFFIX).unwrap_or(name);
        let secret = found.ok_or_else(|| SecretProblem::NotFound {
            namespace: namespace.into(),
            name: base.into(),
        })?;
        if secret.ca.is_none() {
            return Err(SecretProblem::NoRoots {
                namespace: namespace.into(),
                name: base.into(),
            });
        }
        Ok(secret)
    }

    /// What a proxy of `namespace` resolving `reference` gets (see [`SecretRef::parse`]).
    pub fn resolve(&self, reference: &SecretRef) -> Result<&TlsSecret, SecretProblem> {
        if reference.ca_only {
            self.roots(&reference.namespace, &reference.name)
        } else {
            self.certificate(&reference.namespace, &reference.name)
        }
    }

    /// Whether a `credentialName` of a proxy in `namespace` can be served: its certificate and
    /// key, and with `mutual` its roots (`NAME-cacert`) too; a `kubernetes://NS/NAME` of
    /// another namespace never is (SDS refuses it). A gateway server whose credential is not
    /// ready is not served (istiod); a cluster references it all the same.
    pub fn credential(
        &self,
        namespace: &str,
        credential_name: &str,
        mutual: bool,
    ) -> Result<(), SecretProblem> {
        let name = resource_name(credential_name);
        let Some(reference) = SecretRef::parse(&name, namespace) else {
            return Err(SecretProblem::NotFound {
                namespace: namespace.into(),
                name: credential_name.into(),
            });
        };
        // A Gateway API listener's certificate may be of another namespace: the conversion
        // let it through only where a ReferenceGrant allows it (istiod's
        // `VerifiedCertificateReferences`).
        if reference.namespace != namespace && !reference.gateway && !reference.configmap {
            return Err(SecretProblem::OtherNamespace {
                namespace: reference.namespace,
                name: reference.name,
                proxy_namespace: namespace.into(),
            });
        }
        self.certificate(&reference.namespace, &reference.name)?;
        if mutual {
            self.roots(
                &reference.namespace,
                &format!("{}{CA_SUFFIX}", reference.name),
            )?;
        }
        Ok(())
    }
}
