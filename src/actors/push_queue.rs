//! The PushQueue: fans a push out to every connection, at most `push_concurrency` at a time.
//!
//! Receives [`Push`] from the SnapshotBuilder, [`Connect`] / [`Disconnect`] / [`PushDone`] from
//! ConnectionActors. Per connection it holds at most one pending request (a new one merges
//! into it) besides the one in flight; it sends [`Push`] to the ConnectionActors.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use actix::prelude::*;

use crate::model::push_context::PushContext;
use crate::model::push_request::PushRequest;

pub type ConnId = u64;

/// A built context and the request it answers; also what a connection receives.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct Push {
    pub ctx: Arc<PushContext>,
    pub request: PushRequest,
}

/// A connection with a known proxy joins; answered with the current context, if any.
#[derive(Message)]
#[rtype(result = "Option<Arc<PushContext>>")]
pub struct Connect {
    pub id: ConnId,
    pub conn: Recipient<Push>,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Disconnect {
    pub id: ConnId,
}

/// A connection finished the push it was given.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PushDone {
    pub id: ConnId,
}

/// The pure queue: pending requests per connection, the in-flight set, the budget.
#[derive(Debug)]
pub struct QueueState {
    concurrency: usize,
    order: VecDeque<ConnId>,
    pending: HashMap<ConnId, PushRequest>,
    in_flight: HashSet<ConnId>,
}

impl QueueState {
    pub fn new(concurrency: usize) -> QueueState {
        QueueState {
            concurrency: concurrency.max(1),
            order: VecDeque::new(),
            pending: HashMap::new(),
            in_flight: HashSet::new(),
        }
    }

    /// Queues `request` for `id`, merging with one already pending.
    pub fn enqueue(&mut self, id: ConnId, request: PushRequest) {
        match self.pending.remove(&id) {
            Some(prev) => {
                self.pending.insert(id, prev.merge(request));
            }
            None => {
                self.pending.insert(id, request);
                self.order.push_back(id);
            }
        }
    }

    /// The next connection to push, if the budget allows; it counts as in flight.
    pub fn pop_ready(&mut self) -> Option<(ConnId, PushRequest)> {
        if self.in_flight.len() >= self.concurrency {
            return None;
        }
        let skipped = self.order.len();
        for _ in 0..skipped {
            let id = self.order.pop_front()?;
            if self.in_flight.contains(&id) {
                // Still pushing the previous request: keep its turn for later.
                self.order.push_back(id);
                continue;
            }
            if let Some(request) = self.pending.remove(&id) {
                self.in_flight.insert(id);
                return Some((id, request));
            }
        }
        None
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
}

impl PushQueue {
    pub fn new(concurrency: usize, mailbox_capacity: usize) -> PushQueue {
        PushQueue {
            state: QueueState::new(concurrency),
            conns: HashMap::new(),
            latest: None,
            mailbox_capacity,
        }
    }

    fn dispatch(&mut self) {
        let Some(ctx) = &self.latest else { return };
        while let Some((id, request)) = self.state.pop_ready() {
            match self.conns.get(&id) {
                Some(conn) => conn.do_send(Push {
                    ctx: ctx.clone(),
                    request,
                }),
                None => self.state.remove(id),
            }
        }
    }
}

impl Actor for PushQueue {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
    }
}

impl Handler<Push> for PushQueue {
    type Result = ();

    fn handle(&mut self, msg: Push, _: &mut Context<Self>) {
        self.latest = Some(msg.ctx);
        for id in self.conns.keys() {
            self.state.enqueue(*id, msg.request.clone());
        }
        tracing::debug!(
            connections = self.conns.len(),
            pending = self.state.pending(),
            "push queued"
        );
        self.dispatch();
    }
}

impl Handler<Connect> for PushQueue {
    type Result = Option<Arc<PushContext>>;

    fn handle(&mut self, msg: Connect, _: &mut Context<Self>) -> Self::Result {
        self.conns.insert(msg.id, msg.conn);
        self.latest.clone()
    }
}

impl Handler<Disconnect> for PushQueue {
    type Result = ();

    fn handle(&mut self, msg: Disconnect, _: &mut Context<Self>) {
        self.conns.remove(&msg.id);
        self.state.remove(msg.id);
        self.dispatch();
    }
}

impl Handler<PushDone> for PushQueue {
    type Result = ();

    fn handle(&mut self, msg: PushDone, _: &mut Context<Self>) {
        self.state.done(msg.id);
        self.dispatch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::{ConfigKey, ConfigKind};
    use std::collections::BTreeSet;
    use std::time::Instant;

    fn req(name: &str) -> PushRequest {
        PushRequest::config_change(
            BTreeSet::from([ConfigKey::new(ConfigKind::VirtualService, "ns", name)]),
            Instant::now(),
        )
    }

    #[test]
    fn one_pending_per_connection_merged() {
        let mut q = QueueState::new(10);
        q.enqueue(1, req("a"));
        q.enqueue(1, req("b"));
        assert_eq!(q.pending(), 1);
        let (id, r) = q.pop_ready().unwrap();
        assert_eq!((id, r.configs_updated.len()), (1, 2));
        assert!(q.pop_ready().is_none());
    }

    #[test]
    fn concurrency_bounds_in_flight_and_in_flight_waits() {
        let mut q = QueueState::new(2);
        for id in 1..=3 {
            q.enqueue(id, req("a"));
        }
        assert!(q.pop_ready().is_some() && q.pop_ready().is_some());
        assert!(q.pop_ready().is_none(), "budget of 2");
        q.enqueue(1, req("b"));
        q.done(2);
        let (id, _) = q.pop_ready().unwrap();
        assert_eq!(id, 3, "1 is still in flight");
        q.done(1);
        q.done(3);
        assert_eq!(q.pop_ready().unwrap().0, 1);
    }
}
