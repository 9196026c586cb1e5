//! The outbox of a connection thread: what its ConnectionActors tell the PushQueue (a push
//! is done) and the DistributionTracker ([`Report`]s), gathered per thread and sent as one
//! [`PushesDone`] and one [`Reports`] per turn of the thread's scheduler.
//!
//! Both receivers live on the System's arbiter, which is idle while the connection threads
//! write a push: a message per event woke that thread up to three times per proxy and push
//! (8 % of the CPU of a 10,000-proxy push, BENCHMARKS.md "Where the rest goes"). Batched, it
//! is woken once per turn of each connection thread.
//!
//! Order is kept: a thread's reports reach the DistributionTracker in the order its actors
//! made them (an `Acked` never overtakes the `Affected` before it, nor a `Gone`). The buffer
//! holds only what one scheduler turn adds: the first event of a turn spawns the flush,
//! which yields once (every task already woken runs first) and then sends everything.

use std::cell::RefCell;

use super::Peers;
use crate::actors::distribution::{Report, Reports};
use crate::actors::mailbox;
use crate::actors::messages::{ConnId, PushesDone};

/// What the actors of this thread that share one set of peers have to send.
struct Pending {
    peers: Peers,
    done: Vec<ConnId>,
    reports: Vec<Report>,
}

thread_local! {
    /// One entry per set of peers (one in a server; tests may run several on one thread).
    static OUTBOX: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
}

/// Connection `id` finished the push it was given.
pub(super) fn push_done(peers: &Peers, id: ConnId) {
    add(peers, |p| p.done.push(id));
}

/// A report for the DistributionTracker.
pub(super) fn report(peers: &Peers, report: Report) {
    add(peers, |p| p.reports.push(report));
}

fn add(peers: &Peers, f: impl FnOnce(&mut Pending)) {
    let first = OUTBOX.with(|outbox| {
        let mut outbox = outbox.borrow_mut();
        let first = outbox.is_empty();
        let same = |p: &&mut Pending| {
            p.peers.push_queue == peers.push_queue && p.peers.distribution == peers.distribution
        };
        match outbox.iter_mut().find(same) {
            Some(pending) => f(pending),
            None => {
                let mut pending = Pending {
                    peers: peers.clone(),
                    done: Vec::new(),
                    reports: Vec::new(),
                };
                f(&mut pending);
                outbox.push(pending);
            }
        }
        first
    });
    if first {
        actix_rt::spawn(async {
            tokio::task::yield_now().await;
            flush();
        });
    }
}

/// Sends what this thread's outbox holds.
fn flush() {
    let pending = OUTBOX.with(|outbox| std::mem::take(&mut *outbox.borrow_mut()));
    for Pending {
        peers,
        done,
        reports,
    } in pending
    {
        if !done.is_empty() {
            let done = PushesDone { ids: done };
            mailbox::tell_addr(&peers.metrics, "push_queue", &peers.push_queue, done);
        }
        if !reports.is_empty() {
            peers.distribution.do_send(Reports(reports));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::directory::ConnectionDirectory;
    use crate::actors::distribution::{Acked, Affected, DistributionTracker, GetDistribution};
    use crate::actors::push_queue::PushQueue;
    use axon_config::config::{ConfigKey, ConfigKind};
    use axon_metrics::Metrics;
    use std::time::{Duration, Instant};

    #[actix_rt::test]
    async fn a_turns_reports_arrive_together_and_in_order() {
        let metrics = Metrics::new();
        let distribution = actix::Actor::start(DistributionTracker::new(metrics.clone()));
        let peers = Peers {
            push_queue: actix::Actor::start(PushQueue::new(
                4,
                16,
                Duration::from_secs(5),
                metrics.clone(),
            )),
            directory: actix::Actor::start(ConnectionDirectory::default()),
            distribution: distribution.clone(),
            metrics,
            debug: super::super::DebugAnswers {
                replica: "test".into(),
                timeout: Duration::from_secs(1),
            },
        };
        let key = ConfigKey::new(ConfigKind::VirtualService, "a", "r");
        for proxy in ["p1", "p2"] {
            report(
                &peers,
                Report::Affected(Affected {
                    proxy: proxy.to_string(),
                    conn: 1,
                    keys: vec![key.clone()],
                    version: 2,
                    start: Instant::now(),
                }),
            );
        }
        report(
            &peers,
            Report::Acked(Acked {
                proxy: "p1".to_string(),
                version: 2,
            }),
        );
        push_done(&peers, 7);
        assert_eq!(OUTBOX.with(|o| o.borrow().len()), 1, "one set of peers");
        assert_eq!(
            OUTBOX.with(|o| o.borrow()[0].reports.len()),
            3,
            "not sent yet"
        );
        // Held until the flush has run, then sent (before the query below, from this same
        // thread); the tracker handles them in order.
        for _ in 0..100 {
            if OUTBOX.with(|o| o.borrow().is_empty()) {
                break;
            }
            tokio::task::yield_now().await;
        }
        let report = distribution
            .send(GetDistribution { key: None })
            .await
            .unwrap();
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json[0]["affected"], 2, "{json}");
        assert_eq!(json[0]["acked"], 1, "{json}");
        assert_eq!(json[0]["pending"], serde_json::json!(["p2"]), "{json}");
    }
}
