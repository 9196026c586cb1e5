//! The CA's wiring in Kubernetes (`--kubernetes` with `--ca-dir`): its signing material
//! restored from istiod's Secrets into the directory before the CA opens it, a self-signed
//! root kept in `istio-ca-secret` once made (`registry::kubernetes::ca_secret`), and the root
//! published into every namespace's `istio-ca-root-cert`
//! (`registry::kubernetes::root_cert`) and, with `--webhook-config-name`, into the validating
//! webhook's caBundle (`registry::kubernetes::webhook_config`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use super::Settings;
use crate::registry::cluster::namespaces::NamespaceSelector;
use crate::registry::kubernetes::{ca_secret, root_cert, webhook_config};

/// A directory the CA is to make a self-signed root in, to be kept in `istio-ca-secret`.
pub(crate) struct Keep {
    client: kube::Client,
    namespace: String,
    dir: PathBuf,
}

/// Before the CA opens `--ca-dir` (Kubernetes only): fills it from the Secrets of axon's own
/// namespace; `Some` when none holds a CA, so that the root the CA makes is to be kept.
pub(crate) async fn restore(
    client: Option<&kube::Client>,
    settings: &Settings,
) -> anyhow::Result<Option<Keep>> {
    let (Some(client), Some(dir), true) = (client, &settings.ca_dir, settings.kubernetes) else {
        return Ok(None);
    };
    let namespace = client.default_namespace().to_string();
    let restored = ca_secret::restore(client, &namespace, dir)
        .await
        .with_context(|| format!("--ca-dir {}", dir.display()))?;
    Ok((restored == ca_secret::Restored::Nothing).then(|| Keep {
        client: client.clone(),
        namespace,
        dir: dir.clone(),
    }))
}

impl Keep {
    /// Once the CA made its self-signed root: kept in `istio-ca-secret` (or replaced by
    /// another replica's, kept there first).
    pub(crate) async fn keep(self) -> anyhow::Result<()> {
        ca_secret::keep(&self.client, &self.namespace, &self.dir)
            .await
            .with_context(|| format!("--ca-dir {}", self.dir.display()))
    }
}

/// The CA's root in every namespace's `istio-ca-root-cert`: the root is read from the CA once
/// a second (which also picks up changed files) and handed over when it changes.
pub(crate) fn publish_root(
    client: kube::Client,
    selector: Option<NamespaceSelector>,
    ca: Arc<axon_ca::CaStore>,
    webhook_config: Option<String>,
) {
    let (tx, rx) = tokio::sync::watch::channel(ca.current().root_pem().to_string());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        while !tx.is_closed() {
            tick.tick().await;
            let pem = ca.current().root_pem().to_string();
            tx.send_if_modified(|held| {
                let changed = *held != pem;
                if changed {
                    *held = pem;
                }
                changed
            });
        }
    });
    if let Some(name) = webhook_config {
        tokio::spawn(webhook_config::keep_current(
            client.clone(),
            name,
            rx.clone(),
        ));
    }
    tokio::spawn(root_cert::publish(client, selector, rx));
}
