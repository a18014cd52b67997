//! `mysql-for-update-held`: the common production pattern — open a transaction,
//! `SELECT … FOR UPDATE` the resource's row, do the critical section, commit.
//!
//! The row lock of the open transaction IS the lock: the server queues the waiters (each one's
//! `SELECT` blocks on the server, up to `innodb_lock_wait_timeout`, then fails with 1205 and is
//! tried again) and hands the row to the next one when the holder commits — or when the server
//! ends the holder's transaction without being asked: it closes a connection idle for longer than
//! `wait_timeout` and rolls its transaction back. A holder that does its work OUTSIDE the
//! database (the very reason to want a lock) sends nothing while working, so a pause longer than
//! `wait_timeout` hands its lock to the next waiter while it still believes it holds it. Its
//! `COMMIT` then fails with 2006 ("server has gone away"): the release says `false`, too late.
//!
//! Fencing: each grant draws a token from the fence sequence while holding the row lock and
//! writes it into the row's `version`. The write is part of the transaction, so it is rolled back
//! with it; the sequence is not, so the next holder's token is larger either way.

use super::retry_attempts;
use super::store::{SqlError, SqlStore, Statement};
use super::{
    affected, next_fence, rollback, select_for_update, Abort, Attempt, UNBOUNDED_VALIDITY,
};
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::Env;
use crate::error::{LockError, StoreError};
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::Retry;
use crate::stores::Stores;
use std::cell::RefCell;
use std::time::Duration;

/// Settings of a [`MysqlForUpdateHeld`] lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlForUpdateHeldConfig {
    /// The resource's row (`resource_name`); created, unlocked, on first use.
    pub resource: String,
    /// Base delay before trying again after a lock wait timed out; each wait is random in
    /// `[d/2, d]`.
    pub retry_delay: Duration,
    /// Attempts per blocking acquire; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// The longest delay that attempts without an answer back off to ([`crate::retry`]);
    /// at least `retry_delay`.
    pub max_retry_delay: Duration,
}

/// A lock that is the row lock of this client's open transaction.
pub struct MysqlForUpdateHeld<S> {
    store: S,
    config: MysqlForUpdateHeldConfig,
    /// The token of the acquisition whose transaction is open on the connection.
    held: RefCell<Option<String>>,
}

impl<S: SqlStore> MysqlForUpdateHeld<S> {
    /// A lock on the row `config.resource` through `store`, which this lock uses alone: any other
    /// statement on the connection while it holds would run inside its transaction.
    pub fn new(store: S, config: MysqlForUpdateHeldConfig) -> Self {
        MysqlForUpdateHeld {
            store,
            config,
            held: RefCell::new(None),
        }
    }

    /// The client's connection.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Whether the client believes it holds the lock (its transaction is open as far as it
    /// knows; the server may have ended it).
    pub fn is_held(&self) -> bool {
        self.held.borrow().is_some()
    }

    /// One attempt: waits on the server for the row, up to `innodb_lock_wait_timeout`. Not
    /// reentrant: while held, an attempt is [`Attempt::Busy`] at once, because its `BEGIN` would
    /// commit the open transaction and so release the lock.
    pub async fn try_acquire<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let attempt = if self.is_held() {
            Ok(Attempt::Busy)
        } else {
            self.attempt(env).await
        };
        Attempt::observe(&attempt, env);
        attempt
    }

    async fn attempt<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        // Twice at most: the first pass may find the row missing and create it.
        for _ in 0..2 {
            let token = env.new_token();
            let started = env.mono_now();
            match self.lock_row(&token).await {
                Ok(Some(fence)) => {
                    *self.held.borrow_mut() = Some(token.clone());
                    return Ok(Attempt::Acquired(Guard {
                        token,
                        acquired_at: started,
                        valid_until: started.saturating_add(UNBOUNDED_VALIDITY),
                        fence: Some(fence),
                    }));
                }
                Ok(None) => {
                    rollback(&self.store).await;
                    if let Err(abort) = self.create_row().await {
                        return abort.into_attempt();
                    }
                }
                Err(abort) => {
                    rollback(&self.store).await;
                    return abort.into_attempt();
                }
            }
        }
        Ok(Attempt::Busy)
    }

    /// `BEGIN`, lock the row, draw a token and write it: the fence, with the transaction left
    /// open. `None` when there is no row to lock.
    async fn lock_row(&self, token: &str) -> Result<Option<u64>, Abort> {
        let resource = &self.config.resource;
        affected(&self.store, Statement::Begin).await?;
        if select_for_update(&self.store, resource).await?.is_none() {
            return Ok(None);
        }
        let fence = next_fence(&self.store).await?;
        let claim = Statement::Claim {
            resource: resource.clone(),
            locker: token.to_owned(),
            version: fence,
        };
        match affected(&self.store, claim).await? {
            1 => Ok(Some(fence)),
            n => Err(Abort::Unexpected(format!("claimed {n} rows"))),
        }
    }

    /// Creates the resource's row, unlocked (autocommit); someone else creating it first is
    /// as good.
    async fn create_row(&self) -> Result<(), Abort> {
        let insert = Statement::Insert {
            resource: self.config.resource.clone(),
            locker: String::new(),
            count: 0,
            version: 0,
        };
        match affected(&self.store, insert).await {
            Ok(_) | Err(Abort::Sql(SqlError::DuplicateEntry { .. })) => Ok(()),
            Err(abort) => Err(abort),
        }
    }

    /// Tries until the lock is acquired, `wait` (client monotonic time) has passed, or
    /// `retry_count` attempts failed; `Ok(None)` in the last two cases. An attempt already
    /// waiting on the server is not cut short: it may overrun `wait` by up to the server's
    /// `innodb_lock_wait_timeout`.
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

    /// Commits, ending the lock. `Ok(false)`: the client no longer held it — the server had
    /// closed the connection and rolled the transaction back (so someone else may have held the
    /// row meanwhile), or `guard` is not the current acquisition. A commit without a reply is
    /// an error: the transaction is over either way, but whether it ended by the commit or by
    /// the server is unknown.
    pub async fn release<E: Env>(&self, _env: &E, guard: &Guard) -> Result<bool, LockError> {
        if self.held.borrow().as_deref() != Some(guard.token.as_str()) {
            return Ok(false);
        }
        *self.held.borrow_mut() = None;
        match self.store.execute(Statement::Commit).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) if e.is_disconnect() => Ok(false),
            Ok(Err(e)) => Err(LockError::Server(e.to_string())),
            // Not sent: the connection is gone, and its transaction with it.
            Err(StoreError::Unreachable(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

impl<S: SqlStore> Lock for MysqlForUpdateHeld<S> {
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        MysqlForUpdateHeld::acquire(self, env, wait).await
    }

    async fn release<E: Env>(&self, env: &E, guard: &Guard) -> Result<bool, LockError> {
        MysqlForUpdateHeld::release(self, env, guard).await
    }

    /// Sends nothing: a holder working outside the database sends nothing either, and that
    /// silence is what `wait_timeout` punishes. Returns at once.
    async fn keep_alive<E: Env>(&self, _env: &E, _guard: &RefCell<Guard>) {}
}

/// `mysql-for-update-held` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "mysql-for-update-held",
    summary: "The row lock of an open transaction is the lock; it ends at commit, or when the server ends the idle connection (wait_timeout).",
    backend: Backend::Mysql,
    servers: Servers::One,
    replicas: false,
    lease: Lease::IdleConnection,
    fencing: Fencing::Token,
    renews: false,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for MysqlForUpdateHeld<S::Sql> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        MysqlForUpdateHeld::new(
            stores.mysql(),
            MysqlForUpdateHeldConfig {
                resource: settings.key.clone(),
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
