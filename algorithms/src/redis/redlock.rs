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
//!
//! The libraries that implement it differ around those steps in ways that change verdicts,
//! modelled as the lock's variants ([`VARIANTS`], `params.variant`; [`Implementation`]):
//! - `reference` (the default): the algorithm as the Redis distributed-lock page gives it, with
//!   the elapsed time on the client's monotonic clock and the 2 ms term of antirez's redlock-rb;
//! - `node-redlock` (4.2.0, the npm registry's `latest`; `redlock.js`): the same check, but
//!   elapsed time from `Date.now()`, the WALL clock, so a client clock stepped backwards during
//!   an attempt makes a lock whose leases already ran out look valid; one value for every retry
//!   of a `lock` call; retries `retryDelay ± retryJitter` apart; an unlock that fails unless a
//!   quorum deleted the key. (Issue 20 says it hands the lock out without checking the validity:
//!   4.2.0 does check, `lock.expiration > Date.now()`; it is the 5.0 betas, `src/index.ts`, that
//!   return the lock as soon as a quorum voted for it.)
//! - `redsync` (go-redsync v4, `mutex.go`): monotonic (Go's `time.Now` carries a monotonic
//!   reading that `Sub` and `Before` use), a drift term of `expiry × driftFactor` without the
//!   2 ms, one value for every try, 50–250 ms between tries, an unlock that fails below a quorum.

use super::command::{Command, Reply, Script, SetOptions};
use super::single::{EXTEND_LUA, RELEASE_LUA};
use super::store::RedisStore;
use crate::describe::{
    Backend, Description, Fencing, Lease, LibraryVariant, Order, Registered, Servers, Settings,
};
use crate::env::{Env, LockEvent};
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::{acquire_with_jitter, Retry, Tried};
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
    /// The implementation whose client it behaves as.
    pub implementation: Implementation,
}

impl RedlockConfig {
    /// The validity deducted for clock drift between the client and the masters
    /// ([`Implementation::drift_allowance`]); for the reference, `TTL × drift_factor + 2 ms`.
    pub fn drift_allowance(&self) -> Duration {
        self.implementation
            .drift_allowance(self.ttl, self.drift_factor)
    }
}

/// The Redlock implementations whose clients differ in ways that change a verdict
/// ([`Description::variants`], `params.variant`), the reference first.
pub const VARIANTS: &[LibraryVariant] = &[
    LibraryVariant {
        name: "reference",
        versions: "the Redis distributed-lock page's algorithm (no library)",
        follows: "redis.io, \"Distributed Locks with Redis\" (the Redlock algorithm, steps 1-5); \
                  the 2 ms drift term of antirez/redlock-rb's redlock.rb",
        about: "elapsed time on the monotonic clock; drift TTL x factor + 2 ms; a new token and a \
                delay in [d/2, d] per attempt; release succeeds if any master deleted the key",
        formerly: &[],
    },
    LibraryVariant {
        name: "node-redlock",
        versions: "node-redlock 4.2.0 (npm `redlock`, the `latest` tag)",
        follows: "redlock.js (Redlock.prototype._lock, unlock)",
        about: "elapsed time by Date.now(), the wall clock: a backward step during an attempt \
                lengthens the validity; drift round(TTL x factor) + 2 ms; one value per lock \
                call; retries retryDelay +- retryDelay/2 apart; unlock fails below a quorum",
        formerly: &[],
    },
    LibraryVariant {
        name: "redsync",
        versions: "go-redsync v4 (read at v4.9.4)",
        follows: "mutex.go (lockContext, UnlockContext), redsync.go (defaults)",
        about: "monotonic clock; drift TTL x factor without the 2 ms; one value per Lock call; \
                tries 50-250 ms apart (d/4 to 5d/4 of the retry delay); unlock fails below a \
                quorum",
        formerly: &[],
    },
];

// One behaviour per listed variant, in the same order ([`Settings::variant_index`]).
const _: () = assert!(Implementation::ALL.len() == VARIANTS.len());

/// Which implementation of Redlock a client behaves as, one per [`VARIANTS`] entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// The Redis distributed-lock page's algorithm (the default).
    Reference,
    /// node-redlock 4.2.0 (`redlock.js`).
    NodeRedlock,
    /// go-redsync v4 (`mutex.go`).
    Redsync,
}

impl Implementation {
    /// Each implementation, in [`VARIANTS`]' order.
    pub const ALL: [Implementation; 3] = [
        Implementation::Reference,
        Implementation::NodeRedlock,
        Implementation::Redsync,
    ];

    /// The validity it deducts for drift from a lease `ttl`:
    /// - reference: `ttl × factor + 2 ms` (redlock-rb: `(ttl * CLOCK_DRIFT_FACTOR).to_i + 2`);
    /// - node-redlock: `Math.round(driftFactor * ttl) + 2` ms;
    /// - redsync: `time.Duration(int64(float64(m.expiry)*m.driftFactor))`, no 2 ms.
    pub fn drift_allowance(self, ttl: Duration, factor: f64) -> Duration {
        match self {
            Implementation::Reference => ttl.mul_f64(factor) + Duration::from_millis(2),
            Implementation::NodeRedlock => {
                Duration::from_millis((factor * ttl.as_millis() as f64).round() as u64 + 2)
            }
            Implementation::Redsync => {
                Duration::from_nanos((ttl.as_nanos() as f64 * factor) as u64)
            }
        }
    }

    /// Whether it measures the attempt on the wall clock (`Date.now()`), which may jump, rather
    /// than the monotonic one.
    pub fn wall_clock(self) -> bool {
        self == Implementation::NodeRedlock
    }

    /// Whether every attempt draws a new token; the libraries draw one value per lock call and
    /// send it in every retry (node-redlock's `_lock`, redsync's `lockContext`).
    fn token_per_attempt(self) -> bool {
        self == Implementation::Reference
    }

    /// Whether a release counts only when a quorum deleted the key (node-redlock's `unlock`
    /// rejects with a LockError, redsync's `UnlockContext` returns false); the reference
    /// counts any master that deleted it.
    fn release_needs_quorum(self) -> bool {
        self != Implementation::Reference
    }

    /// The wait before the next attempt, drawn around the base delay `delay`:
    /// - reference: `[delay/2, delay]`;
    /// - node-redlock: `retryDelay ± retryJitter` (defaults 200 ± 100 ms: the jitter is half the
    ///   delay);
    /// - redsync: `rand.Intn(250-50) + 50` ms (scaled from the 200 ms default delay: `[d/4, 5d/4]`).
    fn pause<E: Env>(self, env: &E, delay: Duration) -> Duration {
        match self {
            Implementation::Reference => env.random_between(delay / 2, delay),
            Implementation::NodeRedlock => env.random_between(delay / 2, delay + delay / 2),
            Implementation::Redsync => env.random_between(delay / 4, delay + delay / 4),
        }
    }

    /// The clock the validity is counted on, as the implementation reads it: `Date.now()`'s
    /// whole milliseconds of the wall clock for node-redlock, the monotonic clock otherwise.
    fn now<E: Env>(self, env: &E) -> Duration {
        if self.wall_clock() {
            Duration::from_millis(env.wall_now().as_millis() as u64)
        } else {
            env.mono_now()
        }
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

    /// One attempt, with a token of its own.
    pub async fn try_acquire<E: Env>(&self, env: &E) -> RedlockAttempt {
        let token = env.new_token();
        self.attempt_with(env, token).await
    }

    /// One attempt with `token`, timed on the implementation's clock.
    async fn attempt_with<E: Env>(&self, env: &E, token: String) -> RedlockAttempt {
        let implementation = self.config.implementation;
        let started_mono = env.mono_now();
        let started = implementation.now(env);
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
        let now = implementation.now(env);
        let budget = self
            .config
            .ttl
            .saturating_sub(self.config.drift_allowance());
        // `now < started + budget`: the reference's `elapsed < budget`, node-redlock's
        // `lock.expiration > Date.now()`, redsync's `now.Before(until)`. On the wall clock `now`
        // may be before `started` (a backward step): the elapsed time then counts as negative.
        let expires = started + budget;
        let acquired = accepted >= self.quorum() && now < expires;
        env.observe(LockEvent::Attempt {
            acquired,
            accepted,
            of: self.masters.len(),
        });
        if acquired {
            let valid_until = if implementation.wall_clock() {
                // What the holder believes is left (`lock.expiration - Date.now()`), from now
                // on its monotonic clock.
                env.mono_now() + (expires - now)
            } else {
                expires
            };
            return RedlockAttempt::Acquired(Guard {
                token,
                acquired_at: started_mono,
                valid_until,
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
    /// validity that remained, and moves `guard.valid_until` accordingly. Every variant extends
    /// this way (on the monotonic clock): neither node-redlock 4 nor redsync renews by itself,
    /// so only `params.watchdog` calls it.
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
        let implementation = self.config.implementation;
        // The libraries draw one value per lock call and send it in every retry.
        let value = (!implementation.token_per_attempt()).then(|| env.new_token());
        let pause = |env: &E, delay| implementation.pause(env, delay);
        acquire_with_jitter(env, wait, retry, pause, || async {
            let token = match &value {
                Some(value) => value.clone(),
                None => env.new_token(),
            };
            Ok(match self.attempt_with(env, token).await {
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
        let deleted = self.release_token(&guard.token).await;
        Ok(if self.config.implementation.release_needs_quorum() {
            deleted >= self.quorum()
        } else {
            deleted > 0
        })
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
    variants: VARIANTS,
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
                implementation: Implementation::ALL[settings.variant_index(VARIANTS)],
            },
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
