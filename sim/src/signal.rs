//! A count of changes that tasks can sleep on: what lets a task wait for "something changed"
//! instead of looking every few milliseconds, so that hours of simulated time in which nothing
//! happens cost one wake-up instead of one per poll.

use std::sync::Mutex;
use std::task::{Poll, Waker};

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
