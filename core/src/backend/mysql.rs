//! MySQL (MariaDB, InnoDB): its parameter group (`params.mysql`), the rules a MySQL lock's
//! scenario follows, its idle connection's `wait_timeout` as the lease, its flush policy, and its
//! server's name (`mysql-0`).

use super::{Common, Module};
use crate::persistence::Persistence;
use crate::registry::Algorithm;
use lockcheck_algorithms::describe::Lease;
use serde::{Deserialize, Serialize};

/// The server's `wait_timeout` when a scenario gives none (MariaDB's default, 8 hours).
pub const DEFAULT_MYSQL_WAIT_TIMEOUT_MS: u64 = 8 * 60 * 60 * 1_000;
/// `innodb_lock_wait_timeout` when a scenario gives none (MariaDB's default, 50 s).
pub const DEFAULT_LOCK_WAIT_TIMEOUT_MS: u64 = 50_000;

/// `params.mysql`: settings of the MariaDB server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlParams {
    /// The server's `wait_timeout`, after which it closes an idle connection and rolls its
    /// transaction back (default 8 hours, MariaDB's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_timeout_ms: Option<u64>,
    /// `innodb_lock_wait_timeout`, how long a statement waits for a row lock before failing
    /// with 1205 (default 50 000, MariaDB's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_wait_timeout_ms: Option<u64>,
}

impl MysqlParams {
    /// `wait_timeout` in ms, or MariaDB's default.
    pub fn wait_timeout_ms(&self) -> u64 {
        self.wait_timeout_ms
            .unwrap_or(DEFAULT_MYSQL_WAIT_TIMEOUT_MS)
    }

    /// `innodb_lock_wait_timeout` in ms, or MariaDB's default.
    pub fn lock_wait_timeout_ms(&self) -> u64 {
        self.lock_wait_timeout_ms
            .unwrap_or(DEFAULT_LOCK_WAIT_TIMEOUT_MS)
    }
}

/// `innodb_flush_log_at_trx_commit`: when a commit reaches the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum FlushPolicy {
    /// `1` (the default): the log is flushed at every commit, before the client hears of it.
    #[default]
    AtCommit,
    /// `2`: the log is written at commit and flushed to disk once a second; a machine crash loses
    /// the commits of the last second.
    EverySecond,
}

impl FlushPolicy {
    /// The policy a scenario's persistence asks for: `everysec` is `2`, `always` is `1`
    /// (`none` is refused for MySQL by the scenario's validation; it maps to `1`).
    pub fn of(persistence: Persistence) -> FlushPolicy {
        match persistence {
            Persistence::Everysec => FlushPolicy::EverySecond,
            Persistence::Always | Persistence::None => FlushPolicy::AtCommit,
        }
    }

    /// The value of `innodb_flush_log_at_trx_commit`.
    pub fn setting(self) -> u8 {
        match self {
            FlushPolicy::AtCommit => 1,
            FlushPolicy::EverySecond => 2,
        }
    }
}

/// The MySQL backend, as [`Module`] asks.
pub struct Mysql;

impl Module for Mysql {
    const NAME: &'static str = "mysql";
    const SERVER_PREFIX: &'static str = "mysql";
    // InnoDB logs every commit before it answers (`innodb_flush_log_at_trx_commit=1`).
    const PERSISTENCE: Persistence = Persistence::Always;
    type Params = MysqlParams;

    fn check_ranges(m: &MysqlParams) -> Result<(), String> {
        let given_ms = [
            ("params.mysql.wait_timeout_ms", m.wait_timeout_ms),
            ("params.mysql.lock_wait_timeout_ms", m.lock_wait_timeout_ms),
        ];
        for (name, ms) in given_ms {
            if let Some(ms) = ms {
                crate::limits::positive_ms(name, ms)?;
            }
        }
        Ok(())
    }

    fn check_nodes(name: &str, n: u32) -> Result<(), String> {
        Err(format!(
            "params.nodes: {name} runs against one MariaDB server, got {n}"
        ))
    }

    fn check_server_settings(_: &MysqlParams, common: &Common) -> Result<(), String> {
        if common.policies.contains(&Persistence::None) {
            return Err(
                "params.persistence: InnoDB always writes its redo log; use always \
                 (innodb_flush_log_at_trx_commit=1, the default) or everysec (=2)"
                    .into(),
            );
        }
        Ok(())
    }

    fn server_lease_ms(lease: Lease, m: &MysqlParams) -> Option<u64> {
        (lease == Lease::IdleConnection).then(|| m.wait_timeout_ms())
    }

    fn thresholds(
        m: &MysqlParams,
        algorithm: Algorithm,
        _servers: u64,
        add: &mut dyn FnMut(&str, u64),
    ) {
        if algorithm.lease() != Lease::IdleConnection {
            add("wait_timeout", m.wait_timeout_ms());
        }
        add("innodb_lock_wait_timeout", m.lock_wait_timeout_ms());
    }
}
