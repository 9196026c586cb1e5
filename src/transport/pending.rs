//! The streams opened but not yet admitted (no first request read yet), over every
//! connection: at most `max_pending_streams`. A new stream past the bound makes room by
//! closing the oldest pending one, if that one has waited at least `pending_stream_grace`;
//! else the new stream is refused. A real proxy sends its first request as soon as its
//! stream is open, so the oldest pending streams are the ones that never speak: a new
//! stream is not refused for streams that stay silent (that would lock real proxies out
//! while they stay open), and a client that reopens whatever is closed recycles each place
//! at most once per grace (without it, every new stream closing another, reopened at once,
//! is a loop as fast as the CPU allows).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::Instant;

/// The pending streams, oldest first.
pub struct Pending {
    max: usize,
    grace: std::time::Duration,
    state: Mutex<State>,
    gauge: prometheus::IntGauge,
}

#[derive(Default)]
struct State {
    next: u64,
    /// By arrival; each with when it came and what tells it to close.
    waiting: BTreeMap<u64, (Instant, oneshot::Sender<()>)>,
}

/// A stream's place among the pending ones, left when dropped.
pub struct Place {
    id: u64,
    pending: Arc<Pending>,
}

impl Pending {
    pub fn new(
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

    pub fn max(&self) -> usize {
        self.max
    }

    pub fn grace(&self) -> std::time::Duration {
        self.grace
    }

    /// Enters a new stream; the receiver resolves if the stream is later made to close for a
    /// newer one. `Ok` with how many older streams were told to close for it (0 or 1);
    /// `Err` if the bound is reached and every pending stream is younger than the grace.
    pub fn enter(self: &Arc<Self>) -> Result<(Place, oneshot::Receiver<()>, usize), Full> {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut evicted = 0;
        while state.waiting.len() >= self.max {
            let oldest = state.waiting.first_key_value().map(|(_, (at, _))| *at);
            match oldest {
                Some(at) if now.duration_since(at) >= self.grace => {
                    if let Some((_, (_, tx))) = state.waiting.pop_first() {
                        let _ = tx.send(());
                        evicted += 1;
                    }
                }
                _ => return Err(Full),
            }
        }
        let (tx, rx) = oneshot::channel();
        let id = state.next;
        state.next += 1;
        state.waiting.insert(id, (now, tx));
        self.gauge.set(state.waiting.len() as i64);
        let place = Place {
            id,
            pending: self.clone(),
        };
        Ok((place, rx, evicted))
    }
}

/// Every pending stream is younger than the grace: the new one is refused.
#[derive(Debug)]
pub struct Full;

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

    const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn past_the_bound_the_oldest_pending_stream_is_told_to_close() {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        let pending = Pending::new(2, GRACE, gauge.clone());
        let (a, mut a_closed, n) = pending.enter().unwrap();
        assert_eq!(n, 0);
        let (_b, mut b_closed, _) = pending.enter().unwrap();
        assert_eq!(gauge.get(), 2);
        assert!(
            pending.enter().is_err(),
            "both younger than the grace: refused"
        );
        tokio::time::advance(GRACE).await;
        let (_c, mut c_closed, n) = pending.enter().unwrap();
        assert_eq!(n, 1, "one made room");
        assert!(a_closed.try_recv().is_ok(), "the oldest is told to close");
        assert!(b_closed.try_recv().is_err());
        assert!(c_closed.try_recv().is_err());
        assert_eq!(gauge.get(), 2);
        drop(a);
        assert_eq!(gauge.get(), 2, "an evicted place is gone already");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_admitted_leaves_its_place() {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        let pending = Pending::new(1, GRACE, gauge.clone());
        let (a, _, _) = pending.enter().unwrap();
        drop(a);
        assert_eq!(gauge.get(), 0);
        let (_b, mut b_closed, n) = pending.enter().unwrap();
        assert_eq!(n, 0, "nothing to evict");
        assert!(b_closed.try_recv().is_err());
    }
}
