//! The PushQueue: fans a push out to every connection, at most `push_concurrency` at a time.
//!
//! Receives [`Push`] from the SnapshotBuilder, [`Connect`] / [`Disconnect`] from
//! ConnectionActors and [`PushesDone`] from their threads' outboxes. Per connection it holds at
//! most one pending request (a new one merges into it) besides the one in flight; it sends
//! [`Push`] to the ConnectionActors.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::messages::{ConnId, Connect, Disconnect, Push, PushesDone};
use axon_metrics::Metrics;
use axon_model::push_context::PushContext;
use axon_model::push_request::PushRequest;

/// The pure queue: pending requests per connection, the in-flight set, the budget.
#[derive(Debug)]
pub struct QueueState {
    concurrency: usize,
    order: VecDeque<ConnId>,
    /// The merged request of each waiting connection, and when it was first queued.
    pending: HashMap<ConnId, (Arc<PushRequest>, Instant)>,
    /// Connections being pushed, and since when.
    in_flight: HashMap<ConnId, Instant>,
}

impl QueueState {
    pub fn new(concurrency: usize) -> QueueState {
        QueueState {
            concurrency: concurrency.max(1),
            order: VecDeque::new(),
            pending: HashMap::new(),
            in_flight: HashMap::new(),
        }
    }

    /// Queues `request` for `id`, merging with one already pending.
    pub fn enqueue(&mut self, id: ConnId, request: Arc<PushRequest>, now: Instant) {
        self.enqueue_all([id], &request, now);
    }

    /// Queues `request` for every connection of `ids`. The connections that share a pending
    /// request (all of them, after one push that could not go out yet) share the merge too:
    /// one merge per distinct pending request, not one per connection.
    pub fn enqueue_all(
        &mut self,
        ids: impl IntoIterator<Item = ConnId>,
        request: &Arc<PushRequest>,
        now: Instant,
    ) {
        // Keyed by the pending request's address; the entry holds that request, so that the
        // address cannot be reused while the map lives.
        type Merges = HashMap<*const PushRequest, (Arc<PushRequest>, Arc<PushRequest>)>;
        let mut merges: Merges = HashMap::new();
        for id in ids {
            match self.pending.get_mut(&id) {
                Some((prev, _)) => {
                    let (_, merged) = merges.entry(Arc::as_ptr(prev)).or_insert_with(|| {
                        let merged = PushRequest::clone(prev).merge(PushRequest::clone(request));
                        (prev.clone(), Arc::new(merged))
                    });
                    *prev = merged.clone();
                }
                None => {
                    self.pending.insert(id, (request.clone(), now));
                    self.order.push_back(id);
                }
            }
        }
    }

    /// The next connection to push, if the budget allows; it counts as in flight. Returns
    /// how long its request waited.
    pub fn pop_ready(&mut self, now: Instant) -> Option<(ConnId, Arc<PushRequest>, Duration)> {
        if self.in_flight.len() >= self.concurrency {
            return None;
        }
        let skipped = self.order.len();
        for _ in 0..skipped {
            let id = self.order.pop_front()?;
            if self.in_flight.contains_key(&id) {
                // Still pushing the previous request: keep its turn for later.
                self.order.push_back(id);
                continue;
            }
            if let Some((request, since)) = self.pending.remove(&id) {
                self.in_flight.insert(id, now);
                return Some((id, request, now.saturating_duration_since(since)));
            }
        }
        None
    }

    /// Gives back the slots of pushes in flight for longer than `timeout`.
    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<ConnId> {
        let expired: Vec<ConnId> = self
            .in_flight
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) > timeout)
            .map(|(id, _)| *id)
            .collect();
        for id in &expired {
            self.in_flight.remove(id);
        }
        expired
    }

    pub fn done(&mut self, id: ConnId) {
        self.in_flight.remove(&id);
    }

    pub fn remove(&mut self, id: ConnId) {
        self.in_flight.remove(&id);
        self.pending.remove(&id);
        self.order.retain(|c| *c != id);
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

pub struct PushQueue {
    state: QueueState,
    conns: HashMap<ConnId, Recipient<Push>>,
    latest: Option<Arc<PushContext>>,
    mailbox_capacity: usize,
    push_timeout: Duration,
    metrics: Metrics,
}

impl PushQueue {
    pub fn new(
        concurrency: usize,
        mailbox_capacity: usize,
        push_timeout: Duration,
        metrics: Metrics,
    ) -> PushQueue {
        PushQueue {
            state: QueueState::new(concurrency),
            conns: HashMap::new(),
            latest: None,
            mailbox_capacity,
            push_timeout,
            metrics,
        }
    }

    fn dispatch(&mut self) {
        let Some(ctx) = &self.latest else { return };
        while let Some((id, request, waited)) = self.state.pop_ready(Instant::now()) {
            self.metrics.proxy_queue_time.observe(waited.as_secs_f64());
            match self.conns.get(&id) {
                Some(conn) => {
                    let push = Push {
                        ctx: ctx.clone(),
                        request,
                    };
                    super::mailbox::tell(&self.metrics, "connection", conn, push);
                }
                None => self.state.remove(id),
            }
        }
    }
}

impl Actor for PushQueue {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        let every = (self.push_timeout / 4).max(Duration::from_millis(10));
        ctx.run_interval(every, |act, _| {
            let expired = act.state.expire(Instant::now(), act.push_timeout);
            if !expired.is_empty() {
                tracing::warn!(
                    connections = ?expired,
                    timeout = ?act.push_timeout,
                    "push not finished in time; slot given back"
                );
                act.dispatch();
            }
        });
    }
}

impl Handler<Push> for PushQueue {
    type Result = ();

    fn handle(&mut self, msg: Push, _: &mut Context<Self>) {
        let started = Instant::now();
        self.latest = Some(msg.ctx);
        let now = Instant::now();
        self.state
            .enqueue_all(self.conns.keys().copied(), &msg.request, now);
        tracing::debug!(
            connections = self.conns.len(),
            pending = self.state.pending(),
            "push queued"
        );
        self.dispatch();
        self.metrics.handled("push_queue", started);
    }
}

impl Handler<Connect> for PushQueue {
    type Result = Option<Arc<PushContext>>;

    fn handle(&mut self, msg: Connect, _: &mut Context<Self>) -> Self::Result {
        self.metrics.handled("push_queue", Instant::now());
        self.conns.insert(msg.id, msg.conn);
        self.latest.clone()
    }
}

impl Handler<Disconnect> for PushQueue {
    type Result = ();

    fn handle(&mut self, msg: Disconnect, _: &mut Context<Self>) {
        let started = Instant::now();
        self.conns.remove(&msg.id);
        self.state.remove(msg.id);
        self.dispatch();
        self.metrics.handled("push_queue", started);
    }
}

impl Handler<PushesDone> for PushQueue {
    type Result = ();

    fn handle(&mut self, msg: PushesDone, _: &mut Context<Self>) {
        let started = Instant::now();
        for id in msg.ids {
            self.state.done(id);
        }
        self.dispatch();
        self.metrics.handled("push_queue", started);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axon_config::config::{ConfigKey, ConfigKind};
    use std::collections::BTreeSet;

    fn req(name: &str) -> Arc<PushRequest> {
        Arc::new(PushRequest::config_change(
            BTreeSet::from([ConfigKey::new(ConfigKind::VirtualService, "ns", name)]),
            Instant::now(),
        ))
    }

    #[test]
    fn one_pending_per_connection_merged() {
        let t = Instant::now();
        let mut q = QueueState::new(10);
        q.enqueue(1, req("a"), t);
        q.enqueue(1, req("b"), t + Duration::from_millis(5));
        assert_eq!(q.pending(), 1);
        let (id, r, waited) = q.pop_ready(t + Duration::from_millis(7)).unwrap();
        assert_eq!((id, r.configs_updated.len()), (1, 2));
        assert_eq!(
            waited,
            Duration::from_millis(7),
            "queued since the first request"
        );
        assert!(q.pop_ready(t).is_none());
    }

    #[test]
    fn connections_sharing_a_pending_request_share_its_merge() {
        let t = Instant::now();
        let mut q = QueueState::new(1);
        let (a, b) = (req("a"), req("b"));
        q.enqueue_all(1..=3, &a, t);
        q.enqueue(4, req("c"), t);
        q.enqueue_all(1..=4, &b, t + Duration::from_millis(5));
        assert_eq!(q.pending(), 4);
        let merged: Vec<Arc<PushRequest>> = (1..=4).map(|id| q.pending[&id].0.clone()).collect();
        assert!(Arc::ptr_eq(&merged[0], &merged[1]) && Arc::ptr_eq(&merged[1], &merged[2]));
        let names = |r: &PushRequest| -> Vec<String> {
            r.configs_updated
                .iter()
                .map(|k| k.name.to_string())
                .collect()
        };
        assert_eq!(names(&merged[0]), ["a", "b"]);
        assert_eq!(names(&merged[3]), ["b", "c"], "its own merge");
        assert_eq!(q.pending[&1].1, t, "queued since the first request");
    }

    #[test]
    fn concurrency_bounds_in_flight_and_in_flight_waits() {
        let t = Instant::now();
        let mut q = QueueState::new(2);
        for id in 1..=3 {
            q.enqueue(id, req("a"), t);
        }
        assert!(q.pop_ready(t).is_some() && q.pop_ready(t).is_some());
        assert!(q.pop_ready(t).is_none(), "budget of 2");
        q.enqueue(1, req("b"), t);
        q.done(2);
        let (id, ..) = q.pop_ready(t).unwrap();
        assert_eq!(id, 3, "1 is still in flight");
        q.done(1);
        q.done(3);
        assert_eq!(q.pop_ready(t).unwrap().0, 1);
    }

    #[test]
    fn a_push_that_takes_too_long_gives_its_slot_back() {
        let t = Instant::now();
        let mut q = QueueState::new(1);
        q.enqueue(1, req("a"), t);
        q.enqueue(2, req("a"), t);
        assert_eq!(q.pop_ready(t).unwrap().0, 1);
        assert!(q.pop_ready(t).is_none());
        assert!(
            q.expire(t + Duration::from_secs(1), Duration::from_secs(5))
                .is_empty()
        );
        assert_eq!(
            q.expire(t + Duration::from_secs(6), Duration::from_secs(5)),
            [1]
        );
        assert_eq!(q.pop_ready(t + Duration::from_secs(6)).unwrap().0, 2);
    }

    struct Sink;

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<Push> for Sink {
        type Result = ();
        fn handle(&mut self, _: Push, _: &mut Context<Self>) {}
    }

    #[actix_rt::test]
    async fn the_mailbox_depth_counts_every_message_sent_and_handled() {
        use crate::actors::mailbox::{ask, tell_addr};
        let metrics = Metrics::new();
        let depth = || {
            metrics
                .mailbox_depth
                .with_label_values(&["push_queue"])
                .get()
        };
        let queue = PushQueue::new(4, 16, Duration::from_secs(5), metrics.clone()).start();
        let conn = Sink.start().recipient();
        for id in 1..=3 {
            let connect = Connect {
                id,
                conn: conn.clone(),
            };
            let current = ask(&metrics, "push_queue", &queue.clone().recipient(), connect).await;
            assert!(
                current.expect("the queue answers").is_none(),
                "no context yet"
            );
        }
        tell_addr(&metrics, "push_queue", &queue, PushesDone { ids: vec![1] });
        tell_addr(&metrics, "push_queue", &queue, Disconnect { id: 2 });
        // A round trip: every message sent before it has been handled.
        let connect = Connect { id: 4, conn };
        ask(&metrics, "push_queue", &queue.clone().recipient(), connect)
            .await
            .unwrap();
        assert_eq!(depth(), 0, "as many handled as sent, never negative");
    }
}
