//! What a MySQL/MariaDB backend can do, as seen by an algorithm: one connection, and the
//! lock-table statements as typed values with bound parameters.
//!
//! A [`Statement`] is never SQL text: each kind has one fixed SQL text with `?` placeholders
//! ([`Statement::sql`]) and its values travel separately ([`Statement::params`]), so a resource
//! name with quotes, backslashes, `%` or `_` is data and can never change what a statement does.
//! The simulated server (`lockcheck-sim`'s MySQL model) executes these very values, and the real
//! client sends [`Statement::sql`] as a prepared statement with [`Statement::params`] bound, so
//! sim and real cannot silently differ in what they were asked.
//!
//! Every time a statement stores (`create_time`, `update_time`) or compares (a lease's expiry) is
//! `NOW(3)` evaluated by the SERVER, so expiry is judged by the database's clock, never the
//! client's.

use crate::error::StoreError;
use std::future::Future;

/// The lock table. Differences from seed 000's, each for a reason:
/// - `id` is `AUTO_INCREMENT`: the seed's `int primary key` without a default makes its own
///   `INSERT` (which gives no id) fail in strict mode.
/// - `resource_name` and `locker` are `VARCHAR(255)` (the seed's 10 and 20 are too short for
///   real names) in `utf8mb4_nopad_bin`: MariaDB's default collation is case-insensitive and
///   ignores trailing spaces, which would make `Lock`, `lock` and `lock ` one lock. Byte-exact
///   comparison keeps a resource name plain data.
/// - Times are `DATETIME(3)` written with `NOW(3)` (the client's session must run with
///   `time_zone = '+00:00'` so that they read back as Unix time); the seed's `bigint` times were
///   filled in by the client, whose clock the lock must not depend on.
/// - `version` carries the fencing token of the latest grant (see [`CREATE_FENCE_SEQUENCE`]).
pub const CREATE_LOCK_TABLE: &str = "CREATE TABLE IF NOT EXISTS lock_table (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  resource_name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  locker VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  reentrant_cnt INT UNSIGNED NOT NULL,
  create_time DATETIME(3) NOT NULL,
  update_time DATETIME(3) NOT NULL,
  version BIGINT UNSIGNED NOT NULL,
  UNIQUE KEY uk_resource_name (resource_name)
) ENGINE=InnoDB";

/// The sequence fencing tokens are drawn from (MariaDB 10.3+). A per-row `version + 1` is not
/// enough: `mysql-row` and `mysql-unique` delete the row on release (a new row would start
/// again from 1), and `mysql-for-update-held` bumps it in a transaction that the server rolls
/// back when it closes the holder's connection (the next holder would get the same number).
/// A sequence is neither deleted with a row nor rolled back with a transaction, so a value drawn
/// while holding the lock is higher than every value drawn by an earlier holder.
pub const CREATE_FENCE_SEQUENCE: &str =
    "CREATE SEQUENCE IF NOT EXISTS lock_fence START WITH 1 INCREMENT BY 1 NOCACHE";

/// The name of the unique key on `resource_name`, as duplicate-key errors name it.
pub const UNIQUE_KEY: &str = "uk_resource_name";

/// The most characters (not bytes) `resource_name` and `locker` hold: `VARCHAR(255)`.
pub const MAX_NAME_CHARS: usize = 255;

/// One statement of the lock-table protocol, with its values.
///
/// Statements outside `BEGIN … COMMIT` run in autocommit mode: each is its own transaction.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Statement {
    /// `START TRANSACTION`. Inside a transaction it first commits that one (an implicit commit,
    /// as the server does).
    Begin,
    /// `COMMIT`: makes the transaction's changes durable (per the server's flush policy) and
    /// releases its row locks.
    Commit,
    /// `ROLLBACK`: undoes the transaction's changes and releases its row locks.
    Rollback,
    /// `SELECT … FROM lock_table WHERE resource_name = ? FOR UPDATE`: the row, locked
    /// exclusively until the transaction ends. Waits while another transaction holds the row
    /// (up to `innodb_lock_wait_timeout`, then error 1205). On a missing row it locks the gap
    /// where the row would go, so that no other transaction can insert it meanwhile.
    SelectForUpdate {
        /// The resource name.
        resource: String,
    },
    /// `SELECT NEXT VALUE FOR lock_fence`: the next fencing token. Not transactional: a rollback
    /// does not give the value back.
    NextFence,
    /// `INSERT INTO lock_table (…) VALUES (?, ?, ?, NOW(3), NOW(3), ?)`: a new row; error 1062
    /// if the name exists.
    Insert {
        /// `resource_name`.
        resource: String,
        /// `locker`.
        locker: String,
        /// `reentrant_cnt`.
        count: u32,
        /// `version`.
        version: u64,
    },
    /// `UPDATE lock_table SET reentrant_cnt = ?, update_time = NOW(3), version = ?
    /// WHERE resource_name = ? AND locker = ?`: the holder changes its own row (a reentrant
    /// grant, or one level of release). Any write by the holder renews a lease.
    Update {
        /// The resource name.
        resource: String,
        /// Only the row of this locker.
        locker: String,
        /// The new `reentrant_cnt`.
        count: u32,
        /// The new `version`.
        version: u64,
    },
    /// `UPDATE lock_table SET locker = ?, reentrant_cnt = 1, update_time = NOW(3), version = ?
    /// WHERE resource_name = ?`: take the row whoever had it (the transaction-held lock writes
    /// its holder into the row it has locked).
    Claim {
        /// The resource name.
        resource: String,
        /// The new `locker`.
        locker: String,
        /// The new `version`.
        version: u64,
    },
    /// `UPDATE lock_table SET locker = ?, reentrant_cnt = 1, update_time = NOW(3), version = ?
    /// WHERE resource_name = ? AND update_time < NOW(3) - INTERVAL ? MICROSECOND`: take over a
    /// row whose lease has run out BY THE DATABASE'S CLOCK.
    TakeOver {
        /// The resource name.
        resource: String,
        /// The new `locker`.
        locker: String,
        /// The new `version`.
        version: u64,
        /// The lease: rows not written for longer than this may be taken.
        ttl_ms: u64,
    },
    /// `DELETE FROM lock_table WHERE resource_name = ? [AND locker = ?]`.
    Delete {
        /// The resource name.
        resource: String,
        /// Only the row of this locker (`None`: whoever holds it).
        locker: Option<String>,
    },
}

/// A value bound to a placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// A string (`VARCHAR`).
    Text(String),
    /// An unsigned integer.
    Unsigned(u64),
}

const SELECT_COLUMNS: &str = "SELECT id, resource_name, locker, reentrant_cnt, create_time, \
                              update_time, version FROM lock_table WHERE resource_name = ? \
                              FOR UPDATE";

impl Statement {
    /// The statement's SQL text, with a `?` for every value: the same text whatever the values,
    /// so no value can change it.
    pub fn sql(&self) -> &'static str {
        match self {
            Statement::Begin => "START TRANSACTION",
            Statement::Commit => "COMMIT",
            Statement::Rollback => "ROLLBACK",
            Statement::SelectForUpdate { .. } => SELECT_COLUMNS,
            Statement::NextFence => "SELECT NEXT VALUE FOR lock_fence",
            Statement::Insert { .. } => {
                "INSERT INTO lock_table (resource_name, locker, reentrant_cnt, create_time, \
                 update_time, version) VALUES (?, ?, ?, NOW(3), NOW(3), ?)"
            }
            Statement::Update { .. } => {
                "UPDATE lock_table SET reentrant_cnt = ?, update_time = NOW(3), version = ? \
                 WHERE resource_name = ? AND locker = ?"
            }
            Statement::Claim { .. } => {
                "UPDATE lock_table SET locker = ?, reentrant_cnt = 1, update_time = NOW(3), \
                 version = ? WHERE resource_name = ?"
            }
            Statement::TakeOver { .. } => {
                "UPDATE lock_table SET locker = ?, reentrant_cnt = 1, update_time = NOW(3), \
                 version = ? WHERE resource_name = ? \
                 AND update_time < NOW(3) - INTERVAL ? MICROSECOND"
            }
            Statement::Delete { locker: None, .. } => {
                "DELETE FROM lock_table WHERE resource_name = ?"
            }
            Statement::Delete {
                locker: Some(_), ..
            } => "DELETE FROM lock_table WHERE resource_name = ? AND locker = ?",
        }
    }

    /// The values for the placeholders of [`Statement::sql`], in order.
    pub fn params(&self) -> Vec<Param> {
        let text = |s: &String| Param::Text(s.clone());
        match self {
            Statement::Begin | Statement::Commit | Statement::Rollback | Statement::NextFence => {
                Vec::new()
            }
            Statement::SelectForUpdate { resource } => vec![text(resource)],
            Statement::Insert {
                resource,
                locker,
                count,
                version,
            } => vec![
                text(resource),
                text(locker),
                Param::Unsigned(u64::from(*count)),
                Param::Unsigned(*version),
            ],
            Statement::Update {
                resource,
                locker,
                count,
                version,
            } => vec![
                Param::Unsigned(u64::from(*count)),
                Param::Unsigned(*version),
                text(resource),
                text(locker),
            ],
            Statement::Claim {
                resource,
                locker,
                version,
            } => vec![text(locker), Param::Unsigned(*version), text(resource)],
            Statement::TakeOver {
                resource,
                locker,
                version,
                ttl_ms,
            } => vec![
                text(locker),
                Param::Unsigned(*version),
                text(resource),
                Param::Unsigned(ttl_ms.saturating_mul(1000)),
            ],
            Statement::Delete { resource, locker } => {
                let mut params = vec![text(resource)];
                params.extend(locker.iter().map(text));
                params
            }
        }
    }

    /// The resource name the statement reads or writes, if it touches a row.
    pub fn resource(&self) -> Option<&str> {
        match self {
            Statement::SelectForUpdate { resource }
            | Statement::Insert { resource, .. }
            | Statement::Update { resource, .. }
            | Statement::Claim { resource, .. }
            | Statement::TakeOver { resource, .. }
            | Statement::Delete { resource, .. } => Some(resource),
            Statement::Begin | Statement::Commit | Statement::Rollback | Statement::NextFence => {
                None
            }
        }
    }
}

/// A row of the lock table, as `SELECT … FOR UPDATE` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// `id`: an auto-increment number, never reused for another row.
    pub id: u64,
    /// `resource_name`: what is locked (unique).
    pub resource_name: String,
    /// `locker`: who holds it.
    pub locker: String,
    /// `reentrant_cnt`: how many times the locker holds it.
    pub reentrant_cnt: u32,
    /// `create_time`: the server's `NOW(3)` when the row was inserted, in ms since the epoch.
    pub create_time_ms: u64,
    /// `update_time`: the server's `NOW(3)` at the row's last write, in ms since the epoch. A
    /// lease runs from here, on the server's clock.
    pub update_time_ms: u64,
    /// `version`: the fencing token of the latest grant.
    pub version: u64,
}

/// What a statement that succeeded returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A statement without a result set: the number of rows it changed (MariaDB's affected rows:
    /// an `UPDATE` that matched a row but left it as it was changed none).
    Done {
        /// Rows inserted, changed or deleted.
        affected: u64,
    },
    /// `SELECT … FOR UPDATE`: the row, if there is one.
    Row(Option<Row>),
    /// `SELECT NEXT VALUE FOR lock_fence`: the value.
    Value(u64),
}

/// An error the server (or, for the 2000s, the client library) reports for a statement.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum SqlError {
    /// 1062: the resource name exists already (the unique key). In a transaction, the statement
    /// is undone and the transaction goes on.
    #[error("ERROR 1062 (23000): Duplicate entry '{entry}' for key '{key}'")]
    DuplicateEntry {
        /// The duplicate value as the message prints it: longer than 64 bytes, MariaDB cuts it
        /// to its first 61 bytes and `...`.
        entry: String,
        /// The key's name.
        key: String,
    },
    /// 1205: waited `innodb_lock_wait_timeout` for a row lock. Only the statement is undone
    /// (`innodb_rollback_on_timeout` is off by default): the transaction stays open with the
    /// locks it had, and the client must roll it back.
    #[error("ERROR 1205 (HY000): Lock wait timeout exceeded; try restarting transaction")]
    LockWaitTimeout,
    /// 1213: the lock wait would have closed a cycle; the server rolled the whole transaction
    /// back (its locks are gone).
    #[error(
        "ERROR 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"
    )]
    Deadlock,
    /// 1406: a value longer than its column (strict mode, MariaDB's default since 10.2.4).
    #[error("ERROR 1406 (22001): Data too long for column '{column}' at row 1")]
    DataTooLong {
        /// The column.
        column: String,
    },
    /// 2006: the connection is gone (the server closed it, e.g. after `wait_timeout` idle, or
    /// restarted); its open transaction was rolled back. The next statement gets a new one.
    #[error("ERROR 2006 (HY000): MySQL server has gone away")]
    ServerGone,
    /// 2013: the connection broke while the statement was in flight; whether the statement was
    /// applied is unknown only if it was a `COMMIT` (anything else was rolled back with the
    /// connection's transaction).
    #[error("ERROR 2013 (HY000): Lost connection to server during query")]
    ConnectionLost,
    /// 2014: a statement was sent while the connection still waited for another's reply.
    #[error("ERROR 2014 (HY000): Commands out of sync; you can't run this command now")]
    CommandsOutOfSync,
    /// Any other error, as the server reported it.
    #[error("ERROR {code} ({sqlstate}): {message}")]
    Other {
        /// The MySQL error number.
        code: u16,
        /// The SQLSTATE.
        sqlstate: String,
        /// The message.
        message: String,
    },
}

impl SqlError {
    /// The MySQL error number, for comparing with a real server.
    pub fn code(&self) -> u16 {
        match self {
            SqlError::DuplicateEntry { .. } => 1062,
            SqlError::LockWaitTimeout => 1205,
            SqlError::Deadlock => 1213,
            SqlError::DataTooLong { .. } => 1406,
            SqlError::ServerGone => 2006,
            SqlError::ConnectionLost => 2013,
            SqlError::CommandsOutOfSync => 2014,
            SqlError::Other { code, .. } => *code,
        }
    }

    /// Whether the connection is gone (2006, 2013): its transaction, if any, was rolled back by
    /// the server, and the next statement runs on a new connection.
    pub fn is_disconnect(&self) -> bool {
        matches!(self, SqlError::ServerGone | SqlError::ConnectionLost)
    }

    /// Whether the error means only "the row was contended": a lock wait timed out or a
    /// deadlock was broken. Trying again later is the remedy.
    pub fn is_contention(&self) -> bool {
        matches!(self, SqlError::LockWaitTimeout | SqlError::Deadlock)
    }
}

/// The server's answer to a statement: its outcome or its error.
pub type Reply = Result<Outcome, SqlError>;

/// One connection to one MySQL/MariaDB server, as a client library (a pool of one) offers it.
///
/// A single method at the level of the protocol keeps the real client a thin mapping and lets the
/// simulated server be compared reply for reply with a real one. Server errors are `Ok(Err(…))`.
/// The connection's contract, which the algorithms rely on:
/// - A statement may legitimately wait on the server for a row lock, up to the server's
///   `innodb_lock_wait_timeout`; a store's own request timeout must allow for that.
/// - `Err(StoreError::Timeout)`: no reply in time, and the statement may have been applied. The
///   store then abandons the connection (as drivers do after a socket timeout), so the server
///   rolls back whatever transaction was open on it once it notices; only a `COMMIT` without a
///   reply leaves the outcome truly unknown.
/// - After a 2006/2013 error, or after a timeout, the next statement runs on a new connection,
///   in autocommit mode, with no transaction open.
pub trait SqlStore {
    /// Sends one statement and waits for its reply.
    fn execute(&self, statement: Statement) -> impl Future<Output = Result<Reply, StoreError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(name: &str) -> Vec<Statement> {
        let s = || name.to_string();
        vec![
            Statement::Begin,
            Statement::Commit,
            Statement::Rollback,
            Statement::SelectForUpdate { resource: s() },
            Statement::NextFence,
            Statement::Insert {
                resource: s(),
                locker: s(),
                count: 1,
                version: 2,
            },
            Statement::Update {
                resource: s(),
                locker: s(),
                count: 1,
                version: 2,
            },
            Statement::Claim {
                resource: s(),
                locker: s(),
                version: 2,
            },
            Statement::TakeOver {
                resource: s(),
                locker: s(),
                version: 2,
                ttl_ms: 3,
            },
            Statement::Delete {
                resource: s(),
                locker: None,
            },
            Statement::Delete {
                resource: s(),
                locker: Some(s()),
            },
        ]
    }

    #[test]
    fn every_value_is_bound_to_a_placeholder_and_never_in_the_text() {
        let hostile = "x' OR '1'='1'; DROP TABLE lock_table; -- \\ % _";
        for (plain, evil) in all("a").into_iter().zip(all(hostile)) {
            assert_eq!(plain.sql(), evil.sql());
            assert!(!evil.sql().contains(hostile));
            let placeholders = evil.sql().matches('?').count();
            assert_eq!(placeholders, evil.params().len(), "{}", evil.sql());
            for param in evil.params() {
                if let Param::Text(text) = param {
                    assert_eq!(text, hostile);
                }
            }
            assert_eq!(evil.resource().is_some(), placeholders > 0);
        }
    }

    #[test]
    fn the_lease_is_bound_in_microseconds() {
        let take = Statement::TakeOver {
            resource: "r".into(),
            locker: "me".into(),
            version: 7,
            ttl_ms: 1500,
        };
        assert_eq!(take.params()[3], Param::Unsigned(1_500_000));
    }

    #[test]
    fn error_codes_are_mysqls() {
        assert_eq!(SqlError::LockWaitTimeout.code(), 1205);
        assert_eq!(SqlError::Deadlock.code(), 1213);
        assert_eq!(SqlError::ServerGone.code(), 2006);
        let dup = SqlError::DuplicateEntry {
            entry: "a".into(),
            key: UNIQUE_KEY.into(),
        };
        assert_eq!(dup.code(), 1062);
        assert_eq!(
            dup.to_string(),
            "ERROR 1062 (23000): Duplicate entry 'a' for key 'uk_resource_name'"
        );
        assert!(SqlError::ConnectionLost.is_disconnect());
        assert!(SqlError::Deadlock.is_contention());
    }
}
