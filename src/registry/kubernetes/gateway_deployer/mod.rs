//! The automated deployment of Gateways, as istiod's deployment controller
//! (`pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go`): for each managed Gateway
//! of class `istio`, the ServiceAccount, Deployment and Service (and the HPA and PDB its
//! overlays ask for) that [`gateway_deployment::render_with`] makes with the overlay
//! ConfigMaps of `overlays.rs`, written by **server-side apply** (field manager
//! `istio.io/gateway-controller`, forced) so that what others set on them is kept; an edit of
//! one of those ConfigMaps renders again.
//!
//! [`GatewayDeployer`] is a tokio task, not an actor (as the JWKS resolver and
//! `root_cert::publish`): a kube watcher of Gateways (with backoff) drives it. It writes an
//! object only when its rendering differs from what it last applied, and again when one of
//! them is deleted by someone else (a watch of the objects labelled `gateway.istio.io/managed`;
//! an edit by someone else is undone only when the rendering changes); a Gateway that switches
//! to manual addresses (a Hostname) has its objects deleted (when they are owned by
//! it); a deleted Gateway's objects are left to the API server's garbage collector (their
//! ownerReference), as istiod does. A failed write is logged and tried again every 5 s.
//!
//! Only the replica holding the Lease [`LEASE`] (istiod's `istio-gateway-deployment`)
//! writes; the others keep watching, and a new holder applies every Gateway's objects once.
//! The holder also creates the GatewayClass `istio` when it is missing (istiod's
//! `ClassController`), and marks each Gateway it manages with istiod's
//! `gateway.istio.io/controller-version` annotation (written through the status
//! subresource, as istiod does): a Gateway marked by a newer controller is left to it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::registry::cluster::gateway_deployment::{
    self, DeploymentSettings, GatewayObject, Rendered,
};
use crate::registry::cluster::namespaces::NamespaceSelector;
use crate::registry::kubernetes::lease::Election;
use axon_config::gateway_api;
use overlays::{CmKey, Overlays};
use writes::{apply, delete_all, delete_owned, gateway_lives, gateway_resource, owned_deletions};

mod gateway;
mod overlays;
mod writes;

use gateway::{
    CONTROLLER_VERSION, CONTROLLER_VERSION_ANNOTATION, Gateway, Key, Version, controller_version,
    decode, uses,
};

/// The Lease whose holder deploys (istiod's is `istio-gateway-deployment`).
pub const LEASE: &str = "axon-gateway-deployment";

/// Applies the objects of managed Gateways; see the module's description.
pub struct GatewayDeployer {
    client: Client,
    election: Election,
    /// Whether this replica holds [`LEASE`].
    leader: bool,
    /// Whether the GatewayClass `istio` is known to exist (from the watch of GatewayClasses,
    /// or a create that succeeded or conflicted); until known, a leader tries to create it.
    class_exists: bool,
    /// The Gateway resource served, once found.
    gateway_resource: Option<ApiResource>,
    /// The ConfigMaps the Gateways' objects are rendered with.
    overlays: Overlays,
    /// Whether the ConfigMap watch has listed once: until then no Gateway is rendered, as
    /// its class defaults are not known yet (istiod waits for its informers to sync too).
    overlays_synced: bool,
    settings: DeploymentSettings,
    /// What was last applied, by the Gateway's namespace and name.
    applied: HashMap<Key, Rendered>,
    /// The Gateways watched, by namespace and name: handled in that order when many are due
    /// at once.
    gateways: BTreeMap<Key, Gateway>,
    /// The Gateways whose last apply or delete failed, tried again every [`RETRY`].
    failed: BTreeSet<Key>,
    /// With `--namespace-selector`: the selector and the namespaces it selects now (as
    /// istiod's controller reads only the discovery namespaces' Gateways).
    selector: Option<NamespaceSelector>,
    selected: BTreeSet<String>,
    /// The namespaces of a relist of Namespaces under way.
    relisting: BTreeSet<String>,
    /// The Gateways with manual addresses whose objects are known gone (not looked up again
    /// at each of their events).
    cleared: BTreeSet<Key>,
}

/// How often failed applies and deletes are tried again.
const RETRY: Duration = Duration::from_secs(5);

impl GatewayDeployer {
    pub fn new(
        client: Client,
        settings: DeploymentSettings,
        selector: Option<NamespaceSelector>,
        election: Election,
    ) -> Self {
        // The class defaults are ConfigMaps of axon's namespace, the Lease's.
        let overlays = Overlays::new(election.namespace());
        GatewayDeployer {
            client,
            election,
            leader: false,
            class_exists: false,
            gateway_resource: None,
            overlays,
            overlays_synced: false,
            settings,
            selector,
            selected: BTreeSet::new(),
            relisting: BTreeSet::new(),
            applied: HashMap::new(),
            gateways: BTreeMap::new(),
            failed: BTreeSet::new(),
            cleared: BTreeSet::new(),
        }
    }

    /// Finds the served Gateway resource and keeps the Gateways' objects applied; returns
    /// when the Gateway API is not served (no CRDs) or the watch ends.
    pub async fn run(mut self) {
        let resource = loop {
            match gateway_resource(&self.client).await {
                Ok(found) => break found,
                Err(error) => {
                    tracing::warn!(%error, "gateway deployment: discovery failed; retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
        let Some((resource, classes)) = resource else {
            tracing::info!("Gateways not served (no Gateway API CRDs): no automated deployment");
            return;
        };
        self.watch(resource, classes).await;
    }

    async fn watch(&mut self, resource: ApiResource, class_resource: ApiResource) {
        self.gateway_resource = Some(resource.clone());
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
        let classes_api = Api::<DynamicObject>::all_with(self.client.clone(), &class_resource);
        let mut classes = watcher(classes_api.clone(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut relisted_class = false;
        let mut renew = tokio::time::interval(self.election.timing.renew);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut gateways = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut owned = futures::stream::select_all([
            owned_deletions::<Deployment>(&self.client),
            owned_deletions::<Service>(&self.client),
            owned_deletions::<ServiceAccount>(&self.client),
            owned_deletions::<HorizontalPodAutoscaler>(&self.client),
            owned_deletions::<PodDisruptionBudget>(&self.client),
        ]);
        let mut config_maps = watcher(
            Api::<ConfigMap>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .boxed();
        let mut namespaces = match &self.selector {
            Some(selector) => {
                let config = watcher::Config::default().labels(&selector.to_label_selector());
                watcher(Api::<Namespace>::all(self.client.clone()), config)
                    .default_backoff()
                    .boxed()
            }
            None => futures::stream::pending().boxed(),
        };
        let mut retry = tokio::time::interval(RETRY);
        // Ticks missed while nothing failed do not come in a burst.
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = renew.tick() => {
                    let now = self.election.acquire().await;
                    if now != self.leader {
                        tracing::info!(lease = LEASE, leader = now, "gateway deployment leadership changed");
                        self.leader = now;
                        self.applied.clear();
                        self.failed.clear();
                        self.cleared.clear();
                        if now {
                            // The class first, so a Gateway's objects never precede it.
                            self.ensure_class(&classes_api, &class_resource.api_version).await;
                            self.reconcile_all().await;
                        }
                    }
                    self.ensure_class(&classes_api, &class_resource.api_version).await;
                }
                Some(event) = classes.next() => {
                    match event {
                        Ok(watcher::Event::Init) => relisted_class = false,
                        Ok(watcher::Event::InitApply(c)) if c.metadata.name.as_deref() == Some(gateway_deployment::CLASS) => relisted_class = true,
                        Ok(watcher::Event::InitDone) => {
                            self.class_exists = relisted_class;
                            self.ensure_class(&classes_api, &class_resource.api_version).await;
                        }
                        Ok(watcher::Event::Apply(c)) if c.metadata.name.as_deref() == Some(gateway_deployment::CLASS) => self.class_exists = true,
                        Ok(watcher::Event::Delete(c)) if c.metadata.name.as_deref() == Some(gateway_deployment::CLASS) => {
                            self.class_exists = false;
                            self.ensure_class(&classes_api, &class_resource.api_version).await;
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(%error, "watching GatewayClasses failed; retrying with backoff"),
                    }
                }
                Some(event) = config_maps.next() => {
                    let changed = match event {
                        Ok(watcher::Event::Init) => {
                            self.overlays.relist_start();
                            Vec::new()
                        }
                        Ok(watcher::Event::InitApply(cm)) => {
                            self.overlays.relisted(cm);
                            Vec::new()
                        }
                        Ok(watcher::Event::InitDone) => {
                            let changed = self.overlays.relist_done();
                            if !std::mem::replace(&mut self.overlays_synced, true) {
                                // The first list: every Gateway waited for it.
                                self.reconcile_all().await;
                                Vec::new()
                            } else {
                                changed
                            }
                        }
                        Ok(watcher::Event::Apply(cm)) => self.overlays.event(&cm, false),
                        Ok(watcher::Event::Delete(cm)) => self.overlays.event(&cm, true),
                        Err(error) => {
                            tracing::warn!(%error, "watching ConfigMaps for gateway deployment failed; retrying with backoff");
                            Vec::new()
                        }
                    };
                    let due: Vec<Gateway> = self
                        .gateways
                        .values()
                        .filter(|gw| changed.iter().any(|c| uses(gw, c)))
                        .cloned()
                        .collect();
                    for gw in due {
                        self.reconcile(&gw).await;
                    }
                }
                Some(event) = namespaces.next() => {
                    let newly = self.namespace_event(event);
                    let due: Vec<Gateway> = self
                        .gateways
                        .values()
                        .filter(|gw| newly.contains(&gw.namespace))
                        .cloned()
                        .collect();
                    for gw in due {
                        self.reconcile(&gw).await;
                    }
                }
                next = gateways.next() => match next {
                    Some(Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)))
                        if obj.metadata.deletion_timestamp.is_none() =>
                    {
                        if let Some(gw) = decode(&obj) {
                            self.gateways.insert(gw.key(), gw.clone());
                            self.forget_unnamed_config_maps();
                            self.reconcile(&gw).await;
                        }
                    }
                    // Deleted, or being deleted (foreground: its objects go first): the
                    // garbage collector deletes what the Gateway owned.
                    Some(Ok(
                        watcher::Event::Delete(obj)
                        | watcher::Event::Apply(obj)
                        | watcher::Event::InitApply(obj),
                    )) => {
                        let meta = &obj.metadata;
                        let key = (
                            meta.namespace.clone().unwrap_or_default(),
                            meta.name.clone().unwrap_or_default(),
                        );
                        self.applied.remove(&key);
                        self.failed.remove(&key);
                        self.cleared.remove(&key);
                        self.gateways.remove(&key);
                        self.forget_unnamed_config_maps();
                    }
                    Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                    Some(Err(error)) => {
                        tracing::warn!(%error, "watching Gateways for deployment failed; retrying with backoff");
                    }
                    None => return,
                },
                // One of the objects it applied was deleted by someone else: put back.
                // Unless its Gateway is gone: the garbage collector's deletions may come before
                // the Gateway's own, on another watch.
                Some(key) = owned.next() => {
                    if self.applied.remove(&key).is_some()
                        && let Some(gw) = self.gateways.get(&key).cloned()
                        && gateway_lives(&self.client, &resource, &gw).await
                    {
                        tracing::info!(namespace = %gw.namespace, gateway = %gw.name, "a gateway deployment object was deleted; applying again");
                        self.reconcile(&gw).await;
                    }
                }
                _ = retry.tick(), if !self.failed.is_empty() => {
                    let keys: Vec<_> = self.failed.iter().cloned().collect();
                    for key in keys {
                        if let Some(gw) = self.gateways.get(&key).cloned() {
                            self.reconcile(&gw).await;
                        }
                    }
                }
            }
        }
    }

    /// Follows the selected namespaces; returns those newly selected.
    fn namespace_event(
        &mut self,
        event: Result<watcher::Event<Namespace>, watcher::Error>,
    ) -> BTreeSet<String> {
        let name = |ns: &Namespace| ns.metadata.name.clone().unwrap_or_default();
        match event {
            Ok(watcher::Event::Init) => self.relisting.clear(),
            Ok(watcher::Event::InitApply(ns)) => {
                self.relisting.insert(name(&ns));
            }
            Ok(watcher::Event::InitDone) => {
                let listed = std::mem::take(&mut self.relisting);
                let newly = listed.difference(&self.selected).cloned().collect();
                self.selected = listed;
                return newly;
            }
            Ok(watcher::Event::Apply(ns)) => {
                let name = name(&ns);
                if self.selected.insert(name.clone()) {
                    return BTreeSet::from([name]);
                }
            }
            Ok(watcher::Event::Delete(ns)) => {
                self.selected.remove(&name(&ns));
            }
            Err(error) => {
                tracing::warn!(%error, "watching Namespaces for gateway deployment failed; retrying with backoff");
            }
        }
        BTreeSet::new()
    }

    /// Creates the GatewayClass `istio` when this replica leads and it is missing (istiod's
    /// `ClassController`: controller `istio.io/gateway-controller`, its description).
    async fn ensure_class(&mut self, api: &Api<DynamicObject>, api_version: &str) {
        if !self.leader || self.class_exists {
            return;
        }
        let class: DynamicObject = match serde_json::from_value(serde_json::json!({
            "apiVersion": api_version,
            "kind": "GatewayClass",
            "metadata": {"name": gateway_deployment::CLASS},
            "spec": {
                "controllerName": gateway_api::ISTIO_CONTROLLER,
                "description": "The default Istio GatewayClass",
            },
        })) {
            Ok(class) => class,
            Err(_) => return,
        };
        match api.create(&kube::api::PostParams::default(), &class).await {
            Ok(_) => {
                tracing::info!(class = gateway_deployment::CLASS, "GatewayClass created");
                self.class_exists = true;
            }
            Err(kube::Error::Api(e)) if e.code == 409 => self.class_exists = true,
            Err(error) => {
                tracing::warn!(%error, "creating the GatewayClass istio failed; retried at the next renewal")
            }
        }
    }

    /// Reconciles every Gateway watched, in namespace and name order.
    async fn reconcile_all(&mut self) {
        let all: Vec<Gateway> = self.gateways.values().cloned().collect();
        for gw in all {
            self.reconcile(&gw).await;
        }
    }

    /// Applies `gw`'s objects when they changed; deletes them when it is no longer managed.
    /// A Gateway of a namespace `--namespace-selector` leaves out is not touched, nor any
    /// while this replica does not hold the Lease or before the ConfigMaps are listed, nor one
    /// a newer controller manages.
    async fn reconcile(&mut self, gw: &Gateway) {
        let key = gw.key();
        if !self.leader
            || !self.overlays_synced
            || (self.selector.is_some() && !self.selected.contains(&gw.namespace))
        {
            self.failed.remove(&key);
            return;
        }
        match controller_version(gw) {
            Version::Newer(found) => {
                tracing::debug!(namespace = %gw.namespace, gateway = %gw.name, %found, "managed by a newer gateway controller; left alone");
                self.failed.remove(&key);
                return;
            }
            Version::Older if gw.spec.gateway_class_name == gateway_deployment::CLASS => {
                if let Err(error) = self.mark(gw).await {
                    tracing::warn!(namespace = %gw.namespace, gateway = %gw.name, %error, "marking the Gateway with the controller version failed; retrying");
                    self.failed.insert(key);
                    return;
                }
            }
            _ => {}
        }
        let deployed = gw.spec.gateway_class_name == gateway_deployment::CLASS
            && gateway_deployment::is_managed(&gw.spec);
        // The parametersRef ConfigMap, read once if no event told of it yet.
        let parameters = match gateway_deployment::parameters_ref(&gw.spec) {
            Ok(name) => name.map(|name| (gw.namespace.clone(), name)),
            Err(error) if deployed => {
                tracing::warn!(namespace = %gw.namespace, gateway = %gw.name, %error, "gateway deployment not rendered (the Gateway's status says why)");
                self.failed.remove(&key);
                return;
            }
            Err(_) => None,
        };
        if deployed
            && let Some(cm) = &parameters
            && !self.overlays.knows(cm)
        {
            match Api::<ConfigMap>::namespaced(self.client.clone(), &cm.0)
                .get_opt(&cm.1)
                .await
            {
                Ok(found) => self
                    .overlays
                    .set_parameters(cm.clone(), found.map(|c| c.data.unwrap_or_default())),
                Err(error) => {
                    tracing::warn!(namespace = %gw.namespace, gateway = %gw.name, %error, "reading the Gateway's parametersRef ConfigMap failed; retrying");
                    self.failed.insert(key);
                    return;
                }
            }
        }
        // Rendered before any await: the borrowing view is not held across one.
        let (rendered, name) = {
            let object = GatewayObject {
                namespace: &gw.namespace,
                name: &gw.name,
                uid: &gw.uid,
                labels: &gw.labels,
                annotations: &gw.annotations,
                spec: &gw.spec,
            };
            let rendered = if deployed {
                self.overlays
                    .for_gateway(&gw.spec.gateway_class_name, parameters.as_ref())
                    .and_then(|overlays| {
                        gateway_deployment::render_with(&object, &self.settings, &overlays)
                            .map_err(|e| e.to_string())
                    })
            } else {
                Ok(None)
            };
            (rendered, gateway_deployment::deployment_name(&object))
        };
        // As istiod: a rendering error is logged, and nothing is written until the Gateway
        // or one of its ConfigMaps changes.
        let rendered = match rendered {
            Ok(rendered) => rendered,
            Err(error) => {
                tracing::warn!(namespace = %gw.namespace, gateway = %gw.name, %error, "gateway deployment not rendered: its overlays are invalid");
                self.failed.remove(&key);
                return;
            }
        };
        match rendered {
            Some(rendered) => {
                self.cleared.remove(&key);
                if self.applied.get(&key) == Some(&rendered) {
                    return;
                }
                match self.apply(gw, &rendered).await {
                    Ok(()) => {
                        tracing::info!(namespace = %gw.namespace, gateway = %gw.name, "gateway deployment applied");
                        self.failed.remove(&key);
                        self.applied.insert(key, rendered);
                    }
                    Err(error) => {
                        tracing::warn!(namespace = %gw.namespace, gateway = %gw.name, %error, "applying the gateway deployment failed; retrying");
                        self.applied.remove(&key);
                        self.failed.insert(key);
                    }
                }
            }
            None if gw.spec.gateway_class_name == gateway_deployment::CLASS
                && !self.cleared.contains(&key) =>
            {
                // Manual addresses: what the controller made for it goes.
                let account = gw
                    .annotations
                    .get("gateway.istio.io/service-account")
                    .cloned()
                    .unwrap_or_else(|| name.clone());
                match delete_all(
                    &self.client,
                    gw.namespace.clone(),
                    name,
                    account,
                    gw.uid.clone(),
                )
                .await
                {
                    Ok(()) => {
                        self.applied.remove(&key);
                        self.failed.remove(&key);
                        self.cleared.insert(key);
                    }
                    Err(error) => {
                        tracing::warn!(namespace = %gw.namespace, gateway = %gw.name, %error, "deleting the gateway deployment failed; retrying");
                        self.failed.insert(key);
                    }
                }
            }
            None => {
                self.failed.remove(&key);
            }
        }
    }

    /// Writes istiod's controller-version annotation on `gw`, through its status subresource
    /// (as istiod does, so that no write of the Gateway itself is needed).
    async fn mark(&self, gw: &Gateway) -> kube::Result<()> {
        let Some(resource) = self.gateway_resource.as_ref() else {
            return Ok(());
        };
        let api =
            Api::<DynamicObject>::namespaced_with(self.client.clone(), &gw.namespace, resource);
        let patch = serde_json::json!({"metadata": {"annotations": {
            CONTROLLER_VERSION_ANNOTATION: CONTROLLER_VERSION.to_string(),
        }}});
        api.patch_status(&gw.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    /// Applies the objects rendered; an autoscaler or disruption budget no overlay asks for
    /// any more is deleted (if the controller made it for this Gateway).
    async fn apply(&self, gw: &Gateway, r: &Rendered) -> kube::Result<()> {
        apply(&self.client, &r.service_account).await?;
        apply(&self.client, &r.deployment).await?;
        apply(&self.client, &r.service).await?;
        let name = r.deployment.metadata.name.clone().unwrap_or_default();
        match &r.horizontal_pod_autoscaler {
            Some(hpa) => apply(&self.client, hpa).await?,
            None => {
                delete_owned::<HorizontalPodAutoscaler>(&self.client, &gw.namespace, &name, &gw.uid)
                    .await?
            }
        }
        match &r.pod_disruption_budget {
            Some(pdb) => apply(&self.client, pdb).await?,
            None => {
                delete_owned::<PodDisruptionBudget>(&self.client, &gw.namespace, &name, &gw.uid)
                    .await?
            }
        }
        Ok(())
    }

    /// Forgets the parametersRef ConfigMaps no Gateway names any more.
    fn forget_unnamed_config_maps(&mut self) {
        let named: BTreeSet<CmKey> = self
            .gateways
            .values()
            .filter_map(|gw| {
                let name = gateway_deployment::parameters_ref(&gw.spec).ok()??;
                Some((gw.namespace.clone(), name))
            })
            .collect();
        self.overlays.retain(|k| named.contains(k));
    }
}
