//! The etcd family: the store trait (one connection with its session lease) and the lock built
//! on it.
//!
//! - [`EtcdMutex`] (`etcd-mutex`): the Go client's `concurrency.Mutex`, a queue of keys ordered
//!   by create revision, each waiter watching the deletion of the key just before its own.
//!
//! The lock dies with the holder's session lease, which the server expires on its monotonic
//! clock when no keep-alive reaches it for the TTL.

pub mod lessor;
pub mod mutex;
pub mod store;

pub use mutex::EtcdMutex;
pub use store::{
    Compare, CompareOp, CompareTarget, EtcdError, EtcdStore, KeyValue, LeaseId, Op, OpResult,
    Range, Revision, SortOrder, Txn, TxnResult,
};
