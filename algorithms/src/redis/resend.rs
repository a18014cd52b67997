//! Redisson's command re-send: a command whose reply did not come in time is sent again, the same
//! command with the same arguments, up to `retryAttempts` more times, a delay apart.
//!
//! Follows `RedisExecutor.java` (`scheduleResponseTimeout`, `isResendAllowed`), Redisson
//! 3.10.0 and later (before 3.15.2 the re-send went out at once; since, after the delay), with
//! the defaults of `config/BaseConfig.java`: `timeout` 3000 ms; up to 3.47 `retryAttempts` 3 and
//! `retryInterval` 1500 ms between a lost reply and its re-send; from 3.48 `retryAttempts` 4 and
//! `retryDelay` an `EqualJitterDelay(1 s, 2 s)` (`config/EqualJitterDelay.java`), whose delay
//! after send `n` (0 the first) `RedisExecutor` draws as `calcDelay(n)`: 0.5–1 s after the first,
//! 1–2 s after each later one ([`Delay`]). Which commands a release re-sends is the lock's
//! business (`super::reentrant`): since 3.37 a single server's lock sends its own acquire and
//! unlock with `syncedEvalNoRetry`, only once; with replicas they go out in a batch, which is
//! re-sent whole ([`Resend::run`]).
//!
//! A command is re-sent whether or not the first one was applied: the client cannot tell a lost
//! request from a lost reply. That is the whole point: a re-sent command that is not idempotent
//! applies twice (Redisson issue #4871).

use super::command::{Command, Reply};
use super::store::RedisStore;
use crate::env::Env;
use crate::error::StoreError;
use std::future::Future;
use std::time::Duration;

/// How long Redisson waits between a lost reply and the re-send (`DelayStrategy.calcDelay`),
/// and between retries of a lock operation that found no replica synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// The same every time: `retryInterval` (Redisson up to 3.47).
    Constant(Duration),
    /// `EqualJitterDelay(base, max)` (Redisson 3.48 and later): for attempt `n`, half of
    /// `min(base × 2ⁿ, max)` plus a random part up to that half again, in whole ms.
    EqualJitter {
        /// `baseDelay`.
        base: Duration,
        /// `maxDelay`.
        max: Duration,
    },
}

impl Delay {
    /// `calcDelay(attempt)`, drawing its random part from the client's seeded randomness.
    pub fn calc<E: Env>(&self, env: &E, attempt: u32) -> Duration {
        match *self {
            Delay::Constant(d) => d,
            Delay::EqualJitter { base, max } => {
                let (base, max) = (base.as_millis() as u64, max.as_millis() as u64);
                let exponential = if attempt >= 63 || base >= max {
                    max
                } else {
                    base.saturating_mul(1 << attempt).min(max)
                };
                let half = exponential / 2;
                // `ThreadLocalRandom.nextLong(0, half + 1)`: both ends included.
                let random = if half == 0 {
                    0
                } else {
                    env.random_u64() % (half + 1)
                };
                Duration::from_millis(half + random)
            }
        }
    }
}

/// How a Redisson client re-sends a command that got no reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resend {
    /// `retryAttempts`: re-sends after the first send, at most.
    pub attempts: u32,
    /// `timeout`: how long Redisson waits for one reply before it counts it lost.
    pub timeout: Duration,
    /// `retryInterval` / `retryDelay`: the wait between a lost reply and the re-send.
    pub delay: Delay,
}

impl Resend {
    /// Redisson 3.15.2–3.47's defaults: 3 re-sends, 1.5 s after each lost reply, after a 3 s
    /// timeout.
    pub const THREE: Resend = Resend {
        attempts: 3,
        timeout: Duration::from_millis(3_000),
        delay: Delay::Constant(Duration::from_millis(1_500)),
    };

    /// Redisson 3.48 and later: 4 re-sends (`retryAttempts` 4), each after an equal-jitter delay
    /// (`retryDelay`, `EqualJitterDelay(1 s, 2 s)`), after the same 3 s timeout.
    pub const FOUR_JITTERED: Resend = Resend {
        attempts: 4,
        timeout: Duration::from_millis(3_000),
        delay: Delay::EqualJitter {
            base: Duration::from_millis(1_000),
            max: Duration::from_millis(2_000),
        },
    };

    /// The same re-sends for a batch that ends with a `WAIT` of `sync`: Redisson's batch waits
    /// `timeout` plus the `WAIT`'s own timeout for its replies (`RedisCommonBatchExecutor`).
    pub fn waiting_longer(self, sync: Duration) -> Resend {
        Resend {
            timeout: self.timeout + sync,
            ..self
        }
    }

    /// How long a request id's unlock latch must outlive the first unlock so that every re-send
    /// finds it, in ms: Redisson 3.24's `(timeout + retryInterval) × retryAttempts`
    /// (`RedissonBaseLock.unlockInnerAsync`); from 3.48 the interval is
    /// `retryDelay.calcDelay(retryAttempts)`, drawn at each unlock (1–2 s: 16–20 s in all).
    pub fn latch_ms<E: Env>(&self, env: &E) -> u64 {
        let delay = self.delay.calc(env, self.attempts);
        ((self.timeout + delay).as_millis() as u64).saturating_mul(u64::from(self.attempts))
    }

    /// Sends `command`, and again after each reply that did not come, as Redisson does; the
    /// first reply, or the last error when every send went unanswered.
    ///
    /// lockcheck's store gives up on a reply after its own request timeout
    /// (`params.request_timeout_ms`, 100 ms by default); the re-send then waits out the rest of
    /// Redisson's `timeout` before its delay, so that it goes out when Redisson's would after a
    /// lost reply. (A reply merely late by more than the store's timeout is taken for lost here
    /// where Redisson, with its 3 s, would have waited for it: give `request_timeout_ms: 3000`
    /// for Redisson's exact timing.)
    pub async fn call<S: RedisStore, E: Env>(
        &self,
        store: &S,
        env: &E,
        command: Command,
    ) -> Result<Reply, StoreError> {
        self.run(env, || store.call(command.clone())).await
    }

    /// Runs `send` (one command, or a batch of them on one connection), and again after each
    /// time no reply came, as [`Resend::call`] does for one command.
    pub async fn run<E, T, F, Fut>(&self, env: &E, mut send: F) -> Result<T, StoreError>
    where
        E: Env,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut sent = 0;
        loop {
            let started = env.mono_now();
            let error = match send().await {
                Ok(reply) => return Ok(reply),
                Err(e) => e,
            };
            if sent == self.attempts {
                return Err(error);
            }
            // A timeout is Redisson's response timeout: the re-send is scheduled from its end.
            // A connection that failed at once is re-tried after the delay alone.
            let waited = env.mono_now().saturating_sub(started);
            let rest = match error {
                StoreError::Timeout => self.timeout.saturating_sub(waited),
                StoreError::Unreachable(_) | StoreError::ConnectionLost(_) => Duration::ZERO,
            };
            // `RedisExecutor` draws the delay for the send that failed (`calcDelay(attempt)`).
            let delay = self.delay.calc(env, sent);
            sent += 1;
            env.sleep(rest + delay).await;
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

    /// A clock that moves only when slept on; its random draws are `.1`.
    struct Clock(Cell<Duration>, Cell<u64>);

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
            self.1.get()
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
        let clock = Clock(Cell::new(Duration::ZERO), Cell::new(4));
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
        assert_eq!(Resend::THREE.latch_ms(&clock), 13_500);
    }

    #[test]
    fn from_redisson_3_48_a_lost_reply_is_resent_4_times_after_equal_jitter_delays() {
        // The random part drawn at its lowest: 0.5 s after the first send, 1 s after the others.
        let clock = Clock(Cell::new(Duration::ZERO), Cell::new(0));
        let store = Lossy {
            clock: &clock,
            lost: Cell::new(10),
            sent_at: RefCell::new(Vec::new()),
        };
        let cmd = Command::Get { key: "k".into() };
        assert_eq!(
            now(Resend::FOUR_JITTERED.call(&store, &clock, cmd)),
            Err(StoreError::Timeout)
        );
        let ms: Vec<u128> = store
            .sent_at
            .borrow()
            .iter()
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(
            ms,
            [0, 3_500, 7_500, 11_500, 15_500],
            "the first send and 4 re-sends"
        );
        // The latch outlives them: (3 s + calcDelay(4), 1–2 s) × 4.
        assert_eq!(Resend::FOUR_JITTERED.latch_ms(&clock), 16_000);
        clock.1.set(1_000);
        assert_eq!(Resend::FOUR_JITTERED.latch_ms(&clock), 20_000);
    }

    #[test]
    fn the_equal_jitter_delay_is_half_its_backoff_plus_up_to_half_again() {
        let Delay::EqualJitter { .. } = Resend::FOUR_JITTERED.delay else {
            panic!("3.48's delay is EqualJitterDelay");
        };
        let clock = Clock(Cell::new(Duration::ZERO), Cell::new(0));
        let (mut low, mut high) = ([u64::MAX; 4], [0u64; 4]);
        for draw in 0..5_000u64 {
            clock.1.set(draw.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            for attempt in 0..4 {
                let ms = Resend::FOUR_JITTERED
                    .delay
                    .calc(&clock, attempt as u32)
                    .as_millis() as u64;
                low[attempt] = low[attempt].min(ms);
                high[attempt] = high[attempt].max(ms);
            }
        }
        // `EqualJitterDelay(1 s, 2 s)`: 0.5–1 s for attempt 0, then 1–2 s (the 2 s cap).
        assert_eq!(low, [500, 1_000, 1_000, 1_000]);
        assert_eq!(high, [1_000, 2_000, 2_000, 2_000]);
        let constant = Resend::THREE.delay;
        assert_eq!(constant.calc(&clock, 3), Duration::from_millis(1_500));
    }
}
