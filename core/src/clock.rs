//! Per-node clocks on top of madsim's single global clock.
//!
//! madsim has one clock for the whole simulation; real machines do not. Each node here owns a
//! [`NodeClock`] that maps true (global) time to the node's readings:
//! `local = base + rate × (true − base_true)`, rebased at every change so that a change of rate
//! never moves the clock, and a jump moves only the wall clock.

use std::time::Duration;

/// The node's wall clock reads this (2024-01-01T00:00:00Z) at true time 0, so that a backward
/// jump never takes it below the epoch.
pub const WALL_ORIGIN_NS: i64 = 1_704_067_200 * 1_000_000_000;

/// One node's wall and monotonic clocks.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeClock {
    base_true_ns: u64,
    wall_base_ns: i64,
    mono_base_ns: u64,
    rate: f64,
}

impl Default for NodeClock {
    fn default() -> Self {
        NodeClock {
            base_true_ns: 0,
            wall_base_ns: WALL_ORIGIN_NS,
            mono_base_ns: 0,
            rate: 1.0,
        }
    }
}

impl NodeClock {
    /// Clocks that read `wall_ns` and `mono_ns` at true time `true_ns` and run at true time's
    /// rate: a real host's clocks, taken as they are before a fault moves them.
    pub fn reading(true_ns: u64, wall_ns: i64, mono_ns: u64) -> NodeClock {
        NodeClock {
            base_true_ns: true_ns,
            wall_base_ns: wall_ns,
            mono_base_ns: mono_ns,
            rate: 1.0,
        }
    }

    /// The true time of the last change and the wall and monotonic readings then: with
    /// [`NodeClock::rate`], all it takes to read the clocks later (what real mode publishes to a
    /// server's time-shift library).
    pub fn base(&self) -> (u64, i64, u64) {
        (self.base_true_ns, self.wall_base_ns, self.mono_base_ns)
    }

    fn advanced(&self, true_ns: u64) -> i64 {
        (true_ns.saturating_sub(self.base_true_ns) as f64 * self.rate) as i64
    }

    /// The wall clock, in ns since the Unix epoch, at true time `true_ns`.
    pub fn wall_ns(&self, true_ns: u64) -> i64 {
        // Saturating: a clock 100× fast over a year-long run would pass year 2262, where the
        // nanoseconds of an i64 end; it stops there instead of wrapping to 1677.
        self.wall_base_ns.saturating_add(self.advanced(true_ns))
    }

    /// The monotonic clock at true time `true_ns`.
    pub fn mono_ns(&self, true_ns: u64) -> u64 {
        self.mono_base_ns
            .saturating_add(self.advanced(true_ns).max(0) as u64)
    }

    /// The rate the clocks run at.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    fn rebase(&mut self, true_ns: u64) {
        self.wall_base_ns = self.wall_ns(true_ns);
        self.mono_base_ns = self.mono_ns(true_ns);
        self.base_true_ns = true_ns;
    }

    /// From `true_ns` on, both clocks run at `rate` × true time.
    pub fn set_rate(&mut self, true_ns: u64, rate: f64) {
        self.rebase(true_ns);
        self.rate = rate;
    }

    /// At `true_ns`, the wall clock steps by `by_ns`; the monotonic clock does not.
    pub fn jump(&mut self, true_ns: u64, by_ns: i64) {
        self.rebase(true_ns);
        self.wall_base_ns = self.wall_base_ns.saturating_add(by_ns);
    }

    /// The true time that passes while this node's clocks advance by `local`, at the current rate.
    /// A rate change during a sleep is not re-applied to it: sleeps are short next to drift.
    pub fn true_duration(&self, local: Duration) -> Duration {
        Duration::from_nanos((local.as_nanos() as f64 / self.rate).ceil() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_moves_only_the_wall_clock() {
        let mut c = NodeClock::default();
        c.jump(1_000, 5_000);
        assert_eq!(c.wall_ns(2_000), WALL_ORIGIN_NS + 7_000);
        assert_eq!(c.mono_ns(2_000), 2_000);
    }

    #[test]
    fn a_clock_far_off_saturates_instead_of_wrapping() {
        let mut c = NodeClock::default();
        c.set_rate(0, 100.0);
        let year_ns = 365 * 24 * 3_600 * 1_000_000_000u64;
        assert_eq!(c.wall_ns(8 * year_ns), i64::MAX);
        c.jump(8 * year_ns, i64::MAX);
        assert_eq!(c.wall_ns(9 * year_ns), i64::MAX);
        assert!(c.mono_ns(9 * year_ns) > c.mono_ns(8 * year_ns));
    }

    #[test]
    fn drift_is_continuous_and_scales_both_clocks() {
        let mut c = NodeClock::default();
        c.set_rate(1_000, 2.0);
        assert_eq!(c.mono_ns(1_000), 1_000);
        assert_eq!(c.mono_ns(3_000), 5_000);
        assert_eq!(c.wall_ns(3_000), WALL_ORIGIN_NS + 5_000);
        assert_eq!(
            c.true_duration(Duration::from_nanos(4_000)),
            Duration::from_nanos(2_000)
        );
    }
}
