//! `params`: the settings every algorithm reads at the top, each backend's group below
//! (`crate::backend`), and what an algorithm comes to under them.

use super::*;

/// The lease of the lease locks when a scenario gives none.
pub const DEFAULT_TTL_MS: u64 = lockcheck_algorithms::describe::DEFAULT_TTL.as_millis() as u64;
/// Whether a parameter group is at its default, "not given": it is then left out of the file.
pub(super) fn is_unset<T: Default + PartialEq>(group: &T) -> bool {
    *group == T::default()
}
pub(super) fn default_drift_factor() -> f64 {
    0.01
}
pub(super) fn default_retry_delay_ms() -> u64 {
    200
}
pub(super) fn default_request_timeout_ms() -> u64 {
    100
}
/// Algorithm parameters. Those every algorithm reads (or every one whose description says so)
/// sit at the top; each backend's own settings sit in its group (`redis`, `zookeeper`,
/// `mysql`, `etcd`), which only an algorithm on that backend accepts. Files written before the
/// groups existed (the same names, flat) are still read (through the private `ParamsFile`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "super::flat::ParamsFile")]
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
