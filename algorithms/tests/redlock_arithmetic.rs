//! Redlock's safety-critical arithmetic, tested directly (issue 14): the quorum, the validity
//! measured from the attempt's START, and the elapsed-time check. Each test fails if its rule is
//! broken (a quorum of N/2, a validity counted from the last reply, `<=` for `<`), which the
//! broad searches catch only now and then.
//!
//! The masters are fakes that answer at once and advance the client's monotonic clock by a set
//! cost per request, so every duration here is exact.

use futures_util::FutureExt;
use lockcheck_algorithms::redis::redlock::{
    Implementation, Redlock, RedlockAttempt, RedlockConfig,
};
use lockcheck_algorithms::redis::{Command, RedisStore, Reply};
use lockcheck_algorithms::{Env, StoreError};
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// A client whose monotonic clock moves only when a master answers.
#[derive(Clone, Default)]
struct Client {
    now: Rc<Cell<Duration>>,
    draws: Rc<Cell<u64>>,
}

impl Env for Client {
    fn wall_now(&self) -> Duration {
        self.now.get()
    }
    fn mono_now(&self) -> Duration {
        self.now.get()
    }
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> {
        self.now.set(self.now.get() + duration);
        std::future::ready(())
    }
    fn random_u64(&self) -> u64 {
        self.draws.set(self.draws.get() + 1);
        self.draws.get()
    }
}

/// A master that takes `cost` of the client's time per request and grants the lock or not.
struct Master {
    client: Client,
    cost: Duration,
    grants: bool,
}

impl RedisStore for Master {
    fn call(&self, command: Command) -> impl Future<Output = Result<Reply, StoreError>> {
        self.client.now.set(self.client.now.get() + self.cost);
        let reply = match command {
            Command::Set { .. } if self.grants => Reply::Status("OK".into()),
            Command::Set { .. } => Reply::Nil,
            _ => Reply::Int(1),
        };
        std::future::ready(Ok(reply))
    }
}

const TTL: Duration = Duration::from_secs(10);

fn config() -> RedlockConfig {
    RedlockConfig {
        key: "lock".into(),
        ttl: TTL,
        drift_factor: 0.01,
        retry_delay: Duration::from_millis(200),
        retry_count: Some(1),
        max_retry_delay: Duration::from_millis(200),
        implementation: Implementation::Reference,
    }
}

/// `n` masters, the first `granting` of which grant; each request costs `cost`.
fn redlock(client: &Client, n: usize, granting: usize, cost: Duration) -> Redlock<Master> {
    let masters = (0..n)
        .map(|i| Master {
            client: client.clone(),
            cost,
            grants: i < granting,
        })
        .collect();
    Redlock::new(masters, config())
}

fn attempt(lock: &Redlock<Master>, client: &Client) -> RedlockAttempt {
    lock.try_acquire(client)
        .now_or_never()
        .expect("the fakes answer at once")
}

#[test]
fn the_drift_allowance_is_one_percent_of_the_ttl_plus_two_ms() {
    assert_eq!(config().drift_allowance(), Duration::from_millis(102));
}

#[test]
fn the_quorum_is_a_strict_majority() {
    let client = Client::default();
    for (n, quorum) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)] {
        assert_eq!(
            redlock(&client, n, n, Duration::ZERO).quorum(),
            quorum,
            "N = {n}"
        );
    }
    // 5 masters: 2 grants are not enough, 3 are.
    for (granting, acquired) in [(2, false), (3, true)] {
        let client = Client::default();
        let lock = redlock(&client, 5, granting, Duration::ZERO);
        assert_eq!(
            matches!(attempt(&lock, &client), RedlockAttempt::Acquired(_)),
            acquired,
            "{granting} of 5"
        );
    }
}

#[test]
fn the_validity_runs_from_the_start_of_the_attempt_not_from_its_last_reply() {
    // 5 masters at 1 s each: the attempt takes 5 s. The lease on the first master began when
    // the attempt began, so that is where the validity is counted from.
    let client = Client::default();
    client.now.set(Duration::from_secs(100));
    let lock = redlock(&client, 5, 5, Duration::from_secs(1));
    let RedlockAttempt::Acquired(guard) = attempt(&lock, &client) else {
        panic!("five of five granted in time");
    };
    let start = Duration::from_secs(100);
    assert_eq!(guard.acquired_at, start);
    assert_eq!(guard.valid_until, start + TTL - config().drift_allowance());
    // Right after the attempt, 5 s of the budget are already spent.
    assert_eq!(
        guard.validity_left(client.mono_now()),
        TTL - config().drift_allowance() - Duration::from_secs(5)
    );
}

#[test]
fn an_attempt_that_took_its_whole_budget_does_not_acquire() {
    // The budget is TTL − allowance = 9.898 s. Five requests of a fifth of it each spend it
    // exactly: no validity left, no lock (elapsed must be strictly less). A nanosecond less
    // per request leaves 5 ns: acquired.
    let budget = TTL - config().drift_allowance();
    for (cost, acquired) in [
        (budget / 5, false),
        (budget / 5 - Duration::from_nanos(1), true),
        (budget, false),
    ] {
        let client = Client::default();
        let lock = redlock(&client, 5, 5, cost);
        let outcome = attempt(&lock, &client);
        assert_eq!(
            matches!(outcome, RedlockAttempt::Acquired(_)),
            acquired,
            "cost {cost:?}: {outcome:?}"
        );
    }
}

#[test]
fn each_implementation_deducts_its_own_drift_term() {
    let ms = Duration::from_millis;
    // The reference and node-redlock (`Math.round(0.01 * ttl) + 2`) add 2 ms; redsync does not.
    assert_eq!(
        Implementation::Reference.drift_allowance(TTL, 0.01),
        ms(102)
    );
    assert_eq!(
        Implementation::NodeRedlock.drift_allowance(TTL, 0.01),
        ms(102)
    );
    assert_eq!(Implementation::Redsync.drift_allowance(TTL, 0.01), ms(100));
    // node-redlock rounds to whole milliseconds: 1.5 ms of a 150 ms TTL count as 2.
    assert_eq!(
        Implementation::NodeRedlock.drift_allowance(ms(150), 0.01),
        ms(4)
    );
}
