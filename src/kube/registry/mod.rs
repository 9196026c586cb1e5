//! The Kubernetes registry actors: [`ServiceRegistry`] (source `kubernetes`, in
//! `services.rs`) and [`IstioRegistry`] (source `kubernetes-istio`, in `istio.rs`), and the
//! [`Outbox`] they share.
//!
//! Each owns an index and its watch tasks, receives [`Watched`](super::watch::Watched) events from them, and sends
//! [`ConfigUpdate`] to the Debouncer: first once every one of its kinds has finished its
//! initial list (then it tells the [`Readiness`] gate), and after that only when
//! [`compare`] finds a changed config, as an endpoints-only request when only endpoints
//! changed. With a namespace selector, the Namespaces are listed first and the other kinds
//! after; a namespace that starts matching makes the other kinds relist.

mod istio;
mod services;

pub use istio::IstioRegistry;
pub use services::ServiceRegistry;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use ::kube::runtime::watcher;
use actix::prelude::*;

use super::Settings;
use super::watch::WatchKind;
use crate::actors::debouncer::{ConfigUpdate, SourceId};
use crate::metrics::Metrics;
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
            // Before sending: a context built from them is what makes axon ready.
            self.readiness.registry_synced(self.source);
            self.send(
                configs,
                PushRequest::full_push(TriggerReason::Config, started),
                1,
            );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse::{DocOutcome, parse_documents};

    /// Records what the Debouncer would get: (full, changed keys).
    struct Probe(Vec<(bool, usize)>);

    impl Actor for Probe {
        type Context = Context<Self>;
    }

    impl Handler<ConfigUpdate> for Probe {
        type Result = ();
        fn handle(&mut self, msg: ConfigUpdate, _: &mut Context<Self>) {
            self.0
                .push((msg.request.full, msg.request.configs_updated.len()));
        }
    }

    #[derive(Message)]
    #[rtype(result = "Vec<(bool, usize)>")]
    struct Take;

    impl Handler<Take> for Probe {
        type Result = MessageResult<Take>;
        fn handle(&mut self, _: Take, _: &mut Context<Self>) -> Self::Result {
            MessageResult(std::mem::take(&mut self.0))
        }
    }

    fn entry(port: u32, endpoint: &str) -> Arc<ConfigSet> {
        let yaml = format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: a, namespace: ns}}\nspec:\n  hosts: [a.ns.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  endpoints: [{{address: {endpoint}}}]\n"
        );
        let DocOutcome::Config(c) = parse_documents(&yaml, "ns").remove(0).outcome else {
            panic!("the fixture parses")
        };
        Arc::new([(c.key.clone(), Arc::new(*c))].into())
    }

    #[actix_rt::test]
    async fn the_outbox_sends_once_every_kind_is_listed_and_then_only_changes() {
        let probe = Probe(Vec::new()).start();
        let ready = Readiness::new(&["kubernetes"]);
        let mut out = Outbox::new(
            "kubernetes",
            probe.clone().recipient(),
            Metrics::new(),
            ready.clone(),
        );
        out.expect(WatchKind::Service);
        out.expect(WatchKind::EndpointSlice);
        let now = Instant::now();

        let first = entry(80, "10.0.0.1");
        out.listed(WatchKind::Service);
        out.publish(first.clone(), now);
        assert_eq!(
            probe.send(Take).await.unwrap(),
            [],
            "EndpointSlices are still listing"
        );
        assert!(ready.check().is_err());

        out.listed(WatchKind::EndpointSlice);
        out.publish(first.clone(), now);
        assert_eq!(
            probe.send(Take).await.unwrap(),
            [(true, 0)],
            "the initial full push"
        );
        assert!(
            ready.check().is_err(),
            "not before a snapshot with them is built"
        );
        ready.built(["kubernetes"]);
        assert_eq!(ready.check(), Ok(()));

        out.publish(first.clone(), now);
        out.publish(entry(80, "10.0.0.1"), now);
        assert_eq!(
            probe.send(Take).await.unwrap(),
            [],
            "the same configs send nothing"
        );

        out.publish(entry(80, "10.0.0.2"), now);
        out.publish(entry(81, "10.0.0.2"), now);
        assert_eq!(
            probe.send(Take).await.unwrap(),
            [(false, 1), (true, 1)],
            "an endpoints-only change, then a full one"
        );
    }
}
