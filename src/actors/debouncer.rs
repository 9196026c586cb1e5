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

/// The pure debounce rule: istiod's `debounce`, with a lane per namespace. Each lane merges
/// the changes of its namespace (`""`: cluster-scoped configs and unscoped pushes) and is
/// ready when its namespace has been quiet for `after`, or `max` after its first change; a
/// flush takes every ready lane and leaves the others waiting. So a namespace that changes
/// every 50 ms holds back only itself (flushed at `max`), and a change elsewhere is flushed
/// `after` its own last event, never later than the build in progress. Still one build at a
/// time: lanes that become ready meanwhile go into the next flush.
#[derive(Debug)]
pub struct DebounceState {
    after: Duration,
    max: Duration,
    eds_debounce: bool,
    lanes: BTreeMap<String, Lane>,
    building: bool,
    pub events: u64,
}

/// One namespace's merged changes.
#[derive(Debug)]
struct Lane {
    pending: PushRequest,
    first_event: Instant,
    last_event: Instant,
}

impl Lane {
    /// When it is ready to flush.
    fn due(&self, after: Duration, max: Duration, eds_debounce: bool) -> Option<Instant> {
        if !self.pending.full && !eds_debounce {
            return None;
        }
        Some((self.last_event + after).min(self.first_event + max))
    }
}

impl DebounceState {
    pub fn new(after: Duration, max: Duration, eds_debounce: bool) -> DebounceState {
        DebounceState {
            after,
            max,
            eds_debounce,
            lanes: BTreeMap::new(),
            building: false,
            events: 0,
        }
    }

    pub fn on_event(&mut self, request: PushRequest, now: Instant) {
        self.events += 1;
        for (namespace, part) in request.split_by_namespace() {
            match self.lanes.remove(&namespace) {
                None => {
                    let lane = Lane {
                        pending: part,
                        first_event: now,
                        last_event: now,
                    };
                    self.lanes.insert(namespace, lane);
                }
                Some(lane) => {
                    let lane = Lane {
                        pending: lane.pending.merge(part),
                        last_event: now,
                        ..lane
                    };
                    self.lanes.insert(namespace, lane);
                }
            }
        }
    }

    /// Decides at `now`: flush the ready lanes merged, wait for the next one, or nothing
    /// pending.
    pub fn step(&mut self, now: Instant) -> Step {
        let (after, max, eds) = (self.after, self.max, self.eds_debounce);
        let ready: Vec<String> = self
            .lanes
            .iter()
            .filter(|(_, lane)| lane.due(after, max, eds).is_none_or(|at| now >= at))
            .map(|(ns, _)| ns.clone())
            .collect();
        if ready.is_empty() {
            return match self
                .lanes
                .values()
                .filter_map(|l| l.due(after, max, eds))
                .min()
            {
                Some(at) => Step::WaitUntil(at),
                None => Step::Idle,
            };
        }
        if self.building {
            return Step::Idle;
        }
        self.building = true;
        let merged = ready
            .iter()
            .filter_map(|ns| self.lanes.remove(ns))
            .map(|lane| lane.pending)
            .reduce(PushRequest::merge)
            .expect("a ready lane");
        Step::Flush(merged)
    }

    /// The flush sent last has been built.
    pub fn built(&mut self) {
        self.building = false;
    }

    /// Namespaces with changes waiting.
    pub fn waiting_lanes(&self) -> usize {
        self.lanes.len()
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

    fn edit(namespace: &str, at: Instant) -> PushRequest {
        use crate::model::config::{ConfigKey, ConfigKind};
        PushRequest::config_change(
            std::collections::BTreeSet::from([ConfigKey::new(
                ConfigKind::VirtualService,
                namespace,
                "vs",
            )]),
            at.into_std(),
        )
    }

    #[test]
    fn a_busy_namespace_holds_back_only_itself() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 2_000 * MS, true);
        let mut flushes: Vec<(Duration, Vec<String>)> = Vec::new();
        let mut t = t0;
        // `busy` changes every 50 ms for 3 s; `quiet` once, at 1 s.
        while t < t0 + 3_000 * MS {
            s.on_event(edit("busy", t), t);
            if t == t0 + 1_000 * MS {
                s.on_event(edit("quiet", t), t);
            }
            for now in [t, t + 25 * MS] {
                if let Step::Flush(r) = s.step(now) {
                    let namespaces = r.configs_updated.iter().map(|k| k.namespace.clone());
                    flushes.push((now - t0, namespaces.collect()));
                    s.built();
                }
            }
            t += 50 * MS;
        }
        assert_eq!(
            flushes,
            [
                (1_100 * MS, vec!["quiet".to_string()]),
                (2_000 * MS, vec!["busy".to_string()]),
            ],
            "the quiet change after its own quiet time; the busy one at max"
        );
    }

    #[test]
    fn lanes_ready_together_flush_together_and_wait_for_the_build() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true);
        s.on_event(edit("a", t0), t0);
        s.on_event(edit("b", t0 + 10 * MS), t0 + 10 * MS);
        assert_eq!(s.step(t0 + 50 * MS), Step::WaitUntil(t0 + 100 * MS));
        let Step::Flush(first) = s.step(t0 + 100 * MS) else {
            panic!("a is ready")
        };
        assert_eq!(first.configs_updated.len(), 1);
        // b becomes ready while a's flush is built: it waits, then goes alone.
        assert_eq!(s.step(t0 + 110 * MS), Step::Idle);
        s.built();
        let Step::Flush(second) = s.step(t0 + 120 * MS) else {
            panic!("b is ready")
        };
        assert_eq!(second.configs_updated.iter().next().unwrap().namespace, "b");
        assert_eq!(s.waiting_lanes(), 0);
        // Two namespaces quiet at once: one flush.
        s.built();
        s.on_event(edit("a", t0), t0 + 200 * MS);
        s.on_event(edit("b", t0), t0 + 200 * MS);
        let Step::Flush(both) = s.step(t0 + 300 * MS) else {
            panic!("both are ready")
        };
        assert_eq!(both.configs_updated.len(), 2);
        assert_eq!(both.reasons.values().sum::<u32>(), 2);
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
}
