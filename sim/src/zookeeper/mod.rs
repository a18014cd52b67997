//! The simulated ZooKeeper server: a pure state machine ([`model`]) of the znode tree, sessions
//! with monotonic-clock expiry, sequential nodes and one-shot watches.
//!
//! Not yet wired to a node, a client store or an algorithm: that is the rest of the ZooKeeper
//! issue. The model is complete and tested on its own so that the glue can be thin.

pub mod model;

pub use model::{CreateMode, Op, OpResult, SessionId, Stat, WatchEvent, ZkError, ZkModel};
