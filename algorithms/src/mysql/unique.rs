//! `mysql-unique`: seed 001's database lock — inserting the row is taking the lock, the unique
//! key on `resource_name` is the mutual exclusion, deleting the row is the release.
//!
//! Each statement runs in autocommit mode, so no transaction or row lock outlives it. The seed
//! lists the weaknesses this keeps, on purpose: no expiry (a holder that never deletes its row
//! holds the lock forever), non-blocking (an insert that fails with 1062 is retried by the
//! client after a delay, never queued), not reentrant (the client's own row is a duplicate too),
//! and one database as a single point of failure. The delete names the acquisition's own token,
//! so only the holder can release.

use super::retry_attempts;
use super::store::{SqlError, SqlStore, Statement};
use super::{affected, next_fence, pause, Abort, Attempt, CLEANUP_ATTEMPTS, UNBOUNDED_VALIDITY};
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::Retry;
use crate::stores::Stores;
use std::cell::RefCell;
use std::time::Duration;

/// Settings of a [`MysqlUnique`] lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlUniqueConfig {
    /// The row's `resource_name`.
    pub resource: String,
    /// Base delay between inserts; each wait is random in `[d/2, d]`.
    pub retry_delay: Duration,
    /// Attempts per blocking acquire; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// The longest delay that attempts without an answer back off to ([`crate::retry`]);
    /// at least `retry_delay`.
    pub max_retry_delay: Duration,
}

/// The unique-index lock.
pub struct MysqlUnique<S> {
    store: S,
    config: MysqlUniqueConfig,
}

impl<S: SqlStore> MysqlUnique<S> {
    /// A lock on the row `config.resource` through `store`.
    pub fn new(store: S, config: MysqlUniqueConfig) -> Self {
        MysqlUnique { store, config }
    }

    /// The client's connection.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// One insert. Never waits for the holder: a duplicate is [`Attempt::Busy`] at once.
    pub async fn try_acquire<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let attempt = self.attempt(env).await;
        Attempt::observe(&attempt, env);
        attempt
    }

    async fn attempt<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let token = env.new_token();
        let started = env.mono_now();
        let insert = Statement::Insert {
            resource: self.config.resource.clone(),
            locker: token.clone(),
            count: 1,
            version: 0,
        };
        match affected(&self.store, insert).await {
            Ok(_) => {}
            Err(Abort::Store(e)) if e.maybe_applied() => {
                // The insert may have been applied: delete the row only if it is this token's.
                let _ = self.delete_own(env, &token).await;
                return Ok(Attempt::Unknown);
            }
            Err(abort) => return abort.into_attempt(),
        }
        // Drawn after the insert, while holding the lock: any later holder draws a larger one.
        let fence = match next_fence(&self.store).await {
            Ok(fence) => fence,
            Err(_) => {
                // A lock without its token would be a lock the resource cannot fence: give it up.
                let _ = self.delete_own(env, &token).await;
                return Ok(Attempt::Interrupted);
            }
        };
        // The token in the row too, for whoever looks at the table; the lock does not depend
        // on it.
        let _ = self
            .store
            .execute(Statement::Update {
                resource: self.config.resource.clone(),
                locker: token.clone(),
                count: 1,
                version: fence,
            })
            .await;
        Ok(Attempt::Acquired(Guard {
            token,
            acquired_at: started,
            valid_until: started.saturating_add(UNBOUNDED_VALIDITY),
            fence: Some(fence),
        }))
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

    /// Deletes the row if it still carries `guard`'s token. `Ok(false)`: it did not.
    pub async fn release<E: Env>(&self, env: &E, guard: &Guard) -> Result<bool, LockError> {
        self.delete_own(env, &guard.token).await
    }

    /// `DELETE … WHERE resource_name = ? AND locker = ?`, retried when it got no usable reply:
    /// deleting one's own row twice is harmless, so a retry is always safe.
    async fn delete_own<E: Env>(&self, env: &E, token: &str) -> Result<bool, LockError> {
        let attempts = self.config.retry_count.unwrap_or(CLEANUP_ATTEMPTS).max(1);
        let mut tried = 0;
        // After a lost reply, "nothing deleted" may mean our own earlier delete worked.
        let mut unsure = false;
        loop {
            tried += 1;
            let delete = Statement::Delete {
                resource: self.config.resource.clone(),
                locker: Some(token.to_owned()),
            };
            let failure = match affected(&self.store, delete).await {
                Ok(n) => return Ok(n == 1 || unsure),
                Err(Abort::Store(e)) => {
                    unsure |= e.maybe_applied();
                    LockError::Store(e)
                }
                Err(Abort::Sql(e)) if e.is_contention() || e.is_disconnect() => {
                    unsure |= e == SqlError::ConnectionLost;
                    LockError::Server(e.to_string())
                }
                Err(abort) => return abort.into_attempt().map(|_| false),
            };
            if tried >= attempts {
                return Err(failure);
            }
            pause(env, self.config.retry_delay).await;
        }
    }
}

impl<S: SqlStore> Lock for MysqlUnique<S> {
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        MysqlUnique::acquire(self, env, wait).await
    }

    async fn release<E: Env>(&self, env: &E, guard: &Guard) -> Result<bool, LockError> {
        MysqlUnique::release(self, env, guard).await
    }

    /// The row has no lease to renew. Returns at once.
    async fn keep_alive<E: Env>(&self, _env: &E, _guard: &RefCell<Guard>) {}
}

/// `mysql-unique` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "mysql-unique",
    summary: "Inserting a row under a unique key is the lock, deleting it the unlock (seed 001).",
    backend: Backend::Mysql,
    servers: Servers::One,
    replicas: false,
    lease: Lease::None,
    fencing: Fencing::Token,
    renews: false,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for MysqlUnique<S::Sql> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        MysqlUnique::new(
            stores.mysql(),
            MysqlUniqueConfig {
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
