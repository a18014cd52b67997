//! The simulated ZooKeeper server: a pure state machine ([`model`]) of the znode tree, sessions
//! with monotonic-clock expiry, sequential nodes and one-shot watches.
//!
//! [`node`] runs the model as a madsim node (watch events pushed to each session's client, the
//! tree and sessions on disk); [`store`] is the client side (`ZkStore`: pings every third of the
//! timeout, Connected / Disconnected / Expired, a new session after an expiry).
//!
//! An ensemble (`params.nodes` of 3 or more) runs [`member`] on each server node instead of
//! [`node`], around one replicated tree and its leader ([`ensemble`]).

pub mod ensemble;
pub mod member;
pub mod model;
pub mod node;
mod serve;
pub mod store;

pub use model::{CreateMode, Op, OpResult, SessionId, Stat, WatchEvent, ZkError, ZkModel};
