//! The ServiceRegistry: Services, EndpointSlices and Pods (and, with a namespace selector,
//! Namespaces) watched into a [`ServiceObjectIndex`], whose ServiceEntries it sends as source
//! `kubernetes` through its [`Outbox`].

use std::collections::BTreeMap;
use std::time::Instant;

use actix::prelude::*;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};

use super::namespace_config;
use crate::actors::messages::GetConfigz;
use crate::registry::cluster::namespaces::{NamespaceChange, NamespaceFilter};
use crate::registry::cluster::services::{ServiceKind, ServiceObjectIndex};
use crate::registry::kubernetes::Settings;
use crate::registry::kubernetes::watch::{self, WatchEvent, WatchKind, WatchTask};
use crate::registry::outbox::Outbox;

/// Services, EndpointSlices and Pods (and Namespaces with a selector) → ServiceEntries.
pub struct ServiceRegistry {
    client: Client,
    settings: Settings,
    index: ServiceObjectIndex,
    out: Outbox,
    tasks: BTreeMap<WatchKind, WatchTask>,
    mailbox_capacity: usize,
}

impl ServiceRegistry {
    pub fn new(client: Client, settings: Settings, out: Outbox, mailbox_capacity: usize) -> Self {
        let filter = NamespaceFilter::new(settings.namespace_selector.clone());
        ServiceRegistry {
            index: ServiceObjectIndex::new(&settings.cluster_domain, filter),
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
        to: Recipient<WatchEvent<K>>,
    ) where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        self.out.expect(kind);
        let task = watch::spawn(kind, api, config, to, self.out.metrics());
        self.tasks.insert(kind, task);
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
    }

    fn on_event<K>(
        &mut self,
        msg: WatchEvent<K>,
        kind: ServiceKind,
        one: fn(&mut ServiceObjectIndex, &K, bool),
        delete: fn(&mut ServiceObjectIndex, &K),
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
        super::publish(&mut self.out, self.index.configs(), started);
    }
}

impl Actor for ServiceRegistry {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        // The Namespaces (their labels: the Gateway API's `allowedRoutes` selectors read them;
        // with a selector, which are read): with a selector they are listed first, the other
        // kinds watched once they are.
        let api = Api::<Namespace>::all(self.client.clone());
        let config = namespace_config(&self.settings);
        self.watching(WatchKind::Namespace, api, config, ctx.address().recipient());
        if self.settings.namespace_selector.is_none() {
            self.watch_namespaced_kinds(ctx);
        }
    }
}

impl Handler<WatchEvent<Service>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: WatchEvent<Service>, _: &mut Context<Self>) {
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
            ServiceObjectIndex::delete_service,
        );
    }
}

impl Handler<WatchEvent<EndpointSlice>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: WatchEvent<EndpointSlice>, _: &mut Context<Self>) {
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
            ServiceObjectIndex::delete_slice,
        );
    }
}

impl Handler<WatchEvent<Pod>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: WatchEvent<Pod>, _: &mut Context<Self>) {
        self.on_event(
            msg,
            ServiceKind::Pod,
            |i, o, init| if init { i.init_pod(o) } else { i.apply_pod(o) },
            ServiceObjectIndex::delete_pod,
        );
    }
}

impl Handler<WatchEvent<Namespace>> for ServiceRegistry {
    type Result = ();
    fn handle(&mut self, msg: WatchEvent<Namespace>, ctx: &mut Context<Self>) {
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
        super::publish(&mut self.out, self.index.configs(), started);
    }
}

impl Handler<GetConfigz> for ServiceRegistry {
    type Result = MessageResult<GetConfigz>;
    fn handle(&mut self, _: GetConfigz, _: &mut Context<Self>) -> Self::Result {
        let configs = self.index.configs();
        MessageResult(serde_json::json!({
            "source": self.out.source(),
            "synced": self.out.is_synced(),
            "objects": self.index.counts(),
            "configs": configs.values().collect::<Vec<_>>(),
        }))
    }
}
