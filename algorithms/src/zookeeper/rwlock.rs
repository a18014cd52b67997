//! `zk-rwlock` (seed 000; Curator's `InterProcessReadWriteLock`): a read lock and a write lock
//! whose nodes queue in ONE sequential line under the same path.
//!
//! A reader holds when no write node is ahead of its own, so readers share the lock with each
//! other; a writer holds when its node is first, so it excludes everyone. Both are
//! [`ZkSequential`] locks in a [`QueueRole`]; this module only pairs them on one session, as
//! Curator's `readLock()` and `writeLock()` share one client. The lock dies with the session, as
//! the mutex does: a paused reader or writer outlives its session just the same, and the fencing
//! token is again the node's `czxid`.

use super::config::ZkLockConfig;
use super::sequential::{QueueRole, ZkSequential};
use super::store::ZkStore;
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::Env;
use crate::stores::Stores;
use std::rc::Rc;

/// The two sides of one read/write lock, for one client session.
pub struct ZkReadWriteLock<S> {
    /// Shared with other readers; excluded by a writer queued ahead.
    pub read: ZkSequential<S>,
    /// Exclusive.
    pub write: ZkSequential<S>,
}

impl<S: ZkStore + Clone> ZkReadWriteLock<S> {
    /// Both sides of the lock at `config.path`, on the session `store` (a cheap handle: the two
    /// sides share the session, so a clone must be the same session, e.g. an `Rc`).
    pub fn new(store: S, config: ZkLockConfig) -> Self {
        ZkReadWriteLock {
            read: ZkSequential::with_role(store.clone(), config.clone(), QueueRole::Read),
            write: ZkSequential::with_role(store, config, QueueRole::Write),
        }
    }
}

/// `zk-rwlock` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "zk-rwlock",
    summary: "Curator's InterProcessReadWriteLock: readers and writers in one sequential queue (seed 000).",
    backend: Backend::ZooKeeper,
    servers: Servers::One,
    replicas: false,
    lease: Lease::Session,
    fencing: Fencing::Token,
    renews: false,
    reentrant: false,
    readers: true,
    order: Order::Sequence,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for ZkReadWriteLock<Rc<S::Zk>> {
    type Side = ZkSequential<Rc<S::Zk>>;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        // Both sides on one session, as Curator's two locks share one client.
        ZkReadWriteLock::new(Rc::new(stores.zookeeper()), ZkLockConfig::of(settings))
    }

    fn side(&self, shared: bool) -> &Self::Side {
        if shared {
            &self.read
        } else {
            &self.write
        }
    }
}
