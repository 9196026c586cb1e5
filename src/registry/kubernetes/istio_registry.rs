//! The IstioRegistry: the Istio kinds (networking, security, telemetry.istio.io) and the
//! Gateway API kinds (gateway.networking.k8s.io) the API server serves, each at its best
//! served version (found by discovery: `watch::config_resources`; a kind whose CRD is not
//! installed is not watched), TLS Secrets (`v1` Secrets, as istiod's credentials controller
//! watches them; and, with a namespace selector, Namespaces) watched into a
//! [`IstioObjectIndex`], whose configs it sends as source `kubernetes-istio` through its
//! [`Outbox`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};

use super::namespace_config;
use crate::actors::messages::GetConfigz;
use crate::registry::cluster::namespaces::{NamespaceChange, NamespaceFilter};
use crate::registry::kubernetes::Settings;
use crate::registry::kubernetes::config::{IstioObjectIndex, Rejected};
use crate::registry::kubernetes::watch::{self, WatchEvent, WatchKind, WatchTask};
use crate::registry::outbox::Outbox;
use axon_config::config::ConfigKind;

/// Istio and Gateway API objects (and Namespaces with a selector) → Configs.
pub struct IstioRegistry {
    client: Client,
    settings: Settings,
    index: IstioObjectIndex,
    out: Outbox,
    /// The apiVersion watched per kind.
    versions: BTreeMap<ConfigKind, String>,
    resources: Option<Vec<(ConfigKind, ApiResource)>>,
    tasks: BTreeMap<WatchKind, WatchTask>,
    mailbox_capacity: usize,
}

/// istiod's `SecretsFieldSelector`: the Secrets that cannot hold TLS material are not listed.
const SECRETS_FIELD_SELECTOR: &str =
    "type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token";

/// How long to wait before discovering the Istio API again after an error.
const DISCOVERY_RETRY: Duration = Duration::from_secs(5);

impl IstioRegistry {
    pub fn new(client: Client, settings: Settings, out: Outbox, mailbox_capacity: usize) -> Self {
        IstioRegistry {
            index: IstioObjectIndex::new(NamespaceFilter::new(settings.namespace_selector.clone())),
            client,
            settings,
            out,
            versions: BTreeMap::new(),
            resources: None,
            tasks: BTreeMap::new(),
            mailbox_capacity,
        }
    }

    fn discover(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        ctx.spawn(
            async move { watch::config_resources(&client).await }
                .into_actor(self)
                .map(|result, act, ctx| match result {
                    Ok(resources) => {
                        if !resources.iter().any(|(k, _)| !k.is_gateway_api()) {
                            tracing::warn!("networking.istio.io is not served (no Istio CRDs): no Istio config from Kubernetes");
                        }
                        let missing: Vec<&str> = ConfigKind::GATEWAY_API
                            .iter()
                            .map(|(k, _)| *k)
                            .filter(|k| !resources.iter().any(|(r, _)| r == k))
                            .map(ConfigKind::api_kind)
                            .collect();
                        if !missing.is_empty() {
                            tracing::info!(kinds = %missing.join(", "), "Gateway API kinds not served (CRDs not installed): not watched");
                        }
                        for (kind, ar) in &resources {
                            tracing::info!(%kind, api_version = %ar.api_version, "watching config");
                        }
                        act.resources = Some(resources);
                        act.report_unapplied(ctx);
                        if act.settings.namespace_selector.is_some() {
                            let api = Api::<Namespace>::all(act.client.clone());
                            let config = namespace_config(&act.settings);
                            let task = watch::spawn(WatchKind::Namespace, api, config, ctx.address().recipient(), act.out.metrics());
                            act.tasks.insert(WatchKind::Namespace, task);
                        } else {
                            // No Namespaces to list: discovery stood for them.
                            act.out.listed(WatchKind::Namespace);
                            act.watch_istio_kinds(ctx);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "Istio API discovery failed; retrying");
                        ctx.run_later(DISCOVERY_RETRY, |act, ctx| act.discover(ctx));
                    }
                }),
        );
    }

    /// Warns of the Istio and Gateway API objects in the cluster of kinds axon does not apply
    /// (what they say is not enforced), once, at start.
    fn report_unapplied(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        let watched = self.resources.clone().unwrap_or_default();
        ctx.spawn(
            async move { watch::unapplied_kinds(&client, &watched).await }
                .into_actor(self)
                .map(|result, _, _| match result {
                    Ok(kinds) => {
                        for k in kinds {
                            tracing::warn!(
                                kind = %k.kind,
                                api_version = %k.api_version,
                                example = %k.example,
                                "kind not applied by axon: what its objects in the cluster say is not enforced"
                            );
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not list the Istio and Gateway API kinds axon does not apply");
                    }
                }),
        );
    }

    fn watch_istio_kinds(&mut self, ctx: &mut Context<Self>) {
        for (kind, ar) in self.resources.iter().flatten() {
            let watch_kind = WatchKind::Istio(*kind);
            let api = Api::<DynamicObject>::all_with(self.client.clone(), ar);
            let task = watch::spawn(
                watch_kind,
                api,
                watcher::Config::default(),
                ctx.address().recipient(),
                self.out.metrics(),
            );
            self.versions.insert(*kind, ar.api_version.clone());
            self.out.expect(watch_kind);
            self.tasks.insert(watch_kind, task);
        }
        self.watch_secrets(ctx);
        self.watch_config_maps(ctx);
        // Without any kind to list, the registry is synced now.
        super::publish(&mut self.out, self.index.configs(), Instant::now());
    }

    /// TLS Secrets, as istiod's credentials controller watches them: every Secret but Helm
    /// releases and service-account tokens (its `SecretsFieldSelector`); those without TLS
    /// keys are not held (`config::IstioObjectIndex`).
    fn watch_secrets(&mut self, ctx: &mut Context<Self>) {
        let config = watcher::Config::default().fields(SECRETS_FIELD_SELECTOR);
        self.watch_core_v1(ctx, ConfigKind::Secret, "Secret", "secrets", config);
    }

    /// ConfigMaps holding a CA (`ca.crt`): the `configmap://` roots of BackendTLSPolicies and
    /// Gateways' client validation; the others are not held.
    fn watch_config_maps(&mut self, ctx: &mut Context<Self>) {
        let config = watcher::Config::default();
        self.watch_core_v1(
            ctx,
            ConfigKind::ConfigMap,
            "ConfigMap",
            "configmaps",
            config,
        );
    }

    /// Watches the core `v1` objects `plural` (of `resource_kind`) in every namespace, held
    /// as `kind`.
    fn watch_core_v1(
        &mut self,
        ctx: &mut Context<Self>,
        kind: ConfigKind,
        resource_kind: &str,
        plural: &str,
        config: watcher::Config,
    ) {
        let watch_kind = WatchKind::Istio(kind);
        let resource = ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: resource_kind.into(),
            plural: plural.into(),
        };
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
        let task = watch::spawn(
            watch_kind,
            api,
            config,
            ctx.address().recipient(),
            self.out.metrics(),
        );
        self.versions.insert(kind, "v1".into());
        self.out.expect(watch_kind);
        self.tasks.insert(watch_kind, task);
    }

    fn report(&self, rejected: Option<Rejected>) {
        if let Some(r) = rejected {
            if r.kind == ConfigKind::Secret {
                self.out.metrics().sds_certificate_errors.inc();
            }
            tracing::warn!(kind = %r.kind, object = %r.key, reason = %r.reason, kept_previous = r.kept_previous, "invalid config: {r}");
        }
    }
}

impl Actor for IstioRegistry {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        // Not synced before discovery answers and, with a selector, Namespaces are listed.
        self.out.expect(WatchKind::Namespace);
        self.discover(ctx);
    }
}

impl Handler<WatchEvent<DynamicObject>> for IstioRegistry {
    type Result = ();
    fn handle(&mut self, msg: WatchEvent<DynamicObject>, _: &mut Context<Self>) {
        let started = Instant::now();
        let WatchKind::Istio(kind) = msg.kind else {
            return;
        };
        let api_version = self.versions.get(&kind).cloned().unwrap_or_default();
        let value = |obj: DynamicObject| serde_json::to_value(obj).unwrap_or_default();
        match msg.event {
            Event::Init => self.index.init(kind),
            Event::InitApply(obj) => {
                let rejected = self.index.init_apply(kind, &api_version, value(obj));
                self.report(rejected)
            }
            Event::InitDone => {
                self.index.init_done(kind);
                self.out.listed(msg.kind);
            }
            Event::Apply(obj) => {
                let rejected = self.index.apply(kind, &api_version, value(obj));
                self.report(rejected)
            }
            Event::Delete(obj) => {
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let name = obj.metadata.name.clone().unwrap_or_default();
                self.index.delete(kind, &ns, &name);
            }
        }
        for (kind, object, fields) in self.index.take_notes() {
            tracing::warn!(
                %kind,
                %object,
                fields = %fields.join(", "),
                "fields accepted but not applied by axon"
            );
        }
        super::publish(&mut self.out, self.index.configs(), started);
    }
}

impl Handler<WatchEvent<Namespace>> for IstioRegistry {
    type Result = ();
    fn handle(&mut self, msg: WatchEvent<Namespace>, ctx: &mut Context<Self>) {
        let started = Instant::now();
        let first_list = !self.tasks.keys().any(|k| matches!(k, WatchKind::Istio(_)));
        let change = match msg.event {
            Event::Init => {
                self.index.init_namespaces();
                NamespaceChange::default()
            }
            Event::InitApply(ns) => {
                self.index.init_namespace(&ns);
                NamespaceChange::default()
            }
            Event::InitDone => {
                let change = self.index.namespaces_listed();
                self.out.listed(WatchKind::Namespace);
                if first_list {
                    self.watch_istio_kinds(ctx);
                    return;
                }
                change
            }
            Event::Apply(ns) => self.index.apply_namespace(&ns),
            Event::Delete(ns) => self.index.delete_namespace(&ns),
        };
        if !change.added.is_empty() && !first_list {
            tracing::info!(namespaces = ?change.added, "namespaces selected; relisting Istio config");
            self.out
                .metrics()
                .kubernetes_relists
                .with_label_values(&["namespaces"])
                .inc();
            for (kind, task) in &self.tasks {
                if *kind != WatchKind::Namespace {
                    task.relist();
                }
            }
        }
        super::publish(&mut self.out, self.index.configs(), started);
    }
}

impl Handler<GetConfigz> for IstioRegistry {
    type Result = MessageResult<GetConfigz>;
    fn handle(&mut self, _: GetConfigz, _: &mut Context<Self>) -> Self::Result {
        let configs = self.index.configs();
        MessageResult(serde_json::json!({
            "source": self.out.source(),
            "synced": self.out.is_synced(),
            "versions": self.versions,
            "configs": configs.values().collect::<Vec<_>>(),
            "errors": self.index.rejected().map(ToString::to_string).collect::<Vec<_>>(),
        }))
    }
}
