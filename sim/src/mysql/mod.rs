//! The simulated MySQL/MariaDB server: a pure state machine ([`model`]) of the lock table,
//! transactions, InnoDB row locks that block, `innodb_lock_wait_timeout`, `wait_timeout` and crash
//! recovery under `innodb_flush_log_at_trx_commit`. Not yet wired into the simulator: the node
//! glue and the client store come next.

pub mod model;

pub use model::{
    Applied, ConnId, FlushPolicy, MysqlConfig, MysqlModel, Notice, ServerTime, Snapshot,
};
