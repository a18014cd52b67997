//! The algorithm under test, built from a scenario over any world's stores.
//!
//! Both worlds build their client's lock here: the simulator over its simulated stores, real mode
//! over connections to real servers. One place decides how a scenario's parameters become an
//! algorithm's configuration, so a verdict means the same thing in both worlds.

use crate::scenario::{Algorithm, Params, Scenario, DEFAULT_TTL_MS};
use crate::workload::LOCK_KEY;
use lockcheck_algorithms::mysql::store::SqlStore;
use lockcheck_algorithms::mysql::{
    MysqlForUpdateHeld, MysqlForUpdateHeldConfig, MysqlRow, MysqlRowConfig, MysqlUnique,
    MysqlUniqueConfig,
};
use lockcheck_algorithms::redis::fair::{FairConfig, RedisFair};
use lockcheck_algorithms::redis::redlock::{Redlock, RedlockConfig};
use lockcheck_algorithms::redis::reentrant::{RedisReentrant, ReentrantConfig};
use lockcheck_algorithms::redis::single::{SingleRedis, SingleRedisConfig};
use lockcheck_algorithms::redis::store::RedisStore;
use lockcheck_algorithms::retry::MAX_BACKOFF;
use lockcheck_algorithms::zookeeper::store::ZkStore;
use lockcheck_algorithms::zookeeper::{ZkHerd, ZkLockConfig, ZkReadWriteLock, ZkSequential};
use lockcheck_algorithms::{Env, Guard, Lock, LockError};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// A world's connections to its servers, as the algorithms' store traits. A lock asks for the
/// stores its algorithm needs, once, when it is built.
pub trait Stores {
    /// A connection to a Redis server.
    type Redis: RedisStore;
    /// A ZooKeeper session.
    type Zk: ZkStore;
    /// A MySQL connection.
    type Sql: SqlStore;

    /// The Redis server a one-server algorithm talks to (the primary; after a failover, whoever
    /// the clients take for the primary).
    fn redis_primary(&self) -> Self::Redis;
    /// One connection per Redis master, in server order (Redlock's masters).
    fn redis_masters(&self) -> Vec<Self::Redis>;
    /// A new session with the ZooKeeper server.
    fn zookeeper(&self) -> Self::Zk;
    /// A connection to the MySQL server.
    fn mysql(&self) -> Self::Sql;
}

/// The algorithm under test, built for one client over the stores `S`.
pub enum AnyLock<S: Stores> {
    /// `single-redis`.
    SingleRedis(SingleRedis<S::Redis>),
    /// `redlock`.
    Redlock(Redlock<S::Redis>),
    /// `redis-reentrant`.
    RedisReentrant(RedisReentrant<S::Redis>),
    /// `redis-fair`.
    RedisFair(RedisFair<S::Redis>),
    /// `zk-sequential`.
    ZkSequential(ZkSequential<S::Zk>),
    /// `zk-herd`.
    ZkHerd(ZkHerd<S::Zk>),
    /// `zk-rwlock`: both sides on one session.
    ZkRwLock(ZkReadWriteLock<Rc<S::Zk>>),
    /// `mysql-row`.
    MysqlRow(MysqlRow<S::Sql>),
    /// `mysql-unique`.
    MysqlUnique(MysqlUnique<S::Sql>),
    /// `mysql-for-update-held`.
    MysqlForUpdateHeld(MysqlForUpdateHeld<S::Sql>),
}

/// Calls `$body` with `$l` bound to the lock side a section uses: the read or write side of a
/// read/write lock (by `$shared`), the one lock otherwise.
macro_rules! with_side {
    ($lock:expr, $shared:expr, |$l:ident| $body:expr) => {
        match $lock {
            AnyLock::SingleRedis($l) => $body,
            AnyLock::Redlock($l) => $body,
            AnyLock::RedisReentrant($l) => $body,
            AnyLock::RedisFair($l) => $body,
            AnyLock::ZkSequential($l) => $body,
            AnyLock::ZkHerd($l) => $body,
            AnyLock::MysqlRow($l) => $body,
            AnyLock::MysqlUnique($l) => $body,
            AnyLock::MysqlForUpdateHeld($l) => $body,
            AnyLock::ZkRwLock(rw) => {
                let $l = if $shared { &rw.read } else { &rw.write };
                $body
            }
        }
    };
}

impl<S: Stores> AnyLock<S> {
    /// The lock of `scenario`'s algorithm over `stores`, for the client whose environment is
    /// `env` (its randomness names the owner of the locks that have one: a (re)started client is
    /// a new process, so a new owner).
    pub fn build(scenario: &Scenario, stores: &S, env: &impl Env) -> AnyLock<S> {
        let p = &scenario.params;
        let algorithm = scenario.algorithm;
        let ttl = Duration::from_millis(p.ttl_ms_for(algorithm).unwrap_or(DEFAULT_TTL_MS));
        let retry_delay = Duration::from_millis(p.retry_delay_ms);
        let max_retry_delay = max_retry_delay(scenario);
        match algorithm {
            Algorithm::SingleRedis => AnyLock::SingleRedis(SingleRedis::new(
                stores.redis_primary(),
                SingleRedisConfig {
                    key: LOCK_KEY.to_string(),
                    ttl,
                    drift_factor: p.drift_factor,
                    retry_delay,
                    retry_count: p.retry_count,
                    max_retry_delay,
                    fencing: p.fencing,
                    wait_replicas: (p.wait_replicas > 0).then_some((
                        p.wait_replicas,
                        Duration::from_millis(p.wait_timeout_ms_for(algorithm)),
                    )),
                },
            )),
            Algorithm::Redlock => AnyLock::Redlock(Redlock::new(
                stores.redis_masters(),
                RedlockConfig {
                    key: LOCK_KEY.to_string(),
                    ttl,
                    drift_factor: p.drift_factor,
                    retry_delay,
                    retry_count: p.retry_count,
                    max_retry_delay,
                },
            )),
            Algorithm::RedisReentrant => AnyLock::RedisReentrant(RedisReentrant::new(
                stores.redis_primary(),
                ReentrantConfig {
                    key: LOCK_KEY.to_string(),
                    ttl,
                    drift_factor: p.drift_factor,
                    retry_delay,
                    retry_count: p.retry_count,
                    max_retry_delay,
                },
                // Redisson's owner: UUID:thread.
                format!("{}:1", env.new_token()),
            )),
            Algorithm::RedisFair => AnyLock::RedisFair(RedisFair::new(
                stores.redis_primary(),
                FairConfig {
                    key: LOCK_KEY.to_string(),
                    ttl,
                    drift_factor: p.drift_factor,
                    retry_delay,
                    retry_count: p.retry_count,
                    max_retry_delay,
                    wait_timeout: Duration::from_millis(p.queue_timeout_ms),
                },
                format!("{}:1", env.new_token()),
            )),
            Algorithm::ZkSequential => {
                AnyLock::ZkSequential(ZkSequential::new(stores.zookeeper(), zk_config(p)))
            }
            Algorithm::ZkHerd => AnyLock::ZkHerd(ZkHerd::new(stores.zookeeper(), zk_config(p))),
            Algorithm::ZkRwLock => AnyLock::ZkRwLock(ZkReadWriteLock::new(
                Rc::new(stores.zookeeper()),
                zk_config(p),
            )),
            Algorithm::MysqlRow => AnyLock::MysqlRow(MysqlRow::new(
                stores.mysql(),
                MysqlRowConfig {
                    resource: LOCK_KEY.to_string(),
                    ttl: p.ttl_ms_for(algorithm).map(Duration::from_millis),
                    drift_factor: p.drift_factor,
                    retry_delay,
                    retry_count: p.retry_count,
                    max_retry_delay,
                },
                env.new_token(),
            )),
            Algorithm::MysqlUnique => AnyLock::MysqlUnique(MysqlUnique::new(
                stores.mysql(),
                MysqlUniqueConfig {
                    resource: LOCK_KEY.to_string(),
                    retry_delay,
                    retry_count: p.retry_count,
                    max_retry_delay,
                },
            )),
            Algorithm::MysqlForUpdateHeld => AnyLock::MysqlForUpdateHeld(MysqlForUpdateHeld::new(
                stores.mysql(),
                MysqlForUpdateHeldConfig {
                    resource: LOCK_KEY.to_string(),
                    retry_delay,
                    retry_count: p.retry_count,
                    max_retry_delay,
                },
            )),
        }
    }

    /// Acquires the lock (its read side when `shared`), waiting at most `wait`.
    pub async fn acquire<E: Env>(
        &self,
        env: &E,
        wait: Duration,
        shared: bool,
    ) -> Result<Option<Guard>, LockError> {
        with_side!(self, shared, |l| Lock::acquire(l, env, wait).await)
    }

    /// Releases what `guard` holds.
    pub async fn release<E: Env>(
        &self,
        env: &E,
        guard: &Guard,
        shared: bool,
    ) -> Result<bool, LockError> {
        with_side!(self, shared, |l| Lock::release(l, env, guard).await)
    }

    /// Keeps what `guard` holds alive until it is lost.
    pub async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>, shared: bool) {
        with_side!(self, shared, |l| l.keep_alive(env, guard).await)
    }
}

/// The longest a client backs off after attempts that got no answer
/// ([`lockcheck_algorithms::retry`]): a connection manager's 30 s, but at most half the lease,
/// so that a waiter does not sit out a free lock for long after an outage ends (the liveness
/// check allows a lease of slack for retries), and never less than the retry delay.
pub fn max_retry_delay(scenario: &Scenario) -> Duration {
    let half_lease = Duration::from_millis(scenario.algorithm.lease_ms(&scenario.params) / 2);
    half_lease
        .min(MAX_BACKOFF)
        .max(Duration::from_millis(scenario.params.retry_delay_ms))
}

/// The settings of the ZooKeeper locks.
fn zk_config(p: &Params) -> ZkLockConfig {
    ZkLockConfig {
        path: "/lock".to_string(),
        retry_delay: Duration::from_millis(p.retry_delay_ms),
        retry_count: p.retry_count,
        suspended_is_lost: p.suspended_is_lost,
    }
}
