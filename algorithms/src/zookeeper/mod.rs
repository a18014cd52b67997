//! The ZooKeeper family: the store trait (one client session) and the locks built on it.

pub mod sequential;
pub mod store;

pub use sequential::{ZkSequential, ZkSequentialConfig};
pub use store::{
    CreateMode, EventType, SessionId, SessionState, Stat, WatchEvent, ZkError, ZkNotice, ZkStore,
    Zxid,
};
