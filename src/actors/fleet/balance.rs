//! The rebalance decision, as plain state: given this replica's stream count, the counts of
//! the peers that answered, `rebalance_slack`, `rebalance_rate` and the clock, how many
//! connections to close now.
//!
//! A replica holding more than `ceil(total / replicas × (1 + slack))` streams starts closing
//! its oldest connections and keeps on until it holds the even share `ceil(total /
//! replicas)` (so it stops inside the slack, not at its edge), never more than `rate` in any
//! second. Without peers (none configured, none answering) it never closes anything: a
//! replica alone holds every stream.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// `ceil(total / replicas)`: the even share.
pub fn even_share(total: usize, replicas: usize) -> usize {
    total.div_ceil(replicas.max(1))
}

/// `ceil(total / replicas × (1 + slack))`: above it a replica sheds.
pub fn upper_bound(total: usize, replicas: usize, slack: f64) -> usize {
    let exact = total as f64 / replicas.max(1) as f64 * (1.0 + slack);
    // 300 / 3 × 1.1 is 110.00000000000001 in floating point: not 111.
    ((exact - 1e-9).ceil().max(0.0) as usize).max(even_share(total, replicas))
}

#[derive(Debug)]
pub struct Balancer {
    slack: f64,
    rate: u32,
    /// When each connection of the last second was closed (at most `rate`).
    closed: VecDeque<Instant>,
    /// Above the bound once, and not yet back at the even share.
    shedding: bool,
}

impl Balancer {
    pub fn new(slack: f64, rate: u32) -> Balancer {
        Balancer {
            slack,
            rate,
            closed: VecDeque::with_capacity(rate.min(1024) as usize),
            shedding: false,
        }
    }

    /// How many connections to close now, holding `own` streams while the answering peers
    /// hold `peers`; the closes are counted against the rate from `now`.
    pub fn decide(&mut self, now: Instant, own: usize, peers: &[usize]) -> usize {
        while self
            .closed
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= Duration::from_secs(1))
        {
            self.closed.pop_front();
        }
        if peers.is_empty() || self.rate == 0 {
            self.shedding = false;
            return 0;
        }
        let replicas = peers.len() + 1;
        let total = own + peers.iter().sum::<usize>();
        let share = even_share(total, replicas);
        if own > upper_bound(total, replicas, self.slack) {
            self.shedding = true;
        }
        if !self.shedding || own <= share {
            self.shedding = false;
            return 0;
        }
        let room = (self.rate as usize).saturating_sub(self.closed.len());
        let close = (own - share).min(room);
        self.closed.extend(std::iter::repeat_n(now, close));
        close
    }

    /// Whether the last decision found this replica above its share and shedding.
    pub fn shedding(&self) -> bool {
        self.shedding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_the_ceilings_of_the_share() {
        assert_eq!(even_share(300, 3), 100);
        assert_eq!(even_share(301, 3), 101);
        assert_eq!(upper_bound(300, 3, 0.1), 110);
        assert_eq!(upper_bound(301, 3, 0.1), 111, "ceil(110.37)");
        assert_eq!(upper_bound(10, 3, 0.0), 4);
        assert_eq!(upper_bound(0, 3, 0.1), 0);
        assert_eq!(even_share(5, 0), 5, "no replicas is one");
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_over_the_slack_sheds_to_the_even_share_at_the_rate() {
        let mut b = Balancer::new(0.1, 20);
        let t0 = Instant::now();
        // After a restart: 150, 150 and the new replica's 0.
        assert_eq!(
            b.decide(t0, 150, &[150, 0]),
            20,
            "the rate caps the first second"
        );
        assert_eq!(
            b.decide(t0 + Duration::from_millis(500), 130, &[130, 40]),
            0,
            "no more within the same second"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let t1 = Instant::now();
        assert_eq!(b.decide(t1, 130, &[130, 40]), 20);
        tokio::time::advance(Duration::from_secs(1)).await;
        // 108 is inside the slack (110) but not yet at the share (100): it goes on.
        assert_eq!(b.decide(Instant::now(), 108, &[100, 92]), 8);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(b.decide(Instant::now(), 100, &[100, 100]), 0);
        assert!(!b.shedding());
        // Back inside the slack, a replica above the share by less than the slack stays.
        assert_eq!(b.decide(Instant::now(), 108, &[96, 96]), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn alone_or_at_rate_zero_nothing_is_closed() {
        let mut b = Balancer::new(0.1, 20);
        assert_eq!(b.decide(Instant::now(), 300, &[]), 0, "no peer answered");
        let mut off = Balancer::new(0.1, 0);
        assert_eq!(off.decide(Instant::now(), 300, &[0, 0]), 0);
        let mut tight = Balancer::new(0.0, 1000);
        assert_eq!(
            tight.decide(Instant::now(), 102, &[99, 99]),
            2,
            "slack 0: down to 100"
        );
    }
}
