//! The streams opened but not yet admitted (no first request read yet), over every
//! connection: at most `max_pending_streams`. A new stream past the bound makes room by
//! closing the oldest pending one. A real proxy sends its first request as soon as its
//! stream is open, so the oldest pending streams are the ones that never speak; a new stream
//! is never refused for them (that would lock real proxies out while they stay open).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The pending streams, oldest first.
pub struct Pending {
    max: usize,
    state: Mutex<State>,
    gauge: prometheus::IntGauge,
}

#[derive(Default)]
struct State {
    next: u64,
    /// By arrival; each with what tells it to close.
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
}

/// A stream's place among the pending ones, left when dropped.
pub struct Place {
    id: u64,
    pending: Arc<Pending>,
}

impl Pending {
    pub fn new(max: usize, gauge: prometheus::IntGauge) -> Arc<Pending> {
        Arc::new(Pending {
            max: max.max(1),
            state: Mutex::default(),
            gauge,
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Enters a new stream; the receiver resolves if the stream is later made to close for a
    /// newer one. Returns how many older streams were told to close for it (0 or 1).
    pub fn enter(self: &Arc<Self>) -> (Place, oneshot::Receiver<()>, usize) {
        let (tx, rx) = oneshot::channel();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut evicted = 0;
        while state.waiting.len() >= self.max {
            if let Some((_, oldest)) = state.waiting.pop_first() {
                let _ = oldest.send(());
                evicted += 1;
            }
        }
        let id = state.next;
        state.next += 1;
        state.waiting.insert(id, tx);
        self.gauge.set(state.waiting.len() as i64);
        let place = Place {
            id,
            pending: self.clone(),
        };
        (place, rx, evicted)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut state = self.pending.state.lock().unwrap_or_else(|e| e.into_inner());
        state.waiting.remove(&self.id);
        self.pending.gauge.set(state.waiting.len() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_the_oldest_pending_stream_is_told_to_close() {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        let pending = Pending::new(2, gauge.clone());
        let (a, mut a_closed, n) = pending.enter();
        assert_eq!(n, 0);
        let (_b, mut b_closed, _) = pending.enter();
        assert_eq!(gauge.get(), 2);
        let (_c, mut c_closed, n) = pending.enter();
        assert_eq!(n, 1, "one made room");
        assert!(a_closed.try_recv().is_ok(), "the oldest is told to close");
        assert!(b_closed.try_recv().is_err());
        assert!(c_closed.try_recv().is_err());
        assert_eq!(gauge.get(), 2);
        drop(a);
        assert_eq!(gauge.get(), 2, "an evicted place is gone already");
    }

    #[test]
    fn a_stream_admitted_leaves_its_place() {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        let pending = Pending::new(1, gauge.clone());
        let (a, _, _) = pending.enter();
        drop(a);
        assert_eq!(gauge.get(), 0);
        let (_b, mut b_closed, n) = pending.enter();
        assert_eq!(n, 0, "nothing to evict");
        assert!(b_closed.try_recv().is_err());
    }
}
