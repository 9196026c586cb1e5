//! The ConnectionActor: one per ADS stream (SotW or Delta); owns the proxy's identity, its
//! scope and per-type subscription state.
//!
//! Receives the stream's requests (as a stream handler), [`Push`] from the PushQueue and
//! [`GetStatus`] from the debug endpoints; sends responses on the stream's bounded sink, and
//! [`Connect`], [`PushDone`] and [`Disconnect`] to the PushQueue. The protocol rules are pure
//! ([`crate::xds::subscription::Watched`], [`crate::xds::delta::DeltaWatched`]); this actor
//! applies what they decide ([`sotw`], [`delta`]).
//!
//! Responses are queued in an outbox and written in order while the actor waits: a proxy that
//! does not read within `write_timeout` is disconnected (`pilot_xds_write_timeout`), and its
//! push slot is given back, so that it never holds memory or the others up.

mod delta;
mod sotw;
mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

pub use status::{ConnectionStatus, Dump, GetStatus, TypeStatus};

use super::distribution::{Acked, Affected, DistributionTracker, Gone, Nacked};
use super::push_queue::{ConnId, Connect, Disconnect, Push, PushDone, PushQueue};
use crate::metrics::Metrics;
use crate::model::proxy::Proxy;
use crate::model::push_context::{PushContext, changed_clusters};
use crate::model::sidecar_scope::{SidecarScope, needs_push};
use crate::xds::ads::{CloseReason, ResponseSink, SinkError, StreamSlot};
use crate::xds::delta::DeltaWatched;
use crate::xds::subscription::Watched;
use crate::xds::{Request, Response, TypeUrl};

/// What a ConnectionActor is built with.
pub struct ConnectionConfig {
    pub id: ConnId,
    pub sink: ResponseSink,
    pub push_queue: Addr<PushQueue>,
    pub metrics: Metrics,
    pub slot: StreamSlot,
    pub write_timeout: Duration,
    pub distribution: Addr<DistributionTracker>,
}

pub struct ConnectionActor {
    id: ConnId,
    sink: ResponseSink,
    push_queue: Addr<PushQueue>,
    metrics: Metrics,
    _slot: StreamSlot,
    write_timeout: Duration,
    distribution: Addr<DistributionTracker>,
    /// The version of the last push whose ACK the DistributionTracker waits for.
    awaiting_ack: Option<u64>,
    /// Why the stream ends, for the disconnect log.
    close_reason: Option<String>,
    proxy: Option<Arc<Proxy>>,
    ctx: Option<Arc<PushContext>>,
    /// What the proxy sees in `ctx`, and the configs it depends on.
    scope: Option<Arc<SidecarScope>>,
    sotw: BTreeMap<TypeUrl, Watched>,
    delta: BTreeMap<TypeUrl, DeltaWatched>,
    /// Types requested before the first context existed, answered when it arrives.
    waiting: BTreeSet<TypeUrl>,
    /// After CDS is sent, the next EDS request is answered even if it looks like an ACK, so
    /// that cluster warming completes (istiod's AlwaysRespond, envoy#13009).
    always_respond_eds: bool,
    unknown_types: BTreeSet<String>,
    nonce: u64,
    connected_at: Instant,
    synced: bool,
    outbox: Vec<Response>,
    /// During an endpoint-only push, the clusters whose endpoints changed: the EDS response
    /// then carries only those.
    eds_only: Option<BTreeSet<String>>,
}

impl ConnectionActor {
    pub fn new(config: ConnectionConfig) -> Self {
        ConnectionActor {
            id: config.id,
            sink: config.sink,
            push_queue: config.push_queue,
            metrics: config.metrics,
            _slot: config.slot,
            write_timeout: config.write_timeout,
            distribution: config.distribution,
            awaiting_ack: None,
            close_reason: None,
            proxy: None,
            ctx: None,
            scope: None,
            sotw: BTreeMap::new(),
            delta: BTreeMap::new(),
            waiting: BTreeSet::new(),
            always_respond_eds: false,
            unknown_types: BTreeSet::new(),
            nonce: 0,
            connected_at: Instant::now(),
            synced: false,
            outbox: Vec::new(),
            eds_only: None,
        }
    }

    fn close(&mut self, reason: CloseReason, ctx: &mut Context<Self>) {
        tracing::warn!(id = self.id, proxy = %self.proxy_id(), ?reason, "ADS: closing stream");
        self.close_reason = Some(format!("{reason:?}"));
        self.sink.close(reason);
        ctx.stop();
    }

    fn proxy_id(&self) -> &str {
        self.proxy.as_ref().map_or("", |p| p.id.as_str())
    }

    fn next_nonce(&mut self, version: u64) -> String {
        self.nonce += 1;
        format!("{version}-{}", self.nonce)
    }

    /// The first request: parse the node, join the PushQueue, learn the current context.
    fn connect(&mut self, req: &Request, ctx: &mut Context<Self>) -> bool {
        let Some(node) = req.node().cloned() else {
            self.close(
                CloseReason::InvalidArgument(
                    "the first request on a stream must carry a node".into(),
                ),
                ctx,
            );
            return false;
        };
        let proxy = match Proxy::from_node(node) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                self.close(CloseReason::InvalidArgument(e.to_string()), ctx);
                return false;
            }
        };
        tracing::info!(
            id = self.id,
            proxy = %proxy.id,
            kind = ?proxy.proxy_type,
            delta = self.sink.is_delta(),
            "ADS: connected"
        );
        self.metrics.xds_clients.inc();
        self.proxy = Some(proxy);
        let connect = Connect {
            id: self.id,
            proxy: self.proxy_id().to_string(),
            conn: ctx.address().recipient(),
            status: ctx.address().recipient(),
            dump: ctx.address().recipient(),
        };
        ctx.wait(
            self.push_queue
                .send(connect)
                .into_actor(self)
                .map(|res, act, ctx| match res {
                    Ok(current) => {
                        if let Some(push_ctx) = current {
                            act.set_context(push_ctx);
                            act.answer_waiting();
                            act.flush(ctx, None);
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "push queue unreachable");
                        ctx.stop();
                    }
                }),
        );
        true
    }

    fn on_request(&mut self, req: Request, ctx: &mut Context<Self>) {
        if self.proxy.is_none() && !self.connect(&req, ctx) {
            return;
        }
        match req {
            Request::Sotw(r) => self.on_sotw_request(r),
            Request::Delta(r) => self.on_delta_request(r),
        }
        self.check_synced();
        self.flush(ctx, None);
    }

    /// Logs an unknown type once per stream.
    fn unknown_type(&mut self, type_url: &str) {
        if self.unknown_types.insert(type_url.to_string()) {
            tracing::warn!(proxy = %self.proxy_id(), %type_url, "ADS: unknown type requested, answered empty");
        }
    }

    fn on_nack(&self, type_url: TypeUrl, error: &str) {
        self.distribution.do_send(Nacked {
            proxy: self.proxy_id().to_string(),
            error: format!("{}: {error}", type_url.short()),
        });
        self.metrics
            .xds_rejects
            .with_label_values(&[type_url.short()])
            .inc();
        tracing::warn!(proxy = %self.proxy_id(), r#type = type_url.short(), %error, "ADS: NACK");
    }

    fn on_stale(&self, type_url: TypeUrl) {
        self.metrics
            .expired_nonce
            .with_label_values(&[type_url.short()])
            .inc();
    }

    /// Moves to a new context; returns the previous context and scope.
    fn set_context(
        &mut self,
        push_ctx: Arc<PushContext>,
    ) -> (Option<Arc<PushContext>>, Option<Arc<SidecarScope>>) {
        let old = self.ctx.as_deref().zip(self.scope.as_ref());
        let scope = self
            .proxy
            .as_ref()
            .map(|p| SidecarScope::next(old, &push_ctx, p));
        (
            self.ctx.replace(push_ctx),
            std::mem::replace(&mut self.scope, scope),
        )
    }

    fn is_acked(&self) -> bool {
        if self.sink.is_delta() {
            !self.delta.is_empty() && self.delta.values().all(DeltaWatched::is_acked)
        } else {
            !self.sotw.is_empty() && self.sotw.values().all(Watched::is_acked)
        }
    }

    fn check_synced(&mut self) {
        if self.awaiting_ack.is_some() && self.is_acked() {
            if let Some(version) = self.awaiting_ack.take() {
                self.distribution.do_send(Acked {
                    proxy: self.proxy_id().to_string(),
                    version,
                });
            }
        }
        if !self.synced && self.is_acked() {
            self.synced = true;
            tracing::info!(
                proxy = %self.proxy_id(),
                "ADS: full sync complete in {} ms",
                self.connected_at.elapsed().as_millis()
            );
        }
    }

    fn answer_waiting(&mut self) {
        for type_url in std::mem::take(&mut self.waiting) {
            self.respond(type_url);
        }
    }

    /// Generates one type for the current context and queues what the client lacks.
    fn respond(&mut self, type_url: TypeUrl) {
        if self.ctx.is_none() || self.scope.is_none() {
            self.waiting.insert(type_url);
            return;
        }
        let started = Instant::now();
        let response = if self.sink.is_delta() {
            self.delta_response(type_url)
        } else {
            self.sotw_response(type_url)
        };
        if let Some(response) = response {
            // EDS must follow a CDS response; an EDS response satisfies that.
            self.always_respond_eds = type_url == TypeUrl::Cluster
                || (self.always_respond_eds && type_url != TypeUrl::Endpoint);
            self.metrics
                .xds_pushes
                .with_label_values(&[type_url.short()])
                .inc();
            self.metrics
                .xds_push_time
                .with_label_values(&[type_url.short()])
                .observe(started.elapsed().as_secs_f64());
            tracing::debug!(
                proxy = %self.proxy_id(),
                r#type = type_url.short(),
                resources = response_count(&response),
                "ADS: sent"
            );
            self.outbox.push(response);
        }
    }

    /// Writes the outbox in order: at once while the stream's queue has room (the common
    /// case), else waiting (no other message is handled meanwhile) at most `write_timeout`
    /// per response; then tells the PushQueue, if `done`.
    fn flush(&mut self, ctx: &mut Context<Self>, done: Option<PushDone>) {
        let mut responses = std::mem::take(&mut self.outbox).into_iter();
        let mut waiting = None;
        for response in responses.by_ref() {
            match self.sink.try_send(encode(&self.metrics, &response)) {
                Ok(()) => self.metrics.xds_send_time.observe(0.0),
                Err((SinkError::Full, message)) => {
                    waiting = message;
                    break;
                }
                Err((SinkError::Closed, _)) => {
                    ctx.stop();
                    break;
                }
            }
        }
        let Some(first) = waiting else {
            if let Some(done) = done {
                self.metrics.sent("push_queue");
                self.push_queue.do_send(done);
            }
            return;
        };
        let rest: Vec<Response> = responses.collect();
        let sink = self.sink.clone();
        let timeout = self.write_timeout;
        let metrics = self.metrics.clone();
        let write = async move {
            let messages = std::iter::once(first).chain(rest.iter().map(|r| encode(&metrics, r)));
            for message in messages {
                let started = Instant::now();
                match tokio::time::timeout(timeout, sink.send(message)).await {
                    Ok(Ok(())) => metrics
                        .xds_send_time
                        .observe(started.elapsed().as_secs_f64()),
                    Ok(Err(e)) => return Err(e),
                    Err(_) => return Err(SinkError::Full),
                }
            }
            Ok(())
        };
        ctx.wait(write.into_actor(self).map(move |res, act, ctx| {
            match res {
                Ok(()) => {}
                Err(SinkError::Full) => {
                    act.metrics.write_timeout.inc();
                    act.close(
                        CloseReason::ResourceExhausted(format!(
                            "the proxy did not read its responses within {:?}",
                            act.write_timeout
                        )),
                        ctx,
                    );
                }
                Err(SinkError::Closed) => ctx.stop(),
            }
            if let Some(done) = done {
                act.metrics.sent("push_queue");
                act.push_queue.do_send(done);
            }
        }));
    }
}

impl Actor for ConnectionActor {
    type Context = Context<Self>;

    fn stopped(&mut self, _: &mut Context<Self>) {
        if let Some(proxy) = &self.proxy {
            self.metrics.xds_clients.dec();
            self.metrics.sent("push_queue");
            self.push_queue.do_send(Disconnect { id: self.id });
            self.distribution.do_send(Gone {
                proxy: proxy.id.clone(),
            });
            let reason = self.close_reason.as_deref().unwrap_or("stream ended");
            tracing::info!(proxy = %proxy.id, %reason, "ADS: disconnected");
        }
    }
}

impl StreamHandler<Result<Request, String>> for ConnectionActor {
    fn handle(&mut self, item: Result<Request, String>, ctx: &mut Context<Self>) {
        match item {
            Ok(req) => self.on_request(req, ctx),
            Err(error) => {
                tracing::debug!(proxy = %self.proxy_id(), %error, "ADS: stream error");
                self.close_reason = Some(format!("stream error: {error}"));
                ctx.stop();
            }
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        self.close_reason
            .get_or_insert_with(|| "closed by the proxy".to_string());
        ctx.stop();
    }
}

impl Handler<Push> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: Push, ctx: &mut Context<Self>) {
        let started = Instant::now();
        let version = msg.ctx.version;
        let new_ctx = msg.ctx.clone();
        let (old_ctx, old_scope) = self.set_context(msg.ctx.clone());
        self.answer_waiting();
        let types: &[TypeUrl] = if msg.request.full {
            // Proxy-level pruning: a proxy whose scope does not depend on any changed config
            // gets nothing at all, not even generation.
            let needed = self
                .scope
                .as_ref()
                .is_some_and(|new| needs_push(old_scope.as_deref(), new, &msg.request));
            if needed { &TypeUrl::PUSH_ORDER } else { &[] }
        } else {
            // The EDS fast path: only when a watched cluster's endpoints changed, and only
            // those clusters are generated and sent.
            let names = self.subscribed(TypeUrl::Endpoint);
            let eds_only = match (&old_ctx, names) {
                (Some(old), Some(names)) => Some(changed_clusters(old, &new_ctx, names)),
                _ => None,
            };
            let changed = match (&eds_only, names) {
                (Some(clusters), _) => !clusters.is_empty(),
                (None, names) => names.is_some(),
            };
            self.eds_only = eds_only;
            if changed { &[TypeUrl::Endpoint] } else { &[] }
        };
        if types.is_empty() {
            tracing::trace!(proxy = %self.proxy_id(), version, "push skipped: not affected");
        } else {
            self.metrics
                .proxy_convergence_time
                .observe(msg.request.start.elapsed().as_secs_f64());
            self.report_affected(&msg, old_scope.as_deref());
        }
        for &type_url in types {
            if self.needs_type(type_url, version) {
                self.respond(type_url);
            }
        }
        self.eds_only = None;
        self.flush(ctx, Some(PushDone { id: self.id }));
        self.metrics.handled("connection", started);
    }
}

fn response_count(response: &Response) -> usize {
    match response {
        Response::Sotw(r) => r.resources.len(),
        Response::Delta(r) => r.resources.len() + r.removed.len(),
    }
}

/// A response framed for its stream, its size counted in `pilot_xds_config_size_bytes`.
fn encode(metrics: &Metrics, response: &Response) -> crate::xds::wire::Framed {
    let (type_name, size) = response_size(response);
    metrics
        .config_size
        .with_label_values(&[type_name])
        .observe(size as f64);
    ResponseSink::encode(response)
}

/// The type and encoded size of a response, for `pilot_xds_config_size_bytes`.
fn response_size(response: &Response) -> (&'static str, usize) {
    let (type_url, sizes): (&str, usize) = match response {
        Response::Sotw(r) => (
            &r.type_url,
            r.resources.iter().map(|x| x.encoded_len()).sum(),
        ),
        Response::Delta(r) => (
            &r.type_url,
            r.resources.iter().map(|(x, _)| x.encoded_len()).sum(),
        ),
    };
    (
        TypeUrl::parse(type_url).map_or("unknown", TypeUrl::short),
        sizes,
    )
}

impl ConnectionActor {
    /// Tells the DistributionTracker which changed configs this push carries to the proxy:
    /// those its scope depends on (before or after), or all of them for an EDS push.
    fn report_affected(&mut self, msg: &Push, old_scope: Option<&SidecarScope>) {
        let keys: Vec<_> = msg
            .request
            .configs_updated
            .iter()
            .filter(|k| {
                !msg.request.full
                    || self.scope.as_ref().is_some_and(|s| s.deps.contains(*k))
                    || old_scope.is_some_and(|s| s.deps.contains(*k))
            })
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        self.awaiting_ack = Some(msg.ctx.version);
        self.distribution.do_send(Affected {
            proxy: self.proxy_id().to_string(),
            keys,
            version: msg.ctx.version,
            start: msg.request.start,
        });
    }

    /// The names subscribed for a type, if it is subscribed at all.
    fn subscribed(&self, type_url: TypeUrl) -> Option<&BTreeSet<String>> {
        if self.sink.is_delta() {
            self.delta
                .get(&type_url)
                .filter(|w| w.is_subscribed())
                .map(|w| &*w.names)
        } else {
            self.sotw
                .get(&type_url)
                .filter(|w| w.is_subscribed())
                .map(|w| &*w.names)
        }
    }

    /// Whether a push of `version` has something to send for this type: it is subscribed, and
    /// (SotW) was not already answered from this very context.
    fn needs_type(&self, type_url: TypeUrl, version: u64) -> bool {
        if self.sink.is_delta() {
            self.delta
                .get(&type_url)
                .is_some_and(DeltaWatched::is_subscribed)
        } else {
            self.sotw.get(&type_url).is_some_and(|w| {
                w.is_subscribed() && w.version_sent.as_deref() != Some(version.to_string().as_str())
            })
        }
    }
}

impl Handler<Dump> for ConnectionActor {
    type Result = MessageResult<Dump>;

    fn handle(&mut self, msg: Dump, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.dump(&msg))
    }
}

impl Handler<GetStatus> for ConnectionActor {
    type Result = MessageResult<GetStatus>;

    fn handle(&mut self, _: GetStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.status())
    }
}
