//! The blocking acquire every algorithm shares: attempt, wait a jittered delay, attempt again.

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

/// How a blocking acquire retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Base delay between attempts; each wait is random in `[delay / 2, delay]`, so contending
    /// clients do not retry in lock step.
    pub delay: Duration,
    /// Attempts at most; `None`: until the wait runs out.
    pub count: Option<u32>,
}

/// Calls `attempt` until it acquires (`Ok(Some)`), fails with an error other than a store error
/// (`Err`), `retry.count` attempts were made, or the next wait would pass `wait` on the client's
/// monotonic clock (`Ok(None)` for the last two). A store error (no reply) counts as a failed
/// attempt: the algorithm's attempt has already dealt with its unknown outcome.
pub async fn acquire_with_retries<E, F, Fut>(
    env: &E,
    wait: Duration,
    retry: Retry,
    mut attempt: F,
) -> Result<Option<Guard>, LockError>
where
    E: Env,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<Guard>, LockError>>,
{
    let deadline = env.mono_now() + wait;
    let mut attempts = 0u32;
    loop {
        match attempt().await {
            Ok(Some(guard)) => return Ok(Some(guard)),
            Ok(None) | Err(LockError::Store(_)) => {}
            Err(e) => return Err(e),
        }
        attempts += 1;
        if retry.count.is_some_and(|n| attempts >= n) {
            return Ok(None);
        }
        let pause = env.random_between(retry.delay / 2, retry.delay);
        if env.mono_now() + pause >= deadline {
            return Ok(None);
        }
        env.sleep(pause).await;
    }
}
