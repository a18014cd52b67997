//! `mysql-row`: seed 000's reentrant lock table, guarded by InnoDB row locks.
//!
//! Every acquisition and release is one short transaction that starts with
//! `SELECT … WHERE resource_name = ? FOR UPDATE`: the row lock (or, when there is no row, the
//! lock on the gap where it would go) serialises everyone who looks at the lock, so reading the
//! row and writing it are one atomic step. No row: insert it with count 1. The caller's row: add
//! one (reentrancy is counted by the server). Someone else's: roll back, wait, try again.
//! Release: count 1 deletes the row, more takes one away.
//!
//! Without a lease the lock is held until released: a holder that crashes leaves it held forever
//! (the seed's "锁超时 需要手动管理": lock timeouts must be managed by hand). With `ttl`, a row
//! not written for longer than the TTL BY THE DATABASE'S CLOCK may be taken over — a lease, and
//! as unsafe as every lease when the holder pauses past it or the database's clock jumps. The
//! client counts its validity down on its own monotonic clock, as the Redis locks do.

use super::retry_attempts;
use super::store::{SqlStore, Statement};
use super::{
    affected, next_fence, pause, rollback, select_for_update, Abort, Attempt, CLEANUP_ATTEMPTS,
    UNBOUNDED_VALIDITY,
};
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::Retry;
use crate::stores::Stores;
use std::cell::RefCell;
use std::time::Duration;

/// Settings of a [`MysqlRow`] lock.
#[derive(Clone, Debug, PartialEq)]
pub struct MysqlRowConfig {
    /// The row's `resource_name`.
    pub resource: String,
    /// The lease: a row not written for this long (by the database's clock) may be taken over.
    /// `None`: the row is held until released.
    pub ttl: Option<Duration>,
    /// Clock drift allowance as a fraction of the TTL; the client subtracts
    /// `ttl × drift_factor + 2 ms` from its validity (as the Redis locks do).
    pub drift_factor: f64,
    /// Base delay between attempts; each wait is random in `[d/2, d]`.
    pub retry_delay: Duration,
    /// Attempts per blocking acquire; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// The longest delay that attempts without an answer back off to ([`crate::retry`]);
    /// at least `retry_delay`.
    pub max_retry_delay: Duration,
}

impl MysqlRowConfig {
    /// How long after sending the granting statement the client trusts the lock.
    pub fn validity(&self) -> Duration {
        match self.ttl {
            Some(ttl) => {
                ttl.saturating_sub(ttl.mul_f64(self.drift_factor) + Duration::from_millis(2))
            }
            None => UNBOUNDED_VALIDITY,
        }
    }
}

/// What one transaction decided to write, once it has a fencing token.
enum Grant {
    /// No row: insert it.
    Insert,
    /// Our row at this count: one more level.
    Reenter(u32),
    /// Someone else's, with a lease: take it over if the lease has run out.
    TakeOver,
}

/// Why a release transaction did not finish.
enum Failure {
    /// It was rolled back (or never reached the server): it may run again.
    Retry(LockError),
    /// Running it again could be wrong (a commit without a reply) or cannot help.
    Fatal(LockError),
}

impl From<Abort> for Failure {
    fn from(abort: Abort) -> Self {
        match abort {
            // Before the commit, a lost reply means a dropped connection and a rollback.
            Abort::Store(e) => Failure::Retry(e.into()),
            Abort::Sql(e) if e.is_contention() || e.is_disconnect() => {
                Failure::Retry(LockError::Server(e.to_string()))
            }
            Abort::Sql(e) => Failure::Fatal(LockError::Server(e.to_string())),
            Abort::Unexpected(what) => Failure::Fatal(LockError::UnexpectedReply(what)),
        }
    }
}

/// The lock-table lock of one client, named by its `locker` (the seed's `ip:port`).
pub struct MysqlRow<S> {
    store: S,
    config: MysqlRowConfig,
    locker: String,
}

impl<S: SqlStore> MysqlRow<S> {
    /// A lock for the client named `locker`, which must be unique per client: two instances with
    /// the same locker share the lock as one reentrant owner.
    pub fn new(store: S, config: MysqlRowConfig, locker: String) -> Self {
        MysqlRow {
            store,
            config,
            locker,
        }
    }

    /// The client's connection.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// One attempt: one transaction, never waiting for the holder to let go (it may wait on the
    /// server for the row lock of another transaction, up to `innodb_lock_wait_timeout`).
    pub async fn try_acquire<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let attempt = self.attempt(env).await;
        Attempt::observe(&attempt, env);
        attempt
    }

    async fn attempt<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let decided = self.decide_and_write(env).await;
        let (fence, started) = match decided {
            Ok(Some(granted)) => granted,
            Ok(None) => {
                rollback(&self.store).await;
                return Ok(Attempt::Busy);
            }
            Err(abort) => {
                rollback(&self.store).await;
                return abort.into_attempt();
            }
        };
        match self.store.execute(Statement::Commit).await {
            Ok(Ok(_)) => {}
            Err(e) if e.maybe_applied() => {
                // The commit may have happened: take back exactly the grant this token names.
                self.undo_grant(env, fence).await;
                return Ok(Attempt::Unknown);
            }
            // Not sent, or the connection was gone: the transaction did not commit.
            Err(_) => return Ok(Attempt::Interrupted),
            Ok(Err(e)) if e.is_disconnect() => return Ok(Attempt::Interrupted),
            Ok(Err(e)) => return Err(LockError::Server(e.to_string())),
        }
        let guard = Guard {
            token: self.locker.clone(),
            acquired_at: started,
            valid_until: started.saturating_add(self.config.validity()),
            fence: Some(fence),
        };
        if env.mono_now() >= guard.valid_until {
            let _ = self.release(env, &guard).await;
            return Ok(Attempt::Expired);
        }
        Ok(Attempt::Acquired(guard))
    }

    /// The transaction up to its commit: `Some((fence, sent))` when the row is written for us
    /// (`sent`: client monotonic time the granting statement was sent), `None` when someone else
    /// holds it.
    async fn decide_and_write<E: Env>(&self, env: &E) -> Result<Option<(u64, Duration)>, Abort> {
        let resource = &self.config.resource;
        affected(&self.store, Statement::Begin).await?;
        let row = select_for_update(&self.store, resource).await?;
        let grant = match &row {
            None => Grant::Insert,
            Some(row) if row.locker == self.locker => Grant::Reenter(row.reentrant_cnt),
            Some(_) if self.config.ttl.is_some() => Grant::TakeOver,
            Some(_) => return Ok(None),
        };
        // Drawn under the row lock (or the gap lock that keeps anyone else from inserting), so
        // no later grant can draw a smaller one.
        let fence = next_fence(&self.store).await?;
        let (resource, locker) = (resource.clone(), self.locker.clone());
        let statement = match grant {
            Grant::Insert => Statement::Insert {
                resource,
                locker,
                count: 1,
                version: fence,
            },
            Grant::Reenter(count) => Statement::Update {
                resource,
                locker,
                count: count.saturating_add(1),
                version: fence,
            },
            Grant::TakeOver => Statement::TakeOver {
                resource,
                locker,
                version: fence,
                ttl_ms: self.config.ttl.map_or(0, |ttl| ttl.as_millis() as u64),
            },
        };
        let started = env.mono_now();
        // A take-over that changes nothing found the lease still running.
        if affected(&self.store, statement).await? == 0 {
            return Ok(None);
        }
        Ok(Some((fence, started)))
    }

    /// Best effort after a commit without a reply: if the row still carries `fence` as ours,
    /// the commit happened, and one level is released again.
    async fn undo_grant<E: Env>(&self, env: &E, fence: u64) {
        let _ = self.release_level(env, Some(fence)).await;
    }

    /// Tries until the lock is acquired, `wait` (client monotonic time) has passed, or
    /// `retry_count` attempts failed; `Ok(None)` in the last two cases.
    pub async fn acquire<E: Env>(
        &self,
        env: &E,
        wait: Duration,
    ) -> Result<Option<Guard>, LockError> {
        let retry = Retry {
            delay: self.config.retry_delay,
            count: self.config.retry_count,
            max_delay: self.config.max_retry_delay,
        };
        retry_attempts(env, wait, retry, || self.try_acquire(env)).await
    }

    /// Releases one level if the row is still ours. `Ok(false)`: it was not (taken over after the
    /// lease ran out, or never ours). A commit without a reply is an error rather than a retry:
    /// releasing again could take away a level the client still holds.
    pub async fn release<E: Env>(&self, env: &E, guard: &Guard) -> Result<bool, LockError> {
        if guard.token != self.locker {
            return Ok(false);
        }
        self.release_level(env, None).await
    }

    /// One release transaction, retried while it was rolled back before its commit; with
    /// `only_fence`, only if the row's version is that fence (undoing one particular grant).
    async fn release_level<E: Env>(
        &self,
        env: &E,
        only_fence: Option<u64>,
    ) -> Result<bool, LockError> {
        let attempts = self.config.retry_count.unwrap_or(CLEANUP_ATTEMPTS).max(1);
        let mut tried = 0;
        loop {
            tried += 1;
            match self.release_once(only_fence).await {
                Ok(released) => return Ok(released),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry(e)) if tried >= attempts => return Err(e),
                Err(Failure::Retry(_)) => pause(env, self.config.retry_delay).await,
            }
        }
    }

    /// One release transaction.
    async fn release_once(&self, only_fence: Option<u64>) -> Result<bool, Failure> {
        let released = match self.release_write(only_fence).await {
            Ok(released) => released,
            Err(abort) => {
                rollback(&self.store).await;
                return Err(abort.into());
            }
        };
        if !released {
            rollback(&self.store).await;
            return Ok(false);
        }
        match self.store.execute(Statement::Commit).await {
            Ok(Ok(_)) => Ok(true),
            // Unknown: not retried (see `release`).
            Err(e) if e.maybe_applied() => Err(Failure::Fatal(e.into())),
            Err(e) => Err(Failure::Retry(e.into())),
            Ok(Err(e)) if e.is_disconnect() => {
                Err(Failure::Retry(LockError::Server(e.to_string())))
            }
            Ok(Err(e)) => Err(Failure::Fatal(LockError::Server(e.to_string()))),
        }
    }

    /// The release transaction up to its commit; false when the row is not ours (and, with
    /// `only_fence`, not of that grant).
    async fn release_write(&self, only_fence: Option<u64>) -> Result<bool, Abort> {
        let resource = &self.config.resource;
        affected(&self.store, Statement::Begin).await?;
        let Some(row) = select_for_update(&self.store, resource).await? else {
            return Ok(false);
        };
        if row.locker != self.locker || only_fence.is_some_and(|fence| row.version != fence) {
            return Ok(false);
        }
        let statement = if row.reentrant_cnt <= 1 {
            Statement::Delete {
                resource: resource.clone(),
                locker: Some(self.locker.clone()),
            }
        } else {
            Statement::Update {
                resource: resource.clone(),
                locker: self.locker.clone(),
                count: row.reentrant_cnt - 1,
                version: row.version,
            }
        };
        Ok(affected(&self.store, statement).await? == 1)
    }
}

impl<S: SqlStore> Lock for MysqlRow<S> {
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        MysqlRow::acquire(self, env, wait).await
    }

    /// Releases one level (the server counts the levels).
    async fn release<E: Env>(&self, env: &E, guard: &Guard) -> Result<bool, LockError> {
        MysqlRow::release(self, env, guard).await
    }

    /// Nothing renews the row: the seed's lock has no watchdog, and a lease it had would only
    /// hide the pause it cannot survive. Returns at once.
    async fn keep_alive<E: Env>(&self, _env: &E, _guard: &RefCell<Guard>) {}
}

/// `mysql-row` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "mysql-row",
    summary: "A reentrant lock row taken in short transactions with SELECT ... FOR UPDATE, with an optional lease (seed 000).",
    backend: Backend::Mysql,
    servers: Servers::One,
    replicas: false,
    lease: Lease::Ttl { optional: true },
    fencing: Fencing::Token,
    renews: false,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for MysqlRow<S::Sql> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, env: &impl Env) -> Self {
        MysqlRow::new(
            stores.mysql(),
            MysqlRowConfig {
                resource: settings.key.clone(),
                ttl: settings.ttl,
                drift_factor: settings.drift_factor,
                retry_delay: settings.retry.delay,
                retry_count: settings.retry.count,
                max_retry_delay: settings.retry.max_delay,
            },
            env.new_token(),
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
