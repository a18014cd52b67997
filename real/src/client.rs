//! A real client: the algorithm under test over connections to the real servers, frozen by its
//! pause gate, giving the simulation's own workload loop (`lockcheck_sim::workload`) what it needs
//! from this world, so that a verdict means the same thing in both.

use crate::env::RealEnv;
use crate::gate::PauseGate;
use crate::redis_store::RealRedis;
use crate::world::RealWorld;
use lockcheck_algorithms::redis::redlock::{Redlock, RedlockConfig};
use lockcheck_algorithms::redis::single::{SingleRedis, SingleRedisConfig};
use lockcheck_algorithms::{Guard, Lock, LockError, LockEvent};
use lockcheck_sim::history::{Kind, Op};
use lockcheck_sim::net::AccessRequest;
use lockcheck_sim::scenario::{Algorithm, Scenario};
use lockcheck_sim::workload::{self, ClientSide};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The lock key every client contends for (the simulation's).
pub const LOCK_KEY: &str = lockcheck_sim::workload::LOCK_KEY;

/// The algorithm under test, built for one real client.
pub enum RealLock {
    /// `single-redis`.
    SingleRedis(SingleRedis<RealRedis>),
    /// `redlock`.
    Redlock(Redlock<RealRedis>),
}

/// Calls `$body` with `$l` bound to the lock.
macro_rules! with_lock {
    ($lock:expr, |$l:ident| $body:expr) => {
        match $lock {
            RealLock::SingleRedis($l) => $body,
            RealLock::Redlock($l) => $body,
        }
    };
}

impl RealLock {
    /// The lock of `world`'s algorithm for a client frozen by `gate`, built as the simulation
    /// builds it (`SimLock::build`), with connections to the real servers. Only the algorithms
    /// [`crate::support::ALGORITHMS`] names are built; the runner checks that first.
    pub fn build(world: &RealWorld, gate: &PauseGate) -> RealLock {
        let p = &world.scenario.params;
        let algorithm = world.scenario.algorithm;
        // The lease, with the simulation's default when the scenario names none.
        let ttl = Duration::from_millis(algorithm.lease_ms(p));
        let timeout = Duration::from_millis(p.request_timeout_ms);
        let store = |addr| RealRedis::new(addr, timeout, gate.clone());
        match algorithm {
            Algorithm::SingleRedis => RealLock::SingleRedis(SingleRedis::new(
                store(world.servers[0]),
                SingleRedisConfig {
                    key: LOCK_KEY.to_string(),
                    ttl,
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
            Algorithm::Redlock => RealLock::Redlock(Redlock::new(
                world.servers.iter().map(|&addr| store(addr)).collect(),
                RedlockConfig {
                    key: LOCK_KEY.to_string(),
                    ttl,
                    drift_factor: p.drift_factor,
                    retry_delay: Duration::from_millis(p.retry_delay_ms),
                    retry_count: p.retry_count,
                },
            )),
            other => unreachable!(
                "{} is refused by support::check before a run starts",
                other.name()
            ),
        }
    }

    async fn acquire(&self, env: &RealEnv, wait: Duration) -> Result<Option<Guard>, LockError> {
        with_lock!(self, |l| Lock::acquire(l, env, wait).await)
    }

    async fn release(&self, env: &RealEnv, guard: &Guard) -> Result<bool, LockError> {
        with_lock!(self, |l| Lock::release(l, env, guard).await)
    }

    async fn keep_alive(&self, env: &RealEnv, guard: &RefCell<Guard>) {
        with_lock!(self, |l| l.keep_alive(env, guard).await)
    }
}

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
        Client {
            lock: RealLock::build(&world, &gate),
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

    /// Real mode runs no read/write lock yet: `shared` is always false.
    async fn acquire(&self, wait: Duration, _shared: bool) -> Result<Option<Guard>, LockError> {
        self.lock.acquire(&self.env, wait).await
    }

    async fn release(&self, guard: &Guard, _shared: bool) -> Result<bool, LockError> {
        self.lock.release(&self.env, guard).await
    }

    async fn keep_alive(&self, guard: &RefCell<Guard>, _shared: bool) {
        self.lock.keep_alive(&self.env, guard).await
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
