//! The simulated ZooKeeper server: a pure state machine ([`model`]) of the znode tree, sessions
//! with monotonic-clock expiry, sequential nodes and one-shot watches.
//!
//! Not yet wired to a madsim node or a client store: that is the rest of the ZooKeeper issue.
//! The model is tested on its own, and the `zk-sequential` algorithm
//! (`lockcheck_algorithms::zookeeper`) is tested against it directly
//! (`sim/tests/zk_sequential_algorithm.rs`), so the glue can be thin.

pub mod model;

pub use model::{CreateMode, Op, OpResult, SessionId, Stat, WatchEvent, ZkError, ZkModel};
