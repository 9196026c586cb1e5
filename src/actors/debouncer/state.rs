//! The pure debounce rule behind the [`super::Debouncer`]: istiod's `debounce`, with a lane
//! per namespace and a short wait for a lone edit in a quiet mesh. No actix, no timers: it is
//! told the time ([`DebounceState::on_event`], [`DebounceState::step`]) and answers with a
//! [`Step`].

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use axon_model::push_request::PushRequest;

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
///
/// A lone edit: the first event after the whole mesh has been quiet for `after`, with
/// nothing pending and nothing being built, is flushed `lone` after it instead of `after`,
/// unless any other event comes before that; then its lane waits as any other. So a burst
/// whose events come closer together than `lone` is still one flush, and a burst with wider
/// gaps costs at most one flush more than without it (its first event), once per quiet
/// period. `lone` of zero turns it off.
#[derive(Debug)]
pub struct DebounceState {
    after: Duration,
    max: Duration,
    lone: Duration,
    eds_debounce: bool,
    lanes: BTreeMap<String, Lane>,
    building: bool,
    /// When the last event of any lane came.
    last_event: Option<Instant>,
    /// The lane of a lone edit, while it is one.
    lone_lane: Option<String>,
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
    /// When it is ready to flush; `after` is `lone` for a lone edit.
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
            lone: Duration::ZERO,
            eds_debounce,
            lanes: BTreeMap::new(),
            building: false,
            last_event: None,
            lone_lane: None,
            events: 0,
        }
    }

    /// Flushes a lone edit in a quiet mesh `lone` after it (zero: off); at most `after`.
    pub fn with_lone(mut self, lone: Duration) -> DebounceState {
        self.lone = lone.min(self.after);
        self
    }

    pub fn on_event(&mut self, request: PushRequest, now: Instant) {
        self.events += 1;
        let quiet = self.lanes.is_empty()
            && !self.building
            && self.last_event.is_none_or(|at| now >= at + self.after);
        self.last_event = Some(now);
        let parts = request.split_by_namespace();
        self.lone_lane = match &parts[..] {
            [(namespace, _)] if quiet && !self.lone.is_zero() => Some(namespace.clone()),
            _ => None,
        };
        for (namespace, part) in parts {
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
        let due = |ns: &String, lane: &Lane| {
            let after = match &self.lone_lane {
                Some(lone) if lone == ns => self.lone,
                _ => self.after,
            };
            lane.due(after, self.max, self.eds_debounce)
        };
        let ready: Vec<String> = self
            .lanes
            .iter()
            .filter(|(ns, lane)| due(ns, lane).is_none_or(|at| now >= at))
            .map(|(ns, _)| ns.clone())
            .collect();
        if ready.is_empty() {
            return match self.lanes.iter().filter_map(|(ns, l)| due(ns, l)).min() {
                Some(at) => Step::WaitUntil(at),
                None => Step::Idle,
            };
        }
        if self.building {
            return Step::Idle;
        }
        self.building = true;
        self.lone_lane = None;
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use axon_model::push_request::TriggerReason;

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

    pub(crate) fn edit(namespace: &str, at: Instant) -> PushRequest {
        use axon_config::config::{ConfigKey, ConfigKind};
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

    #[test]
    fn a_lone_edit_in_a_quiet_mesh_is_flushed_after_lone() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true).with_lone(10 * MS);
        s.on_event(edit("a", t0), t0);
        assert_eq!(s.step(t0), Step::WaitUntil(t0 + 10 * MS));
        assert!(matches!(s.step(t0 + 10 * MS), Step::Flush(_)));
        s.built();
        // The mesh has not been quiet for `after`: the next edit waits the whole window.
        let t1 = t0 + 50 * MS;
        s.on_event(edit("a", t1), t1);
        assert_eq!(s.step(t1), Step::WaitUntil(t1 + 100 * MS));
        assert!(matches!(s.step(t1 + 100 * MS), Step::Flush(_)));
        s.built();
        // Quiet again for `after`: lone again, in another namespace too.
        let t2 = t1 + 200 * MS;
        s.on_event(edit("b", t2), t2);
        assert_eq!(s.step(t2), Step::WaitUntil(t2 + 10 * MS));
    }

    #[test]
    fn a_burst_closer_than_lone_is_still_one_flush() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 10_000 * MS, true).with_lone(10 * MS);
        let mut flushes = 0;
        for i in 0..50 {
            let at = t0 + i * MS;
            s.on_event(edit("a", at), at);
            if let Step::Flush(_) = s.step(at) {
                flushes += 1;
            }
        }
        let last = t0 + 49 * MS;
        assert_eq!(s.step(last), Step::WaitUntil(last + 100 * MS));
        let Step::Flush(r) = s.step(last + 100 * MS) else {
            panic!("expected a flush")
        };
        assert_eq!((flushes, r.reasons.values().sum::<u32>()), (0, 50));
    }

    #[test]
    fn a_lone_edit_stops_being_lone_at_any_other_event() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true).with_lone(10 * MS);
        s.on_event(edit("a", t0), t0);
        s.on_event(edit("b", t0 + 5 * MS), t0 + 5 * MS);
        assert_eq!(s.step(t0 + 10 * MS), Step::WaitUntil(t0 + 100 * MS));
        // Nothing lone while a flush is built.
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true).with_lone(10 * MS);
        s.on_event(edit("a", t0), t0);
        assert!(matches!(s.step(t0 + 10 * MS), Step::Flush(_)));
        let t1 = t0 + 500 * MS;
        s.on_event(edit("a", t1), t1);
        assert_eq!(s.step(t1), Step::WaitUntil(t1 + 100 * MS), "not lone");
        assert_eq!(s.step(t1 + 100 * MS), Step::Idle, "still building");
        s.built();
        assert!(matches!(s.step(t1 + 100 * MS), Step::Flush(_)));
        // An edit of two namespaces at once is no lone edit.
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true).with_lone(10 * MS);
        s.on_event(edit("a", t0).merge(edit("b", t0)), t0);
        assert_eq!(s.step(t0), Step::WaitUntil(t0 + 100 * MS));
    }

    #[test]
    fn lone_zero_is_off_and_lone_is_at_most_after() {
        let t0 = Instant::now();
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true);
        s.on_event(edit("a", t0), t0);
        assert_eq!(s.step(t0), Step::WaitUntil(t0 + 100 * MS));
        let mut s = DebounceState::new(100 * MS, 1_000 * MS, true).with_lone(500 * MS);
        s.on_event(edit("a", t0), t0);
        assert_eq!(s.step(t0), Step::WaitUntil(t0 + 100 * MS));
    }
}
