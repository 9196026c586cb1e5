//! The Debouncer: merges bursts of `ConfigUpdate`s into one `Flush` for the SnapshotBuilder.
//!
//! Receives [`ConfigUpdate`] from every registry actor; keeps the newest config set of each
//! source and one merged `PushRequest`; sends [`Flush`] when no event came for
//! `debounce_after`, or `debounce_max` after the first event of the batch. Only one flush is
//! being built at a time: events that arrive meanwhile merge into the next one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::time::Instant;

use super::messages::{ConfigUpdate, Flush, ForcePush};
use crate::metrics::Metrics;
use crate::model::config_set::{ConfigSet, SourceId};
use crate::model::push_request::PushRequest;

/// What the debounce state wants done now.
#[derive(Debug, PartialEq)]
pub enum Step {
    Flush(PushRequest),
    WaitUntil(Instant),
    Idle,
}

/// The pure debounce rule (istiod's `debounce`).
#[derive(Debug)]
pub struct DebounceState {
    after: Duration,
    max: Duration,
    eds_debounce: bool,
    pending: Option<PushRequest>,
    first_event: Instant,
    last_event: Instant,
    building: bool,
    pub events: u64,
}

impl DebounceState {
    pub fn new(after: Duration, max: Duration, eds_debounce: bool) -> DebounceState {
        let now = Instant::now();
        DebounceState {
            after,
            max,
            eds_debounce,
            pending: None,
            first_event: now,
            last_event: now,
            building: false,
            events: 0,
        }
    }

    pub fn on_event(&mut self, request: PushRequest, now: Instant) {
        self.events += 1;
        self.last_event = now;
        self.pending = Some(match self.pending.take() {
            None => {
                self.first_event = now;
                request
            }
            Some(pending) => pending.merge(request),
        });
    }

    /// Decides at `now`: flush the merged request, wait, or nothing pending.
    pub fn step(&mut self, now: Instant) -> Step {
        let Some(pending) = &self.pending else {
            return Step::Idle;
        };
        let quiet_until = self.last_event + self.after;
        let max_until = self.first_event + self.max;
        let skip_wait = !pending.full && !self.eds_debounce;
        if now >= quiet_until || now >= max_until || skip_wait {
            if self.building {
                return Step::Idle;
            }
            self.building = true;
            return Step::Flush(self.pending.take().expect("checked above"));
        }
        Step::WaitUntil(quiet_until.min(max_until))
    }

    /// The flush sent last has been built.
    pub fn built(&mut self) {
        self.building = false;
    }
}

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
            crate::model::push_request::TriggerReason::Forced,
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
    use super::*;
    use crate::model::push_request::TriggerReason;

    const MS: Duration = Duration::from_millis(1);

    fn req(at: Instant) -> PushRequest {
        PushRequest::full_push(TriggerReason::Config, at.into_std())
    }

    #[test]
    fn a_burst_becomes_one_flush_after_the_quiet_time() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 10_000 * MS, true);
        for i in 0..50 {
            let at = t0 + (i * 40 / 50) * MS;
            s.on_event(req(at), at);
            assert!(matches!(s.step(at), Step::WaitUntil(_)));
        }
        let last = t0 + 39 * MS;
        assert_eq!(s.step(last), Step::WaitUntil(last + 100 * MS));
        let Step::Flush(r) = s.step(last + 100 * MS) else {
            panic!("expected a flush")
        };
        assert_eq!(r.reasons.values().sum::<u32>(), 50);
        assert_eq!(s.step(last + 200 * MS), Step::Idle);
    }

    #[test]
    fn events_that_never_stop_flush_at_max() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true);
        let mut t = t0;
        while t < t0 + 1_000 * MS {
            s.on_event(req(t), t);
            assert!(
                matches!(s.step(t), Step::WaitUntil(_)),
                "no flush before max"
            );
            t += 50 * MS;
        }
        assert!(matches!(s.step(t0 + 1_000 * MS), Step::Flush(_)));
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
        let flushes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let probe = Probe(flushes.clone()).start();
        let debouncer = Debouncer::new(
            DebounceState::new(100 * MS, 10_000 * MS, true),
            probe.recipient(),
            16,
            Metrics::new(),
        )
        .start();
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
        let flushes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let probe = Probe(flushes.clone()).start();
        let debouncer = Debouncer::new(
            DebounceState::new(100 * MS, 2_000 * MS, true),
            probe.recipient(),
            16,
            Metrics::new(),
        )
        .start();
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

    #[test]
    fn endpoint_requests_skip_the_wait_unless_eds_debounce() {
        let t0 = Instant::now();
        let eds = PushRequest::endpoint_change(Default::default(), t0.into_std());
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, false);
        s.on_event(eds.clone(), t0);
        assert!(
            matches!(s.step(t0), Step::Flush(r) if !r.full),
            "no wait for EDS"
        );
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true);
        s.on_event(eds, t0);
        assert!(
            matches!(s.step(t0), Step::WaitUntil(_)),
            "enable_eds_debounce waits"
        );
        s.on_event(req(t0), t0);
        let mut s2 = DebounceState::new(100 * MS, 1_000 * MS, false);
        s2.on_event(req(t0), t0);
        assert!(
            matches!(s2.step(t0), Step::WaitUntil(_)),
            "config changes always wait"
        );
    }

    #[test]
    fn one_build_at_a_time() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true);
        s.on_event(req(t0), t0);
        assert!(matches!(s.step(t0 + 100 * MS), Step::Flush(_)));
        s.on_event(req(t0), t0 + 110 * MS);
        assert_eq!(
            s.step(t0 + 300 * MS),
            Step::Idle,
            "previous flush still building"
        );
        s.built();
        assert!(matches!(s.step(t0 + 300 * MS), Step::Flush(_)));
    }
}
