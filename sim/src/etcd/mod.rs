//! The simulated etcd: a pure state machine ([`model`]: an MVCC keyspace at a global revision,
//! leases on the member's monotonic clock, the deletions a watch replays), its [`Server`] in
//! [`node`] (pushed watch events, everything on disk before the answer), and the client side
//! ([`store`]: the session lease kept alive every third of its TTL, watches re-registered after
//! a lost connection). A cluster of members ([`cluster`], [`member`]) runs raft's leader, terms,
//! elections and quorum commits around the same model.
//!
//! [`Server`]: crate::server::Server

pub mod cluster;
pub mod member;
pub mod model;
pub mod node;
pub mod store;

pub use model::{EtcdModel, Snapshot};
pub use store::SimEtcd;
