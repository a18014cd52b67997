//! The simulated MySQL/MariaDB server: a pure state machine ([`model`]) of the lock table,
//! transactions, InnoDB row locks that block, `innodb_lock_wait_timeout`, `wait_timeout` and crash
//! recovery under `innodb_flush_log_at_trx_commit`; [`node`] runs it as a madsim node (the
//! server's own clocks, late replies to statements that waited for a lock, committed changes in
//! the history); [`store`] is the client side (`SqlStore`: one connection, reopened after the
//! server closed it).

pub mod model;
pub mod node;
pub mod store;

pub use model::{Applied, ConnId, MysqlConfig, MysqlModel, Notice, ServerTime, Snapshot};
