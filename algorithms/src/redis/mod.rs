//! The Redis family: commands, the store trait, and the locks built on them.

pub mod command;
pub mod fair;
mod owner_hash;
pub mod plain_del;
pub mod redlock;
pub mod reentrant;
pub mod single;
pub mod store;

pub use command::{Command, Reply, Script, SetOptions};
pub use store::RedisStore;
