//! What every lock algorithm offers the code that uses it.

use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

/// A distributed lock client (Jepsen's "client", for locks).
///
/// Workloads, the simulator and the real harness use locks only through this trait, so adding an
/// algorithm means implementing it once.
pub trait Lock {
    /// Tries until the lock is acquired or `wait` (client monotonic time) has passed;
    /// `Ok(None)` when the wait ran out.
    fn acquire<E: Env>(
        &self,
        env: &E,
        wait: Duration,
    ) -> impl Future<Output = Result<Option<Guard>, LockError>>;

    /// Releases the lock if `guard` still holds it; `Ok(false)` when it no longer did.
    fn release<E: Env>(
        &self,
        env: &E,
        guard: &Guard,
    ) -> impl Future<Output = Result<bool, LockError>>;

    /// Keeps the lock alive while polled (a watchdog), updating `guard`'s validity; returns when
    /// the lock is lost. Algorithms without renewal return at once.
    fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) -> impl Future<Output = ()>;
}
