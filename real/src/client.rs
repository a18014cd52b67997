//! A real client: the algorithm under test over connections to the real servers, frozen by its
//! pause gate, giving the simulation's own workload loop (`lockcheck_sim::workload`) what it needs
//! from this world, so that a verdict means the same thing in both.

use crate::env::RealEnv;
use crate::gate::PauseGate;
use crate::mysql_store::RealMysql;
use crate::redis_store::RealRedis;
use crate::world::RealWorld;
use lockcheck_algorithms::zookeeper::store::{
    CreateMode, SessionId, SessionState, Stat, ZkError, ZkNotice, ZkStore,
};
use lockcheck_algorithms::{Guard, LockError, LockEvent, StoreError};
use lockcheck_sim::history::{Kind, Op};
use lockcheck_sim::lock::{AnyLock, Stores};
use lockcheck_sim::net::AccessRequest;
use lockcheck_sim::scenario::Scenario;
use lockcheck_sim::workload::{self, ClientSide};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// A real client's connections to the real servers, each frozen by the client's pause gate.
pub struct RealStores {
    servers: Vec<SocketAddr>,
    timeout: Duration,
    /// MySQL: how long a statement may wait on the server for a row lock
    /// (`innodb_lock_wait_timeout`), on top of `timeout`.
    lock_wait: Duration,
    gate: PauseGate,
}

impl Stores for RealStores {
    type Redis = RealRedis;
    type Zk = NotYetReal;
    type Sql = RealMysql;

    fn redis_primary(&self) -> RealRedis {
        RealRedis::new(self.servers[0], self.timeout, self.gate.clone())
    }

    fn redis_masters(&self) -> Vec<RealRedis> {
        self.servers
            .iter()
            .map(|&addr| RealRedis::new(addr, self.timeout, self.gate.clone()))
            .collect()
    }

    fn zookeeper(&self) -> NotYetReal {
        unreachable!("support::check refuses the ZooKeeper algorithms before a run starts")
    }

    fn mysql(&self) -> RealMysql {
        RealMysql::new(
            self.servers[0],
            self.timeout,
            self.lock_wait,
            self.gate.clone(),
        )
    }
}

/// The store of a backend real mode has no client for yet: a type with no values, so the
/// algorithms over it type-check and can never run ([`crate::support::check`] refuses them).
pub enum NotYetReal {}

impl ZkStore for NotYetReal {
    async fn create(
        &self,
        _: &str,
        _: Vec<u8>,
        _: CreateMode,
    ) -> Result<Result<(String, Stat), ZkError>, StoreError> {
        match *self {}
    }
    async fn delete(&self, _: &str, _: i32) -> Result<Result<(), ZkError>, StoreError> {
        match *self {}
    }
    async fn exists(&self, _: &str, _: bool) -> Result<Result<Option<Stat>, ZkError>, StoreError> {
        match *self {}
    }
    async fn get_children(
        &self,
        _: &str,
        _: bool,
    ) -> Result<Result<Vec<String>, ZkError>, StoreError> {
        match *self {}
    }
    async fn next_event(&self) -> ZkNotice {
        match *self {}
    }
    fn state(&self) -> SessionState {
        match *self {}
    }
    fn session_id(&self) -> Option<SessionId> {
        match *self {}
    }
}

/// The algorithm under test, built for one real client.
pub type RealLock = AnyLock<RealStores>;

/// One real client.
struct Client {
    world: Rc<RealWorld>,
    /// The client's node index.
    me: usize,
    env: RealEnv,
    gate: PauseGate,
    lock: RealLock,
}

impl Client {
    /// The client (or probe) at node `me`, frozen by `gate`.
    fn new(world: Rc<RealWorld>, me: usize, gate: PauseGate) -> Client {
        let observer = {
            let world = world.clone();
            Rc::new(move |event: LockEvent| {
                let LockEvent::Attempt {
                    acquired,
                    accepted,
                    of,
                } = event;
                world.record(
                    me,
                    Kind::Observe,
                    Op::Attempt {
                        acquired,
                        accepted,
                        of,
                        // Every server is a lock server here (no replicas yet).
                        unreachable: world.servers_down(),
                    },
                );
            })
        };
        let env = RealEnv::new(world.scenario.seed, me, gate.clone()).with_observer(observer);
        let stores = RealStores {
            servers: world.servers.clone(),
            timeout: Duration::from_millis(world.scenario.params.request_timeout_ms),
            lock_wait: Duration::from_millis(world.scenario.params.lock_wait_timeout_ms()),
            gate: gate.clone(),
        };
        Client {
            lock: RealLock::build(&world.scenario, &stores, &env),
            env,
            gate,
            world,
            me,
        }
    }
}

impl ClientSide for Client {
    type Env = RealEnv;

    fn env(&self) -> &RealEnv {
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

    /// A paused client touches nothing: it passes its gate before and after.
    async fn touch(&self, access: AccessRequest) -> Option<bool> {
        self.gate.pass().await;
        let accepted = self.world.resource.access(self.me, access);
        self.gate.pass().await;
        Some(accepted)
    }

    fn wait_left(&self) -> Duration {
        let end = self.world.scenario.duration_ms * 1_000_000;
        Duration::from_nanos(end.saturating_sub(self.world.true_ns()))
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

/// Runs client `client`'s workload (client index = its node index) until it is done or the run
/// ends.
pub async fn run_client(world: Rc<RealWorld>, client: usize) {
    let gate = world.gates[client].clone();
    workload::run(&Client::new(world, client, gate)).await;
}

/// The liveness probe: after faults and clients have stopped, the lock must become free within
/// `wait`. Its acquire is recorded like a client's (as node `probe`); the checker reads it.
pub async fn run_probe(world: Rc<RealWorld>, wait: Duration) {
    let probe = world.topology().probe();
    workload::probe(&Client::new(world, probe, PauseGate::new()), wait).await;
}
