//! The Debouncer: merges bursts of `ConfigUpdate`s into one `Flush` for the SnapshotBuilder.
//!
//! Receives [`ConfigUpdate`] from every registry actor; keeps the newest config set of each
//! source and one merged `PushRequest`; sends [`Flush`] when no event came for
//! `debounce_after`, or `debounce_max` after the first event of the batch, per namespace, and
//! a lone edit in a quiet mesh after `debounce_lone` (`debouncer/state.rs` has the rule). Only one flush
//! is being built at a time: events that arrive meanwhile merge into the next one.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;
use tokio::time::Instant;

mod state;

pub use state::{DebounceState, Step};

use super::messages::{ConfigUpdate, Flush, ForcePush};
use axon_config::config_set::{ConfigSet, SourceId};
use axon_metrics::Metrics;
use axon_model::push_request::PushRequest;

pub struct Debouncer {
    state: DebounceState,
    sources: BTreeMap<SourceId, Arc<ConfigSet>>,
    builder: Recipient<Flush>,
    timer: Option<SpawnHandle>,
    mailbox_capacity: usize,
    metrics: Metrics,
}

impl Debouncer {
    pub fn new(
        state: DebounceState,
        builder: Recipient<Flush>,
        mailbox_capacity: usize,
        metrics: Metrics,
    ) -> Self {
        Debouncer {
            state,
            sources: BTreeMap::new(),
            builder,
            timer: None,
            mailbox_capacity,
            metrics,
        }
    }

    fn step(&mut self, ctx: &mut Context<Self>) {
        if let Some(timer) = self.timer.take() {
            ctx.cancel_future(timer);
        }
        let now = Instant::now();
        match self.state.step(now) {
            Step::Idle => {}
            Step::WaitUntil(at) => {
                self.timer = Some(ctx.run_later(at - now, |act, ctx| {
                    act.timer = None;
                    act.step(ctx);
                }));
            }
            Step::Flush(request) => {
                tracing::debug!(
                    events = self.state.events,
                    full = request.full,
                    configs = request.configs_updated.len(),
                    "debounce: flushing"
                );
                self.state.events = 0;
                self.metrics
                    .debounce_time
                    .observe(request.start.elapsed().as_secs_f64());
                let flush = Flush {
                    request,
                    sources: self.sources.clone(),
                };
                ctx.spawn(
                    super::mailbox::ask(&self.metrics, "snapshot_builder", &self.builder, flush)
                        .into_actor(self)
                        .map(|res, act, ctx| {
                            if let Err(e) = res {
                                tracing::error!(error = %e, "snapshot builder unreachable");
                            }
                            act.state.built();
                            act.step(ctx);
                        }),
                );
            }
        }
    }
}

impl Actor for Debouncer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
    }
}

impl Handler<ForcePush> for Debouncer {
    type Result = ();

    fn handle(&mut self, _: ForcePush, ctx: &mut Context<Self>) {
        let request = PushRequest::full_push(
            axon_model::push_request::TriggerReason::Forced,
            std::time::Instant::now(),
        );
        self.state.on_event(request, Instant::now());
        self.step(ctx);
    }
}

impl Handler<ConfigUpdate> for Debouncer {
    type Result = ();

    fn handle(&mut self, msg: ConfigUpdate, ctx: &mut Context<Self>) {
        let started = std::time::Instant::now();
        self.sources.insert(msg.source, msg.configs);
        self.state.on_event(msg.request, Instant::now());
        self.step(ctx);
        self.metrics.handled("debouncer", started);
    }
}

#[cfg(test)]
mod tests {
    use super::state::tests::edit;
    use super::*;
    use axon_model::push_request::TriggerReason;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    fn req(at: Instant) -> PushRequest {
        PushRequest::full_push(TriggerReason::Config, at.into_std())
    }

    /// Records when each flush arrives.
    struct Probe(std::sync::Arc<std::sync::Mutex<Vec<(Instant, PushRequest)>>>);

    impl Actor for Probe {
        type Context = Context<Self>;
    }

    impl Handler<Flush> for Probe {
        type Result = ();
        fn handle(&mut self, msg: Flush, _: &mut Context<Self>) {
            self.0.lock().unwrap().push((Instant::now(), msg.request));
        }
    }

    /// Flushes seen by a probe, with their time.
    type Flushes = std::sync::Arc<std::sync::Mutex<Vec<(Instant, PushRequest)>>>;

    /// A started Debouncer (`after`, `max`) whose flushes a probe records.
    fn probed(after: Duration, max: Duration) -> (Addr<Debouncer>, Flushes) {
        let flushes = Flushes::default();
        let probe = Probe(flushes.clone()).start();
        let debouncer = Debouncer::new(
            DebounceState::new(after, max, true),
            probe.recipient(),
            16,
            Metrics::new(),
        )
        .start();
        (debouncer, flushes)
    }

    fn update(at: Instant) -> ConfigUpdate {
        ConfigUpdate {
            source: "test",
            configs: Arc::default(),
            request: req(at),
        }
    }

    #[actix_rt::test]
    async fn the_actor_flushes_a_burst_once_with_paused_time() {
        tokio::time::pause();
        let (debouncer, flushes) = probed(100 * MS, 10_000 * MS);
        let t0 = Instant::now();
        for i in 0..50 {
            // 50 events within 40 ms (the timer wheel has millisecond resolution).
            tokio::time::sleep_until(t0 + (i * 40 / 50) * MS).await;
            debouncer.do_send(update(Instant::now()));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let flushes = flushes.lock().unwrap();
        assert_eq!(flushes.len(), 1, "one flush for the burst");
        let at = flushes[0].0 - t0;
        assert!(at >= 139 * MS && at <= 142 * MS, "flushed at {at:?}");
        assert_eq!(flushes[0].1.reasons.values().sum::<u32>(), 50);
    }

    #[actix_rt::test]
    async fn the_actor_flushes_at_max_when_events_never_stop() {
        tokio::time::pause();
        let (debouncer, flushes) = probed(100 * MS, 2_000 * MS);
        let t0 = Instant::now();
        while Instant::now() - t0 < 2_500 * MS {
            debouncer.do_send(update(Instant::now()));
            tokio::time::sleep(50 * MS).await;
        }
        let flushes = flushes.lock().unwrap();
        assert!(!flushes.is_empty(), "a flush despite endless events");
        let at = flushes[0].0 - t0;
        assert!(
            at >= 2_000 * MS && at <= 2_060 * MS,
            "first flush at {at:?}"
        );
    }

    #[actix_rt::test]
    async fn the_actor_flushes_a_quiet_namespace_beside_a_busy_one() {
        tokio::time::pause();
        let (debouncer, flushes) = probed(100 * MS, 10_000 * MS);
        let t0 = Instant::now();
        let send = |namespace: &str| {
            debouncer.do_send(ConfigUpdate {
                source: "test",
                configs: Arc::default(),
                request: edit(namespace, Instant::now()),
            })
        };
        let mut quiet_at = None;
        while Instant::now() - t0 < 3_000 * MS {
            send("busy");
            if quiet_at.is_none() && Instant::now() - t0 >= 1_000 * MS {
                send("quiet");
                quiet_at = Some(Instant::now());
            }
            tokio::time::sleep(50 * MS).await;
        }
        tokio::time::sleep(20 * MS).await;
        let flushes = flushes.lock().unwrap();
        assert_eq!(
            flushes.len(),
            1,
            "only the quiet namespace, before busy's max"
        );
        let after = flushes[0].0 - quiet_at.unwrap();
        assert!(
            after >= 100 * MS && after <= 105 * MS,
            "flushed {after:?} after the edit"
        );
        let keys = &flushes[0].1.configs_updated;
        assert!(keys.iter().all(|k| k.namespace == "quiet"), "{keys:?}");
    }

    #[actix_rt::test]
    async fn the_actor_flushes_a_lone_edit_after_lone() {
        tokio::time::pause();
        let flushes = Flushes::default();
        let probe = Probe(flushes.clone()).start();
        let state = DebounceState::new(100 * MS, 10_000 * MS, true).with_lone(10 * MS);
        let debouncer = Debouncer::new(state, probe.recipient(), 16, Metrics::new()).start();
        let t0 = Instant::now();
        debouncer.do_send(update(t0));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let flushes = flushes.lock().unwrap();
        assert_eq!(flushes.len(), 1);
        let at = flushes[0].0 - t0;
        assert!(at >= 10 * MS && at <= 12 * MS, "flushed at {at:?}");
    }
}
