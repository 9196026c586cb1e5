//! The mesh's root certificate in every namespace, as istiod's namespace controller
//! (`pilot/pkg/serviceregistry/kube/controller/namespacecontroller.go`): the ConfigMap
//! `istio-ca-root-cert` (label `istio.io/config: "true"`, data key `root-cert.pem`) in each
//! namespace axon reads (`--namespace-selector`), created when a namespace appears and
//! replaced when the CA's root changes, so that pilot-agent trusts the TLS xDS port with no
//! other set-up.
//!
//! [`publish`] watches Namespaces, the ConfigMaps labelled `istio.io/config` (kube watchers
//! with backoff) and the root (a `watch` channel the wiring feeds from the CA); it writes
//! only what differs. A ConfigMap edited or deleted by someone else is put back at once, as
//! istiod does.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::registry::cluster::namespaces::NamespaceSelector;

/// istiod's ConfigMap name (`controller.CACertNamespaceConfigMap`).
pub const ROOT_CERT_CONFIG_MAP: &str = "istio-ca-root-cert";
/// Its data key (`constants.CACertNamespaceConfigMapDataName`).
pub const ROOT_CERT_KEY: &str = "root-cert.pem";

/// Keeps `istio-ca-root-cert` current in every selected namespace; runs until the root's
/// sender is dropped.
pub async fn publish(
    client: kube::Client,
    selector: Option<NamespaceSelector>,
    mut root: tokio::sync::watch::Receiver<String>,
) {
    let mut stream = watcher(
        Api::<Namespace>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed();
    let labelled = watcher::Config::default().labels("istio.io/config=true");
    let mut config_maps = watcher(Api::<ConfigMap>::all(client.clone()), labelled)
        .default_backoff()
        .boxed();
    let mut known: BTreeSet<String> = BTreeSet::new();
    loop {
        tokio::select! {
            next = config_maps.next() => match next {
                // Ours, edited or deleted by someone else: put back.
                Some(Ok(watcher::Event::Apply(cm) | watcher::Event::Delete(cm))) => {
                    let ours = cm.metadata.name.as_deref() == Some(ROOT_CERT_CONFIG_MAP);
                    if let Some(ns) = cm.metadata.namespace.as_deref().filter(|ns| ours && known.contains(*ns)) {
                        let pem = root.borrow().clone();
                        ensure(&client, ns, &pem).await;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::warn!(%error, "watching the istio-ca-root-cert ConfigMaps failed; retrying with backoff");
                }
                None => return,
            },
            next = stream.next() => match next {
                Some(Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns))) => {
                    let Some(name) = ns.metadata.name.clone() else { continue };
                    let terminating = ns.metadata.deletion_timestamp.is_some();
                    let selected = selector.as_ref().is_none_or(|s| s.matches(ns.metadata.labels.as_ref()));
                    if selected && !terminating {
                        known.insert(name.clone());
                        let pem = root.borrow().clone();
                        ensure(&client, &name, &pem).await;
                    } else {
                        known.remove(&name);
                    }
                }
                Some(Ok(watcher::Event::Delete(ns))) => {
                    if let Some(name) = &ns.metadata.name {
                        known.remove(name);
                    }
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                Some(Err(error)) => {
                    tracing::warn!(%error, "watching Namespaces for istio-ca-root-cert failed; retrying with backoff");
                }
                None => return,
            },
            changed = root.changed() => {
                if changed.is_err() {
                    return;
                }
                let pem = root.borrow_and_update().clone();
                tracing::info!(namespaces = known.len(), "the CA's root changed; updating istio-ca-root-cert");
                for name in &known {
                    ensure(&client, name, &pem).await;
                }
            }
        }
    }
}

/// Creates or replaces the ConfigMap of `namespace` unless it holds `pem` already; a failure
/// is logged (the next event tries again).
async fn ensure(client: &kube::Client, namespace: &str, pem: &str) {
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let result = match api.get_opt(ROOT_CERT_CONFIG_MAP).await {
        Ok(None) => api
            .create(&PostParams::default(), &config_map(namespace, pem, None))
            .await
            .map(|_| "created"),
        Ok(Some(current)) => {
            let held = current
                .data
                .as_ref()
                .and_then(|d| d.get(ROOT_CERT_KEY))
                .map(String::as_str);
            if held == Some(pem) {
                return;
            }
            let version = current.metadata.resource_version.clone();
            api.replace(
                ROOT_CERT_CONFIG_MAP,
                &PostParams::default(),
                &config_map(namespace, pem, version),
            )
            .await
            .map(|_| "updated")
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(what) => tracing::debug!(namespace, "istio-ca-root-cert {what}"),
        Err(error) => {
            tracing::warn!(namespace, %error, "cannot write the ConfigMap istio-ca-root-cert")
        }
    }
}

fn config_map(namespace: &str, pem: &str, resource_version: Option<String>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(ROOT_CERT_CONFIG_MAP.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                "istio.io/config".to_string(),
                "true".to_string(),
            )])),
            resource_version,
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            ROOT_CERT_KEY.to_string(),
            pem.to_string(),
        )])),
        ..ConfigMap::default()
    }
}
