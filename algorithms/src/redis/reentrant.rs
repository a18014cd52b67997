//! `redis-reentrant`: Redisson's RLock on one Redis (seeds 000 and 003).
//!
//! The lock is a hash `{owner → count}` with a TTL. The owner is the client (Redisson: a UUID and
//! a thread id), not the acquisition, so the owner may acquire again without waiting for itself;
//! each acquire adds one, each release takes one away, and the key is deleted only when the count
//! returns to zero. The scripts below are Redisson's, word for word where it matters.
//!
//! Like every lease lock, it is unsafe when the holder pauses past the lease; the watchdog (renew
//! every third of the lease while the process runs) does not help against a pause, which freezes
//! the watchdog too.

use super::command::{Command, Reply, Script};
use super::owner_hash::OwnerHash;
use super::store::RedisStore;
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::{acquire_with_retries, Retry, Tried};
use crate::stores::Stores;
use std::cell::{Cell, RefCell};
use std::time::Duration;

/// Acquire: create the hash, or add one to the caller's count; else reply the lock's PTTL.
/// `KEYS[1]` lock; `ARGV[1]` lease ms; `ARGV[2]` owner.
pub const ACQUIRE_LUA: &str = r#"if (redis.call('exists', KEYS[1]) == 0) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
return redis.call('pttl', KEYS[1]);"#;

/// Release: nil when the caller does not hold it; 0 when still held (count > 0, lease renewed);
/// 1 when freed (and the unlock message published for waiters).
/// `KEYS[1]` lock; `KEYS[2]` channel; `ARGV[1]` message; `ARGV[2]` lease ms; `ARGV[3]` owner.
pub const RELEASE_LUA: &str = r#"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call('publish', KEYS[2], ARGV[1]);
  return 1;
end;
return nil;"#;

/// Renewal (the watchdog's): only while the caller still holds it. `KEYS[1]` lock; `ARGV[1]` lease
/// ms; `ARGV[2]` owner.
pub const RENEW_LUA: &str = r#"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return 1;
end;
return 0;"#;

/// Settings of a [`RedisReentrant`] lock.
#[derive(Clone, Debug, PartialEq)]
pub struct ReentrantConfig {
    /// The lock's key.
    pub key: String,
    /// Lease length.
    pub ttl: Duration,
    /// Validity deducted for drift, as a fraction of the lease (plus 2 ms).
    pub drift_factor: f64,
    /// Base delay between attempts, jittered in `[d/2, d]` (Redisson waits on the unlock
    /// channel instead; a retry delay is the model of that wait with no message lost).
    pub retry_delay: Duration,
    /// Attempts per blocking acquire; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// The longest delay that attempts without an answer back off to ([`crate::retry`]);
    /// at least `retry_delay`.
    pub max_retry_delay: Duration,
}

/// A reentrant lock held by one owner (one client) at a time.
pub struct RedisReentrant<S> {
    store: S,
    config: ReentrantConfig,
    /// The owner's standing in the hash, shared logic with the other hash lock.
    hash: OwnerHash,
    acquire: Script,
    release: Script,
    renew: Script,
}

impl<S: RedisStore> RedisReentrant<S> {
    /// A lock for the client named `owner` (unique per client).
    pub fn new(store: S, config: ReentrantConfig, owner: String) -> Self {
        RedisReentrant {
            hash: OwnerHash {
                owner,
                depth: Cell::new(0),
                ttl: config.ttl,
                drift_factor: config.drift_factor,
            },
            store,
            config,
            acquire: Script::new(ACQUIRE_LUA),
            release: Script::new(RELEASE_LUA),
            renew: Script::new(RENEW_LUA),
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

    /// One attempt, as the retry loop needs it: held, refused, or unanswered.
    async fn attempt<E: Env>(&self, env: &E) -> Result<Tried, LockError> {
        let started = env.mono_now();
        let reply = self
            .store
            .call(Command::Eval {
                script: self.acquire.clone(),
                keys: vec![self.config.key.clone()],
                args: vec![self.hash.lease_ms(), self.hash.owner.clone()],
            })
            .await;
        self.hash
            .settle(env, started, reply, || async {
                let _ = self.release_once().await;
            })
            .await
    }

    /// One level of release: `Ok(Some(true))` freed, `Ok(Some(false))` still held at a lower
    /// level, `Ok(None)` the client did not hold it (the lease had expired).
    async fn release_once(&self) -> Result<Option<bool>, LockError> {
        let reply = self
            .store
            .call(Command::Eval {
                script: self.release.clone(),
                keys: vec![
                    self.config.key.clone(),
                    format!("redisson_lock__channel:{{{}}}", self.config.key),
                ],
                args: vec!["0".into(), self.hash.lease_ms(), self.hash.owner.clone()],
            })
            .await?;
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
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        let retry = Retry {
            delay: self.config.retry_delay,
            count: self.config.retry_count,
            max_delay: self.config.max_retry_delay,
        };
        acquire_with_retries(env, wait, retry, || self.attempt(env)).await
    }

    /// Releases one level; true when the client still held the lock at that level.
    async fn release<E: Env>(&self, _env: &E, _guard: &Guard) -> Result<bool, LockError> {
        self.hash.depth.set(self.hash.depth.get().saturating_sub(1));
        Ok(self.release_once().await?.is_some())
    }

    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        self.hash
            .keep_alive(env, &self.store, &self.renew, &self.config.key, guard)
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
                retry_delay: settings.retry.delay,
                retry_count: settings.retry.count,
                max_retry_delay: settings.retry.max_delay,
            },
            // Redisson's owner: UUID:thread.
            format!("{}:1", env.new_token()),
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
