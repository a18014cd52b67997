//! The blocking acquire every algorithm shares: attempt, wait a jittered delay, attempt again.
//!
//! A client that hears nothing from its server (a crash, a pause, a partition) backs off: each
//! attempt in a row that got no reply doubles the delay, up to [`Retry::max_delay`], and the
//! first reply brings it back to [`Retry::delay`]. Connection managers do the same when they
//! reconnect (lettuce: exponential up to 30 s, [`MAX_BACKOFF`]; redis-rb up to its
//! `reconnect_delay_max`; redis-rs's `ConnectionManager`; Curator's `ExponentialBackoffRetry`
//! doubles its sleep), and it is what keeps an
//! hours-long outage from costing the simulation an attempt every few hundred milliseconds.

use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use std::future::Future;
use std::time::Duration;

/// Attempts at a clean-up that got no usable reply (a release, deleting our own node) when no
/// retry count is configured, before the caller returns. What is still left behind then blocks
/// the others until the server ends it (a TTL, a session), unless the algorithm goes on in the
/// background as Curator's guaranteed delete does ([`crate::zookeeper::ZkStore::delete_in_background`]).
pub const CLEANUP_ATTEMPTS: u32 = 10;

/// The longest a client backs off between attempts that got no reply, unless the lock's own
/// bound is shorter ([`Retry::max_delay`]): lettuce's default reconnect delay is exponential
/// up to 30 s.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How a blocking acquire retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Base delay between attempts; each wait is random in `[delay / 2, delay]`, so contending
    /// clients do not retry in lock step.
    pub delay: Duration,
    /// Attempts at most; `None`: until the wait runs out.
    pub count: Option<u32>,
    /// The longest base delay that attempts without a reply back off to (at least `delay`).
    /// The caller bounds it by the lease: a waiter that backs off longer than the lock can be
    /// left behind would sit out a free lock after the outage ended.
    pub max_delay: Duration,
}

impl Retry {
    /// The base delay after `silent` attempts in a row that got no reply: `delay` doubled once
    /// per such attempt after the first, never above `max_delay` (nor below `delay`).
    pub fn base_delay(&self, silent: u32) -> Duration {
        let cap = self.max_delay.max(self.delay);
        let doublings = silent.saturating_sub(1).min(31);
        self.delay
            .checked_mul(1 << doublings)
            .map_or(cap, |d| d.min(cap))
    }
}

/// What one attempt of a blocking acquire came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tried {
    /// The lock is ours.
    Acquired(Guard),
    /// A server answered and the lock is not ours (held by someone else, granted too late and
    /// given back, rolled back by the server): the next attempt comes after the usual delay.
    Refused,
    /// No server answered (a timeout, a refused or lost connection): the client backs off.
    Unanswered,
}

impl Tried {
    /// The guard when the attempt acquired, for the callers that need no more than that.
    pub fn into_guard(self) -> Option<Guard> {
        match self {
            Tried::Acquired(guard) => Some(guard),
            Tried::Refused | Tried::Unanswered => None,
        }
    }
}

/// Calls `attempt` until it acquires (`Ok(Tried::Acquired)`), fails with an error other than a store error
/// (`Err`), `retry.count` attempts were made, or the next wait would pass `wait` on the client's
/// monotonic clock (`Ok(None)` for the last two). A store error (no reply) counts as a failed
/// attempt without an answer: the algorithm's attempt has already dealt with its unknown
/// outcome. Attempts without an answer in a row back off ([`Retry::base_delay`]).
pub async fn acquire_with_retries<E, F, Fut>(
    env: &E,
    wait: Duration,
    retry: Retry,
    attempt: F,
) -> Result<Option<Guard>, LockError>
where
    E: Env,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Tried, LockError>>,
{
    acquire_with_jitter(
        env,
        wait,
        retry,
        |env, delay| env.random_between(delay / 2, delay),
        attempt,
    )
    .await
}

/// [`acquire_with_retries`] with the wait between attempts drawn by `jitter` from the base
/// delay ([`Retry::base_delay`]) rather than in `[delay / 2, delay]`: for a lock that follows a
/// library whose own draw differs (node-redlock's `retryDelay ± retryJitter`, redsync's
/// 50–250 ms), so that its waiters retry as that library's do.
pub async fn acquire_with_jitter<E, J, F, Fut>(
    env: &E,
    wait: Duration,
    retry: Retry,
    jitter: J,
    mut attempt: F,
) -> Result<Option<Guard>, LockError>
where
    E: Env,
    J: Fn(&E, Duration) -> Duration,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Tried, LockError>>,
{
    let deadline = env.mono_now() + wait;
    let mut attempts = 0u32;
    // Attempts in a row that got no reply.
    let mut silent = 0u32;
    loop {
        match attempt().await {
            Ok(Tried::Acquired(guard)) => return Ok(Some(guard)),
            Ok(Tried::Refused) => silent = 0,
            Ok(Tried::Unanswered) | Err(LockError::Store(_)) => silent = silent.saturating_add(1),
            Err(e) => return Err(e),
        }
        attempts = attempts.saturating_add(1);
        if retry.count.is_some_and(|n| attempts >= n) {
            return Ok(None);
        }
        let delay = retry.base_delay(silent);
        let pause = jitter(env, delay);
        if env.mono_now() + pause >= deadline {
            return Ok(None);
        }
        env.sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::Retry;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn silence_doubles_the_delay_up_to_the_cap_and_an_answer_resets_it() {
        let retry = Retry {
            delay: ms(200),
            count: None,
            max_delay: ms(1_000),
        };
        let delays: Vec<u64> = (0..6)
            .map(|silent| retry.base_delay(silent).as_millis() as u64)
            .collect();
        assert_eq!(delays, [200, 200, 400, 800, 1_000, 1_000]);
        // However long the silence, no overflow and no more than the cap.
        assert_eq!(retry.base_delay(u32::MAX), ms(1_000));
        // A cap below the delay is the delay: backing off never retries sooner.
        let tight = Retry {
            max_delay: ms(50),
            ..retry
        };
        assert_eq!(tight.base_delay(5), ms(200));
    }
}
