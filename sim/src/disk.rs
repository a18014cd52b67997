//! Disks that outlive their node, and what servers write to them.
//!
//! Two levels, as on a real machine: what a server has *written* to the operating system (its
//! page cache: it survives the death of the process, not of the machine), and what it has
//! *synced* (fsync: it survives both). A restart after a process crash finds the written state;
//! after a machine crash, the synced one.

use lockcheck_core::scenario::{CrashScope, Persistence};
use std::sync::Mutex;

/// The durable state of one server: kept by the simulator, so a killed node's disk survives it.
/// What reaches it, and when, is the server's persistence policy (see [`Persistence`]).
pub struct Disk<T> {
    policy: Persistence,
    synced: Mutex<Option<T>>,
    /// Written to the OS since the last fsync, if anything was (`None`: what was written is
    /// what was synced).
    written: Mutex<Option<T>>,
}

impl<T: Clone> Disk<T> {
    /// An empty disk written under `policy`.
    pub fn new(policy: Persistence) -> Disk<T> {
        Disk {
            policy,
            synced: Mutex::new(None),
            written: Mutex::new(None),
        }
    }

    /// The policy.
    pub fn policy(&self) -> Persistence {
        self.policy
    }

    /// Makes `state` durable (a write and its fsync).
    pub fn sync(&self, state: T) {
        *self.written.lock().unwrap() = None;
        *self.synced.lock().unwrap() = Some(state);
    }

    /// Records that an fsync made `state` durable while something newer may already have been
    /// written (InnoDB's log flushed once a second under commits that go on): what was written
    /// stays.
    pub fn fsync(&self, state: T) {
        *self.synced.lock().unwrap() = Some(state);
    }

    /// An fsync of what was written: it becomes durable (a no-op when nothing was written since
    /// the last one).
    pub fn sync_written(&self) {
        if let Some(written) = self.written.lock().unwrap().take() {
            *self.synced.lock().unwrap() = Some(written);
        }
    }

    /// Whether something was written since the last fsync.
    pub fn has_unsynced(&self) -> bool {
        self.written.lock().unwrap().is_some()
    }

    /// Hands `state` to the operating system without an fsync: it survives a process crash,
    /// not a machine crash.
    pub fn write(&self, state: T) {
        *self.written.lock().unwrap() = Some(state);
    }

    /// What a server restarting after a crash of `scope` finds (`None`: its first start). With
    /// `none`, nothing, whatever was written.
    pub fn load(&self, scope: Option<CrashScope>) -> Option<T> {
        match (self.policy, scope) {
            (Persistence::None, _) => None,
            (_, Some(CrashScope::Process)) => match self.written.lock().unwrap().clone() {
                Some(written) => Some(written),
                None => self.synced.lock().unwrap().clone(),
            },
            _ => self.synced.lock().unwrap().clone(),
        }
    }
}
