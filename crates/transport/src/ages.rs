//! The open xDS connections in the order they were accepted, so that a rebalance closes the
//! oldest first (`AdsService::close_oldest`).
//!
//! Each connection enters when it is accepted ([`Ages::enter`]) and leaves when it ends (its
//! [`Aged`] guard drops). Closing one only tells it to: the connection closes itself as at
//! `max_connection_age` (GOAWAY, its streams ended with UNAVAILABLE, dropped `close_grace`
//! later), the same path as the drain. A connection with no open stream is not chosen (closing
//! it would move no proxy), and one told once is not told again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};

/// One open connection: what tells it to close, and how many streams it holds.
struct Entry {
    close: Arc<Notify>,
    open: watch::Receiver<usize>,
}

/// The open connections by accept order (the ids are increasing).
#[derive(Default)]
pub(crate) struct Ages {
    open: Mutex<BTreeMap<u64, Entry>>,
}

/// Held by a connection for its life; leaving drops its entry.
pub(crate) struct Aged {
    ages: Arc<Ages>,
    id: u64,
}

impl Drop for Aged {
    fn drop(&mut self) {
        self.ages.lock().remove(&self.id);
    }
}

impl Ages {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        // A panic while holding the map leaves it whole (every change is one call).
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters connection `id`; `close` tells it to close, `open` counts its streams.
    pub(crate) fn enter(
        self: &Arc<Self>,
        id: u64,
        close: Arc<Notify>,
        open: watch::Receiver<usize>,
    ) -> Aged {
        self.lock().insert(id, Entry { close, open });
        Aged {
            ages: self.clone(),
            id,
        }
    }

    /// Tells the `n` oldest connections that hold a stream to close; returns how many were
    /// told (fewer when fewer hold one). Each is told once: it leaves the order at once.
    pub(crate) fn close_oldest(&self, n: usize) -> usize {
        let mut open = self.lock();
        let chosen: Vec<u64> = open
            .iter()
            .filter(|(_, e)| *e.open.borrow() > 0)
            .map(|(id, _)| *id)
            .take(n)
            .collect();
        for id in &chosen {
            if let Some(entry) = open.remove(id) {
                entry.close.notify_one();
            }
        }
        chosen.len()
    }

    /// Open connections.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_connections_with_a_stream_are_closed_first_and_once() {
        let ages = Arc::new(Ages::default());
        let conns: Vec<_> = (0..4)
            .map(|id| {
                let close = Arc::new(Notify::new());
                let (tx, rx) = watch::channel(usize::from(id != 1));
                let aged = ages.enter(id, close.clone(), rx);
                (close, tx, aged)
            })
            .collect();
        assert_eq!(ages.close_oldest(2), 2);
        let told = |i: usize| {
            let close = conns[i].0.clone();
            async move {
                tokio::time::timeout(std::time::Duration::from_millis(10), close.notified())
                    .await
                    .is_ok()
            }
        };
        assert!(told(0).await, "the oldest");
        assert!(!told(1).await, "no stream: skipped");
        assert!(told(2).await);
        assert!(!told(3).await);
        assert_eq!(
            ages.close_oldest(5),
            1,
            "0 and 2 are not told again; 1 has no stream"
        );
        assert!(told(3).await);
        drop(conns);
        assert_eq!(ages.len(), 0);
    }
}
