//! [`SqlStore`] over a real MariaDB connection: a thin mapping of the algorithms' typed
//! [`Statement`]s onto `mysql_async`, and of the server's answers onto [`Reply`], as the simulated
//! server (`lockcheck_sim::mysql::model`) answers.
//!
//! - One connection per client, opened on the first statement, over TCP to the server's
//!   loopback port (never the Unix socket `mysql_async` would switch to), in the
//!   [`crate::launcher::mariadb::DATABASE`], with `time_zone = '+00:00'` so that
//!   `NOW(3)` and the `DATETIME(3)` columns read back as Unix time.
//! - Every statement is sent as a prepared statement: [`Statement::sql`] with
//!   [`Statement::params`] bound, never SQL text with values in it. The driver caches each
//!   prepared statement per connection, so a statement costs one `COM_STMT_PREPARE` the first
//!   time on a connection and one `COM_STMT_EXECUTE` round trip after that (measured on loopback:
//!   64 µs per cached execute against 76 µs for the same statement as text).
//! - Replies: affected rows → [`Outcome::Done`] (MariaDB's count of rows changed: the driver
//!   does not set `CLIENT_FOUND_ROWS`), the row of a `SELECT … FOR UPDATE` → [`Outcome::Row`],
//!   `NEXT VALUE FOR` → [`Outcome::Value`]. Server errors → [`SqlError`] by code ([`sql_error`]):
//!   1062 with the entry and key the message names, 1205, 1213, 1406 with its column, the rest as
//!   [`SqlError::Other`]. A reply the mapping cannot read is the client library's 2027
//!   ("malformed packet").
//!
//! # Timeouts and broken connections
//!
//! As the trait asks, and as the simulated client does:
//! - A statement may wait on the server for a row lock, so its reply is awaited for the request
//!   timeout plus `innodb_lock_wait_timeout`. No reply by then → [`StoreError::Timeout`], and the
//!   connection is abandoned: closed at once (`COM_QUIT`, then the socket), so the server rolls
//!   back what it had open as soon as it reads again. The next statement opens a new connection.
//! - Before a statement goes out on a connection that has served one before, the store checks the
//!   connection with `COM_PING`, as libmysqlclient checks its socket for a close by the server
//!   before it sends a command. A connection the server closed while it sat idle (after
//!   `wait_timeout`, or when it restarted) thus gives 2006 ([`SqlError::ServerGone`]) with the
//!   statement NOT sent, exactly as the model answers a statement on a closed connection. Without
//!   the check, the statement would be written into a dead socket and the failure would come as a
//!   reset, indistinguishable from a server that died with the statement in flight. It costs one
//!   round trip (about 30 µs on loopback) per statement.
//! - A connection that breaks with the statement sent (the server killed mid-statement) →
//!   [`StoreError::Timeout`]: the statement may have been applied (in autocommit mode, or a
//!   `COMMIT`), and the simulated client reports a crashed server the same way. So the store never
//!   reports 2013; the model never does either.
//! - No connection (refused: the server is down) → [`StoreError::Unreachable`]: nothing was sent.
//!   A connect that gets no answer within the request timeout (a stopped server accepts in the
//!   kernel but never greets) → [`StoreError::Timeout`], as the simulated client's connect.
//!
//! The client passes its [`PauseGate`] before and after every call, so a paused client sends
//! nothing: its connection sits idle, and the server's `wait_timeout` may close it meanwhile —
//! the story of `mysql-for-update-held`.

use crate::endpoints::Login;
use crate::error::RealError;
use crate::gate::PauseGate;
use crate::launcher::mariadb::{client_opts, client_opts_as, whole_seconds, DATABASE};
use crate::launcher::mariadb::{ISOLATION, SQL_MODE};
use lockcheck_algorithms::mysql::store::{
    Outcome, Param, Reply, Row, SqlError, SqlStore, Statement,
};
use lockcheck_algorithms::StoreError;
use lockcheck_core::Scenario;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Value};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Duration;

/// The client library's error for a reply it cannot read (`CR_MALFORMED_PACKET`).
pub const MALFORMED_PACKET: u16 = 2027;

/// How long an abandoned connection may take to say goodbye before its socket is simply dropped.
const CLOSE_WITHIN: Duration = Duration::from_secs(1);

/// The session settings a scenario relies on, applied to every connection of a run: on a server
/// lockcheck starts they are its configuration already, on a user's server they are not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSettings {
    /// `wait_timeout` (and `interactive_timeout`), in seconds.
    pub wait_timeout_s: u64,
    /// `innodb_lock_wait_timeout`, in seconds.
    pub lock_wait_timeout_s: u64,
}

impl SessionSettings {
    /// `scenario`'s settings; refused when MariaDB cannot express them (whole seconds only).
    pub fn of(scenario: &Scenario) -> Result<SessionSettings, RealError> {
        let p = &scenario.params.mysql;
        Ok(SessionSettings {
            wait_timeout_s: whole_seconds(
                "params.mysql.wait_timeout_ms",
                "wait_timeout",
                p.wait_timeout_ms(),
                31_536_000,
            )?,
            lock_wait_timeout_s: whole_seconds(
                "params.mysql.lock_wait_timeout_ms",
                "innodb_lock_wait_timeout",
                p.lock_wait_timeout_ms(),
                1_073_741_824,
            )?,
        })
    }

    /// The statements that set them for one session, with the isolation level and SQL mode the
    /// model follows.
    pub fn statements(&self) -> Vec<String> {
        vec![
            format!(
                "SET SESSION wait_timeout = {w}, interactive_timeout = {w}, \
                 innodb_lock_wait_timeout = {l}",
                w = self.wait_timeout_s,
                l = self.lock_wait_timeout_s
            ),
            // The statement form every MariaDB version takes (the variable's name changed in 11.1).
            format!(
                "SET SESSION TRANSACTION ISOLATION LEVEL {}",
                ISOLATION.replace('-', " ")
            ),
            format!("SET SESSION sql_mode = '{SQL_MODE}'"),
        ]
    }
}

/// Where and how a run's sessions connect.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The server (a client's proxy to it).
    pub addr: SocketAddr,
    /// The account.
    pub login: Login,
    /// The database holding the lock table.
    pub database: String,
    /// The settings applied to each session; none on a server lockcheck configured itself.
    pub settings: Option<SessionSettings>,
}

impl SessionConfig {
    /// A session with a server lockcheck started: root, the `lockcheck` database, the server's
    /// own settings.
    pub fn local(addr: SocketAddr) -> SessionConfig {
        SessionConfig {
            addr,
            login: Login::default(),
            database: DATABASE.to_string(),
            settings: None,
        }
    }
}

/// One open connection to a MariaDB server, speaking the lock-table protocol.
pub struct Session {
    conn: Conn,
}

impl Session {
    /// Connects to the server at `addr`, into the lock table's database, with the session's time
    /// zone UTC.
    pub async fn open(addr: SocketAddr) -> Result<Session, mysql_async::Error> {
        let opts = client_opts(addr, Some(DATABASE)).init(vec!["SET time_zone = '+00:00'"]);
        Ok(Session {
            conn: Conn::new(opts).await?,
        })
    }

    /// Connects as `config` says, with the session's time zone UTC and its settings applied.
    pub async fn open_with(config: &SessionConfig) -> Result<Session, mysql_async::Error> {
        let mut init = vec!["SET time_zone = '+00:00'".to_string()];
        if let Some(settings) = &config.settings {
            init.extend(settings.statements());
        }
        let opts = client_opts_as(config.addr, &config.login, Some(&config.database)).init(init);
        Ok(Session {
            conn: Conn::new(opts).await?,
        })
    }

    /// The server's id for this connection (its thread id, as `CONNECTION_ID()` and the
    /// `information_schema` tables name it).
    pub fn id(&self) -> u32 {
        self.conn.id()
    }

    /// The underlying connection, for what is not part of the protocol (a test pins the
    /// session's clock or timeouts with it).
    pub fn conn_mut(&mut self) -> &mut Conn {
        &mut self.conn
    }

    /// Whether the server still answers on this connection (`COM_PING`).
    pub async fn is_alive(&mut self) -> bool {
        self.conn.ping().await.is_ok()
    }

    /// Runs one statement. `Ok` with the server's reply (its outcome, or its error); `Err` when
    /// the connection failed, with the statement possibly sent.
    pub async fn execute(&mut self, statement: &Statement) -> Result<Reply, mysql_async::Error> {
        let values: Vec<Value> = statement.params().into_iter().map(value_of).collect();
        let params = if values.is_empty() {
            Params::Empty
        } else {
            Params::Positional(values)
        };
        let sql = statement.sql();
        let result = match statement {
            Statement::SelectForUpdate { .. } => self
                .conn
                .exec::<mysql_async::Row, _, _>(sql, params)
                .await
                .map(|rows| select_outcome(&rows)),
            Statement::NextFence => self
                .conn
                .exec::<mysql_async::Row, _, _>(sql, params)
                .await
                .map(|rows| fence_outcome(&rows)),
            _ => self.conn.exec_drop(sql, params).await.map(|()| {
                Ok(Outcome::Done {
                    affected: self.conn.affected_rows(),
                })
            }),
        };
        match result {
            Ok(reply) => Ok(reply),
            Err(mysql_async::Error::Server(e)) => Ok(Err(sql_error(e.code, &e.state, &e.message))),
            Err(e) => Err(e),
        }
    }

    /// Closes the connection without waiting: `COM_QUIT` and the socket, in a task of its own.
    /// The server rolls back the connection's open transaction when it reads the close (at once,
    /// or when a statement it is running ends).
    pub fn abandon(self) {
        let conn = self.conn;
        tokio::spawn(async move {
            // `disconnect` marks the connection closed first, so dropping it after a timeout
            // does not try again; dropping it closes the socket.
            let _ =
                tokio::time::timeout(CLOSE_WITHIN, async move { conn.disconnect().await }).await;
        });
    }
}

/// A bound value as the driver sends it.
fn value_of(param: Param) -> Value {
    match param {
        Param::Text(text) => Value::Bytes(text.into_bytes()),
        Param::Unsigned(n) => Value::UInt(n),
    }
}

fn malformed(what: String) -> SqlError {
    SqlError::Other {
        code: MALFORMED_PACKET,
        sqlstate: "HY000".into(),
        message: format!("Malformed packet: {what}"),
    }
}

/// The reply of a `SELECT … FOR UPDATE`: the row, if any (the unique key allows one at most).
fn select_outcome(rows: &[mysql_async::Row]) -> Reply {
    match rows {
        [] => Ok(Outcome::Row(None)),
        [row] => row_of(row).map(|row| Outcome::Row(Some(row))),
        more => Err(malformed(format!("{} rows for a unique key", more.len()))),
    }
}

/// The reply of `SELECT NEXT VALUE FOR lock_fence`.
fn fence_outcome(rows: &[mysql_async::Row]) -> Reply {
    match rows {
        [row] => column(row, 0, "NEXT VALUE").and_then(|v| unsigned(&v, "NEXT VALUE")),
        other => Err(malformed(format!("{} rows for NEXT VALUE", other.len()))),
    }
    .map(Outcome::Value)
}

fn column(row: &mysql_async::Row, index: usize, name: &str) -> Result<Value, SqlError> {
    row.as_ref(index)
        .cloned()
        .ok_or_else(|| malformed(format!("no column {name}")))
}

fn unsigned(value: &Value, name: &str) -> Result<u64, SqlError> {
    match value {
        Value::UInt(n) => Ok(*n),
        Value::Int(n) => u64::try_from(*n).map_err(|_| malformed(format!("{name} = {n}"))),
        Value::Bytes(text) => std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| malformed(format!("{name} = {value:?}"))),
        other => Err(malformed(format!("{name} = {other:?}"))),
    }
}

fn text(value: &Value, name: &str) -> Result<String, SqlError> {
    match value {
        Value::Bytes(bytes) => {
            String::from_utf8(bytes.clone()).map_err(|_| malformed(format!("{name} not UTF-8")))
        }
        other => Err(malformed(format!("{name} = {other:?}"))),
    }
}

/// A `DATETIME(3)` of a UTC session, in ms since the Unix epoch.
fn epoch_ms(value: &Value, name: &str) -> Result<u64, SqlError> {
    let Value::Date(year, month, day, hour, minute, second, micros) = *value else {
        return Err(malformed(format!("{name} = {value:?}")));
    };
    let days = days_from_civil(i64::from(year), u32::from(month), u32::from(day));
    let ms = days * 86_400_000
        + i64::from(hour) * 3_600_000
        + i64::from(minute) * 60_000
        + i64::from(second) * 1_000
        + i64::from(micros / 1_000);
    u64::try_from(ms).map_err(|_| malformed(format!("{name} = {value:?} is before 1970")))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// A lock-table row, its columns in [`Statement::SelectForUpdate`]'s order.
fn row_of(row: &mysql_async::Row) -> Result<Row, SqlError> {
    let get = |index: usize, name: &str| column(row, index, name);
    let count = unsigned(&get(3, "reentrant_cnt")?, "reentrant_cnt")?;
    Ok(Row {
        id: unsigned(&get(0, "id")?, "id")?,
        resource_name: text(&get(1, "resource_name")?, "resource_name")?,
        locker: text(&get(2, "locker")?, "locker")?,
        reentrant_cnt: u32::try_from(count)
            .map_err(|_| malformed(format!("reentrant_cnt = {count}")))?,
        create_time_ms: epoch_ms(&get(4, "create_time")?, "create_time")?,
        update_time_ms: epoch_ms(&get(5, "update_time")?, "update_time")?,
        version: unsigned(&get(6, "version")?, "version")?,
    })
}

/// A server error as the algorithms (and the simulated server) see it.
pub fn sql_error(code: u16, sqlstate: &str, message: &str) -> SqlError {
    let parsed = match code {
        1062 => message
            .strip_prefix("Duplicate entry '")
            .and_then(|rest| rest.rsplit_once("' for key '"))
            .and_then(|(entry, key)| Some((entry, key.strip_suffix('\'')?)))
            .map(|(entry, key)| SqlError::DuplicateEntry {
                entry: entry.to_owned(),
                key: key.to_owned(),
            }),
        1205 => Some(SqlError::LockWaitTimeout),
        1213 => Some(SqlError::Deadlock),
        1406 => message
            .strip_prefix("Data too long for column '")
            .and_then(|rest| rest.rsplit_once("' at row "))
            .map(|(column, _)| SqlError::DataTooLong {
                column: column.to_owned(),
            }),
        2006 => Some(SqlError::ServerGone),
        2013 => Some(SqlError::ConnectionLost),
        2014 => Some(SqlError::CommandsOutOfSync),
        _ => None,
    };
    parsed.unwrap_or_else(|| SqlError::Other {
        code,
        sqlstate: sqlstate.to_owned(),
        message: message.to_owned(),
    })
}

/// One client's connection to one real MariaDB server.
pub struct RealMysql {
    config: SessionConfig,
    request_timeout: Duration,
    lock_wait: Duration,
    gate: PauseGate,
    /// The open connection, if any. Taken out for the length of a statement, so no borrow is
    /// held across an await; a statement whose future is dropped drops the connection with it.
    session: RefCell<Option<Session>>,
}

/// What became of one statement on an open connection.
enum Exchange {
    Replied(Reply),
    /// The ping before it failed: the server had closed the connection; nothing was sent.
    Gone,
    /// The connection failed with the statement sent.
    Broken(mysql_async::Error),
}

impl RealMysql {
    /// A client of the server at `addr`. A reply is awaited for `request_timeout`, plus
    /// `lock_wait` (the server's `innodb_lock_wait_timeout`) for a statement, which may wait for
    /// a row lock that long. The client passes `gate` before and after every statement. Nothing
    /// is connected until the first statement.
    pub fn new(
        addr: SocketAddr,
        request_timeout: Duration,
        lock_wait: Duration,
        gate: PauseGate,
    ) -> RealMysql {
        RealMysql {
            config: SessionConfig::local(addr),
            request_timeout,
            lock_wait,
            gate,
            session: RefCell::new(None),
        }
    }

    /// The same, its sessions connecting as `config` says.
    pub fn with_config(mut self, config: SessionConfig) -> RealMysql {
        self.config = config;
        self
    }

    /// The open connection, or a new one (`true`: new).
    async fn session(&self) -> Result<(Session, bool), StoreError> {
        let open = self.session.borrow_mut().take();
        if let Some(session) = open {
            return Ok((session, false));
        }
        match tokio::time::timeout(self.request_timeout, Session::open_with(&self.config)).await {
            Ok(Ok(session)) => Ok((session, true)),
            Ok(Err(e)) => Err(StoreError::Unreachable(e.to_string())),
            Err(_) => Err(StoreError::Timeout),
        }
    }

    async fn exchange(&self, statement: &Statement) -> Result<Reply, StoreError> {
        let (mut session, fresh) = self.session().await?;
        let exchange = tokio::time::timeout(self.request_timeout + self.lock_wait, async {
            if !fresh && !session.is_alive().await {
                return Exchange::Gone;
            }
            match session.execute(statement).await {
                Ok(reply) => Exchange::Replied(reply),
                Err(e) => Exchange::Broken(e),
            }
        })
        .await;
        match exchange {
            Ok(Exchange::Replied(reply)) => {
                if reply.as_ref().is_err_and(SqlError::is_disconnect) {
                    session.abandon();
                } else {
                    *self.session.borrow_mut() = Some(session);
                }
                Ok(reply)
            }
            Ok(Exchange::Gone) => {
                tracing::debug!(addr = %self.config.addr, "connection closed by the server");
                session.abandon();
                Ok(Err(SqlError::ServerGone))
            }
            Ok(Exchange::Broken(e)) => {
                tracing::debug!(addr = %self.config.addr, "connection broke: {e}");
                session.abandon();
                Err(StoreError::Timeout)
            }
            Err(_) => {
                session.abandon();
                Err(StoreError::Timeout)
            }
        }
    }
}

impl SqlStore for RealMysql {
    async fn execute(&self, statement: Statement) -> Result<Reply, StoreError> {
        self.gate.pass().await;
        let result = self.exchange(&statement).await;
        self.gate.pass().await;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_map_to_the_models_codes() {
        assert_eq!(
            sql_error(
                1062,
                "23000",
                "Duplicate entry 'a' for key ' for key 'uk_resource_name'"
            ),
            SqlError::DuplicateEntry {
                entry: "a' for key ".into(),
                key: "uk_resource_name".into()
            }
        );
        assert_eq!(
            sql_error(1205, "HY000", "Lock wait timeout exceeded"),
            SqlError::LockWaitTimeout
        );
        assert_eq!(sql_error(1213, "40001", "Deadlock"), SqlError::Deadlock);
        assert_eq!(
            sql_error(
                1406,
                "22001",
                "Data too long for column 'resource_name' at row 1"
            ),
            SqlError::DataTooLong {
                column: "resource_name".into()
            }
        );
        // A message in a shape the mapping does not know is kept whole rather than guessed at.
        assert_eq!(
            sql_error(1062, "23000", "Duplicate something"),
            SqlError::Other {
                code: 1062,
                sqlstate: "23000".into(),
                message: "Duplicate something".into()
            }
        );
        assert_eq!(sql_error(1146, "42S02", "no table").code(), 1146);
    }

    #[test]
    fn datetimes_read_as_unix_ms() {
        let at = |y, mo, d, h, mi, s, us| epoch_ms(&Value::Date(y, mo, d, h, mi, s, us), "t");
        assert_eq!(at(1970, 1, 1, 0, 0, 0, 0), Ok(0));
        assert_eq!(at(2024, 1, 1, 0, 0, 0, 123_000), Ok(1_704_067_200_123));
        assert_eq!(at(2000, 2, 29, 23, 59, 59, 999_999), Ok(951_868_799_999));
        assert!(at(1969, 12, 31, 23, 59, 59, 0).is_err());
        assert!(epoch_ms(&Value::Int(5), "t").is_err());
    }
}
