//! The ConnectionActor: one per ADS stream (SotW or Delta), a shell around the stream's pure
//! protocol state ([`StreamState`]): it feeds it the stream's requests and the PushQueue's
//! pushes, writes the responses it returns, and reports its events (metrics, logs, the
//! DistributionTracker).
//!
//! istioctl's debug requests (`istio.io/debug/syncz`, `config_dump`) are answered from the
//! ConnectionDirectory (`connection/debug.rs`).
//!
//! Receives the stream's requests (as a stream handler), [`Push`] from the PushQueue,
//! [`GetStatus`](super::directory::GetStatus) and [`Dump`](super::directory::Dump) from the
//! ConnectionDirectory; sends [`Connect`] and [`Disconnect`] to the PushQueue, [`Register`] /
//! [`Unregister`] to the ConnectionDirectory; and through its thread's outbox
//! (`connection/outbox.rs`), that a push is done to the PushQueue and [`Affected`], [`Acked`],
//! [`Nacked`], [`Gone`] to the DistributionTracker.
//!
//! Responses are written in order while the actor waits: a proxy that does not read within
//! `write_timeout` is disconnected (`pilot_xds_write_timeout`), and its push slot is given
//! back, so that it never holds memory or the others up.

mod debug;
mod outbox;
mod starter;
mod status;

use std::time::{Duration, Instant};

use actix::prelude::*;

pub use debug::DebugAnswers;
pub use starter::ConnectionStarter;

use super::directory::{ConnectionDirectory, Register, Unregister};
use super::distribution::{Acked, Affected, DistributionTracker, Gone, Nacked, Report};
use super::mailbox;
use super::messages::{ConnId, Connect, Disconnect, Push};
use super::push_queue::PushQueue;
use axon_config::log_safe::{Escaped, LogLimit};
use axon_metrics::Metrics;
use axon_transport::{ResponseSink, SinkError, StreamSlot};
use axon_xds::protocol::stream::{CloseReason, Event, Output, StreamState};
use axon_xds::wire::{self, Framed};
use axon_xds::{Request, ResourceType, Response};

/// The actors every ConnectionActor talks to, and the metrics.
#[derive(Clone)]
pub struct Peers {
    pub push_queue: Addr<PushQueue>,
    pub directory: Addr<ConnectionDirectory>,
    pub distribution: Addr<DistributionTracker>,
    pub metrics: Metrics,
    /// How istioctl's xDS debug requests are answered.
    pub debug: DebugAnswers,
}

pub struct ConnectionActor {
    id: ConnId,
    stream: StreamState,
    sink: ResponseSink,
    _slot: StreamSlot,
    peers: Peers,
    write_timeout: Duration,
    /// Why the stream ends, for the disconnect log.
    close_reason: Option<String>,
    connected_at: Instant,
    /// NACK and bad-request warnings: one a minute.
    warn_limit: LogLimit,
    /// A debug request's answer is being gathered (at most one at a time).
    debug_in_flight: bool,
}

impl ConnectionActor {
    /// The actor of one admitted stream, whose protocol state starts as `stream`.
    pub fn new(
        id: ConnId,
        stream: StreamState,
        sink: ResponseSink,
        slot: StreamSlot,
        peers: Peers,
        write_timeout: Duration,
    ) -> Self {
        ConnectionActor {
            id,
            stream,
            sink,
            _slot: slot,
            peers,
            write_timeout,
            close_reason: None,
            connected_at: Instant::now(),
            warn_limit: LogLimit::new(Duration::from_secs(60)),
            debug_in_flight: false,
        }
    }

    fn metrics(&self) -> &Metrics {
        &self.peers.metrics
    }

    fn close(&mut self, reason: CloseReason, ctx: &mut Context<Self>) {
        tracing::warn!(id = self.id, proxy = %self.proxy_log(), reason = %Escaped(&format!("{reason:?}")), "ADS: closing stream");
        self.close_reason = Some(format!("{reason:?}"));
        self.sink.close(reason);
        ctx.stop();
    }

    fn proxy_id(&self) -> &str {
        self.stream.proxy().map_or("", |p| p.id.as_str())
    }

    /// The proxy's id as a log line may show it (escaped, capped).
    fn proxy_log(&self) -> Escaped<'_> {
        Escaped(self.proxy_id())
    }

    /// The first request: identify the proxy, join the PushQueue, learn the current context.
    fn connect(&mut self, req: &Request, ctx: &mut Context<Self>) -> bool {
        let proxy = match self.stream.connect(req) {
            Ok(proxy) => proxy,
            Err(reason) => {
                self.close(reason, ctx);
                return false;
            }
        };
        tracing::info!(
            id = self.id,
            proxy = %Escaped(&proxy.id),
            kind = ?proxy.proxy_type,
            delta = self.stream.is_delta(),
            "ADS: connected"
        );
        if proxy.istio_agent && !proxy.istio_stats {
            tracing::info!(
                proxy = %Escaped(&proxy.id),
                "ADS: the proxy runs istio's agent on an Envoy without Istio's filters \
                 (istio.stats is not among its extensions): Istio's metrics (istio.stats, \
                 metadata exchange) are not configured for it"
            );
        }
        self.metrics().xds_clients.inc();
        self.peers.directory.do_send(Register {
            id: self.id,
            proxy: proxy.id.clone(),
            namespace: proxy.namespace.clone(),
            status: ctx.address().recipient(),
            dump: ctx.address().recipient(),
            resources: ctx.address().recipient(),
        });
        let connect = Connect {
            id: self.id,
            conn: ctx.address().recipient(),
        };
        let push_queue = self.peers.push_queue.clone().recipient();
        ctx.wait(
            mailbox::ask(self.metrics(), "push_queue", &push_queue, connect)
                .into_actor(self)
                .map(|res, act, ctx| match res {
                    Ok(current) => {
                        if let Some(push_ctx) = current {
                            let out = act.stream.on_context(push_ctx);
                            act.apply(out, ctx, false);
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
        if self.stream.proxy().is_none() && !self.connect(&req, ctx) {
            return;
        }
        let mut out = self.stream.on_request(req);
        let debug = out.debug.take();
        self.apply(out, ctx, false);
        if let Some(query) = debug {
            self.answer_debug(query, ctx);
        }
    }

    /// Reports the events of an output and writes its responses; then tells the PushQueue
    /// the push is done, if `done`.
    fn apply(&mut self, out: Output, ctx: &mut Context<Self>, done: bool) {
        for event in out.events {
            self.report(event);
        }
        self.write(out.responses, ctx, done);
    }

    fn report(&mut self, event: Event) {
        let metrics = &self.peers.metrics;
        match event {
            Event::Sent {
                type_url,
                resources,
                took,
            } => {
                metrics.pushed(type_url.short(), took.as_secs_f64());
                tracing::debug!(proxy = %self.proxy_log(), r#type = type_url.short(), resources, "ADS: sent");
            }
            Event::Nack { type_url, error } => {
                let nacked = Nacked {
                    proxy: self.proxy_id().to_string(),
                    error: format!("{}: {error}", type_url.short()),
                };
                outbox::report(&self.peers, Report::Nacked(nacked));
                metrics
                    .xds_rejects
                    .with_label_values(&[type_url.short()])
                    .inc();
                if let Some(held_back) = self.warn_limit.allow(Instant::now()) {
                    tracing::warn!(
                        proxy = %self.proxy_log(),
                        r#type = type_url.short(),
                        error = %Escaped(&error),
                        held_back,
                        "ADS: NACK (one line a minute per stream; held_back: NACKs and bad requests not logged since the last)"
                    );
                }
            }
            Event::SecretProblems(problems) => {
                metrics.sds_certificate_errors.inc_by(problems.len() as u64);
                if let Some(held_back) = self.warn_limit.allow(Instant::now()) {
                    for problem in &problems {
                        let what = if problem.unauthorized {
                            "ADS: unauthorized secret requested, not served"
                        } else {
                            "ADS: secret not found or invalid, not served"
                        };
                        tracing::warn!(
                            proxy = %self.proxy_log(),
                            secret = %Escaped(&problem.name),
                            reason = %Escaped(&problem.reason),
                            held_back,
                            "{what}"
                        );
                    }
                }
            }
            Event::Stale(type_url) => {
                metrics
                    .expired_nonce
                    .with_label_values(&[type_url.short()])
                    .inc();
            }
            Event::UnknownType(type_url) => {
                if let Some(held_back) = self.warn_limit.allow(Instant::now()) {
                    tracing::warn!(proxy = %self.proxy_log(), type_url = %Escaped(&type_url.to_string()), held_back, "ADS: unknown type requested, answered empty");
                }
            }
            Event::Pushed { start } => {
                metrics
                    .proxy_convergence_time
                    .observe(start.elapsed().as_secs_f64());
            }
            Event::Affected {
                keys,
                version,
                start,
            } => {
                let affected = Affected {
                    proxy: self.proxy_id().to_string(),
                    conn: self.id,
                    keys,
                    version,
                    start,
                };
                outbox::report(&self.peers, Report::Affected(affected));
            }
            Event::Acked { version } => {
                let acked = Acked {
                    proxy: self.proxy_id().to_string(),
                    version,
                };
                outbox::report(&self.peers, Report::Acked(acked));
            }
            Event::Synced => tracing::info!(
                proxy = %self.proxy_log(),
                "ADS: full sync complete in {} ms",
                self.connected_at.elapsed().as_millis()
            ),
        }
    }

    /// Tells the PushQueue (through the outbox) that the push it gave is done, if `done`.
    fn push_done(&self, done: bool) {
        if done {
            outbox::push_done(&self.peers, self.id);
        }
    }

    /// Writes responses in order: at once while the stream's queue has room (the common
    /// case), else waiting (no other message is handled meanwhile) at most `write_timeout`
    /// per response; then tells the PushQueue, if `done`.
    fn write(&mut self, responses: Vec<Response>, ctx: &mut Context<Self>, done: bool) {
        let mut responses = responses.into_iter();
        let mut waiting = None;
        for response in responses.by_ref() {
            match self.sink.try_send(encode(self.metrics(), &response)) {
                Ok(()) => self.metrics().xds_send_time.observe(0.0),
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
            self.push_done(done);
            return;
        };
        let rest: Vec<Response> = responses.collect();
        let sink = self.sink.clone();
        let timeout = self.write_timeout;
        let metrics = self.metrics().clone();
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
                    act.metrics().write_timeout.inc();
                    let reason = CloseReason::ResourceExhausted(format!(
                        "the proxy did not read its responses within {:?}",
                        act.write_timeout
                    ));
                    act.close(reason, ctx);
                }
                Err(SinkError::Closed) => ctx.stop(),
            }
            act.push_done(done);
        }));
    }
}

impl Actor for ConnectionActor {
    type Context = Context<Self>;

    fn stopped(&mut self, _: &mut Context<Self>) {
        let Some(proxy) = self.stream.proxy().cloned() else {
            return;
        };
        self.metrics().xds_clients.dec();
        let disconnect = Disconnect { id: self.id };
        mailbox::tell_addr(
            self.metrics(),
            "push_queue",
            &self.peers.push_queue,
            disconnect,
        );
        self.peers.directory.do_send(Unregister { id: self.id });
        let gone = Gone {
            proxy: proxy.id.clone(),
            conn: self.id,
        };
        outbox::report(&self.peers, Report::Gone(gone));
        let reason = self.close_reason.as_deref().unwrap_or("stream ended");
        tracing::info!(proxy = %Escaped(&proxy.id), reason = %Escaped(reason), "ADS: disconnected");
    }
}

impl StreamHandler<Result<Request, CloseReason>> for ConnectionActor {
    fn handle(&mut self, item: Result<Request, CloseReason>, ctx: &mut Context<Self>) {
        match item {
            Ok(req) => self.on_request(req, ctx),
            Err(reason) => {
                // A request that cannot be read is the client's fault: say so, not OK.
                let error = format!("{reason:?}");
                tracing::debug!(proxy = %self.proxy_log(), error = %Escaped(&error), "ADS: stream error");
                self.sink.close(reason);
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
        let out = self.stream.on_push(msg.ctx, &msg.request);
        if out.responses.is_empty() && out.events.is_empty() {
            tracing::trace!(proxy = %self.proxy_log(), version, "push skipped: not affected");
        }
        self.apply(out, ctx, true);
        self.metrics().handled("connection", started);
    }
}

/// A response framed for its stream, its size counted in `pilot_xds_config_size_bytes`.
fn encode(metrics: &Metrics, response: &Response) -> Framed {
    let (type_name, size) = response_size(response);
    metrics.config_sized(type_name, size);
    wire::encode(response)
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
        ResourceType::parse(type_url).map_or("unknown", ResourceType::short),
        sizes,
    )
}
