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
//! Redisson's client around the scripts changed between releases in ways that change verdicts,
//! modelled as the lock's variants ([`VARIANTS`], `params.variant`; the default is the current
//! release):
//! - the command re-send ([`super::resend`]): up to 3.23 an unlock whose reply was lost is sent
//!   again and applies twice, so an inner unlock frees the lock its holder still holds one level
//!   deep (Redisson issue #4871); 3.24 adds the unlock latch (a request id in `KEYS[3]`) under
//!   which a re-sent unlock applies once, and since 3.37 a single server's lock sends its acquire
//!   and unlock once; 3.48 re-sends 4 times (3 before) after equal-jitter delays (a fixed 1.5 s
//!   before);
//! - the watchdog's failure policy ([`Redisson::watchdog`]): up to 3.43 it stops after one
//!   renewal that failed (its re-sends included), and the lease runs out under a holder that
//!   works on; from 3.44 it logs and renews again at its next tick;
//! - with replicas ([`Settings::replicas`]: Redisson's Sentinel and replicated configurations;
//!   a single server's client sends no `WAIT`), what a lock command's `WAIT` is for
//!   ([`NoSync`]): from 3.12.5 every acquire, unlock and renewal goes out in a batch followed by
//!   `WAIT <replicas> 1000`, re-sent whole when its replies do not come; up to 3.16.6 the count
//!   is not read; from 3.16.7 a command no replica synced fails ("None of slaves were synced")
//!   and an acquisition that fails so leaves the lock in Redis under a client told it failed;
//!   3.20 releases it first and retries the acquisition and the unlock (3.20.1); 3.25 lengthens
//!   the error's message, which the release and the retry no longer recognise, until 3.47 gives
//!   the error a type of its own; up to 3.51 a retried unlock carries a new request id, which the
//!   latch does not know, so an inner unlock no replica synced applies twice (issue #6651).

use super::command::{Command, Reply, Script};
use super::owner_hash::{OwnerHash, Watchdog};
use super::redisson_wait::{self, Attempt};
use super::resend::{self, Resend};
use super::store::RedisStore;
use crate::describe::{
    Backend, Description, Fencing, Lease, LibraryVariant, Order, Registered, Servers, Settings,
};
use crate::env::{Env, LockEvent};
use crate::error::{LockError, StoreError};
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
/// verdict ([`Description::variants`], `params.variant`), the current one first. Where releases
/// within one range differ in something no story tells apart, the variant behaves as the newest
/// of them (the one it is named after) and its line says how the others differ.
pub const VARIANTS: &[LibraryVariant] = &[
    LibraryVariant {
        name: "redisson-3.52+",
        versions: "Redisson 3.52 and later (3.52 the newest read)",
        follows:
            "RedissonLock.java, RedissonBaseLock.java (unlockAsync), renewal/RenewalTask.java, \
                  renewal/LockTask.java, command/RedisExecutor.java, \
                  command/CommandAsyncService.java (syncedEval, handleNoSync), \
                  connection/ServiceManager.java (execute), config/EqualJitterDelay.java",
        about: "unlock latch; a single server's acquire and unlock sent once; commands re-sent 4 \
                times after equal-jitter delays; a failed renewal is logged and the watchdog \
                renews again at its next tick; with replicas, an acquisition no replica synced \
                is released and retried, an unlock retried under its own request id",
        formerly: &["redisson-3.44+"],
    },
    LibraryVariant {
        name: "redisson-3.51",
        versions: "Redisson 3.48–3.51",
        follows: "RedissonBaseLock.java (unlockAsync, unlockInnerAsync), \
                  connection/ServiceManager.java (execute)",
        about: "as 3.52+, but with replicas an unlock no replica synced is retried under a new \
                request id, which its latch does not know: an inner unlock applies twice \
                (issue #6651, fixed in 3.52)",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.47",
        versions: "Redisson 3.47",
        follows: "config/BaseConfig.java (retryAttempts, retryInterval), \
                  command/RedisExecutor.java, connection/ServiceManager.java (execute)",
        about: "as 3.51, but commands are re-sent 3 times, 1.5 s after each lost reply, and an \
                operation no replica synced is retried 3 times, 1.5 s apart",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.46",
        versions: "Redisson 3.44–3.46",
        follows: "command/CommandAsyncService.java (syncedEval, handleNoSync), \
                  connection/ServiceManager.java (execute), renewal/RenewalTask.java",
        about: "as 3.47, but with replicas an acquisition no replica synced fails and leaves the \
                lock in Redis, without a retry: the error's message (longer since 3.25) is no \
                longer the one handleNoSync and the retry compare",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.43",
        versions: "Redisson 3.37–3.43",
        follows: "RedissonLock.java, RedissonBaseLock.java (renewExpiration), \
                  command/RedisExecutor.java, command/CommandAsyncService.java (syncedEval)",
        about: "as 3.46, but the watchdog stops after one failed renewal (one no replica synced \
                too): the lease runs out under a holder that works on",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.36",
        versions: "Redisson 3.25–3.36",
        follows: "RedissonLock.java, RedissonBaseLock.java (unlockInnerAsync, renewExpiration), \
                  command/RedisExecutor.java, command/CommandAsyncService.java (syncedEval)",
        about: "every command re-sent after a lost reply, the unlock under a latch that makes \
                the re-send apply once; the watchdog stops after one failed renewal; with \
                replicas, as 3.46 (3.25 and 3.26 read the replicas' count before every command)",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.24",
        versions: "Redisson 3.24",
        follows: "RedissonBaseLock.java (unlockAsync, unlockInnerAsync, handleNoSync), \
                  connection/ServiceManager.java (execute)",
        about: "as 3.36, but with replicas an acquisition no replica synced is released and \
                retried (3 times, 1.5 s apart), and an unlock retried under a new request id: \
                an inner unlock applies twice",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.23",
        versions: "Redisson 3.20–3.23",
        follows: "RedissonLock.java (unlockInnerAsync), RedissonBaseLock.java (renewExpiration, \
                  evalWriteAsync, handleNoSync, execute), command/RedisExecutor.java",
        about: "every command re-sent after a lost reply, the unlock too, without a latch: \
                applied twice, an inner unlock frees the lock under its holder (issue #4871); \
                the watchdog stops after one failed renewal; with replicas as 3.24 (3.20.0 \
                releases without retrying)",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.19",
        versions: "Redisson 3.16.7–3.19",
        follows: "RedissonBaseLock.java (evalWriteAsync), config/Config.java \
                  (checkLockSyncedSlaves)",
        about: "as 3.23, but with replicas an acquisition no replica synced fails and leaves the \
                lock in Redis, without a retry (3.17.5's rule, none synced of those connected; \
                3.16.7–3.17.4 fail on fewer than all)",
        formerly: &[],
    },
    LibraryVariant {
        name: "redisson-3.16",
        versions: "Redisson 3.10–3.16.6",
        follows: "RedissonLock.java (evalWriteAsync, createCommandBatchService), \
                  command/CommandBatchService.java, command/RedisExecutor.java",
        about: "as 3.19, but with replicas WAIT's count is not read: an acquisition no replica \
                synced goes on (3.12.5–3.16.6; before 3.12.5 no WAIT at all)",
        formerly: &[],
    },
];

// One behaviour per listed variant, in the same order ([`Settings::variant_index`]).
const _: () = assert!(Redisson::ALL.len() == VARIANTS.len());

/// `slavesSyncTimeout` (`config/Config.java`, 1000 ms; before it was a setting, the literal
/// `syncSlaves(…, 1, SECONDS)` of `RedissonLock`): the `WAIT` after each lock command.
pub const SLAVES_SYNC_TIMEOUT: Duration = Duration::from_millis(1_000);

/// The error of a lock command no replica synced (Redisson's `NoSyncedSlavesException`, an
/// `IllegalStateException` before 3.47; 3.25 added advice to the message).
pub const NO_SYNC: &str = "None of slaves were synced";

/// What a Redisson release range does around the scripts: the client behaviours that change
/// verdicts, one per [`VARIANTS`] entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redisson {
    /// 3.52 and later: the unlock latch; a single server's acquire and unlock sent once
    /// (`syncedEvalNoRetry`); every other command re-sent 4 times after equal-jitter delays; a
    /// renewal that failed all the same is followed by the next one; with replicas
    /// [`NoSync::Released`], an unlock retried under its request id.
    Current,
    /// 3.48–3.51: as [`Redisson::Current`], but a retried unlock takes a new request id.
    V3_51,
    /// 3.47: as [`Redisson::V3_51`], with 3 re-sends and retries at a fixed 1.5 s.
    V3_47,
    /// 3.44–3.46: as [`Redisson::V3_47`], but a lock command no replica synced fails
    /// ([`NoSync::Fails`]).
    V3_46,
    /// 3.37–3.43: as [`Redisson::V3_46`], but the watchdog stops after one failed renewal.
    V3_43,
    /// 3.25–3.36: the unlock latch; every command re-sent (`evalWriteAsync`); the watchdog stops
    /// after one failed renewal; [`NoSync::Fails`].
    V3_36,
    /// 3.24: as [`Redisson::V3_36`], but [`NoSync::Released`], a retried unlock under a new
    /// request id.
    V3_24,
    /// 3.20–3.23: every command re-sent, the unlock without a latch; the watchdog stops after
    /// one failed renewal; [`NoSync::Released`]. (3.10.0–3.15.1 re-sent at once on the timeout,
    /// without the `retryInterval` modelled here: `CommandAsyncService`'s, then
    /// `RedisExecutor`'s, timeout task; before 3.10.0 a response timeout failed the command.)
    V3_23,
    /// 3.16.7–3.19: as [`Redisson::V3_23`], but [`NoSync::Fails`].
    V3_19,
    /// 3.10–3.16.6: as [`Redisson::V3_19`], but [`NoSync::Ignored`].
    V3_16,
}

/// What a range does when the `WAIT` after a lock command counts no replica that synced while
/// some are connected (`checkLockSyncedSlaves`, `true` by default since it came in 3.17.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoSync {
    /// Nothing: the count is not read (3.12.5–3.16.6; before 3.12.5 there is no `WAIT`).
    Ignored,
    /// The command fails with [`NO_SYNC`] and nothing undoes it: an acquisition leaves the lock
    /// in Redis under a client told it failed, until its lease runs out (no watchdog renews it).
    /// 3.16.7–3.19 (`RedissonBaseLock.evalWriteAsync`) and 3.25–3.46, whose `handleNoSync` and
    /// `ServiceManager.execute` compare the message with the shorter one it had before 3.25.
    Fails,
    /// `handleNoSync` (3.20): an acquisition no replica synced runs the unlock script once
    /// (`unlockInnerAsync`: it gives back what it just took) and fails; the acquisition and the
    /// unlock are retried by `ServiceManager.execute` (3.20.1) as often as the client re-sends a
    /// command, after its delay. A retried unlock keeps its request id, and so its latch, only
    /// from 3.52 (`unlock_id_kept`).
    Released {
        /// Whether a retried unlock keeps its request id (3.52 and later).
        unlock_id_kept: bool,
    },
}

impl Redisson {
    /// Each range, in [`VARIANTS`]' order.
    pub const ALL: [Redisson; 10] = [
        Redisson::Current,
        Redisson::V3_51,
        Redisson::V3_47,
        Redisson::V3_46,
        Redisson::V3_43,
        Redisson::V3_36,
        Redisson::V3_24,
        Redisson::V3_23,
        Redisson::V3_19,
        Redisson::V3_16,
    ];

    /// Whether its unlock carries a request id under which the server keeps the outcome.
    pub fn unlock_latch(self) -> bool {
        !matches!(self, Redisson::V3_23 | Redisson::V3_19 | Redisson::V3_16)
    }

    /// How it re-sends a command that got no reply (renewals in every range).
    pub fn resend(self) -> Resend {
        match self {
            Redisson::Current | Redisson::V3_51 => Resend::FOUR_JITTERED,
            _ => Resend::THREE,
        }
    }

    /// Whether a single server's lock re-sends its acquire and unlock too (before 3.37; with
    /// replicas every range re-sends their batch).
    pub fn resends_lock_commands(self) -> bool {
        matches!(
            self,
            Redisson::V3_36 | Redisson::V3_24 | Redisson::V3_23 | Redisson::V3_19 | Redisson::V3_16
        )
    }

    /// What its watchdog does after a renewal that failed.
    fn watchdog(self) -> Watchdog {
        match self {
            Redisson::Current | Redisson::V3_51 | Redisson::V3_47 | Redisson::V3_46 => {
                Watchdog::Reschedule
            }
            _ => Watchdog::StopOnFailure,
        }
    }

    /// Whether its renewal is the batched script of `renewal/LockTask.java` (3.44 and later).
    fn batched_renewal(self) -> bool {
        self.watchdog() == Watchdog::Reschedule
    }

    /// What a lock command no replica synced comes to, with replicas.
    pub fn no_sync(self) -> NoSync {
        match self {
            Redisson::Current => NoSync::Released {
                unlock_id_kept: true,
            },
            Redisson::V3_51 | Redisson::V3_47 | Redisson::V3_24 | Redisson::V3_23 => {
                NoSync::Released {
                    unlock_id_kept: false,
                }
            }
            Redisson::V3_46 | Redisson::V3_43 | Redisson::V3_36 | Redisson::V3_19 => NoSync::Fails,
            Redisson::V3_16 => NoSync::Ignored,
        }
    }

    /// Whether it asks the primary for its replicas (`INFO replication`, `connected_slaves`)
    /// before every lock command, as 3.18.1–3.26 do (up to 3.18.0 it counted the replicas it
    /// was connected to, as fresh); from 3.27 it keeps the count and asks again only after a
    /// `WAIT` that counted otherwise (`MasterSlaveEntry.availableSlaves`).
    fn asks_replicas_each_time(self) -> bool {
        matches!(
            self,
            Redisson::V3_24 | Redisson::V3_23 | Redisson::V3_19 | Redisson::V3_16
        )
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
    /// Replicas of the server (0: a single server, Redisson's single-server configuration):
    /// with any, each lock command is followed by `WAIT`.
    pub replicas: u32,
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
    /// With replicas, how many the client counts on (`availableSlaves`), when it knows.
    available: Cell<Option<u32>>,
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
            renew: Script::new(if redisson.batched_renewal() {
                RENEW_BATCH_LUA
            } else {
                RENEW_LUA
            }),
            unlocks: Cell::new(0),
            available: Cell::new(None),
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

    /// The re-send a single server's lock gives its own acquire and unlock, in the ranges that
    /// re-send them.
    fn lock_resend(&self) -> Option<Resend> {
        self.redisson
            .resends_lock_commands()
            .then(|| self.redisson.resend())
    }

    /// How many replicas the client counts on for its `WAIT`: `INFO replication`'s
    /// `connected_slaves` on the primary, asked when not known (see
    /// [`Redisson::asks_replicas_each_time`]). An `INFO` that got no reply fails the lock
    /// command before it was sent.
    async fn available_replicas<E: Env>(&self, env: &E) -> Result<u32, StoreError> {
        if let Some(n) = self.available.get() {
            return Ok(n);
        }
        let info = Command::Info {
            section: "replication".into(),
        };
        let reply = self
            .redisson
            .resend()
            .call(&self.store, env, info)
            .await
            .map_err(|e| StoreError::Unreachable(format!("INFO replication: {e}")))?;
        let n = match reply {
            Reply::Bulk(text) => connected_slaves(&text),
            _ => 0,
        };
        if !self.redisson.asks_replicas_each_time() {
            self.available.set(Some(n));
        }
        Ok(n)
    }

    /// Sends one of the lock's own commands as the range's client sends it. On a single server:
    /// once, or with `single`'s re-sends. With replicas (Redisson's `syncedEval`): in a batch
    /// followed by `WAIT <replicas> 1000`, the batch re-sent whole when its replies do not come
    /// (its timeout lengthened by the `WAIT`'s). The reply, and what the `WAIT` came to.
    async fn send_locked<E: Env>(
        &self,
        env: &E,
        command: Command,
        single: Option<Resend>,
    ) -> Result<(Reply, Sync), StoreError> {
        if self.config.replicas == 0 {
            let reply = resend::call(&self.store, env, single.as_ref(), command).await?;
            return Ok((reply, Sync::Synced));
        }
        let available = self.available_replicas(env).await?;
        let resend = self.redisson.resend();
        if available == 0 {
            // No replica counted on: a batch without `WAIT`.
            let reply = resend.call(&self.store, env, command).await?;
            return Ok((reply, Sync::Synced));
        }
        let batch = resend.waiting_longer(SLAVES_SYNC_TIMEOUT);
        let (reply, waited) = batch
            .run(env, || async {
                let reply = self.store.call(command.clone()).await?;
                let wait = Command::Wait {
                    replicas: available,
                    timeout_ms: SLAVES_SYNC_TIMEOUT.as_millis() as u64,
                };
                let waited = self.store.call_blocking(wait, SLAVES_SYNC_TIMEOUT).await?;
                Ok((reply, waited))
            })
            .await?;
        let synced = match waited {
            Reply::Int(n) => u32::try_from(n).unwrap_or(0),
            // An error in the batch fails the command, whatever its script did (a `WAIT`
            // unblocked because the server was made a replica); the count is kept.
            Reply::Error(e) => return Ok((reply, Sync::Refused(e))),
            _ => 0,
        };
        if synced != available {
            // Asked again before the next command.
            self.available.set(None);
        }
        let sync = if synced == 0 {
            Sync::NoneSynced
        } else {
            Sync::Synced
        };
        Ok((reply, sync))
    }

    /// One attempt: held, refused, or unanswered.
    async fn attempt<E: Env>(&self, env: &E) -> Result<Tried, LockError> {
        Ok(self.attempt_reading_ttl(env).await?.0)
    }

    /// One attempt, as Redisson's wait needs it: with the lock's PTTL when refused. With
    /// replicas, an attempt no replica synced is what [`Redisson::no_sync`] says.
    async fn attempt_reading_ttl<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let mut retried = 0;
        loop {
            let started = env.mono_now();
            let command = Command::Eval {
                script: self.acquire.clone(),
                keys: vec![self.config.key.clone()],
                args: vec![self.hash.lease_ms(), self.hash.owner.clone()],
            };
            let (reply, sync) = match self.send_locked(env, command, self.lock_resend()).await {
                Ok((reply, sync)) => (Ok(reply), sync),
                Err(e) => (Err(e), Sync::Synced),
            };
            let no_sync = self.redisson.no_sync();
            if let Sync::Refused(e) = sync {
                env.observe(LockEvent::Attempt {
                    acquired: false,
                    accepted: 1,
                    of: 1,
                });
                return Err(LockError::Server(e));
            }
            if sync == Sync::NoneSynced && no_sync != NoSync::Ignored {
                env.observe(LockEvent::Attempt {
                    acquired: false,
                    accepted: 1,
                    of: 1,
                });
                if no_sync == NoSync::Fails {
                    return Err(LockError::Server(NO_SYNC.into()));
                }
                // `handleNoSync`: the unlock script once, whatever it comes to; then the
                // acquisition fails, and `ServiceManager.execute` tries it again.
                let latch = self.new_latch();
                let _ = self.unlock_inner(env, latch.as_deref()).await;
                let resend = self.redisson.resend();
                if retried == resend.attempts {
                    return Err(LockError::Server(NO_SYNC.into()));
                }
                retried += 1;
                env.sleep(resend.delay.calc(env, retried)).await;
                continue;
            }
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
            return Ok((tried, ttl));
        }
    }

    /// The channel its releases publish on and its waiters subscribe to
    /// (`RedissonLock.getChannelName`).
    fn channel(&self) -> String {
        format!("redisson_lock__channel:{{{}}}", self.config.key)
    }

    /// A new unlock request id's latch key, in the ranges that have the latch.
    fn new_latch(&self) -> Option<String> {
        self.redisson.unlock_latch().then(|| {
            let n = self.unlocks.get();
            self.unlocks.set(n + 1);
            // Redisson's request id is 16 random bytes in hex; the owner's own random part and
            // the unlock's number are as unique.
            let owner = self.hash.owner.split(':').next().unwrap_or_default();
            format!(
                "{}{owner}{n:x}",
                super::unlock_latch_prefix(&self.config.key)
            )
        })
    }

    /// The unlock script once (`unlockInnerAsync`), under `latch` when the range has one: its
    /// reply, and what its `WAIT` came to. Once answered (and synced), Redisson deletes the
    /// latch (`unlockInnerAsync`'s `thenApply`), without waiting for it; here the release waits
    /// for that reply too. A `DEL` that got no reply, or one never sent because the unlock
    /// failed, leaves the latch to its expiry.
    async fn unlock_inner<E: Env>(
        &self,
        env: &E,
        latch: Option<&str>,
    ) -> Result<(Reply, Sync), StoreError> {
        let mut keys = vec![self.config.key.clone(), self.channel()];
        let mut args = vec![
            "0".into(),
            self.hash.lease_ms(),
            self.hash.owner.clone(),
            "publish".into(),
        ];
        if let Some(latch) = latch {
            keys.push(latch.to_string());
            args.push(self.redisson.resend().latch_ms(env).to_string());
        }
        let command = Command::Eval {
            script: self.release.clone(),
            keys,
            args,
        };
        let (reply, sync) = self.send_locked(env, command, self.lock_resend()).await?;
        let failed = match &sync {
            Sync::Synced => false,
            Sync::NoneSynced => self.redisson.no_sync() != NoSync::Ignored,
            Sync::Refused(_) => true,
        };
        if let (Some(latch), false) = (latch, failed) {
            let del = Command::Del {
                keys: vec![latch.to_string()],
            };
            let _ = self.store.call(del).await;
        }
        Ok((reply, sync))
    }

    /// One level of release: `Ok(Some(true))` freed, `Ok(Some(false))` still held at a lower
    /// level, `Ok(None)` the client did not hold it (the lease had expired). With replicas, an
    /// unlock no replica synced is what [`Redisson::no_sync`] says (`unlockAsync`).
    async fn release_once<E: Env>(&self, env: &E) -> Result<Option<bool>, LockError> {
        let mut latch = self.new_latch();
        let mut retried = 0;
        loop {
            let (reply, sync) = self.unlock_inner(env, latch.as_deref()).await?;
            match (sync, self.redisson.no_sync()) {
                (Sync::Synced, _) | (Sync::NoneSynced, NoSync::Ignored) => {}
                (Sync::Refused(e), _) => return Err(LockError::Server(e)),
                // The unlock applied; the client is told it failed.
                (Sync::NoneSynced, NoSync::Fails) => return Err(LockError::Server(NO_SYNC.into())),
                (Sync::NoneSynced, NoSync::Released { unlock_id_kept }) => {
                    let resend = self.redisson.resend();
                    if retried == resend.attempts {
                        return Err(LockError::Server(NO_SYNC.into()));
                    }
                    retried += 1;
                    env.sleep(resend.delay.calc(env, retried)).await;
                    if !unlock_id_kept {
                        // Up to 3.51 `unlockInnerAsync` draws a request id at each call.
                        latch = self.new_latch();
                    }
                    continue;
                }
            }
            return match reply {
                Reply::Int(1) => Ok(Some(true)),
                Reply::Int(0) => Ok(Some(false)),
                Reply::Nil => Ok(None),
                Reply::Error(e) => Err(LockError::Server(e)),
                other => Err(LockError::UnexpectedReply(format!("{other:?}"))),
            };
        }
    }
}

/// What the `WAIT` after a lock command came to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Sync {
    /// Some replica synced, or none was counted on (a single server, none connected).
    Synced,
    /// None of those counted on synced.
    NoneSynced,
    /// The batch failed with this error reply: the command fails.
    Refused(String),
}

/// `connected_slaves` in an `INFO replication` reply (0 when absent).
fn connected_slaves(info: &str) -> u32 {
    info.lines()
        .find_map(|line| line.trim().strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
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
        let renew = || async {
            let command = self.hash.renewal(&self.renew, &self.config.key);
            match self.send_locked(env, command, Some(resend)).await {
                Ok((reply, Sync::Synced)) => Some(reply),
                // A renewal no replica synced failed, where the count is read.
                Ok((reply, Sync::NoneSynced)) => {
                    (self.redisson.no_sync() == NoSync::Ignored).then_some(reply)
                }
                Ok((_, Sync::Refused(_))) | Err(_) => None,
            }
        };
        self.hash
            .keep_alive(env, guard, self.redisson.watchdog(), renew)
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
                replicas: settings.replicas,
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

#[cfg(test)]
mod tests {
    use super::connected_slaves;

    #[test]
    fn the_replicas_count_is_info_replications_connected_slaves() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=…\r\n";
        assert_eq!(connected_slaves(info), 2);
        assert_eq!(connected_slaves("# Replication\r\nrole:master\r\n"), 0);
    }
}
