//! The scenario: everything that decides a run, and nothing else.
//!
//! Like a TigerBeetle VOPR seed, a [`Scenario`] is the whole truth of a run: the same scenario gives
//! the same history, byte for byte, whatever machine, thread count or wall time. It is also the
//! user-facing file format (`lockcheck run FILE`) and is embedded in every report, so it is
//! parsed strictly: unknown keys and impossible values are errors that name the field at fault.

pub use crate::backend::etcd::{
    EtcdParams, DEFAULT_ETCD_LEASE_TTL_S, MAX_ETCD_LEASE_TTL_S, MIN_ETCD_LEASE_TTL_S,
};
pub use crate::backend::mysql::{
    FlushPolicy, MysqlParams, DEFAULT_LOCK_WAIT_TIMEOUT_MS, DEFAULT_MYSQL_WAIT_TIMEOUT_MS,
};
pub use crate::backend::redis::{
    RedisParams, DEFAULT_QUEUE_TIMEOUT_MS, DEFAULT_REPLICATION_LAG_MS,
    DEFAULT_WAIT_REPLICAS_TIMEOUT_MS,
};
pub use crate::backend::zookeeper::{
    ZooKeeperParams, DEFAULT_SESSION_TIMEOUT_MS, DEFAULT_TICK_TIME_MS, INIT_LIMIT_TICKS,
    SYNC_LIMIT_TICKS,
};
use crate::backend::{BackendExt, Common, Groups};
use crate::input;
pub use crate::persistence::Persistence;
pub use crate::registry::Algorithm;
use crate::topology::Topology;
pub use lockcheck_algorithms::describe::{Backend, Lease};
use lockcheck_algorithms::describe::{Fencing, Servers};
pub use lockcheck_algorithms::redis::script_spec::UserScript;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// A scenario file that cannot be run, with the reason.
#[derive(Debug, Error, PartialEq)]
pub enum ScenarioError {
    /// Not valid JSON, or not of the scenario's shape.
    #[error("{path}: {message}")]
    Parse {
        /// Where in the document (`params.ttl_ms`, `faults[2]`, or `.` for the whole).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// Well-formed, but impossible or contradictory.
    #[error("{0}")]
    Invalid(String),
}

/// The lease of the lease locks when a scenario gives none.
pub const DEFAULT_TTL_MS: u64 = lockcheck_algorithms::describe::DEFAULT_TTL.as_millis() as u64;
/// Whether a parameter group is at its default, "not given": it is then left out of the file.
fn is_unset<T: Default + PartialEq>(group: &T) -> bool {
    *group == T::default()
}
fn default_drift_factor() -> f64 {
    0.01
}
fn default_retry_delay_ms() -> u64 {
    200
}
fn default_request_timeout_ms() -> u64 {
    100
}
/// Algorithm parameters. Those every algorithm reads (or every one whose description says so)
/// sit at the top; each backend's own settings sit in its group (`redis`, `zookeeper`,
/// `mysql`, `etcd`), which only an algorithm on that backend accepts. Files written before the
/// groups existed (the same names, flat) are still read (through the private `ParamsFile`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "ParamsFile")]
pub struct Params {
    /// The lock's name: the Redis key (and the keys derived from it), the ZooKeeper path
    /// `/KEY`, the etcd prefix `KEY/`, the MySQL resource name and, in real mode, the MariaDB
    /// database that holds the lock table. Letters, digits and `_`, starting with a letter, at
    /// most 48 (default `lock`; `lockcheck real --endpoints` draws a fresh one per run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Number of servers (single-redis: 1, the default; redlock: an odd number ≥ 3, default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Accept an even number of independent masters (Redlock: a quorum of N/2 + 1 then tolerates
    /// no more failures than N − 1 masters would; default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_even_nodes: bool,
    /// Lease length in milliseconds (Redis locks: default 10 000; mysql-row: none unless given,
    /// i.e. the row is held until released; not for the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Clock drift allowance as a fraction of the TTL (default 0.01, Redlock's).
    #[serde(default = "default_drift_factor")]
    pub drift_factor: f64,
    /// Draw a fencing token on acquisition and have the resource reject stale ones (default false).
    #[serde(default)]
    pub fencing: bool,
    /// Renew the lease every TTL/3 while held (Redisson's watchdog; default false).
    #[serde(default)]
    pub watchdog: bool,
    /// What servers keep across a crash (Redis: default `none`; MySQL: default `always`, i.e.
    /// `innodb_flush_log_at_trx_commit=1`, with `everysec` for `=2`; ZooKeeper: always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence: Option<Persistence>,
    /// A crashed server stays down at least this long; an earlier `restart` waits (default 0).
    #[serde(default)]
    pub restart_delay_ms: u64,
    /// Per-server overrides of `persistence` and `restart_delay_ms`, by node name: masters of one
    /// Redlock need not be configured alike.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_node: BTreeMap<String, NodeParams>,
    /// Base delay between acquisition attempts, jittered in [d/2, d] (default 200).
    #[serde(default = "default_retry_delay_ms")]
    pub retry_delay_ms: u64,
    /// Attempts per acquisition before the client gives up and thinks (default: until the run
    /// ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<u32>,
    /// How long a client waits for one reply before treating it as unknown (default 100). Not
    /// for the ZooKeeper locks: their client, as the Java client, waits for an answer while its
    /// connection lives (`sim::zookeeper::store`); it bounds only opening a session in real mode.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// The version range of the library the algorithm follows whose client behaviour to model
    /// (`redisson-3.23`, …: the algorithm's `Description::variants`); not given, the first of
    /// them, the library's current release. Only for an algorithm that lists variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Redis's own settings (the Redis locks only).
    #[serde(default, skip_serializing_if = "is_unset")]
    pub redis: RedisParams,
    /// ZooKeeper's own settings (the ZooKeeper locks only).
    #[serde(default, skip_serializing_if = "is_unset")]
    pub zookeeper: ZooKeeperParams,
    /// MySQL's own settings (the MySQL locks only).
    #[serde(default, skip_serializing_if = "is_unset")]
    pub mysql: MysqlParams,
    /// etcd's own settings (the etcd locks only).
    #[serde(default, skip_serializing_if = "is_unset")]
    pub etcd: EtcdParams,
}

/// `params` as a file may write it: the grouped names, and the flat names that files written
/// before the groups used (`session_timeout_ms` for `zookeeper.session_timeout_ms`, …), so that
/// old scenario files and committed reports still read. A flat name given together with its
/// grouped twin is an error. The flat `wait_timeout_ms` meant Redis's `WAIT` timeout when
/// `wait_replicas` was set and MySQL's `wait_timeout` otherwise. Writers before the groups wrote
/// `session_timeout_ms`, `queue_timeout_ms` and `replication_lag_ms` into every file, at their
/// defaults: a flat one at its default counts as not given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamsFile {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    nodes: Option<u32>,
    #[serde(default)]
    allow_even_nodes: bool,
    #[serde(default)]
    ttl_ms: Option<u64>,
    #[serde(default = "default_drift_factor")]
    drift_factor: f64,
    #[serde(default)]
    fencing: bool,
    #[serde(default)]
    watchdog: bool,
    #[serde(default)]
    persistence: Option<Persistence>,
    #[serde(default)]
    restart_delay_ms: u64,
    #[serde(default)]
    per_node: BTreeMap<String, NodeParams>,
    #[serde(default = "default_retry_delay_ms")]
    retry_delay_ms: u64,
    #[serde(default)]
    retry_count: Option<u32>,
    #[serde(default = "default_request_timeout_ms")]
    request_timeout_ms: u64,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    redis: Option<RedisParams>,
    #[serde(default)]
    zookeeper: Option<ZooKeeperParams>,
    #[serde(default)]
    mysql: Option<MysqlParams>,
    #[serde(default)]
    etcd: Option<EtcdParams>,
    // The flat names of before the groups.
    #[serde(default)]
    replicas: Option<u32>,
    #[serde(default)]
    replication_lag_ms: Option<u64>,
    #[serde(default)]
    wait_replicas: Option<u32>,
    #[serde(default)]
    wait_timeout_ms: Option<u64>,
    #[serde(default)]
    queue_timeout_ms: Option<u64>,
    #[serde(default)]
    session_timeout_ms: Option<u64>,
    #[serde(default)]
    suspended_is_lost: Option<bool>,
    #[serde(default)]
    lock_wait_timeout_ms: Option<u64>,
}

impl TryFrom<ParamsFile> for Params {
    type Error = String;

    fn try_from(f: ParamsFile) -> Result<Params, String> {
        let mut redis = f.redis.unwrap_or_default();
        let mut zookeeper = f.zookeeper.unwrap_or_default();
        let mut mysql = f.mysql.unwrap_or_default();
        // Moves a flat name into its group, unless the group gives it too.
        fn flat<T: PartialEq>(
            name: &str,
            group: &str,
            old: Option<T>,
            slot: &mut Option<T>,
        ) -> Result<(), String> {
            match (old, slot.is_some()) {
                (Some(_), true) => Err(format!(
                    "params.{name} and params.{group}.{name} are one setting: give it once, in \
                     params.{group}"
                )),
                (Some(v), false) => {
                    *slot = Some(v);
                    Ok(())
                }
                (None, _) => Ok(()),
            }
        }
        let not_default = |v: Option<u64>, default: u64| v.filter(|&v| v != default);
        let mut replicas = (redis.replicas > 0).then_some(redis.replicas);
        flat(
            "replicas",
            "redis",
            f.replicas.filter(|&n| n > 0),
            &mut replicas,
        )?;
        redis.replicas = replicas.unwrap_or(0);
        let mut wait_replicas = (redis.wait_replicas > 0).then_some(redis.wait_replicas);
        flat(
            "wait_replicas",
            "redis",
            f.wait_replicas.filter(|&n| n > 0),
            &mut wait_replicas,
        )?;
        redis.wait_replicas = wait_replicas.unwrap_or(0);
        flat(
            "replication_lag_ms",
            "redis",
            not_default(f.replication_lag_ms, DEFAULT_REPLICATION_LAG_MS),
            &mut redis.replication_lag_ms,
        )?;
        flat(
            "queue_timeout_ms",
            "redis",
            not_default(f.queue_timeout_ms, DEFAULT_QUEUE_TIMEOUT_MS),
            &mut redis.queue_timeout_ms,
        )?;
        if redis.wait_replicas > 0 {
            flat(
                "wait_timeout_ms",
                "redis",
                f.wait_timeout_ms,
                &mut redis.wait_timeout_ms,
            )?;
        } else {
            flat(
                "wait_timeout_ms",
                "mysql",
                f.wait_timeout_ms,
                &mut mysql.wait_timeout_ms,
            )?;
        }
        flat(
            "session_timeout_ms",
            "zookeeper",
            not_default(f.session_timeout_ms, DEFAULT_SESSION_TIMEOUT_MS),
            &mut zookeeper.session_timeout_ms,
        )?;
        if f.suspended_is_lost == Some(true) {
            if zookeeper.suspended_is_lost {
                return Err(
                    "params.suspended_is_lost and params.zookeeper.suspended_is_lost are \
                            one setting: give it once, in params.zookeeper"
                        .into(),
                );
            }
            zookeeper.suspended_is_lost = true;
        }
        flat(
            "lock_wait_timeout_ms",
            "mysql",
            f.lock_wait_timeout_ms,
            &mut mysql.lock_wait_timeout_ms,
        )?;
        Ok(Params {
            key: f.key,
            nodes: f.nodes,
            allow_even_nodes: f.allow_even_nodes,
            ttl_ms: f.ttl_ms,
            drift_factor: f.drift_factor,
            fencing: f.fencing,
            watchdog: f.watchdog,
            persistence: f.persistence,
            restart_delay_ms: f.restart_delay_ms,
            per_node: f.per_node,
            retry_delay_ms: f.retry_delay_ms,
            retry_count: f.retry_count,
            request_timeout_ms: f.request_timeout_ms,
            variant: f.variant,
            redis,
            zookeeper,
            mysql,
            etcd: f.etcd.unwrap_or_default(),
        })
    }
}

/// The lock key every client contends for when a scenario names none ([`Params::key`]).
pub const LOCK_KEY: &str = "lock";

/// The longest lock name [`check_key`] accepts.
pub const MAX_KEY_LEN: usize = 48;

/// Whether `key` can name a lock in every backend at once: a Redis key, a ZooKeeper path
/// segment, an etcd prefix and a MariaDB database name (unquoted, so `[A-Za-z0-9_]`, and not
/// all digits). Why not, when it cannot.
pub fn check_key(key: &str) -> Result<(), String> {
    let shown = crate::input::clip(key);
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(format!(
            "'{shown}' must be 1 to {MAX_KEY_LEN} characters long"
        ));
    }
    if !key.starts_with(|c: char| c.is_ascii_alphabetic())
        || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!(
            "'{shown}' must start with a letter and hold only letters, digits and '_' (it names \
             a Redis key, a ZooKeeper node, an etcd prefix and a MariaDB database alike)"
        ));
    }
    Ok(())
}

impl Default for Params {
    fn default() -> Self {
        serde_json::from_str("{}").expect("defaults parse")
    }
}

/// The groups the backends' rules read (one line a backend, as `backends!` lists them).
impl Groups for Params {
    fn redis(&self) -> &RedisParams {
        &self.redis
    }
    fn zookeeper(&self) -> &ZooKeeperParams {
        &self.zookeeper
    }
    fn mysql(&self) -> &MysqlParams {
        &self.mysql
    }
    fn etcd(&self) -> &EtcdParams {
        &self.etcd
    }
}

/// Settings of one server that differ from the scenario's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeParams {
    /// This server's persistence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence: Option<Persistence>,
    /// This server's restart delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_delay_ms: Option<u64>,
}

impl Params {
    /// Whether `algorithm` accepts these parameters: what a scenario of `algorithm` with them
    /// and every other default refuses (a TTL for a lock with no lease, fencing without a token,
    /// replicas of a multi-server lock, …). The one check of parameters given outside a scenario
    /// file (`explore` flags, an expectations entry, a matrix cell).
    pub fn check_for(&self, algorithm: Algorithm) -> Result<(), ScenarioError> {
        let mut scenario = Scenario::new(algorithm);
        scenario.params = self.clone();
        scenario.validate()
    }

    /// The lock's name ([`Params::key`], `lock` when not given).
    pub fn lock_key(&self) -> &str {
        self.key.as_deref().unwrap_or(LOCK_KEY)
    }

    /// The persistence of server `node` of `algorithm`.
    pub fn persistence_of(&self, algorithm: Algorithm, node: &str) -> Persistence {
        let default = algorithm.backend().default_persistence();
        self.per_node
            .get(node)
            .and_then(|n| n.persistence)
            .or(self.persistence)
            .unwrap_or(default)
    }

    /// The lease of `algorithm`'s lock in ms, `None` when it has none.
    pub fn ttl_ms_for(&self, algorithm: Algorithm) -> Option<u64> {
        match algorithm.lease() {
            Lease::Ttl { optional: true } => self.ttl_ms,
            Lease::Ttl { optional: false } => Some(self.ttl_ms.unwrap_or(DEFAULT_TTL_MS)),
            Lease::Session | Lease::IdleConnection | Lease::None => None,
        }
    }

    /// The restart delay of server `node`, in ms.
    pub fn restart_delay_of(&self, node: &str) -> u64 {
        self.per_node
            .get(node)
            .and_then(|n| n.restart_delay_ms)
            .unwrap_or(self.restart_delay_ms)
    }
}

/// What an algorithm comes to under a scenario's parameters: how many servers, how long a silent
/// holder's lock lasts. Here rather than in the registry, which lists algorithms and knows no
/// parameters, so that the format reads the registry and not the reverse.
impl Algorithm {
    /// How its servers are named: `redis-N`, `zk-N`, `mysql-N`, `etcd-N` (its backend's
    /// module says).
    pub fn server_prefix(self) -> &'static str {
        crate::backend::BackendExt::server_prefix(self.backend())
    }

    /// How many servers the algorithm runs against, given the `nodes` and `replicas` parameters.
    pub fn servers(self, params: &Params) -> usize {
        match self.description().servers {
            Servers::One => params.nodes.unwrap_or(1) as usize + params.redis.replicas as usize,
            Servers::Masters { default, .. } => params.nodes.unwrap_or(default) as usize,
        }
    }

    /// How long, in ms, its lock can outlive a holder that stopped talking to the servers: the
    /// lease (`ttl_ms`); for a lease the servers hold (a session, a transaction-held lock's idle
    /// connection), its length as the backend's module says (ZooKeeper's session timeout, etcd's
    /// lease TTL, MariaDB's `wait_timeout`). A lock that never expires (a MySQL row without a
    /// TTL) uses the default TTL as its time scale. Fault spans and the liveness probe's wait are
    /// drawn around it.
    pub fn lease_ms(self, params: &Params) -> u64 {
        let default = || {
            params
                .ttl_ms_for(self)
                .unwrap_or(crate::scenario::DEFAULT_TTL_MS)
        };
        match self.lease() {
            // (A backend that holds no such lease cannot lend another's: the registry's test
            // `every_server_held_lease_has_its_backends_length` pins that each one has its own.)
            lease @ (Lease::Session | Lease::IdleConnection) => {
                crate::backend::BackendExt::server_lease_ms(self.backend(), lease, params)
                    .unwrap_or_else(default)
            }
            Lease::Ttl { .. } | Lease::None => default(),
        }
    }

    /// Whether its lock ends by time whatever the holder does: a lease, or for a transaction-held
    /// lock the server's `wait_timeout` on an idle connection. A holder that wants to keep such a
    /// lock must finish its work within that time. (A session does not: a live holder keeps it.)
    pub fn expires(self, params: &Params) -> bool {
        match self.lease() {
            Lease::IdleConnection => true,
            Lease::Ttl { .. } => params.ttl_ms_for(self).is_some(),
            Lease::Session | Lease::None => false,
        }
    }

    /// Whether the lock of a holder that went silent (crashed, paused, cut off) ends by itself:
    /// it [`expires`](Algorithm::expires), or its session does.
    pub fn ends_when_silent(self, params: &Params) -> bool {
        self.lease() == Lease::Session || self.expires(params)
    }

    /// The name and length in ms of what a fault is measured against, when a silent holder's
    /// lock ends: "TTL", "session timeout", "wait_timeout".
    pub fn lease_named(self, params: &Params) -> Option<(&'static str, u64)> {
        self.ends_when_silent(params)
            .then(|| (self.lease().name(), self.lease_ms(params)))
    }

    /// Whether the client is told how long its lock stays valid (a lease it counts down).
    pub fn reports_validity(self, params: &Params) -> bool {
        params.ttl_ms_for(self).is_some()
    }
}

fn default_acquisitions() -> u32 {
    3
}
fn default_hold_ms() -> u64 {
    1_000
}
fn default_think_ms() -> u64 {
    100
}

/// What each client does.
///
/// The default client is the classic one: `acquire; touch resource; work for hold_ms; touch
/// resource; release; think`. It does not re-check its lock before touching, because a pause
/// between such a check and the write is the same bug; `check_before_access` models the careful
/// client anyway.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Critical sections each client completes (default 3).
    #[serde(default = "default_acquisitions")]
    pub acquisitions_per_client: u32,
    /// Work time inside the critical section (default 1000).
    #[serde(default = "default_hold_ms")]
    pub hold_ms: u64,
    /// Instead of `hold_ms`, work right up to the validity the lock reported: the lock's contract
    /// says that is allowed (default false).
    #[serde(default)]
    pub hold_until_validity: bool,
    /// Pause between a release and the next attempt (default 100).
    #[serde(default = "default_think_ms")]
    pub think_ms: u64,
    /// Check the lock's validity (client clock) before each access and give up when it has run out.
    #[serde(default)]
    pub check_before_access: bool,
    /// Nested acquisitions per critical section (reentrant locks only; default 1): acquire this
    /// many times, work, release as many times.
    #[serde(default = "default_depth")]
    pub reentrant_depth: u32,
    /// Read/write locks: the share of critical sections that only read, taking the lock shared
    /// (each section draws from the client's seeded randomness; default 0.5 for zk-rwlock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_fraction: Option<f64>,
}

/// The share of reading sections when a read/write lock's workload does not say.
pub const DEFAULT_READ_FRACTION: f64 = 0.5;

fn default_depth() -> u32 {
    1
}

impl Default for Workload {
    fn default() -> Self {
        serde_json::from_str("{}").expect("defaults parse")
    }
}

/// One fault, at a true time from the start of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Freeze every task of a node (a GC pause, SIGSTOP) for `for_ms`; its messages queue up.
    Pause {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// How long.
        for_ms: u64,
    },
    /// Step the node's wall clock by `by_ms` (negative: backwards). Monotonic clocks never jump.
    ClockJump {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// By how much.
        by_ms: i64,
    },
    /// From now on the node's clocks (wall and monotonic) run at `rate` × true time.
    ClockDrift {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// Rate, e.g. 1.05 for 5 % fast.
        rate: f64,
    },
    /// Kill the node: its tasks stop, its memory is lost, its disk is kept. What else it loses,
    /// and how its peers learn of it, is its `scope` (default `machine`).
    Crash {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// A `process` crash (kill -9) or a `machine` crash (power loss). Default `machine`.
        #[serde(default, skip_serializing_if = "CrashScope::is_machine")]
        scope: CrashScope,
    },
    /// Start a crashed node again from its disk (not before `restart_delay_ms` after the crash).
    Restart {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
    },
    /// Promote replica `node` to primary (what Sentinel does when the primary is unreachable);
    /// clients follow the new primary. A restarted old primary comes back as a replica.
    Failover {
        /// When.
        at_ms: u64,
        /// The replica to promote.
        node: String,
    },
    /// Cut the listed nodes, as one group, off from every other node (or only from the nodes
    /// `from` lists) for `for_ms`.
    Partition {
        /// When.
        at_ms: u64,
        /// The isolated group.
        isolate: Vec<String>,
        /// The other side of the cut: without it, every node not in `isolate`. With it, only the
        /// links between the two groups are cut (a client cut off from the lock service that
        /// still reaches the resource: `"isolate": ["client-0"], "from": ["zk-0"]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Vec<String>>,
        /// How long.
        for_ms: u64,
        /// Messages sent across the cut wait and arrive after the heal, as a TCP connection
        /// retransmits them (and as real mode's proxies hold them); without it they are lost, as
        /// a network that drops packets loses them. Default false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        hold: bool,
    },
    /// Drop each message to or from the node with probability `rate` for `for_ms`.
    Loss {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// Probability in [0, 1].
        rate: f64,
        /// How long.
        for_ms: u64,
    },
    /// Delay each message to or from the node by an extra `extra_ms` for `for_ms`.
    Delay {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// Added latency.
        extra_ms: u64,
        /// How long.
        for_ms: u64,
    },
}

impl Fault {
    /// Every client of `clients` but `client-0` paused from the start for `for_ms`, so that
    /// `client-0` takes the lock first in either world (who wins the first race otherwise hangs
    /// on a millisecond of latency).
    pub fn hold_backs(clients: u32, for_ms: u64) -> Vec<Fault> {
        (1..clients)
            .map(|c| Fault::Pause {
                at_ms: 0,
                node: format!("client-{c}"),
                for_ms,
            })
            .collect()
    }

    /// When the fault starts.
    pub fn at_ms(&self) -> u64 {
        match self {
            Fault::Pause { at_ms, .. }
            | Fault::ClockJump { at_ms, .. }
            | Fault::ClockDrift { at_ms, .. }
            | Fault::Crash { at_ms, .. }
            | Fault::Restart { at_ms, .. }
            | Fault::Failover { at_ms, .. }
            | Fault::Partition { at_ms, .. }
            | Fault::Loss { at_ms, .. }
            | Fault::Delay { at_ms, .. } => *at_ms,
        }
    }

    /// The nodes the fault names.
    pub fn nodes(&self) -> Vec<&str> {
        match self {
            Fault::Partition { isolate, from, .. } => isolate
                .iter()
                .chain(from.iter().flatten())
                .map(String::as_str)
                .collect(),
            Fault::Pause { node, .. }
            | Fault::ClockJump { node, .. }
            | Fault::ClockDrift { node, .. }
            | Fault::Crash { node, .. }
            | Fault::Restart { node, .. }
            | Fault::Failover { node, .. }
            | Fault::Loss { node, .. }
            | Fault::Delay { node, .. } => vec![node.as_str()],
        }
    }

    /// The fault's kind as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Pause { .. } => "pause",
            Fault::ClockJump { .. } => "clock_jump",
            Fault::ClockDrift { .. } => "clock_drift",
            Fault::Crash { .. } => "crash",
            Fault::Restart { .. } => "restart",
            Fault::Failover { .. } => "failover",
            Fault::Partition { .. } => "partition",
            Fault::Loss { .. } => "loss",
            Fault::Delay { .. } => "delay",
        }
    }

    /// A one-line description for people.
    pub fn describe(&self) -> String {
        match self {
            Fault::Pause {
                at_ms,
                node,
                for_ms,
            } => format!("{at_ms} ms: pause {node} for {for_ms} ms"),
            Fault::ClockJump { at_ms, node, by_ms } => {
                format!("{at_ms} ms: {node}'s wall clock jumps by {by_ms:+} ms")
            }
            Fault::ClockDrift { at_ms, node, rate } => {
                format!(
                    "{at_ms} ms: {node}'s clocks run at {}x",
                    crate::input::float_text(*rate)
                )
            }
            Fault::Crash {
                at_ms,
                node,
                scope: CrashScope::Machine,
            } => format!("{at_ms} ms: crash {node}"),
            Fault::Crash {
                at_ms,
                node,
                scope: CrashScope::Process,
            } => format!("{at_ms} ms: kill {node}'s process"),
            Fault::Restart { at_ms, node } => format!("{at_ms} ms: restart {node}"),
            Fault::Failover { at_ms, node } => {
                format!("{at_ms} ms: fail over to {node}")
            }
            Fault::Partition {
                at_ms,
                isolate,
                from,
                for_ms,
                hold,
            } => format!(
                "{at_ms} ms: isolate [{}]{} for {for_ms} ms{}",
                isolate.join(", "),
                from_clause(from),
                if *hold { ", holding messages" } else { "" }
            ),
            Fault::Loss {
                at_ms,
                node,
                rate,
                for_ms,
            } => format!(
                "{at_ms} ms: drop {} of {node}'s messages for {for_ms} ms",
                crate::input::float_text(*rate)
            ),
            Fault::Delay {
                at_ms,
                node,
                extra_ms,
                for_ms,
            } => format!("{at_ms} ms: delay {node}'s messages by {extra_ms} ms for {for_ms} ms"),
        }
    }
}

/// A partition's `from` as people read it: ` from [zk-0]`, or nothing for "everyone else".
pub fn from_clause(from: &Option<Vec<String>>) -> String {
    from.as_ref()
        .map(|from| format!(" from [{}]", from.join(", ")))
        .unwrap_or_default()
}

/// What a crash takes down with the node, and how its peers learn of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashScope {
    /// The process dies (kill -9, an OOM kill, a panic): what it wrote to the operating system
    /// survives even if never fsynced (Redis `everysec` and InnoDB's
    /// `innodb_flush_log_at_trx_commit=2` lose nothing), and the machine's kernel closes its
    /// sockets at once, so peers learn of it right away (a request in flight fails, a new
    /// connection is refused until it listens again).
    Process,
    /// The machine dies (power loss, a kernel panic): what was not fsynced is lost (`everysec`:
    /// up to the last second), and peers learn of it only by their timeouts; when it is back,
    /// their old connections are reset at their next packet.
    #[default]
    Machine,
}

impl CrashScope {
    /// Whether this is a machine crash (the default, written without a `scope`).
    pub fn is_machine(&self) -> bool {
        *self == CrashScope::Machine
    }
}

fn default_clients() -> u32 {
    2
}
fn default_duration_ms() -> u64 {
    60_000
}

/// A whole run: algorithm, parameters, workload, seed and fault schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The algorithm under test.
    pub algorithm: Algorithm,
    /// Its parameters.
    #[serde(default)]
    pub params: Params,
    /// Number of clients, `client-0` … (default 2).
    #[serde(default = "default_clients")]
    pub clients: u32,
    /// What the clients do.
    #[serde(default)]
    pub workload: Workload,
    /// Clients stop starting acquisitions after this true time (default 60 000).
    #[serde(default = "default_duration_ms")]
    pub duration_ms: u64,
    /// Seed of the simulator: message latencies, scheduling and the clients' randomness.
    #[serde(default)]
    pub seed: u64,
    /// The fault schedule.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Where the clients' random choices come from (default `per_client`). Always written, so
    /// that a report written before the field existed (whose clients drew from one shared
    /// stream) is told apart when it is read: see [`Randomness`].
    #[serde(default)]
    pub randomness: Randomness,
    /// Where each server's monotonic clock starts, and so the phase of its periodic timers (a
    /// ZooKeeper tick, etcd's lessor loop): drawn from the seed by default
    /// ([`crate::server_clock`]). Always written, so that a report written before the field
    /// existed (whose servers' clocks all started at 0) is told apart when it is read.
    #[serde(default)]
    pub server_clocks: ServerClocks,
}

/// Where the servers' monotonic clocks start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerClocks {
    /// Each server's origin is drawn from the seed and its name (the default).
    #[default]
    Drawn,
    /// Every server's clock reads 0 at the start (lockcheck before the field existed).
    Zero,
    /// The origins in ms of the servers listed; the others are drawn.
    Pinned(BTreeMap<String, u64>),
}

/// Where a simulated client's random choices (tokens, retry jitter, reader or writer) come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Randomness {
    /// Each client process draws from its own stream, seeded from the scenario's seed, its node
    /// and its restarts, and each read/write section's role is fixed by the seed, the client
    /// and the section (`crate::randomness`): the same in both worlds, so `lockcheck run` and
    /// `lockcheck real` of one scenario make the same choices.
    #[default]
    PerClient,
    /// Every node draws from the simulation's one generator, in the order the draws happen
    /// (how lockcheck drew before per-client streams; a report written then has no
    /// `randomness` field, and replays with this). Real mode draws per client all the same.
    Shared,
}

impl Scenario {
    /// A scenario with every default, for building scenarios in code.
    pub fn new(algorithm: Algorithm) -> Scenario {
        Scenario {
            algorithm,
            params: Params::default(),
            clients: default_clients(),
            workload: Workload::default(),
            duration_ms: default_duration_ms(),
            seed: 0,
            faults: Vec::new(),
            randomness: Randomness::default(),
            server_clocks: ServerClocks::default(),
        }
    }

    /// Parses and validates a scenario document.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario = input::parse_json(text).map_err(|e| {
            let mut message = e.message;
            if let Some(field) = offending_field(text, &e.path, &message) {
                message = format!("{field}: {message}");
            }
            ScenarioError::Parse {
                path: e.path,
                message,
            }
        })?;
        input::objects_as_written(text, &scenario).map_err(|e| ScenarioError::Parse {
            path: e.path,
            message: e.message,
        })?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The scenario as pretty JSON (what `from_json` reads back to an equal value).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a scenario always serializes")
    }

    /// Whether its servers are the members of one ZooKeeper ensemble (members that talk to each
    /// other and share the sessions), rather than one server or independent masters.
    pub fn is_zookeeper_ensemble(&self) -> bool {
        self.algorithm.backend() == Backend::ZooKeeper && self.algorithm.servers(&self.params) > 1
    }

    /// Whether it runs against a cluster of etcd members (`params.nodes` > 1) rather than one.
    pub fn is_etcd_cluster(&self) -> bool {
        self.algorithm.backend() == Backend::Etcd && self.algorithm.servers(&self.params) > 1
    }

    /// The nodes of this scenario.
    pub fn topology(&self) -> Topology {
        Topology::new(
            self.clients as usize,
            self.algorithm.servers(&self.params),
            self.algorithm.server_prefix(),
        )
    }

    /// Checks everything a file can get wrong that its shape cannot express.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        self.validate_ranges().map_err(ScenarioError::Invalid)?;
        self.validate_server_clocks()
            .map_err(ScenarioError::Invalid)?;
        let bad = |m: String| Err(ScenarioError::Invalid(m));
        let p = &self.params;
        let algorithm = self.algorithm;
        let name = algorithm.name();
        let description = algorithm.description();
        let backend = algorithm.backend();
        if p.ttl_ms.is_some() && p.ttl_ms_for(algorithm).is_none() {
            return bad(format!(
                "params.ttl_ms: {name} has no lease (its lock ends when {}), so a TTL does not apply",
                match description.lease {
                    Lease::Session => "the holder's session does",
                    _ => "it is released or the server ends the transaction",
                }
            ));
        }
        // Each backend's group applies to the algorithms on that backend only. (Checked for every
        // generated case, so the given names are worked out only for the message.)
        let foreign = crate::backend::ALL
            .iter()
            .filter(|&&on| on != backend)
            .find_map(|&on| on.given(p).map(|given| (on, given)));
        if let Some((on, given)) = foreign {
            return bad(format!(
                "params.{} ({}): {name} does not run on {}; its settings are params.{}",
                on.name(),
                given.join(", "),
                on.name(),
                backend.name()
            ));
        }
        let policies: Vec<Persistence> = p
            .per_node
            .values()
            .filter_map(|n| n.persistence)
            .chain(p.persistence)
            .collect();
        let common = Common {
            algorithm,
            watchdog: p.watchdog,
            fencing: p.fencing,
            policies: &policies,
        };
        backend
            .check_group(p, &common)
            .map_err(ScenarioError::Invalid)?;
        if p.allow_even_nodes && description.servers == Servers::One {
            return bad(format!(
                "params.allow_even_nodes: {name} runs against one server; it applies to a lock \
                 over independent masters"
            ));
        }
        match description.servers {
            // One service: how many servers make one is the backend's rule.
            Servers::One => {
                if let Some(n) = p.nodes.filter(|&n| n != 1) {
                    backend
                        .check_nodes(name, n)
                        .map_err(ScenarioError::Invalid)?;
                }
            }
            Servers::Masters { default, min } => {
                let n = p.nodes.unwrap_or(default);
                if n < min {
                    return bad(format!(
                        "params.nodes: {name} needs at least {min} masters, got {n}"
                    ));
                }
                if n.is_multiple_of(2) && !p.allow_even_nodes {
                    return bad(format!(
                        "params.nodes: {n} {name} masters need a quorum of {} yet tolerate no \
                         more failures than {} would; use an odd number, or set \
                         params.allow_even_nodes: true",
                        n / 2 + 1,
                        n - 1
                    ));
                }
            }
        }
        backend
            .check_servers(p, &common)
            .map_err(ScenarioError::Invalid)?;
        if let Some(variant) = &p.variant {
            let shown = crate::input::clip(variant);
            if description.variants.is_empty() {
                return bad(format!(
                    "params.variant: {name} has no library variants ('{shown}' given); it \
                     follows one behaviour"
                ));
            }
            if description.variant(Some(variant)).is_none() {
                return bad(format!(
                    "params.variant: unknown variant '{shown}' of {name} (known: {})",
                    description.variant_names().join(", ")
                ));
            }
        }
        if p.watchdog && !description.renews {
            return bad(format!(
                "params.watchdog: {name} has no watchdog: {}",
                match description.lease {
                    Lease::Session => "its session is kept alive by the client all along",
                    _ => "nothing renews its lock while it is held",
                }
            ));
        }
        if p.fencing {
            if let Fencing::Unavailable(why) = description.fencing {
                return bad(format!(
                    "params.fencing: {name} has no fencing token: {why}"
                ));
            }
        }
        let topology = self.topology();
        for node in p.per_node.keys() {
            let server = topology
                .index_of(node)
                .is_some_and(|i| topology.role(i) == crate::topology::Role::Server);
            if !server {
                return bad(format!(
                    "params.per_node: '{}' is not a server of this scenario",
                    input::clip(node)
                ));
            }
        }
        backend
            .check_server_settings(p, &common)
            .map_err(ScenarioError::Invalid)?;
        if self.workload.read_fraction.is_some() && !self.algorithm.has_readers() {
            let with_readers: Vec<&str> = Algorithm::ALL
                .iter()
                .filter(|a| a.has_readers())
                .map(|a| a.name())
                .collect();
            return bad(format!(
                "workload.read_fraction: {} has no shared mode; it applies to {}",
                self.algorithm.name(),
                with_readers.join(", ")
            ));
        }
        if self.workload.reentrant_depth > 1 && !self.algorithm.reentrant() {
            return bad(format!(
                "workload.reentrant_depth: {} is not reentrant; a nested acquire would wait for \
                 the client's own lock",
                self.algorithm.name()
            ));
        }
        if self.workload.hold_until_validity && !self.algorithm.reports_validity(p) {
            return bad(format!(
                "workload.hold_until_validity: {} has no lease (here), so its lock reports no \
                 validity to hold until; a client doing so would never stop",
                self.algorithm.name()
            ));
        }
        if self.workload.hold_until_validity && p.watchdog {
            return bad(
                "workload.hold_until_validity with params.watchdog: the watchdog keeps renewing, \
                 so a client holding until its validity ends would never stop"
                    .into(),
            );
        }
        self.validate_history_size()
            .map_err(ScenarioError::Invalid)?;
        self.validate_faults()
    }

    /// Pinned server clock origins name servers of the scenario and lie within
    /// [`crate::limits::ORIGIN_SPAN_MS`].
    fn validate_server_clocks(&self) -> Result<(), String> {
        use crate::backend::zookeeper::ENSEMBLE_CLOCK;
        use crate::limits::ORIGIN_SPAN_MS;
        let scenario = self;
        let ServerClocks::Pinned(origins) = &scenario.server_clocks else {
            return Ok(());
        };
        let topology = scenario.topology();
        let servers: Vec<&str> = topology
            .with_role(crate::topology::Role::Server)
            .into_iter()
            .map(|s| topology.name(s))
            .collect();
        for (node, ms) in origins {
            if scenario.is_zookeeper_ensemble() && node != ENSEMBLE_CLOCK {
                return Err(format!(
                    "server_clocks.pinned: '{}' is a member of an ensemble, whose members share \
                     {ENSEMBLE_CLOCK}'s clock in the simulation: pin {ENSEMBLE_CLOCK}",
                    crate::input::clip(node)
                ));
            }
            if !servers.contains(&node.as_str()) {
                return Err(format!(
                    "server_clocks.pinned: '{}' is not a server of this scenario (its servers: {})",
                    crate::input::clip(node),
                    servers.join(", ")
                ));
            }
            if *ms >= ORIGIN_SPAN_MS {
                return Err(format!(
                    "server_clocks.pinned.{node}: an origin must be below {ORIGIN_SPAN_MS} ms, got {ms}"
                ));
            }
        }
        Ok(())
    }

    /// The workload fits in one run's history: a run that does every critical section it asks
    /// for records at least [`limits::workload_entries`] entries, and a history holds at most
    /// [`limits::MAX_HISTORY_ENTRIES`]. Refused before it runs, naming what asks for the most.
    /// (What grows with time instead, waits and retries, is folded or stops the run at the cap:
    /// [`crate::history::Recording`].)
    fn validate_history_size(&self) -> Result<(), String> {
        use crate::limits::{
            workload_entries, MAX_HISTORY_ENTRIES, NESTED_ENTRIES, SECTION_ENTRIES,
        };
        let w = &self.workload;
        let sections = u64::from(self.clients) * u64::from(w.acquisitions_per_client);
        let depth = u64::from(w.reentrant_depth);
        // The watchdog renews every third of the lease while a section is held.
        let renewals = match self.params.ttl_ms_for(self.algorithm) {
            Some(ttl) if self.params.watchdog && !w.hold_until_validity => {
                w.hold_ms.saturating_mul(3) / ttl.max(1)
            }
            _ => 0,
        };
        let max = MAX_HISTORY_ENTRIES as u64;
        let entries = workload_entries(sections, depth, renewals);
        if entries <= max {
            return Ok(());
        }
        let per_section = workload_entries(1, depth, renewals);
        let nested = NESTED_ENTRIES * (depth - 1);
        let (field, why) = if renewals > SECTION_ENTRIES + nested {
            (
                "workload.hold_ms",
                format!(
                    ", {renewals} of them the watchdog's renewals of a {} ms lease over a {} ms \
                     hold",
                    self.params.ttl_ms_for(self.algorithm).unwrap_or(0),
                    w.hold_ms
                ),
            )
        } else if nested > SECTION_ENTRIES {
            (
                "workload.reentrant_depth",
                format!(", {nested} of them for {} nested acquisitions", depth - 1),
            )
        } else {
            ("workload.acquisitions_per_client", String::new())
        };
        Err(format!(
            "{field}: {} client(s) × {} critical section(s) would record at least {entries} \
             history entries ({per_section} a section{why}), more than a run keeps ({max}); \
             {} section(s) in all would fit",
            self.clients,
            w.acquisitions_per_client,
            max / per_section
        ))
    }

    /// Every number within its documented range ([`crate::limits`]), each error naming its
    /// field: what keeps simulated time from overflowing and the simulator within what it can
    /// build, whatever the file says.
    fn validate_ranges(&self) -> Result<(), String> {
        use crate::limits::{self, any_ms, positive_ms, within};
        let p = &self.params;
        positive_ms("duration_ms", self.duration_ms)?;
        within("clients", self.clients, 1, limits::MAX_CLIENTS)?;
        if let Some(key) = &p.key {
            check_key(key).map_err(|e| format!("params.key: {e}"))?;
        }
        if let Some(n) = p.nodes {
            within("params.nodes", n, 1, limits::MAX_NODES)?;
        }
        if let Some(ttl) = p.ttl_ms {
            positive_ms("params.ttl_ms", ttl)?;
        }
        if !(0.0..1.0).contains(&p.drift_factor) {
            return Err(format!(
                "params.drift_factor must be in [0, 1), got {}",
                crate::input::float_text(p.drift_factor)
            ));
        }
        any_ms("params.restart_delay_ms", p.restart_delay_ms)?;
        for (node, n) in &p.per_node {
            if let Some(delay) = n.restart_delay_ms {
                any_ms(
                    &format!("params.per_node.{}.restart_delay_ms", input::clip(node)),
                    delay,
                )?;
            }
        }
        positive_ms("params.retry_delay_ms", p.retry_delay_ms)?;
        if let Some(n) = p.retry_count {
            within("params.retry_count", n, 1, limits::MAX_RETRY_COUNT)?;
        }
        crate::backend::check_ranges(p)?;
        positive_ms("params.request_timeout_ms", p.request_timeout_ms)?;
        let w = &self.workload;
        within(
            "workload.acquisitions_per_client",
            w.acquisitions_per_client,
            1,
            limits::MAX_ACQUISITIONS,
        )?;
        any_ms("workload.hold_ms", w.hold_ms)?;
        any_ms("workload.think_ms", w.think_ms)?;
        within(
            "workload.reentrant_depth",
            w.reentrant_depth,
            1,
            limits::MAX_REENTRANT_DEPTH,
        )?;
        if let Some(f) = w.read_fraction {
            if !(0.0..=1.0).contains(&f) {
                return Err(format!(
                    "workload.read_fraction must be in [0, 1], got {}",
                    crate::input::float_text(f)
                ));
            }
        }
        if self.faults.len() > limits::MAX_FAULTS {
            return Err(format!(
                "faults: at most {} faults, got {}",
                limits::MAX_FAULTS,
                self.faults.len()
            ));
        }
        let mut delays: u64 = 0;
        for (i, fault) in self.faults.iter().enumerate() {
            let field = |name: &str| format!("faults[{i}] ({}): {name}", fault.kind());
            match fault {
                Fault::Pause { for_ms, .. } | Fault::Partition { for_ms, .. } => {
                    positive_ms(&field("for_ms"), *for_ms)?
                }
                Fault::Loss { for_ms, rate, .. } => {
                    positive_ms(&field("for_ms"), *for_ms)?;
                    if !(0.0..=1.0).contains(rate) {
                        return Err(format!(
                            "{} must be in [0, 1], got {}",
                            field("rate"),
                            crate::input::float_text(*rate)
                        ));
                    }
                }
                Fault::Delay {
                    for_ms, extra_ms, ..
                } => {
                    positive_ms(&field("for_ms"), *for_ms)?;
                    positive_ms(&field("extra_ms"), *extra_ms)?;
                    delays = delays.saturating_add(*extra_ms);
                    if delays > limits::MAX_MS {
                        return Err(format!(
                            "{}: the delays' extra_ms add up to more than {} ms (365 days); \
                             overlapping delays add up, so their sum is bounded",
                            field("extra_ms"),
                            limits::MAX_MS
                        ));
                    }
                }
                Fault::ClockJump { by_ms, .. } => {
                    if *by_ms == 0 {
                        return Err(format!("{} must not be 0", field("by_ms")));
                    }
                    let max = limits::MAX_MS as i64;
                    within(&field("by_ms"), *by_ms, -max, max)
                        .map_err(|e| format!("{e} ms (at most 365 days either way)"))?;
                }
                Fault::ClockDrift { rate, .. }
                    if !(*rate > 0.0 && *rate <= limits::MAX_DRIFT_RATE) =>
                {
                    return Err(format!(
                        "{} must be in (0, {}], got {}",
                        field("rate"),
                        limits::MAX_DRIFT_RATE,
                        crate::input::float_text(*rate)
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn validate_faults(&self) -> Result<(), ScenarioError> {
        let topology = self.topology();
        let mut order: Vec<(u64, usize)> = self
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| (f.at_ms(), i))
            .collect();
        order.sort();
        // Whether each node is down, replayed in time order (restarts must follow crashes), and
        // which server is the primary.
        let mut down: BTreeMap<&str, bool> = BTreeMap::new();
        let mut primary = format!("{}-0", self.algorithm.server_prefix());
        // How far each node's wall clock is off by its jumps so far: at most MAX_MS either way,
        // so that it stays a valid time whatever the jumps' order.
        let mut jumped: BTreeMap<&str, i64> = BTreeMap::new();
        for (_, i) in order {
            let fault = &self.faults[i];
            let at = |m: &str| {
                Err(ScenarioError::Invalid(format!(
                    "faults[{i}] ({}): {m}",
                    fault.kind()
                )))
            };
            if fault.at_ms() >= self.duration_ms {
                return at(&format!(
                    "at_ms {} is not before the end of the run (duration_ms {})",
                    fault.at_ms(),
                    self.duration_ms
                ));
            }
            for node in fault.nodes() {
                if topology.index_of(node).is_none() {
                    return at(&format!(
                        "no node named '{}' (this scenario has {})",
                        input::clip(node),
                        topology.listed()
                    ));
                }
                if node == Topology::RESOURCE && !matches!(fault, Fault::Partition { .. }) {
                    return at(
                        "the resource is the checker's observer; only partitions may name it",
                    );
                }
            }
            match fault {
                Fault::Partition { isolate, .. } if isolate.is_empty() => {
                    return at("isolate must name at least one node");
                }
                Fault::Partition {
                    from: Some(from), ..
                } if from.is_empty() => {
                    return at("from must name at least one node (or be left out: everyone else)");
                }
                Fault::Partition {
                    isolate,
                    from: Some(from),
                    ..
                } if from.iter().any(|n| isolate.contains(n)) => {
                    let both: Vec<&str> = from
                        .iter()
                        .filter(|n| isolate.contains(n))
                        .map(String::as_str)
                        .collect();
                    return at(&format!(
                        "{} on both sides of the cut (isolate and from)",
                        both.join(", ")
                    ));
                }
                Fault::ClockJump { node, by_ms, .. } => {
                    let total = jumped.entry(node).or_default();
                    *total += by_ms;
                    if total.unsigned_abs() > crate::limits::MAX_MS {
                        return at(&format!(
                            "by_ms: {node}'s clock jumps add up to {total} ms here, beyond 365 \
                             days either way"
                        ));
                    }
                }
                Fault::Crash { node, .. } if down.insert(node, true) == Some(true) => {
                    return at(&format!("{node} is already down"));
                }
                Fault::Restart { node, .. } if down.insert(node, false) != Some(true) => {
                    return at(&format!("{node} was not crashed before this restart"));
                }
                Fault::Failover { node, .. } => {
                    if self.params.redis.replicas == 0 {
                        return at("there is no replica to promote (params.redis.replicas is 0)");
                    }
                    let is_server = topology
                        .index_of(node)
                        .is_some_and(|i| topology.role(i) == crate::topology::Role::Server);
                    if !is_server {
                        return at(&format!("{node} is not a server"));
                    }
                    if *node == primary {
                        return at(&format!("{node} is already the primary"));
                    }
                    primary = node.clone();
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Serde reports errors inside an internally tagged enum (a fault) at the enum, not at the field:
/// find the field of the object at `path` whose value is the one the message quotes.
fn offending_field(text: &str, path: &str, message: &str) -> Option<String> {
    let quoted = message.split('`').nth(1)?;
    let mut node: &serde_json::Value = &serde_json::from_str(text).ok()?;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        node = node.get(name)?;
        if let Some(i) = index {
            node = node.get(i)?;
        }
    }
    let fields: Vec<&String> = node
        .as_object()?
        .iter()
        .filter(|(_, v)| serde_json::to_string(v).ok().as_deref() == Some(quoted))
        .map(|(k, _)| k)
        .collect();
    match fields.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// A scenario of `algorithm` with every default, and for a lock that runs the user's scripts
/// ([`lockcheck_algorithms::describe::Description::scripted`]) a fenced compare-and-delete lock
/// with a renewal: what the tests that sweep the registry run.
#[cfg(test)]
pub(crate) fn runnable(algorithm: Algorithm) -> Scenario {
    use lockcheck_algorithms::redis::script_spec::{Expect, Input, ScriptStep};
    let mut s = Scenario::new(algorithm);
    if algorithm.description().scripted {
        let step = |script: &str, keys: Vec<Input>, argv: Vec<Input>, success| ScriptStep {
            script: script.into(),
            keys,
            argv,
            success,
        };
        s.params.redis.script = Some(UserScript {
            acquire: vec![step(
                "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
                 return redis.call('INCR', KEYS[2]) else return false end",
                vec![Input::Key, Input::FenceKey],
                vec![Input::Token, Input::TtlMs],
                Expect::Positive,
            )],
            release: step(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) \
                 else return 0 end",
                vec![Input::Key],
                vec![Input::Token],
                Expect::One,
            ),
            extend: Some(step(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                 return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end",
                vec![Input::Key],
                vec![Input::Token, Input::TtlMs],
                Expect::One,
            )),
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    /// A lease the servers hold (a session, an idle connection) is one the algorithm's backend
    /// gives a length for: no backend's length is borrowed for another's.
    #[test]
    fn every_server_held_lease_has_its_backends_length() {
        for &a in Algorithm::ALL {
            if let lease @ (Lease::Session | Lease::IdleConnection) = a.lease() {
                assert!(
                    a.backend()
                        .server_lease_ms(lease, &Params::default())
                        .is_some(),
                    "{}: {lease:?} on {}",
                    a.name(),
                    a.backend().name()
                );
            }
        }
    }

    /// Each backend's servers have a prefix of their own, so a node name says its backend.
    #[test]
    fn server_prefixes_and_names_are_distinct() {
        for (i, a) in crate::backend::ALL.iter().enumerate() {
            for b in &crate::backend::ALL[i + 1..] {
                assert_ne!(a.server_prefix(), b.server_prefix());
                assert_ne!(a.name(), b.name());
            }
        }
    }

    use lockcheck_algorithms::describe::Fencing;

    /// What the scenario's validation makes of each description: a default scenario is valid,
    /// and each capability the description denies is refused by name.
    #[test]
    fn validation_follows_each_description() {
        for &a in Algorithm::ALL {
            let d = a.description();
            let valid = |f: &dyn Fn(&mut Scenario)| {
                let mut s = runnable(a);
                f(&mut s);
                s.validate()
            };
            assert_eq!(valid(&|_| {}), Ok(()), "{}", d.name);
            let fencing = valid(&|s| s.params.fencing = true);
            assert_eq!(
                fencing.is_ok(),
                d.fencing == Fencing::Token,
                "{}: {fencing:?}",
                d.name
            );
            let watchdog = valid(&|s| s.params.watchdog = true);
            assert_eq!(watchdog.is_ok(), d.renews, "{}: {watchdog:?}", d.name);
            let replicas = valid(&|s| s.params.redis.replicas = 1);
            assert_eq!(replicas.is_ok(), d.replicas, "{}: {replicas:?}", d.name);
            let readers = valid(&|s| s.workload.read_fraction = Some(0.5));
            assert_eq!(readers.is_ok(), d.readers, "{}: {readers:?}", d.name);
            let nested = valid(&|s| s.workload.reentrant_depth = 2);
            assert_eq!(nested.is_ok(), d.reentrant, "{}: {nested:?}", d.name);
            let ttl = valid(&|s| s.params.ttl_ms = Some(5_000));
            assert_eq!(
                ttl.is_ok(),
                matches!(d.lease, Lease::Ttl { .. }),
                "{}: {ttl:?}",
                d.name
            );
            if let Servers::Masters { min, .. } = d.servers {
                assert!(valid(&|s| s.params.nodes = Some(min - 1)).is_err());
                assert!(valid(&|s| s.params.nodes = Some(min + 1)).is_err(), "even");
            } else if d.backend.check_nodes(d.name, 3).is_ok() {
                // One service of several members, as the backend's module says: a standalone
                // server (one etcd member) or an odd ensemble (cluster).
                assert_eq!(valid(&|s| s.params.nodes = Some(3)), Ok(()), "{}", d.name);
                assert!(valid(&|s| s.params.nodes = Some(2)).is_err(), "{}", d.name);
            } else {
                assert!(valid(&|s| s.params.nodes = Some(3)).is_err(), "{}", d.name);
            }
        }
    }

    #[test]
    fn the_lease_is_what_the_description_says_ends_a_silent_holder() {
        for &a in Algorithm::ALL {
            let p = Params::default();
            let named = a.lease_named(&p).map(|(name, _)| name);
            let expected = match a.lease() {
                Lease::Ttl { optional: false } => Some("TTL"),
                Lease::Session => Some("session timeout"),
                Lease::IdleConnection => Some("wait_timeout"),
                Lease::Ttl { optional: true } | Lease::None => None,
            };
            assert_eq!(named, expected, "{}", a.name());
        }
    }

    /// The backend an algorithm is matched to is the one its user-facing name promises; a name
    /// that says none is an error here, not a Redis lock by default.
    #[test]
    fn every_algorithm_runs_on_the_backend_its_name_says() {
        for &a in Algorithm::ALL {
            let name = a.name();
            let by_name = if name.starts_with("zk-") {
                Backend::ZooKeeper
            } else if name.starts_with("mysql-") {
                Backend::Mysql
            } else if name.contains("redis") || name == "redlock" {
                Backend::Redis
            } else if name.starts_with("etcd-") {
                Backend::Etcd
            } else {
                panic!("{name}: its name says no backend; name it after its server");
            };
            assert_eq!(a.backend(), by_name, "{name}");
        }
    }

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::from_json(text)
    }

    #[test]
    fn a_partition_holds_messages_only_when_it_says_so_and_says_so_only_then() {
        let text = r#"{"algorithm": "redlock", "faults": [
            {"fault": "partition", "at_ms": 0, "isolate": ["redis-0"], "for_ms": 10, "hold": true},
            {"fault": "partition", "at_ms": 20, "isolate": ["redis-1"], "for_ms": 10}]}"#;
        let s = Scenario::from_json(text).unwrap();
        let holds: Vec<bool> = s
            .faults
            .iter()
            .map(|f| matches!(f, Fault::Partition { hold: true, .. }))
            .collect();
        assert_eq!(holds, [true, false]);
        // A losing partition is written as before the option existed, so older reports and
        // their history digests stay as they were.
        let json = serde_json::to_string(&s.faults).unwrap();
        assert_eq!(json.matches("\"hold\"").count(), 1, "{json}");
        let bad = text.replace("\"hold\": true", "\"hold\": \"yes\"");
        assert!(Scenario::from_json(&bad).is_err());
    }

    #[test]
    fn every_algorithm_round_trips_by_name() {
        for &a in Algorithm::ALL {
            assert_eq!(Algorithm::from_name(a.name()), Some(a));
            let doc = runnable(a).to_json();
            assert_eq!(Scenario::from_json(&doc).unwrap().algorithm, a);
        }
    }

    #[test]
    fn defaults_fill_a_minimal_file() {
        let s = parse(r#"{"algorithm": "single-redis"}"#).unwrap();
        assert_eq!(s, Scenario::new(Algorithm::SingleRedis));
        assert_eq!(s.params.ttl_ms_for(s.algorithm), Some(10_000));
        assert_eq!(Scenario::from_json(&s.to_json()).unwrap(), s);
    }

    #[test]
    fn unknown_algorithm_is_named() {
        let e = parse(r#"{"algorithm": "paxos-lock"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("algorithm") && e.contains("paxos-lock"), "{e}");
    }

    #[test]
    fn unknown_keys_are_errors() {
        let e = parse(r#"{"algorithm": "single-redis", "params": {"tll_ms": 5}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tll_ms"), "{e}");
        let e = parse(
            r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "crash", "node": "redis-0", "x": 1}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("faults[0]") && e.contains('x'), "{e}");
    }

    #[test]
    fn each_backend_has_its_group_of_params() {
        let s = parse(
            r#"{"algorithm": "single-redis", "params": {"redis": {"replicas": 1, "wait_replicas": 1, "wait_timeout_ms": 20}}}"#,
        )
        .unwrap();
        assert_eq!(s.params.redis.replicas, 1);
        assert_eq!(s.params.redis.wait_timeout_ms(), 20);
        let s = parse(
            r#"{"algorithm": "zk-sequential", "params": {"zookeeper": {"session_timeout_ms": 8000, "suspended_is_lost": true}}}"#,
        )
        .unwrap();
        assert_eq!(s.params.zookeeper.session_timeout_ms(), 8_000);
        let s = parse(
            r#"{"algorithm": "mysql-for-update-held", "params": {"mysql": {"wait_timeout_ms": 3000, "lock_wait_timeout_ms": 2000}}}"#,
        )
        .unwrap();
        assert_eq!(s.params.mysql.wait_timeout_ms(), 3_000);
        assert_eq!(s.params.mysql.lock_wait_timeout_ms(), 2_000);
        // Written back grouped, and read back the same.
        let json = s.to_json();
        assert!(json.contains("\"mysql\""), "{json}");
        assert_eq!(Scenario::from_json(&json).unwrap(), s);
    }

    /// The issue's example: a setting of another backend is refused by name, not ignored.
    #[test]
    fn a_setting_of_another_backend_is_refused() {
        for (text, field) in [
            (
                r#"{"algorithm": "single-redis", "params": {"zookeeper": {"session_timeout_ms": 8000}}}"#,
                "params.zookeeper",
            ),
            (
                r#"{"algorithm": "single-redis", "params": {"session_timeout_ms": 8000}}"#,
                "params.zookeeper",
            ),
            (
                r#"{"algorithm": "zk-herd", "params": {"mysql": {"lock_wait_timeout_ms": 1000}}}"#,
                "params.mysql",
            ),
            (
                r#"{"algorithm": "mysql-row", "params": {"redis": {"queue_timeout_ms": 1000}}}"#,
                "params.redis",
            ),
            (
                r#"{"algorithm": "single-redis", "params": {"redis": {"queue_timeout_ms": 1000}}}"#,
                "params.redis.queue_timeout_ms",
            ),
            (
                r#"{"algorithm": "single-redis", "params": {"redis": {"replication_lag_ms": 50}}}"#,
                "params.redis.replication_lag_ms",
            ),
            (
                r#"{"algorithm": "single-redis", "params": {"redis": {"wait_timeout_ms": 50}}}"#,
                "params.redis.wait_timeout_ms",
            ),
            (
                r#"{"algorithm": "single-redis", "params": {"allow_even_nodes": true}}"#,
                "params.allow_even_nodes",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(field), "{text}: {e}");
        }
    }

    #[test]
    fn a_zookeeper_lock_runs_against_one_server_or_an_odd_ensemble() {
        for n in [1, 3, 5] {
            let text = format!(r#"{{"algorithm": "zk-sequential", "params": {{"nodes": {n}}}}}"#);
            let scenario = parse(&text).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(
                scenario
                    .topology()
                    .with_role(crate::topology::Role::Server)
                    .len(),
                n
            );
        }
        let e = parse(r#"{"algorithm": "zk-herd", "params": {"nodes": 4}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("params.nodes") && e.contains("odd"), "{e}");
    }

    /// Files written before the groups (scenario files, committed reports) still read, to the
    /// same settings; the old writer's defaults, written into every file, count as not given.
    #[test]
    fn the_flat_names_of_before_the_groups_still_read() {
        let old = parse(
            r#"{"algorithm": "single-redis", "params": {"replicas": 1, "wait_replicas": 1, "wait_timeout_ms": 30, "replication_lag_ms": 100, "queue_timeout_ms": 5000, "session_timeout_ms": 10000}}"#,
        )
        .unwrap();
        assert_eq!(
            old.params.redis,
            RedisParams {
                replicas: 1,
                wait_replicas: 1,
                wait_timeout_ms: Some(30),
                ..RedisParams::default()
            }
        );
        assert_eq!(old.params.zookeeper, ZooKeeperParams::default());
        let old = parse(
            r#"{"algorithm": "mysql-for-update-held", "params": {"wait_timeout_ms": 10000, "lock_wait_timeout_ms": 2000, "session_timeout_ms": 10000, "queue_timeout_ms": 5000, "replication_lag_ms": 100}}"#,
        )
        .unwrap();
        assert_eq!(old.params.mysql.wait_timeout_ms, Some(10_000));
        assert_eq!(old.params.mysql.lock_wait_timeout_ms, Some(2_000));
        assert_eq!(old.params.redis, RedisParams::default());
        let old = parse(
            r#"{"algorithm": "zk-sequential", "params": {"session_timeout_ms": 6000, "suspended_is_lost": true}}"#,
        )
        .unwrap();
        assert_eq!(old.params.zookeeper.session_timeout_ms, Some(6_000));
        assert!(old.params.zookeeper.suspended_is_lost);
        let e = parse(
            r#"{"algorithm": "zk-sequential", "params": {"session_timeout_ms": 6000, "zookeeper": {"session_timeout_ms": 8000}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("once"), "{e}");
    }

    #[test]
    fn impossible_durations_are_errors() {
        for (doc, needle) in [
            (
                r#"{"algorithm": "single-redis", "params": {"ttl_ms": 0}}"#,
                "ttl_ms",
            ),
            (
                r#"{"algorithm": "single-redis", "params": {"ttl_ms": -5}}"#,
                "params.ttl_ms",
            ),
            (
                r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "pause", "node": "client-0"}]}"#,
                "for_ms",
            ),
            (
                r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "pause", "node": "client-0", "for_ms": -1}]}"#,
                "for_ms",
            ),
            (
                r#"{"algorithm": "single-redis", "duration_ms": 0}"#,
                "duration_ms",
            ),
        ] {
            let e = parse(doc).unwrap_err().to_string();
            assert!(e.contains(needle), "{doc}: {e}");
        }
    }

    #[test]
    fn nodes_must_exist_and_restarts_follow_crashes() {
        let e = parse(
            r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "crash", "node": "redis-7"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("redis-7"), "{e}");
        let e = parse(
            r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "restart", "node": "redis-0"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not crashed"), "{e}");
        parse(
            r#"{"algorithm": "single-redis", "faults": [
                {"at_ms": 5, "fault": "restart", "node": "redis-0"},
                {"at_ms": 5, "fault": "crash", "node": "redis-0"}]}"#,
        )
        .expect_err("a restart listed first at the same time still comes before the crash");
    }

    #[test]
    fn malformed_json_is_an_error() {
        assert!(matches!(
            parse("{\"algorithm\": "),
            Err(ScenarioError::Parse { .. })
        ));
    }
}
