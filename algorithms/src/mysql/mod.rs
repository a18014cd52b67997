//! The MySQL family: the store trait (one connection, typed statements with bound parameters)
//! and the locks built on the lock table.
//!
//! - [`row`] — `mysql-row` (seed 000): a reentrant lock row guarded by InnoDB row locks, taken in
//!   short transactions; optionally a lease the database's clock expires.
//! - [`unique`] — `mysql-unique` (seed 001): inserting the row is the lock, the unique key the
//!   mutual exclusion; non-blocking.
//! - [`for_update_held`] — `mysql-for-update-held`: the row lock of an open transaction is the
//!   lock; it ends at commit or when the server ends the connection.
//!
//! Fencing tokens come from a sequence (see [`store::CREATE_FENCE_SEQUENCE`] for why a per-row
//! counter is not enough), drawn while the lock is already held, so that they grow in the order
//! the lock was granted; each grant also writes its token into the row's `version`.

pub mod for_update_held;
pub mod row;
pub mod store;
pub mod unique;

pub use for_update_held::{MysqlForUpdateHeld, MysqlForUpdateHeldConfig};
pub use row::{MysqlRow, MysqlRowConfig};
pub use store::{Outcome, Param, Reply, Row, SqlError, SqlStore, Statement};
pub use unique::{MysqlUnique, MysqlUniqueConfig};

use crate::env::{Env, LockEvent};
use crate::error::{LockError, StoreError};
use crate::guard::Guard;
pub(crate) use crate::guard::UNBOUNDED_VALIDITY;
pub(crate) use crate::retry::CLEANUP_ATTEMPTS;
use crate::retry::{acquire_with_retries, Retry, Tried};
use std::time::Duration;

/// The result of one acquisition attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is ours.
    Acquired(Guard),
    /// Someone else holds it (or held the row lock long enough for a lock wait to time out, or
    /// the server broke a deadlock by rolling this attempt back).
    Busy,
    /// The connection went away mid-attempt (the server closed it, or a statement got no
    /// reply before the one that grants): the server rolls the attempt back; nothing is held.
    Interrupted,
    /// A statement before the one that grants (or the connect) got no reply: the server may be
    /// paused, down or cut off. The store dropped the connection, so the server rolls the
    /// attempt back; nothing is held.
    Unanswered,
    /// The statement that grants (a `COMMIT`, or the unique lock's `INSERT`) got no reply: it
    /// may have been applied. The client has tried to undo it and does not consider itself
    /// the holder.
    Unknown,
    /// With a lease: the grant came too late to leave any validity; the client released it.
    Expired,
}

impl Attempt {
    /// Reports the attempt to the environment (one server asked; it accepted when the lock was
    /// granted, even if the client then gave it back).
    fn observe<E: Env>(attempt: &Result<Attempt, LockError>, env: &E) {
        let acquired = matches!(attempt, Ok(Attempt::Acquired(_)));
        env.observe(LockEvent::Attempt {
            acquired,
            accepted: usize::from(acquired || matches!(attempt, Ok(Attempt::Expired))),
            of: 1,
        });
    }
}

/// Why a step of a transaction did not give the outcome the algorithm needs.
#[derive(Debug)]
enum Abort {
    /// No reply (the store has abandoned the connection) or no connection.
    Store(StoreError),
    /// The server refused the statement.
    Sql(SqlError),
    /// The server answered with something the statement cannot return.
    Unexpected(String),
}

impl Abort {
    /// The attempt's outcome when it was abandoned for this reason (the caller has rolled back).
    fn into_attempt(self) -> Result<Attempt, LockError> {
        match self {
            Abort::Store(e) if e.maybe_applied() => Ok(Attempt::Unanswered),
            Abort::Store(e) => Err(e.into()),
            Abort::Sql(e) if e.is_contention() || matches!(e, SqlError::DuplicateEntry { .. }) => {
                Ok(Attempt::Busy)
            }
            Abort::Sql(e) if e.is_disconnect() => Ok(Attempt::Interrupted),
            Abort::Sql(e) => Err(LockError::Server(e.to_string())),
            Abort::Unexpected(what) => Err(LockError::UnexpectedReply(what)),
        }
    }
}

/// Runs one statement.
async fn exec<S: SqlStore>(store: &S, statement: Statement) -> Result<Outcome, Abort> {
    match store.execute(statement).await {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(e)) => Err(Abort::Sql(e)),
        Err(e) => Err(Abort::Store(e)),
    }
}

/// Runs a `SELECT … FOR UPDATE`.
async fn select_for_update<S: SqlStore>(store: &S, resource: &str) -> Result<Option<Row>, Abort> {
    let statement = Statement::SelectForUpdate {
        resource: resource.to_owned(),
    };
    match exec(store, statement).await? {
        Outcome::Row(row) => Ok(row),
        other => Err(Abort::Unexpected(format!("{other:?}"))),
    }
}

/// Draws a fencing token.
async fn next_fence<S: SqlStore>(store: &S) -> Result<u64, Abort> {
    match exec(store, Statement::NextFence).await? {
        Outcome::Value(value) => Ok(value),
        other => Err(Abort::Unexpected(format!("{other:?}"))),
    }
}

/// Runs a statement without a result set; the rows it changed.
async fn affected<S: SqlStore>(store: &S, statement: Statement) -> Result<u64, Abort> {
    match exec(store, statement).await? {
        Outcome::Done { affected } => Ok(affected),
        other => Err(Abort::Unexpected(format!("{other:?}"))),
    }
}

/// Rolls back, ignoring the outcome: the attempt is being abandoned, and a connection that is
/// gone has been rolled back by the server anyway.
async fn rollback<S: SqlStore>(store: &S) {
    let _ = store.execute(Statement::Rollback).await;
}

/// The blocking acquire of every MySQL lock: its attempts, retried by the shared loop, until one
/// acquires (anything else, busy or interrupted, is a failed attempt).
async fn retry_attempts<E, F, Fut>(
    env: &E,
    wait: Duration,
    retry: Retry,
    mut attempt: F,
) -> Result<Option<Guard>, LockError>
where
    E: Env,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt, LockError>>,
{
    acquire_with_retries(env, wait, retry, || {
        let attempt = attempt();
        async move {
            Ok(match attempt.await? {
                Attempt::Acquired(guard) => Tried::Acquired(guard),
                Attempt::Unanswered | Attempt::Unknown => Tried::Unanswered,
                Attempt::Busy | Attempt::Interrupted | Attempt::Expired => Tried::Refused,
            })
        }
    })
    .await
}

/// Sleeps the jittered retry delay before trying a clean-up step again.
async fn pause<E: Env>(env: &E, delay: Duration) {
    env.sleep(env.random_between(delay / 2, delay)).await;
}
