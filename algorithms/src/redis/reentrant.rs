//! `redis-reentrant`: Redisson's RLock on one Redis (seeds 000 and 003).
//!
//! The lock is a hash `{owner → count}` with a TTL. The owner is the client (Redisson: a UUID and
//! a thread id), not the acquisition, so the owner may acquire again without waiting for itself;
//! each acquire adds one, each release takes one away, and the key is deleted only when the count
//! returns to zero. The scripts below are Redisson's, word for word where it matters.
//!
//! A waiter waits as Redisson's does ([`super::redisson_wait`]): on the lock's pub/sub channel,
//! woken by the release's `publish`, for at most the PTTL its attempt read.
//!
//! Like every lease lock, it is unsafe when the holder pauses past the lease; the watchdog (renew
//! every third of the lease while the process runs) does not help against a pause, which freezes
//! the watchdog too.
//!
//! Redisson's client around the scripts changed between releases in two ways that change
//! verdicts, modelled as the lock's variants ([`VARIANTS`], `params.variant`; the default is the
//! current release):
//! - the command re-send ([`super::resend`]): up to 3.23 an unlock whose reply was lost is sent
//!   again and applies twice, so an inner unlock frees the lock its holder still holds one level
//!   deep (Redisson issue #4871); 3.24 adds the unlock latch (a request id in `KEYS[3]`) under
//!   which a re-sent unlock applies once, and since 3.37 the unlock is not re-sent at all;
//! - the watchdog's failure policy ([`Redisson::watchdog`]): up to 3.43 it stops after one
//!   renewal that failed (its re-sends included), and the lease runs out under a holder that
//!   works on; from 3.44 it logs and renews again at its next tick.

use super::command::{Command, Reply, Script};
use super::owner_hash::{OwnerHash, Watchdog};
use super::redisson_wait::{self, Attempt};
use super::resend::{self, Resend};
use super::store::RedisStore;
use crate::describe::{
    Backend, Description, Fencing, Lease, LibraryVariant, Order, Registered, Servers, Settings,
};
use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::{Retry, Tried};
use crate::stores::Stores;
use std::cell::{Cell, RefCell};
use std::time::Duration;

/// Acquire: create the hash, or add one to the caller's count; else reply the lock's PTTL.
/// `KEYS[1]` lock; `ARGV[1]` lease ms; `ARGV[2]` owner. Redisson 3.20 and later
/// (`RedissonLock.tryLockInnerAsync`; before 3.20 the same steps in two branches), every variant.
pub const ACQUIRE_LUA: &str = r#"if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
return redis.call('pttl', KEYS[1]);"#;

/// Release without a latch (Redisson 3.22–3.23, `RedissonLock.unlockInnerAsync`; before 3.22 the
/// same with a literal `'publish'`): nil when the caller does not hold it; 0 when still held
/// (count > 0, lease renewed); 1 when freed (and the unlock message published for waiters).
/// Applied twice, it takes two from the count. `KEYS[1]` lock; `KEYS[2]` channel; `ARGV[1]`
/// message; `ARGV[2]` lease ms; `ARGV[3]` owner; `ARGV[4]` the publish command.
pub const RELEASE_LUA: &str = r#"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call(ARGV[4], KEYS[2], ARGV[1]);
  return 1;
end;
return nil;"#;

/// Release with the unlock latch (Redisson 3.24 and later, `RedissonLock.unlockInnerAsync`): as
/// [`RELEASE_LUA`], but the outcome is kept under the unlock's request id for `ARGV[5]` ms, and
/// a command carrying an id already seen replies that outcome without applying again, so a
/// re-sent unlock takes one from the count once. `KEYS[3]` the latch
/// (`redisson_unlock_latch:{KEY}:ID`, [`super::unlock_latch_prefix`]); `ARGV[5]` its life in ms.
pub const RELEASE_LATCH_LUA: &str = r#"local val = redis.call('get', KEYS[3]);
if val ~= false then
  return tonumber(val);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call(ARGV[4], KEYS[2], ARGV[1]);
  redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
  return 1;
end;"#;

/// Renewal (the watchdog's) up to Redisson 3.43 (`RedissonBaseLock.renewExpirationAsync`): only
/// while the caller still holds it. `KEYS[1]` lock; `ARGV[1]` lease ms; `ARGV[2]` owner.
pub const RENEW_LUA: &str = r#"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return 1;
end;
return 0;"#;

/// Renewal from Redisson 3.44 (`renewal/LockTask.java`, `renew`): the same test and `PEXPIRE`
/// for a batch of locks, one reply per lock (here always one: `KEYS[1]` lock; `ARGV[1]` lease
/// ms; `ARGV[2]` owner).
pub const RENEW_BATCH_LUA: &str = r#"local result = {}
for i = 1, #KEYS, 1 do
  if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then
    redis.call('pexpire', KEYS[i], ARGV[1]);
    table.insert(result, 1);
  else
    table.insert(result, 0);
  end;
end;
return result;"#;

/// The releases of Redisson whose clients differ around these scripts in ways that change a
/// verdict ([`Description::variants`], `params.variant`), the current one first.
pub const VARIANTS: &[LibraryVariant] = &[
    LibraryVariant {
        name: "redisson-3.44+",
        versions: "Redisson 3.44 and later (3.52 the newest read)",
        follows: "RedissonLock.java, RedissonBaseLock.java, renewal/RenewalTask.java, \
                  renewal/LockTask.java, command/RedisExecutor.java",
        about: "unlock latch; acquire and unlock sent once; a failed renewal is logged and the \
                watchdog renews again at its next tick",
    },
    LibraryVariant {
        name: "redisson-3.43",
        versions: "Redisson 3.37–3.43",
        follows: "RedissonLock.java, RedissonBaseLock.java (renewExpiration), \
                  command/RedisExecutor.java",
        about: "as 3.44+, but the watchdog stops after one failed renewal: the lease runs out \
                under a holder that works on",
    },
    LibraryVariant {
        name: "redisson-3.36",
        versions: "Redisson 3.24–3.36",
        follows: "RedissonLock.java, RedissonBaseLock.java (unlockInnerAsync, renewExpiration), \
                  command/RedisExecutor.java",
        about: "every command re-sent after a lost reply, the unlock under a latch that makes \
                the re-send apply once; the watchdog stops after one failed renewal",
    },
    LibraryVariant {
        name: "redisson-3.23",
        versions: "Redisson 3.10–3.23",
        follows: "RedissonLock.java (unlockInnerAsync), RedissonBaseLock.java \
                  (renewExpiration), command/RedisExecutor.java (scheduleResponseTimeout)",
        about: "every command re-sent after a lost reply, the unlock too: applied twice, an \
                inner unlock frees the lock under its holder (issue #4871); the watchdog stops \
                after one failed renewal",
    },
];

// One behaviour per listed variant, in the same order ([`Settings::variant_index`]).
const _: () = assert!(Redisson::ALL.len() == VARIANTS.len());

/// What a Redisson release range does around the scripts: the client behaviours that change
/// verdicts, one per [`VARIANTS`] entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redisson {
    /// 3.44 and later: the unlock latch; acquire and unlock sent once (`syncedEvalNoRetry`,
    /// since 3.37); renewals re-sent 4 times (`retryAttempts` 4 since 3.48; 3 before) and a
    /// renewal that failed all the same is followed by the next one.
    Current,
    /// 3.37–3.43: as [`Redisson::Current`] (3 re-sends of a renewal), but the watchdog stops
    /// after one failed renewal.
    V3_43,
    /// 3.24–3.36: the unlock latch; every command re-sent (`evalWriteAsync`); the watchdog stops
    /// after one failed renewal.
    V3_36,
    /// 3.10–3.23: every command re-sent, the unlock without a latch; the watchdog stops after
    /// one failed renewal. (3.10.0–3.15.1 re-sent at once on the timeout, without the
    /// `retryInterval` modelled here: `CommandAsyncService`'s, then `RedisExecutor`'s, timeout
    /// task; before 3.10.0 a response timeout failed the command.)
    V3_23,
}

impl Redisson {
    /// Each range, in [`VARIANTS`]' order.
    pub const ALL: [Redisson; 4] = [
        Redisson::Current,
        Redisson::V3_43,
        Redisson::V3_36,
        Redisson::V3_23,
    ];

    /// Whether its unlock carries a request id under which the server keeps the outcome.
    pub fn unlock_latch(self) -> bool {
        self != Redisson::V3_23
    }

    /// How it re-sends a command that got no reply (renewals in every range).
    pub fn resend(self) -> Resend {
        match self {
            Redisson::Current => Resend::FOUR,
            Redisson::V3_43 | Redisson::V3_36 | Redisson::V3_23 => Resend::THREE,
        }
    }

    /// Whether the lock's acquire and unlock are re-sent too (before 3.37).
    pub fn resends_lock_commands(self) -> bool {
        matches!(self, Redisson::V3_36 | Redisson::V3_23)
    }

    /// What its watchdog does after a renewal that failed.
    fn watchdog(self) -> Watchdog {
        match self {
            Redisson::Current => Watchdog::Reschedule,
            Redisson::V3_43 | Redisson::V3_36 | Redisson::V3_23 => Watchdog::StopOnFailure,
        }
    }
}

/// Settings of a [`RedisReentrant`] lock.
#[derive(Clone, Debug, PartialEq)]
pub struct ReentrantConfig {
    /// The lock's key.
    pub key: String,
    /// Lease length.
    pub ttl: Duration,
    /// Validity deducted for drift, as a fraction of the lease (plus 2 ms).
    pub drift_factor: f64,
    /// How a waiter backs off after attempts that got no reply, and how many attempts it makes
    /// at most ([`redisson_wait::acquire`]); a refused attempt is followed by a wait on the
    /// lock's channel instead.
    pub retry: Retry,
}

/// A reentrant lock held by one owner (one client) at a time.
pub struct RedisReentrant<S> {
    store: S,
    config: ReentrantConfig,
    /// The Redisson release range whose client it behaves as.
    redisson: Redisson,
    /// The owner's standing in the hash, shared logic with the other hash lock.
    hash: OwnerHash,
    acquire: Script,
    release: Script,
    renew: Script,
    /// Unlocks sent so far: each has its own request id (Redisson draws a random one; a count
    /// is as unique within the owner and leaves the client's random draws as they were).
    unlocks: Cell<u64>,
}

impl<S: RedisStore> RedisReentrant<S> {
    /// A lock for the client named `owner` (unique per client), behaving as the client of the
    /// Redisson release range `redisson`.
    pub fn new(store: S, config: ReentrantConfig, owner: String, redisson: Redisson) -> Self {
        RedisReentrant {
            hash: OwnerHash {
                owner,
                depth: Cell::new(0),
                ttl: config.ttl,
                drift_factor: config.drift_factor,
            },
            store,
            config,
            redisson,
            acquire: Script::new(ACQUIRE_LUA),
            release: Script::new(if redisson.unlock_latch() {
                RELEASE_LATCH_LUA
            } else {
                RELEASE_LUA
            }),
            renew: Script::new(match redisson {
                Redisson::Current => RENEW_BATCH_LUA,
                Redisson::V3_43 | Redisson::V3_36 | Redisson::V3_23 => RENEW_LUA,
            }),
            unlocks: Cell::new(0),
        }
    }

    /// The owner name this client writes into the hash.
    pub fn owner(&self) -> &str {
        &self.hash.owner
    }

    /// How deep this client believes it holds the lock.
    pub fn depth(&self) -> u32 {
        self.hash.depth.get()
    }

    /// One attempt; `Ok(Some)` when held (at one more level).
    pub async fn try_acquire<E: Env>(&self, env: &E) -> Result<Option<Guard>, LockError> {
        Ok(self.attempt(env).await?.into_guard())
    }

    /// The re-send the lock's own acquire and unlock get, in the ranges that re-send them.
    fn lock_resend(&self) -> Option<Resend> {
        self.redisson
            .resends_lock_commands()
            .then(|| self.redisson.resend())
    }

    /// One attempt: held, refused, or unanswered.
    async fn attempt<E: Env>(&self, env: &E) -> Result<Tried, LockError> {
        Ok(self.attempt_reading_ttl(env).await?.0)
    }

    /// One attempt, as Redisson's wait needs it: with the lock's PTTL when refused.
    async fn attempt_reading_ttl<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let started = env.mono_now();
        let command = Command::Eval {
            script: self.acquire.clone(),
            keys: vec![self.config.key.clone()],
            args: vec![self.hash.lease_ms(), self.hash.owner.clone()],
        };
        let reply = resend::call(&self.store, env, self.lock_resend().as_ref(), command).await;
        let ttl = match reply {
            Ok(Reply::Int(ttl)) => Some(ttl),
            _ => None,
        };
        let tried = self
            .hash
            .settle(env, started, reply, || async {
                let _ = self.release_once(env).await;
            })
            .await?;
        Ok((tried, ttl))
    }

    /// The channel its releases publish on and its waiters subscribe to
    /// (`RedissonLock.getChannelName`).
    fn channel(&self) -> String {
        format!("redisson_lock__channel:{{{}}}", self.config.key)
    }

    /// One level of release: `Ok(Some(true))` freed, `Ok(Some(false))` still held at a lower
    /// level, `Ok(None)` the client did not hold it (the lease had expired).
    async fn release_once<E: Env>(&self, env: &E) -> Result<Option<bool>, LockError> {
        let mut keys = vec![self.config.key.clone(), self.channel()];
        let mut args = vec![
            "0".into(),
            self.hash.lease_ms(),
            self.hash.owner.clone(),
            "publish".into(),
        ];
        let latch = self.redisson.unlock_latch().then(|| {
            let n = self.unlocks.get();
            self.unlocks.set(n + 1);
            // Redisson's request id is 16 random bytes in hex; the owner's own random part and
            // the unlock's number are as unique.
            let owner = self.hash.owner.split(':').next().unwrap_or_default();
            format!(
                "{}{owner}{n:x}",
                super::unlock_latch_prefix(&self.config.key)
            )
        });
        if let Some(latch) = &latch {
            keys.push(latch.clone());
            args.push(self.redisson.resend().latch_ms().to_string());
        }
        let command = Command::Eval {
            script: self.release.clone(),
            keys,
            args,
        };
        let reply = resend::call(&self.store, env, self.lock_resend().as_ref(), command).await?;
        if let Some(latch) = latch {
            // Once answered, Redisson deletes the latch (`unlockInnerAsync`'s `thenApply`),
            // without waiting for it; here the release waits for that reply too. A DEL that got
            // no reply leaves the latch to its expiry.
            let _ = self.store.call(Command::Del { keys: vec![latch] }).await;
        }
        match reply {
            Reply::Int(1) => Ok(Some(true)),
            Reply::Int(0) => Ok(Some(false)),
            Reply::Nil => Ok(None),
            Reply::Error(e) => Err(LockError::Server(e)),
            other => Err(LockError::UnexpectedReply(format!("{other:?}"))),
        }
    }
}

impl<S: RedisStore> Lock for RedisReentrant<S> {
    /// Redisson's `tryLock(wait, …)`: attempts, then waits on the lock's channel
    /// ([`redisson_wait`]).
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        let channel = self.channel();
        redisson_wait::acquire(
            env,
            &self.store,
            &channel,
            wait,
            self.config.retry,
            None,
            || self.attempt_reading_ttl(env),
        )
        .await
    }

    /// Releases one level; true when the client still held the lock at that level.
    async fn release<E: Env>(&self, env: &E, _guard: &Guard) -> Result<bool, LockError> {
        self.hash.depth.set(self.hash.depth.get().saturating_sub(1));
        Ok(self.release_once(env).await?.is_some())
    }

    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        let resend = self.redisson.resend();
        self.hash
            .keep_alive(
                env,
                &self.store,
                &self.renew,
                &self.config.key,
                guard,
                self.redisson.watchdog(),
                Some(&resend),
            )
            .await
    }
}

/// `redis-reentrant` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "redis-reentrant",
    summary: "Redisson's reentrant RLock: a hash {owner: count} on one Redis server.",
    backend: Backend::Redis,
    servers: Servers::One,
    replicas: true,
    lease: Lease::Ttl { optional: false },
    fencing: Fencing::Unavailable("its owner name is the same for every acquisition by a client"),
    renews: true,
    reentrant: true,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: VARIANTS,
};

impl<S: Stores> Registered<S> for RedisReentrant<S::Redis> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, env: &impl Env) -> Self {
        RedisReentrant::new(
            stores.redis_primary(),
            ReentrantConfig {
                key: settings.key.clone(),
                ttl: settings.ttl_or_default(),
                drift_factor: settings.drift_factor,
                retry: settings.retry,
            },
            // Redisson's owner: UUID:thread.
            format!("{}:1", env.new_token()),
            Redisson::ALL[settings.variant_index(VARIANTS)],
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
