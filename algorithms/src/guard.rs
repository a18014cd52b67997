//! What a client holds after acquiring a lock.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long after acquiring a client believes it holds a lock that has no lease it could count
/// down: a century. Such a lock (a ZooKeeper node, which lives as long as its session; a MySQL
/// row without a TTL; a transaction's row lock) ends when the server expires the session or ends
/// the transaction, which the client learns only afterwards (through `Lock::keep_alive`, or a
/// failed statement). Added with saturation, so a monotonic clock near `Duration::MAX` cannot
/// overflow.
pub const UNBOUNDED_VALIDITY: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// Proof of an acquisition, as the client knows it.
///
/// `valid_until` is computed on the client's own monotonic clock, never read from a server: it is
/// the client's belief about how long it may use the lock, and the lock's contract is that the
/// belief is true. The checker decides whether it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    /// The unique value stored as the lock's owner.
    pub token: String,
    /// Client monotonic time at which the acquiring request was sent.
    pub acquired_at: Duration,
    /// Client monotonic time until which the client believes it holds the lock.
    pub valid_until: Duration,
    /// A fencing token: a number that grows with every acquisition, for resources that reject
    /// stale holders. `None` when the algorithm (or its configuration) cannot produce one; a
    /// random value is not a fencing token.
    pub fence: Option<u64>,
}

impl Guard {
    /// How much validity is left at client monotonic time `now`.
    pub fn validity_left(&self, now: Duration) -> Duration {
        self.valid_until.saturating_sub(now)
    }
}
