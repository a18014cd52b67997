//! What clients do (Jepsen's generator, for one fixed pattern): acquire, touch the resource, work,
//! touch again, release, think; until the client has done its critical sections or the run ends.
//!
//! Written once for both worlds: a simulated client (`lockcheck_sim::client`) and a real one
//! (`lockcheck-real`) each implement [`ClientSide`], and run this very loop, so a verdict means
//! the same thing in both. Every operation is recorded as invoke and ok / fail / info.

use crate::history::{Kind, Op, Phase};
use crate::randomness;
use crate::registry::AnyLock;
use crate::resource::AccessRequest;
use crate::scenario::{Randomness, Scenario, DEFAULT_READ_FRACTION};
use futures_util::future::{select, Either};
use lockcheck_algorithms::describe::{Lease, Settings};
use lockcheck_algorithms::retry::{Retry, MAX_BACKOFF};
use lockcheck_algorithms::stores::Stores;
use lockcheck_algorithms::{Env, Guard, LockError};
use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

pub use crate::scenario::LOCK_KEY;

/// Why a release failed when the lock had already gone (expired, or taken by another): the
/// lock is not held by the releaser any more, so the release leaves nothing behind.
pub const NO_LONGER_HELD: &str = "the lock was no longer held";

/// What one client needs from its world to run the workload: its clocks, its lock, the protected
/// resource, the history, and its share of the critical sections.
pub trait ClientSide {
    /// The client's environment (clocks, sleep, randomness).
    type Env: Env;

    /// The client's environment.
    fn env(&self) -> &Self::Env;

    /// The scenario being run.
    fn scenario(&self) -> &Scenario;

    /// The client's node (its index in the scenario's topology): its random choices are its
    /// own, whichever world runs it.
    fn node(&self) -> usize;

    /// Appends an entry to the history as this client.
    fn record(&self, kind: Kind, op: Op);

    /// The world's connections the lock is built over.
    type Stores: Stores;

    /// The algorithm under test, built over this world's stores.
    fn lock(&self) -> &AnyLock<Self::Stores>;

    /// Touches the resource: whether it accepted the access, `None` when no answer came.
    fn touch(&self, access: AccessRequest) -> impl Future<Output = Option<bool>>;

    /// The time left to acquire before the run ends, on this client's clock.
    fn wait_left(&self) -> Duration;

    /// Critical sections this client still has to do (kept by the world, so a restarted client
    /// goes on).
    fn remaining(&self) -> u32;

    /// Counts one critical section done.
    fn take_acquisition(&self);

    /// Marks the client finished.
    fn finish(&self);
}

/// Runs client `c`'s workload until it has done its critical sections or the run ends.
pub async fn run<C: ClientSide>(c: &C) {
    let workload = c.scenario().workload.clone();
    let careful = workload.check_before_access;
    let retry = Duration::from_millis(c.scenario().params.retry_delay_ms);
    while c.remaining() > 0 {
        let wait = c.wait_left();
        if wait.is_zero() {
            break;
        }
        let shared = draw_shared(c);
        let guard = match acquire(c, wait, "gave up", shared).await {
            Ok(Some(guard)) => guard,
            // The lock stops retrying a retry before the wait ends: the run is over.
            Ok(None) if c.wait_left() <= retry => break,
            // It gave up after retry_count attempts, or failed: think, then try again.
            Ok(None) | Err(_) => {
                c.env()
                    .sleep(retry.max(Duration::from_millis(workload.think_ms)))
                    .await;
                continue;
            }
        };
        // Nested acquisitions (reentrant locks): the owner takes the lock again, at once.
        let mut nested = Vec::new();
        for _ in 1..workload.reentrant_depth {
            match acquire(c, c.wait_left(), "gave up", shared).await {
                Ok(Some(inner)) => nested.push(inner),
                _ => break,
            }
        }
        let still_valid =
            |g: &Guard| !careful || g.validity_left(c.env().mono_now()) > Duration::ZERO;
        // A critical section counts once the resource took the entry; a rejected or lost entry
        // is retried with a fresh acquisition.
        let watched = RefCell::new(guard.clone());
        let section = async {
            let entering = watched.borrow().clone();
            if still_valid(&entering) && access(c, Phase::Enter, &entering, shared).await {
                c.take_acquisition();
                work(c, &watched).await;
                let held = watched.borrow().clone();
                if still_valid(&held) {
                    access(c, Phase::Exit, &held, shared).await;
                }
            }
        };
        if renews(c.scenario()) {
            // The lock is kept alive from the acquisition to the release, as Redisson's
            // watchdog and python-redis-lock's renewal thread start at acquisition (and a
            // session is followed from then on): a holder paused between its acquisition and
            // its first access renews as soon as it runs again, not only once an access was
            // answered.
            let section = pin!(section);
            let renew = pin!(c.lock().keep_alive(c.env(), &watched, shared));
            if let Either::Right(((), section)) = select(section, renew).await {
                // The lock is lost; the classic client does not notice and works on.
                section.await;
            }
        } else {
            section.await;
        }
        for inner in nested.iter().rev() {
            release(c, inner, shared).await;
        }
        release(c, &guard, shared).await;
        c.env()
            .sleep(Duration::from_millis(workload.think_ms))
            .await;
    }
    c.finish();
}

/// The liveness probe: after faults and clients have stopped, the lock must become free within
/// `wait`. Its acquire is recorded like a client's; the checker reads the outcome.
pub async fn probe<C: ClientSide>(c: &C, wait: Duration) {
    let gave_up = format!("not acquired within {} ms", wait.as_millis());
    if let Ok(Some(guard)) = acquire(c, wait, &gave_up, false).await {
        release(c, &guard, false).await;
    }
}

/// Acquires (the read side when `shared`), recording the operation: `Ok(None)` when `wait` ran
/// out first (recorded as a failure saying `gave_up`), `Err` when the lock failed with an error
/// (recorded too).
async fn acquire<C: ClientSide>(
    c: &C,
    wait: Duration,
    gave_up: &str,
    shared: bool,
) -> Result<Option<Guard>, LockError> {
    c.record(Kind::Invoke, acquire_op(None, shared));
    let result = c.lock().acquire(c.env(), wait, shared).await;
    let (kind, op) = match &result {
        Ok(Some(guard)) => (
            Kind::Ok,
            Op::Acquire {
                token: Some(guard.token.clone()),
                fence: guard.fence,
                valid_ns: Some(guard.validity_left(c.env().mono_now()).as_nanos() as u64),
                error: None,
                shared,
            },
        ),
        Ok(None) => (Kind::Fail, acquire_op(Some(gave_up), shared)),
        Err(e) => (Kind::Fail, acquire_op(Some(&e.to_string()), shared)),
    };
    c.record(kind, op);
    result
}

/// Touches the resource; true when it accepted the access.
async fn access<C: ClientSide>(c: &C, phase: Phase, guard: &Guard, shared: bool) -> bool {
    let op = Op::Access {
        phase,
        token: guard.token.clone(),
        fence: guard.fence,
        shared,
    };
    c.record(Kind::Invoke, op.clone());
    let answer = c
        .touch(AccessRequest {
            phase,
            token: guard.token.clone(),
            fence: guard.fence,
            shared,
        })
        .await;
    let kind = match answer {
        Some(true) => Kind::Ok,
        Some(false) => Kind::Fail,
        None => Kind::Info,
    };
    c.record(kind, op);
    answer == Some(true)
}

async fn release<C: ClientSide>(c: &C, guard: &Guard, shared: bool) {
    let op = |error: Option<String>| Op::Release {
        token: guard.token.clone(),
        error,
    };
    c.record(Kind::Invoke, op(None));
    let (kind, error) = match c.lock().release(c.env(), guard, shared).await {
        Ok(true) => (Kind::Ok, None),
        Ok(false) => (Kind::Fail, Some(NO_LONGER_HELD.to_string())),
        Err(e @ LockError::Store(_)) => (Kind::Info, Some(e.to_string())),
        Err(e) => (Kind::Fail, Some(e.to_string())),
    };
    c.record(kind, op(error));
}

/// Whether the lock's `keep_alive` does something while a section is held: the watchdog
/// renewing a lease if configured, and for a session lock following the session (what a careful
/// client's validity check then sees).
fn renews(scenario: &Scenario) -> bool {
    scenario.params.watchdog || scenario.algorithm.lease() == Lease::Session
}

/// Works inside the critical section: `hold_ms`, or until the validity the guard has when the
/// work starts (`hold_until_validity`).
async fn work<C: ClientSide>(c: &C, guard: &RefCell<Guard>) {
    let scenario = c.scenario();
    let work = if scenario.workload.hold_until_validity {
        guard.borrow().validity_left(c.env().mono_now())
    } else {
        Duration::from_millis(scenario.workload.hold_ms)
    };
    c.env().sleep(work).await;
}

/// Whether the next section only reads (read/write locks only). The role of a client's k-th
/// section is a function of the scenario's seed, the client and k alone
/// ([`randomness::section_choice`]): not a draw from the client's stream, whose position depends
/// on how many retries the interleaving cost it, so both worlds give every section the same role.
fn draw_shared<C: ClientSide>(c: &C) -> bool {
    let scenario = c.scenario();
    if !scenario.algorithm.has_readers() {
        return false;
    }
    let fraction = scenario
        .workload
        .read_fraction
        .unwrap_or(DEFAULT_READ_FRACTION);
    let draw = match scenario.randomness {
        Randomness::PerClient => {
            let section = scenario
                .workload
                .acquisitions_per_client
                .saturating_sub(c.remaining());
            randomness::section_choice(scenario.seed, c.node(), u64::from(section))
        }
        Randomness::Shared => c.env().random_u64(),
    };
    (draw as f64 / u64::MAX as f64) < fraction
}

/// An acquire entry without a grant: the invocation, or a failure with its reason.
fn acquire_op(error: Option<&str>, shared: bool) -> Op {
    Op::Acquire {
        token: None,
        fence: None,
        valid_ns: None,
        error: error.map(str::to_string),
        shared,
    }
}

impl<S: Stores> AnyLock<S> {
    /// The lock of `scenario`'s algorithm over `stores`, for the client whose environment is
    /// `env` (its randomness names the owner of the locks that have one: a (re)started client is
    /// a new process, so a new owner).
    pub fn build(scenario: &Scenario, stores: &S, env: &impl Env) -> AnyLock<S> {
        AnyLock::build_with(scenario.algorithm, stores, &settings(scenario), env)
    }
}

/// The settings `scenario`'s lock is built from: one place decides how a scenario's parameters
/// become an algorithm's configuration, so a verdict means the same thing in both worlds.
pub fn settings(scenario: &Scenario) -> Settings {
    let p = &scenario.params;
    let algorithm = scenario.algorithm;
    Settings {
        key: p.lock_key().to_string(),
        ttl: p.ttl_ms_for(algorithm).map(Duration::from_millis),
        drift_factor: p.drift_factor,
        retry: Retry {
            delay: Duration::from_millis(p.retry_delay_ms),
            count: p.retry_count,
            max_delay: max_retry_delay(scenario),
        },
        fencing: p.fencing,
        wait_replicas: (p.redis.wait_replicas > 0).then_some((
            p.redis.wait_replicas,
            Duration::from_millis(p.redis.wait_timeout_ms()),
        )),
        replicas: p.redis.replicas,
        queue_timeout: Duration::from_millis(p.redis.queue_timeout_ms()),
        suspended_is_lost: p.zookeeper.suspended_is_lost,
        script: p.redis.script.clone(),
        variant: p.variant.clone(),
    }
}

/// The longest a client backs off after attempts that got no answer
/// ([`lockcheck_algorithms::retry`]): a connection manager's 30 s, but at most half the lease,
/// so that a waiter does not sit out a free lock for long after an outage ends (the liveness
/// check allows a lease of slack for retries), and never less than the retry delay.
pub fn max_retry_delay(scenario: &Scenario) -> Duration {
    let half_lease = Duration::from_millis(scenario.algorithm.lease_ms(&scenario.params) / 2);
    half_lease
        .min(MAX_BACKOFF)
        .max(Duration::from_millis(scenario.params.retry_delay_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{runnable, Algorithm};

    /// Every variant an algorithm lists is accepted by name and reaches its settings; any other
    /// name, and any name for an algorithm that lists none, is refused naming the known ones.
    #[test]
    fn a_variant_is_one_the_description_lists() {
        for &a in Algorithm::ALL {
            let d = a.description();
            let mut s = runnable(a);
            for v in d.variants {
                s.params.variant = Some(v.name.to_string());
                assert_eq!(s.validate(), Ok(()), "{}: {}", d.name, v.name);
                assert_eq!(settings(&s).variant.as_deref(), Some(v.name));
            }
            s.params.variant = Some("no-such-version".into());
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains("no-such-version"), "{e}");
            if d.variants.is_empty() {
                assert!(e.contains("has no library variants"), "{e}");
            } else {
                assert!(d.variants.iter().all(|v| e.contains(v.name)), "{e}");
            }
            // Not given, the default: nothing written, so older files read the same.
            s.params.variant = None;
            assert!(!serde_json::to_string(&s.params)
                .unwrap()
                .contains("variant"));
        }
    }
}
