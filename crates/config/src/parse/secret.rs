//! `apiVersion: v1` `kind: Secret` objects: decoded to configs of kind Secret
//! (`axon_model::secrets`), from a file's document or an object of the API server.

use super::{Config, ConfigKey, ConfigKind, DocError, DocOutcome, Metadata, Spec, identity};
use crate::config::ConfigMapInfo;

/// Whether an object is a Kubernetes `v1` Secret.
pub(super) fn is_secret(value: &serde_json::Value) -> bool {
    value.get("apiVersion").and_then(|v| v.as_str()) == Some("v1")
        && value.get("kind").and_then(|v| v.as_str()) == Some("Secret")
}

/// Whether an object is a Kubernetes `v1` ConfigMap.
pub(super) fn is_config_map(value: &serde_json::Value) -> bool {
    value.get("apiVersion").and_then(|v| v.as_str()) == Some("v1")
        && value.get("kind").and_then(|v| v.as_str()) == Some("ConfigMap")
}

/// A `v1` ConfigMap: one holding a CA (`ca.crt`, as a BackendTLSPolicy's `caCertificateRefs`
/// and istiod's `configmap://` read it) as a config of kind Secret named `configmap/NAME` (no
/// Secret can be named so), its roots checked at `now`; any other as a config of kind
/// ConfigMap that says only that it exists (a Gateway's `infrastructure.parametersRef`).
pub fn parse_config_map(
    value: &serde_json::Value,
    default_namespace: &str,
    now: i64,
) -> DocOutcome {
    let metadata: Metadata = match value.get("metadata").cloned().map(serde_json::from_value) {
        None => Metadata::default(),
        Some(Ok(m)) => m,
        Some(Err(_)) => return DocOutcome::Invalid(DocError::NotAnObject),
    };
    let ca = value.get("data").and_then(|d| d.get("ca.crt"));
    let result = identity(&metadata, default_namespace).and_then(|(namespace, name, created)| {
        let secret = match ca {
            Some(ca) => {
                let as_secret = serde_json::json!({"stringData": {"ca.crt": ca}});
                crate::secret::decode_secret(&as_secret, now)?
            }
            None => None,
        };
        let (key, spec) = match secret {
            Some(secret) => (
                ConfigKey::new(ConfigKind::Secret, namespace, format!("configmap/{name}")),
                Spec::Secret(secret),
            ),
            None => (
                ConfigKey::new(ConfigKind::ConfigMap, namespace, name),
                Spec::ConfigMap(ConfigMapInfo {}),
            ),
        };
        Ok(Config {
            key,
            labels: metadata.labels.clone(),
            created,
            spec,
            not_applied: Vec::new(),
        })
    });
    match result {
        Ok(config) => DocOutcome::Config(Box::new(config)),
        Err(e) => DocOutcome::Invalid(e),
    }
}

pub(super) fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A Secret of the API server (its certificates checked now): one without TLS keys is
/// [`DocOutcome::Unsupported`].
pub fn parse_cluster_secret(value: &serde_json::Value, default_namespace: &str) -> DocOutcome {
    parse_secret(value, default_namespace, now_seconds(), false)
}

/// A `v1` Secret (a document of the config directory, or an object of the API server) as a
/// config of kind Secret, its certificates checked at `now` (seconds since the epoch). One
/// without any key istiod reads is an error with `require_tls` (a file meant it for TLS), else
/// [`DocOutcome::Unsupported`] (most Secrets of a cluster are not TLS material).
pub fn parse_secret(
    value: &serde_json::Value,
    default_namespace: &str,
    now: i64,
    require_tls: bool,
) -> DocOutcome {
    let metadata: Metadata = match value.get("metadata").cloned().map(serde_json::from_value) {
        None => Metadata::default(),
        Some(Ok(m)) => m,
        Some(Err(_)) => return DocOutcome::Invalid(DocError::NotAnObject),
    };
    let result = identity(&metadata, default_namespace).and_then(|(namespace, name, created)| {
        let secret = match crate::secret::decode_secret(value, now)? {
            Some(secret) => secret,
            None if require_tls => {
                return Err(crate::secret::SecretError::NoKeys(String::from("no TLS keys")).into());
            }
            None => return Ok(None),
        };
        Ok(Some(Config {
            key: ConfigKey::new(ConfigKind::Secret, namespace, name),
            labels: metadata.labels.clone(),
            created,
            spec: Spec::Secret(secret),
            not_applied: Vec::new(),
        }))
    });
    match result {
        Ok(Some(config)) => DocOutcome::Config(Box::new(config)),
        Ok(None) => DocOutcome::Unsupported {
            api_version: "v1".into(),
            kind: "Secret".into(),
        },
        Err(e) => DocOutcome::Invalid(e),
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_documents;
    use super::*;

    #[test]
    fn a_v1_secret_is_a_config_of_kind_secret() {
        let (cert, key) = crate::fixtures::self_signed("shop", 2);
        let indent = |pem: &str| {
            pem.lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        };
        let doc = |key: &str| {
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-cert, namespace: shop}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
                indent(&cert),
                indent(key)
            )
        };
        let docs = parse_documents(&doc(&key), "default");
        let DocOutcome::Config(c) = &docs[0].outcome else {
            panic!("{:?}", docs[0])
        };
        assert_eq!(c.key.to_string(), "Secret/shop/shop-cert");
        let (_, other) = crate::fixtures::self_signed("other", 2);
        let docs = parse_documents(&doc(&other), "default");
        assert_eq!(
            docs[0].outcome,
            DocOutcome::Invalid(DocError::Secret(crate::secret::SecretError::KeyMismatch {
                key: "tls.key",
                cert: "tls.crt"
            }))
        );
        // Not TLS material: an error in a file, which is meant for TLS.
        let docs = parse_documents(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: p}\nstringData: {password: x}\n",
            "default",
        );
        assert!(matches!(
            docs[0].outcome,
            DocOutcome::Invalid(DocError::Secret(_))
        ));
    }
}
