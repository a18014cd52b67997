//! A count of changes that tasks can sleep on: what lets a task wait for "something changed"
//! instead of looking every few milliseconds, so that hours of simulated time in which nothing
//! happens cost one wake-up instead of one per poll.

use crate::world::World;
use futures_util::future::{select, Either};
use std::cell::Cell;
use std::sync::Mutex;
use std::task::{Poll, Waker};
use std::time::Duration;

/// Changes counted so far, and the tasks waiting for the next one.
#[derive(Default)]
pub struct Signal {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    changes: u64,
    waiters: Vec<Waker>,
}

impl Signal {
    /// Counts one change and wakes every task waiting for it.
    pub fn notify(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.changes += 1;
        for waker in inner.waiters.drain(..) {
            waker.wake();
        }
    }

    /// Changes counted so far; read it before looking at the state, then pass it to
    /// [`Signal::after`] so that a change in between is not missed.
    pub fn changes(&self) -> u64 {
        self.inner.lock().unwrap().changes
    }

    /// Waits until more than `seen` changes were counted.
    pub async fn after(&self, seen: u64) {
        std::future::poll_fn(|cx| {
            let mut inner = self.inner.lock().unwrap();
            if inner.changes != seen {
                Poll::Ready(())
            } else {
                if !inner.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    inner.waiters.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }
}

/// The wake-up of a server's timer task (Redis's active expiry, ZooKeeper's session expirer,
/// InnoDB's timeouts): it sleeps towards the earliest thing due on the server's own clock and is
/// woken early when a request brings something earlier ([`Due::offer`]), when a
/// node's clock is moved (its deadlines now fall at other true times) or when another server
/// becomes the primary. A server with nothing due sleeps until then, however long.
#[derive(Default)]
pub struct Due {
    /// What the task sleeps towards, in the caller's own clock unit; `u64::MAX`: nothing.
    target: Cell<u64>,
    moved: Signal,
}

impl Due {
    /// Wakes the task if `at` comes before what it sleeps towards.
    pub fn offer(&self, at: Option<u64>) {
        if at.is_some_and(|at| at < self.target.get()) {
            self.moved.notify();
        }
    }

    /// Sleeps towards `due`: `(at, left)`, the deadline `at` (in the unit [`Due::offer`] is given)
    /// that is `left` away on node `me`'s clock; `None` when nothing is due. True when the time
    /// came, false when woken before. Compute `due` just before calling, with no await in
    /// between, so that no offer falls between the two.
    pub async fn sleep(&self, world: &World, me: usize, due: Option<(u64, Duration)>) -> bool {
        let (seen_world, seen_moved) = (world.clocks_and_roles.changes(), self.moved.changes());
        self.target.set(due.map_or(u64::MAX, |(at, _)| at));
        let woken = std::pin::pin!(async {
            select(
                std::pin::pin!(world.clocks_and_roles.after(seen_world)),
                std::pin::pin!(self.moved.after(seen_moved)),
            )
            .await;
        });
        let Some((_, left)) = due else {
            woken.await;
            return false;
        };
        let sleep = std::pin::pin!(crate::timer::sleep(world.clock(me).true_duration(left)));
        matches!(select(sleep, woken).await, Either::Left(_))
    }
}

#[cfg(test)]
mod tests {
    use super::Signal;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_waiter_wakes_on_the_next_change_and_not_before() {
        let rt = madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default());
        rt.block_on(async {
            let signal = Arc::new(Signal::default());
            let seen = signal.changes();
            let notifier = signal.clone();
            madsim::task::spawn(async move {
                madsim::time::sleep(Duration::from_secs(3_600)).await;
                notifier.notify();
            });
            let start = madsim::time::Instant::now();
            signal.after(seen).await;
            // madsim adds a random sub-microsecond delay to every timer.
            let waited = start.elapsed();
            assert!(
                waited >= Duration::from_secs(3_600) && waited < Duration::from_secs(3_601),
                "{waited:?}"
            );
            // A change already counted is not waited for.
            signal.after(seen).await;
        });
    }
}
