//! A real client: the algorithm under test over connections to the real servers, frozen by its
//! pause gate, giving the simulation's own workload loop (`lockcheck_core::workload`) what it needs
//! from this world, so that a verdict means the same thing in both.

use crate::endpoints::Login;
use crate::env::RealEnv;
use crate::etcd_store::RealEtcd;
use crate::gate::PauseGate;
use crate::mysql_store::{RealMysql, SessionConfig, SessionSettings};
use crate::redis_store::RealRedis;
use crate::world::RealWorld;
use crate::zk_store::RealZk;
use lockcheck_algorithms::stores::Stores;
use lockcheck_algorithms::{Env, LockEvent};
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::registry::AnyLock;
use lockcheck_core::resource::AccessRequest;
use lockcheck_core::resource::ACCESS_TIMEOUT;
use lockcheck_core::scenario::Scenario;
use lockcheck_core::workload::{self, ClientSide};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

/// A real client's connections to the real servers (through the client's proxies), each frozen
/// by the client's pause gate.
pub struct RealStores {
    servers: Vec<SocketAddr>,
    /// With Redis replicas: how this client finds the primary through Sentinel.
    sentinel: Option<crate::replication::SentinelRoute>,
    /// The node this client is (its number for a client), which picks its ZooKeeper or etcd
    /// member.
    me: usize,
    timeout: Duration,
    session_timeout: Duration,
    /// etcd: the TTL of each session's lease.
    etcd_ttl: Duration,
    /// MySQL: how long a statement may wait on the server for a row lock
    /// (`innodb_lock_wait_timeout`), on top of `timeout`.
    lock_wait: Duration,
    /// How to log in to the servers.
    login: Login,
    /// MySQL: the database and the session settings of the run.
    mysql: (String, Option<SessionSettings>),
    /// etcd: where the run writes down the session leases its clients are granted.
    leases: crate::etcd_store::LeaseLedger,
    gate: PauseGate,
}

impl Stores for RealStores {
    type Redis = RealRedis;
    type Zk = RealZk;
    type Sql = RealMysql;
    type Etcd = RealEtcd;

    fn redis_primary(&self) -> RealRedis {
        match &self.sentinel {
            Some(route) => {
                RealRedis::behind_sentinel(route.clone(), self.timeout, self.gate.clone())
            }
            None => RealRedis::new(self.servers[0], self.timeout, self.gate.clone()),
        }
        .with_login(self.login.clone())
    }

    fn redis_masters(&self) -> Vec<RealRedis> {
        self.servers
            .iter()
            .map(|&addr| {
                RealRedis::new(addr, self.timeout, self.gate.clone()).with_login(self.login.clone())
            })
            .collect()
    }

    /// A session with the standalone server, or with the ensemble, starting on the member this
    /// client's number picks (client `i` on member `i mod n`, as in the simulation).
    fn zookeeper(&self) -> RealZk {
        RealZk::ensemble(
            self.servers.clone(),
            self.me % self.servers.len(),
            self.session_timeout,
            self.timeout,
            self.gate.clone(),
        )
        .with_login(&self.login)
    }

    fn mysql(&self) -> RealMysql {
        let (database, settings) = self.mysql.clone();
        RealMysql::new(
            self.servers[0],
            self.timeout,
            self.lock_wait,
            self.gate.clone(),
        )
        .with_config(SessionConfig {
            addr: self.servers[0],
            login: self.login.clone(),
            database,
            settings,
        })
    }

    /// A client of the lone member, or of the cluster, starting on the member this client's
    /// number picks (client `i` on member `i mod n`, as in the simulation).
    fn etcd(&self) -> RealEtcd {
        RealEtcd::cluster(
            self.servers.clone(),
            self.me,
            self.etcd_ttl,
            self.timeout,
            self.gate.clone(),
        )
        .with_ledger(self.leases.clone())
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
                    // Replicas are no lock servers until promoted.
                    Op::attempt(acquired, accepted, of, world.lock_servers_down()),
                );
            })
        };
        // A restarted client is a new process: new randomness, so new tokens and owner ids.
        let restarts = world.incarnation_of(me).saturating_sub(1);
        let mut env =
            RealEnv::new(world.scenario.seed, me, restarts, gate.clone()).with_observer(observer);
        if let Some(clock) = world.clocks.get(me) {
            env = env.with_clock(clock.clone());
        }
        let params = &world.scenario.params;
        let stores = RealStores {
            servers: world.servers_for(me),
            sentinel: world.sentinel_route(me),
            me,
            timeout: Duration::from_millis(params.request_timeout_ms),
            session_timeout: Duration::from_millis(params.zookeeper.session_timeout_ms()),
            etcd_ttl: Duration::from_secs(params.etcd.lease_ttl_s()),
            lock_wait: Duration::from_millis(params.mysql.lock_wait_timeout_ms()),
            login: world.login.clone(),
            mysql: (
                crate::endpoints::database(&world.scenario),
                // Whole seconds were checked before the run started; a scenario that is not a
                // MySQL one has nothing to apply.
                SessionSettings::of(&world.scenario).ok(),
            ),
            leases: world.leases.clone(),
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
    type Stores = RealStores;

    fn env(&self) -> &RealEnv {
        &self.env
    }

    fn scenario(&self) -> &Scenario {
        &self.world.scenario
    }

    fn node(&self) -> usize {
        self.me
    }

    fn record(&self, kind: Kind, op: Op) {
        self.world.record(self.me, kind, op);
    }

    fn lock(&self) -> &AnyLock<RealStores> {
        &self.lock
    }

    /// A paused client touches nothing: it passes its gate before and after. The way to the
    /// in-process resource is the simulation's network: a request or reply lost to a partition or
    /// a `loss` fault leaves the client waiting out the simulation's access timeout (a lost reply,
    /// after the resource took the access), a `delay` fault delays both, and a partition that
    /// holds messages keeps them until it heals; a request delayed or held past the timeout still
    /// reaches the resource later, unless the run has ended by then.
    async fn touch(&self, access: AccessRequest) -> Option<bool> {
        self.gate.pass().await;
        let accepted = touch(&self.world, self.me, access, self.env.sleep(ACCESS_TIMEOUT)).await;
        self.gate.pass().await;
        accepted
    }

    /// The time left before the run ends, on this client's clock (a drifting clock measures true
    /// time at its rate), as in the simulation.
    fn wait_left(&self) -> Duration {
        let end = self.world.scenario.duration_ms * 1_000_000;
        let left = Duration::from_nanos(end.saturating_sub(self.world.true_ns()));
        let rate = self
            .world
            .clocks
            .get(self.me)
            .map_or(1.0, |c| c.borrow().rate());
        left.mul_f64(rate)
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

/// Client `me` touches the resource across the network faults in force: the resource's answer,
/// or `None` when it is lost or has not come by the time `timeout` completes. A request or reply
/// lost to a partition or a `loss` fault leaves the client waiting out `timeout` (a lost reply,
/// after the resource took the access); a `delay` fault delays both; a partition that holds
/// messages keeps them until it heals; a request delayed or held past the timeout still reaches
/// the resource later, unless the run has ended by then. Shared by lockcheck's own clients and
/// client processes (`crate::client_process`).
pub(crate) async fn touch(
    world: &Rc<RealWorld>,
    me: usize,
    access: AccessRequest,
    timeout: impl Future<Output = ()>,
) -> Option<bool> {
    let resource = world.topology().resource();
    let (_, there) = world.message_faults(me, resource);
    let sent = !world.resource_message_lost(me, resource);
    let reply: Pin<Box<dyn Future<Output = Option<bool>>>> = if !sent {
        Box::pin(std::future::ready(None))
    } else if there.is_zero() && !world.is_cut_from_resource(me) {
        // Taken at once (on the first poll below), as the local call it is.
        Box::pin(deliver(world.clone(), me, access, there))
    } else {
        // In flight on its own: it outlives the client's wait, as a sent message does.
        let (answer, answered) = tokio::sync::oneshot::channel();
        let delivery = deliver(world.clone(), me, access, there);
        tokio::task::spawn_local(async move {
            if let Some(accepted) = delivery.await {
                let _ = answer.send(accepted);
            }
        });
        Box::pin(async move { answered.await.ok() })
    };
    tokio::select! {
        biased;
        Some(accepted) = reply => Some(accepted),
        _ = timeout => None,
    }
}

/// Carries client `me`'s access to the resource after `there` and across the partitions in
/// force, and its reply back: the reply, or `None` when it is lost.
async fn deliver(
    world: Rc<RealWorld>,
    me: usize,
    access: AccessRequest,
    there: Duration,
) -> Option<bool> {
    if !there.is_zero() {
        tokio::time::sleep(there).await;
    }
    if !world.cross_to_resource(me).await {
        return None;
    }
    let accepted = world.resource.access(me, access);
    let resource = world.topology().resource();
    if world.resource_message_lost(resource, me) || !world.cross_to_resource(me).await {
        return None;
    }
    let (_, back) = world.message_faults(resource, me);
    if !back.is_zero() {
        tokio::time::sleep(back).await;
    }
    Some(accepted)
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
