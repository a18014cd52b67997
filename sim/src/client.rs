//! The simulated client (Jepsen's "client"): the algorithm under test built over the simulated
//! stores, on a madsim node, giving the [`crate::workload`] what it needs from this world.

use crate::env::SimEnv;
use crate::history::{Kind, Op};
use crate::mysql::store::SimMysql;
use crate::net::{AccessRequest, Request, Response, RpcClient};
use crate::redis::SimRedis;
use crate::scenario::{Algorithm, Scenario, DEFAULT_TTL_MS};
use crate::topology::Role;
use crate::workload::{ClientSide, LOCK_KEY};
use crate::world::World;
use crate::zookeeper::store::SimZk;
use lockcheck_algorithms::mysql::{
    MysqlHeld, MysqlHeldConfig, MysqlRow, MysqlRowConfig, MysqlUnique, MysqlUniqueConfig,
};
use lockcheck_algorithms::redis::fair::{FairConfig, RedisFair};
use lockcheck_algorithms::redis::redlock::{Redlock, RedlockConfig};
use lockcheck_algorithms::redis::reentrant::{RedisReentrant, ReentrantConfig};
use lockcheck_algorithms::redis::single::{SingleRedis, SingleRedisConfig};
use lockcheck_algorithms::zookeeper::{ZkHerd, ZkLockConfig, ZkReadWriteLock, ZkSequential};
use lockcheck_algorithms::{Env, Guard, Lock, LockError};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// How long a client waits for the resource to answer an access.
const ACCESS_TIMEOUT: Duration = Duration::from_secs(1);

/// The algorithm under test, built for one simulated client.
pub enum SimLock {
    /// `single-redis`.
    SingleRedis(SingleRedis<SimRedis>),
    /// `redlock`.
    Redlock(Redlock<SimRedis>),
    /// `redis-reentrant`.
    RedisReentrant(RedisReentrant<SimRedis>),
    /// `redis-fair`.
    RedisFair(RedisFair<SimRedis>),
    /// `zk-sequential`.
    ZkSequential(ZkSequential<SimZk<SimEnv>>),
    /// `zk-herd`.
    ZkHerd(ZkHerd<SimZk<SimEnv>>),
    /// `zk-rwlock`: both sides on one session.
    ZkRwLock(ZkReadWriteLock<Rc<SimZk<SimEnv>>>),
    /// `mysql-row`.
    MysqlRow(MysqlRow<SimMysql>),
    /// `mysql-unique`.
    MysqlUnique(MysqlUnique<SimMysql>),
    /// `mysql-for-update-held`.
    MysqlHeld(MysqlHeld<SimMysql>),
}

/// Calls `$body` with `$l` bound to the lock side a section uses: the read or write side of a
/// read/write lock (by `$shared`), the one lock otherwise.
macro_rules! with_side {
    ($lock:expr, $shared:expr, |$l:ident| $body:expr) => {
        match $lock {
            SimLock::SingleRedis($l) => $body,
            SimLock::Redlock($l) => $body,
            SimLock::RedisReentrant($l) => $body,
            SimLock::RedisFair($l) => $body,
            SimLock::ZkSequential($l) => $body,
            SimLock::ZkHerd($l) => $body,
            SimLock::MysqlRow($l) => $body,
            SimLock::MysqlUnique($l) => $body,
            SimLock::MysqlHeld($l) => $body,
            SimLock::ZkRwLock(rw) => {
                let $l = if $shared { &rw.read } else { &rw.write };
                $body
            }
        }
    };
}

impl SimLock {
    /// The lock of `world`'s algorithm for the client whose environment is `env`.
    pub fn build(world: &Arc<World>, rpc: Rc<RpcClient>, env: &SimEnv) -> SimLock {
        let p = &world.scenario.params;
        let timeout = Duration::from_millis(p.request_timeout_ms);
        let servers = world.topology.with_role(Role::Server);
        let session = Duration::from_millis(p.session_timeout_ms);
        let algorithm = world.scenario.algorithm;
        let retry_delay = Duration::from_millis(p.retry_delay_ms);
        let mysql = SimMysql::new(
            rpc.clone(),
            servers[0],
            timeout,
            Duration::from_millis(p.lock_wait_timeout_ms()),
        );
        match algorithm {
            Algorithm::SingleRedis => SimLock::SingleRedis(SingleRedis::new(
                SimRedis::to_primary(rpc, world.clone(), timeout),
                SingleRedisConfig {
                    key: LOCK_KEY.to_string(),
                    ttl: Duration::from_millis(p.ttl_ms_for(algorithm).unwrap_or(DEFAULT_TTL_MS)),
                    drift_factor: p.drift_factor,
                    retry_delay: Duration::from_millis(p.retry_delay_ms),
                    retry_count: p.retry_count,
                    fencing: p.fencing,
                    wait_replicas: (p.wait_replicas > 0).then_some((
                        p.wait_replicas,
                        Duration::from_millis(p.wait_timeout_ms_for(algorithm)),
                    )),
                },
            )),
            Algorithm::Redlock => SimLock::Redlock(Redlock::new(
                servers
                    .iter()
                    .map(|&s| SimRedis::new(rpc.clone(), s, timeout))
                    .collect(),
                RedlockConfig {
                    key: LOCK_KEY.to_string(),
                    ttl: Duration::from_millis(p.ttl_ms_for(algorithm).unwrap_or(DEFAULT_TTL_MS)),
                    drift_factor: p.drift_factor,
                    retry_delay: Duration::from_millis(p.retry_delay_ms),
                    retry_count: p.retry_count,
                },
            )),
            Algorithm::RedisReentrant => SimLock::RedisReentrant(RedisReentrant::new(
                SimRedis::to_primary(rpc, world.clone(), timeout),
                ReentrantConfig {
                    key: LOCK_KEY.to_string(),
                    ttl: Duration::from_millis(p.ttl_ms_for(algorithm).unwrap_or(DEFAULT_TTL_MS)),
                    drift_factor: p.drift_factor,
                    retry_delay: Duration::from_millis(p.retry_delay_ms),
                    retry_count: p.retry_count,
                },
                // A (re)started client is a new process, so a new owner (Redisson: UUID:thread).
                format!("{}:1", env.new_token()),
            )),
            Algorithm::RedisFair => SimLock::RedisFair(RedisFair::new(
                SimRedis::to_primary(rpc, world.clone(), timeout),
                FairConfig {
                    key: LOCK_KEY.to_string(),
                    ttl: Duration::from_millis(p.ttl_ms_for(algorithm).unwrap_or(DEFAULT_TTL_MS)),
                    drift_factor: p.drift_factor,
                    retry_delay: Duration::from_millis(p.retry_delay_ms),
                    retry_count: p.retry_count,
                    wait_timeout: Duration::from_millis(p.queue_timeout_ms),
                },
                format!("{}:1", env.new_token()),
            )),
            Algorithm::ZkSequential => SimLock::ZkSequential(ZkSequential::new(
                SimZk::new(rpc, env.clone(), servers[0], session, timeout),
                zk_config(p),
            )),
            Algorithm::ZkHerd => SimLock::ZkHerd(ZkHerd::new(
                SimZk::new(rpc, env.clone(), servers[0], session, timeout),
                zk_config(p),
            )),
            Algorithm::ZkRwLock => SimLock::ZkRwLock(ZkReadWriteLock::new(
                Rc::new(SimZk::new(rpc, env.clone(), servers[0], session, timeout)),
                zk_config(p),
            )),
            Algorithm::MysqlRow => SimLock::MysqlRow(MysqlRow::new(
                mysql,
                MysqlRowConfig {
                    resource: LOCK_KEY.to_string(),
                    ttl: p.ttl_ms_for(algorithm).map(Duration::from_millis),
                    drift_factor: p.drift_factor,
                    retry_delay,
                    retry_count: p.retry_count,
                },
                // A (re)started client is a new process, so a new locker.
                env.new_token(),
            )),
            Algorithm::MysqlUnique => SimLock::MysqlUnique(MysqlUnique::new(
                mysql,
                MysqlUniqueConfig {
                    resource: LOCK_KEY.to_string(),
                    retry_delay,
                    retry_count: p.retry_count,
                },
            )),
            Algorithm::MysqlForUpdateHeld => SimLock::MysqlHeld(MysqlHeld::new(
                mysql,
                MysqlHeldConfig {
                    resource: LOCK_KEY.to_string(),
                    retry_delay,
                    retry_count: p.retry_count,
                },
            )),
        }
    }

    async fn acquire(
        &self,
        env: &SimEnv,
        wait: Duration,
        shared: bool,
    ) -> Result<Option<Guard>, LockError> {
        with_side!(self, shared, |l| Lock::acquire(l, env, wait).await)
    }

    async fn release(&self, env: &SimEnv, guard: &Guard, shared: bool) -> Result<bool, LockError> {
        with_side!(self, shared, |l| Lock::release(l, env, guard).await)
    }

    async fn keep_alive(&self, env: &SimEnv, guard: &RefCell<Guard>, shared: bool) {
        with_side!(self, shared, |l| l.keep_alive(env, guard).await)
    }
}

/// The settings of the ZooKeeper locks.
fn zk_config(p: &crate::scenario::Params) -> ZkLockConfig {
    ZkLockConfig {
        path: "/lock".to_string(),
        retry_delay: Duration::from_millis(p.retry_delay_ms),
        retry_count: p.retry_count,
        suspended_is_lost: p.suspended_is_lost,
    }
}

/// One simulated client: its node's environment, its connections, its lock.
struct Client {
    world: Arc<World>,
    me: usize,
    env: SimEnv,
    rpc: Rc<RpcClient>,
    lock: SimLock,
}

impl Client {
    /// Client `me`, on its node.
    async fn new(world: Arc<World>, me: usize) -> Client {
        let rpc = Rc::new(RpcClient::bind(world.clone(), me).await);
        let env = SimEnv::new(world.clone(), me);
        Client {
            lock: SimLock::build(&world, rpc.clone(), &env),
            env,
            world,
            me,
            rpc,
        }
    }
}

impl ClientSide for Client {
    type Env = SimEnv;

    fn env(&self) -> &SimEnv {
        &self.env
    }

    fn scenario(&self) -> &Scenario {
        &self.world.scenario
    }

    fn record(&self, kind: Kind, op: Op) {
        self.world.record(self.me, kind, op);
    }

    async fn acquire(&self, wait: Duration, shared: bool) -> Result<Option<Guard>, LockError> {
        self.lock.acquire(&self.env, wait, shared).await
    }

    async fn release(&self, guard: &Guard, shared: bool) -> Result<bool, LockError> {
        self.lock.release(&self.env, guard, shared).await
    }

    async fn keep_alive(&self, guard: &RefCell<Guard>, shared: bool) {
        self.lock.keep_alive(&self.env, guard, shared).await
    }

    async fn touch(&self, access: AccessRequest) -> Option<bool> {
        let resource = self.world.topology.resource();
        match self
            .rpc
            .call(resource, Request::Access(access), ACCESS_TIMEOUT)
            .await
        {
            Ok(Response::Access(accepted)) => Some(accepted),
            Ok(_) => Some(false),
            Err(_) => None,
        }
    }

    /// The time left before the run ends, on this client's clock (a drifting clock measures true
    /// time at its rate).
    fn wait_left(&self) -> Duration {
        let end = self.world.scenario.duration_ms * 1_000_000;
        let left = end.saturating_sub(self.world.true_ns());
        Duration::from_nanos((left as f64 * self.world.clock(self.me).rate()) as u64)
    }

    fn remaining(&self) -> u32 {
        self.world.remaining(self.me)
    }

    fn take_acquisition(&self) {
        self.world.take_acquisition(self.me);
    }

    fn finish(&self) {
        self.world.finish(self.me);
    }
}

/// Runs client `me`'s workload (on node `me`) until it is done or the run ends. A restarted client
/// goes on with the critical sections it had left.
pub async fn run_client(world: Arc<World>, me: usize) {
    crate::workload::run(&Client::new(world, me).await).await;
}

/// The liveness probe (on node `me`): after faults and clients have stopped, the lock must become
/// free within `wait`.
pub async fn run_probe(world: Arc<World>, me: usize, wait: Duration) {
    crate::workload::probe(&Client::new(world, me).await, wait).await;
}
