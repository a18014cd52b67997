//! Conformance of the simulated MariaDB (`lockcheck_sim::mysql::model::MysqlModel`) with a real
//! one: random sequences of the lock protocol's typed statements run through the model and
//! through a real MariaDB server, on two connections, and every reply is compared — rows (every
//! column), affected counts, fence values, error codes and what the errors name — as is which
//! statements wait for a row lock, and what a waiting statement finally gets when the other
//! connection lets go.
//!
//! # How the two are kept comparable
//!
//! - **Clocks.** The model's `NOW(3)` is the wall clock passed into it; the real server's is
//!   pinned to the same value before each statement (`SET timestamp`, per session), so
//!   `create_time`, `update_time` and a take-over's expiry test are compared exactly, and
//!   "an `UPDATE` in the same millisecond that changes nothing affects 0 rows" happens in both at
//!   the same statements. Generated waits move that wall clock only; the server's own timers
//!   (`innodb_lock_wait_timeout`, `wait_timeout`) are an hour long in the 1,000 random sequences,
//!   so they never fire there. They fire in the timed sequences (below), and
//!   [`a_lock_wait_timeout_fails_the_statement_and_keeps_the_transaction`] and
//!   [`an_idle_connection_is_closed_after_wait_timeout_and_its_lock_handed_over`] check them
//!   step by step with real seconds.
//! - **Counters.** The table is emptied between sequences, not recreated, so the real
//!   auto-increment counter and the fence sequence go on where the last sequence left them:
//!   real ids and fences are compared as offsets from their values at the start of the sequence.
//! - **Blocking, deterministically.** Statements run one at a time. When the model says a
//!   statement waits for a lock, the real statement is sent in a task of its own and the harness
//!   waits until the server reports that connection's transaction in `LOCK WAIT`
//!   (`information_schema.INNODB_TRX`) before it sends anything else, so that the server sees
//!   lock requests in the model's order (a deadlock's victim depends on it). When the model says
//!   a statement runs, its real reply is awaited; a real statement that waits instead is a
//!   divergence. A waiting statement is done when the model hands it its reply (the other
//!   connection committed, rolled back, or was picked as a deadlock victim); a real one that
//!   finishes while the model still has it waiting is a divergence. Generated statements for a
//!   connection that waits are skipped (a client cannot send while it waits).
//! - **Deadlocks.** A statement that closes a cycle of waits gets 1213 in both, or, if the model
//!   picks the other transaction of the cycle as the victim (the lighter one, as InnoDB does),
//!   the other's waiting statement gets it and this one goes on; the test fails, saying so, when
//!   InnoDB chose differently.
//! - **Lock bypass.** MariaDB (10.6.20 and later) lets a transaction that holds a shared lock on
//!   the row take the exclusive lock past another's waiting exclusive request. When that closes
//!   a cycle, InnoDB mostly reports the deadlock (as the model does, rolling back the lighter
//!   transaction), but now and then grants the request by bypassing instead, leaving the other
//!   waiting: the same sequence gives either, from run to run. A sequence where the model's
//!   victim still waits on the real server once the other statement has its reply ends there,
//!   without failing; every other deadlock is compared.
//! - **Purge.** The model purges a deleted row at commit; InnoDB later, in the background, and
//!   until then a locking read of the name locks the delete-marked record (so a second reader
//!   waits) where the model grants a compatible gap lock. After every step that committed a
//!   delete the harness waits for InnoDB's purge to finish (its history list empty), so the real
//!   server is in the state the model assumes. Purge cannot finish while a transaction that has
//!   written is open; a sequence that commits a delete then ends there, without failing.
//! - A sequence that ends early is not counted: proptest draws another in its place, so the
//!   1,000 sequences are 1,000 compared to their end (the early ones are printed apart).
//!   The window before purge is a documented simplification of the model (see its module doc),
//!   not tested here.
//!
//! # What is generated
//!
//! Sequences of up to 24 steps: each statement kind of the protocol (`START TRANSACTION`,
//! `COMMIT`, `ROLLBACK`, `SELECT … FOR UPDATE`, `NEXT VALUE FOR`, `INSERT`, `UPDATE` of one's own
//! row, claim, take-over with a TTL, `DELETE` with and without the locker) with values drawn
//! from small sets so that they collide (counts and versions 0–3, lockers `a`, `b`, `A`, empty,
//! 256 characters), and waits of the clock (0 ms to an hour, around the TTLs). Two kinds:
//! - **contended**: both connections, one resource name per sequence, so that transactions
//!   contend for its record and gap locks, including the gap-lock + insert deadlock of seed 000;
//! - **solo**: one connection, up to three names per sequence from a set of awkward ones (case
//!   and trailing-space variants, which the table's binary collation keeps apart, quotes,
//!   backslashes, `%`, `_`, non-ASCII, empty, 255 and 256 characters).
//!
//! Contended sequences use one name because the model's gap is the name itself, where InnoDB's
//! is the interval between neighbouring index records (a documented simplification: lockcheck's
//! table has one row); with one name the two coincide.
//!
//! At the end of each sequence, open transactions are rolled back as ordinary compared steps
//! (which also settles a statement left waiting).
//!
//! # Timed sequences
//!
//! [`random_statement_sequences_with_short_server_timers_agree_with_the_model`] runs 1,000 more
//! sequences (`LOCKCHECK_CONFORMANCE_TIMED_CASES` says otherwise) in which the timers fire: each
//! connection sets `SET SESSION innodb_lock_wait_timeout = 1, wait_timeout = 2` (the model has
//! the same), and real time passes. MariaDB counts these timers in whole seconds (1 s at least),
//! so every timer a sequence lets fire costs it a second or two, spent waiting: the sequences
//! run on 12 servers side by side (`LOCKCHECK_CONFORMANCE_TIMED_WORKERS`), each worker drawing
//! its share from its own stream of the seed, in about three minutes in all. They are contended sequences that start with the row inserted, with the
//! statements biased towards transactions that lock it, chunks where one connection takes the
//! row in a transaction and the other asks for it (then, half the time, a sleep to just before
//! or just past the waiter's timer), and sleeps: 50, 300 or 700 ms, or to just before or just past
//! the model's next timer. The model's monotonic clock is the real elapsed time since the
//! sequence started (read before anything of it reached the server, so every real timer starts
//! no earlier than the model's), and its wall clock follows, pinned on the server as above.
//!
//! Compared, besides every reply: a lock wait that outlasts `innodb_lock_wait_timeout` fails with
//! 1205 in both and its transaction stays open; a connection idle for `wait_timeout` is closed
//! by both (the real one is awaited until it is gone from the server's process list), its
//! transaction rolled back and a statement waiting for its lock answered; the client then
//! connects again in both. Tolerance: before each step, and after each sleep, the harness waits
//! until no timer of the model is due within 100 ms (`TIMER_MARGIN_MS`) of the clock, and lets
//! the model fire those behind it; so every comparison is made at least 100 ms before a timer or
//! after it, and a real timer may fire up to 100 ms after the model's. A step that ran past a
//! timer pending when it started (it outlasted the margin), or a lock wait's timer due within
//! 200 ms of the other connection's idle one (which fires first is then the real server's
//! accident), ends the sequence without failing it; such sequences are counted apart, and
//! proptest draws others in their place.
//!
//! The number of sequences is 1000 unless `LOCKCHECK_CONFORMANCE_CASES` says otherwise; the seed
//! is fixed (`LOCKCHECK_CONFORMANCE_SEED` picks another) and printed, so a failure reruns. A
//! divergence fails the test with the minimal sequence proptest shrank it to and both replies at
//! every step.
//!
//! Without MariaDB installed the tests print how to install it and pass, except under
//! `CI=true`.

use lockcheck_algorithms::mysql::{Outcome, Reply, SqlError, SqlStore, Statement};
use lockcheck_algorithms::StoreError;
use lockcheck_core::scenario::FlushPolicy;
use lockcheck_real::gate::PauseGate;
use lockcheck_real::launcher::{Launcher, MariaDb};
use lockcheck_real::mysql_store::{RealMysql, Session};
use lockcheck_sim::mysql::model::{Applied, ConnId, MysqlConfig, MysqlModel, Notice, ServerTime};
use mysql_async::prelude::Queryable;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::cell::{Cell, RefCell};
use std::fmt::Write as _;

use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The wall clock both servers start each sequence at: 2024-01-01T00:00:00Z.
const BASE_WALL_MS: u64 = 1_704_067_200_000;

/// A timer the random sequences must never reach: an hour.
const NEVER_S: u64 = 3_600;

/// How long a reply the model says is due may take to come from the real server before the
/// harness calls it missing. Generous: a loaded machine is slow, not wrong.
const REPLY_WITHIN: Duration = Duration::from_secs(10);

/// Sequences run unless `LOCKCHECK_CONFORMANCE_CASES` says otherwise.
const DEFAULT_CASES: u32 = 1_000;

/// The generator's seed unless `LOCKCHECK_CONFORMANCE_SEED` says otherwise.
const DEFAULT_SEED: u64 = 20_240_101;

mod common;

use common::one_at_a_time;

/// Whether MariaDB is installed; see [`common::installed`].
fn mariadb_installed() -> bool {
    use lockcheck_core::scenario::{Algorithm, Scenario};
    let kind = MariaDb::of(&Scenario::new(Algorithm::MysqlRow), "mysql-0")
        .expect("the default settings are whole seconds");
    common::installed(&kind)
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a number")),
        Err(_) => default,
    }
}

// ---------------------------------------------------------------------------------------------
// What is generated.

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// Connection `conn` (0 or 1) sends `statement`.
    Run { conn: usize, statement: Statement },
    /// The servers' wall clock moves on by `ms` (what `NOW(3)` returns; no timer fires).
    Wait { ms: u64 },
    /// Timed sequences only: real time passes (see [`Sleep`]).
    Sleep(Sleep),
}

/// How long a [`Step::Sleep`] of a timed sequence lasts.
#[derive(Clone, Copy, Debug)]
enum Sleep {
    /// This many ms (pushed past a timer it would end near, see [`TIMER_MARGIN_MS`]).
    For(u64),
    /// Until shortly before the model's next timer: the step after it runs just before.
    BeforeNextTimer,
    /// Until just past the model's next timer's margin: the step after it runs just after.
    PastNextTimer,
}

/// A generated sequence.
#[derive(Clone, Debug)]
struct Sequence {
    steps: Vec<Step>,
}

const AWKWARD_NAMES: &[&str] = &["lock", "LOCK", "lock ", "it's", "a\\b", "%_", "ünï", ""];

fn name_strategy() -> BoxedStrategy<String> {
    prop_oneof![
        6 => proptest::sample::select(AWKWARD_NAMES).prop_map(str::to_owned),
        1 => Just("n".repeat(255)),
        1 => Just("n".repeat(256)),
    ]
    .boxed()
}

fn locker_strategy() -> BoxedStrategy<String> {
    prop_oneof![
        4 => proptest::sample::select(&["a", "b", "A", ""][..]).prop_map(str::to_owned),
        1 => Just("l".repeat(256)),
    ]
    .boxed()
}

fn statement_strategy(names: Vec<String>) -> BoxedStrategy<Statement> {
    let name = proptest::sample::select(names);
    let small = 0u32..4;
    let version = 0u64..4;
    let ttl = proptest::sample::select(&[0u64, 1, 500, 1_000, 60_000][..]);
    prop_oneof![
        3 => Just(Statement::Begin),
        2 => Just(Statement::Commit),
        2 => Just(Statement::Rollback),
        1 => Just(Statement::NextFence),
        4 => name.clone().prop_map(|resource| Statement::SelectForUpdate { resource }),
        4 => (name.clone(), locker_strategy(), small.clone(), version.clone()).prop_map(
            |(resource, locker, count, version)| Statement::Insert { resource, locker, count, version }
        ),
        2 => (name.clone(), locker_strategy(), small, version.clone()).prop_map(
            |(resource, locker, count, version)| Statement::Update { resource, locker, count, version }
        ),
        2 => (name.clone(), locker_strategy(), version.clone()).prop_map(
            |(resource, locker, version)| Statement::Claim { resource, locker, version }
        ),
        2 => (name.clone(), locker_strategy(), version, ttl).prop_map(
            |(resource, locker, version, ttl_ms)| Statement::TakeOver { resource, locker, version, ttl_ms }
        ),
        2 => (name, proptest::option::of(locker_strategy())).prop_map(
            |(resource, locker)| Statement::Delete { resource, locker }
        ),
    ]
    .boxed()
}

fn step_strategy(names: Vec<String>, connections: usize) -> BoxedStrategy<Step> {
    let waits =
        proptest::sample::select(&[0u64, 1, 499, 500, 501, 999, 1_000, 1_001, 3_600_000][..]);
    prop_oneof![
        10 => (0..connections, statement_strategy(names))
            .prop_map(|(conn, statement)| Step::Run { conn, statement }),
        1 => waits.prop_map(|ms| Step::Wait { ms }),
    ]
    .boxed()
}

/// Timed sequences: contended (two connections, one name), with real sleeps around the short
/// timers instead of moves of the wall clock alone.
fn timed_sequence_strategy() -> impl Strategy<Value = Sequence> {
    let sleep = prop_oneof![
        2 => proptest::sample::select(&[50u64, 300, 700][..]).prop_map(Sleep::For),
        1 => Just(Sleep::BeforeNextTimer),
        1 => Just(Sleep::PastNextTimer),
    ];
    name_strategy()
        .prop_flat_map(move |name| {
            // Biased towards transactions that lock the row, so that statements wait for
            // each other long enough for the lock wait's timer to fire.
            let statement = prop_oneof![
                3 => Just(Statement::Begin),
                4 => Just(Statement::SelectForUpdate { resource: name.clone() }),
                6 => statement_strategy(vec![name.clone()]),
            ];
            // One connection takes the row in a transaction and the other asks for it: it
            // waits, until a commit, a rollback, its lock wait's timeout or the holder's idle
            // one ends the wait.
            let select = Statement::SelectForUpdate {
                resource: name.clone(),
            };
            // Half the time the test then sleeps: to just before or past the next timer, the
            // waiter's.
            let then = proptest::option::of(proptest::sample::select(
                &[Sleep::BeforeNextTimer, Sleep::PastNextTimer][..],
            ));
            let contend = (0..2usize, then).prop_map(move |(a, then)| {
                let mut steps = vec![
                    Step::Run {
                        conn: a,
                        statement: Statement::Begin,
                    },
                    Step::Run {
                        conn: a,
                        statement: select.clone(),
                    },
                    Step::Run {
                        conn: 1 - a,
                        statement: select.clone(),
                    },
                ];
                steps.extend(then.map(Step::Sleep));
                steps
            });
            let step = prop_oneof![
                8 => (0..2usize, statement)
                    .prop_map(|(conn, statement)| vec![Step::Run { conn, statement }]),
                2 => sleep.clone().prop_map(|sleep| vec![Step::Sleep(sleep)]),
                2 => contend,
            ];
            // The row is there from the start (a locking read of a missing one takes a gap
            // lock, which waits for nobody).
            let prelude = Step::Run {
                conn: 0,
                statement: Statement::Insert {
                    resource: name.clone(),
                    locker: "a".into(),
                    count: 1,
                    version: 1,
                },
            };
            proptest::collection::vec(step, 1..=10).prop_map(move |chunks| {
                std::iter::once(prelude.clone())
                    .chain(chunks.into_iter().flatten())
                    .collect::<Vec<_>>()
            })
        })
        .prop_map(|steps| Sequence { steps })
}

fn sequence_strategy() -> impl Strategy<Value = Sequence> {
    let contended = name_strategy()
        .prop_flat_map(|name| proptest::collection::vec(step_strategy(vec![name], 2), 1..=24));
    let solo = proptest::collection::vec(name_strategy(), 1..=3)
        .prop_flat_map(|names| proptest::collection::vec(step_strategy(names, 1), 1..=24));
    prop_oneof![3 => contended, 1 => solo].prop_map(|steps| Sequence { steps })
}

// ---------------------------------------------------------------------------------------------
// The real server.

/// A MariaDB of this test binary, with the timers of the random sequences out of reach.
fn start_server(
    wait_timeout_s: u64,
    lock_wait_timeout_s: u64,
) -> (RefCell<Launcher>, SocketAddr, tokio::runtime::Runtime) {
    let kind = MariaDb {
        wait_timeout_s,
        lock_wait_timeout_s,
        // Nothing here crashes the server: flush once a second, for speed.
        flush: FlushPolicy::EverySecond,
        database: lockcheck_real::launcher::mariadb::DATABASE.to_string(),
    };
    let launcher = RefCell::new(Launcher::new().expect("a temp dir"));
    let index = launcher
        .borrow_mut()
        .add("mysql-0", Box::new(kind), Vec::new())
        .unwrap_or_else(|e| panic!("starting MariaDB: {e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime
        .block_on(Launcher::until_ready(&launcher, index))
        .unwrap_or_else(|e| panic!("MariaDB not ready: {e}"));
    let addr = launcher.borrow().addr(index);
    (launcher, addr, runtime)
}

/// A statement sent on its own connection, in a task (so that it may wait for a lock while the
/// other connection goes on).
type Sent = JoinHandle<(Session, Result<Reply, mysql_async::Error>)>;

fn send(mut session: Session, statement: Statement) -> Sent {
    tokio::spawn(async move {
        let reply = session.execute(&statement).await;
        (session, reply)
    })
}

/// Why a sequence could not be compared, or where the two servers differ.
type Divergence = String;

/// A divergence worth its own message: InnoDB broke a deadlock by rolling back the other
/// transaction of the cycle than the model did.
const OTHER_VICTIM: &str = "InnoDB chose the other deadlock victim";

/// Ends a sequence without failing it: InnoDB let a request of a transaction that holds a shared
/// lock on the row pass the other's waiting exclusive request (MariaDB's lock bypass) where it
/// otherwise, and in the model, reports the deadlock; which one happens varies from run to run.
const BYPASSED: &str = "InnoDB let the request bypass the waiting one instead of a deadlock";

/// Ends a timed sequence without failing it: a step ran across a timer of the model, or two
/// timers were due too close together to tell which fires first on the real server.
const STRADDLED: &str = "a step ran across a server timer";

/// Ends a sequence without failing it: a delete was committed while a transaction that has
/// written is open, which keeps InnoDB from purging the deleted record.
const UNPURGED: &str = "a committed delete cannot be purged while a transaction that wrote is open";

/// The real side of the comparison: two connections and a monitor.
struct Real {
    addr: SocketAddr,
    /// For `information_schema`, emptying the table, waiting for purge, killing stuck sessions.
    monitor: Session,
    sessions: [Option<Session>; 2],
    /// A statement in flight per connection (one that waits for a lock).
    sent: [Option<Sent>; 2],
    /// The server's id of each connection, as of its last statement.
    ids: [u32; 2],
    /// The wall clock pinned on each session, in ms.
    pinned: [Option<u64>; 2],
    /// Something went wrong on the connections: kill and reopen them before the next sequence.
    dirty: bool,
    /// `innodb_lock_wait_timeout` and `wait_timeout` (in s) set on each connection it opens, for
    /// timed sequences (the server's own are out of reach).
    session_timers: Option<(u64, u64)>,
}

impl Real {
    async fn open(addr: SocketAddr) -> Real {
        let monitor = Session::open(addr).await.expect("the monitor connects");
        let mut real = Real {
            addr,
            monitor,
            sessions: [None, None],
            sent: [None, None],
            ids: [0, 0],
            pinned: [None, None],
            dirty: true,
            session_timers: None,
        };
        real.reset().await.expect("a fresh server resets");
        real
    }

    /// Both connections in autocommit mode with nothing open, the table empty, purge done.
    async fn reset(&mut self) -> Result<(), Divergence> {
        if self.dirty {
            for sent in self.sent.iter_mut().filter_map(Option::take) {
                sent.abort();
            }
            for session in self.sessions.iter_mut().filter_map(Option::take) {
                let id = session.id();
                session.abandon();
                // The connection may be stuck in a lock wait: end it on the server.
                let _ = self
                    .monitor
                    .conn_mut()
                    .query_drop(format!("KILL {id}"))
                    .await;
            }
            for k in 0..2 {
                self.sessions[k] = Some(self.connect().await?);
            }
            self.pinned = [None, None];
            self.dirty = false;
        }
        for session in self.sessions.iter_mut().flatten() {
            match session.execute(&Statement::Rollback).await {
                Ok(Ok(_)) => {}
                other => return Err(format!("resetting a connection: {other:?}")),
            }
        }
        let monitor = self.monitor.conn_mut();
        monitor
            .query_drop("DELETE FROM lock_table")
            .await
            .map_err(|e| format!("emptying the table: {e}"))?;
        Ok(())
    }

    /// A new connection, with the session timers of timed sequences if any.
    async fn connect(&mut self) -> Result<Session, Divergence> {
        let mut session = Session::open(self.addr)
            .await
            .map_err(|e| format!("connecting: {e}"))?;
        if let Some((lock_wait_s, wait_s)) = self.session_timers {
            session
                .conn_mut()
                .query_drop(format!(
                    "SET SESSION innodb_lock_wait_timeout = {lock_wait_s}, wait_timeout = {wait_s}"
                ))
                .await
                .map_err(|e| format!("setting the session's timers: {e}"))?;
        }
        Ok(session)
    }

    /// Waits until the server has closed connection `id` (it is gone from its process list).
    async fn until_closed(&mut self, id: u32) -> Result<(), Divergence> {
        let deadline = tokio::time::Instant::now() + REPLY_WITHIN;
        loop {
            let there: Option<u64> = self
                .monitor
                .conn_mut()
                .query_first(format!(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = {id}"
                ))
                .await
                .map_err(|e| format!("reading the process list: {e}"))?;
            if there.is_none() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                self.dirty = true;
                return Err(format!(
                    "the model closed the idle connection {id}; the server kept it open"
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until InnoDB has purged every committed delete (its history list is empty). Only
    /// when no open transaction has written: purge waits for those. (Polled here, live, rather
    /// than with `SET GLOBAL innodb_max_purge_lag_wait = 0`, which looks only every 100 ms.)
    async fn purge(&mut self) -> Result<(), Divergence> {
        let deadline = tokio::time::Instant::now() + REPLY_WITHIN;
        loop {
            let status = self.innodb_status().await?;
            let history = status
                .split("History list length ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| format!("no history list length in:\n{status}"))?;
            if history == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                self.dirty = true;
                return Err(format!(
                    "purge did not finish ({history} undo logs left), though no open \
                     transaction has written"
                ));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// `SHOW ENGINE INNODB STATUS`, read live.
    async fn innodb_status(&mut self) -> Result<String, Divergence> {
        let status: Option<(String, String, String)> = self
            .monitor
            .conn_mut()
            .query_first("SHOW ENGINE INNODB STATUS")
            .await
            .map_err(|e| format!("SHOW ENGINE INNODB STATUS: {e}"))?;
        Ok(status.map(|(_, _, text)| text).unwrap_or_default())
    }

    /// The next id and the last fence value the real server will give.
    async fn counters(&mut self) -> Result<(u64, u64), Divergence> {
        let monitor = self.monitor.conn_mut();
        let next_id: Option<u64> = monitor
            .query_first(
                "SELECT AUTO_INCREMENT FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = 'lockcheck' AND TABLE_NAME = 'lock_table'",
            )
            .await
            .map_err(|e| format!("reading the auto-increment counter: {e}"))?;
        let fence: Option<u64> = monitor
            .query_first("SELECT NEXT VALUE FOR lock_fence")
            .await
            .map_err(|e| format!("reading the fence sequence: {e}"))?;
        Ok((next_id.unwrap_or(1), fence.unwrap_or(0)))
    }

    /// Pins `NOW()` of connection `conn` to `wall_ms`.
    async fn pin(&mut self, conn: usize, wall_ms: u64) -> Result<(), Divergence> {
        if self.pinned[conn] == Some(wall_ms) {
            return Ok(());
        }
        let session = self.sessions[conn].as_mut().ok_or("no session to pin")?;
        session
            .conn_mut()
            .query_drop(format!(
                "SET timestamp = {}.{:03}",
                wall_ms / 1_000,
                wall_ms % 1_000
            ))
            .await
            .map_err(|e| format!("pinning the clock: {e}"))?;
        self.pinned[conn] = Some(wall_ms);
        Ok(())
    }

    /// Whether connection `id`'s transaction waits for a lock, per `SHOW ENGINE INNODB STATUS`
    /// (read live; `information_schema.INNODB_TRX` is a cache that a reader polling more often
    /// than every 100 ms keeps from ever being refreshed).
    async fn in_lock_wait(&mut self, id: u32) -> Result<bool, Divergence> {
        let text = self.innodb_status().await?;
        let thread = format!("MariaDB thread id {id},");
        Ok(text
            .split("---TRANSACTION ")
            .any(|block| block.contains(&thread) && block.contains("\nLOCK WAIT ")))
    }

    /// What the server's transactions and threads are doing, for a message.
    async fn server_state(&mut self) -> String {
        let monitor = self.monitor.conn_mut();
        let trx: Result<Vec<(u64, String, Option<String>)>, _> = monitor
            .query(
                "SELECT trx_mysql_thread_id, trx_state, trx_query FROM information_schema.INNODB_TRX",
            )
            .await;
        type Thread = (u64, String, Option<String>, Option<String>);
        let threads: Result<Vec<Thread>, _> = monitor
            .query("SELECT ID, COMMAND, STATE, INFO FROM information_schema.PROCESSLIST")
            .await;
        format!("  transactions: {trx:?}\n  threads: {threads:?}")
    }

    /// Sends `statement` on `conn`.
    fn send(&mut self, conn: usize, statement: &Statement) -> Result<u32, Divergence> {
        let session = self.sessions[conn]
            .take()
            .ok_or("the connection has a statement in flight")?;
        let id = session.id();
        self.ids[conn] = id;
        self.sent[conn] = Some(send(session, statement.clone()));
        Ok(id)
    }

    /// The reply of the statement in flight on `conn`.
    async fn reply(&mut self, conn: usize) -> Result<Reply, Divergence> {
        let sent = self.sent[conn].take().ok_or("no statement in flight")?;
        match tokio::time::timeout(REPLY_WITHIN, sent).await {
            Ok(Ok((session, Ok(reply)))) => {
                self.sessions[conn] = Some(session);
                Ok(reply)
            }
            Ok(Ok((_, Err(e)))) => {
                self.dirty = true;
                Err(format!("the real connection failed: {e}"))
            }
            Ok(Err(e)) => {
                self.dirty = true;
                Err(format!("the real statement's task failed: {e}"))
            }
            Err(_) => {
                self.dirty = true;
                Err(format!(
                    "no real reply within {} s (it waits for a lock?)",
                    REPLY_WITHIN.as_secs()
                ))
            }
        }
    }

    /// Waits until the statement just sent on `conn` (connection `id`) waits for a lock on the
    /// server; `Err` with its reply if it finished instead.
    async fn until_waiting(&mut self, conn: usize, id: u32) -> Result<(), Divergence> {
        let deadline = tokio::time::Instant::now() + REPLY_WITHIN;
        loop {
            if self.in_lock_wait(id).await? {
                return Ok(());
            }
            if self.sent[conn]
                .as_ref()
                .is_some_and(JoinHandle::is_finished)
            {
                let reply = self.reply(conn).await;
                self.dirty = true;
                return Err(format!("the real statement did not wait: {reply:?}"));
            }
            if tokio::time::Instant::now() >= deadline {
                self.dirty = true;
                let state = self.server_state().await;
                return Err(format!(
                    "the real statement neither replied nor waited (connection {id}):\n{state}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running a sequence through both.

/// What a sequence did, for the summary.
#[derive(Default)]
struct Tally {
    sequences: Cell<u64>,
    /// Sequences compared to their end (the others ended early, see the module doc).
    completed: Cell<u64>,
    statements: Cell<u64>,
    waits: Cell<u64>,
    deadlocks: Cell<u64>,
    errors: Cell<u64>,
    /// Deadlocks whose victim InnoDB chose differently from the model (each a failure).
    other_victim: Cell<u64>,
    /// Sequences ended at a delete InnoDB could not purge.
    unpurged: Cell<u64>,
    /// Sequences ended where InnoDB's lock bypass avoided the model's deadlock.
    bypassed: Cell<u64>,
    /// Timed sequences: lock waits that timed out (1205), connections closed by `wait_timeout`.
    timed_out: Cell<u64>,
    closed: Cell<u64>,
    /// Timed sequences ended at a step that ran across a timer, or at two timers too close
    /// together to tell their order (see [`TIMER_MARGIN_MS`]).
    straddled: Cell<u64>,
}

/// Both servers, side by side, for one sequence.
struct Pair<'a> {
    model: MysqlModel,
    /// The model's connection of each real one.
    conns: [ConnId; 2],
    wall_ms: u64,
    mono_ms: u64,
    real: &'a mut Real,
    /// Real id = model id + `id_offset`; real fence = model fence + `fence_offset`.
    id_offset: u64,
    fence_offset: u64,
    transcript: String,
    tally: &'a Tally,
    /// Per connection: its open transaction has sent a write (so InnoDB cannot purge deletes
    /// committed meanwhile).
    wrote: [bool; 2],
    /// Timed sequences: when the sequence started, the zero of the model's monotonic clock (and
    /// `BASE_WALL_MS` of its wall clock), which then follow real time.
    started: Option<std::time::Instant>,
}

/// The model's settings in the random sequences: no timer within reach.
const NO_TIMERS: MysqlConfig = MysqlConfig {
    lock_wait_timeout_ms: NEVER_S * 1_000,
    wait_timeout_ms: NEVER_S * 1_000,
    flush: FlushPolicy::AtCommit,
};

impl<'a> Pair<'a> {
    async fn new(
        real: &'a mut Real,
        tally: &'a Tally,
        config: MysqlConfig,
    ) -> Result<Pair<'a>, Divergence> {
        // Before anything reaches the server: every real timer then starts no earlier than the
        // model's.
        let started = real.session_timers.is_some().then(std::time::Instant::now);
        real.reset().await?;
        real.purge().await?;
        let (next_id, fence) = real.counters().await?;
        let mut model = MysqlModel::new(config, 0);
        let now = ServerTime {
            wall_ms: BASE_WALL_MS,
            mono_ms: 0,
        };
        let conns = [model.connect(now), model.connect(now)];
        Ok(Pair {
            model,
            conns,
            wall_ms: BASE_WALL_MS,
            mono_ms: 0,
            real,
            id_offset: next_id - 1,
            fence_offset: fence,
            transcript: String::new(),
            tally,
            wrote: [false, false],
            started,
        })
    }

    fn now(&self) -> ServerTime {
        ServerTime {
            wall_ms: self.wall_ms,
            mono_ms: self.mono_ms,
        }
    }

    fn conn_of(&self, id: ConnId) -> Result<usize, Divergence> {
        self.conns
            .iter()
            .position(|&c| c == id)
            .ok_or_else(|| format!("a notice for an unknown connection {id}"))
    }

    /// The model's reply in the real server's numbering.
    fn renumber(&self, reply: Reply) -> Reply {
        reply.map(|outcome| match outcome {
            Outcome::Row(Some(mut row)) => {
                row.id += self.id_offset;
                Outcome::Row(Some(row))
            }
            Outcome::Value(fence) => Outcome::Value(fence + self.fence_offset),
            other => other,
        })
    }

    fn compare(
        &mut self,
        conn: usize,
        what: &str,
        model: Reply,
        real: Reply,
    ) -> Result<(), Divergence> {
        let model = self.renumber(model);
        let _ = writeln!(
            self.transcript,
            "  c{conn} {what}\n      model: {model:?}\n      real:  {real:?}"
        );
        if let Err(e) = &model {
            self.tally.errors.set(self.tally.errors.get() + 1);
            if *e == SqlError::Deadlock {
                self.tally.deadlocks.set(self.tally.deadlocks.get() + 1);
            }
        }
        if model == real {
            Ok(())
        } else {
            Err(format!("c{conn} {what}: the replies differ"))
        }
    }

    /// Replies the model handed to waiting statements: the real ones must come too, and agree.
    async fn settle(&mut self, notices: Vec<Notice>) -> Result<(), Divergence> {
        for notice in notices {
            match notice {
                Notice::Reply { conn, reply } => {
                    let k = self.conn_of(conn)?;
                    if reply == Err(SqlError::LockWaitTimeout) {
                        self.tally.timed_out.set(self.tally.timed_out.get() + 1);
                    }
                    let pending = !self.real.sent[k]
                        .as_ref()
                        .is_some_and(JoinHandle::is_finished);
                    if reply == Err(SqlError::Deadlock) && pending {
                        // The statement that made the model pick this victim has its reply, so
                        // InnoDB has decided: a victim is no longer waiting.
                        let id = self.real.ids[k];
                        if self.real.in_lock_wait(id).await? {
                            let _ = writeln!(self.transcript, "  c{k} (the waiting statement)\n      model: {reply:?}\n      real:  still waits");
                            self.tally.bypassed.set(self.tally.bypassed.get() + 1);
                            return Err(BYPASSED.into());
                        }
                    }
                    let real = self.real.reply(k).await?;
                    self.compare(k, "(the waiting statement's reply)", reply, real)?;
                }
                Notice::Closed { conn } if self.started.is_some() => {
                    // The server closed it too (`wait_timeout`); the client connects again, in
                    // both worlds, as the store does.
                    let k = self.conn_of(conn)?;
                    let id = self.real.sessions[k]
                        .as_ref()
                        .ok_or("a closed connection with a statement in flight")?
                        .id();
                    self.real.until_closed(id).await?;
                    if let Some(session) = self.real.sessions[k].take() {
                        session.abandon();
                    }
                    let _ = writeln!(self.transcript, "  c{k} closed by wait_timeout");
                    self.tally.closed.set(self.tally.closed.get() + 1);
                    self.conns[k] = self.model.connect(self.now());
                    self.real.sessions[k] = Some(self.real.connect().await?);
                    self.real.pinned[k] = None;
                }
                Notice::Closed { conn } => {
                    return Err(format!(
                        "the model closed connection {conn} (no timer may fire here)"
                    ))
                }
            }
        }
        // A statement the model still has waiting must still wait on the real server.
        for k in 0..2 {
            if self.model.is_waiting(self.conns[k])
                && self.real.sent[k]
                    .as_ref()
                    .is_some_and(JoinHandle::is_finished)
            {
                let reply = self.real.reply(k).await;
                return Err(format!(
                    "c{k}: the real statement stopped waiting: {reply:?}"
                ));
            }
        }
        Ok(())
    }

    /// The names of the committed rows.
    fn committed_names(&self) -> Vec<String> {
        self.model
            .snapshot()
            .rows()
            .map(|row| row.resource_name.clone())
            .collect()
    }

    async fn run(&mut self, conn: usize, statement: &Statement) -> Result<(), Divergence> {
        if self.model.is_waiting(self.conns[conn]) {
            // A client that waits for a reply sends nothing else.
            return Ok(());
        }
        self.tally.statements.set(self.tally.statements.get() + 1);
        let timers = self.clear_of_timers().await?;
        let committed_before = self.committed_names();
        let mut notices = Vec::new();
        let now = self.now();
        let applied = self
            .model
            .apply(self.conns[conn], statement, now, &mut notices);
        self.real.pin(conn, self.wall_ms).await?;
        let id = self.real.send(conn, statement)?;
        let what = format!("{statement:?}");
        match applied {
            Applied::Blocked => {
                self.tally.waits.set(self.tally.waits.get() + 1);
                let _ = writeln!(
                    self.transcript,
                    "  c{conn} {what}\n      model: waits\n      real:  waits"
                );
                self.real.until_waiting(conn, id).await?;
            }
            Applied::Reply(model) => {
                let real = self.real.reply(conn).await;
                let real = match real {
                    Ok(reply) => reply,
                    Err(e) => {
                        let _ = writeln!(
                            self.transcript,
                            "  c{conn} {what}\n      model: {model:?}\n      real:  {e}"
                        );
                        return Err(e);
                    }
                };
                if model == Err(SqlError::Deadlock) && real != model {
                    let other = 1 - conn;
                    if self.real.sent[other].is_some() {
                        let victim = self.real.reply(other).await;
                        if victim == Ok(Err(SqlError::Deadlock)) {
                            let _ = writeln!(self.transcript, "  c{conn} {what}\n      model: {model:?}\n      real:  {real:?}, and c{other} got the deadlock");
                            self.tally
                                .other_victim
                                .set(self.tally.other_victim.get() + 1);
                            return Err(OTHER_VICTIM.into());
                        }
                    }
                }
                self.compare(conn, &what, model, real)?;
            }
        }
        self.settle(notices).await?;
        let writes = !matches!(
            statement,
            Statement::Begin
                | Statement::Commit
                | Statement::Rollback
                | Statement::NextFence
                | Statement::SelectForUpdate { .. }
        );
        for k in 0..2 {
            let c = self.conns[k];
            if k == conn && writes && self.model.in_transaction(c) {
                self.wrote[k] = true;
            } else if !self.model.in_transaction(c) && !self.model.is_waiting(c) {
                self.wrote[k] = false;
            }
        }
        let committed_after = self.committed_names();
        if committed_before
            .iter()
            .any(|name| !committed_after.contains(name))
        {
            // A delete was committed: let InnoDB purge it, as the model does at commit.
            if self.wrote.iter().any(|w| *w) {
                self.tally.unpurged.set(self.tally.unpurged.get() + 1);
                return Err(UNPURGED.into());
            }
            self.real.purge().await?;
        }
        self.after_timers(&timers)
    }

    /// Timed sequences: the model's pending timers, earliest first, as they would fire if no
    /// statement came (a timer that fires may start another: a woken statement's connection is
    /// idle from then).
    fn timers(&self) -> Vec<u64> {
        let mut model = self.model.clone();
        let mut all = Vec::new();
        while let Some(at) = model.next_deadline_ms() {
            all.push(at);
            let now = ServerTime {
                wall_ms: self.wall_ms,
                mono_ms: at,
            };
            model.tick(now, &mut Vec::new());
        }
        all
    }

    /// Timed sequences: brings the model's clocks to real time, first waiting, where a timer
    /// is due within [`TIMER_MARGIN_MS`], until the margin past it, and letting the model fire
    /// it (the real server's replies are awaited). Returns the timers then pending, for
    /// [`Pair::after_timers`]. Untimed sequences: nothing to do.
    async fn clear_of_timers(&mut self) -> Result<Vec<u64>, Divergence> {
        let Some(started) = self.started else {
            return Ok(Vec::new());
        };
        loop {
            let now = started.elapsed().as_millis() as u64;
            let timers = self.timers();
            let due = timers
                .first()
                .copied()
                .filter(|&at| at <= now + TIMER_MARGIN_MS);
            let target = match due {
                Some(at) => {
                    // Which fires first matters only when a statement waits: its lock wait's
                    // timeout against the other's idle one (two idle connections closed in
                    // either order end alike).
                    let waiting = self.conns.iter().any(|&c| self.model.is_waiting(c));
                    if waiting
                        && timers
                            .get(1)
                            .is_some_and(|&next| next < at + 2 * TIMER_MARGIN_MS)
                    {
                        let _ = writeln!(
                            self.transcript,
                            "  timers at {at} and {} ms: too close to tell their order",
                            timers[1]
                        );
                        self.tally.straddled.set(self.tally.straddled.get() + 1);
                        return Err(STRADDLED.into());
                    }
                    at + TIMER_MARGIN_MS
                }
                None => now,
            };
            if target > now {
                tokio::time::sleep(Duration::from_millis(target - now)).await;
            }
            let now = started.elapsed().as_millis() as u64;
            self.mono_ms = now;
            self.wall_ms = BASE_WALL_MS + now;
            let mut notices = Vec::new();
            let at = self.now();
            self.model.tick(at, &mut notices);
            if !notices.is_empty() {
                let _ = writeln!(self.transcript, "  at {now} ms");
            }
            self.settle(notices).await?;
            if due.is_none() {
                return Ok(self.timers());
            }
        }
    }

    /// Timed sequences: a step that ran past one of the timers pending when it started has an
    /// outcome that depends on which came first on the real server (the margin before each
    /// step makes this rare): the sequence ends there without failing.
    fn after_timers(&mut self, timers: &[u64]) -> Result<(), Divergence> {
        let Some(started) = self.started else {
            return Ok(());
        };
        let now = started.elapsed().as_millis() as u64;
        if timers.first().is_some_and(|&at| at <= now) {
            let _ = writeln!(
                self.transcript,
                "  the step ran until {now} ms, past a timer"
            );
            self.tally.straddled.set(self.tally.straddled.get() + 1);
            return Err(STRADDLED.into());
        }
        Ok(())
    }

    /// A [`Step::Sleep`] of a timed sequence.
    async fn sleep(&mut self, sleep: Sleep) -> Result<(), Divergence> {
        let started = self.started.ok_or("a sleep in an untimed sequence")?;
        let now = started.elapsed().as_millis() as u64;
        let next = self.timers().into_iter().find(|&at| at > now);
        let target = match (sleep, next) {
            (Sleep::For(ms), _) => now + ms,
            (Sleep::BeforeNextTimer, Some(at)) => at.saturating_sub(TIMER_MARGIN_MS + 20),
            (Sleep::PastNextTimer, Some(at)) => at + TIMER_MARGIN_MS + 1,
            (_, None) => now,
        };
        let _ = writeln!(self.transcript, "  sleep {sleep:?}: {now} -> {target} ms");
        if target > now {
            tokio::time::sleep(Duration::from_millis(target - now)).await;
        }
        let timers = self.clear_of_timers().await?;
        self.after_timers(&timers)
    }

    /// Both servers' clocks move on by `ms`, the monotonic one too, so the model's timers fire
    /// (the real server's run on real time: its replies are awaited).
    async fn elapse(&mut self, ms: u64) -> Result<(), Divergence> {
        self.wall_ms += ms;
        self.mono_ms += ms;
        let _ = writeln!(self.transcript, "  {ms} ms pass");
        let mut notices = Vec::new();
        let now = self.now();
        self.model.tick(now, &mut notices);
        self.settle(notices).await
    }

    async fn run_all(&mut self, sequence: &Sequence) -> Result<(), Divergence> {
        for step in &sequence.steps {
            match step {
                Step::Run { conn, statement } => self.run(*conn, statement).await?,
                Step::Wait { ms } => {
                    let _ = writeln!(self.transcript, "  wait {ms} ms");
                    self.wall_ms += ms;
                }
                Step::Sleep(sleep) => self.sleep(*sleep).await?,
            }
        }
        // Roll back whatever is open, waiting statements first settled by the other's rollback.
        for _ in 0..4 {
            let open: Vec<usize> = (0..2)
                .filter(|&k| {
                    let c = self.conns[k];
                    !self.model.is_waiting(c) && self.model.in_transaction(c)
                })
                .collect();
            if open.is_empty() {
                break;
            }
            for k in open {
                self.run(k, &Statement::Rollback).await?;
            }
        }
        if (0..2).any(|k| self.model.is_waiting(self.conns[k])) {
            return Err("a statement still waits after every rollback".into());
        }
        Ok(())
    }
}

/// Runs one sequence through the model and the real server.
fn check(
    runtime: &tokio::runtime::Runtime,
    real: &RefCell<Real>,
    tally: &Tally,
    config: MysqlConfig,
    sequence: &Sequence,
) -> Result<(), TestCaseError> {
    tally.sequences.set(tally.sequences.get() + 1);
    let mut real = real.borrow_mut();
    runtime.block_on(async {
        let mut pair = Pair::new(&mut real, tally, config)
            .await
            .map_err(TestCaseError::fail)?;
        let result = pair.run_all(sequence).await;
        if pair.started.is_some() {
            // Fresh connections for the next timed sequence: none near its wait_timeout.
            pair.real.dirty = true;
        }
        match result {
            Ok(()) => {
                tally.completed.set(tally.completed.get() + 1);
                // Every compared transcript, to see what the sequences exercise.
                if std::env::var_os("LOCKCHECK_CONFORMANCE_TRANSCRIPTS").is_some() {
                    eprintln!("compared:\n{}", pair.transcript);
                }
                Ok(())
            }
            Err(divergence)
                if divergence == UNPURGED || divergence == BYPASSED || divergence == STRADDLED =>
            {
                pair.real.dirty = true;
                let transcript = std::mem::take(&mut pair.transcript);
                if std::env::var_os("LOCKCHECK_CONFORMANCE_VERBOSE").is_some() {
                    eprintln!("{divergence}:\n{transcript}");
                }
                // Not a sequence compared to its end: proptest draws another in its place.
                Err(TestCaseError::reject(divergence))
            }
            Err(divergence) => {
                let transcript = std::mem::take(&mut pair.transcript);
                pair.real.dirty = true;
                Err(TestCaseError::fail(format!("{divergence}\n{transcript}")))
            }
        }
    })
}

#[test]
fn random_statement_sequences_get_the_same_replies_from_the_model_and_a_real_mariadb() {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let cases = env_number("LOCKCHECK_CONFORMANCE_CASES", u64::from(DEFAULT_CASES)) as u32;
    let seed = env_number("LOCKCHECK_CONFORMANCE_SEED", DEFAULT_SEED);
    eprintln!("mysql conformance: {cases} sequences, seed {seed} (LOCKCHECK_CONFORMANCE_SEED)");
    let (_launcher, addr, runtime) = start_server(NEVER_S * 8, NEVER_S);
    let real = RefCell::new(runtime.block_on(Real::open(addr)));
    let tally = Tally::default();
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let seed_bytes: Vec<u8> = seed.to_le_bytes().repeat(4);
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let result = runner.run(&sequence_strategy(), |sequence| {
        check(&runtime, &real, &tally, NO_TIMERS, &sequence)
    });
    eprintln!(
        "mysql conformance: {} sequences compared to their end, of {} run ({} statements; {} \
         waited for a lock, {} errors of which {} deadlocks, {} of them with another victim than \
         the model's; ended early, not counted: {} at a delete InnoDB could not purge yet, {} \
         where InnoDB's lock bypass avoided a deadlock)",
        tally.completed.get(),
        tally.sequences.get(),
        tally.statements.get(),
        tally.waits.get(),
        tally.errors.get(),
        tally.deadlocks.get(),
        tally.other_victim.get(),
        tally.unpurged.get(),
        tally.bypassed.get()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, sequence)) => {
            panic!("the model and MariaDB diverge (seed {seed}):\n{why}\nminimal sequence: {sequence:#?}")
        }
        Err(TestError::Abort(why)) => panic!("conformance aborted: {why}"),
    }
    assert!(tally.completed.get() >= u64::from(cases));
}

/// Timed sequences run unless `LOCKCHECK_CONFORMANCE_TIMED_CASES` says otherwise. MariaDB's
/// timers count whole seconds (1 s at least), so each timer a sequence lets fire costs it a second
/// or two of real time, spent waiting: the sequences run on [`DEFAULT_TIMED_WORKERS`] servers at
/// once, each with its own share of the cases and its own stream of the seed.
const DEFAULT_TIMED_CASES: u32 = 1_000;

/// How many servers the timed sequences run on side by side, unless
/// `LOCKCHECK_CONFORMANCE_TIMED_WORKERS` says otherwise (1 reruns one worker's stream alone).
/// The sequences mostly wait for timers, so the two cores stay far from busy; a step that a
/// loaded machine still delays past [`TIMER_MARGIN_MS`] ends its sequence uncounted, never
/// wrongly compared.
const DEFAULT_TIMED_WORKERS: u64 = 12;

/// The timers of the timed sequences, set per connection (`SET SESSION`), in seconds: the lock
/// wait's the shortest MariaDB allows, and the idle one longer, so that a statement's lock wait
/// usually times out before the holder's connection is closed, and both happen.
const TIMED_LOCK_WAIT_S: u64 = 1;
const TIMED_WAIT_TIMEOUT_S: u64 = 2;

/// How far from a timer of the model each step of a timed sequence runs, in ms (see
/// [`Pair::clear_of_timers`]). Each real timer starts no earlier than the model's (the model's
/// clock is read before the statement is sent) and fires a few ms after it at most on an
/// unloaded machine: InnoDB's lock wait is a timed condition wait, `wait_timeout` a timed read
/// of the socket, and the reply or the close then takes the server a moment. 100 ms leave room
/// for a loaded machine, at a small cost next to timers of whole seconds.
const TIMER_MARGIN_MS: u64 = 100;

/// What one worker's timed sequences did (a [`Tally`]'s numbers, to be summed across threads).
#[derive(Clone, Copy, Debug, Default)]
struct TimedCounts {
    sequences: u64,
    completed: u64,
    statements: u64,
    waits: u64,
    timed_out: u64,
    closed: u64,
    deadlocks: u64,
    straddled: u64,
    unpurged: u64,
    bypassed: u64,
}

impl TimedCounts {
    fn of(tally: &Tally) -> TimedCounts {
        TimedCounts {
            sequences: tally.sequences.get(),
            completed: tally.completed.get(),
            statements: tally.statements.get(),
            waits: tally.waits.get(),
            timed_out: tally.timed_out.get(),
            closed: tally.closed.get(),
            deadlocks: tally.deadlocks.get(),
            straddled: tally.straddled.get(),
            unpurged: tally.unpurged.get(),
            bypassed: tally.bypassed.get(),
        }
    }

    fn add(mut self, o: TimedCounts) -> TimedCounts {
        self.sequences += o.sequences;
        self.completed += o.completed;
        self.statements += o.statements;
        self.waits += o.waits;
        self.timed_out += o.timed_out;
        self.closed += o.closed;
        self.deadlocks += o.deadlocks;
        self.straddled += o.straddled;
        self.unpurged += o.unpurged;
        self.bypassed += o.bypassed;
        self
    }
}

#[test]
fn random_statement_sequences_with_short_server_timers_agree_with_the_model() {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let cases = env_number(
        "LOCKCHECK_CONFORMANCE_TIMED_CASES",
        u64::from(DEFAULT_TIMED_CASES),
    ) as u32;
    let workers = env_number("LOCKCHECK_CONFORMANCE_TIMED_WORKERS", DEFAULT_TIMED_WORKERS)
        .clamp(1, 64) as u32;
    let seed = env_number("LOCKCHECK_CONFORMANCE_SEED", DEFAULT_SEED);
    eprintln!(
        "mysql timed conformance: {cases} sequences on {workers} servers, seed {seed} (worker w \
         draws from seed + w)"
    );
    let share = cases.div_ceil(workers);
    let results: Vec<Result<TimedCounts, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| scope.spawn(move || timed_worker(seed + u64::from(w), share)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut total = TimedCounts::default();
    let mut failures = Vec::new();
    for result in results {
        match result {
            Ok(counts) => total = total.add(counts),
            Err(why) => failures.push(why),
        }
    }
    eprintln!(
        "mysql timed conformance: {} sequences compared to their end, of {} run ({} \
         statements; {} waited for a lock, {} of them until innodb_lock_wait_timeout; {} \
         connections closed by wait_timeout; {} deadlocks; ended early, not counted: {} across \
         a timer, {} at a delete InnoDB could not purge yet, {} where InnoDB's lock bypass \
         avoided a deadlock)",
        total.completed,
        total.sequences,
        total.statements,
        total.waits,
        total.timed_out,
        total.closed,
        total.deadlocks,
        total.straddled,
        total.unpurged,
        total.bypassed
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(total.completed >= u64::from(cases));
    // The timers fired: lock waits timed out and idle connections were closed.
    assert!(total.timed_out > 0 && total.closed > 0);
}

/// One worker of the timed conformance: `cases` sequences drawn from `seed`, on a server of its
/// own; what they did, or how the model and MariaDB diverged.
fn timed_worker(seed: u64, cases: u32) -> Result<TimedCounts, String> {
    // One start at a time: several `mariadb-install-db`s at once fail here (exit status 1, with
    // nothing in their output that says why); the sequences then run side by side.
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let (_launcher, addr, runtime) = {
        let _one = STARTING.lock().unwrap_or_else(|p| p.into_inner());
        start_server(NEVER_S * 8, NEVER_S)
    };
    let real = RefCell::new(runtime.block_on(async {
        let mut real = Real::open(addr).await;
        real.session_timers = Some((TIMED_LOCK_WAIT_S, TIMED_WAIT_TIMEOUT_S));
        real.dirty = true;
        real
    }));
    let config = MysqlConfig {
        lock_wait_timeout_ms: TIMED_LOCK_WAIT_S * 1_000,
        wait_timeout_ms: TIMED_WAIT_TIMEOUT_S * 1_000,
        ..NO_TIMERS
    };
    let tally = Tally::default();
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            // Each case costs seconds: shrink a little, and say where it failed first.
            max_shrink_iters: 50,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed.to_le_bytes().repeat(4)),
    );
    let result = runner.run(&timed_sequence_strategy(), |sequence| {
        check(&runtime, &real, &tally, config, &sequence)
    });
    let rerun = format!(
        "rerun alone: LOCKCHECK_CONFORMANCE_TIMED_WORKERS=1 LOCKCHECK_CONFORMANCE_SEED={seed} \
         LOCKCHECK_CONFORMANCE_TIMED_CASES={cases}"
    );
    match result {
        Ok(()) if tally.completed.get() >= u64::from(cases) => Ok(TimedCounts::of(&tally)),
        Ok(()) => Err(format!(
            "only {} of {cases} sequences compared to their end ({rerun})",
            tally.completed.get()
        )),
        Err(TestError::Fail(why, sequence)) => Err(format!(
            "the model and MariaDB diverge ({rerun}):\n{why}\nminimal sequence: {sequence:#?}"
        )),
        Err(TestError::Abort(why)) => Err(format!("conformance aborted ({rerun}): {why}")),
    }
}

/// Runs `steps` (connection, statement; `None`: `ms` pass) through the model with `config` and a
/// real server whose `innodb_lock_wait_timeout` is `lock_wait_timeout_s`, comparing every reply.
fn scripted(
    lock_wait_timeout_s: u64,
    config: MysqlConfig,
    steps: &[(usize, Option<Statement>, u64)],
) {
    let (_launcher, addr, runtime) = start_server(NEVER_S * 8, lock_wait_timeout_s);
    let tally = Tally::default();
    runtime.block_on(async {
        let mut real = Real::open(addr).await;
        let mut pair = Pair::new(&mut real, &tally, config).await.unwrap();
        for (conn, statement, ms) in steps {
            let step = match statement {
                Some(statement) => pair.run(*conn, statement).await,
                None => pair.elapse(*ms).await,
            };
            if let Err(divergence) = step {
                panic!("{divergence}\n{}", pair.transcript);
            }
        }
    });
}

fn insert(resource: &str, locker: &str) -> Statement {
    Statement::Insert {
        resource: resource.into(),
        locker: locker.into(),
        count: 1,
        version: 1,
    }
}

fn select(resource: &str) -> Statement {
    Statement::SelectForUpdate {
        resource: resource.into(),
    }
}

#[test]
fn a_lock_wait_timeout_fails_the_statement_and_keeps_the_transaction() {
    // c1 holds a gap lock, then waits for c0's row past innodb_lock_wait_timeout (1 s): 1205,
    // and its transaction stays open with the gap lock (innodb_rollback_on_timeout=OFF), so
    // c0's insert into that gap waits until c1 rolls back.
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let config = MysqlConfig {
        lock_wait_timeout_ms: 1_000,
        ..NO_TIMERS
    };
    let run = |conn, statement| (conn, Some(statement), 0);
    scripted(
        1,
        config,
        &[
            run(0, insert("lock", "a")),
            run(0, Statement::Begin),
            run(0, select("lock")),
            run(1, Statement::Begin),
            run(1, select("free")),
            run(1, select("lock")),
            (1, None, 1_000),
            run(0, insert("free", "a")),
            run(1, Statement::Rollback),
            run(0, Statement::Commit),
            run(1, select("free")),
        ],
    );
}

#[test]
fn an_idle_connection_is_closed_after_wait_timeout_and_its_lock_handed_over() {
    // The store's connection holds the row in an open transaction and sits idle past the
    // server's wait_timeout (1 s): the server closes it and rolls back, the other connection's
    // waiting SELECT … FOR UPDATE gets the row, and the store's next statement gets 2006 with
    // nothing sent; the one after runs on a new connection.
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let (_launcher, addr, runtime) = start_server(1, NEVER_S);
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let mut monitor = Session::open(addr).await.unwrap();
        let mut other = Session::open(addr).await.unwrap();
        for session in [&mut monitor, &mut other] {
            session
                .conn_mut()
                .query_drop("SET SESSION wait_timeout = 3600")
                .await
                .unwrap();
        }
        monitor
            .conn_mut()
            .query_drop("DELETE FROM lock_table")
            .await
            .unwrap();
        let store = RealMysql::new(
            addr,
            Duration::from_secs(5),
            Duration::from_secs(NEVER_S),
            PauseGate::new(),
        );
        let mut model = MysqlModel::new(
            MysqlConfig {
                wait_timeout_ms: 1_000,
                ..NO_TIMERS
            },
            0,
        );
        let mut t = ServerTime {
            wall_ms: BASE_WALL_MS,
            mono_ms: 0,
        };
        let c0 = model.connect(t);
        let c1 = model.connect(t);
        let mut notices = Vec::new();
        // What a reply says, without the ids and times the two servers give differently here
        // (the store does not pin the real server's clock).
        let gist = |reply: &Reply| match reply {
            Ok(Outcome::Row(Some(row))) => {
                format!("row of {} at version {}", row.locker, row.version)
            }
            other => format!("{other:?}"),
        };
        let model_reply = |applied: Applied| match applied {
            Applied::Reply(reply) => reply,
            Applied::Blocked => panic!("the model has it wait"),
        };

        for statement in [insert("lock", "a"), Statement::Begin, select("lock")] {
            let expected = model_reply(model.apply(c0, &statement, t, &mut notices));
            let real = store.execute(statement.clone()).await.unwrap();
            assert_eq!(gist(&real), gist(&expected), "{statement:?}");
        }
        assert_eq!(
            other.execute(&Statement::Begin).await.unwrap(),
            Ok(Outcome::Done { affected: 0 })
        );
        assert_eq!(
            model.apply(c1, &Statement::Begin, t, &mut notices),
            Applied::Reply(Ok(Outcome::Done { affected: 0 }))
        );
        assert_eq!(
            model.apply(c1, &select("lock"), t, &mut notices),
            Applied::Blocked
        );
        let waiting = tokio::spawn(async move {
            let reply = other.execute(&select("lock")).await;
            (other, reply)
        });

        // wait_timeout passes: the model closes c0 and hands the row to c1; the real server
        // does the same on its own clock, which the waiting statement's reply tells.
        t.mono_ms += 1_000;
        t.wall_ms += 1_000;
        model.tick(t, &mut notices);
        let [Notice::Closed { conn }, Notice::Reply { conn: woken, reply }] = notices.as_slice()
        else {
            panic!("the model did not close the idle connection: {notices:?}");
        };
        assert_eq!((*conn, *woken), (c0, c1));
        let (mut other, real) = tokio::time::timeout(REPLY_WITHIN, waiting)
            .await
            .expect("the waiting statement gets the row")
            .unwrap();
        assert_eq!(gist(&real.unwrap()), gist(reply));
        notices.clear();

        let expected = model_reply(model.apply(c0, &Statement::Commit, t, &mut notices));
        assert_eq!(expected, Err(SqlError::ServerGone));
        assert_eq!(
            store.execute(Statement::Commit).await,
            Ok(Err(SqlError::ServerGone))
        );

        // The store connects again; its SELECT waits for c1's row lock until c1 rolls back.
        let c0 = model.connect(t);
        assert_eq!(
            model.apply(c0, &select("lock"), t, &mut notices),
            Applied::Blocked
        );
        let (real, ()) = tokio::join!(store.execute(select("lock")), async {
            loop {
                let status: Option<(String, String, String)> = monitor
                    .conn_mut()
                    .query_first("SHOW ENGINE INNODB STATUS")
                    .await
                    .unwrap();
                if status.is_some_and(|(_, _, text)| text.contains("\nLOCK WAIT ")) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(
                other.execute(&Statement::Rollback).await.unwrap(),
                Ok(Outcome::Done { affected: 0 })
            );
        });
        assert_eq!(
            model.apply(c1, &Statement::Rollback, t, &mut notices),
            Applied::Reply(Ok(Outcome::Done { affected: 0 }))
        );
        let [Notice::Reply { conn, reply }] = notices.as_slice() else {
            panic!("the rollback did not wake c0: {notices:?}");
        };
        assert_eq!(*conn, c0);
        assert_eq!(gist(&real.unwrap()), gist(reply));
    });
}

/// Connections the server has open for clients (not its own threads).
async fn client_connections(monitor: &mut Session) -> usize {
    let ids: Vec<u64> = monitor
        .conn_mut()
        .query("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Daemon'")
        .await
        .unwrap();
    ids.len()
}

#[test]
fn a_connect_given_up_on_while_the_server_is_stopped_leaves_no_connection_behind() {
    // The server is stopped (SIGSTOP): the kernel accepts a connect but nobody greets, so the
    // store's connects time out; each gives up and closes its socket. When the server resumes,
    // it finds those sockets closed and keeps no connection for them: nothing waits for
    // wait_timeout (an hour here). The simulated client says so explicitly (AbandonConnect):
    // before it did, a long server pause left thousands of idle connections in the model.
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let (launcher, addr, runtime) = start_server(3600, NEVER_S);
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let mut monitor = Session::open(addr).await.unwrap();
        let before = client_connections(&mut monitor).await;
        let store = RealMysql::new(
            addr,
            Duration::from_millis(300),
            Duration::from_secs(NEVER_S),
            PauseGate::new(),
        );
        launcher.borrow_mut().pause(0).unwrap();
        for _ in 0..3 {
            let reply = store.execute(select("r")).await;
            assert!(
                matches!(reply, Err(StoreError::Timeout)),
                "a stopped server never greets: {reply:?}"
            );
        }
        launcher.borrow_mut().resume(0).unwrap();
        // The server reads the closed sockets when it runs again; give it up to a minute.
        let mut now = before + 3;
        for _ in 0..600 {
            now = client_connections(&mut monitor).await;
            if now == before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(now, before, "connections left by the connects given up on");
    });
}
