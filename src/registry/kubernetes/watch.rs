//! Watch tasks: one kube `watcher` per kind, forwarded to a registry actor.
//!
//! Each task runs a kube runtime [`watcher()`] stream with the default backoff and sends every
//! event, including the list boundaries (`Init`, `InitApply`, `InitDone`), to its registry
//! as a [`WatchEvent`] message, awaiting each: a watcher never runs ahead of its registry, so
//! nothing queues without bound. A watch that gets 410 Gone or loses the API server is
//! relisted by the watcher (after a backoff) and the relist arrives as a new
//! `Init`…`InitDone`, which the index turns into a replacement of the kind. A registry can
//! also ask a task to relist ([`WatchTask::relist`]), when the selected namespaces grew.
//!
//! Also here: the discovery of the served networking.istio.io version of each kind.

use std::fmt;
use std::sync::Arc;

use actix::prelude::*;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use axon_config::config::{
    ConfigKind, ISTIO_NETWORKING_GROUP, ISTIO_SECURITY_GROUP, ISTIO_TELEMETRY_GROUP,
};
use axon_metrics::{IntCounter, Metrics};

/// A watched kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WatchKind {
    Namespace,
    Service,
    EndpointSlice,
    Pod,
    Istio(ConfigKind),
}

impl fmt::Display for WatchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchKind::Namespace => f.write_str("Namespace"),
            WatchKind::Service => f.write_str("Service"),
            WatchKind::EndpointSlice => f.write_str("EndpointSlice"),
            WatchKind::Pod => f.write_str("Pod"),
            WatchKind::Istio(kind) => write!(f, "{kind}"),
        }
    }
}

/// One watch event of one kind.
pub struct WatchEvent<K> {
    pub kind: WatchKind,
    pub event: Event<K>,
}

impl<K: 'static> Message for WatchEvent<K> {
    type Result = ();
}

/// A running watch; dropping it stops the watch.
pub struct WatchTask {
    relist: Arc<Notify>,
    handle: tokio::task::JoinHandle<()>,
}

impl WatchTask {
    /// Drops the current watch and lists the kind again.
    pub fn relist(&self) {
        self.relist.notify_one();
    }
}

impl Drop for WatchTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Starts watching `api` (on a tokio worker) and forwarding to `to`.
pub fn spawn<K>(
    kind: WatchKind,
    api: Api<K>,
    config: watcher::Config,
    to: Recipient<WatchEvent<K>>,
    metrics: &Metrics,
) -> WatchTask
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + 'static,
{
    let relist = Arc::new(Notify::new());
    let expired = metrics.kubernetes_relists.with_label_values(&["expired"]);
    let handle = tokio::spawn(run(kind, api, config, to, relist.clone(), expired));
    WatchTask { relist, handle }
}

async fn run<K>(
    kind: WatchKind,
    api: Api<K>,
    config: watcher::Config,
    to: Recipient<WatchEvent<K>>,
    relist: Arc<Notify>,
    expired: IntCounter,
) where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + 'static,
{
    loop {
        let mut stream = watcher(api.clone(), config.clone())
            .default_backoff()
            .boxed();
        loop {
            tokio::select! {
                next = stream.next() => match next {
                    Some(Ok(event)) => {
                        if to.send(WatchEvent { kind, event }).await.is_err() {
                            tracing::debug!(%kind, "registry stopped; watch ends");
                            return;
                        }
                    }
                    Some(Err(watcher::Error::WatchError(status))) if status.code == 410 => {
                        tracing::info!(%kind, "watch expired (410 Gone); relisting");
                        expired.inc();
                    }
                    Some(Err(error)) => {
                        tracing::warn!(%kind, %error, "watch failed; retrying with backoff");
                    }
                    None => break,
                },
                _ = relist.notified() => {
                    tracing::info!(%kind, "relisting");
                    break;
                }
            }
        }
    }
}

/// The preferred networking.istio.io versions, best first.
pub const ISTIO_VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha3"];

/// The Istio kinds read from Kubernetes.
pub const ISTIO_KINDS: [ConfigKind; 6] = [
    ConfigKind::VirtualService,
    ConfigKind::DestinationRule,
    ConfigKind::Gateway,
    ConfigKind::ServiceEntry,
    ConfigKind::WorkloadEntry,
    ConfigKind::Sidecar,
];

/// The security.istio.io kinds read from Kubernetes.
pub const ISTIO_SECURITY_KINDS: [ConfigKind; 3] = [
    ConfigKind::PeerAuthentication,
    ConfigKind::AuthorizationPolicy,
    ConfigKind::RequestAuthentication,
];

/// The telemetry.istio.io kinds read from Kubernetes, and their versions, best first.
pub const ISTIO_TELEMETRY_KINDS: [ConfigKind; 1] = [ConfigKind::Telemetry];
pub const ISTIO_TELEMETRY_VERSIONS: [&str; 2] = ["v1", "v1alpha1"];

/// The groups whose kinds carry mesh meaning (`axon_config::parse::drops_meaning`): a served
/// kind of theirs that axon does not watch is reported at start with its object count.
const MEANING_GROUPS: [&str; 6] = [
    ISTIO_NETWORKING_GROUP,
    ISTIO_SECURITY_GROUP,
    "telemetry.istio.io",
    "extensions.istio.io",
    "gateway.networking.k8s.io",
    "gateway.networking.x-k8s.io",
];

/// A served Istio or Gateway API kind axon does not apply that has objects in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unapplied {
    pub kind: String,
    pub api_version: String,
    /// One of its objects, `namespace/name`.
    pub example: String,
}

/// The served kinds of `MEANING_GROUPS` that axon does not watch and that hold objects,
/// each found by a list of one item.
pub async fn unapplied_kinds(client: &Client) -> super::Result<Vec<Unapplied>> {
    let groups = client.list_api_groups().await?;
    let watched: Vec<&str> = ISTIO_KINDS
        .iter()
        .chain(&ISTIO_SECURITY_KINDS)
        .chain(&ISTIO_TELEMETRY_KINDS)
        .map(|k| k.as_str())
        .collect();
    let mut out = Vec::new();
    for group in groups
        .groups
        .iter()
        .filter(|g| MEANING_GROUPS.contains(&g.name.as_str()))
    {
        let Some(version) = group
            .preferred_version
            .as_ref()
            .or_else(|| group.versions.first())
        else {
            continue;
        };
        let list = client
            .list_api_group_resources(&version.group_version)
            .await?;
        for resource in list.resources.iter().filter(|r| !r.name.contains('/')) {
            if watched.contains(&resource.kind.as_str()) {
                continue;
            }
            let ar = ApiResource {
                group: group.name.clone(),
                version: version.version.clone(),
                api_version: version.group_version.clone(),
                kind: resource.kind.clone(),
                plural: resource.name.clone(),
            };
            let api = Api::<DynamicObject>::all_with(client.clone(), &ar);
            let params = kube::api::ListParams::default().limit(1);
            let Ok(list) = api.list(&params).await else {
                continue;
            };
            if let Some(object) = list.items.first() {
                out.push(Unapplied {
                    kind: resource.kind.clone(),
                    api_version: version.group_version.clone(),
                    example: format!(
                        "{}/{}",
                        object.metadata.namespace.as_deref().unwrap_or(""),
                        object.metadata.name.as_deref().unwrap_or("")
                    ),
                });
            }
        }
    }
    Ok(out)
}

/// For each Istio kind the API server serves, the resource at its best served version
/// (v1, then v1beta1, then v1alpha3; v1alpha1 for Telemetry), of networking.istio.io,
/// security.istio.io and telemetry.istio.io. Empty when no group is served (no Istio CRDs).
pub async fn istio_resources(client: &Client) -> super::Result<Vec<(ConfigKind, ApiResource)>> {
    let groups = client.list_api_groups().await?;
    let mut found: Vec<(ConfigKind, ApiResource)> = Vec::new();
    for (group_name, kinds, versions) in [
        (
            ISTIO_NETWORKING_GROUP,
            &ISTIO_KINDS[..],
            &ISTIO_VERSIONS[..],
        ),
        (
            ISTIO_SECURITY_GROUP,
            &ISTIO_SECURITY_KINDS[..],
            &ISTIO_VERSIONS[..],
        ),
        (
            ISTIO_TELEMETRY_GROUP,
            &ISTIO_TELEMETRY_KINDS[..],
            &ISTIO_TELEMETRY_VERSIONS[..],
        ),
    ] {
        let Some(group) = groups.groups.iter().find(|g| g.name == group_name) else {
            continue;
        };
        let served: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
        for version in versions.iter().copied().filter(|v| served.contains(v)) {
            let api_version = format!("{group_name}/{version}");
            let list = client.list_api_group_resources(&api_version).await?;
            for resource in list.resources.iter().filter(|r| !r.name.contains('/')) {
                let Some(kind) = kinds.iter().copied().find(|k| k.as_str() == resource.kind) else {
                    continue;
                };
                if found.iter().any(|(k, _)| *k == kind) {
                    continue;
                }
                found.push((
                    kind,
                    ApiResource {
                        group: group_name.to_string(),
                        version: version.to_string(),
                        api_version: api_version.clone(),
                        kind: resource.kind.clone(),
                        plural: resource.name.clone(),
                    },
                ));
            }
        }
    }
    found.sort_by_key(|(k, _)| *k);
    Ok(found)
}
