//! The scenario-parameter flags `explore` and `real` share, so that a question asked of the
//! simulation ("with fencing? with AOF always?") is asked of real servers with the same words.
//!
//! Each flag is optional and lands in its backend's group of [`Params`]; a flag the algorithm's
//! backend has no use for is refused by name, by the same check a scenario file goes through.

use super::usage;
use clap::Args;
use lockcheck_core::scenario::{Backend, Params, Persistence};
use lockcheck_core::Algorithm;
use std::path::{Path, PathBuf};

/// Scenario parameters given as flags (every one optional: not given, the default or the
/// scenario file's value stands).
#[derive(Args, Clone, Debug, Default)]
pub struct ParamArgs {
    /// Use fencing tokens, checked by the resource.
    #[arg(long)]
    pub fencing: bool,
    /// Renew the lease every TTL/3 while held (Redisson's watchdog; the Redis locks that renew).
    #[arg(long)]
    pub watchdog: bool,
    /// The version range of the library the algorithm follows whose client to model (e.g.
    /// redis-reentrant --variant redisson-3.23); --algorithm's help lists each algorithm's, the
    /// default first (the library's current release).
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// Server persistence: none, everysec, always (Redis default none; MySQL default always,
    /// i.e. innodb_flush_log_at_trx_commit=1, everysec for =2).
    #[arg(long, value_name = "P")]
    pub persistence: Option<String>,
    /// Asynchronous replicas of a single-server lock (the failover profile needs one).
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// After acquiring, WAIT for this many replicas (Redisson's WAIT).
    #[arg(long, value_name = "N")]
    pub wait_replicas: Option<u32>,
    /// Crashed servers stay down at least this long (crash-delayed-restart raises it to the TTL)
    /// [default: 0].
    #[arg(long, value_name = "MS")]
    pub restart_delay_ms: Option<u64>,
    /// ZooKeeper session timeout in ms (4000 to 40000; default 10000).
    #[arg(long, value_name = "MS")]
    pub session_timeout_ms: Option<u64>,
    /// ZooKeeper: treat a disconnected session as a lost lock (instead of suspended).
    #[arg(long)]
    pub suspended_is_lost: bool,
    /// etcd: the TTL of each client's session lease in seconds (2 to 3600; default 10).
    #[arg(long, value_name = "S")]
    pub lease_ttl_s: Option<u64>,
    /// MySQL: the server's wait_timeout in ms (idle connections are closed and their
    /// transactions rolled back; default 8 hours). Redis: WAIT's timeout (default 50).
    #[arg(long, value_name = "MS")]
    pub wait_timeout_ms: Option<u64>,
    /// MySQL: innodb_lock_wait_timeout in ms (default 50000).
    #[arg(long, value_name = "MS")]
    pub lock_wait_timeout_ms: Option<u64>,
    /// redis-script: the file of your lock's Lua scripts (TOML, or JSON for a .json file; see
    /// docs/check-your-lock.md). They are embedded in the scenario, so reports replay
    /// without the file; an extend script turns the watchdog on, `fencing = true` fencing.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

impl ParamArgs {
    /// Writes the flags that were given into `params`, each into its backend's group; the
    /// others leave `params` as it is. The caller validates the result (`Params::check_for` or
    /// `Scenario::validate`), which refuses a setting the algorithm has no use for by name.
    pub fn apply(&self, algorithm: Algorithm, params: &mut Params) -> anyhow::Result<()> {
        params.fencing |= self.fencing;
        params.watchdog |= self.watchdog;
        if let Some(variant) = &self.variant {
            params.variant = Some(variant.clone());
        }
        if let Some(file) = &self.script {
            apply_script_file(file, params)?;
        }
        if let Some(p) = self.persistence.as_deref() {
            params.persistence = Some(parse_persistence(p)?);
        }
        if let Some(ms) = self.restart_delay_ms {
            params.restart_delay_ms = ms;
        }
        if let Some(n) = self.replicas {
            params.redis.replicas = n;
        }
        if let Some(n) = self.wait_replicas {
            params.redis.wait_replicas = n;
        }
        if self.session_timeout_ms.is_some() {
            params.zookeeper.session_timeout_ms = self.session_timeout_ms;
        }
        params.zookeeper.suspended_is_lost |= self.suspended_is_lost;
        if self.lock_wait_timeout_ms.is_some() {
            params.mysql.lock_wait_timeout_ms = self.lock_wait_timeout_ms;
        }
        if self.lease_ttl_s.is_some() {
            params.etcd.lease_ttl_s = self.lease_ttl_s;
        }
        if let Some(ms) = self.wait_timeout_ms {
            match algorithm.backend() {
                Backend::Redis => params.redis.wait_timeout_ms = Some(ms),
                Backend::Mysql => params.mysql.wait_timeout_ms = Some(ms),
                Backend::ZooKeeper | Backend::Etcd => {
                    return Err(usage(format!(
                        "--wait-timeout-ms: {} has none (it is Redis's WAIT timeout or MySQL's \
                         wait_timeout)",
                        algorithm.name()
                    )))
                }
            }
        }
        Ok(())
    }

    /// The lease these flags set for `algorithm` in ms, when one of them is the setting that
    /// ends a silent holder's lock: a ZooKeeper lock's session timeout, an etcd lock's session
    /// lease, `mysql-for-update-held`'s `wait_timeout`. (A TTL lock's lease is `--ttl-ms`.)
    pub fn lease_ms(&self, algorithm: Algorithm) -> Option<u64> {
        use lockcheck_core::scenario::Lease;
        // Each backend's own flag: a session-held lock on a new backend is not given another
        // backend's timeout (the compiler asks for its arm).
        match (algorithm.lease(), algorithm.backend()) {
            (Lease::Session, Backend::Etcd) => self.lease_ttl_s.map(|s| s.saturating_mul(1_000)),
            (Lease::Session, Backend::ZooKeeper) => self.session_timeout_ms,
            (Lease::IdleConnection, Backend::Mysql) => self.wait_timeout_ms,
            (Lease::Session, Backend::Redis | Backend::Mysql)
            | (Lease::IdleConnection, Backend::Redis | Backend::ZooKeeper | Backend::Etcd)
            | (Lease::None | Lease::Ttl { .. }, _) => None,
        }
    }
}

/// Reads the script file at `file` (`--script`, or `redis-script:FILE` in a matrix's list)
/// into `params`: the scripts into `params.redis.script`, its `fencing` into `params.fencing`,
/// and an extend script turns the watchdog on (it is what the extend script is for). A file
/// that cannot be read, is not of the format, or holds a script that does not compile is a
/// usage error naming the file and the script.
pub fn apply_script_file(file: &Path, params: &mut Params) -> anyhow::Result<()> {
    let read = lockcheck_sim::script_file::load(file).map_err(|e| usage(e.to_string()))?;
    read.apply_to(params);
    Ok(())
}

/// Parses `--persistence`.
pub fn parse_persistence(text: &str) -> anyhow::Result<Persistence> {
    match text {
        "none" => Ok(Persistence::None),
        "everysec" => Ok(Persistence::Everysec),
        "always" => Ok(Persistence::Always),
        other => Err(usage(format!(
            "unknown persistence '{}' (known: none, everysec, always)",
            lockcheck_core::input::clip(other)
        ))),
    }
}
