//! The Kubernetes registry actors: [`ServiceRegistry`] (source `kubernetes`) and
//! [`IstioRegistry`] (source `kubernetes-istio`).
//!
//! Each owns an index and its watch tasks, receives [`Watched`] events from them, and sends
//! [`ConfigUpdate`] to the Debouncer: first once every one of its kinds has finished its
//! initial list (then it tells the [`Readiness`] gate), and after that only when
//! [`compare`] finds a changed config, as an endpoints-only request when only endpoints
//! changed. With a namespace selector, the Namespaces are listed first and the other kinds
//! after; a namespace that starts matching makes the other kinds relist.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::kube::Client;
use ::kube::api::{Api, ApiResource, DynamicObject};
use ::kube::runtime::watcher::{self, Event};
use actix::prelude::*;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::config::ConfigIndex;
use super::namespaces::{NamespaceChange, NamespaceFilter};
use super::services::{ServiceIndex, ServiceKind};
use super::watch::{self, WatchKind, WatchTask, Watched};
use super::{ISTIO_SOURCE, SERVICES_SOURCE, Settings};
use crate::actors::debouncer::{ConfigUpdate, SourceId};
use crate::actors::file_registry::GetConfigz;
use crate::metrics::Metrics;
use crate::model::config::ConfigKind;
use crate::model::file_set::compare;
use crate::model::push_context::ConfigSet;
use crate::model::push_request::{PushRequest, TriggerReason};
use crate::monitoring::Readiness;

/// Where a registry's updates go, and what it sent last.
pub struct Outbox {
    source: SourceId,
    debouncer: Recipient<ConfigUpdate>,
    metrics: Metrics,
    readiness: Readiness,
    last: Arc<ConfigSet>,
    /// Kinds whose initial list is not done yet.
    listing: BTreeSet<WatchKind>,
    synced: bool,
}

impl Outbox {
    pub fn new(
        source: SourceId,
        debouncer: Recipient<ConfigUpdate>,
        metrics: Metrics,
        readiness: Readiness,
    ) -> Self {
        Outbox {
            source,
            debouncer,
            metrics,
            readiness,
            last: Arc::default(),
            listing: BTreeSet::new(),
            synced: false,
        }
    }

    fn expect(&mut self, kind: WatchKind) {
        if !self.synced {
            self.listing.insert(kind);
        }
    }

    fn listed(&mut self, kind: WatchKind) {
        self.listing.remove(&kind);
    }

    /// Sends `configs` if the registry has synced and they differ from the last sent.
    fn publish(&mut self, configs: Arc<ConfigSet>, started: Instant) {
        if !self.synced {
            if !self.listing.is_empty() {
                return;
            }
            self.synced = true;
            tracing::info!(
                source = self.source,
                configs = configs.len(),
                "Kubernetes registry synced"
            );
            self.send(
                configs,
                PushRequest::full_push(TriggerReason::Config, started),
                1,
            );
            self.readiness.registry_synced();
            return;
        }
        let (changed, endpoints_only) = if Arc::ptr_eq(&self.last, &configs) {
            Default::default()
        } else {
            compare(&self.last, &configs)
        };
        if changed.is_empty() {
            tracing::debug!(source = self.source, "Kubernetes event changed no config");
            self.last = configs;
            return;
        }
        let n = changed.len();
        let request = if endpoints_only {
            PushRequest::endpoint_change(changed, started)
        } else {
            PushRequest::config_change(changed, started)
        };
        self.send(configs, request, n);
    }

    fn send(&mut self, configs: Arc<ConfigSet>, request: PushRequest, n: usize) {
        let kind = if request.full { "config" } else { "eds" };
        self.metrics
            .inbound_updates
            .with_label_values(&[kind])
            .inc_by(n as u64);
        tracing::debug!(
            source = self.source,
            changed = n,
            full = request.full,
            "Kubernetes configs changed"
        );
        self.last = configs.clone();
        self.metrics.sent("debouncer");
        self.debouncer.do_send(ConfigUpdate {
            source: self.source,
            configs,
            request,
        });
    }
}

fn namespace_config(settings: &Settings) -> watcher::Config {
    let config = watcher::Config::default();
    match &settings.namespace_selector {
        Some(s) => config.labels(&s.to_label_selector()),
        None => config,
    }
}

// ---------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------

/// Services, EndpointSlices and Pods (and Namespaces with a selector) → ServiceEntries.
pub struct ServiceRegistry {
    client: Client,
    settings: Settings,
    index: ServiceIndex,
    out: Outbox,
    tasks: BTreeMap<WatchKind, WatchTask>,
    mailbox_capacity: usize,
}

impl ServiceRegistry {
    pub fn new(client: Client, settings: Settings, out: Outbox, mailbox_capacity: usize) -> Self {
        let filter = NamespaceFilter::new(settings.namespace_selector.clone());
        ServiceRegistry {
            index: ServiceIndex::new(&settings.cluster_domain, filter),
            client,
            settings,
            out,
            tasks: BTreeMap::new(),
            mailbox_capacity,
        }
    }

    fn watch_namespaced_kinds(&mut self, ctx: &mut Context<Self>) {
        let addr = ctx.address();
        let c = self.client.clone();
        let config = watcher::Config::default;
        self.watching(
            WatchKind::Service,
            Api::<Service>::all(c.clone()),
            config(),
            addr.clone().recipient(),
        );
        self.watching(
            WatchKind::EndpointSlice,
            Api::<EndpointSlice>::all(c.clone()),
            config(),
            addr.clone().recipient(),
        );
        self.watching(
            WatchKind::Pod,
            Api::<Pod>::all(c),
            config(),
            addr.recipient(),
        );
    }

    fn watching<K>(
        &mut self,
        kind: WatchKind,
        api: Api<K>,
        config: watcher::Config,
        to: Recipient<Watched<K>>,
    ) where
        K: ::kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
    {
        self.out.expect(kind);
        self.tasks.insert(kind, watch::spawn(kind, api, config, to));
    }

    fn namespaces_changed(&mut self, change: NamespaceChange, ctx: &mut Context<Self>) {
        if !change.removed.is_empty() {
            tracing::info!(namespaces = ?change.removed, "namespaces no longer selected; dropped");
        }
        if change.added.is_empty() {
            return;
        }
        if self.tasks.len() == 1 {
            self.watch_namespaced_kinds(ctx);
        } else {
            tracing::info!(namespaces = ?change.added, "namespaces selected; relisting");
            for (kind, task) in &self.tasks {
                if *kind != WatchKind::Namespace {
                    task.relist();
                }
            }
        }
    }

    fn on_event<K>(
        &mut self,
        msg: Watched<K>,
        kind: ServiceKind,
        one: fn(&mut ServiceIndex, &K, bool),
        delete: fn(&mut ServiceIndex, &K),
    ) {
        let started = Instant::now();
        match msg.event {
            Event::Init => self.index.init(kind),
            Event::InitApply(obj) => one(&mut self.index, &obj, true),
            Event::InitDone => {
                self.index.init_done(kind);
                self.out.listed(msg.kind);
            }
            Event::Apply(obj) => one(&mut self.index, &obj, false),
            Event::Delete(obj) => delete(&mut self.index, &obj),
        }
        self.out.publish(self.index.configs(), started);
    }
}

impl Actor for ServiceRegistry {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        if self.settings.namespace_selector.is_some() {
            let api = Api::<Namespace>::all(self.client.clone());
            let config = namespace_config(&self.settings);
            let task = watch::spawn(WatchKind::Namespace, api, config, ctx.address().recipient());
            self.out.expect(WatchKind::Namespace);
            self.tasks.insert(WatchKind::Namespace, task);
        } else {
            self.watch_namespaced_kinds(ctx);
        }
    }
}

impl Handler<Watched<Service>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: Watched<Service>, _: &mut Context<Self>) {
        self.on_event(
            msg,
            ServiceKind::Service,
            |i, o, init| {
                if init {
                    i.init_service(o)
                } else {
                    i.apply_service(o)
                }
            },
            ServiceIndex::delete_service,
        );
    }
}

impl Handler<Watched<EndpointSlice>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: Watched<EndpointSlice>, _: &mut Context<Self>) {
        self.on_event(
            msg,
            ServiceKind::EndpointSlice,
            |i, o, init| {
                if init {
                    i.init_slice(o)
                } else {
                    i.apply_slice(o)
                }
            },
            ServiceIndex::delete_slice,
        );
    }
}

impl Handler<Watched<Pod>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: Watched<Pod>, _: &mut Context<Self>) {
        self.on_event(
            msg,
            ServiceKind::Pod,
            |i, o, init| if init { i.init_pod(o) } else { i.apply_pod(o) },
            ServiceIndex::delete_pod,
        );
    }
}

impl Handler<Watched<Namespace>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: Watched<Namespace>, ctx: &mut Context<Self>) {
        let started = Instant::now();
        let change = match msg.event {
            Event::Init => {
                self.index.init(ServiceKind::Namespace);
                NamespaceChange::default()
            }
            Event::InitApply(ns) => {
                self.index.init_namespace(&ns);
                NamespaceChange::default()
            }
            Event::InitDone => {
                self.out.listed(WatchKind::Namespace);
                self.index.init_done(ServiceKind::Namespace)
            }
            Event::Apply(ns) => self.index.apply_namespace(&ns),
            Event::Delete(ns) => self.index.delete_namespace(&ns),
        };
        self.namespaces_changed(change, ctx);
        self.out.publish(self.index.configs(), started);
    }
}

impl Handler<GetConfigz> for ServiceRegistry {
    type Result = MessageResult<GetConfigz>;
    fn handle(&mut self, _: GetConfigz, _: &mut Context<Self>) -> Self::Result {
        let configs = self.index.configs();
        MessageResult(serde_json::json!({
            "source": self.out.source,
            "synced": self.out.synced,
            "objects": self.index.counts(),
            "configs": configs.values().collect::<Vec<_>>(),
        }))
    }
}

// ---------------------------------------------------------------------------------------
// Istio config
// ---------------------------------------------------------------------------------------

/// networking.istio.io objects (and Namespaces with a selector) → Configs.
pub struct IstioRegistry {
    client: Client,
    settings: Settings,
    index: ConfigIndex,
    out: Outbox,
    /// The apiVersion watched per kind.
    versions: BTreeMap<ConfigKind, String>,
    resources: Option<Vec<(ConfigKind, ApiResource)>>,
    tasks: BTreeMap<WatchKind, WatchTask>,
    mailbox_capacity: usize,
}

/// How long to wait before discovering the Istio API again after an error.
const DISCOVERY_RETRY: Duration = Duration::from_secs(5);

impl IstioRegistry {
    pub fn new(client: Client, settings: Settings, out: Outbox, mailbox_capacity: usize) -> Self {
        IstioRegistry {
            index: ConfigIndex::new(NamespaceFilter::new(settings.namespace_selector.clone())),
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
            async move { watch::istio_resources(&client).await }
                .into_actor(self)
                .map(|result, act, ctx| match result {
                    Ok(resources) => {
                        if resources.is_empty() {
                            tracing::warn!("networking.istio.io is not served (no Istio CRDs): no Istio config from Kubernetes");
                        }
                        for (kind, ar) in &resources {
                            tracing::info!(%kind, api_version = %ar.api_version, "watching Istio config");
                        }
                        act.resources = Some(resources);
                        if act.settings.namespace_selector.is_some() {
                            let api = Api::<Namespace>::all(act.client.clone());
                            let config = namespace_config(&act.settings);
                            let task = watch::spawn(WatchKind::Namespace, api, config, ctx.address().recipient());
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

    fn watch_istio_kinds(&mut self, ctx: &mut Context<Self>) {
        for (kind, ar) in self.resources.iter().flatten() {
            let watch_kind = WatchKind::Istio(*kind);
            let api = Api::<DynamicObject>::all_with(self.client.clone(), ar);
            let task = watch::spawn(
                watch_kind,
                api,
                watcher::Config::default(),
                ctx.address().recipient(),
            );
            self.versions.insert(*kind, ar.api_version.clone());
            self.out.expect(watch_kind);
            self.tasks.insert(watch_kind, task);
        }
        // Without any kind to list, the registry is synced now.
        self.out.publish(self.index.configs(), Instant::now());
    }

    fn report(rejected: Option<super::config::Rejected>) {
        if let Some(r) = rejected {
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

impl Handler<Watched<DynamicObject>> for IstioRegistry {
    type Result = ();
    fn handle(&mut self, msg: Watched<DynamicObject>, _: &mut Context<Self>) {
        let started = Instant::now();
        let WatchKind::Istio(kind) = msg.kind else {
            return;
        };
        let api_version = self.versions.get(&kind).cloned().unwrap_or_default();
        let value = |obj: DynamicObject| serde_json::to_value(obj).unwrap_or_default();
        match msg.event {
            Event::Init => self.index.init(kind),
            Event::InitApply(obj) => {
                Self::report(self.index.init_apply(kind, &api_version, value(obj)))
            }
            Event::InitDone => {
                self.index.init_done(kind);
                self.out.listed(msg.kind);
            }
            Event::Apply(obj) => Self::report(self.index.apply(kind, &api_version, value(obj))),
            Event::Delete(obj) => {
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let name = obj.metadata.name.clone().unwrap_or_default();
                self.index.delete(kind, &ns, &name);
            }
        }
        self.out.publish(self.index.configs(), started);
    }
}

impl Handler<Watched<Namespace>> for IstioRegistry {
    type Result = ();
    fn handle(&mut self, msg: Watched<Namespace>, ctx: &mut Context<Self>) {
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
            for (kind, task) in &self.tasks {
                if *kind != WatchKind::Namespace {
                    task.relist();
                }
            }
        }
        self.out.publish(self.index.configs(), started);
    }
}

impl Handler<GetConfigz> for IstioRegistry {
    type Result = MessageResult<GetConfigz>;
    fn handle(&mut self, _: GetConfigz, _: &mut Context<Self>) -> Self::Result {
        let configs = self.index.configs();
        MessageResult(serde_json::json!({
            "source": self.out.source,
            "synced": self.out.synced,
            "versions": self.versions,
            "configs": configs.values().collect::<Vec<_>>(),
            "errors": self.index.rejected().map(ToString::to_string).collect::<Vec<_>>(),
        }))
    }
}

/// The two registries' source ids, in the order they are started.
pub const SOURCES: [SourceId; 2] = [SERVICES_SOURCE, ISTIO_SOURCE];
