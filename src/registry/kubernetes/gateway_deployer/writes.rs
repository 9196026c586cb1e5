//! What the gateway deployer reads and writes on the API server: the served Gateway and
//! GatewayClass resources, the server-side applies and deletes of a Gateway's objects (only
//! of objects the controller manages and the Gateway owns), and the watch of their deletions.

use std::fmt::Debug;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Gateway, Key};
use crate::registry::cluster::gateway_deployment::{FIELD_MANAGER, MANAGED_LABEL, MANAGED_VALUE};
use axon_config::gateway_api;

/// The Gateway and GatewayClass resources at the first version of istiod's (v1, then
/// v1beta1) that serves both; `None` when none does.
pub(super) async fn gateway_resource(
    client: &Client,
) -> kube::Result<Option<(ApiResource, ApiResource)>> {
    let groups = client.list_api_groups().await?;
    let Some(group) = groups
        .groups
        .into_iter()
        .find(|g| g.name == gateway_api::GROUP)
    else {
        return Ok(None);
    };
    for version in ["v1", "v1beta1"] {
        if !group.versions.iter().any(|v| v.version == version) {
            continue;
        }
        let api_version = format!("{}/{version}", gateway_api::GROUP);
        let list = client.list_api_group_resources(&api_version).await?;
        let find = |kind: &str| {
            list.resources
                .iter()
                .find(|r| r.kind == kind && !r.name.contains('/'))
                .map(|r| ApiResource {
                    group: gateway_api::GROUP.to_string(),
                    version: version.to_string(),
                    api_version: api_version.clone(),
                    kind: r.kind.clone(),
                    plural: r.name.clone(),
                })
        };
        if let (Some(gateway), Some(class)) = (find("Gateway"), find("GatewayClass")) {
            return Ok(Some((gateway, class)));
        }
    }
    Ok(None)
}

/// Whether `gw` still exists (same uid) and is not being deleted; a failed read counts as
/// alive (the apply that follows fails too, and is retried).
pub(super) async fn gateway_lives(client: &Client, resource: &ApiResource, gw: &Gateway) -> bool {
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), &gw.namespace, resource);
    match api.get_opt(&gw.name).await {
        Ok(Some(current)) => {
            current.metadata.uid.as_deref() == Some(gw.uid.as_str())
                && current.metadata.deletion_timestamp.is_none()
        }
        Ok(None) => false,
        Err(_) => true,
    }
}

/// The Gateways (namespace, name) whose managed objects of kind `K` are deleted: a watch of
/// the objects labelled `gateway.istio.io/managed`, each deletion named by its owner.
pub(super) fn owned_deletions<K>(client: &Client) -> BoxStream<'static, Key>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().labels(&format!("{MANAGED_LABEL}={MANAGED_VALUE}"));
    watcher(Api::<K>::all(client.clone()), config)
        .default_backoff()
        .filter_map(|event| async move {
            let watcher::Event::Delete(object) = event.ok()? else {
                return None;
            };
            let meta = object.meta();
            let owner = meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Gateway")?;
            Some((meta.namespace.clone()?, owner.name.clone()))
        })
        .boxed()
}

/// Server-side applies `object` in its namespace, as istiod's patcher does, unless an object
/// of that name exists without the `gateway.istio.io/managed` label (istiod's `canManage`:
/// what someone else made is not taken over; logged and skipped).
pub(super) async fn apply<K>(client: &Client, object: &K) -> kube::Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug,
    K::DynamicType: Default,
{
    let meta = object.meta();
    let ns: String = meta.namespace.clone().unwrap_or_default();
    let name: String = meta.name.clone().unwrap_or_default();
    let api = Api::<K>::namespaced(client.clone(), &ns);
    if let Some(current) = api.get_opt(&name).await? {
        let managed = current
            .meta()
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(MANAGED_LABEL));
        if !managed {
            let kind = K::kind(&Default::default()).to_string();
            tracing::info!(namespace = %ns, %name, %kind, "exists and is not managed by the gateway controller; left alone");
            return Ok(());
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(object)).await?;
    Ok(())
}

/// Deletes the autoscaler, disruption budget, Deployment and Service `name` and the
/// ServiceAccount `account` of `namespace` that the Gateway of `uid` owns.
pub(super) async fn delete_all(
    client: &Client,
    namespace: String,
    name: String,
    account: String,
    uid: String,
) -> kube::Result<()> {
    delete_owned::<HorizontalPodAutoscaler>(client, &namespace, &name, &uid).await?;
    delete_owned::<PodDisruptionBudget>(client, &namespace, &name, &uid).await?;
    delete_owned::<Deployment>(client, &namespace, &name, &uid).await?;
    delete_owned::<Service>(client, &namespace, &name, &uid).await?;
    delete_owned::<ServiceAccount>(client, &namespace, &account, &uid).await
}

/// Deletes `namespace/name` if it is managed by the controller and owned by the Gateway
/// of `uid`; an absent object is no error.
pub(super) async fn delete_owned<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    uid: &str,
) -> kube::Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let api = Api::<K>::namespaced(client.clone(), namespace);
    let Some(current) = api.get_opt(name).await? else {
        return Ok(());
    };
    let meta = current.meta();
    let managed = meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(MANAGED_LABEL));
    let owned = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Gateway" && o.uid == uid);
    if managed && owned {
        api.delete(name, &DeleteParams::default()).await?;
        tracing::info!(%namespace, %name, kind = %K::kind(&Default::default()), "deleted: its Gateway has manual addresses now, or no overlay asks for it");
    }
    Ok(())
}
