//! `redis-fair`: a fair (FIFO) reentrant lock on one Redis: noahyz/distributed_lock (seed 003)
//! and Redisson's RedissonFairLock, which share one design.
//!
//! Three keys per lock:
//! - the lock itself, a hash `{owner → count}` with a TTL, exactly as in `redis-reentrant`;
//! - `redisson_lock_queue:{key}`, a list: the waiters, first come first served;
//! - `redisson_lock_timeout:{key}`, a sorted set: each waiter's deadline (ms since the epoch).
//!
//! (Redisson's names; the `{key}` hash tag puts all three in the lock key's cluster slot.)
//!
//! A waiter that cannot take the lock joins the tail of the queue and waits, as Redisson's does,
//! on its own pub/sub channel (`redisson_lock__channel:{key}:{owner}`): the release that frees
//! the lock publishes to the waiter then at the head, which attempts again at once
//! ([`super::redisson_wait`]). The lock goes only to the waiter at the head (or to anyone while
//! the queue is empty), so the others cannot overtake it. A waiter that stops attempting (it
//! crashed, or gave up without being able to say so) would block the queue forever, so each
//! waiter has a deadline in the sorted set, pushed back at every attempt; every script first
//! drops the waiters at the head whose deadline has passed. A waiter therefore attempts again
//! at least twice per deadline even when no message comes (none does for a lock that expires,
//! for a waiter that reached the head by another's giving up, or while its subscription is
//! gone), and at the latest when the lock's PTTL it last read runs out.
//!
//! "Passed" is judged by the clock of whichever CLIENT runs the script: the scripts cannot read
//! the server's clock (Redisson passes `System.currentTimeMillis()`, the seed its own timestamp,
//! and so does this module), so every deadline is one client's wall time plus `wait_timeout`,
//! compared with another client's wall time. A client whose clock runs ahead drops live waiters
//! and jumps the queue; a waiter whose clock runs behind keeps its place longer after it dies.
//! This is Redisson's design and a known weakness, which lockcheck is meant to show: it costs
//! fairness and liveness, never mutual exclusion, which rests on the hash's lease alone, as in
//! `redis-reentrant` (and fails the same way when the holder pauses past the lease).
//!
//! Deliberate differences from Redisson:
//! - Redisson chains deadlines (a waiter's is the previous waiter's plus the wait, and every
//!   grant takes one wait off all of them) and never pushes one back when its waiter polls, so a
//!   waiter behind a long-held (watchdog-renewed) lock loses its place while still waiting. Here
//!   a deadline means what `wait_timeout` says, how long a place is kept without a poll, and the
//!   blocking acquire polls at least twice per `wait_timeout`.
//! - A release answers nil for a lock that is already gone (Redisson answers 1, which would let a
//!   client believe it released a lock it had lost).
//! - Force unlock does not purge the queue (it has no client clock to judge deadlines by).

use super::command::{Command, Reply, Script};
use super::owner_hash::{OwnerHash, Watchdog};
use super::redisson_wait::{self, Attempt};
use super::store::RedisStore;
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::Retry;
use crate::stores::Stores;
use std::cell::{Cell, RefCell};
use std::time::Duration;

/// The prelude of every script that judges deadlines: drop the waiters at the head of the queue
/// whose deadline is not after `now`. Only the head matters: a dead waiter further back is
/// harmless until it reaches the head, where it is dropped in turn. A waiter without a deadline
/// counts as dead: no script leaves one behind, but if one ever appeared it must not wedge the
/// queue (Redisson's script fails on it, for every caller, forever).
macro_rules! purge_expired_waiters {
    ($now:literal) => {
        concat!(
            "local now = tonumber(",
            $now,
            ");
while true do
  local first = redis.call('lindex', KEYS[2], 0);
  if first == false then
    break;
  end;
  local deadline = tonumber(redis.call('zscore', KEYS[3], first));
  if deadline == nil or deadline <= now then
    redis.call('zrem', KEYS[3], first);
    redis.call('lpop', KEYS[2]);
  else
    break;
  end;
end;
"
        )
    };
}

/// Taking a free lock (only for the waiter at the head, or anyone when nobody waits) or
/// re-entering; shared by both acquire scripts so they cannot disagree on who may take it.
macro_rules! take_or_reenter {
    () => {
        "local head = redis.call('lindex', KEYS[2], 0);
if (redis.call('exists', KEYS[1]) == 0) and ((head == false) or (head == ARGV[2])) then
  if head ~= false then
    redis.call('lpop', KEYS[2]);
  end;
  redis.call('zrem', KEYS[3], ARGV[2]);
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
"
    };
}

/// Acquire or wait: take the lock (nil), or keep the caller's place in the queue and reply the
/// lock's PTTL (-2 when it is free but another waiter is first). A queued waiter's deadline is
/// reset to `now + wait` at each poll. A new waiter's is `now + wait` but never before the last
/// waiter's, Redisson's rule (there it keeps the set in queue order); here the first poll resets
/// it anyway, and only the head's deadline is ever judged, so the order need not hold.
/// `KEYS[1]` lock, `KEYS[2]` queue, `KEYS[3]` deadlines; `ARGV[1]` lease ms, `ARGV[2]` owner,
/// `ARGV[3]` wait timeout ms, `ARGV[4]` the client's wall clock in ms since the epoch.
pub const ACQUIRE_LUA: &str = concat!(
    purge_expired_waiters!("ARGV[4]"),
    take_or_reenter!(),
    "local deadline = now + tonumber(ARGV[3]);
if redis.call('zscore', KEYS[3], ARGV[2]) == false then
  local last = redis.call('lindex', KEYS[2], -1);
  if last ~= false then
    local after = tonumber(redis.call('zscore', KEYS[3], last));
    if (after ~= nil) and (after > deadline) then
      deadline = after;
    end;
  end;
  redis.call('rpush', KEYS[2], ARGV[2]);
end;
redis.call('zadd', KEYS[3], deadline, ARGV[2]);
return redis.call('pttl', KEYS[1]);"
);

/// Try-acquire (the seed's tryLock): as [`ACQUIRE_LUA`] but never joins the queue, so it fails
/// while anyone else waits. Replies nil when taken, else the lock's PTTL.
/// `KEYS[1]` lock, `KEYS[2]` queue, `KEYS[3]` deadlines; `ARGV[1]` lease ms, `ARGV[2]` owner,
/// `ARGV[3]` the client's wall clock in ms since the epoch.
pub const TRY_ACQUIRE_LUA: &str = concat!(
    purge_expired_waiters!("ARGV[3]"),
    take_or_reenter!(),
    "return redis.call('pttl', KEYS[1]);"
);

/// Release one level: nil when the caller does not hold the lock (it is gone or someone else's);
/// 0 when still held (count > 0, lease renewed); 1 when freed, and the unlock message published
/// on the channel of the waiter now at the head (Redisson's per-waiter channel).
/// `KEYS[1]` lock, `KEYS[2]` queue, `KEYS[3]` deadlines, `KEYS[4]` channel prefix;
/// `ARGV[1]` message, `ARGV[2]` lease ms, `ARGV[3]` owner, `ARGV[4]` the client's wall clock in
/// ms since the epoch.
pub const RELEASE_LUA: &str = concat!(
    purge_expired_waiters!("ARGV[4]"),
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  return 0;
end;
redis.call('del', KEYS[1]);
local waiter = redis.call('lindex', KEYS[2], 0);
if waiter ~= false then
  redis.call('publish', KEYS[4] .. ':' .. waiter, ARGV[1]);
end;
return 1;"
);

/// Renewal (the watchdog's): only while the caller still holds it. `KEYS[1]` lock; `ARGV[1]` lease
/// ms, `ARGV[2]` owner.
pub const RENEW_LUA: &str = r#"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return 1;
end;
return 0;"#;

/// Force unlock: delete the lock whoever holds it (1 if there was one, else 0) and wake the head
/// waiter. Unlike Redisson's it does not purge the queue first: it is an operator's tool with no
/// client clock to judge deadlines by, and the next acquire purges anyway.
/// `KEYS[1]` lock, `KEYS[2]` queue, `KEYS[3]` channel prefix; `ARGV[1]` message.
pub const FORCE_UNLOCK_LUA: &str = r#"if redis.call('del', KEYS[1]) == 1 then
  local waiter = redis.call('lindex', KEYS[2], 0);
  if waiter ~= false then
    redis.call('publish', KEYS[3] .. ':' .. waiter, ARGV[1]);
  end;
  return 1;
end;
return 0;"#;

/// Leave the queue (a blocking acquire that gives up), so the caller does not block the waiters
/// behind it until its deadline passes. Replies how many queue entries were removed (0 or 1).
/// Redisson also moves the later deadlines forward here, because its deadlines are chained; these
/// are not. `KEYS[1]` queue, `KEYS[2]` deadlines; `ARGV[1]` owner.
pub const LEAVE_QUEUE_LUA: &str = r#"redis.call('zrem', KEYS[2], ARGV[1]);
return redis.call('lrem', KEYS[1], 0, ARGV[1]);"#;

/// The message published to a waiter's channel when the lock is freed (Redisson's
/// `LockPubSub.UNLOCK_MESSAGE`); the waiter subscribed to that channel attempts again.
const UNLOCK_MESSAGE: &str = "0";

/// Settings of a [`RedisFair`] lock.
#[derive(Clone, Debug, PartialEq)]
pub struct FairConfig {
    /// The lock's key.
    pub key: String,
    /// Lease length.
    pub ttl: Duration,
    /// Validity deducted for drift, as a fraction of the lease (plus 2 ms).
    pub drift_factor: f64,
    /// Base delay before attempting again after an attempt that got no reply, jittered in
    /// `[d/2, d]` and doubled per silent attempt up to `max_retry_delay`. An attempt the server
    /// refused is followed by a wait on the waiter's channel instead.
    pub retry_delay: Duration,
    /// Attempts per blocking acquire; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// The longest delay that attempts without an answer back off to ([`crate::retry`]);
    /// at least `retry_delay`.
    pub max_retry_delay: Duration,
    /// How long a waiter's place in the queue is kept without it polling again (its deadline,
    /// judged by the clients' wall clocks). Must exceed a round trip by a good margin, or waiters
    /// lose their places between polls.
    pub wait_timeout: Duration,
}

impl FairConfig {
    /// The key of the wait queue (a list of owners).
    pub fn queue_key(&self) -> String {
        super::queue_key(&self.key)
    }

    /// The key of the waiters' deadlines (a sorted set of owners, scored in ms since the epoch).
    pub fn timeout_key(&self) -> String {
        super::timeout_key(&self.key)
    }

    /// The prefix of the waiters' unlock channels (`{prefix}:{owner}`).
    pub fn channel_prefix(&self) -> String {
        format!("redisson_lock__channel:{{{}}}", self.key)
    }

    /// The channel `owner` waits on (`RedissonFairLock.subscribe`: the lock's channel, a colon,
    /// the owner's lock name).
    pub fn channel_of(&self, owner: &str) -> String {
        format!("{}:{owner}", self.channel_prefix())
    }
}

/// A fair reentrant lock: held by one owner (one client) at a time, granted in the order the
/// waiters queued.
pub struct RedisFair<S> {
    store: S,
    config: FairConfig,
    /// The owner's standing in the hash, shared logic with the other hash lock.
    hash: OwnerHash,
    acquire: Script,
    try_acquire: Script,
    release: Script,
    renew: Script,
    force_unlock: Script,
    leave_queue: Script,
}

impl<S: RedisStore> RedisFair<S> {
    /// A lock for the client named `owner` (unique per client: it is both the hash field and the
    /// client's entry in the queue).
    pub fn new(store: S, config: FairConfig, owner: String) -> Self {
        RedisFair {
            hash: OwnerHash {
                owner,
                depth: Cell::new(0),
                ttl: config.ttl,
                drift_factor: config.drift_factor,
            },
            store,
            config,
            acquire: Script::new(ACQUIRE_LUA),
            try_acquire: Script::new(TRY_ACQUIRE_LUA),
            release: Script::new(RELEASE_LUA),
            renew: Script::new(RENEW_LUA),
            force_unlock: Script::new(FORCE_UNLOCK_LUA),
            leave_queue: Script::new(LEAVE_QUEUE_LUA),
        }
    }

    /// The owner name this client writes into the hash and the queue.
    pub fn owner(&self) -> &str {
        &self.hash.owner
    }

    /// How deep this client believes it holds the lock.
    pub fn depth(&self) -> u32 {
        self.hash.depth.get()
    }

    fn lock_keys(&self) -> Vec<String> {
        vec![
            self.config.key.clone(),
            self.config.queue_key(),
            self.config.timeout_key(),
        ]
    }

    /// One attempt that never joins the queue (the seed's tryLock): `Ok(Some)` when held (at one
    /// more level). Fails while another client waits, even if the lock is free.
    pub async fn try_acquire<E: Env>(&self, env: &E) -> Result<Option<Guard>, LockError> {
        let args = vec![self.hash.lease_ms(), self.hash.owner.clone(), wall_ms(env)];
        Ok(self
            .attempt(env, &self.try_acquire, args)
            .await?
            .0
            .into_guard())
    }

    /// One poll of a blocking acquire: `Ok(Some)` when held (at one more level), else the caller
    /// keeps (or takes) its place in the queue, which lasts `wait_timeout` unless it polls again.
    /// A caller that stops polling should [`leave_queue`](Self::leave_queue).
    pub async fn acquire_or_wait<E: Env>(&self, env: &E) -> Result<Option<Guard>, LockError> {
        Ok(self.poll_queue(env).await?.0.into_guard())
    }

    /// [`RedisFair::acquire_or_wait`] as the wait needs it: held, refused, or unanswered, with
    /// the lock's PTTL when refused (-2 when it is free but another waiter is first).
    async fn poll_queue<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let args = vec![
            self.hash.lease_ms(),
            self.hash.owner.clone(),
            (self.config.wait_timeout.as_millis() as u64).to_string(),
            wall_ms(env),
        ];
        self.attempt(env, &self.acquire, args).await
    }

    async fn attempt<E: Env>(
        &self,
        env: &E,
        script: &Script,
        args: Vec<String>,
    ) -> Result<Attempt, LockError> {
        let started = env.mono_now();
        let reply = self
            .store
            .call(Command::Eval {
                script: script.clone(),
                keys: self.lock_keys(),
                args,
            })
            .await;
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

    /// Leaves the wait queue; `Ok(true)` when the caller was in it.
    pub async fn leave_queue(&self) -> Result<bool, LockError> {
        let reply = self
            .store
            .call(Command::Eval {
                script: self.leave_queue.clone(),
                keys: vec![self.config.queue_key(), self.config.timeout_key()],
                args: vec![self.hash.owner.clone()],
            })
            .await?;
        match reply {
            Reply::Int(n) => Ok(n > 0),
            Reply::Error(e) => Err(LockError::Server(e)),
            other => Err(LockError::UnexpectedReply(format!("{other:?}"))),
        }
    }

    /// Deletes the lock whoever holds it (the seed's ForceUnlock, Redisson's forceUnlock);
    /// `Ok(true)` when there was a lock to delete. Breaks mutual exclusion by design if the holder
    /// is still working; this client's own nesting depth is reset since it holds nothing after.
    pub async fn force_unlock(&self) -> Result<bool, LockError> {
        self.hash.depth.set(0);
        let reply = self
            .store
            .call(Command::Eval {
                script: self.force_unlock.clone(),
                keys: vec![
                    self.config.key.clone(),
                    self.config.queue_key(),
                    self.config.channel_prefix(),
                ],
                args: vec![UNLOCK_MESSAGE.into()],
            })
            .await?;
        match reply {
            Reply::Int(n) => Ok(n == 1),
            Reply::Error(e) => Err(LockError::Server(e)),
            other => Err(LockError::UnexpectedReply(format!("{other:?}"))),
        }
    }

    /// One level of release: `Ok(Some(true))` freed, `Ok(Some(false))` still held at a lower
    /// level, `Ok(None)` the client did not hold it (the lease had expired).
    async fn release_once<E: Env>(&self, env: &E) -> Result<Option<bool>, LockError> {
        let mut keys = self.lock_keys();
        keys.push(self.config.channel_prefix());
        let reply = self
            .store
            .call(Command::Eval {
                script: self.release.clone(),
                keys,
                args: vec![
                    UNLOCK_MESSAGE.into(),
                    self.hash.lease_ms(),
                    self.hash.owner.clone(),
                    wall_ms(env),
                ],
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

/// The client's wall clock as the scripts take it: whole ms since the epoch.
fn wall_ms<E: Env>(env: &E) -> String {
    (env.wall_now().as_millis() as u64).to_string()
}

impl<S: RedisStore> Lock for RedisFair<S> {
    /// Attempts ([`RedisFair::acquire_or_wait`]) and waits on the owner's channel between
    /// attempts, as Redisson's `tryLock` does ([`redisson_wait::acquire`]), until held; when the
    /// wait or the attempts run out, or the server answers an error, leaves the queue (best
    /// effort: if that request is lost too, the place expires after `wait_timeout`).
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        // Attempt at least twice per place-keeping deadline, or the waiter loses its place.
        let keep_place = self.config.wait_timeout / 2;
        let retry = Retry {
            delay: self.config.retry_delay.min(keep_place),
            count: self.config.retry_count,
            max_delay: self.config.max_retry_delay.min(keep_place),
        };
        let channel = self.config.channel_of(&self.hash.owner);
        let result = redisson_wait::acquire(
            env,
            &self.store,
            &channel,
            wait,
            retry,
            Some(keep_place),
            || self.poll_queue(env),
        )
        .await;
        if !matches!(result, Ok(Some(_))) {
            // Giving up (or failing) must not leave a place in the queue that blocks others
            // until its deadline.
            let _ = self.leave_queue().await;
        }
        result
    }

    /// Releases one level; true when the client still held the lock at that level.
    async fn release<E: Env>(&self, env: &E, _guard: &Guard) -> Result<bool, LockError> {
        self.hash.depth.set(self.hash.depth.get().saturating_sub(1));
        Ok(self.release_once(env).await?.is_some())
    }

    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        let renew = || async {
            let command = self.hash.renewal(&self.renew, &self.config.key);
            self.store.call(command).await.ok()
        };
        self.hash
            .keep_alive(env, guard, Watchdog::Reschedule, renew)
            .await
    }
}

/// `redis-fair` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "redis-fair",
    summary: "A fair (FIFO) reentrant lock: the hash, a queue of waiters and their deadlines (seed 003; Redisson's RedissonFairLock).",
    backend: Backend::Redis,
    servers: Servers::One,
    replicas: true,
    lease: Lease::Ttl { optional: false },
    fencing: Fencing::Unavailable(
        "its owner name is the same for every acquisition by a client",
    ),
    renews: true,
    reentrant: true,
    readers: false,
    order: Order::Fifo,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for RedisFair<S::Redis> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, env: &impl Env) -> Self {
        RedisFair::new(
            stores.redis_primary(),
            FairConfig {
                key: settings.key.clone(),
                ttl: settings.ttl_or_default(),
                drift_factor: settings.drift_factor,
                retry_delay: settings.retry.delay,
                retry_count: settings.retry.count,
                max_retry_delay: settings.retry.max_delay,
                wait_timeout: settings.queue_timeout,
            },
            format!("{}:1", env.new_token()),
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
