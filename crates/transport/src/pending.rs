//! The streams opened but not yet admitted (no first request read yet), over every
//! connection: `max_pending_streams`. A real proxy sends its first request as soon as its
//! stream is open and opens one stream per connection, so past the bound axon makes room
//! from the streams that look least like one:
//!
//! - the connection holding the most waiting streams, if it holds two or more, is closed
//!   (GOAWAY, its streams ended): closing a single stream would have a client that reopens
//!   whatever is closed loop as fast as the CPU allows, while reopening a connection costs
//!   it a handshake;
//! - else (every connection holds one) the oldest waiting stream is closed, if it has
//!   waited `pending_stream_grace` (each place is then recycled at most once per grace);
//! - else the new stream waits with the others: nothing is refused, so real proxies are
//!   never locked out (the waiting streams stay bounded by `max_connections`, one each).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// The pending streams, oldest first, and the connections they are on.
pub(crate) struct Pending {
    max: usize,
    grace: std::time::Duration,
    state: Mutex<State>,
    gauge: prometheus::IntGauge,
}

#[derive(Default)]
struct State {
    next: u64,
    /// By arrival.
    waiting: BTreeMap<u64, Entry>,
    connections: HashMap<u64, Conn>,
}

struct Entry {
    at: Instant,
    connection: u64,
    /// Tells the stream to close.
    close: oneshot::Sender<()>,
}

struct Conn {
    waiting: usize,
    /// Tells the connection to close.
    close: Arc<Notify>,
    closing: bool,
}

/// How room was made for a new stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MadeRoom {
    /// Below the bound, or nothing could be closed.
    Nothing,
    /// The connection holding the most waiting streams (this many) was told to close.
    Connection(usize),
    /// The oldest waiting stream was told to close.
    Stream,
}

/// A stream's place among the pending ones, left when dropped.
pub(crate) struct Place {
    id: u64,
    pending: Arc<Pending>,
}

impl Pending {
    pub(crate) fn new(
        max: usize,
        grace: std::time::Duration,
        gauge: prometheus::IntGauge,
    ) -> Arc<Pending> {
        Arc::new(Pending {
            max: max.max(1),
            grace,
            state: Mutex::default(),
            gauge,
        })
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Enters a new stream of `connection` (whose `close` closes it); the receiver resolves
    /// if the stream is later made to close for a newer one.
    pub(crate) fn enter(
        self: &Arc<Self>,
        connection: u64,
        close: &Arc<Notify>,
    ) -> (Place, oneshot::Receiver<()>, MadeRoom) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let made = if state.waiting.len() >= self.max {
            state.make_room(now, self.grace)
        } else {
            MadeRoom::Nothing
        };
        let (tx, rx) = oneshot::channel();
        let id = state.next;
        state.next += 1;
        state.waiting.insert(
            id,
            Entry {
                at: now,
                connection,
                close: tx,
            },
        );
        state
            .connections
            .entry(connection)
            .or_insert_with(|| Conn {
                waiting: 0,
                close: close.clone(),
                closing: false,
            })
            .waiting += 1;
        self.gauge.set(state.waiting.len() as i64);
        let place = Place {
            id,
            pending: self.clone(),
        };
        (place, rx, made)
    }
}

impl State {
    fn make_room(&mut self, now: Instant, grace: std::time::Duration) -> MadeRoom {
        let most = self
            .connections
            .values_mut()
            .filter(|c| !c.closing)
            .max_by_key(|c| c.waiting);
        if let Some(conn) = most.filter(|c| c.waiting >= 2) {
            conn.closing = true;
            conn.close.notify_one();
            return MadeRoom::Connection(conn.waiting);
        }
        let oldest = self.waiting.first_key_value().map(|(id, e)| (*id, e.at));
        match oldest {
            Some((id, at)) if now.duration_since(at) >= grace => {
                if let Some(entry) = self.leave(id) {
                    let _ = entry.close.send(());
                }
                MadeRoom::Stream
            }
            _ => MadeRoom::Nothing,
        }
    }

    fn leave(&mut self, id: u64) -> Option<Entry> {
        let entry = self.waiting.remove(&id)?;
        if let Some(conn) = self.connections.get_mut(&entry.connection) {
            conn.waiting -= 1;
            if conn.waiting == 0 {
                self.connections.remove(&entry.connection);
            }
        }
        Some(entry)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut state = self.pending.state.lock().unwrap_or_else(|e| e.into_inner());
        state.leave(self.id);
        self.pending.gauge.set(state.waiting.len() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

    fn pending(max: usize) -> (Arc<Pending>, prometheus::IntGauge) {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        (Pending::new(max, GRACE, gauge.clone()), gauge)
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_bound_the_connection_holding_the_most_is_closed() {
        let (pending, gauge) = pending(3);
        let (a_close, b_close) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let _a1 = pending.enter(1, &a_close);
        let _a2 = pending.enter(1, &a_close);
        let _b1 = pending.enter(2, &b_close);
        let (_b2, _, made) = pending.enter(2, &b_close);
        assert_eq!(made, MadeRoom::Connection(2), "A holds 2 (B 1 then)");
        tokio::time::timeout(GRACE, a_close.notified())
            .await
            .expect("A told to close");
        assert_eq!(gauge.get(), 4, "over the bound until A's streams end");
        let (_c1, _, made) = pending.enter(3, &Arc::new(Notify::new()));
        assert_eq!(made, MadeRoom::Connection(2), "then B, A already closing");
    }

    #[tokio::test(start_paused = true)]
    async fn with_one_stream_per_connection_the_oldest_past_the_grace_is_closed() {
        let (pending, gauge) = pending(2);
        let close = || Arc::new(Notify::new());
        let (_a, mut a_closed, _) = pending.enter(1, &close());
        let (_b, mut b_closed, _) = pending.enter(2, &close());
        let (_c, _, made) = pending.enter(3, &close());
        assert_eq!(
            made,
            MadeRoom::Nothing,
            "all younger than the grace: nothing refused"
        );
        assert_eq!(gauge.get(), 3);
        tokio::time::advance(GRACE).await;
        let (_d, _, made) = pending.enter(4, &close());
        assert_eq!(made, MadeRoom::Stream);
        assert!(a_closed.try_recv().is_ok(), "the oldest is told to close");
        assert!(b_closed.try_recv().is_err());
        assert_eq!(gauge.get(), 3);
    }

    #[test]
    fn a_stream_admitted_leaves_its_place() {
        let (pending, gauge) = pending(1);
        let close = Arc::new(Notify::new());
        let (a, _, _) = pending.enter(1, &close);
        drop(a);
        assert_eq!(gauge.get(), 0);
        let (_b, _, made) = pending.enter(1, &close);
        assert_eq!(made, MadeRoom::Nothing);
        let state = pending.state.lock().unwrap();
        assert_eq!(state.connections[&1].waiting, 1);
    }
}
