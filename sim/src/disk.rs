//! Disks that outlive their node, and what servers write to them.

use crate::scenario::Persistence;
use std::sync::Mutex;

/// The durable state of one server: kept by the simulator, so a killed node's disk survives it.
/// What reaches it, and when, is the server's persistence policy (see [`Persistence`]).
pub struct Disk<T> {
    policy: Persistence,
    synced: Mutex<Option<T>>,
}

impl<T: Clone> Disk<T> {
    /// An empty disk written under `policy`.
    pub fn new(policy: Persistence) -> Disk<T> {
        Disk {
            policy,
            synced: Mutex::new(None),
        }
    }

    /// The policy.
    pub fn policy(&self) -> Persistence {
        self.policy
    }

    /// Makes `state` durable (an fsync).
    pub fn sync(&self, state: T) {
        *self.synced.lock().unwrap() = Some(state);
    }

    /// What a restarting server finds. With `none`, nothing, whatever was synced.
    pub fn load(&self) -> Option<T> {
        match self.policy {
            Persistence::None => None,
            Persistence::Everysec | Persistence::Always => self.synced.lock().unwrap().clone(),
        }
    }
}
