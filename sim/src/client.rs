//! The simulated client (Jepsen's "client"): the algorithm under test built over the simulated
//! stores, on a madsim node, giving the [`lockcheck_core::workload`] what it needs from this world.

use crate::env::SimEnv;
use crate::etcd::SimEtcd;
use crate::mysql::store::SimMysql;
use crate::net::RpcClient;
use crate::redis::SimRedis;
use crate::world::World;
use crate::zookeeper::store::SimZk;
use lockcheck_algorithms::stores::Stores;
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::registry::AnyLock;
use lockcheck_core::resource::{AccessRequest, ACCESS_TIMEOUT};
use lockcheck_core::scenario::Scenario;
use lockcheck_core::topology::Role;
use lockcheck_core::workload::ClientSide;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// A simulated client's connections: over its node's RPC client, to the simulated servers.
pub struct SimStores {
    world: Arc<World>,
    rpc: Rc<RpcClient>,
    env: SimEnv,
    /// The client's node (its number), which picks its ZooKeeper member.
    me: usize,
}

impl Stores for SimStores {
    type Redis = SimRedis;
    type Zk = SimZk<SimEnv>;
    type Sql = SimMysql;
    type Etcd = SimEtcd<SimEnv>;

    fn redis_primary(&self) -> SimRedis {
        SimRedis::to_primary(self.rpc.clone(), self.world.clone(), self.timeout())
    }

    fn redis_masters(&self) -> Vec<SimRedis> {
        self.servers()
            .iter()
            .map(|&s| SimRedis::new(self.rpc.clone(), s, self.timeout()))
            .collect()
    }

    fn zookeeper(&self) -> SimZk<SimEnv> {
        let session =
            Duration::from_millis(self.world.scenario.params.zookeeper.session_timeout_ms());
        // A client starts on member `me mod n` of an ensemble, as in real mode.
        let servers = self.servers();
        let first = self.me % servers.len();
        SimZk::new(self.rpc.clone(), self.env.clone(), servers, first, session)
    }

    fn mysql(&self) -> SimMysql {
        SimMysql::new(
            self.rpc.clone(),
            self.servers()[0],
            self.timeout(),
            Duration::from_millis(self.world.scenario.params.mysql.lock_wait_timeout_ms()),
        )
    }

    fn etcd(&self) -> SimEtcd<SimEnv> {
        let ttl = Duration::from_secs(self.world.scenario.params.etcd.lease_ttl_s());
        // A client of a cluster starts on member `me mod n`.
        SimEtcd::new(
            self.rpc.clone(),
            self.env.clone(),
            self.servers(),
            self.me,
            ttl,
            self.timeout(),
        )
    }
}

impl SimStores {
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.world.scenario.params.request_timeout_ms)
    }

    fn servers(&self) -> Vec<usize> {
        self.world.topology.with_role(Role::Server)
    }
}

/// The algorithm under test, built for one simulated client.
pub type SimLock = AnyLock<SimStores>;

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
            lock: SimLock::build(
                &world.scenario,
                &SimStores {
                    world: world.clone(),
                    rpc: rpc.clone(),
                    env: env.clone(),
                    me,
                },
                &env,
            ),
            env,
            world,
            me,
            rpc,
        }
    }
}

impl ClientSide for Client {
    type Env = SimEnv;
    type Stores = SimStores;

    fn env(&self) -> &SimEnv {
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

    fn lock(&self) -> &AnyLock<SimStores> {
        &self.lock
    }

    async fn touch(&self, access: AccessRequest) -> Option<bool> {
        let resource = self.world.topology.resource();
        self.rpc.call(resource, access, ACCESS_TIMEOUT).await.ok()
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
    lockcheck_core::workload::run(&Client::new(world, me).await).await;
}

/// The liveness probe (on node `me`): after faults and clients have stopped, the lock must become
/// free within `wait`.
pub async fn run_probe(world: Arc<World>, me: usize, wait: Duration) {
    lockcheck_core::workload::probe(&Client::new(world.clone(), me).await, wait).await;
    world.progress.notify();
}
