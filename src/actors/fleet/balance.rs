//! The rebalance decision, as plain state: given this replica's stream count, the counts of
//! the peers that answered, `rebalance_slack`, `rebalance_rate` and the clock, how many
//! connections to close now.
//!
//! A replica holding more than `ceil(total / replicas × (1 + slack))` streams starts closing
//! its oldest connections and keeps on until it holds the even share `ceil(total /
//! replicas)` (so it stops inside the slack, not at its edge), never more than `rate` in any
//! second. Without peers (none configured, none answering) it never closes anything: a
//! replica alone holds every stream.
//!
//! It closes only while the fleet's total has settled: it moved by no more than the slack of
//! the even share over the last `rebalance_settle`. While proxies connect (a
//! ramp, a rollout, a fleet coming back) the counts a replica sees are of different moments
//! and an imbalance seen then is not one: closing then only moves proxies that the end of
//! the ramp would have left where they were.

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

/// A bound on the samples kept, whatever the ratio of `settle` to the poll interval.
const MAX_SAMPLES: usize = 1024;

#[derive(Debug)]
pub struct Balancer {
    slack: f64,
    rate: u32,
    /// When each connection of the last second was closed (at most `rate`).
    closed: VecDeque<Instant>,
    /// Above the bound once, and not yet back at the even share.
    shedding: bool,
    settle: Duration,
    /// The fleet's total at each decision of the last `settle` (and the one before it).
    totals: VecDeque<(Instant, usize)>,
}

impl Balancer {
    pub fn new(slack: f64, rate: u32, settle: Duration) -> Balancer {
        Balancer {
            slack,
            rate,
            closed: VecDeque::with_capacity(rate.min(1024) as usize),
            shedding: false,
            settle,
            totals: VecDeque::new(),
        }
    }

    /// Records `total` and says whether it moved by no more than the slack of the even
    /// share over the whole of the last `settle`.
    fn settled(&mut self, now: Instant, total: usize, share: usize) -> bool {
        self.totals.push_back((now, total));
        // Keep the newest sample at least `settle` old, and those after it.
        while self.totals.len() > MAX_SAMPLES
            || self
                .totals
                .get(1)
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= self.settle)
        {
            self.totals.pop_front();
        }
        let covered = self
            .totals
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= self.settle);
        let (low, high) = self
            .totals
            .iter()
            .fold((usize::MAX, 0), |(l, h), (_, t)| (l.min(*t), h.max(*t)));
        let tolerance = ((share as f64 * self.slack).ceil() as usize).max(1);
        covered && high - low <= tolerance
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
            self.totals.clear();
            return 0;
        }
        let replicas = peers.len() + 1;
        let total = own + peers.iter().sum::<usize>();
        let share = even_share(total, replicas);
        if !self.settled(now, total, share) {
            // Neither starts nor goes on: the proxies this replica closed are still coming
            // back (a dip of the total), or others are connecting.
            return 0;
        }
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
        let mut b = Balancer::new(0.1, 20, Duration::ZERO);
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
        let mut b = Balancer::new(0.1, 20, Duration::ZERO);
        assert_eq!(b.decide(Instant::now(), 300, &[]), 0, "no peer answered");
        let mut off = Balancer::new(0.1, 0, Duration::ZERO);
        assert_eq!(off.decide(Instant::now(), 300, &[0, 0]), 0);
        let mut tight = Balancer::new(0.0, 1000, Duration::ZERO);
        assert_eq!(
            tight.decide(Instant::now(), 102, &[99, 99]),
            2,
            "slack 0: down to 100"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_closed_while_the_fleets_total_moves() {
        let tick = Duration::from_millis(200);
        let mut b = Balancer::new(0.1, 50, Duration::from_secs(1));
        // A ramp: this replica's count is fresh, the peers' a poll old, so it looks ahead.
        for (own, a, c) in [(30, 10, 12), (70, 40, 45), (100, 80, 85), (101, 100, 98)] {
            assert_eq!(b.decide(Instant::now(), own, &[a, c]), 0, "ramping: {own}");
            tokio::time::advance(tick).await;
        }
        // The ramp ended within the slack: nothing to do, however long it stays.
        for _ in 0..10 {
            assert_eq!(b.decide(Instant::now(), 101, &[100, 101]), 0);
            tokio::time::advance(tick).await;
        }
        // A real imbalance at a steady total (a replica came back empty) is acted on once
        // the total has held for `settle`, and the shedding then goes on while the moved
        // proxies come and go.
        let mut b = Balancer::new(0.1, 50, Duration::from_secs(1));
        assert_eq!(
            b.decide(Instant::now(), 151, &[151, 0]),
            0,
            "not yet settled"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(b.decide(Instant::now(), 151, &[151, 0]), 50);
        tokio::time::advance(Duration::from_secs(1)).await;
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(
            b.decide(Instant::now(), 101, &[120, 40]),
            0,
            "the closed proxies are coming back: the total dipped"
        );
        assert!(b.shedding(), "paused, not done");
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(
            b.decide(Instant::now(), 121, &[131, 50]),
            0,
            "back, not yet held"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            b.decide(Instant::now(), 121, &[131, 50]),
            20,
            "on to the share"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn samples_are_bounded() {
        let mut b = Balancer::new(0.1, 50, Duration::from_secs(3600));
        for _ in 0..5000 {
            b.decide(Instant::now(), 10, &[10]);
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        assert!(b.totals.len() <= MAX_SAMPLES);
    }
}
