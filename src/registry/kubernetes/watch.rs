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
//! Also here: the discovery of the served version of each Istio and Gateway API kind
//! ([`config_resources`]), and of the served kinds axon does not apply ([`unapplied_kinds`]).

use std::fmt;
use std::sync::Arc;

use actix::prelude::*;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use axon_config::config::{
    ConfigKind, ISTIO_NETWORKING_GROUP, ISTIO_SECURITY_GROUP, ISTIO_TELEMETRY_GROUP,
};
use axon_config::gateway_api;
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
    gateway_api::GROUP,
    gateway_api::EXPERIMENTAL_GROUP,
];

/// A served Istio or Gateway API kind axon does not apply that has objects in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unapplied {
    pub kind: String,
    pub api_version: String,
    /// One of its objects, `namespace/name`.
    pub example: String,
}

/// The served kinds of `MEANING_GROUPS` that axon does not watch (not in `watched`, the
/// resources [`config_resources`] found, by group and kind) and that hold objects, each
/// found by a list of one item. So the Gateway API kinds axon reads are not reported, and
/// `ListenerSet`, `UDPRoute` and the experimental group's kinds are.
pub async fn unapplied_kinds(
    client: &Client,
    watched: &[(ConfigKind, ApiResource)],
) -> super::Result<Vec<Unapplied>> {
    let groups = client.list_api_groups().await?;
    let is_watched = |group: &str, kind: &str| {
        watched
            .iter()
            .any(|(_, ar)| ar.group == group && ar.kind == kind)
    };
    let mut out = Vec::new();
    for group in groups
        .groups
        .iter()
        .filter(|g| MEANING_GROUPS.contains(&g.name.as_str()))
    {
        // Every served version, the preferred first: a kind served only at an older one
        // (UDPRoute at v1alpha2 beside the group's v1) is found, each kind once.
        let preferred = group.preferred_version.as_ref();
        let versions = preferred
            .into_iter()
            .chain(group.versions.iter().filter(|v| preferred != Some(*v)));
        let mut seen: Vec<String> = Vec::new();
        for version in versions {
            let list = client
                .list_api_group_resources(&version.group_version)
                .await?;
            for resource in list.resources.iter().filter(|r| !r.name.contains('/')) {
                if is_watched(&group.name, &resource.kind) || seen.contains(&resource.kind) {
                    continue;
                }
                seen.push(resource.kind.clone());
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
    }
    Ok(out)
}

/// The kinds axon reads from one API group, each with its versions, best first.
struct GroupKinds {
    group: &'static str,
    kinds: Vec<(ConfigKind, &'static [&'static str])>,
}

/// What axon reads from Kubernetes besides Services: the Istio kinds (v1, then v1beta1,
/// then v1alpha3; v1alpha1 for Telemetry) and the Gateway API's
/// ([`ConfigKind::GATEWAY_API`]: each kind in istiod's order of versions).
fn config_groups() -> [GroupKinds; 4] {
    let of = |kinds: &[ConfigKind], versions: &'static [&'static str]| {
        kinds.iter().map(|k| (*k, versions)).collect()
    };
    [
        GroupKinds {
            group: ISTIO_NETWORKING_GROUP,
            kinds: of(&ISTIO_KINDS, &ISTIO_VERSIONS),
        },
        GroupKinds {
            group: ISTIO_SECURITY_GROUP,
            kinds: of(&ISTIO_SECURITY_KINDS, &ISTIO_VERSIONS),
        },
        GroupKinds {
            group: ISTIO_TELEMETRY_GROUP,
            kinds: of(&ISTIO_TELEMETRY_KINDS, &ISTIO_TELEMETRY_VERSIONS),
        },
        GroupKinds {
            group: gateway_api::GROUP,
            kinds: ConfigKind::GATEWAY_API.to_vec(),
        },
    ]
}

/// For each Istio and Gateway API kind the API server serves, the resource at its best
/// served version: of networking.istio.io, security.istio.io, telemetry.istio.io and
/// gateway.networking.k8s.io (each in the order of versions of `config_groups`). A kind
/// whose CRD is not installed (or served at no version axon reads) is absent; empty when no
/// group is served.
pub async fn config_resources(client: &Client) -> super::Result<Vec<(ConfigKind, ApiResource)>> {
    let groups = client.list_api_groups().await?;
    let mut found: Vec<(ConfigKind, ApiResource)> = Vec::new();
    for wanted in config_groups() {
        let Some(group) = groups.groups.iter().find(|g| g.name == wanted.group) else {
            continue;
        };
        let served: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
        // Each served version axon reads some kind in, listed once.
        let mut lists = Vec::new();
        for version in wanted.kinds.iter().flat_map(|(_, vs)| vs.iter().copied()) {
            if served.contains(&version) && !lists.iter().any(|(v, _)| *v == version) {
                let api_version = format!("{}/{version}", wanted.group);
                let list = client.list_api_group_resources(&api_version).await?;
                lists.push((version, list));
            }
        }
        found.extend(best_resources(&wanted, &lists));
    }
    found.sort_by_key(|(k, _)| *k);
    Ok(found)
}

/// Each kind of `wanted` at the first of its versions whose served resources (`lists`, by
/// version) hold it; a kind served at none is absent.
fn best_resources(
    wanted: &GroupKinds,
    lists: &[(&str, APIResourceList)],
) -> Vec<(ConfigKind, ApiResource)> {
    let mut found = Vec::new();
    for (kind, versions) in &wanted.kinds {
        let best = versions.iter().find_map(|version| {
            let (_, list) = lists.iter().find(|(v, _)| v == version)?;
            let resource = list
                .resources
                .iter()
                .find(|r| !r.name.contains('/') && r.kind == kind.api_kind())?;
            Some(ApiResource {
                group: wanted.group.to_string(),
                version: version.to_string(),
                api_version: format!("{}/{version}", wanted.group),
                kind: resource.kind.clone(),
                plural: resource.name.clone(),
            })
        });
        if let Some(ar) = best {
            found.push((*kind, ar));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    fn list(version: &'static str, kinds: &[(&str, &str)]) -> (&'static str, APIResourceList) {
        let resources = kinds
            .iter()
            .flat_map(|(kind, plural)| {
                // A subresource is never taken for the kind.
                [format!("{plural}/status"), plural.to_string()].map(|name| APIResource {
                    name,
                    kind: kind.to_string(),
                    ..Default::default()
                })
            })
            .collect();
        (
            version,
            APIResourceList {
                group_version: format!("{}/{version}", gateway_api::GROUP),
                resources,
            },
        )
    }

    #[test]
    fn each_gateway_api_kind_is_watched_at_its_first_served_version_in_istiods_order() {
        let [.., wanted] = config_groups();
        assert_eq!(wanted.group, "gateway.networking.k8s.io");
        let lists = [
            list(
                "v1",
                &[("Gateway", "gateways"), ("GatewayClass", "gatewayclasses")],
            ),
            list(
                "v1beta1",
                &[
                    ("ReferenceGrant", "referencegrants"),
                    ("Gateway", "gateways"),
                ],
            ),
            list(
                "v1alpha2",
                &[
                    ("TLSRoute", "tlsroutes"),
                    ("ReferenceGrant", "referencegrants"),
                    ("UDPRoute", "udproutes"),
                ],
            ),
        ];
        let found: Vec<(ConfigKind, String, String)> = best_resources(&wanted, &lists)
            .into_iter()
            .map(|(k, ar)| (k, ar.api_version, ar.plural))
            .collect();
        let v = |k, version: &str, plural: &str| {
            (
                k,
                format!("gateway.networking.k8s.io/{version}"),
                plural.to_string(),
            )
        };
        assert_eq!(
            found,
            [
                v(ConfigKind::GatewayClass, "v1", "gatewayclasses"),
                v(ConfigKind::KubernetesGateway, "v1", "gateways"),
                v(ConfigKind::TlsRoute, "v1alpha2", "tlsroutes"),
                v(ConfigKind::ReferenceGrant, "v1beta1", "referencegrants"),
            ]
        );
    }
}
