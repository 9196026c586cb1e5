//! Stream admission: a token bucket of `max_requests_per_second` new streams, and a budget
//! of `max_streams` slots, each given back when its [`StreamSlot`] is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A slot in the stream budget, given back when dropped (when the stream's owner ends).
pub struct StreamSlot(Arc<AtomicUsize>);

impl StreamSlot {
    /// Takes a slot of `budget` (the streams open now) if fewer than `max` are taken.
    pub fn take(budget: &Arc<AtomicUsize>, max: usize) -> Option<StreamSlot> {
        let prev = budget.fetch_add(1, Ordering::AcqRel);
        let slot = StreamSlot(budget.clone());
        (prev < max).then_some(slot)
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

pub struct TokenBucket {
    rate: u32,
    state: tokio::sync::Mutex<(f64, tokio::time::Instant)>,
}

impl TokenBucket {
    pub fn new(rate: u32) -> TokenBucket {
        TokenBucket {
            rate: rate.max(1),
            state: tokio::sync::Mutex::new((f64::from(rate.max(1)), tokio::time::Instant::now())),
        }
    }

    /// Takes a token, waiting at most `max_wait` for one.
    pub async fn acquire(&self, max_wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            let wait = {
                let mut state = self.state.lock().await;
                let now = tokio::time::Instant::now();
                let rate = f64::from(self.rate);
                let (tokens, last) = *state;
                let tokens = (tokens + now.duration_since(last).as_secs_f64() * rate).min(rate);
                if tokens >= 1.0 {
                    *state = (tokens - 1.0, now);
                    return true;
                }
                *state = (tokens, now);
                Duration::from_secs_f64((1.0 - tokens) / rate)
            };
            if tokio::time::Instant::now() + wait > deadline {
                return false;
            }
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_token_bucket_admits_its_rate_and_waits_bounded() {
        let bucket = TokenBucket::new(10);
        for _ in 0..10 {
            assert!(bucket.acquire(Duration::ZERO).await, "a burst of 10");
        }
        assert!(
            !bucket.acquire(Duration::from_millis(50)).await,
            "no token within 50 ms"
        );
        assert!(
            bucket.acquire(Duration::from_millis(200)).await,
            "one token per 100 ms"
        );
    }

    #[test]
    fn a_slot_is_given_back_when_dropped() {
        let budget = Arc::new(AtomicUsize::new(0));
        let a = StreamSlot::take(&budget, 1).expect("one free slot");
        assert!(StreamSlot::take(&budget, 1).is_none(), "budget of 1");
        drop(a);
        assert!(StreamSlot::take(&budget, 1).is_some());
        assert_eq!(budget.load(Ordering::Acquire), 0);
    }
}
