//! The ZooKeeper family: the store trait (one client session) and the locks built on it.
//!
//! - [`ZkSequential`] (`zk-sequential`): Curator's `InterProcessMutex`, a fair queue of
//!   ephemeral sequential nodes, each watching only its predecessor;
//! - [`ZkReadWriteLock`] (`zk-rwlock`): readers and writers in one such queue;
//! - [`ZkHerd`] (`zk-herd`): one ephemeral node that every waiter watches.
//!
//! All of them die with the holder's session, never by a lease the client counts down.

pub mod config;
pub mod herd;
mod paths;
pub mod rwlock;
pub mod sequential;
mod session;
pub mod store;

pub use config::ZkLockConfig;
pub use herd::ZkHerd;
pub use rwlock::ZkReadWriteLock;
pub use sequential::{QueueRole, ZkSequential};
pub use store::{
    CreateMode, EventType, SessionId, SessionState, Stat, WatchEvent, ZkError, ZkNotice, ZkStore,
    Zxid,
};
