//! The [`Outbox`] every registry (files, Kubernetes) sends through: one [`ConfigUpdate`]
//! message to the Debouncer, the first a full push once the registry has its initial state,
//! later ones only when a config changed (endpoints-only when only endpoints did).
//!
//! A registry that lists several kinds first (Kubernetes) names them with
//! [`Outbox::expect`] and [`Outbox::listed`]: nothing is sent before every one is listed.
//! Whether the registry is synced is then known to the SnapshotBuilder (its source appears in
//! a [`Flush`](crate::actors::messages::Flush)), which answers `/ready`.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::actors::messages::ConfigUpdate;
use axon_config::config::ConfigKey;
use axon_config::config_set::{ConfigSet, SourceId, compare};
use axon_metrics::Metrics;
use axon_model::push_request::{PushRequest, TriggerReason};

/// What [`Outbox::publish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// Nothing: a kind is still listing.
    Held,
    /// The first update (a full push).
    Initial,
    /// An update of the changed configs.
    Changed,
    /// Nothing: no config changed.
    Unchanged,
}

/// Where a registry's updates go, and what it sent last.
pub struct Outbox {
    source: SourceId,
    debouncer: Recipient<ConfigUpdate>,
    metrics: Metrics,
    last: Arc<ConfigSet>,
    /// Kinds whose initial list is not done yet.
    listing: BTreeSet<String>,
    synced: bool,
}

impl Outbox {
    pub fn new(source: SourceId, debouncer: Recipient<ConfigUpdate>, metrics: Metrics) -> Self {
        // The source's count shows from the start, at 0.
        metrics.unchanged_updates.with_label_values(&[source]);
        Outbox {
            source,
            debouncer,
            metrics,
            last: Arc::default(),
            listing: BTreeSet::new(),
            synced: false,
        }
    }

    /// The registry lists `kind` before its first update.
    pub fn expect(&mut self, kind: impl Display) {
        if !self.synced {
            self.listing.insert(kind.to_string());
        }
    }

    /// `kind` has its initial list.
    pub fn listed(&mut self, kind: impl Display) {
        self.listing.remove(&kind.to_string());
    }

    /// The metrics the registry counts in.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn source(&self) -> SourceId {
        self.source
    }

    /// Counts an update of the registry that changed no config
    /// (`axon_config_unchanged_updates{source}`).
    pub fn unchanged(&self) {
        self.metrics
            .unchanged_updates
            .with_label_values(&[self.source])
            .inc();
    }

    /// Whether the first update was sent.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// Sends `configs` if the registry has synced and they differ from the last sent.
    pub fn publish(&mut self, configs: Arc<ConfigSet>, started: Instant) -> Published {
        if let Some(first) = self.first(&configs, 1, started) {
            return first;
        }
        let (changed, endpoints_only) = if Arc::ptr_eq(&self.last, &configs) {
            Default::default()
        } else {
            compare(&self.last, &configs)
        };
        self.publish_changes(configs, changed, endpoints_only, started)
    }

    /// Sends `configs` whose changes against the last sent the registry knows already.
    pub fn publish_changes(
        &mut self,
        configs: Arc<ConfigSet>,
        changed: BTreeSet<ConfigKey>,
        endpoints_only: bool,
        started: Instant,
    ) -> Published {
        if let Some(first) = self.first(&configs, changed.len().max(1), started) {
            return first;
        }
        if changed.is_empty() {
            self.last = configs;
            self.unchanged();
            return Published::Unchanged;
        }
        let n = changed.len();
        let request = if endpoints_only {
            PushRequest::endpoint_change(changed, started)
        } else {
            PushRequest::config_change(changed, started)
        };
        self.send(configs, request, n);
        Published::Changed
    }

    /// Sends the first update, a full push counting `n` inbound updates, once nothing is
    /// listing. `None` once the first update was sent.
    fn first(&mut self, configs: &Arc<ConfigSet>, n: usize, started: Instant) -> Option<Published> {
        if self.synced {
            return None;
        }
        if !self.listing.is_empty() {
            return Some(Published::Held);
        }
        self.synced = true;
        self.send(
            configs.clone(),
            PushRequest::full_push(TriggerReason::Config, started),
            n,
        );
        Some(Published::Initial)
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
            "registry configs changed"
        );
        self.last = configs.clone();
        crate::actors::mailbox::tell(
            &self.metrics,
            "debouncer",
            &self.debouncer,
            ConfigUpdate {
                source: self.source,
                configs,
                request,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axon_config::parse::{DocOutcome, parse_documents};

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
        let mut out = Outbox::new("kubernetes", probe.clone().recipient(), Metrics::new());
        out.expect("Service");
        out.expect("EndpointSlice");
        let now = Instant::now();

        let first = entry(80, "10.0.0.1");
        out.listed("Service");
        out.publish(first.clone(), now);
        assert_eq!(
            probe.send(Take).await.unwrap(),
            [],
            "EndpointSlices are still listing"
        );
        assert!(!out.is_synced());

        out.listed("EndpointSlice");
        out.publish(first.clone(), now);
        assert_eq!(
            probe.send(Take).await.unwrap(),
            [(true, 0)],
            "the initial full push"
        );
        assert!(out.is_synced());

        out.publish(first.clone(), now);
        out.publish(entry(80, "10.0.0.1"), now);
        assert_eq!(
            probe.send(Take).await.unwrap(),
            [],
            "the same configs send nothing"
        );
        assert_eq!(
            out.metrics()
                .unchanged_updates
                .with_label_values(&["kubernetes"])
                .get(),
            2,
            "and are counted as unchanged updates"
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
