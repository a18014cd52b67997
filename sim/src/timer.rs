//! Sleeps and timeouts that arm one madsim timer each.
//!
//! madsim's `Sleep` adds a timer to the runtime's heap on *every* poll that finds it pending, and
//! every such timer later fires and wakes its task, which polls again. A request's timeout is
//! polled whenever anything else wakes its task (a reply to another request, another timer), so
//! one timeout became a dozen timers and as many spurious polls: a tenth of a Redlock run. These
//! wrappers arm the timer on the first poll only and keep the latest waker for it to wake.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Where an armed timer finds the waker of whoever polled last.
struct Slot(Mutex<Option<Waker>>);

impl Wake for Slot {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waker = self
            .0
            .lock()
            .expect("never poisoned: no code panics holding it")
            .take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A sleep of simulated time; see [`sleep`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    inner: madsim::time::Sleep,
    armed: Option<Arc<Slot>>,
}

/// Sleeps `duration` of true (simulated) time, arming a single timer.
pub fn sleep(duration: Duration) -> Sleep {
    Sleep {
        inner: madsim::time::sleep(duration),
        armed: None,
    }
}

/// Sleeps until `deadline` of true (simulated) time, arming a single timer.
pub fn sleep_until(deadline: madsim::time::Instant) -> Sleep {
    Sleep {
        inner: madsim::time::sleep_until(deadline),
        armed: None,
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.inner.is_elapsed() {
            return Poll::Ready(());
        }
        match &this.armed {
            Some(slot) => {
                let mut waker = slot.0.lock().expect("never poisoned");
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
            }
            None => {
                let slot = Arc::new(Slot(Mutex::new(Some(cx.waker().clone()))));
                let waker = Waker::from(slot.clone());
                // Pending (checked above): this registers the one timer, waking the slot.
                let _ = Pin::new(&mut this.inner).poll(&mut Context::from_waker(&waker));
                this.armed = Some(slot);
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // The timer stays in madsim's heap; when it fires it must not wake a task that has
        // moved on (a request answered before its timeout).
        if let Some(slot) = &self.armed {
            slot.0.lock().expect("never poisoned").take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use madsim::runtime::Runtime;

    #[test]
    fn a_sleep_polled_many_times_ends_on_time() {
        Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(async {
            let start = madsim::time::Instant::now();
            // Polled again by every wake of the other side of the select.
            let ticks = async {
                for _ in 0..50 {
                    madsim::time::sleep(Duration::from_millis(1)).await;
                }
            };
            let slept = sleep(Duration::from_millis(30));
            let (_, ()) = futures_util::join!(ticks, async {
                slept.await;
                assert!(start.elapsed() >= Duration::from_millis(30));
                assert!(start.elapsed() < Duration::from_millis(31), "woken on time");
            });
            // madsim moves time on by a few ns with every poll.
            let within = |at: Duration, ms: u64| {
                at >= Duration::from_millis(ms) && at < Duration::from_millis(ms + 1)
            };
            assert!(within(start.elapsed(), 50));
            sleep(Duration::from_millis(20)).await;
            assert!(within(start.elapsed(), 70));
        });
    }
}
