//! The SnapshotBuilder: owns the current `Arc<PushContext>` and builds the next one.
//!
//! Receives [`Flush`] from the Debouncer; merges the sources' config sets; builds an immutable
//! `PushContext` that reuses every index the request did not touch; sends [`Push`] to the
//! PushQueue.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::debouncer::{Flush, SourceId};
use super::file_registry::SOURCE as FILES_SOURCE;
use super::push_queue::Push;
use crate::metrics::Metrics;
use crate::model::mesh::MeshConfig;
use crate::model::push_context::{ConfigSet, PushContext};
use crate::monitoring::Readiness;

/// The state of the last built context (`/debug/push_status`).
#[derive(Message)]
#[rtype(result = "serde_json::Value")]
pub struct GetPushStatus;

pub struct SnapshotBuilder {
    current: Option<Arc<PushContext>>,
    last: serde_json::Value,
    mesh: Arc<MeshConfig>,
    push_queue: Recipient<Push>,
    metrics: Metrics,
    /// Told which sources each built context holds (the `/ready` probe).
    ready: Readiness,
    mailbox_capacity: usize,
}

impl SnapshotBuilder {
    pub fn new(
        mesh: MeshConfig,
        push_queue: Recipient<Push>,
        metrics: Metrics,
        ready: Readiness,
        mailbox_capacity: usize,
    ) -> Self {
        SnapshotBuilder {
            current: None,
            last: serde_json::json!({"version": null, "status": "no context built yet"}),
            mesh: Arc::new(mesh),
            push_queue,
            metrics,
            ready,
            mailbox_capacity,
        }
    }
}

/// One config set from all sources. A single source is shared as is; with several, a key
/// that more than one defines is taken from the config directory (`files`) first, then from
/// the first other source by id (`kubernetes` before `kubernetes-istio`).
pub fn merge_sources(sources: &BTreeMap<SourceId, Arc<ConfigSet>>) -> Arc<ConfigSet> {
    let mut iter = sources.values();
    match (iter.next(), iter.next()) {
        (None, _) => Arc::default(),
        (Some(only), None) => only.clone(),
        _ => {
            let mut ordered: Vec<(&SourceId, &Arc<ConfigSet>)> = sources.iter().collect();
            ordered.sort_by_key(|(id, _)| (**id != FILES_SOURCE, **id));
            let mut merged = ConfigSet::new();
            // Later inserts overwrite: insert the winners last.
            for (_, set) in ordered.into_iter().rev() {
                merged.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            Arc::new(merged)
        }
    }
}

impl Actor for SnapshotBuilder {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
    }
}

impl Handler<GetPushStatus> for SnapshotBuilder {
    type Result = MessageResult<GetPushStatus>;

    fn handle(&mut self, _: GetPushStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.last.clone())
    }
}

impl Handler<Flush> for SnapshotBuilder {
    type Result = ();

    fn handle(&mut self, msg: Flush, _: &mut Context<Self>) {
        let started = Instant::now();
        let configs = merge_sources(&msg.sources);
        let ctx = Arc::new(PushContext::build(
            self.current.as_deref(),
            &configs,
            &msg.request,
            &self.mesh,
        ));
        self.metrics.services.set(ctx.services.by_host.len() as i64);
        if msg.request.full {
            // As istiod's: an endpoint-only request swaps the endpoint index of the previous
            // context and rebuilds nothing else, so it is not a PushContext init.
            self.metrics
                .pushcontext_init
                .observe(started.elapsed().as_secs_f64());
        } else {
            self.metrics.endpoint_swaps.inc();
        }
        for (reason, n) in &msg.request.reasons {
            self.metrics
                .push_triggers
                .with_label_values(&[reason.as_str()])
                .inc_by(u64::from(*n));
        }
        tracing::info!(
            version = ctx.version,
            configs = configs.len(),
            services = ctx.services.by_host.len(),
            changed = msg.request.configs_updated.len(),
            full = msg.request.full,
            took_ms = started.elapsed().as_secs_f64() * 1e3,
            "push context built"
        );
        self.last = serde_json::json!({
            "version": ctx.version,
            "built_at_unix_ms": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            "took_ms": started.elapsed().as_secs_f64() * 1e3,
            "configs": configs.len(),
            "services": ctx.services.by_host.len(),
            "endpoint_sets": ctx.endpoints.by_service_port.len(),
            "virtual_service_bindings": ctx.virtual_services.by_gateway.values().map(Vec::len).sum::<usize>(),
            "destination_rule_hosts": ctx.destination_rules.by_host.len(),
            "gateways": ctx.gateways.all.len(),
            "sidecar_namespaces": ctx.sidecars.by_namespace.len(),
            "request": {
                "full": msg.request.full,
                "forced": msg.request.forced,
                "configs_updated": msg.request.configs_updated.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "reasons": msg.request.reasons.iter().map(|(r, n)| (r.as_str(), *n)).collect::<std::collections::BTreeMap<_, _>>(),
            },
        });
        self.current = Some(ctx.clone());
        self.ready.built(msg.sources.keys().copied());
        self.metrics.sent("push_queue");
        self.push_queue.do_send(Push {
            ctx,
            request: Arc::new(msg.request),
        });
        self.metrics.handled("snapshot_builder", started);
    }
}
