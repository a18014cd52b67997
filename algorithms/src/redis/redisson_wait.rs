//! How a Redisson lock waits: on a pub/sub channel, not by polling.
//!
//! `RedissonLock.tryLock(waitTime, …)` (every release read, 3.11 to 3.52) attempts once; if the
//! lock is held it subscribes to the lock's channel, then loops: attempt again, and wait for a
//! message on the channel for as long as the attempt's reply says the lock has left (its PTTL),
//! or for the rest of the wait if that is shorter. The holder's release publishes the message
//! (the release scripts' `publish`), so a waiter is woken within a message's latency of a
//! release; a lock that expires publishes nothing, and its waiters wake when their PTTL runs out.
//!
//! A wake-up is lost when its message is: published while the waiter's subscription is not on
//! the server (its connection broke and has not re-subscribed yet, the server restarted). The
//! waiter then sits out the PTTL it last read, on a lock that may have been free all along: a
//! bounded cost (one lease) by Redisson's design, which the stuck check
//! ([`lockcheck_core`]'s `checker::stuck`) reports only beyond its bound.

use super::store::RedisStore;
use crate::env::Env;
use crate::error::LockError;
use crate::guard::Guard;
use crate::retry::{Retry, Tried};
use futures_util::future::{select, Either};
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

/// What one attempt of a Redisson lock came to, with the lock's PTTL in ms when the server
/// refused (`None` when it did not say).
pub type Attempt = (Tried, Option<i64>);

/// Redisson's blocking acquire, `RedissonLock.tryLock(waitTime, leaseTime, unit)`: see the
/// module's documentation. `Ok(None)` when the wait ran out, `retry.count` attempts were made,
/// or the subscription could not be made (Redisson: the subscribe future failed or timed out).
///
/// An attempt that got no reply does not end the wait here, where Redisson's `tryLock` throws
/// or returns `false` and leaves the next try to the application: the waiter backs off
/// ([`Retry::base_delay`], jittered in `[d/2, d]`) and attempts again, as every lockcheck lock
/// does, so that an outage costs attempts by the backoff rather than by the application's retry
/// delay.
///
/// The wait is measured on the client's wall clock, as Redisson measures it
/// (`System.currentTimeMillis()`): a clock stepped back lengthens it, one stepped forward
/// shortens it.
///
/// `longest_sleep`, when given, bounds each wait for a message besides the PTTL: a fair lock's
/// waiter must attempt again before its place in the queue lapses, even when no message comes
/// (see [`super::fair`]).
pub async fn acquire<E, S, F, Fut>(
    env: &E,
    store: &S,
    channel: &str,
    wait: Duration,
    retry: Retry,
    longest_sleep: Option<Duration>,
    mut attempt: F,
) -> Result<Option<Guard>, LockError>
where
    E: Env,
    S: RedisStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt, LockError>>,
{
    let mut subscribed = false;
    let outcome = async {
        // Redisson takes the time of each step off the wait; the steps follow each other, so
        // that is the wait's end on the wall clock.
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let deadline = ms(env.wall_now()).saturating_add(ms(wait));
        let left = || deadline - ms(env.wall_now());
        let mut attempts = 0u32;
        // Attempts in a row that got no reply.
        let mut silent = 0u32;
        loop {
            let (tried, ttl) = match attempt().await {
                Ok(attempted) => attempted,
                // No reply (the attempt has dealt with its unknown outcome): as unanswered.
                Err(LockError::Store(_)) => (Tried::Unanswered, None),
                Err(e) => return Err(e),
            };
            match tried {
                Tried::Acquired(guard) => return Ok(Some(guard)),
                Tried::Unanswered => silent = silent.saturating_add(1),
                Tried::Refused => silent = 0,
            }
            attempts = attempts.saturating_add(1);
            let time = left();
            if time <= 0 || retry.count.is_some_and(|n| attempts >= n) {
                return Ok(None);
            }
            if silent > 0 {
                let delay = retry.base_delay(silent);
                let pause = env.random_between(delay / 2, delay);
                if ms(pause) >= time {
                    return Ok(None);
                }
                env.sleep(pause).await;
            } else if !subscribed {
                // Subscribed, it attempts again at once: a release published before the
                // subscription is not missed. The first attempt's PTTL is not used.
                if store.subscribe(channel).await.is_err() {
                    return Ok(None);
                }
                subscribed = true;
            } else {
                // Waiting for the message: at most the lock's PTTL, at most the wait left.
                let bound = match ttl {
                    Some(ttl) if (0..time).contains(&ttl) => ttl,
                    _ => time,
                };
                let bound = longest_sleep.map_or(bound, |cap| bound.min(ms(cap)));
                let message = pin!(store.next_message(channel));
                let timer = pin!(env.sleep(Duration::from_millis(bound.unsigned_abs())));
                // Woken by the message or by the timer, it attempts again either way.
                let _: Either<_, _> = select(message, timer).await;
            }
            if left() <= 0 {
                return Ok(None);
            }
        }
    }
    .await;
    if subscribed {
        store.unsubscribe(channel);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StoreError;
    use crate::redis::command::{Command, Reply};
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;
    use std::task::{Context, Poll, Waker};

    /// A clock that moves only when slept on, noting each sleep.
    #[derive(Default)]
    struct Clock {
        now: Cell<Duration>,
        slept: RefCell<Vec<u64>>,
    }

    impl Env for Clock {
        fn wall_now(&self) -> Duration {
            self.now.get()
        }
        fn mono_now(&self) -> Duration {
            self.now.get()
        }
        /// Time passes when the sleep is polled, not when it is made: a sleep that loses a
        /// race is never polled.
        async fn sleep(&self, d: Duration) {
            self.now.set(self.now.get() + d);
            self.slept.borrow_mut().push(d.as_millis() as u64);
        }
        fn random_u64(&self) -> u64 {
            0
        }
    }

    /// A store whose channel holds `messages`; it notes what the lock asked of it.
    #[derive(Default)]
    struct Channel {
        refuse: bool,
        messages: RefCell<VecDeque<String>>,
        asked: RefCell<Vec<String>>,
    }

    impl RedisStore for Channel {
        fn call(&self, _: Command) -> impl Future<Output = Result<Reply, StoreError>> {
            std::future::ready(Ok(Reply::Nil))
        }
        fn subscribe(&self, channel: &str) -> impl Future<Output = Result<(), StoreError>> {
            self.asked.borrow_mut().push(format!("subscribe {channel}"));
            std::future::ready(if self.refuse {
                Err(StoreError::Timeout)
            } else {
                Ok(())
            })
        }
        fn unsubscribe(&self, channel: &str) {
            self.asked
                .borrow_mut()
                .push(format!("unsubscribe {channel}"));
        }
        fn next_message(&self, _: &str) -> impl Future<Output = String> {
            let message = self.messages.borrow_mut().pop_front();
            async move {
                match message {
                    Some(m) => m,
                    None => std::future::pending().await,
                }
            }
        }
    }

    const RETRY: Retry = Retry {
        delay: Duration::from_millis(100),
        count: None,
        max_delay: Duration::from_millis(400),
    };

    /// Runs an acquire whose attempts reply `replies` in turn (then acquire).
    fn acquire_with(
        clock: &Clock,
        store: &Channel,
        replies: Vec<Attempt>,
        wait_ms: u64,
    ) -> (Option<Guard>, usize) {
        acquire_sleeping_at_most(clock, store, replies, wait_ms, None)
    }

    /// [`acquire_with`] with a bound on each wait for a message.
    fn acquire_sleeping_at_most(
        clock: &Clock,
        store: &Channel,
        replies: Vec<Attempt>,
        wait_ms: u64,
        longest_sleep: Option<Duration>,
    ) -> (Option<Guard>, usize) {
        let replies = RefCell::new(VecDeque::from(replies));
        let made = Cell::new(0);
        let guard = Guard {
            token: "me".into(),
            acquired_at: Duration::ZERO,
            valid_until: Duration::MAX,
            fence: None,
        };
        let wait = Duration::from_millis(wait_ms);
        let future = acquire(clock, store, "ch", wait, RETRY, longest_sleep, || {
            made.set(made.get() + 1);
            let next = replies.borrow_mut().pop_front();
            let reply = next.unwrap_or((Tried::Acquired(guard.clone()), None));
            std::future::ready(Ok(reply))
        });
        let outcome = match std::pin::pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(outcome) => outcome.unwrap(),
            Poll::Pending => panic!("the fake clock never blocks"),
        };
        (outcome, made.get())
    }

    #[test]
    fn it_subscribes_after_a_refusal_attempts_again_at_once_then_waits_the_pttl_it_read() {
        let (clock, store) = (Clock::default(), Channel::default());
        let refused = |ttl| (Tried::Refused, Some(ttl));
        let (held, attempts) =
            acquire_with(&clock, &store, vec![refused(9_000), refused(700)], 10_000);
        assert!(held.is_some());
        assert_eq!(attempts, 3);
        // The first attempt's PTTL is not waited on; the second's is.
        assert_eq!(*clock.slept.borrow(), [700]);
        assert_eq!(*store.asked.borrow(), ["subscribe ch", "unsubscribe ch"]);
    }

    #[test]
    fn a_message_wakes_it_at_once_and_the_wait_left_bounds_a_longer_pttl() {
        let (clock, store) = (Clock::default(), Channel::default());
        store.messages.borrow_mut().push_back("0".into());
        let refused = |ttl| (Tried::Refused, Some(ttl));
        let replies = vec![refused(5_000), refused(5_000), refused(5_000)];
        let (held, attempts) = acquire_with(&clock, &store, replies, 2_000);
        // Woken by the message without waiting, then refused again: it waits out the 2 s
        // left (shorter than the PTTL) and gives up.
        assert!(held.is_none());
        assert_eq!(attempts, 3);
        assert_eq!(*clock.slept.borrow(), [2_000]);
        assert_eq!(store.asked.borrow().len(), 2, "unsubscribed on giving up");
    }

    #[test]
    fn a_fair_waiter_attempts_again_before_its_place_lapses_whatever_the_pttl() {
        let (clock, store) = (Clock::default(), Channel::default());
        let refused = |ttl| (Tried::Refused, Some(ttl));
        // A long PTTL, then "free but another waiter is first" (-2): each sleep stops at the
        // bound, where without it the first would last the PTTL and the second the wait left.
        let replies = vec![refused(30_000), refused(30_000), refused(-2)];
        let bound = Some(Duration::from_millis(2_500));
        let (held, attempts) = acquire_sleeping_at_most(&clock, &store, replies, 60_000, bound);
        assert!(held.is_some());
        assert_eq!(attempts, 4);
        assert_eq!(*clock.slept.borrow(), [2_500, 2_500]);
    }

    #[test]
    fn unanswered_attempts_back_off_before_any_subscription() {
        let (clock, store) = (Clock::default(), Channel::default());
        let unanswered = (Tried::Unanswered, None);
        let replies = vec![unanswered.clone(), unanswered.clone(), unanswered];
        let (held, attempts) = acquire_with(&clock, &store, replies, 10_000);
        assert!(held.is_some());
        assert_eq!(attempts, 4);
        // Jitter draws the low end here: half of 100, 200, 400 ms.
        assert_eq!(*clock.slept.borrow(), [50, 100, 200]);
        assert!(store.asked.borrow().is_empty());
    }

    #[test]
    fn a_subscription_that_fails_ends_the_wait() {
        let clock = Clock::default();
        let store = Channel {
            refuse: true,
            ..Channel::default()
        };
        let (held, attempts) =
            acquire_with(&clock, &store, vec![(Tried::Refused, Some(500))], 10_000);
        assert!(held.is_none());
        assert_eq!(attempts, 1);
        assert_eq!(*store.asked.borrow(), ["subscribe ch"]);
    }
}
