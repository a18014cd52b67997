//! What clients do (Jepsen's generator, for one fixed pattern): acquire, touch the resource, work,
//! touch again, release, think; until the client has done its critical sections or the run ends.

use crate::env::SimEnv;
use crate::history::{Kind, Op, Phase};
use crate::mysql::store::SimMysql;
use crate::net::{AccessRequest, Request, Response, RpcClient};
use crate::redis::SimRedis;
use crate::scenario::{Algorithm, DEFAULT_TTL_MS};
use crate::topology::Role;
use crate::world::World;
use crate::zookeeper::store::SimZk;
use futures_util::future::{select, Either};
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
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The lock key every client contends for.
pub const LOCK_KEY: &str = "lock";

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

/// One client's view of the run: its env, its lock, and the history.
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

    fn record(&self, kind: Kind, op: Op) {
        self.world.record(self.me, kind, op);
    }

    /// Acquires (the read side when `shared`), recording the operation: `Ok(None)` when `wait`
    /// ran out first (recorded as a failure saying `gave_up`), `Err` when the lock failed with an
    /// error (recorded too).
    async fn acquire(
        &self,
        wait: Duration,
        gave_up: &str,
        shared: bool,
    ) -> Result<Option<Guard>, LockError> {
        self.record(Kind::Invoke, acquire_op(None, shared));
        let result = self.lock.acquire(&self.env, wait, shared).await;
        let (kind, op) = match &result {
            Ok(Some(guard)) => (
                Kind::Ok,
                Op::Acquire {
                    token: Some(guard.token.clone()),
                    fence: guard.fence,
                    valid_ns: Some(guard.validity_left(self.env.mono_now()).as_nanos() as u64),
                    error: None,
                    shared,
                },
            ),
            Ok(None) => (Kind::Fail, acquire_op(Some(gave_up), shared)),
            Err(e) => (Kind::Fail, acquire_op(Some(&e.to_string()), shared)),
        };
        self.record(kind, op);
        result
    }

    /// Touches the resource; true when it accepted the access.
    async fn access(&self, phase: Phase, guard: &Guard, shared: bool) -> bool {
        let op = Op::Access {
            phase,
            token: guard.token.clone(),
            fence: guard.fence,
            shared,
        };
        self.record(Kind::Invoke, op.clone());
        let request = Request::Access(AccessRequest {
            phase,
            token: guard.token.clone(),
            fence: guard.fence,
            shared,
        });
        let resource = self.world.topology.resource();
        let (kind, accepted) = match self.rpc.call(resource, request, ACCESS_TIMEOUT).await {
            Ok(Response::Access(true)) => (Kind::Ok, true),
            Ok(_) => (Kind::Fail, false),
            Err(_) => (Kind::Info, false),
        };
        self.record(kind, op);
        accepted
    }

    async fn release(&self, guard: &Guard, shared: bool) {
        let op = |error: Option<String>| Op::Release {
            token: guard.token.clone(),
            error,
        };
        self.record(Kind::Invoke, op(None));
        let (kind, error) = match self.lock.release(&self.env, guard, shared).await {
            Ok(true) => (Kind::Ok, None),
            Ok(false) => (Kind::Fail, Some("the lock was no longer held".to_string())),
            Err(e @ LockError::Store(_)) => (Kind::Info, Some(e.to_string())),
            Err(e) => (Kind::Fail, Some(e.to_string())),
        };
        self.record(kind, op(error));
    }

    /// Works inside the critical section. Meanwhile the lock's `keep_alive` runs where it does
    /// something: the watchdog renewing a lease if configured, and for ZooKeeper following the
    /// session (what a careful client's validity check then sees).
    async fn hold(&self, guard: &RefCell<Guard>, shared: bool) {
        let workload = &self.world.scenario.workload;
        let work = if workload.hold_until_validity {
            guard.borrow().validity_left(self.env.mono_now())
        } else {
            Duration::from_millis(workload.hold_ms)
        };
        let scenario = &self.world.scenario;
        if scenario.params.watchdog || scenario.algorithm.is_zookeeper() {
            let sleep = pin!(self.env.sleep(work));
            let renew = pin!(self.lock.keep_alive(&self.env, guard, shared));
            if let Either::Right(((), sleep)) = select(sleep, renew).await {
                // The lock is lost; the classic client does not notice and works on.
                sleep.await;
            }
        } else {
            self.env.sleep(work).await;
        }
    }

    /// The time left to acquire before the run ends, on this client's clock.
    fn wait_left(&self) -> Duration {
        let end = self.world.scenario.duration_ms * 1_000_000;
        let left = end.saturating_sub(self.world.true_ns());
        Duration::from_nanos((left as f64 * self.world.clock(self.me).rate()) as u64)
    }

    /// Whether the next section only reads (read/write locks; drawn from the client's seeded
    /// randomness, and only for them, so other algorithms' random streams are untouched).
    fn draw_shared(&self) -> bool {
        let scenario = &self.world.scenario;
        if !scenario.algorithm.has_readers() {
            return false;
        }
        let fraction = scenario
            .workload
            .read_fraction
            .unwrap_or(crate::scenario::DEFAULT_READ_FRACTION);
        (self.env.random_u64() as f64 / u64::MAX as f64) < fraction
    }

    async fn run(&self) {
        let workload = self.world.scenario.workload.clone();
        let careful = workload.check_before_access;
        while self.world.remaining(self.me) > 0 {
            let wait = self.wait_left();
            if wait.is_zero() {
                break;
            }
            let retry = Duration::from_millis(self.world.scenario.params.retry_delay_ms);
            let shared = self.draw_shared();
            let guard = match self.acquire(wait, "gave up", shared).await {
                Ok(Some(guard)) => guard,
                // The lock stops retrying a retry before the wait ends: the run is over.
                Ok(None) if self.wait_left() <= retry => break,
                // It gave up after retry_count attempts, or failed: think, then try again.
                Ok(None) | Err(_) => {
                    self.env
                        .sleep(retry.max(Duration::from_millis(workload.think_ms)))
                        .await;
                    continue;
                }
            };
            // Nested acquisitions (reentrant locks): the owner takes the lock again, at once.
            let mut nested = Vec::new();
            for _ in 1..workload.reentrant_depth {
                match self.acquire(self.wait_left(), "gave up", shared).await {
                    Ok(Some(inner)) => nested.push(inner),
                    _ => break,
                }
            }
            let still_valid =
                |g: &Guard| !careful || g.validity_left(self.env.mono_now()) > Duration::ZERO;
            // A critical section counts once the resource took the entry; a rejected or lost
            // entry is retried with a fresh acquisition.
            let watched = RefCell::new(guard.clone());
            if still_valid(&guard) && self.access(Phase::Enter, &guard, shared).await {
                self.world.take_acquisition(self.me);
                self.hold(&watched, shared).await;
                let held = watched.borrow().clone();
                if still_valid(&held) {
                    self.access(Phase::Exit, &held, shared).await;
                }
            }
            for inner in nested.iter().rev() {
                self.release(inner, shared).await;
            }
            self.release(&guard, shared).await;
            self.env
                .sleep(Duration::from_millis(workload.think_ms))
                .await;
        }
        self.world.finish(self.me);
    }
}

/// An acquire entry without a grant: the invocation, or a failure with its reason.
fn acquire_op(error: Option<&str>, shared: bool) -> Op {
    Op::Acquire {
        token: None,
        fence: None,
        valid_ns: None,
        error: error.map(str::to_string),
        shared,
    }
}

/// Runs client `me`'s workload (on node `me`) until it is done or the run ends. A restarted client
/// goes on with the critical sections it had left.
pub async fn run_client(world: Arc<World>, me: usize) {
    let client = Client::new(world, me).await;
    client.run().await;
}

/// The liveness probe (on node `me`): after faults and clients have stopped, the lock must become
/// free within `wait`. Its acquire is recorded like a client's; the checker reads the outcome.
pub async fn run_probe(world: Arc<World>, me: usize, wait: Duration) {
    let client = Client::new(world, me).await;
    let gave_up = format!("not acquired within {} ms", wait.as_millis());
    if let Ok(Some(guard)) = client.acquire(wait, &gave_up, false).await {
        client.release(&guard, false).await;
    }
}
