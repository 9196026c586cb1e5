//! The DistributionTracker: has a config change reached every proxy it affects?
//!
//! Receives [`Affected`] when a ConnectionActor pushes a change to its proxy (only proxies
//! whose scope depends on the change are ever pushed, so no other proxy is counted), and
//! [`Acked`] / [`Nacked`] when that proxy answers the push, [`Gone`] when it leaves; from the
//! ConnectionActors as [`Reports`], a batch per connection thread and scheduler turn.
//! Answers [`GetDistribution`] for `/debug/distribution` and observes
//! `axon_config_distribution_seconds` when the last affected proxy ACKs a change.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use serde::Serialize;

use crate::actors::messages::ConnId;
use axon_config::config::ConfigKey;
use axon_metrics::Metrics;

/// A proxy was pushed `version`, which carries changes to `keys` (started at `start`), on
/// its stream `conn`.
#[derive(Debug, Clone)]
pub struct Affected {
    pub proxy: String,
    pub conn: ConnId,
    pub keys: Vec<ConfigKey>,
    pub version: u64,
    pub start: Instant,
}

/// A proxy ACKed every type it was sent at `version` or later.
#[derive(Debug, Clone)]
pub struct Acked {
    pub proxy: String,
    pub version: u64,
}

/// A proxy rejected what it was sent.
#[derive(Debug, Clone)]
pub struct Nacked {
    pub proxy: String,
    pub error: String,
}

/// A proxy's stream `conn` went away: the proxy no longer counts as pending, unless it was
/// pushed on a newer stream since (a reconnect on another connection thread can report
/// before the old stream's end does).
#[derive(Debug, Clone)]
pub struct Gone {
    pub proxy: String,
    pub conn: ConnId,
}

/// One of the reports a ConnectionActor makes.
#[derive(Debug, Clone)]
pub enum Report {
    Affected(Affected),
    Acked(Acked),
    Nacked(Nacked),
    Gone(Gone),
}

/// Reports in the order they were made (one connection thread's, from its outbox).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Reports(pub Vec<Report>);

#[derive(Message)]
#[rtype(result = "Vec<KeyDistribution>")]
pub struct GetDistribution {
    /// Only this key (`Kind/namespace/name`), if set.
    pub key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ProxyState {
    Pending,
    Acked { seconds_after_change: f64 },
    Nacked { error: String },
}

/// The distribution of the latest change of one config.
#[derive(Debug, Clone, Serialize)]
pub struct KeyDistribution {
    pub key: String,
    /// How many times this config changed since axon started (that it saw pushed).
    pub generation: u64,
    /// The PushContext version that carried the latest change.
    pub version: u64,
    pub changed_at_unix_ms: u128,
    pub affected: usize,
    pub acked: usize,
    /// Every affected proxy has ACKed.
    pub complete: bool,
    /// Seconds from the change to the last ACK, once complete.
    pub seconds_to_last_ack: Option<f64>,
    pub pending: Vec<String>,
    pub nacked: Vec<(String, String)>,
}

#[derive(Debug)]
struct Change {
    generation: u64,
    version: u64,
    start: Instant,
    changed_at: SystemTime,
    /// Hashed, not ordered: an ACK looks its proxy up in every pending change, and a sorted
    /// map of 10,000 ids sharing a long prefix cost a dozen string compares per lookup.
    /// The report sorts.
    proxies: HashMap<String, Slot>,
    /// How many of `proxies` are Pending, and how many Nacked: an ACK needs no scan of them
    /// all to tell whether the change is complete.
    pending: usize,
    nacked: usize,
    last_ack: Option<Duration>,
    observed: bool,
}

/// A proxy's state for one change, and the stream it was last pushed the change on.
#[derive(Debug)]
struct Slot {
    state: ProxyState,
    conn: ConnId,
}

impl Change {
    /// Sets a proxy's state, keeping the counts; `conn` is the stream it was pushed on, when
    /// it was (an ACK or NACK keeps the one of the push).
    fn set(&mut self, proxy: &str, state: ProxyState, conn: Option<ConnId>) {
        let old = match self.proxies.get_mut(proxy) {
            Some(slot) => {
                if let Some(conn) = conn {
                    slot.conn = conn;
                }
                Some(std::mem::replace(&mut slot.state, state.clone()))
            }
            None => {
                let slot = Slot {
                    state: state.clone(),
                    conn: conn.unwrap_or_default(),
                };
                self.proxies.insert(proxy.to_string(), slot);
                None
            }
        };
        self.count(old.as_ref(), -1);
        self.count(Some(&state), 1);
    }

    /// Whether `proxy` is still to ACK this change.
    fn is_pending(&self, proxy: &str) -> bool {
        self.pending_on(proxy).is_some()
    }

    /// The stream `proxy` was pushed this change on, while it is still to ACK it.
    fn pending_on(&self, proxy: &str) -> Option<ConnId> {
        if self.pending == 0 {
            return None;
        }
        self.proxies
            .get(proxy)
            .filter(|s| s.state == ProxyState::Pending)
            .map(|s| s.conn)
    }

    fn count(&mut self, state: Option<&ProxyState>, by: isize) {
        match state {
            Some(ProxyState::Pending) => self.pending = self.pending.saturating_add_signed(by),
            Some(ProxyState::Nacked { .. }) => self.nacked = self.nacked.saturating_add_signed(by),
            _ => {}
        }
    }

    /// Every affected proxy has ACKed.
    fn done(&self) -> bool {
        self.pending == 0 && self.nacked == 0
    }
}

/// The pure tracker.
#[derive(Debug, Default)]
pub struct Distribution {
    changes: BTreeMap<ConfigKey, Change>,
}

impl Distribution {
    pub fn affected(&mut self, msg: Affected, now: SystemTime) {
        for key in msg.keys {
            let change = self.changes.entry(key).or_insert_with(|| Change {
                generation: 0,
                version: 0,
                start: msg.start,
                changed_at: now,
                proxies: HashMap::new(),
                pending: 0,
                nacked: 0,
                last_ack: None,
                observed: false,
            });
            if msg.version > change.version && change.start != msg.start {
                // A newer change of this config: start counting again.
                change.generation += 1;
                change.version = msg.version;
                change.start = msg.start;
                change.changed_at = now;
                change.proxies.clear();
                change.pending = 0;
                change.nacked = 0;
                change.last_ack = None;
                change.observed = false;
            } else if change.generation == 0 {
                change.generation = 1;
                change.version = msg.version;
            }
            change.set(&msg.proxy, ProxyState::Pending, Some(msg.conn));
        }
    }

    /// Records an ACK; returns the distribution times of changes it completed.
    pub fn acked(&mut self, proxy: &str, version: u64, now: Instant) -> Vec<Duration> {
        let mut completed = Vec::new();
        for change in self.changes.values_mut() {
            if change.version > version {
                continue;
            }
            // Only a change still waiting for someone can be waiting for this proxy.
            if change.is_pending(proxy) {
                let after = now.saturating_duration_since(change.start);
                change.set(
                    proxy,
                    ProxyState::Acked {
                        seconds_after_change: after.as_secs_f64(),
                    },
                    None,
                );
                change.last_ack = Some(change.last_ack.map_or(after, |l| l.max(after)));
            }
            if change.done() && !change.observed {
                change.observed = true;
                completed.extend(change.last_ack);
            }
        }
        completed
    }

    pub fn nacked(&mut self, proxy: &str, error: &str) {
        for change in self.changes.values_mut() {
            if change.is_pending(proxy) {
                change.set(
                    proxy,
                    ProxyState::Nacked {
                        error: error.to_string(),
                    },
                    None,
                );
            }
        }
    }

    pub fn gone(&mut self, proxy: &str, conn: ConnId) {
        for change in self.changes.values_mut() {
            if change.pending_on(proxy) == Some(conn) {
                change.proxies.remove(proxy);
                change.pending -= 1;
            }
        }
    }

    pub fn report(&self, key: Option<&str>) -> Vec<KeyDistribution> {
        self.changes
            .iter()
            .filter(|(k, _)| key.is_none_or(|want| k.to_string() == want))
            .map(|(k, c)| {
                let acked = c
                    .proxies
                    .values()
                    .filter(|s| matches!(s.state, ProxyState::Acked { .. }))
                    .count();
                KeyDistribution {
                    key: k.to_string(),
                    generation: c.generation,
                    version: c.version,
                    changed_at_unix_ms: c
                        .changed_at
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis()),
                    affected: c.proxies.len(),
                    acked,
                    complete: acked == c.proxies.len(),
                    seconds_to_last_ack: (acked == c.proxies.len())
                        .then(|| c.last_ack.map(|d| d.as_secs_f64()))
                        .flatten(),
                    pending: sorted(
                        c.proxies
                            .iter()
                            .filter(|(_, s)| s.state == ProxyState::Pending)
                            .map(|(p, _)| p.clone())
                            .collect(),
                    ),
                    nacked: sorted(
                        c.proxies
                            .iter()
                            .filter_map(|(p, s)| match &s.state {
                                ProxyState::Nacked { error } => Some((p.clone(), error.clone())),
                                _ => None,
                            })
                            .collect(),
                    ),
                }
            })
            .collect()
    }
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort_unstable();
    v
}

pub struct DistributionTracker {
    state: Distribution,
    metrics: Metrics,
}

impl DistributionTracker {
    pub fn new(metrics: Metrics) -> Self {
        DistributionTracker {
            state: Distribution::default(),
            metrics,
        }
    }
}

impl Actor for DistributionTracker {
    type Context = Context<Self>;
}

impl DistributionTracker {
    fn on_report(&mut self, report: Report) {
        match report {
            Report::Affected(msg) => self.state.affected(msg, SystemTime::now()),
            Report::Acked(msg) => {
                for took in self.state.acked(&msg.proxy, msg.version, Instant::now()) {
                    self.metrics.config_distribution.observe(took.as_secs_f64());
                }
            }
            Report::Nacked(msg) => self.state.nacked(&msg.proxy, &msg.error),
            Report::Gone(msg) => self.state.gone(&msg.proxy, msg.conn),
        }
    }
}

impl Handler<Reports> for DistributionTracker {
    type Result = ();
    fn handle(&mut self, msg: Reports, _: &mut Context<Self>) {
        for report in msg.0 {
            self.on_report(report);
        }
    }
}

impl Handler<GetDistribution> for DistributionTracker {
    type Result = MessageResult<GetDistribution>;
    fn handle(&mut self, msg: GetDistribution, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.state.report(msg.key.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axon_config::config::ConfigKind;

    fn vs(name: &str) -> ConfigKey {
        ConfigKey::new(ConfigKind::VirtualService, "a", name)
    }

    #[test]
    fn a_change_completes_when_every_affected_proxy_acks() {
        let t0 = Instant::now();
        let mut d = Distribution::default();
        for proxy in ["p1", "p2"] {
            d.affected(
                Affected {
                    proxy: proxy.into(),
                    conn: 1,
                    keys: vec![vs("r")],
                    version: 5,
                    start: t0,
                },
                SystemTime::now(),
            );
        }
        assert!(d.acked("p1", 5, t0 + Duration::from_millis(10)).is_empty());
        let report = d.report(Some("VirtualService/a/r"));
        assert_eq!(
            (report[0].affected, report[0].acked, report[0].complete),
            (2, 1, false)
        );
        assert_eq!(report[0].pending, ["p2"]);
        d.affected(
            Affected {
                proxy: "p0".into(),
                conn: 1,
                keys: vec![vs("r")],
                version: 5,
                start: t0,
            },
            SystemTime::now(),
        );
        assert_eq!(
            d.report(None)[0].pending,
            ["p0", "p2"],
            "the report lists proxies in order"
        );
        d.gone("p0", 1);
        let done = d.acked("p2", 6, t0 + Duration::from_millis(30));
        assert_eq!(done, [Duration::from_millis(30)]);
        let report = d.report(None);
        assert!(report[0].complete);
        assert_eq!(report[0].seconds_to_last_ack, Some(0.03));
    }

    #[test]
    fn the_end_of_an_old_stream_reported_late_leaves_the_new_one_pending() {
        let t0 = Instant::now();
        let mut d = Distribution::default();
        let pushed = |conn| Affected {
            proxy: "p1".into(),
            conn,
            keys: vec![vs("r")],
            version: 5,
            start: t0,
        };
        d.affected(pushed(1), SystemTime::now());
        // p1 reconnects on another connection thread: its new stream's push is reported
        // before the old stream's end.
        d.affected(pushed(2), SystemTime::now());
        d.gone("p1", 1);
        let r = &d.report(None)[0];
        assert_eq!(r.pending, ["p1"], "still waiting for the new stream's ACK");
        d.gone("p1", 2);
        assert!(d.report(None)[0].pending.is_empty());
    }

    #[test]
    fn an_older_ack_does_not_count_and_a_nack_is_shown() {
        let t0 = Instant::now();
        let mut d = Distribution::default();
        d.affected(
            Affected {
                proxy: "p1".into(),
                conn: 1,
                keys: vec![vs("r")],
                version: 5,
                start: t0,
            },
            SystemTime::now(),
        );
        d.acked("p1", 4, t0);
        assert_eq!(d.report(None)[0].acked, 0);
        d.nacked("p1", "bad route");
        assert_eq!(
            d.report(None)[0].nacked,
            [("p1".to_string(), "bad route".to_string())]
        );
        // A newer change resets the count.
        d.affected(
            Affected {
                proxy: "p1".into(),
                conn: 1,
                keys: vec![vs("r")],
                version: 7,
                start: t0 + Duration::from_secs(1),
            },
            SystemTime::now(),
        );
        let r = &d.report(None)[0];
        assert_eq!((r.generation, r.version, r.affected, r.acked), (2, 7, 1, 0));
    }

    proptest::proptest! {
        /// The counts behind `done` always agree with the proxies' states, and a change is
        /// reported complete exactly when every affected proxy ACKed.
        #[test]
        fn the_counts_agree_with_the_states(ops in proptest::collection::vec((0u8..4, 0usize..4, 0u64..4), 0..60)) {
            let t0 = Instant::now();
            let mut d = Distribution::default();
            for (op, p, v) in ops {
                let proxy = format!("p{p}");
                match op {
                    0 => d.affected(
                        Affected {
                            proxy,
                            conn: p as u64,
                            keys: vec![vs("r")],
                            version: v,
                            start: t0 + Duration::from_secs(v),
                        },
                        SystemTime::now(),
                    ),
                    1 => {
                        d.acked(&proxy, v, t0 + Duration::from_secs(5));
                    }
                    2 => d.nacked(&proxy, "bad"),
                    _ => d.gone(&proxy, p as u64),
                }
                for c in d.changes.values() {
                    let pending = c.proxies.values().filter(|s| s.state == ProxyState::Pending).count();
                    let nacked = c.proxies.values().filter(|s| matches!(s.state, ProxyState::Nacked { .. })).count();
                    proptest::prop_assert_eq!((c.pending, c.nacked), (pending, nacked));
                }
                for r in d.report(None) {
                    proptest::prop_assert_eq!(r.complete, r.acked == r.affected);
                }
            }
        }
    }
}
