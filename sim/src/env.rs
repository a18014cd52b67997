//! [`Env`] for a simulated node: its own drifting, jumping clocks and madsim's seeded randomness.

use crate::world::World;
use lockcheck_algorithms::{Env, LockEvent};
use lockcheck_core::history::{Kind, Op};
use std::sync::Arc;
use std::time::Duration;

/// The world as simulated node `node` sees it.
#[derive(Clone)]
pub struct SimEnv {
    world: Arc<World>,
    node: usize,
}

impl SimEnv {
    /// The environment of node `node`.
    pub fn new(world: Arc<World>, node: usize) -> SimEnv {
        SimEnv { world, node }
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
        // madsim's seeded generator, never the host's.
        madsim::rand::random::<u64>()
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
            Op::Attempt {
                acquired,
                accepted,
                of,
                unreachable,
            },
        );
    }
}
