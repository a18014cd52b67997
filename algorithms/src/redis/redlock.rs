//! `redlock`: N independent Redis masters (seeds 001 and 002; the Redis distributed-locks
//! documentation).
//!
//! The client sends the same key and a random token to every master in parallel, each request
//! bounded by a timeout well below the TTL. It holds the lock only if a majority (N/2 + 1)
//! accepted AND time is left: `validity = TTL − elapsed − (TTL × drift_factor + 2 ms)`, measured
//! on its own monotonic clock from before the first request. Otherwise it unlocks every master
//! and retries after a random delay.
//!
//! What the algorithm assumes, and lockcheck tests: clocks that do not jump, masters that do not
//! forget (restart without persistence, or restart before the longest TTL has passed), and
//! holders that do not pause past their validity. Its token is random, so it has no fencing token
//! to offer a resource.

use super::command::{Command, Reply, Script, SetOptions};
use super::single::{EXTEND_LUA, RELEASE_LUA};
use super::store::RedisStore;
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::{Env, LockEvent};
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::{acquire_with_retries, Retry, Tried};
use crate::stores::Stores;
use futures_util::stream::{FuturesOrdered, StreamExt};
use std::cell::RefCell;
use std::time::Duration;

/// Settings of a [`Redlock`].
#[derive(Clone, Debug, PartialEq)]
pub struct RedlockConfig {
    /// The lock's key on every master.
    pub key: String,
    /// Lease length sent as `PX`.
    pub ttl: Duration,
    /// Clock drift allowance as a fraction of the TTL (`CLOCK_DRIFT_FACTOR`, 0.01 by default).
    pub drift_factor: f64,
    /// Base delay between attempts; each wait is random in `[retry_delay / 2, retry_delay]`.
    pub retry_delay: Duration,
    /// Attempts per blocking acquire; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// The longest delay that attempts without an answer back off to ([`crate::retry`]);
    /// at least `retry_delay`.
    pub max_retry_delay: Duration,
}

impl RedlockConfig {
    /// `TTL × drift_factor + 2 ms`: the validity deducted for clock drift between the client and
    /// the masters, plus the 2 ms the reference implementation adds for timer resolution.
    pub fn drift_allowance(&self) -> Duration {
        self.ttl.mul_f64(self.drift_factor) + Duration::from_millis(2)
    }
}

/// What one acquisition attempt saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedlockAttempt {
    /// A quorum accepted with validity left.
    Acquired(Guard),
    /// Not enough masters accepted, or no validity was left; every master was unlocked.
    Failed {
        /// How many masters accepted.
        accepted: usize,
        /// How many did not answer in time (their outcome is unknown).
        unknown: usize,
    },
}

/// A lock over N independent Redis masters.
pub struct Redlock<S> {
    masters: Vec<S>,
    config: RedlockConfig,
    release: Script,
    extend: Script,
}

impl<S: RedisStore> Redlock<S> {
    /// A lock over `masters` (one store per master).
    pub fn new(masters: Vec<S>, config: RedlockConfig) -> Self {
        Redlock {
            masters,
            config,
            release: Script::new(RELEASE_LUA),
            extend: Script::new(EXTEND_LUA),
        }
    }

    /// Masters that must accept: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    /// Runs `command` on every master at once; each reply or error in master order.
    async fn on_all(&self, command: Command) -> Vec<Result<Reply, LockError>> {
        // Not `join_all`: for a handful of futures it polls every one of them whenever any is
        // woken, and each needless poll of a pending request re-arms its timeout.
        self.masters
            .iter()
            .map(|m| {
                let command = command.clone();
                async move { m.call(command).await.map_err(LockError::from) }
            })
            .collect::<FuturesOrdered<_>>()
            .collect()
            .await
    }

    /// One attempt.
    pub async fn try_acquire<E: Env>(&self, env: &E) -> RedlockAttempt {
        let token = env.new_token();
        let started = env.mono_now();
        let replies = self
            .on_all(Command::Set {
                key: self.config.key.clone(),
                value: token.clone(),
                options: SetOptions {
                    nx: true,
                    px: Some(self.config.ttl.as_millis() as u64),
                    ..SetOptions::default()
                },
            })
            .await;
        let accepted = replies
            .iter()
            .filter(|r| matches!(r, Ok(Reply::Status(s)) if s == "OK"))
            .count();
        let unknown = replies.iter().filter(|r| r.is_err()).count();
        let elapsed = env.mono_now().saturating_sub(started);
        let budget = self
            .config
            .ttl
            .saturating_sub(self.config.drift_allowance());
        let acquired = accepted >= self.quorum() && elapsed < budget;
        env.observe(LockEvent::Attempt {
            acquired,
            accepted,
            of: self.masters.len(),
        });
        if acquired {
            return RedlockAttempt::Acquired(Guard {
                token,
                acquired_at: started,
                valid_until: started + budget,
                fence: None,
            });
        }
        // Unlock everywhere, including masters that did not answer: they may have applied it.
        self.release_token(&token).await;
        RedlockAttempt::Failed { accepted, unknown }
    }

    /// Releases `token` on every master; how many deleted it.
    async fn release_token(&self, token: &str) -> usize {
        self.on_all(Command::Eval {
            script: self.release.clone(),
            keys: vec![self.config.key.clone()],
            args: vec![token.to_string()],
        })
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(Reply::Int(1))))
        .count()
    }

    /// Extends the lease on every master; succeeds only if a quorum extended it within the
    /// validity that remained, and moves `guard.valid_until` accordingly.
    pub async fn extend<E: Env>(&self, env: &E, guard: &mut Guard) -> bool {
        let started = env.mono_now();
        if started >= guard.valid_until {
            return false;
        }
        let extended = self
            .on_all(Command::Eval {
                script: self.extend.clone(),
                keys: vec![self.config.key.clone()],
                args: vec![
                    guard.token.clone(),
                    (self.config.ttl.as_millis() as u64).to_string(),
                ],
            })
            .await
            .into_iter()
            .filter(|r| matches!(r, Ok(Reply::Int(1))))
            .count();
        let now = env.mono_now();
        let budget = self
            .config
            .ttl
            .saturating_sub(self.config.drift_allowance());
        if extended >= self.quorum() && now < guard.valid_until && now < started + budget {
            guard.valid_until = started + budget;
            true
        } else {
            false
        }
    }
}

impl<S: RedisStore> Lock for Redlock<S> {
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        let retry = Retry {
            delay: self.config.retry_delay,
            count: self.config.retry_count,
            max_delay: self.config.max_retry_delay,
        };
        acquire_with_retries(env, wait, retry, || async {
            Ok(match self.try_acquire(env).await {
                RedlockAttempt::Acquired(guard) => Tried::Acquired(guard),
                RedlockAttempt::Failed { unknown, .. } if unknown == self.masters.len() => {
                    Tried::Unanswered
                }
                RedlockAttempt::Failed { .. } => Tried::Refused,
            })
        })
        .await
    }

    async fn release<E: Env>(&self, _env: &E, guard: &Guard) -> Result<bool, LockError> {
        Ok(self.release_token(&guard.token).await > 0)
    }

    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        loop {
            env.sleep(self.config.ttl / 3).await;
            let mut renewed = guard.borrow().clone();
            if !self.extend(env, &mut renewed).await {
                return;
            }
            *guard.borrow_mut() = renewed;
        }
    }
}

/// `redlock` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "redlock",
    summary:
        "Redlock over N independent Redis masters: a majority within the validity (the Redis docs).",
    backend: Backend::Redis,
    servers: Servers::Masters { default: 5, min: 3 },
    replicas: false,
    lease: Lease::Ttl { optional: false },
    fencing: Fencing::Unavailable(
        "its token is random and no counter is shared by the masters (Kleppmann, 2016). Use \
         single-redis with fencing, or a lock with a monotonic token",
    ),
    renews: true,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for Redlock<S::Redis> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        Redlock::new(
            stores.redis_masters(),
            RedlockConfig {
                key: settings.key.clone(),
                ttl: settings.ttl_or_default(),
                drift_factor: settings.drift_factor,
                retry_delay: settings.retry.delay,
                retry_count: settings.retry.count,
                max_retry_delay: settings.retry.max_delay,
            },
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
