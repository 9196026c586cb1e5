//! The ConnectionActor: one per ADS stream; owns the proxy's identity and per-type state.
//!
//! Receives the stream's requests (as a stream handler) and [`Push`] from the PushQueue;
//! sends `XdsResponse`s on the stream's bounded sink, and [`Connect`], [`PushDone`] and
//! [`Disconnect`] to the PushQueue. The protocol rule is the pure
//! [`crate::xds::subscription::Watched`]; this actor only applies what it decides.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::push_queue::{ConnId, Connect, Disconnect, Push, PushDone, PushQueue};
use crate::metrics::Metrics;
use crate::model::proxy::Proxy;
use crate::model::push_context::{PushContext, endpoints_changed};
use crate::model::sidecar_scope::{SidecarScope, needs_push};
use crate::xds::ads::{CloseReason, ResponseSink, SinkError, StreamSlot};
use crate::xds::subscription::{Decision, Watched};
use crate::xds::{self, TypeUrl, XdsRequest, XdsResponse};

pub struct ConnectionActor {
    id: ConnId,
    sink: ResponseSink,
    push_queue: Addr<PushQueue>,
    metrics: Metrics,
    _slot: StreamSlot,
    proxy: Option<Arc<Proxy>>,
    ctx: Option<Arc<PushContext>>,
    /// What the proxy sees in `ctx`, and the configs it depends on.
    scope: Option<Arc<SidecarScope>>,
    watched: BTreeMap<TypeUrl, Watched>,
    /// Types requested before the first context existed, answered when it arrives.
    waiting: BTreeSet<TypeUrl>,
    unknown_types: BTreeSet<String>,
    nonce: u64,
    connected_at: Instant,
    synced: bool,
}

impl ConnectionActor {
    pub fn new(
        id: ConnId,
        sink: ResponseSink,
        push_queue: Addr<PushQueue>,
        metrics: Metrics,
        slot: StreamSlot,
    ) -> Self {
        ConnectionActor {
            id,
            sink,
            push_queue,
            metrics,
            _slot: slot,
            proxy: None,
            ctx: None,
            scope: None,
            watched: BTreeMap::new(),
            waiting: BTreeSet::new(),
            unknown_types: BTreeSet::new(),
            nonce: 0,
            connected_at: Instant::now(),
            synced: false,
        }
    }

    fn close(&mut self, reason: CloseReason, ctx: &mut Context<Self>) {
        tracing::warn!(id = self.id, proxy = ?self.proxy.as_ref().map(|p| &p.id), ?reason, "ADS: closing stream");
        self.sink.close(reason);
        ctx.stop();
    }

    /// The first request: parse the node, join the PushQueue, learn the current context.
    fn connect(&mut self, req: &XdsRequest, ctx: &mut Context<Self>) -> bool {
        let Some(node) = req.node.clone() else {
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
        tracing::info!(id = self.id, proxy = %proxy.id, kind = ?proxy.proxy_type, "ADS: connected");
        self.metrics.xds_clients.inc();
        self.proxy = Some(proxy);
        let connect = Connect {
            id: self.id,
            conn: ctx.address().recipient(),
        };
        ctx.wait(
            self.push_queue
                .send(connect)
                .into_actor(self)
                .map(|res, act, ctx| match res {
                    Ok(current) => {
                        if let Some(push_ctx) = current {
                            act.set_context(push_ctx);
                            act.answer_waiting(ctx);
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

    fn on_request(&mut self, req: XdsRequest, ctx: &mut Context<Self>) {
        if self.proxy.is_none() && !self.connect(&req, ctx) {
            return;
        }
        let Some(type_url) = TypeUrl::parse(&req.type_url) else {
            if self.unknown_types.insert(req.type_url.clone()) {
                tracing::warn!(id = self.id, type_url = %req.type_url, "ADS: unknown type requested, ignored");
            }
            return;
        };
        let watched = self
            .watched
            .entry(type_url)
            .or_insert_with(|| Watched::new(type_url));
        match watched.on_request(type_url, &req) {
            Decision::Respond => self.respond(type_url, ctx),
            Decision::Ack => self.check_synced(),
            Decision::Nack(error) => {
                self.metrics
                    .xds_rejects
                    .with_label_values(&[type_url.short()])
                    .inc();
                tracing::warn!(proxy = %self.proxy_id(), r#type = type_url.short(), %error, "ADS: NACK");
            }
            Decision::Stale => {
                self.metrics
                    .expired_nonce
                    .with_label_values(&[type_url.short()])
                    .inc();
            }
        }
    }

    /// Moves to a new context; returns the previous context and scope.
    fn set_context(
        &mut self,
        push_ctx: Arc<PushContext>,
    ) -> (Option<Arc<PushContext>>, Option<Arc<SidecarScope>>) {
        let scope = self
            .proxy
            .as_ref()
            .map(|p| Arc::new(SidecarScope::compute(&push_ctx, p)));
        (
            self.ctx.replace(push_ctx),
            std::mem::replace(&mut self.scope, scope),
        )
    }

    fn proxy_id(&self) -> &str {
        self.proxy.as_ref().map_or("", |p| p.id.as_str())
    }

    fn check_synced(&mut self) {
        if !self.synced && !self.watched.is_empty() && self.watched.values().all(Watched::is_acked)
        {
            self.synced = true;
            tracing::info!(
                proxy = %self.proxy_id(),
                "ADS: full sync complete in {} ms",
                self.connected_at.elapsed().as_millis()
            );
        }
    }

    fn answer_waiting(&mut self, ctx: &mut Context<Self>) {
        for type_url in std::mem::take(&mut self.waiting) {
            self.respond(type_url, ctx);
        }
    }

    /// Generates and sends the current resources of one type.
    fn respond(&mut self, type_url: TypeUrl, ctx: &mut Context<Self>) {
        let (Some(push_ctx), Some(proxy), Some(scope)) = (&self.ctx, &self.proxy, &self.scope)
        else {
            self.waiting.insert(type_url);
            return;
        };
        let Some(watched) = self.watched.get_mut(&type_url) else {
            return;
        };
        let started = Instant::now();
        let resources = xds::generate(type_url, push_ctx, proxy, scope, &watched.names);
        self.nonce += 1;
        let response = XdsResponse {
            type_url,
            version_info: push_ctx.version.to_string(),
            nonce: format!("{}-{}", push_ctx.version, self.nonce),
            resources,
        };
        watched.sent(response.nonce.clone(), response.version_info.clone());
        let count = response.resources.len();
        match self.sink.send(response) {
            Ok(()) => {
                self.metrics
                    .xds_pushes
                    .with_label_values(&[type_url.short()])
                    .inc();
                self.metrics
                    .xds_push_time
                    .with_label_values(&[type_url.short()])
                    .observe(started.elapsed().as_secs_f64());
                tracing::debug!(proxy = %proxy.id, r#type = type_url.short(), resources = count, "ADS: sent");
            }
            Err(SinkError::Full) => self.close(
                CloseReason::ResourceExhausted("the proxy is not reading its responses".into()),
                ctx,
            ),
            Err(SinkError::Closed) => ctx.stop(),
        }
    }
}

impl Actor for ConnectionActor {
    type Context = Context<Self>;

    fn stopped(&mut self, _: &mut Context<Self>) {
        if let Some(proxy) = &self.proxy {
            self.metrics.xds_clients.dec();
            self.push_queue.do_send(Disconnect { id: self.id });
            tracing::info!(proxy = %proxy.id, "ADS: disconnected");
        }
    }
}

impl StreamHandler<Result<XdsRequest, String>> for ConnectionActor {
    fn handle(&mut self, item: Result<XdsRequest, String>, ctx: &mut Context<Self>) {
        match item {
            Ok(req) => self.on_request(req, ctx),
            Err(error) => {
                tracing::info!(proxy = %self.proxy_id(), %error, "ADS: stream error");
                ctx.stop();
            }
        }
    }
}

impl Handler<Push> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: Push, ctx: &mut Context<Self>) {
        let version = msg.ctx.version.to_string();
        let new_ctx = msg.ctx.clone();
        let (old_ctx, old_scope) = self.set_context(msg.ctx);
        self.answer_waiting(ctx);
        let types: &[TypeUrl] = if msg.request.full {
            // Proxy-level pruning: a proxy whose scope does not depend on any changed config
            // gets nothing at all, not even generation.
            let needed = self
                .scope
                .as_ref()
                .is_some_and(|new| needs_push(old_scope.as_deref(), new, &msg.request));
            if needed { &TypeUrl::PUSH_ORDER } else { &[] }
        } else {
            // The EDS fast path: only when a watched cluster's endpoints changed.
            let names = self.watched.get(&TypeUrl::Endpoint).map(|w| &w.names);
            let changed = match (old_ctx, names) {
                (Some(old), Some(names)) => endpoints_changed(&old, &new_ctx, names),
                (None, Some(_)) => true,
                (_, None) => false,
            };
            if changed { &[TypeUrl::Endpoint] } else { &[] }
        };
        if types.is_empty() {
            tracing::trace!(proxy = %self.proxy_id(), version = %version, "push skipped: not affected");
        }
        if !types.is_empty() {
            self.metrics
                .proxy_convergence_time
                .observe(msg.request.start.elapsed().as_secs_f64());
        }
        for &type_url in types {
            // A type already answered from this context (a request that waited for it) has
            // nothing new to send.
            let fresh = self.watched.get(&type_url).is_some_and(|w| {
                w.is_subscribed() && w.version_sent.as_deref() != Some(version.as_str())
            });
            if fresh {
                self.respond(type_url, ctx);
            }
        }
        self.push_queue.do_send(PushDone { id: self.id });
    }
}
