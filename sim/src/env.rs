//! [`Env`] for a simulated node: its own drifting, jumping clocks and its own random stream.

use crate::world::World;
use lockcheck_algorithms::{Env, LockEvent};
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::randomness::ClientRng;
use lockcheck_core::scenario::Randomness;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The world as simulated node `node` sees it.
#[derive(Clone)]
pub struct SimEnv {
    world: Arc<World>,
    node: usize,
    /// The node's process's stream ([`ClientRng`], as a real client's): what it draws does not
    /// hang on what other nodes drew, nor on the network's draws from madsim's generator.
    rng: Rc<RefCell<ClientRng>>,
}

impl SimEnv {
    /// The environment of node `node`'s current process (its stream is that of its
    /// incarnation: a restarted client draws new tokens).
    pub fn new(world: Arc<World>, node: usize) -> SimEnv {
        let restarts = world.power(node).incarnation;
        let rng = ClientRng::for_client(world.scenario.seed, node, restarts);
        SimEnv {
            world,
            node,
            rng: Rc::new(RefCell::new(rng)),
        }
    }
}

impl Env for SimEnv {
    fn wall_now(&self) -> Duration {
        Duration::from_nanos(self.world.wall_ns(self.node).max(0) as u64)
    }

    fn mono_now(&self) -> Duration {
        Duration::from_nanos(self.world.mono_ns(self.node))
    }

    async fn sleep(&self, duration: Duration) {
        let true_duration = self.world.clock(self.node).true_duration(duration);
        crate::timer::sleep(true_duration).await
    }

    fn random_u64(&self) -> u64 {
        match self.world.scenario.randomness {
            Randomness::PerClient => self.rng.borrow_mut().next_u64(),
            // A report from before per-client streams replays with what it drew then.
            Randomness::Shared => madsim::rand::random::<u64>(),
        }
    }

    fn observe(&self, event: LockEvent) {
        let LockEvent::Attempt {
            acquired,
            accepted,
            of,
        } = event;
        let unreachable = self
            .world
            .unreachable(self.node, &self.world.lock_servers());
        self.world.record(
            self.node,
            Kind::Observe,
            Op::attempt(acquired, accepted, of, unreachable),
        );
    }
}
