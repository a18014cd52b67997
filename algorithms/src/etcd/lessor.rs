//! The Go client's lease keep-alive, as `clientv3/lease.go` times it (read in etcd 3.4.23, the
//! same in 3.5 and later), written once for both worlds' stores to drive: each world's store sends
//! the keep-alives and reads the answers; this says when to send, and when the session is done.
//!
//! - **Sending** (`sendKeepAliveLoop`): a loop wakes every [`SEND_LOOP`] and sends a keep-alive
//!   for a lease whose `nextKeepAlive` has passed. An answer sets it a third of the TTL ahead; an
//!   unanswered keep-alive leaves it behind, so one goes out at every wake-up until one is
//!   answered.
//! - **Answers** (`recvKeepAlive`): there is no per-request timeout on the stream. An answer,
//!   however late, with a TTL sets the deadline a TTL ahead of its arrival; one with TTL 0 (the
//!   member no longer has the lease) ends the session at once.
//! - **Done** (`deadlineLoop`): a second loop wakes every [`DEADLINE_LOOP`], counted from the
//!   first keep-alive the client made, and ends the leases whose deadline has passed. So a
//!   session is done at the first of those wake-ups after its deadline, up to a second late —
//!   what `Session.Done()` shows a careful client.
//! - **The first deadline** is [`FIRST_KEEP_ALIVE_TIMEOUT`] after keep-alive starts (the client's
//!   `DialTimeout` plus a second, or `defaultTTL`, 5 s, without one: lockcheck takes the default),
//!   whatever the lease's TTL, until the first answer.

use std::time::Duration;

/// How often the send loop wakes (`retryConnWait`).
pub const SEND_LOOP: Duration = Duration::from_millis(500);

/// How often the deadline loop wakes.
pub const DEADLINE_LOOP: Duration = Duration::from_secs(1);

/// How long keep-alive waits for its first answer (`defaultTTL`: no `DialTimeout` set).
pub const FIRST_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// One lease's keep-alive state, on the client's monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepAlive {
    /// After this, without another answer, the lease is taken for expired.
    pub deadline: Duration,
    /// A keep-alive is sent at the send loop's first wake-up after this.
    pub next_keep_alive: Duration,
}

impl KeepAlive {
    /// Keep-alive of a lease starting at `now` (`lessor.KeepAlive`): the first keep-alive goes at
    /// once.
    pub fn started(now: Duration) -> KeepAlive {
        KeepAlive {
            deadline: now.saturating_add(FIRST_KEEP_ALIVE_TIMEOUT),
            next_keep_alive: now,
        }
    }

    /// Whether the send loop, waking at `now`, sends a keep-alive.
    pub fn due(&self, now: Duration) -> bool {
        self.next_keep_alive <= now
    }

    /// An answer with `ttl_s` arrived at `now`: false when it says the lease is gone (TTL 0).
    pub fn answered(&mut self, now: Duration, ttl_s: i64) -> bool {
        if ttl_s <= 0 {
            return false;
        }
        let ttl = Duration::from_secs(ttl_s as u64);
        self.next_keep_alive = now.saturating_add(ttl / 3);
        self.deadline = now.saturating_add(ttl);
        true
    }

    /// Whether the deadline loop, waking at `now`, ends the lease.
    pub fn lapsed(&self, now: Duration) -> bool {
        self.deadline < now
    }
}

/// How long a keep-alive's answer is worth waiting for, for a lease of `ttl`: past this the
/// session is done whatever comes (its deadline is at most a TTL, or the first keep-alive's
/// wait, ahead, and the deadline loop looks within a second), so a store may give the request up.
pub fn answer_bound(ttl: Duration) -> Duration {
    ttl.max(FIRST_KEEP_ALIVE_TIMEOUT)
        .saturating_add(DEADLINE_LOOP)
        .saturating_mul(2)
}

/// When the deadline loop, started at `origin`, next wakes after `now`.
pub fn next_deadline_check(origin: Duration, now: Duration) -> Duration {
    let since = now.saturating_sub(origin).as_nanos();
    let period = DEADLINE_LOOP.as_nanos();
    let wakes = (since / period + 1) as u32;
    origin.saturating_add(DEADLINE_LOOP.saturating_mul(wakes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_deadline_is_five_seconds_whatever_the_ttl_then_a_ttl_from_each_answer() {
        let mut k = KeepAlive::started(ms(1_000));
        assert!(k.due(ms(1_000)));
        assert_eq!(k.deadline, ms(6_000));
        assert!(k.answered(ms(1_010), 2));
        assert_eq!(k.deadline, ms(3_010));
        assert!(!k.due(ms(1_500)));
        assert!(k.due(ms(1_677)));
        // A late answer still counts: it moves the deadline from its own arrival.
        assert!(k.answered(ms(2_900), 2));
        assert_eq!(k.deadline, ms(4_900));
        assert!(!k.lapsed(ms(4_900)));
        assert!(k.lapsed(ms(4_901)));
        assert!(!k.answered(ms(5_000), 0), "TTL 0: the lease is gone");
    }

    #[test]
    fn the_deadline_loop_wakes_every_second_from_its_start() {
        assert_eq!(next_deadline_check(ms(300), ms(300)), ms(1_300));
        assert_eq!(next_deadline_check(ms(300), ms(1_299)), ms(1_300));
        assert_eq!(next_deadline_check(ms(300), ms(1_300)), ms(2_300));
        assert_eq!(next_deadline_check(ms(300), ms(0)), ms(1_300));
    }
}
