//! What the hash-based locks (`redis-reentrant`, `redis-fair`) share: the owner's count in the
//! lock hash, the lease it holds it by, and the watchdog that renews it.

use super::command::{Command, Reply, Script};
use crate::env::{Env, LockEvent};
use crate::error::{LockError, StoreError};
use crate::guard::Guard;
use crate::retry::Tried;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::time::Duration;

/// One client's standing in a hash lock `{owner → count}`.
pub(crate) struct OwnerHash {
    /// The field this client writes (Redisson: a UUID and a thread id).
    pub owner: String,
    /// How deep this client believes it holds the lock.
    pub depth: Cell<u32>,
    /// Lease length.
    pub ttl: Duration,
    /// Validity deducted for drift, as a fraction of the lease (plus 2 ms).
    pub drift_factor: f64,
}

impl OwnerHash {
    /// The lease as the scripts take it.
    pub fn lease_ms(&self) -> String {
        (self.ttl.as_millis() as u64).to_string()
    }

    /// How long after sending an acquire the client may trust the lock.
    pub fn budget(&self) -> Duration {
        let drift = self.ttl.mul_f64(self.drift_factor) + Duration::from_millis(2);
        self.ttl.saturating_sub(drift)
    }

    /// Turns an acquire script's reply (nil: held; an integer: the holder's PTTL) into the
    /// attempt's outcome, reporting it to the environment.
    ///
    /// A reply that never came may have been applied. For a first acquisition the count can
    /// only be 0 or 1, and one release (`undo`) brings it back to 0 (for the fair lock, handing
    /// the lock to the next waiter; if the script only queued the caller, the release finds
    /// nothing to do). For a nested one an undo could free the lock the client still holds, so
    /// it is left to the lease.
    pub async fn settle<E, U>(
        &self,
        env: &E,
        started: Duration,
        reply: Result<Reply, StoreError>,
        undo: impl FnOnce() -> U,
    ) -> Result<Tried, LockError>
    where
        E: Env,
        U: Future<Output = ()>,
    {
        let answered = reply.is_ok();
        let acquired = match reply {
            Ok(Reply::Nil) => Ok(true),
            Ok(Reply::Int(_)) => Ok(false),
            Ok(Reply::Error(e)) => Err(LockError::Server(e)),
            Ok(other) => Err(LockError::UnexpectedReply(format!("{other:?}"))),
            Err(e) if e.maybe_applied() && self.depth.get() == 0 => {
                undo().await;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        };
        let held = matches!(acquired, Ok(true));
        env.observe(LockEvent::Attempt {
            acquired: held,
            accepted: usize::from(held),
            of: 1,
        });
        if !acquired? {
            // A reply that never came (and was undone) is no refusal: the retry loop backs off.
            return Ok(if answered {
                Tried::Refused
            } else {
                Tried::Unanswered
            });
        }
        self.depth.set(self.depth.get() + 1);
        Ok(Tried::Acquired(Guard {
            token: self.owner.clone(),
            acquired_at: started,
            valid_until: started + self.budget(),
            fence: None,
        }))
    }

    /// The renewal command: `renew` sent with the lease, then the owner, for `key`.
    pub fn renewal(&self, renew: &Script, key: &str) -> Command {
        Command::Eval {
            script: renew.clone(),
            keys: vec![key.to_string()],
            args: vec![self.lease_ms(), self.owner.clone()],
        }
    }

    /// The watchdog: renews the lease every third of it while polled and while the client still
    /// owns the hash, moving `guard`'s validity; returns when the lock is gone, or, under
    /// [`Watchdog::StopOnFailure`], after the first renewal that failed.
    ///
    /// `renew` sends one renewal ([`OwnerHash::renewal`], re-sent as the lock's client re-sends
    /// it) and gives its reply, `None` when the renewal failed (no reply came, or the client
    /// counts it failed: no replica synced); the reply is 1 (or `[1]`, Redisson 3.44's batched
    /// renewal) while the caller owns the hash.
    pub async fn keep_alive<E, F, Fut>(
        &self,
        env: &E,
        guard: &RefCell<Guard>,
        policy: Watchdog,
        mut renew: F,
    ) where
        E: Env,
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<Reply>>,
    {
        loop {
            env.sleep(self.ttl / 3).await;
            let started = env.mono_now();
            match renew().await {
                Some(Reply::Int(1)) => guard.borrow_mut().valid_until = started + self.budget(),
                Some(Reply::Array(items)) if items.first() == Some(&Reply::Int(1)) => {
                    guard.borrow_mut().valid_until = started + self.budget()
                }
                None => match policy {
                    // Unknown outcome: try again at the next tick while validity may remain.
                    Watchdog::Reschedule => {}
                    // Redisson ≤ 3.43 logs "Can't update lock … expiration" and drops the
                    // renewal entry: the lease runs out under a holder that goes on working.
                    Watchdog::StopOnFailure => return,
                },
                // The lock is gone: Redisson's watchdog stops renewing.
                Some(_) => return,
            }
        }
    }
}

/// What a watchdog does after a renewal that got no reply (its re-sends included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watchdog {
    /// Log it and renew again at the next tick: Redisson 3.44 and later
    /// (`renewal/RenewalTask.java`, `run`: `log.error(…); schedule();`).
    Reschedule,
    /// Stop renewing: Redisson up to 3.43 (`RedissonBaseLock.renewExpiration`: `log.error(…);
    /// EXPIRATION_RENEWAL_MAP.remove(…); return;`).
    StopOnFailure,
}
