//! What the tests share: [`search`] helpers, and a tiny single-threaded executor on a manual
//! clock, for the tests that drive a lock algorithm against a pure server model without madsim
//! (`redis_fair_scripts`, `zk_algorithms`, `mysql_algorithms`).
//!
//! One world clock (ms) drives the model and every client. The only things that wait are
//! `Env::sleep` and the world's own futures (replies, notices), so a run is a plain loop: poll
//! every task until none makes progress, then move the clock to the earliest sleep's end (the
//! world may stop earlier, at a deadline of its own).

#![allow(dead_code)] // each test binary uses its own part

// The search's own test helper: the backend tests pin a model's verdicts by the searches that
// find them, with the same options and expectations as the search's tests.
#[path = "../../../search/tests/common/search.rs"]
pub mod search;

/// The scenario file `name` under `sim/tests/scenarios/` (a story's schedule, shared with the
/// real-server tests).
pub fn scenario_file(name: &str) -> lockcheck_core::Scenario {
    let path = format!("{}/tests/scenarios/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    lockcheck_core::Scenario::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The first seed in `0..100` in which `client` is the first to acquire the lock in `s`. Stories
/// that need a particular holder (the one a fault is aimed at) pick their seed with it, so that a
/// change of schedules (which client asks first is the seed's draw) does not quietly retell the
/// story with another holder.
pub fn seed_where_first_holder_is(s: &lockcheck_core::Scenario, client: &str) -> u64 {
    (0..100)
        .find(|&seed| {
            let mut s = s.clone();
            s.seed = seed;
            first_holder(&lockcheck_sim::run(&s).history.entries) == Some(client)
        })
        .unwrap_or_else(|| panic!("no seed in 0..100 in which {client} acquires first"))
}

/// The client that took the lock first in `history`.
pub fn first_holder(history: &[lockcheck_core::history::Entry]) -> Option<&str> {
    use lockcheck_core::history::{Kind, Op};
    history
        .iter()
        .find(|e| e.kind == Kind::Ok && matches!(e.op, Op::Acquire { .. }))
        .map(|e| e.node.as_str())
}

use lockcheck_algorithms::{Env, LockEvent};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The clients' wall clock at time 0.
pub const EPOCH_MS: u64 = 1_700_000_000_000;
/// A run still going after this much simulated time is stuck.
const GIVE_UP_MS: u64 = 10_000_000;

/// The world's clock and what the executor needs to know about the tasks.
#[derive(Default)]
pub struct Clock {
    /// Now, in ms.
    pub now: Cell<u64>,
    /// Ends of the sleeps pending in this round.
    pub timers: RefCell<Vec<u64>>,
    /// Moves whenever something happened that may let a task go on (a request ran, a notice
    /// was queued): the executor polls again before it moves the clock.
    pub progress: Cell<u64>,
}

impl Clock {
    /// Counts progress.
    pub fn moved(&self) {
        self.progress.set(self.progress.get() + 1);
    }
}

/// A world driven by the executor.
pub trait Manual {
    /// Its clock.
    fn clock(&self) -> &Clock;

    /// Moves the clock towards `to` (a world may stop earlier, at something due of its own).
    fn advance(&self, to: u64) {
        self.clock().now.set(to);
    }

    /// How far the clock moves when no task can go on and none sleeps (tasks waiting only on
    /// the world's own timeouts).
    fn idle_step(&self) -> u64 {
        1_000
    }
}

/// Tests hold their world in an `Rc`.
impl<W: Manual> Manual for Rc<W> {
    fn clock(&self) -> &Clock {
        (**self).clock()
    }

    fn advance(&self, to: u64) {
        (**self).advance(to)
    }

    fn idle_step(&self) -> u64 {
        (**self).idle_step()
    }
}

/// A sleep until the world's clock reads `until`.
pub struct Sleep<W> {
    world: Rc<W>,
    until: u64,
}

impl<W: Manual> Future for Sleep<W> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let clock = self.world.clock();
        if clock.now.get() >= self.until {
            return Poll::Ready(());
        }
        clock.timers.borrow_mut().push(self.until);
        Poll::Pending
    }
}

/// A client's environment on the world's clock, with a seeded generator and the attempts it
/// reported.
pub struct Client<W> {
    /// The world.
    pub world: Rc<W>,
    rng: Cell<u64>,
    /// The events the algorithm reported, in order.
    pub events: RefCell<Vec<LockEvent>>,
}

impl<W: Manual> Client<W> {
    /// A client of `world` whose generator starts at `seed`.
    pub fn new(world: &Rc<W>, seed: u64) -> Self {
        Client {
            world: world.clone(),
            rng: Cell::new(seed),
            events: RefCell::new(Vec::new()),
        }
    }

    /// Whether each attempt the algorithm reported acquired the lock.
    pub fn attempts(&self) -> Vec<bool> {
        self.events
            .borrow()
            .iter()
            .map(|LockEvent::Attempt { acquired, .. }| *acquired)
            .collect()
    }

    /// The world's clock now.
    pub fn now(&self) -> u64 {
        self.world.clock().now.get()
    }
}

impl<W: Manual> Env for Client<W> {
    fn wall_now(&self) -> Duration {
        Duration::from_millis(EPOCH_MS + self.now())
    }

    fn mono_now(&self) -> Duration {
        Duration::from_millis(self.now())
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> {
        Sleep {
            world: self.world.clone(),
            until: self
                .now()
                .saturating_add(duration.as_nanos().div_ceil(1_000_000) as u64),
        }
    }

    fn random_u64(&self) -> u64 {
        // splitmix64: distinct tokens and jitter, the same every run.
        let x = self.rng.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.rng.set(x);
        let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    fn observe(&self, event: LockEvent) {
        self.events.borrow_mut().push(event);
    }
}

/// A task of a test.
pub type Task<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Runs the tasks to completion on the world's clock.
pub fn run_all<W: Manual>(world: &W, mut tasks: Vec<Task<'_>>) {
    let mut cx = Context::from_waker(Waker::noop());
    let clock = world.clock();
    loop {
        let before = clock.progress.get();
        clock.timers.borrow_mut().clear();
        tasks.retain_mut(|task| task.as_mut().poll(&mut cx).is_pending());
        if tasks.is_empty() {
            return;
        }
        if clock.progress.get() != before {
            continue;
        }
        let now = clock.now.get();
        assert!(now < GIVE_UP_MS, "stuck at {now} ms");
        let next = clock.timers.borrow().iter().copied().min();
        world.advance(next.unwrap_or(now + world.idle_step()));
    }
}

/// Runs one future to completion on the world's clock.
pub fn block_on<W: Manual, T>(world: &W, future: impl Future<Output = T>) -> T {
    let out = RefCell::new(None);
    run_all(
        world,
        vec![Box::pin(async {
            *out.borrow_mut() = Some(future.await);
        })],
    );
    out.into_inner().unwrap()
}

/// `n` ms.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Three clients, one section each of 3 s; client-0 goes first (the others are held back
/// 100 ms) and is paused for 12 s at 500 ms while it holds a 10 s lease: client-1 takes the
/// expired lock, and client-0, waking up, goes on as if it still held it. The story of a
/// paused holder that redis_plain_del.rs and redis_script.rs tell.
pub fn paused_holder(algorithm: lockcheck_core::Algorithm) -> lockcheck_core::Scenario {
    let mut s = lockcheck_core::Scenario::new(algorithm);
    s.clients = 3;
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 3_000;
    s.duration_ms = 30_000;
    s.faults = vec![
        hold_back("client-1"),
        hold_back("client-2"),
        lockcheck_core::scenario::Fault::Pause {
            at_ms: 500,
            node: "client-0".into(),
            for_ms: 12_000,
        },
    ];
    s
}

/// A 100 ms pause of `node` at the start: it lets another client acquire first.
pub fn hold_back(node: &str) -> lockcheck_core::scenario::Fault {
    lockcheck_core::scenario::Fault::Pause {
        at_ms: 0,
        node: node.into(),
        for_ms: 100,
    }
}

/// A Redisson lock's owner `client`: its count after each write of its hash field, with the
/// key's deletions as `None` (the lock's key only: an unlock latch is a key of its own).
pub fn counts(history: &[lockcheck_core::history::Entry], client: &str) -> Vec<Option<i64>> {
    history
        .iter()
        .filter_map(|e| match &e.op {
            lockcheck_core::history::Op::Key {
                key,
                change: lockcheck_core::history::KeyChange::FieldSet,
                value: Some(v),
                by: Some(b),
                ..
            } if b == client && key == "lock" => Some(Some(v.parse().unwrap())),
            lockcheck_core::history::Op::Key {
                key,
                change: lockcheck_core::history::KeyChange::Deleted,
                by: Some(b),
                ..
            } if b == client && key == "lock" => Some(None),
            _ => None,
        })
        .collect()
}
