//! The world as one node sees it.

use std::future::Future;
use std::time::Duration;

/// Something an algorithm did that the harness around it may want to see. Algorithms report;
/// they never depend on anyone listening.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockEvent {
    /// One acquisition attempt finished.
    Attempt {
        /// Whether it acquired the lock.
        acquired: bool,
        /// How many servers accepted it.
        accepted: usize,
        /// How many servers it asked.
        of: usize,
    },
}

/// Clocks, sleep and randomness of the node an algorithm runs on.
///
/// The two clocks are deliberately different, because lock algorithms fail in different ways
/// depending on which one they trust:
/// - [`Env::wall_now`] is the node's wall clock. It may run fast or slow and may JUMP (an NTP step,
///   an operator fixing the time). Servers expire keys and sessions by such clocks.
/// - [`Env::mono_now`] is the node's monotonic clock. It may drift with the node's oscillator but
///   never jumps. Clients measure how long their lock stays valid with it.
pub trait Env {
    /// The node's wall clock, as time since the Unix epoch.
    fn wall_now(&self) -> Duration;

    /// The node's monotonic clock, from an arbitrary origin.
    fn mono_now(&self) -> Duration;

    /// Sleeps for `duration` as measured by this node's monotonic clock.
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()>;

    /// A random number from the node's seeded generator (never an unseeded source: a run must be
    /// replayable from its seed).
    fn random_u64(&self) -> u64;

    /// A random duration in `[low, high]`, for retry jitter.
    fn random_between(&self, low: Duration, high: Duration) -> Duration {
        if high <= low {
            return low;
        }
        let span = (high - low).as_nanos() as u64;
        low + Duration::from_nanos(self.random_u64() % (span + 1))
    }

    /// Reports an event to whoever runs the algorithm (the simulator records it in the history,
    /// the real harness logs it). Does nothing by default.
    fn observe(&self, event: LockEvent) {
        let _ = event;
    }

    /// A fresh lock token: 128 random bits in hex. Unique per acquisition with overwhelming
    /// probability, so a client can never mistake another client's lock (or its own older one)
    /// for the one it holds.
    fn new_token(&self) -> String {
        format!("{:016x}{:016x}", self.random_u64(), self.random_u64())
    }
}
