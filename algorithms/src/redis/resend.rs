//! Redisson's command re-send: a command whose reply did not come in time is sent again, the same
//! command with the same arguments, up to `retryAttempts` more times, `retryInterval` apart.
//!
//! Follows `RedisExecutor.java` (`scheduleResponseTimeout`, `isResendAllowed`), Redisson
//! 3.10.0 and later (before 3.15.2 the re-send went out at once; since, after `retryInterval`),
//! with the defaults of `config/BaseConfig.java`: `timeout` 3000 ms, `retryInterval` 1500 ms,
//! `retryAttempts` 3 (4 since 3.48). Which commands a release re-sends is the lock's business
//! (`super::reentrant`): since 3.37 the lock's own acquire and unlock are sent with
//! `syncedEvalNoRetry`, only once.
//!
//! A command is re-sent whether or not the first one was applied: the client cannot tell a lost
//! request from a lost reply. That is the whole point: a re-sent command that is not idempotent
//! applies twice (Redisson issue #4871).

use super::command::{Command, Reply};
use super::store::RedisStore;
use crate::env::Env;
use crate::error::StoreError;
use std::time::Duration;

/// How a Redisson client re-sends a command that got no reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resend {
    /// `retryAttempts`: re-sends after the first send, at most.
    pub attempts: u32,
    /// `timeout`: how long Redisson waits for one reply before it counts it lost.
    pub timeout: Duration,
    /// `retryInterval`: the wait between a lost reply and the re-send.
    pub interval: Duration,
}

impl Resend {
    /// Redisson 3.15.2–3.47's defaults: 3 re-sends, 1.5 s apart, after a 3 s timeout.
    pub const THREE: Resend = Resend {
        attempts: 3,
        timeout: Duration::from_millis(3_000),
        interval: Duration::from_millis(1_500),
    };

    /// Redisson 3.48 and later: 4 re-sends (`retryAttempts` 4), otherwise as [`Resend::THREE`].
    pub const FOUR: Resend = Resend {
        attempts: 4,
        ..Resend::THREE
    };

    /// How long a request id's unlock latch must outlive the first unlock so that every re-send
    /// finds it: Redisson 3.24's `(timeout + retryInterval) × retryAttempts`
    /// (`RedissonBaseLock.unlockInnerAsync`), in ms.
    pub fn latch_ms(&self) -> u64 {
        ((self.timeout + self.interval).as_millis() as u64).saturating_mul(u64::from(self.attempts))
    }

    /// Sends `command`, and again after each reply that did not come, as Redisson does; the
    /// first reply, or the last error when every send went unanswered.
    ///
    /// lockcheck's store gives up on a reply after its own request timeout
    /// (`params.request_timeout_ms`, 100 ms by default); the re-send then waits out the rest of
    /// Redisson's `timeout` before its `retryInterval`, so that it goes out when Redisson's
    /// would after a lost reply. (A reply merely late by more than the store's timeout is taken
    /// for lost here where Redisson, with its 3 s, would have waited for it: give
    /// `request_timeout_ms: 3000` for Redisson's exact timing.)
    pub async fn call<S: RedisStore, E: Env>(
        &self,
        store: &S,
        env: &E,
        command: Command,
    ) -> Result<Reply, StoreError> {
        let mut sent = 0;
        loop {
            let started = env.mono_now();
            let error = match store.call(command.clone()).await {
                Ok(reply) => return Ok(reply),
                Err(e) => e,
            };
            if sent == self.attempts {
                return Err(error);
            }
            sent += 1;
            // A timeout is Redisson's response timeout: the re-send is scheduled from its end.
            // A connection that failed at once is re-tried after the interval alone.
            let waited = env.mono_now().saturating_sub(started);
            let rest = match error {
                StoreError::Timeout => self.timeout.saturating_sub(waited),
                StoreError::Unreachable(_) | StoreError::ConnectionLost(_) => Duration::ZERO,
            };
            env.sleep(rest + self.interval).await;
        }
    }
}

/// Sends `command` once, or with `resend`'s re-sends when it is given.
pub(crate) async fn call<S: RedisStore, E: Env>(
    store: &S,
    env: &E,
    resend: Option<&Resend>,
    command: Command,
) -> Result<Reply, StoreError> {
    match resend {
        Some(r) => r.call(store, env, command).await,
        None => store.call(command).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// A clock that moves only when slept on.
    struct Clock(Cell<Duration>);

    impl Env for Clock {
        fn wall_now(&self) -> Duration {
            self.0.get()
        }
        fn mono_now(&self) -> Duration {
            self.0.get()
        }
        fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
            self.0.set(self.0.get() + d);
            std::future::ready(())
        }
        fn random_u64(&self) -> u64 {
            4
        }
    }

    /// A store that times out `lost` times (100 ms each), then replies; it notes when each
    /// command was sent.
    struct Lossy<'a> {
        clock: &'a Clock,
        lost: Cell<u32>,
        sent_at: RefCell<Vec<Duration>>,
    }

    impl RedisStore for Lossy<'_> {
        fn call(&self, _c: Command) -> impl Future<Output = Result<Reply, StoreError>> {
            self.sent_at.borrow_mut().push(self.clock.0.get());
            self.clock
                .0
                .set(self.clock.0.get() + Duration::from_millis(100));
            let lost = self.lost.get();
            self.lost.set(lost.saturating_sub(1));
            std::future::ready(if lost > 0 {
                Err(StoreError::Timeout)
            } else {
                Ok(Reply::Int(1))
            })
        }
    }

    fn now<T>(f: impl Future<Output = T>) -> T {
        match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("pending"),
        }
    }

    #[test]
    fn a_lost_reply_is_resent_when_redisson_would_and_gives_up_after_its_attempts() {
        let clock = Clock(Cell::new(Duration::ZERO));
        let store = Lossy {
            clock: &clock,
            lost: Cell::new(2),
            sent_at: RefCell::new(Vec::new()),
        };
        let cmd = Command::Get { key: "k".into() };
        assert_eq!(
            now(Resend::THREE.call(&store, &clock, cmd.clone())),
            Ok(Reply::Int(1))
        );
        let ms: Vec<u128> = store
            .sent_at
            .borrow()
            .iter()
            .map(|d| d.as_millis())
            .collect();
        // Each re-send goes out `timeout + retryInterval` after the send before it.
        assert_eq!(ms, [0, 4_500, 9_000]);

        store.lost.set(10);
        store.sent_at.borrow_mut().clear();
        assert_eq!(
            now(Resend::THREE.call(&store, &clock, cmd)),
            Err(StoreError::Timeout)
        );
        assert_eq!(
            store.sent_at.borrow().len(),
            4,
            "the first send and 3 re-sends"
        );
        assert_eq!(Resend::THREE.latch_ms(), 13_500);
    }
}
