//! `mariadbd`: a private MariaDB server per run, its settings from the scenario, ready once it
//! answers a ping over TCP and has the lock table.
//!
//! [`ServerKind::prepare`] runs `mariadb-install-db` into `data/` inside the server's directory
//! (the system tables only: no test database, root without a password, no name resolution). Then
//! [`ServerKind::command`] starts `mariadbd` with `--no-defaults` first, so that no `my.cnf` of
//! the machine changes a setting the simulation relies on, and everything it writes (data,
//! socket, pid file, error log) in that directory. A restart is the same command on the same data
//! directory: InnoDB recovers what its redo log kept.
//!
//! Measured here (Debian's MariaDB 10.11 on 2 cores, small buffers): `mariadb-install-db` about
//! 0.6 s, a start until the ping answers about 0.1 s, a restart after `kill -9` (with crash
//! recovery) about 0.1 s.
//!
//! The scenario's settings, each mapped as the simulated server (`lockcheck_sim::mysql::model`)
//! reads it:
//! - `params.mysql.wait_timeout_ms` → `wait_timeout` (and `interactive_timeout`, which a client that
//!   says it is interactive gets instead). MariaDB counts it in whole seconds; the model in ms.
//!   A value that is not a whole number of seconds is refused ([`MariaDb::of`]) rather than
//!   rounded, since a rounded timeout would make the real server and the simulation disagree by
//!   design.
//! - `params.mysql.lock_wait_timeout_ms` → `innodb_lock_wait_timeout`, likewise in whole seconds.
//! - `persistence` → `innodb_flush_log_at_trx_commit`, as the simulation maps it onto its
//!   [`FlushPolicy`]: `always` → `1`, `everysec` → `2` (`none` is refused by the scenario's own
//!   validation: InnoDB always writes its redo log).
//! - What the model assumes and MariaDB's defaults happen to be is spelled out too, so a
//!   different build's defaults cannot change it: REPEATABLE READ, `innodb_autoinc_lock_mode=1`,
//!   `innodb_rollback_on_timeout=OFF`, deadlock detection on, strict SQL mode.

use super::{find_on_path, ServerKind};
use crate::endpoints::Login;
use crate::error::RealError;
use lockcheck_algorithms::mysql::store::{CREATE_FENCE_SEQUENCE, CREATE_LOCK_TABLE};
use lockcheck_core::scenario::FlushPolicy;
use lockcheck_core::scenario::Scenario;
use mysql_async::prelude::Queryable;
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The MariaDB server binary.
pub const MARIADBD: &str = "mariadbd";
/// The script that initialises a data directory.
pub const MARIADB_INSTALL_DB: &str = "mariadb-install-db";
/// How to install both.
pub const MARIADB_INSTALL: &str = "apt-get install mariadb-server";
/// The database the lock table lives in, created when the server is first ready.
pub const DATABASE: &str = "lockcheck";
/// The user the clients log in as (a private server: root, no password, loopback only).
pub const USER: &str = "root";
/// The transaction isolation the model follows (MariaDB's default), set on the launched server
/// and for every session of a run on a user's server.
pub const ISOLATION: &str = "REPEATABLE-READ";
/// The SQL mode the model follows (MariaDB's default), likewise.
pub const SQL_MODE: &str =
    "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION";
/// The server-wide settings the model follows that a session cannot change, with the values
/// `SELECT CAST(@@global.… AS CHAR)` gives when they hold: a user's server must have them (the
/// launched one does).
pub const GLOBALS: &[(&str, &str)] = &[
    ("innodb_autoinc_lock_mode", "1"),
    ("innodb_rollback_on_timeout", "OFF"),
    ("innodb_deadlock_detect", "ON"),
];

/// Directories a distribution puts server binaries in that are not on every user's PATH.
const SBIN_DIRS: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/libexec"];

/// How long the processes of a killed `mariadb-install-db` may take to die.
const GROUP_GONE_WITHIN: Duration = Duration::from_secs(2);

/// Waits until no process of group `group` is alive (zombies aside), or `within` has passed.
/// `SIGKILL` takes effect when a process next leaves the kernel: one in the middle of a disk
/// write (the bootstrap server, or a subshell of the script, which we do not reap) outlives the
/// kill by a moment, and lockcheck must not report the run stopped, or exit, before they are gone.
fn wait_until_group_gone(group: libc::pid_t, within: Duration) {
    let started = Instant::now();
    while started.elapsed() < within && group_has_live_member(group) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a process of group `group` runs or sleeps (`/proc/PID/stat`: the state is the first
/// field after the command's closing parenthesis, the process group the third).
fn group_has_live_member(group: libc::pid_t) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let state = fields.first().copied().unwrap_or("Z");
        let pgrp = fields.get(2).and_then(|g| g.parse::<libc::pid_t>().ok());
        pgrp == Some(group) && state != "Z" && state != "X"
    })
}

/// How long `mariadb-install-db` may take before it counts as hung (it takes about a second).
const INSTALL_WITHIN: Duration = Duration::from_secs(60);

/// The longest path a Unix socket can have (`sun_path` is 108 bytes, with its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Small InnoDB buffers: a lock table of one row needs nothing more, and a small redo log makes
/// the install and each recovery quick.
const BUFFER_POOL: &str = "--innodb-buffer-pool-size=16M";
const LOG_FILE: &str = "--innodb-log-file-size=4M";

/// A MariaDB server with the scenario's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MariaDb {
    /// `wait_timeout` (and `interactive_timeout`), in seconds.
    pub wait_timeout_s: u64,
    /// `innodb_lock_wait_timeout`, in seconds.
    pub lock_wait_timeout_s: u64,
    /// `innodb_flush_log_at_trx_commit`.
    pub flush: FlushPolicy,
    /// The database the lock table is created in when the server is first ready.
    pub database: String,
}

impl MariaDb {
    /// The settings of server `name` of `scenario`. Refuses timeouts MariaDB cannot express:
    /// not a whole number of seconds, or beyond the server's maximum.
    pub fn of(scenario: &Scenario, name: &str) -> Result<MariaDb, RealError> {
        let p = &scenario.params;
        let flush = FlushPolicy::of(p.persistence_of(scenario.algorithm, name));
        Ok(MariaDb {
            wait_timeout_s: whole_seconds(
                "params.mysql.wait_timeout_ms",
                "wait_timeout",
                p.mysql.wait_timeout_ms(),
                31_536_000,
            )?,
            lock_wait_timeout_s: whole_seconds(
                "params.mysql.lock_wait_timeout_ms",
                "innodb_lock_wait_timeout",
                p.mysql.lock_wait_timeout_ms(),
                1_073_741_824,
            )?,
            flush,
            database: crate::endpoints::database(scenario),
        })
    }
}

/// `ms` as whole seconds for server variable `variable` (at most `max` s), or why not.
pub(crate) fn whole_seconds(
    param: &str,
    variable: &str,
    ms: u64,
    max: u64,
) -> Result<u64, RealError> {
    let seconds = ms / 1_000;
    if !ms.is_multiple_of(1_000) || seconds == 0 {
        return Err(RealError::Unsupported(format!(
            "{param} = {ms}: MariaDB's {variable} is a whole number of seconds (the simulation's \
             is in ms); use a multiple of 1000"
        )));
    }
    if seconds > max {
        return Err(RealError::Unsupported(format!(
            "{param} = {ms}: MariaDB's {variable} is at most {max} s"
        )));
    }
    Ok(seconds)
}

/// Where binary `name` is: on PATH, or in one of the sbin directories.
pub fn locate(name: &str) -> Option<PathBuf> {
    find_on_path(name).or_else(|| {
        SBIN_DIRS
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|candidate| is_executable(candidate))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last lines of `path`, for an error message.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n  ")
}

/// The client options that reach server `addr` as [`USER`] over TCP (never the Unix socket the
/// driver would otherwise switch to on a local server), in `database` if given.
pub fn client_opts(addr: SocketAddr, database: Option<&str>) -> mysql_async::OptsBuilder {
    client_opts_as(addr, &Login::default(), database)
}

/// The same as `login` (its user, [`USER`] when it names none, and its password).
pub fn client_opts_as(
    addr: SocketAddr,
    login: &Login,
    database: Option<&str>,
) -> mysql_async::OptsBuilder {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(login.user.as_deref().unwrap_or(USER)))
        .pass(login.password.as_deref())
        .db_name(database)
        .prefer_socket(false)
        .ssl_opts(login.tls.as_ref().map(|tls| tls.mysql_ssl_opts(addr)))
}

/// Connects to `addr`, checks it answers a ping, and makes sure `database` with the lock table
/// and the fence sequence exists (idempotent: after a restart they are there already).
async fn ping_and_create_schema(
    addr: SocketAddr,
    database: &str,
) -> Result<(), mysql_async::Error> {
    let mut conn = mysql_async::Conn::new(client_opts(addr, None)).await?;
    conn.ping().await?;
    conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS {database}"))
        .await?;
    conn.query_drop(format!("USE {database}")).await?;
    conn.query_drop(CREATE_LOCK_TABLE).await?;
    conn.query_drop(CREATE_FENCE_SEQUENCE).await?;
    conn.disconnect().await
}

impl ServerKind for MariaDb {
    fn binary(&self) -> &'static str {
        MARIADBD
    }

    fn install(&self) -> &'static str {
        MARIADB_INSTALL
    }

    fn installed(&self) -> bool {
        locate(MARIADBD).is_some() && locate(MARIADB_INSTALL_DB).is_some()
    }

    fn prepare(&self, dir: &Path, _port: u16) -> Result<(), String> {
        let socket = dir.join("mysqld.sock");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(format!(
                "{} is too long for a Unix socket ({MAX_SOCKET_PATH} bytes at most): set TMPDIR \
                 to a shorter directory",
                socket.display()
            ));
        }
        let install_db = locate(MARIADB_INSTALL_DB)
            .ok_or_else(|| format!("{MARIADB_INSTALL_DB} not found: {MARIADB_INSTALL}"))?;
        let log_path = dir.join("install.log");
        let log =
            std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let started = Instant::now();
        let mut command = Command::new(&install_db);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
                "--skip-name-resolve",
                BUFFER_POOL,
                LOG_FILE,
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own process group: if it hangs or the run is interrupted, the script and the
            // bootstrap server it started are killed together, by that group's id (and the
            // terminal's Ctrl-C reaches lockcheck, which does that, not them).
            .process_group(0);
        super::dies_with_parent(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", install_db.display()))?;
        let kill_group = |child: &mut std::process::Child| {
            let group = child.id() as libc::pid_t;
            // SAFETY: kill(2) on the process group of a child we started and have not reaped,
            // so its id cannot have been reused.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = child.wait();
            wait_until_group_gone(group, GROUP_GONE_WITHIN);
        };
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                // The run's signal handler only records a signal: this loop is where the run
                // is, so it acts on it.
                Ok(None) if crate::signals::caught().is_some() => {
                    kill_group(&mut child);
                    return Err(format!("{MARIADB_INSTALL_DB} stopped: interrupted"));
                }
                Ok(None) if started.elapsed() < INSTALL_WITHIN => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    kill_group(&mut child);
                    return Err(format!(
                        "{MARIADB_INSTALL_DB} did not finish within {} s:\n  {}",
                        INSTALL_WITHIN.as_secs(),
                        tail(&log_path, 5)
                    ));
                }
                Err(e) => return Err(format!("waiting for {MARIADB_INSTALL_DB}: {e}")),
            }
        };
        if !status.success() {
            return Err(format!(
                "{MARIADB_INSTALL_DB} failed ({status}):\n  {}",
                tail(&log_path, 10)
            ));
        }
        tracing::debug!(
            dir = %dir.display(),
            ms = started.elapsed().as_millis() as u64,
            "data directory initialised"
        );
        Ok(())
    }

    fn command(&self, dir: &Path, port: u16) -> Command {
        let mariadbd = locate(MARIADBD).unwrap_or_else(|| PathBuf::from(MARIADBD));
        let mut command = Command::new(mariadbd);
        let flush = self.flush.setting();
        command
            // Must come first: no option file of the machine is read.
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", dir.join("mariadb.log").display()))
            .arg(format!("--port={port}"))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--user=root",
                BUFFER_POOL,
                LOG_FILE,
                "--skip-log-bin",
            ])
            .arg(format!("--wait-timeout={}", self.wait_timeout_s))
            .arg(format!("--interactive-timeout={}", self.wait_timeout_s))
            .arg(format!(
                "--innodb-lock-wait-timeout={}",
                self.lock_wait_timeout_s
            ))
            .arg(format!("--innodb-flush-log-at-trx-commit={flush}"))
            .args([
                "--innodb-autoinc-lock-mode=1",
                "--innodb-rollback-on-timeout=OFF",
                "--innodb-deadlock-detect=ON",
            ])
            .arg(format!("--transaction-isolation={ISOLATION}"))
            .arg(format!("--sql-mode={SQL_MODE}"));
        command
    }

    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>> {
        let database = self.database.clone();
        Box::pin(async move {
            let ready = ping_and_create_schema(addr, &database);
            match tokio::time::timeout(Duration::from_secs(1), ready).await {
                Ok(Ok(())) => true,
                // Refused or cut while the server starts: not yet.
                Ok(Err(mysql_async::Error::Io(_) | mysql_async::Error::Driver(_))) | Err(_) => {
                    false
                }
                Ok(Err(e)) => {
                    // The server answers but refuses the login or the schema: log it, since
                    // trying again will not help and "not ready" alone would hide why.
                    tracing::warn!(%addr, "MariaDB answers but is not usable: {e}");
                    false
                }
            }
        })
    }

    fn logs(&self) -> &'static [&'static str] {
        &["mariadb.log"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_core::scenario::Algorithm;

    #[test]
    fn timeouts_are_whole_seconds_or_refused() {
        let mut s = Scenario::new(Algorithm::MysqlForUpdateHeld);
        s.params.mysql.wait_timeout_ms = Some(2_000);
        s.params.mysql.lock_wait_timeout_ms = Some(3_000);
        let db = MariaDb::of(&s, "mysql-0").unwrap();
        assert_eq!((db.wait_timeout_s, db.lock_wait_timeout_s), (2, 3));
        assert_eq!(db.flush, FlushPolicy::AtCommit);
        s.params.mysql.wait_timeout_ms = Some(1_500);
        let e = MariaDb::of(&s, "mysql-0").unwrap_err().to_string();
        assert!(
            e.contains("wait_timeout_ms = 1500") && e.contains("whole"),
            "{e}"
        );
        s.params.mysql.wait_timeout_ms = Some(500);
        assert!(MariaDb::of(&s, "mysql-0").is_err());
        s.params.mysql.wait_timeout_ms = None;
        assert_eq!(MariaDb::of(&s, "mysql-0").unwrap().wait_timeout_s, 28_800);
        s.params.mysql.lock_wait_timeout_ms = Some(2_500);
        let e = MariaDb::of(&s, "mysql-0").unwrap_err().to_string();
        assert!(e.contains("innodb_lock_wait_timeout"), "{e}");
    }

    #[test]
    fn everysec_is_flush_at_trx_commit_2() {
        let mut s = Scenario::new(Algorithm::MysqlRow);
        s.params.persistence = Some(lockcheck_core::scenario::Persistence::Everysec);
        let db = MariaDb::of(&s, "mysql-0").unwrap();
        assert_eq!(db.flush, FlushPolicy::EverySecond);
        let args: Vec<String> = db
            .command(Path::new("/tmp/x"), 3306)
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[0], "--no-defaults");
        assert!(args.contains(&"--innodb-flush-log-at-trx-commit=2".to_string()));
        assert!(args.contains(&"--wait-timeout=28800".to_string()));
    }
}
