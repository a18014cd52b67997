//! Distributed lock algorithms, written once.
//!
//! Every algorithm here is generic over two seams and knows nothing else about the world:
//!
//! - an [`Env`]: the node's own clocks (a wall clock that may jump, a monotonic clock that may
//!   drift but never jumps), sleeping, and seeded randomness;
//! - a store trait per backend family, at the level of the backend's own commands (for Redis,
//!   [`redis::RedisStore`] takes a [`redis::Command`] and returns a [`redis::Reply`]).
//!
//! The simulator implements both seams with simulated time, servers and faults; the real harness
//! implements them with system time and real servers. The algorithm code cannot tell which world it
//! runs in, so a verdict found in simulation is a verdict about this very code.
//!
//! This crate depends on no async runtime, no simulator and no client library.

pub mod describe;
pub mod env;
pub mod error;
pub mod etcd;
pub mod guard;
pub mod lock;
pub mod mysql;
pub mod redis;
pub mod retry;
pub mod stores;
pub mod zookeeper;

pub use env::{Env, LockEvent};
pub use error::{LockError, StoreError};
pub use guard::Guard;
pub use lock::Lock;
