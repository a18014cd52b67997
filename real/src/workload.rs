//! What real clients do: exactly the simulation's workload (`lockcheck_sim::workload`), step for
//! step, so that a verdict means the same thing in both worlds: acquire; touch the resource
//! (enter); work for `hold_ms` (or up to the lock's validity); touch it again (exit); release;
//! think; until the client has done its critical sections or the run's duration is over. Every
//! operation is recorded as invoke and ok / fail / info, as in the simulation.

use crate::env::RealEnv;
use crate::gate::PauseGate;
use crate::redis_store::RealRedis;
use crate::resource::Access;
use crate::world::RealWorld;
use futures_util::future::{select, Either};
use lockcheck_algorithms::redis::redlock::{Redlock, RedlockConfig};
use lockcheck_algorithms::redis::single::{SingleRedis, SingleRedisConfig};
use lockcheck_algorithms::{Env, Guard, Lock, LockError, LockEvent};
use lockcheck_sim::history::{Kind, Op, Phase};
use lockcheck_sim::scenario::Algorithm;
use std::cell::RefCell;
use std::pin::pin;
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

/// One client's view of the run.
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

    fn record(&self, kind: Kind, op: Op) {
        self.world.record(self.me, kind, op);
    }

    /// Acquires, recording the operation: `Ok(None)` when `wait` ran out first (recorded as a
    /// failure saying `gave_up`), `Err` when the lock failed with an error (recorded too).
    async fn acquire(&self, wait: Duration, gave_up: &str) -> Result<Option<Guard>, LockError> {
        self.record(Kind::Invoke, acquire_op(None));
        let result = self.lock.acquire(&self.env, wait).await;
        let (kind, op) = match &result {
            Ok(Some(guard)) => (
                Kind::Ok,
                Op::Acquire {
                    token: Some(guard.token.clone()),
                    fence: guard.fence,
                    valid_ns: Some(guard.validity_left(self.env.mono_now()).as_nanos() as u64),
                    error: None,
                    shared: false,
                },
            ),
            Ok(None) => (Kind::Fail, acquire_op(Some(gave_up))),
            Err(e) => (Kind::Fail, acquire_op(Some(&e.to_string()))),
        };
        self.record(kind, op);
        result
    }

    /// Touches the resource; true when it accepted the access. A paused client touches nothing:
    /// it passes its gate before and after.
    async fn access(&self, phase: Phase, guard: &Guard) -> bool {
        let op = Op::Access {
            phase,
            token: guard.token.clone(),
            fence: guard.fence,
            shared: false,
        };
        self.gate.pass().await;
        self.record(Kind::Invoke, op.clone());
        let accepted = self.world.resource.access(
            self.me,
            Access {
                phase,
                token: guard.token.clone(),
                fence: guard.fence,
                shared: false,
            },
        );
        self.gate.pass().await;
        self.record(if accepted { Kind::Ok } else { Kind::Fail }, op);
        accepted
    }

    async fn release(&self, guard: &Guard) {
        let op = |error: Option<String>| Op::Release {
            token: guard.token.clone(),
            error,
        };
        self.record(Kind::Invoke, op(None));
        let (kind, error) = match self.lock.release(&self.env, guard).await {
            Ok(true) => (Kind::Ok, None),
            Ok(false) => (Kind::Fail, Some("the lock was no longer held".to_string())),
            Err(e @ LockError::Store(_)) => (Kind::Info, Some(e.to_string())),
            Err(e) => (Kind::Fail, Some(e.to_string())),
        };
        self.record(kind, op(error));
    }

    /// Works inside the critical section, with the lock's watchdog running if configured.
    async fn hold(&self, guard: &RefCell<Guard>) {
        let scenario = &self.world.scenario;
        let work = if scenario.workload.hold_until_validity {
            guard.borrow().validity_left(self.env.mono_now())
        } else {
            Duration::from_millis(scenario.workload.hold_ms)
        };
        if scenario.params.watchdog {
            let sleep = pin!(self.env.sleep(work));
            let renew = pin!(self.lock.keep_alive(&self.env, guard));
            if let Either::Right(((), sleep)) = select(sleep, renew).await {
                // The lock is lost; the classic client does not notice and works on.
                sleep.await;
            }
        } else {
            self.env.sleep(work).await;
        }
    }

    /// The time left to acquire before the run ends.
    fn wait_left(&self) -> Duration {
        let end = self.world.scenario.duration_ms * 1_000_000;
        Duration::from_nanos(end.saturating_sub(self.world.true_ns()))
    }

    async fn run(&self) {
        let workload = self.world.scenario.workload.clone();
        let careful = workload.check_before_access;
        let retry = Duration::from_millis(self.world.scenario.params.retry_delay_ms);
        while self.world.remaining(self.me) > 0 {
            let wait = self.wait_left();
            if wait.is_zero() {
                break;
            }
            let guard = match self.acquire(wait, "gave up").await {
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
            let still_valid =
                |g: &Guard| !careful || g.validity_left(self.env.mono_now()) > Duration::ZERO;
            // A critical section counts once the resource took the entry.
            let watched = RefCell::new(guard.clone());
            if still_valid(&guard) && self.access(Phase::Enter, &guard).await {
                self.world.take_acquisition(self.me);
                self.hold(&watched).await;
                let held = watched.borrow().clone();
                if still_valid(&held) {
                    self.access(Phase::Exit, &held).await;
                }
            }
            self.release(&guard).await;
            self.env
                .sleep(Duration::from_millis(workload.think_ms))
                .await;
        }
        self.world.finish(self.me);
    }
}

/// An acquire entry without a grant: the invocation, or a failure with its reason.
fn acquire_op(error: Option<&str>) -> Op {
    Op::Acquire {
        token: None,
        fence: None,
        valid_ns: None,
        error: error.map(str::to_string),
        shared: false,
    }
}

/// Runs client `client`'s workload (client index = its node index) until it is done or the run
/// ends.
pub async fn run_client(world: Rc<RealWorld>, client: usize) {
    let gate = world.gates[client].clone();
    Client::new(world, client, gate).run().await;
}

/// The liveness probe: after faults and clients have stopped, the lock must become free within
/// `wait`. Its acquire is recorded like a client's (as node `probe`); the checker reads it.
pub async fn run_probe(world: Rc<RealWorld>, wait: Duration) {
    let probe = world.topology().probe();
    let client = Client::new(world, probe, PauseGate::new());
    let gave_up = format!("not acquired within {} ms", wait.as_millis());
    if let Ok(Some(guard)) = client.acquire(wait, &gave_up).await {
        client.release(&guard).await;
    }
}
