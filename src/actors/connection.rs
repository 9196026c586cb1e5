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

use super::push_queue::{Connect, ConnId, Disconnect, Push, PushDone, PushQueue};
use crate::metrics::Metrics;
use crate::model::proxy::Proxy;
use crate::model::push_context::PushContext;
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
                CloseReason::InvalidArgument("the first request on a stream must carry a node".into()),
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
        ctx.wait(self.push_queue.send(connect).into_actor(self).map(|res, act, ctx| match res {
            Ok(current) => {
                if let Some(push_ctx) = current {
                    act.ctx = Some(push_ctx);
                    act.answer_waiting(ctx);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "push queue unreachable");
                ctx.stop();
            }
        }));
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

    fn proxy_id(&self) -> &str {
        self.proxy.as_ref().map_or("", |p| p.id.as_str())
    }

    fn check_synced(&mut self) {
        if !self.synced && !self.watched.is_empty() && self.watched.values().all(Watched::is_acked) {
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
        let (Some(push_ctx), Some(proxy)) = (&self.ctx, &self.proxy) else {
            self.waiting.insert(type_url);
            return;
        };
        let Some(watched) = self.watched.get_mut(&type_url) else {
            return;
        };
        let resources = xds::generate(type_url, push_ctx, proxy, &watched.names);
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
        self.ctx = Some(msg.ctx);
        self.answer_waiting(ctx);
        for type_url in TypeUrl::PUSH_ORDER {
            let wanted = msg.request.full || type_url == TypeUrl::Endpoint;
            // A type already answered from this context (a request that waited for it) has
            // nothing new to send.
            let fresh = self.watched.get(&type_url).is_some_and(|w| {
                w.is_subscribed() && w.version_sent.as_deref() != Some(version.as_str())
            });
            if wanted && fresh {
                self.respond(type_url, ctx);
            }
        }
        self.push_queue.do_send(PushDone { id: self.id });
    }
}
