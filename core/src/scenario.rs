//! The scenario: everything that decides a run, and nothing else.
//!
//! Like a TigerBeetle VOPR seed, a [`Scenario`] is the whole truth of a run: the same scenario gives
//! the same history, byte for byte, whatever machine, thread count or wall time. It is also the
//! user-facing file format (`lockcheck run FILE`) and is embedded in every report, so it is
//! parsed strictly: unknown keys and impossible values are errors that name the field at fault.
//!
//! This file is the format's top: the [`Scenario`], its workload and where its randomness and
//! server clocks come from. Beside it, `scenario/`: [`Params`] (`params.rs`, with what an
//! algorithm comes to under them), the flat names older files used (`flat.rs`), the fault
//! vocabulary (`fault.rs`) and the checks a file's shape cannot express (`validate.rs`). A
//! backend's own settings and rules are not here but in its module, `crate::backend::<name>`;
//! their groups and constants are re-exported here, where files written against the format
//! find them.

mod fault;
mod flat;
mod params;
mod validate;

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
pub use crate::persistence::Persistence;
pub use crate::registry::Algorithm;
pub use fault::{from_clause, CrashScope, Fault};
pub use lockcheck_algorithms::describe::{Backend, Lease};
pub use lockcheck_algorithms::redis::script_spec::UserScript;
pub use params::{check_key, NodeParams, Params, DEFAULT_TTL_MS, LOCK_KEY, MAX_KEY_LEN};

use crate::backend::{BackendExt, Common, Groups};
use crate::input;
use crate::topology::Topology;
use lockcheck_algorithms::describe::{Fencing, Servers};
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
mod tests;
