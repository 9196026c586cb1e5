//! The bytes of partial requests, bounded three ways: over every stream
//! (`max_request_buffer_bytes`), over the streams of one connection
//! (`max_connection_request_buffer_bytes`), and over the streams not yet admitted
//! (`max_pending_request_buffer_bytes`, less than the first: the rest is kept for admitted
//! streams, so that streams that never identify themselves cannot take it).
//!
//! A stream holds a [`Share`] of each [`Budget`] it draws from. A share that cannot grow
//! does not end the stream: the stream stops reading (HTTP/2 flow control then holds its
//! client back) and waits for room ([`Shares::room`]), until its message's `message_timeout`
//! ends it. The bytes a waiting stream read last (one DATA frame, at most 16 KiB: axon's
//! HTTP/2 frame size) are the only ones held past a bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The bytes buffered by the streams drawing from it, and their bound.
#[derive(Clone)]
pub(crate) struct Budget {
    inner: Arc<Inner>,
}

struct Inner {
    used: AtomicUsize,
    max: usize,
    /// The limits key that sets `max`, for messages and the metric's `reason`.
    key: &'static str,
    gauge: Option<prometheus::IntGauge>,
    /// Counts the times bytes were given back, and wakes who waits for it.
    given_back: AtomicU64,
    freed: Notify,
}

impl Budget {
    pub(crate) fn new(
        key: &'static str,
        max: usize,
        gauge: Option<prometheus::IntGauge>,
    ) -> Budget {
        Budget {
            inner: Arc::new(Inner {
                used: AtomicUsize::new(0),
                max,
                key,
                gauge,
                given_back: AtomicU64::new(0),
                freed: Notify::new(),
            }),
        }
    }

    pub(crate) fn key(&self) -> &'static str {
        self.inner.key
    }

    pub(crate) fn max(&self) -> usize {
        self.inner.max
    }

    /// The bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.inner.used.load(Ordering::SeqCst)
    }

    /// A share of nothing yet.
    pub(crate) fn share(&self) -> Share {
        Share {
            budget: self.clone(),
            held: 0,
        }
    }

    /// Takes `n` more bytes if that stays within the bound.
    fn grow(&self, n: usize) -> bool {
        let inner = &*self.inner;
        let taken = inner
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                (used + n <= inner.max).then_some(used + n)
            })
            .is_ok();
        if taken {
            self.show();
        }
        taken
    }

    fn give_back(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.inner.used.fetch_sub(n, Ordering::SeqCst);
        self.show();
        self.inner.given_back.fetch_add(1, Ordering::SeqCst);
        self.inner.freed.notify_waiters();
    }

    /// Gives back `n` bytes just taken, waking nobody: nothing was freed that was held
    /// before (waking the waiters for it would have them retry, and undo theirs, forever).
    fn undo(&self, n: usize) {
        self.inner.used.fetch_sub(n, Ordering::SeqCst);
        self.show();
    }

    fn show(&self) {
        if let Some(gauge) = &self.inner.gauge {
            gauge.set(self.used() as i64);
        }
    }
}

/// What one stream holds of a [`Budget`], given back when dropped.
pub(crate) struct Share {
    budget: Budget,
    held: usize,
}

impl Share {
    /// Makes the share `to` bytes; `false` (and the share unchanged) if growing to it would
    /// pass the bound.
    pub(crate) fn resize(&mut self, to: usize) -> bool {
        if to > self.held {
            if !self.budget.grow(to - self.held) {
                return false;
            }
        } else {
            self.budget.give_back(self.held - to);
        }
        self.held = to;
        true
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.budget.give_back(self.held);
    }
}

/// The shares a stream holds: of the connection's budget, of the pending streams' budget
/// until the stream is admitted, and of the budget over every stream.
pub(crate) struct Shares {
    pub connection: Share,
    pub pending: Option<Share>,
    pub total: Share,
}

impl Shares {
    /// Makes every share `to` bytes; on failure the budget that has no room (the others are
    /// back to what they held).
    pub(crate) fn resize(&mut self, to: usize) -> Result<(), Budget> {
        if self.holds(to) {
            // Nothing to take or give back (a stream whose requests arrive whole holds 0
            // throughout): no budget is touched.
            return Ok(());
        }
        let mut resized: Vec<(&mut Share, usize)> = Vec::with_capacity(3);
        let shares = self
            .pending
            .iter_mut()
            .chain([&mut self.connection, &mut self.total]);
        for share in shares {
            let before = share.held;
            if !share.resize(to) {
                let full = share.budget.clone();
                for (done, before) in resized {
                    if done.held > before {
                        done.budget.undo(done.held - before);
                        done.held = before;
                    } else {
                        done.resize(before);
                    }
                }
                return Err(full);
            }
            resized.push((share, before));
        }
        Ok(())
    }

    /// Whether every share holds `bytes` already.
    pub(crate) fn holds(&self, bytes: usize) -> bool {
        self.connection.held == bytes
            && self.total.held == bytes
            && self.pending.as_ref().is_none_or(|p| p.held == bytes)
    }

    /// The stream is admitted: it gives back its share of the pending streams' budget.
    pub(crate) fn admitted(&mut self) {
        self.pending = None;
    }

    /// Resolves when any budget of these shares has given bytes back since this was called.
    /// Call it before a failed [`Shares::resize`] is retried, so that nothing given back in
    /// between is missed.
    pub(crate) fn room(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let seen: Vec<(Budget, u64)> = self
            .pending
            .iter()
            .chain([&self.connection, &self.total])
            .map(|s| {
                let budget = s.budget.clone();
                let count = budget.inner.given_back.load(Ordering::SeqCst);
                (budget, count)
            })
            .collect();
        async move {
            loop {
                let waits: Vec<_> = seen
                    .iter()
                    .map(|(b, _)| Box::pin(b.inner.freed.notified()))
                    .collect();
                let changed = seen
                    .iter()
                    .any(|(b, count)| b.inner.given_back.load(Ordering::SeqCst) != *count);
                if changed {
                    return;
                }
                futures::future::select_all(waits).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(max: usize) -> (Budget, prometheus::IntGauge) {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        (Budget::new("key", max, Some(gauge.clone())), gauge)
    }

    #[test]
    fn a_share_grows_within_the_bound_and_is_given_back_when_dropped() {
        let (budget, gauge) = budget(100);
        let mut a = budget.share();
        assert!(a.resize(60));
        let mut b = budget.share();
        assert!(!b.resize(50), "60 + 50 > 100");
        assert_eq!(gauge.get(), 60, "a refused share takes nothing");
        assert!(a.resize(10));
        assert!(b.resize(90));
        assert_eq!(gauge.get(), 100);
        drop(b);
        assert_eq!(gauge.get(), 10, "a dropped share is given back");
        drop(a);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn shares_name_the_full_budget_and_roll_back_the_others() {
        let (total, _) = budget(1000);
        let pending = Budget::new("pending", 100, None);
        let connection = Budget::new("connection", 500, None);
        let mut s = Shares {
            connection: connection.share(),
            pending: Some(pending.share()),
            total: total.share(),
        };
        assert!(s.resize(80).is_ok());
        let full = s.resize(200).unwrap_err();
        assert_eq!(full.key(), "pending");
        assert_eq!(
            (pending.used(), connection.used(), total.used()),
            (80, 80, 80),
            "unchanged on failure"
        );
        s.admitted();
        assert_eq!(
            pending.used(),
            0,
            "admitted: the pending share is given back"
        );
        assert!(
            s.resize(200).is_ok(),
            "no longer bound by the pending budget"
        );
        let full = s.resize(600).unwrap_err();
        assert_eq!(full.key(), "connection");
        assert_eq!((connection.used(), total.used()), (200, 200));
        drop(s);
        assert_eq!((connection.used(), total.used()), (0, 0));
    }

    #[test]
    fn a_resize_to_what_is_held_succeeds_even_on_a_full_budget() {
        let (total, gauge) = budget(100);
        let mut other = total.share();
        assert!(other.resize(100));
        let connection = Budget::new("connection", 100, None);
        let mut s = Shares {
            connection: connection.share(),
            pending: None,
            total: total.share(),
        };
        assert!(s.holds(0));
        assert!(s.resize(0).is_ok(), "holding nothing needs no room");
        assert!(s.resize(1).is_err());
        assert!(
            s.holds(0),
            "a refused resize leaves the shares as they were"
        );
        assert_eq!(gauge.get(), 100);
    }

    #[tokio::test]
    async fn room_resolves_when_bytes_are_given_back() {
        let (total, _) = budget(100);
        let connection = Budget::new("connection", 100, None);
        let mut other = total.share();
        assert!(other.resize(100));
        let mut s = Shares {
            connection: connection.share(),
            pending: None,
            total: total.share(),
        };
        let room = s.room();
        assert!(s.resize(10).is_err());
        drop(other);
        tokio::time::timeout(std::time::Duration::from_secs(5), room)
            .await
            .expect("woken by the bytes given back");
        assert!(s.resize(10).is_ok());
    }
}
