//! The peer replicas this one knows, as plain state: their monitoring addresses (from
//! `--peers` or the peer Service's EndpointSlices) and what each said at its last poll.
//!
//! A peer that did not answer its last poll, answered something that is not a report, is
//! draining, or turns out to be this replica (a `--peers` list may name every replica) holds
//! no count: the balance and the fleet view leave it out until it answers again.

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
    /// (not draining), and not `own` (this replica's name).
    pub fn counts(&self, own: &str) -> Vec<usize> {
        self.peers
            .values()
            .filter_map(|e| e.report.as_ref())
            .filter(|r| !r.draining && r.replica != own)
            .map(|r| r.streams)
            .collect()
    }

    /// Every known peer but this replica itself.
    pub fn view(&self, own: &str) -> Vec<PeerView> {
        self.peers
            .iter()
            .filter(|(_, e)| e.report.as_ref().is_none_or(|r| r.replica != own))
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
            t.counts("me"),
            [20],
            "self, draining and unreachable are left out"
        );
        let view = t.view("me");
        assert_eq!(view.len(), 3, "self is not a peer");
        assert_eq!(view[2].error.as_deref(), Some("connection refused"));
        t.answered("b:1", Ok(json!({"streams": "many"})));
        assert_eq!(
            t.counts("me"),
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
        assert_eq!(t.counts("me"), [5]);
        assert_eq!(t.view("me")[1].error.as_deref(), Some("not polled yet"));
        t.answered("gone:1", Ok(report("x", 1, false)));
        assert_eq!(t.addresses().len(), 2);
    }
}
