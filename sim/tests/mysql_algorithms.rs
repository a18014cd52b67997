//! The MySQL locks (`mysql-row`, `mysql-unique`, `mysql-for-update-held`) against the simulated
//! MariaDB server, through the `Lock` trait, on the manual-clock executor of `common`; the
//! database's wall clock may be jumped ahead of the world's.
//! Every statement is one hop: the client task yields before the server sees it, so the
//! statements of concurrent transactions interleave. A statement the server blocks waits for
//! its reply like any other future; the executor moves the clock to the next timer or server
//! deadline when no task can make progress.

mod common;

use common::{block_on, ms, run_all, Clock, Manual, Task, EPOCH_MS};
use lockcheck_algorithms::mysql::{
    Attempt, MysqlForUpdateHeld, MysqlForUpdateHeldConfig, MysqlRow, MysqlRowConfig, MysqlUnique,
    MysqlUniqueConfig, Reply, Row, SqlStore, Statement,
};
use lockcheck_algorithms::{Env, Guard, Lock, StoreError};
use lockcheck_sim::mysql::model::{Applied, ConnId, MysqlConfig, MysqlModel, Notice, ServerTime};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

const RESOURCE: &str = "orders/42";

struct World {
    clock: Clock,
    /// How far the database's wall clock runs ahead of true time.
    db_ahead_ms: Cell<u64>,
    model: RefCell<MysqlModel>,
    /// Replies to statements that were blocked, until their client takes them.
    replies: RefCell<BTreeMap<ConnId, Reply>>,
    /// Connections the server closed after `wait_timeout`.
    closed: RefCell<Vec<ConnId>>,
    /// How many statements the server blocked.
    blocked: Cell<u32>,
}

impl Manual for World {
    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn advance(&self, to: u64) {
        World::advance(self, to);
    }
}

type Client = common::Client<World>;

impl World {
    fn new(config: MysqlConfig) -> Rc<Self> {
        Rc::new(World {
            clock: Clock::default(),
            db_ahead_ms: Cell::new(0),
            model: RefCell::new(MysqlModel::new(config, 0)),
            replies: RefCell::new(BTreeMap::new()),
            closed: RefCell::new(Vec::new()),
            blocked: Cell::new(0),
        })
    }

    fn time(&self) -> ServerTime {
        let now = self.clock.now.get();
        ServerTime {
            wall_ms: EPOCH_MS + now + self.db_ahead_ms.get(),
            mono_ms: now,
        }
    }

    fn deliver(&self, notices: Vec<Notice>) {
        for notice in notices {
            match notice {
                Notice::Reply { conn, reply } => {
                    self.replies.borrow_mut().insert(conn, reply);
                }
                Notice::Closed { conn } => self.closed.borrow_mut().push(conn),
            }
            self.clock.moved();
        }
    }

    fn tick(&self) {
        let mut notices = Vec::new();
        self.model.borrow_mut().tick(self.time(), &mut notices);
        self.deliver(notices);
    }

    /// Moves the clock towards `to`, stopping at every server deadline; stops early when the
    /// server had something for a client.
    fn advance(&self, to: u64) {
        let before = self.clock.progress.get();
        self.tick();
        while self.clock.now.get() < to && self.clock.progress.get() == before {
            let now = self.clock.now.get();
            let due = self.model.borrow().next_deadline_ms().filter(|&t| t > now);
            self.clock.now.set(to.min(due.unwrap_or(u64::MAX)));
            self.tick();
        }
    }

    fn apply(&self, conn: ConnId, statement: &Statement) -> Applied {
        self.clock.moved();
        let mut notices = Vec::new();
        let applied = self
            .model
            .borrow_mut()
            .apply(conn, statement, self.time(), &mut notices);
        self.deliver(notices);
        if applied == Applied::Blocked {
            self.blocked.set(self.blocked.get() + 1);
        }
        applied
    }

    fn row(&self) -> Option<Row> {
        self.model.borrow().row(RESOURCE).cloned()
    }
}

/// A client's connection: opened on first use, and again after the server closed it.
struct Store {
    world: Rc<World>,
    conn: Cell<Option<ConnId>>,
    /// The error codes this connection got.
    errors: RefCell<Vec<u16>>,
}

impl Store {
    fn new(world: &Rc<World>) -> Self {
        Store {
            world: world.clone(),
            conn: Cell::new(None),
            errors: RefCell::new(Vec::new()),
        }
    }
}

/// One network hop: pending once, then ready.
struct Hop<'a> {
    world: &'a World,
    done: bool,
}

impl Future for Hop<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.done {
            return Poll::Ready(());
        }
        self.done = true;
        self.world.clock.moved();
        Poll::Pending
    }
}

/// The reply to a blocked statement.
struct Delayed<'a> {
    world: &'a World,
    conn: ConnId,
}

impl Future for Delayed<'_> {
    type Output = Reply;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Reply> {
        match self.world.replies.borrow_mut().remove(&self.conn) {
            Some(reply) => Poll::Ready(reply),
            None => Poll::Pending,
        }
    }
}

impl SqlStore for Store {
    async fn execute(&self, statement: Statement) -> Result<Reply, StoreError> {
        Hop {
            world: &self.world,
            done: false,
        }
        .await;
        let conn = self.conn.get().unwrap_or_else(|| {
            let conn = self.world.model.borrow_mut().connect(self.world.time());
            self.conn.set(Some(conn));
            conn
        });
        let reply = match self.world.apply(conn, &statement) {
            Applied::Reply(reply) => reply,
            Applied::Blocked => {
                Delayed {
                    world: &self.world,
                    conn,
                }
                .await
            }
        };
        if let Err(e) = &reply {
            self.errors.borrow_mut().push(e.code());
            if e.is_disconnect() {
                self.conn.set(None);
            }
        }
        Ok(reply)
    }
}

const RETRY_MS: u64 = 50;

fn row_lock(world: &Rc<World>, locker: &str, ttl: Option<u64>) -> MysqlRow<Store> {
    let config = MysqlRowConfig {
        resource: RESOURCE.into(),
        ttl: ttl.map(ms),
        drift_factor: 0.01,
        retry_delay: ms(RETRY_MS),
        retry_count: None,
        max_retry_delay: ms(RETRY_MS),
    };
    MysqlRow::new(Store::new(world), config, locker.into())
}

fn unique_lock(world: &Rc<World>) -> MysqlUnique<Store> {
    let config = MysqlUniqueConfig {
        resource: RESOURCE.into(),
        retry_delay: ms(RETRY_MS),
        retry_count: None,
        max_retry_delay: ms(RETRY_MS),
    };
    MysqlUnique::new(Store::new(world), config)
}

fn held_lock(world: &Rc<World>) -> MysqlForUpdateHeld<Store> {
    let config = MysqlForUpdateHeldConfig {
        resource: RESOURCE.into(),
        retry_delay: ms(RETRY_MS),
        retry_count: None,
        max_retry_delay: ms(RETRY_MS),
    };
    MysqlForUpdateHeld::new(Store::new(world), config)
}

/// One hold: `(client, fence, from, to)` in world time.
type Hold = (usize, u64, u64, u64);

/// Acquires with `wait`, holds for `hold` ms, releases (which must find the lock still held).
async fn hold_once<L: Lock>(
    lock: &L,
    env: &Client,
    client: usize,
    hold: u64,
    log: &RefCell<Vec<Hold>>,
) {
    let guard = lock.acquire(env, ms(600_000)).await.unwrap().unwrap();
    let from = env.now();
    env.sleep(ms(hold)).await;
    let to = env.now();
    log.borrow_mut()
        .push((client, guard.fence.unwrap(), from, to));
    assert!(lock.release(env, &guard).await.unwrap());
}

fn assert_exclusive(log: &[Hold]) {
    let mut sorted = log.to_vec();
    sorted.sort_by_key(|&(_, _, from, _)| from);
    for pair in sorted.windows(2) {
        assert!(pair[0].3 <= pair[1].2, "overlapping holds: {pair:?}");
        assert!(pair[0].1 < pair[1].1, "fences not increasing: {pair:?}");
    }
}

/// Three clients, three holds each, started at once.
fn contend<L: Lock>(world: &Rc<World>, locks: &[L]) -> Vec<Hold> {
    let envs: Vec<_> = (0..locks.len())
        .map(|i| Client::new(world, i as u64))
        .collect();
    let log = RefCell::new(Vec::new());
    let tasks: Vec<Task<'_>> = (0..locks.len())
        .map(|i| {
            let (lock, env, log) = (&locks[i], &envs[i], &log);
            Box::pin(async move {
                for round in 0..3u64 {
                    hold_once(lock, env, i, 100 + 10 * i as u64, log).await;
                    env.sleep(ms(5 * round)).await;
                }
            }) as Task<'_>
        })
        .collect();
    run_all(world, tasks);
    let log = log.into_inner();
    assert_eq!(log.len(), 3 * locks.len());
    assert_exclusive(&log);
    log
}

#[test]
fn mysql_row_excludes_three_clients() {
    let world = World::new(MysqlConfig::default());
    let locks: Vec<_> = (0..3)
        .map(|i| row_lock(&world, &format!("client-{i}"), None))
        .collect();
    contend(&world, &locks);
    assert_eq!(world.row(), None);
    // Three transactions that all found the row missing: the inserts deadlocked, the server
    // rolled the victims back, and they tried again.
    let errors: Vec<u16> = locks
        .iter()
        .flat_map(|l| l.store().errors.borrow().clone())
        .collect();
    assert!(errors.contains(&1213), "{errors:?}");
    assert!(errors.iter().all(|code| *code == 1213), "{errors:?}");
}

#[test]
fn mysql_row_with_a_lease_excludes_three_clients() {
    let world = World::new(MysqlConfig::default());
    let locks: Vec<_> = (0..3)
        .map(|i| row_lock(&world, &format!("client-{i}"), Some(10_000)))
        .collect();
    contend(&world, &locks);
}

#[test]
fn mysql_unique_excludes_three_clients() {
    let world = World::new(MysqlConfig::default());
    let locks: Vec<_> = (0..3).map(|_| unique_lock(&world)).collect();
    contend(&world, &locks);
    assert_eq!(world.row(), None);
}

#[test]
fn mysql_for_update_held_excludes_three_clients() {
    let world = World::new(MysqlConfig::default());
    let locks: Vec<_> = (0..3).map(|_| held_lock(&world)).collect();
    let log = contend(&world, &locks);
    // Waiters queue on the server's row lock and get the row in turn, without retrying.
    assert!(world.blocked.get() > 0);
    let last = log.iter().max_by_key(|hold| hold.2).unwrap();
    let row = world.row().unwrap();
    assert_eq!(row.version, last.1);
}

#[test]
fn mysql_row_is_reentrant_and_the_server_counts_the_levels() {
    let world = World::new(MysqlConfig::default());
    let (a, b) = (row_lock(&world, "a", None), row_lock(&world, "b", None));
    let (env_a, env_b) = (Client::new(&world, 1), Client::new(&world, 2));
    let count = || world.row().map_or(0, |row| row.reentrant_cnt);
    let first = block_on(&world, a.acquire(&env_a, ms(0))).unwrap().unwrap();
    assert_eq!(count(), 1);
    let second = block_on(&world, a.acquire(&env_a, ms(0))).unwrap().unwrap();
    assert_eq!(count(), 2);
    assert_eq!(first.token, second.token);
    // Every grant draws a new token, a reentrant one too.
    assert!(second.fence > first.fence);
    assert_eq!(world.row().unwrap().version, second.fence.unwrap());
    assert!(block_on(&world, a.release(&env_a, &second)).unwrap());
    assert_eq!(count(), 1);
    assert_eq!(block_on(&world, b.acquire(&env_b, ms(0))).unwrap(), None);
    assert!(block_on(&world, a.release(&env_a, &first)).unwrap());
    assert_eq!(count(), 0);
    assert_eq!(world.row(), None);
    // A release too many finds no row of ours.
    assert!(!block_on(&world, a.release(&env_a, &first)).unwrap());
    let third = block_on(&world, b.acquire(&env_b, ms(0))).unwrap().unwrap();
    assert!(third.fence > second.fence);
    // Not ours to release.
    assert!(!block_on(&world, a.release(&env_a, &third)).unwrap());
    assert_eq!(count(), 1);
}

#[test]
fn mysql_row_with_a_lease_is_taken_over_when_the_databases_clock_jumps() {
    let world = World::new(MysqlConfig::default());
    let (a, b) = (
        row_lock(&world, "a", Some(10_000)),
        row_lock(&world, "b", Some(10_000)),
    );
    let (env_a, env_b) = (Client::new(&world, 1), Client::new(&world, 2));
    let guard_a = block_on(&world, a.acquire(&env_a, ms(0))).unwrap().unwrap();
    assert_eq!(guard_a.valid_until, guard_a.acquired_at + ms(10_000 - 102));
    // While the lease runs by the database's clock, B cannot have it.
    assert_eq!(
        block_on(&world, b.acquire(&env_b, ms(1_000))).unwrap(),
        None
    );
    // The database's clock jumps 20 s ahead: by ITS clock the lease is over.
    world.db_ahead_ms.set(20_000);
    let guard_b = block_on(&world, b.acquire(&env_b, ms(1_000)))
        .unwrap()
        .unwrap();
    // UNSAFE, as expected of a lease: A still believes it holds the lock, and so does B.
    let now = ms(world.clock.now.get());
    assert!(
        guard_a.validity_left(now) > ms(8_000),
        "{guard_a:?} at {now:?}"
    );
    assert!(guard_b.validity_left(now) > ms(9_000));
    // Only fencing tells them apart: B's token is higher.
    assert!(guard_b.fence > guard_a.fence);
    let row = world.row().unwrap();
    assert_eq!((row.locker.as_str(), row.reentrant_cnt), ("b", 1));
    assert_eq!(Some(row.version), guard_b.fence);
    // A's release finds B's row and leaves it alone.
    assert!(!block_on(&world, a.release(&env_a, &guard_a)).unwrap());
    assert!(block_on(&world, b.release(&env_b, &guard_b)).unwrap());
    assert_eq!(world.row(), None);
}

#[test]
fn mysql_row_without_a_lease_stays_held_whatever_the_databases_clock_does() {
    let world = World::new(MysqlConfig::default());
    let (a, b) = (row_lock(&world, "a", None), row_lock(&world, "b", None));
    let (env_a, env_b) = (Client::new(&world, 1), Client::new(&world, 2));
    let guard_a = block_on(&world, a.acquire(&env_a, ms(0))).unwrap().unwrap();
    assert!(guard_a.valid_until > ms(1_000_000_000));
    world.db_ahead_ms.set(24 * 3_600_000);
    assert_eq!(
        block_on(&world, b.acquire(&env_b, ms(2_000))).unwrap(),
        None
    );
    assert!(env_b.attempts().iter().all(|acquired| !acquired));
    assert_eq!(world.row().unwrap().locker, "a");
}

#[test]
fn mysql_for_update_held_loses_the_row_to_the_next_waiter_when_the_holder_idles_past_wait_timeout()
{
    let world = World::new(MysqlConfig {
        wait_timeout_ms: 5_000,
        lock_wait_timeout_ms: 50_000,
        ..MysqlConfig::default()
    });
    let (a, b) = (held_lock(&world), held_lock(&world));
    let (env_a, env_b) = (Client::new(&world, 1), Client::new(&world, 2));
    let got = RefCell::new(None);
    let released = Cell::new(None);
    let holder = Box::pin(async {
        let guard = a.acquire(&env_a, ms(0)).await.unwrap().unwrap();
        // Working outside the database (or paused): nothing reaches the server for 8 s.
        env_a.sleep(ms(8_000)).await;
        released.set(Some((
            guard.clone(),
            a.release(&env_a, &guard).await.unwrap(),
        )));
    }) as Task<'_>;
    let waiter = Box::pin(async {
        env_b.sleep(ms(100)).await;
        let guard = b.acquire(&env_b, ms(60_000)).await.unwrap().unwrap();
        *got.borrow_mut() = Some((world.clock.now.get(), guard.clone()));
        // B works for less than wait_timeout: it keeps the row until its commit.
        env_b.sleep(ms(4_000)).await;
        assert!(b.release(&env_b, &guard).await.unwrap());
    }) as Task<'_>;
    run_all(&world, vec![holder, waiter]);
    let (at, guard_b) = got.into_inner().unwrap();
    let (guard_a, a_still_held) = released.take().unwrap();
    // A's last statement ended at 0 + its hops; the server closed its connection 5 s later and
    // handed the row to B, whose SELECT had been waiting since 100.
    assert!((5_000..5_100).contains(&at), "{at}");
    assert_eq!(world.closed.borrow().len(), 1);
    assert_eq!(env_b.attempts(), [true]);
    // A believed it held the lock until 8000; its commit then found the connection gone.
    assert!(guard_a.valid_until > ms(8_000));
    assert!(!a_still_held);
    assert_eq!(a.store().errors.borrow().as_slice(), [2006]);
    assert!(guard_b.fence > guard_a.fence);
}

#[test]
fn mysql_for_update_held_keeps_the_row_through_a_pause_shorter_than_wait_timeout() {
    let world = World::new(MysqlConfig {
        wait_timeout_ms: 5_000,
        lock_wait_timeout_ms: 50_000,
        ..MysqlConfig::default()
    });
    let (a, b) = (held_lock(&world), held_lock(&world));
    let (env_a, env_b) = (Client::new(&world, 1), Client::new(&world, 2));
    let log = RefCell::new(Vec::new());
    let holder = Box::pin(async {
        let guard = a.acquire(&env_a, ms(0)).await.unwrap().unwrap();
        let from = world.clock.now.get();
        env_a.sleep(ms(3_000)).await;
        log.borrow_mut()
            .push((0, guard.fence.unwrap(), from, world.clock.now.get()));
        assert!(a.release(&env_a, &guard).await.unwrap());
    }) as Task<'_>;
    let waiter = Box::pin(async {
        env_b.sleep(ms(100)).await;
        hold_once(&b, &env_b, 1, 100, &log).await;
    }) as Task<'_>;
    run_all(&world, vec![holder, waiter]);
    assert!(world.closed.borrow().is_empty());
    assert_exclusive(&log.into_inner());
}

#[test]
fn mysql_for_update_held_tries_again_after_a_lock_wait_timeout() {
    let world = World::new(MysqlConfig {
        lock_wait_timeout_ms: 1_000,
        ..MysqlConfig::default()
    });
    let (a, b) = (held_lock(&world), held_lock(&world));
    let (env_a, env_b) = (Client::new(&world, 1), Client::new(&world, 2));
    let got = Cell::new(None);
    let holder = Box::pin(async {
        let guard = a.acquire(&env_a, ms(0)).await.unwrap().unwrap();
        env_a.sleep(ms(2_500)).await;
        assert!(a.release(&env_a, &guard).await.unwrap());
    }) as Task<'_>;
    let waiter = Box::pin(async {
        env_b.sleep(ms(10)).await;
        let guard = b.acquire(&env_b, ms(60_000)).await.unwrap().unwrap();
        got.set(Some(world.clock.now.get()));
        assert!(b.release(&env_b, &guard).await.unwrap());
    }) as Task<'_>;
    run_all(&world, vec![holder, waiter]);
    assert!((2_500..2_520).contains(&got.get().unwrap()), "{got:?}");
    // Two lock waits timed out (1205), each rolled back and tried again; the third got the row.
    assert_eq!(env_b.attempts(), [false, false, true]);
    assert_eq!(b.store().errors.borrow().as_slice(), [1205, 1205]);
}

#[test]
fn mysql_for_update_held_is_not_reentrant() {
    let world = World::new(MysqlConfig::default());
    let a = held_lock(&world);
    let env = Client::new(&world, 1);
    let guard = block_on(&world, a.acquire(&env, ms(0))).unwrap().unwrap();
    assert_eq!(
        block_on(&world, a.try_acquire(&env)).unwrap(),
        Attempt::Busy
    );
    // The open transaction was left alone: the lock is still held and released once.
    assert!(a.is_held());
    assert!(block_on(&world, a.release(&env, &guard)).unwrap());
    assert!(!block_on(&world, a.release(&env, &guard)).unwrap());
}

#[test]
fn mysql_unique_never_waits_on_the_server() {
    let world = World::new(MysqlConfig::default());
    let (a, b) = (unique_lock(&world), unique_lock(&world));
    let (env_a, env_b) = (Client::new(&world, 1), Client::new(&world, 2));
    let guard_a = block_on(&world, a.acquire(&env_a, ms(0))).unwrap().unwrap();
    assert_eq!(world.row().unwrap().locker, guard_a.token);
    assert_eq!(Some(world.row().unwrap().version), guard_a.fence);
    // Busy at once: the insert fails with 1062, nothing waits.
    let before = world.clock.now.get();
    assert_eq!(
        block_on(&world, b.try_acquire(&env_b)).unwrap(),
        Attempt::Busy
    );
    assert_eq!(world.clock.now.get(), before);
    // A blocking acquire is the client's own retry loop: attempts every 25-50 ms, then give up.
    assert_eq!(block_on(&world, b.acquire(&env_b, ms(300))).unwrap(), None);
    let attempts = env_b.attempts();
    assert!(attempts.len() >= 6, "{attempts:?}");
    assert!(attempts.iter().all(|acquired| !acquired));
    assert!(b.store().errors.borrow().iter().all(|code| *code == 1062));
    assert_eq!(world.blocked.get(), 0);
    // Not reentrant: the holder's own second insert is a duplicate too.
    assert_eq!(
        block_on(&world, a.try_acquire(&env_a)).unwrap(),
        Attempt::Busy
    );
    // Only the holder's token deletes the row.
    let forged = Guard {
        token: "not-the-holder".into(),
        ..guard_a.clone()
    };
    assert!(!block_on(&world, b.release(&env_b, &forged)).unwrap());
    assert!(block_on(&world, a.release(&env_a, &guard_a)).unwrap());
    let guard_b = block_on(&world, b.acquire(&env_b, ms(0))).unwrap().unwrap();
    assert!(guard_b.fence > guard_a.fence);
}

#[test]
/// Names with quotes and wildcards are no different to the model, which takes typed statements
/// with bound values: that they are separate locks on a real server is compared in
/// `real/tests/mysql_conformance.rs` (its awkward names). Here: the column's length.
fn a_resource_name_of_255_characters_is_a_lock_and_256_are_refused() {
    let world = World::new(MysqlConfig::default());
    let long = MysqlRow::new(
        Store::new(&world),
        MysqlRowConfig {
            resource: "n".repeat(255),
            ttl: None,
            drift_factor: 0.01,
            retry_delay: ms(RETRY_MS),
            retry_count: None,
            max_retry_delay: ms(RETRY_MS),
        },
        "holder of the long one".into(),
    );
    let env = Client::new(&world, 99);
    assert!(block_on(&world, long.acquire(&env, ms(0)))
        .unwrap()
        .is_some());
    let left: Vec<String> = world
        .model
        .borrow()
        .snapshot()
        .rows()
        .map(|row| row.resource_name.clone())
        .collect();
    assert_eq!(left, ["n".repeat(255)]);
    // One character more: the server refuses the row (1406), and the acquire says so.
    let too_long = MysqlRow::new(
        Store::new(&world),
        MysqlRowConfig {
            resource: "n".repeat(256),
            ttl: None,
            drift_factor: 0.01,
            retry_delay: ms(RETRY_MS),
            retry_count: None,
            max_retry_delay: ms(RETRY_MS),
        },
        "x".into(),
    );
    let refused = block_on(&world, too_long.acquire(&env, ms(0)));
    assert!(
        matches!(&refused, Err(lockcheck_algorithms::LockError::Server(e)) if e.contains("1406")),
        "{refused:?}"
    );
    // The refused attempt rolled its transaction back.
    assert!(!world
        .model
        .borrow()
        .in_transaction(too_long.store().conn.get().unwrap()));
}
