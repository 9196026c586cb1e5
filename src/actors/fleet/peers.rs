//! The peer replicas this one knows, as plain state: their monitoring addresses (from
//! `--peers` or the peer Service's EndpointSlices) and what each said at its last poll.
//!
//! A peer that did not answer its last poll, answered something that is not a report, is
//! draining, or turns out to be this replica (a `--peers` list may name every replica) holds
//! no count: the balance and the fleet view leave it out until it answers again.
//!
//! A replica is told from itself by its instance (made at random when it starts), not by its
//! name: two replicas given the same name are still two, and [`PeerTable::name_taken`] says
//! which peer has this replica's name, so that the younger of the two can refuse to serve.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a replica says of itself on its monitoring address (`GET /fleet/replica`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaReport {
    /// `--replica-name`, `POD_NAME` or the host name.
    pub replica: String,
    /// ADS streams it serves now.
    pub streams: usize,
    /// It got SIGTERM and is closing its connections.
    pub draining: bool,
    /// Made at random when it started: tells two replicas of one name apart (empty from a
    /// replica that predates it: then the name alone tells).
    #[serde(default)]
    pub instance: String,
    /// When it started, milliseconds since the Unix epoch (0 when not said).
    #[serde(default)]
    pub started_unix_ms: u64,
}

/// Who this replica is, for telling it from its peers.
#[derive(Debug, Clone, PartialEq)]
pub struct Me {
    pub name: String,
    pub instance: String,
    pub started_unix_ms: u64,
}

impl Me {
    /// Whether a report is this replica's own (a `--peers` list that names this replica).
    fn is(&self, r: &ReplicaReport) -> bool {
        if r.instance.is_empty() {
            r.replica == self.name
        } else {
            r.instance == self.instance
        }
    }

    /// Whether, of this replica and the other one of the same name that sent `r`, this one
    /// is the younger (the later start; the greater instance when they started together).
    pub fn younger_than(&self, r: &ReplicaReport) -> bool {
        (self.started_unix_ms, &self.instance) > (r.started_unix_ms, &r.instance)
    }
}

/// One known peer, as `/debug/connections` and the fleet view show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerView {
    pub address: String,
    /// Its last answer, if its last poll was answered.
    pub report: Option<ReplicaReport>,
    /// Why its last poll failed, if it did (not yet polled: "not polled yet").
    pub error: Option<String>,
}

#[derive(Debug, Default, Clone)]
struct Entry {
    report: Option<ReplicaReport>,
    error: Option<String>,
}

#[derive(Debug)]
pub struct PeerTable {
    max: usize,
    peers: BTreeMap<String, Entry>,
}

impl PeerTable {
    /// At most `max` peers are known (`max_peers`).
    pub fn new(max: usize) -> PeerTable {
        PeerTable {
            max,
            peers: BTreeMap::new(),
        }
    }

    /// The peers are now `addrs` (sorted, without repeats, the first `max_peers`); what is
    /// known of those that stay is kept. Returns whether the set changed.
    pub fn set(&mut self, addrs: impl IntoIterator<Item = String>) -> bool {
        let mut wanted: Vec<String> = addrs.into_iter().filter(|a| !a.is_empty()).collect();
        wanted.sort();
        wanted.dedup();
        wanted.truncate(self.max);
        if wanted.iter().eq(self.peers.keys()) {
            return false;
        }
        let mut next = BTreeMap::new();
        for addr in wanted {
            let entry = self.peers.remove(&addr).unwrap_or_default();
            next.insert(addr, entry);
        }
        self.peers = next;
        true
    }

    pub fn addresses(&self) -> Vec<String> {
        self.peers.keys().cloned().collect()
    }

    /// `addr` answered its poll with `answer`; an answer that is not a report is a failure.
    pub fn answered(&mut self, addr: &str, answer: Result<serde_json::Value, String>) {
        let Some(entry) = self.peers.get_mut(addr) else {
            return; // no longer a peer
        };
        let report = answer.and_then(|value| {
            serde_json::from_value::<ReplicaReport>(value)
                .map_err(|e| format!("not a replica report: {e}"))
        });
        match report {
            Ok(report) => {
                entry.report = Some(report);
                entry.error = None;
            }
            Err(error) => {
                entry.report = None;
                entry.error = Some(error);
            }
        }
    }

    /// The stream counts of the peers that count for the balance: answering, serving
    /// (not draining), and not this replica.
    pub fn counts(&self, me: &Me) -> Vec<usize> {
        self.peers
            .values()
            .filter_map(|e| e.report.as_ref())
            .filter(|r| !r.draining && !me.is(r))
            .map(|r| r.streams)
            .collect()
    }

    /// A peer that is another replica with this replica's name, and its address.
    pub fn name_taken(&self, me: &Me) -> Option<(&str, &ReplicaReport)> {
        self.peers.iter().find_map(|(addr, e)| {
            let r = e.report.as_ref()?;
            (r.replica == me.name && !r.instance.is_empty() && !me.is(r))
                .then_some((addr.as_str(), r))
        })
    }

    /// Every known peer but this replica itself.
    pub fn view(&self, me: &Me) -> Vec<PeerView> {
        self.peers
            .iter()
            .filter(|(_, e)| e.report.as_ref().is_none_or(|r| !me.is(r)))
            .map(|(address, e)| PeerView {
                address: address.clone(),
                report: e.report.clone(),
                error: match (&e.report, &e.error) {
                    (None, None) => Some("not polled yet".to_string()),
                    (_, error) => error.clone(),
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(replica: &str, streams: usize, draining: bool) -> serde_json::Value {
        json!({"replica": replica, "streams": streams, "draining": draining})
    }

    fn me() -> Me {
        Me {
            name: "me".into(),
            instance: "i-me".into(),
            started_unix_ms: 100,
        }
    }

    #[test]
    fn only_answering_serving_others_count() {
        let mut t = PeerTable::new(8);
        assert!(t.set([
            "b:1".into(),
            "a:1".into(),
            "c:1".into(),
            "d:1".into(),
            "a:1".into()
        ]));
        assert!(!t.set(["a:1".into(), "b:1".into(), "c:1".into(), "d:1".into()]));
        t.answered("a:1", Ok(report("me", 10, false)));
        t.answered("b:1", Ok(report("b", 20, false)));
        t.answered("c:1", Ok(report("c", 30, true)));
        t.answered("d:1", Err("connection refused".into()));
        assert_eq!(
            t.counts(&me()),
            [20],
            "self, draining and unreachable are left out"
        );
        let view = t.view(&me());
        assert_eq!(view.len(), 3, "self is not a peer");
        assert_eq!(view[2].error.as_deref(), Some("connection refused"));
        t.answered("b:1", Ok(json!({"streams": "many"})));
        assert_eq!(
            t.counts(&me()),
            Vec::<usize>::new(),
            "a bad answer is no count"
        );
    }

    #[test]
    fn a_new_set_keeps_what_is_known_of_the_peers_that_stay_and_is_bounded() {
        let mut t = PeerTable::new(2);
        t.set(["a:1".into(), "b:1".into()]);
        t.answered("a:1", Ok(report("a", 5, false)));
        assert!(t.set(["c:1".into(), "a:1".into(), "z:1".into()]));
        assert_eq!(t.addresses(), ["a:1", "c:1"], "sorted, the first max_peers");
        assert_eq!(t.counts(&me()), [5]);
        assert_eq!(t.view(&me())[1].error.as_deref(), Some("not polled yet"));
        t.answered("gone:1", Ok(report("x", 1, false)));
        assert_eq!(t.addresses().len(), 2);
    }

    #[test]
    fn two_replicas_of_one_name_are_two_and_the_younger_is_told() {
        let mut t = PeerTable::new(8);
        t.set(["a:1".into(), "b:1".into(), "c:1".into()]);
        let with = |name: &str, instance: &str, started: u64| {
            json!({"replica": name, "streams": 7, "draining": false,
                   "instance": instance, "started_unix_ms": started})
        };
        // a:1 is this replica itself (same instance); b:1 has its name but is another.
        t.answered("a:1", Ok(with("me", "i-me", 100)));
        t.answered("b:1", Ok(with("me", "i-other", 50)));
        t.answered("c:1", Ok(with("c", "i-c", 10)));
        assert_eq!(
            t.counts(&me()),
            [7, 7],
            "the namesake counts: it is a replica"
        );
        assert_eq!(t.view(&me()).len(), 2);
        let (addr, other) = t.name_taken(&me()).expect("b:1 has this replica's name");
        assert_eq!(addr, "b:1");
        assert!(me().younger_than(other), "started at 100, after 50");
        let older = Me {
            started_unix_ms: 10,
            ..me()
        };
        assert!(!older.younger_than(other));
        let tie = Me {
            started_unix_ms: 50,
            ..me()
        };
        assert!(
            !tie.younger_than(other),
            "a tie goes by instance: i-me < i-other, so the other is the younger"
        );
        // A replica that predates instances is told by its name, as before.
        t.answered("b:1", Ok(report("me", 3, false)));
        assert_eq!(t.counts(&me()), [7]);
        assert!(t.name_taken(&me()).is_none());
    }
}
