//! The simulated MariaDB server as a state machine: row locks that block and wake in order,
//! 1205 after the lock wait timeout, 1062, the gap-lock deadlock, `wait_timeout`, crash recovery
//! under both flush policies, `NOW()` on the server's clock, and resource names as plain data.
//! Time is passed in; nothing here is timed.

use lockcheck_core::scenario::FlushPolicy;
use lockcheck_sim::mysql::model::{
    Applied, ConnId, MysqlConfig, MysqlModel, Notice, Outcome, Row, ServerTime, SqlError,
    Statement, MAX_NAME_CHARS,
};

const EPOCH_MS: u64 = 1_700_000_000_000;

/// The server's clocks at monotonic `mono` with an unjumped wall clock.
fn at(mono: u64) -> ServerTime {
    ServerTime {
        wall_ms: EPOCH_MS + mono,
        mono_ms: mono,
    }
}

fn server(config: MysqlConfig) -> MysqlModel {
    MysqlModel::new(config, 0)
}

fn default_server() -> MysqlModel {
    server(MysqlConfig::default())
}

/// Runs a statement; returns what became of it and the notices for others.
fn run(m: &mut MysqlModel, conn: ConnId, st: Statement, t: ServerTime) -> (Applied, Vec<Notice>) {
    let mut notices = Vec::new();
    let applied = m.apply(conn, &st, t, &mut notices);
    (applied, notices)
}

/// Runs a statement that must succeed at once with no notices for others.
fn ok(m: &mut MysqlModel, conn: ConnId, st: Statement, t: ServerTime) -> Outcome {
    match run(m, conn, st.clone(), t) {
        (Applied::Reply(Ok(outcome)), notices) if notices.is_empty() => outcome,
        other => panic!("{st:?}: {other:?}"),
    }
}

/// Runs a statement that must wait.
fn blocked(m: &mut MysqlModel, conn: ConnId, st: Statement, t: ServerTime) {
    assert_eq!(
        run(m, conn, st.clone(), t),
        (Applied::Blocked, vec![]),
        "{st:?}"
    );
}

fn tick(m: &mut MysqlModel, t: ServerTime) -> Vec<Notice> {
    let mut notices = Vec::new();
    m.tick(t, &mut notices);
    notices
}

fn select(name: &str) -> Statement {
    Statement::SelectForUpdate {
        resource: name.into(),
    }
}

fn insert(name: &str, locker: &str) -> Statement {
    Statement::Insert {
        resource: name.into(),
        locker: locker.into(),
        count: 1,
        version: 0,
    }
}

fn claim(name: &str, locker: &str) -> Statement {
    Statement::Claim {
        resource: name.into(),
        locker: locker.into(),
        version: 0,
    }
}

fn delete(name: &str) -> Statement {
    Statement::Delete {
        resource: name.into(),
        locker: None,
    }
}

fn done(affected: u64) -> Outcome {
    Outcome::Done { affected }
}

fn reply(conn: ConnId, outcome: Outcome) -> Notice {
    Notice::Reply {
        conn,
        reply: Ok(outcome),
    }
}

fn row_of(outcome: Outcome) -> Option<Row> {
    match outcome {
        Outcome::Row(row) => row,
        other => panic!("not a row: {other:?}"),
    }
}

fn connect(m: &mut MysqlModel, n: usize) -> Vec<ConnId> {
    (0..n).map(|_| m.connect(at(0))).collect()
}

#[test]
fn a_locking_read_waits_for_the_holder_and_waiters_wake_in_arrival_order() {
    let mut m = default_server();
    let c = connect(&mut m, 4);
    ok(&mut m, c[0], insert("r", "nobody"), at(0));
    ok(&mut m, c[0], Statement::Begin, at(1));
    assert!(row_of(ok(&mut m, c[0], select("r"), at(1))).is_some());
    for (i, conn) in c[1..].iter().enumerate() {
        ok(&mut m, *conn, Statement::Begin, at(2 + i as u64));
        blocked(&mut m, *conn, select("r"), at(2 + i as u64));
    }
    assert_eq!(m.exclusive_holder("r"), Some(c[0]));
    // The holder commits: only the first waiter runs.
    let (applied, notices) = run(&mut m, c[0], Statement::Commit, at(10));
    assert_eq!(applied, Applied::Reply(Ok(done(0))));
    let first = m.row("r").cloned();
    assert_eq!(notices, vec![reply(c[1], Outcome::Row(first))]);
    assert!(m.is_waiting(c[2]) && m.is_waiting(c[3]));
    // The second sees what the first committed.
    assert_eq!(ok(&mut m, c[1], claim("r", "one"), at(11)), done(1));
    let (_, notices) = run(&mut m, c[1], Statement::Commit, at(12));
    let Notice::Reply {
        conn,
        reply: Ok(Outcome::Row(Some(row))),
    } = &notices[0]
    else {
        panic!("{notices:?}");
    };
    assert_eq!(
        (*conn, row.locker.as_str(), notices.len()),
        (c[2], "one", 1)
    );
    // A rollback wakes the next one too.
    let (_, notices) = run(&mut m, c[2], Statement::Rollback, at(13));
    assert_eq!(notices.len(), 1);
    assert!(matches!(&notices[0], Notice::Reply { conn, .. } if *conn == c[3]));
    assert_eq!(m.exclusive_holder("r"), Some(c[3]));
}

#[test]
fn a_new_request_queues_behind_an_earlier_waiter_and_a_held_lock_is_never_waited_for() {
    let mut m = default_server();
    let c = connect(&mut m, 3);
    ok(&mut m, c[0], insert("r", "x"), at(0));
    // c1's duplicate insert leaves it a shared lock on the row.
    ok(&mut m, c[1], Statement::Begin, at(0));
    let (dup, _) = run(&mut m, c[1], insert("r", "y"), at(0));
    assert!(matches!(
        dup,
        Applied::Reply(Err(SqlError::DuplicateEntry { .. }))
    ));
    // c2 waits for an exclusive lock behind it.
    ok(&mut m, c[2], Statement::Begin, at(1));
    blocked(&mut m, c[2], select("r"), at(1));
    // c0 asks for a shared lock: compatible with c1's, but it queues behind c2's request.
    ok(&mut m, c[0], Statement::Begin, at(2));
    blocked(&mut m, c[0], insert("r", "z"), at(2));
    // c1 ends: c2 gets the row, c0 still waits behind it.
    let (_, notices) = run(&mut m, c[1], Statement::Rollback, at(3));
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(matches!(&notices[0], Notice::Reply { conn, .. } if *conn == c[2]));
    assert!(m.is_waiting(c[0]));
    // The holder asking again for what it holds runs at once, though c0 waits for it.
    assert!(row_of(ok(&mut m, c[2], select("r"), at(4))).is_some());
    assert_eq!(ok(&mut m, c[2], claim("r", "two"), at(4)), done(1));
    let (_, notices) = run(&mut m, c[2], Statement::Commit, at(5));
    assert!(
        matches!(&notices[..], [Notice::Reply { conn, reply: Err(SqlError::DuplicateEntry { .. }) }] if *conn == c[0]),
        "{notices:?}"
    );
}

#[test]
fn a_lock_wait_fails_with_1205_after_the_timeout_and_the_transaction_keeps_its_locks() {
    let mut m = server(MysqlConfig {
        lock_wait_timeout_ms: 5_000,
        ..MysqlConfig::default()
    });
    let c = connect(&mut m, 3);
    ok(&mut m, c[0], insert("x", "-"), at(0));
    ok(&mut m, c[0], insert("y", "-"), at(0));
    ok(&mut m, c[0], Statement::Begin, at(0));
    ok(&mut m, c[0], select("x"), at(0));
    ok(&mut m, c[1], Statement::Begin, at(50));
    ok(&mut m, c[1], select("y"), at(50));
    blocked(&mut m, c[1], select("x"), at(100));
    assert_eq!(m.next_deadline_ms(), Some(5_100));
    assert!(tick(&mut m, at(5_099)).is_empty());
    assert_eq!(
        tick(&mut m, at(5_100)),
        vec![Notice::Reply {
            conn: c[1],
            reply: Err(SqlError::LockWaitTimeout)
        }]
    );
    // Only the statement failed: c1's transaction still holds y.
    assert!(m.in_transaction(c[1]) && !m.is_waiting(c[1]));
    assert_eq!(m.exclusive_holder("y"), Some(c[1]));
    ok(&mut m, c[2], Statement::Begin, at(5_200));
    blocked(&mut m, c[2], select("y"), at(5_200));
    let (_, notices) = run(&mut m, c[1], Statement::Rollback, at(5_300));
    assert_eq!(notices.len(), 1);
    assert!(matches!(&notices[0], Notice::Reply { conn, reply: Ok(_) } if *conn == c[2]));
    // x stayed c0's throughout.
    assert_eq!(m.exclusive_holder("x"), Some(c[0]));
}

#[test]
fn inserting_an_existing_name_fails_with_1062_and_waits_for_an_uncommitted_insert_of_it() {
    let mut m = default_server();
    let c = connect(&mut m, 2);
    assert_eq!(ok(&mut m, c[0], insert("r", "a"), at(0)), done(1));
    let (dup, _) = run(&mut m, c[1], insert("r", "b"), at(1));
    assert_eq!(
        dup,
        Applied::Reply(Err(SqlError::DuplicateEntry {
            entry: "r".into(),
            key: "uk_resource_name".into()
        }))
    );
    // An uncommitted insert of the name: the duplicate check waits for its fate. Committed: 1062.
    ok(&mut m, c[0], Statement::Begin, at(2));
    ok(&mut m, c[0], insert("s", "a"), at(2));
    blocked(&mut m, c[1], insert("s", "b"), at(3));
    let (_, notices) = run(&mut m, c[0], Statement::Commit, at(4));
    assert!(matches!(
        &notices[..],
        [Notice::Reply {
            reply: Err(SqlError::DuplicateEntry { .. }),
            ..
        }]
    ));
    // Rolled back: the waiting insert goes through.
    ok(&mut m, c[0], Statement::Begin, at(5));
    ok(&mut m, c[0], insert("t", "a"), at(5));
    blocked(&mut m, c[1], insert("t", "b"), at(6));
    let (_, notices) = run(&mut m, c[0], Statement::Rollback, at(7));
    assert_eq!(notices, vec![reply(c[1], done(1))]);
    assert_eq!(m.row("t").unwrap().locker, "b");
    // Every insert took an id as it started, the failed and rolled-back ones too.
    let ids: Vec<u64> = ["r", "s", "t"]
        .iter()
        .map(|n| m.row(n).unwrap().id)
        .collect();
    assert_eq!(ids, [1, 3, 6]);
}

#[test]
fn two_transactions_that_found_the_row_missing_deadlock_when_both_insert_it() {
    let mut m = default_server();
    let c = connect(&mut m, 2);
    for conn in &c {
        ok(&mut m, *conn, Statement::Begin, at(0));
        // Gap locks are compatible: neither waits.
        assert_eq!(row_of(ok(&mut m, *conn, select("r"), at(0))), None);
    }
    // The first insert waits for the second's gap lock; the second closes the cycle.
    blocked(&mut m, c[0], insert("r", "a"), at(1));
    let (applied, notices) = run(&mut m, c[1], insert("r", "b"), at(2));
    assert_eq!(applied, Applied::Reply(Err(SqlError::Deadlock)));
    assert_eq!(notices, vec![reply(c[0], done(1))]);
    // The victim's transaction is gone but it is still in transaction mode, holding nothing.
    assert!(m.in_transaction(c[1]));
    blocked(&mut m, c[1], select("r"), at(3));
    let (_, notices) = run(&mut m, c[0], Statement::Commit, at(4));
    let Notice::Reply {
        reply: Ok(Outcome::Row(Some(row))),
        ..
    } = &notices[0]
    else {
        panic!("{notices:?}");
    };
    assert_eq!(row.locker, "a");
}

#[test]
fn innodb_rolls_back_the_lighter_transaction_of_a_deadlock_not_always_the_one_that_closed_it() {
    // c1's failed insert left it a shared lock on the row; c0's autocommit update waits for it
    // (the table's intention lock and its request: 2 structures). c1's own update then closes
    // the cycle holding 3 (intention, shared, and its request): c0 is lighter and is rolled back,
    // and c1's update goes through. (As a real MariaDB 10.11 does: real/tests/mysql_conformance.)
    let mut m = default_server();
    let c = connect(&mut m, 2);
    ok(&mut m, c[0], insert("r", "a"), at(0));
    ok(&mut m, c[1], Statement::Begin, at(0));
    let (applied, _) = run(&mut m, c[1], insert("r", "b"), at(1));
    assert!(matches!(
        applied,
        Applied::Reply(Err(SqlError::DuplicateEntry { .. }))
    ));
    let update = |locker: &str| Statement::Update {
        resource: "r".into(),
        locker: locker.into(),
        count: 2,
        version: 5,
    };
    blocked(&mut m, c[0], update("a"), at(2));
    let (applied, notices) = run(&mut m, c[1], update("a"), at(3));
    assert_eq!(
        notices,
        vec![Notice::Reply {
            conn: c[0],
            reply: Err(SqlError::Deadlock)
        }]
    );
    assert_eq!(applied, Applied::Reply(Ok(done(1))));
    // On a tie the transaction that closed the cycle is the victim (the classic case above).
}

#[test]
fn a_gap_lock_on_a_missing_name_makes_inserts_of_that_name_wait() {
    let mut m = default_server();
    let c = connect(&mut m, 3);
    ok(&mut m, c[0], Statement::Begin, at(0));
    assert_eq!(row_of(ok(&mut m, c[0], select("r"), at(0))), None);
    blocked(&mut m, c[1], insert("r", "b"), at(1));
    // Another name is not in the model's gap (a coarser gap than InnoDB's; see the model).
    assert_eq!(ok(&mut m, c[2], insert("q", "c"), at(2)), done(1));
    let (_, notices) = run(&mut m, c[0], Statement::Rollback, at(3));
    assert_eq!(notices, vec![reply(c[1], done(1))]);
    // UPDATE and DELETE of a missing name lock the gap too.
    ok(&mut m, c[0], Statement::Begin, at(4));
    assert_eq!(ok(&mut m, c[0], delete("z"), at(4)), done(0));
    assert_eq!(ok(&mut m, c[0], claim("w", "a"), at(4)), done(0));
    blocked(&mut m, c[1], insert("z", "b"), at(5));
    blocked(&mut m, c[2], insert("w", "c"), at(5));
    let (_, notices) = run(&mut m, c[0], Statement::Commit, at(6));
    assert_eq!(notices, vec![reply(c[1], done(1)), reply(c[2], done(1))]);
}

#[test]
fn a_deleted_but_uncommitted_row_makes_locking_readers_wait_for_its_fate() {
    let mut m = default_server();
    let c = connect(&mut m, 2);
    ok(&mut m, c[0], insert("r", "a"), at(0));
    ok(&mut m, c[0], Statement::Begin, at(1));
    assert_eq!(ok(&mut m, c[0], delete("r"), at(1)), done(1));
    ok(&mut m, c[1], Statement::Begin, at(2));
    blocked(&mut m, c[1], select("r"), at(2));
    let (_, notices) = run(&mut m, c[0], Statement::Rollback, at(3));
    assert!(matches!(
        &notices[..],
        [Notice::Reply {
            reply: Ok(Outcome::Row(Some(_))),
            ..
        }]
    ));
    ok(&mut m, c[1], Statement::Commit, at(4));
    // Committed: the waiter finds nothing, and may insert.
    ok(&mut m, c[0], Statement::Begin, at(5));
    ok(&mut m, c[0], delete("r"), at(5));
    ok(&mut m, c[1], Statement::Begin, at(6));
    blocked(&mut m, c[1], select("r"), at(6));
    let (_, notices) = run(&mut m, c[0], Statement::Commit, at(7));
    assert_eq!(notices, vec![reply(c[1], Outcome::Row(None))]);
    assert_eq!(ok(&mut m, c[1], insert("r", "b"), at(8)), done(1));
}

#[test]
fn an_idle_connection_is_closed_after_wait_timeout_and_its_transaction_rolled_back() {
    let mut m = server(MysqlConfig {
        wait_timeout_ms: 10_000,
        lock_wait_timeout_ms: 50_000,
        ..MysqlConfig::default()
    });
    let c = connect(&mut m, 3);
    ok(&mut m, c[0], Statement::Begin, at(0));
    ok(&mut m, c[0], insert("r", "a"), at(0));
    // c1 waits for the row from 1000: a waiting connection is not idle.
    ok(&mut m, c[1], Statement::Begin, at(1_000));
    blocked(&mut m, c[1], select("r"), at(1_000));
    // c2 stays busy.
    for t in [4_000, 8_000] {
        ok(&mut m, c[2], select("other"), at(t));
    }
    assert!(tick(&mut m, at(9_999)).is_empty());
    assert_eq!(
        tick(&mut m, at(10_000)),
        vec![
            Notice::Closed { conn: c[0] },
            reply(c[1], Outcome::Row(None))
        ]
    );
    // The insert was rolled back; the closed connection's next statement gets 2006.
    assert_eq!(m.row("r"), None);
    assert!(!m.is_open(c[0]));
    let (applied, _) = run(&mut m, c[0], Statement::Commit, at(10_001));
    assert_eq!(applied, Applied::Reply(Err(SqlError::ServerGone)));
    ok(&mut m, c[2], select("other"), at(12_000));
    // c1 has been idle since its reply at 10000, c2 since 12000.
    assert_eq!(m.next_deadline_ms(), Some(20_000));
    assert_eq!(
        tick(&mut m, at(21_000)),
        vec![Notice::Closed { conn: c[1] }]
    );
    assert_eq!(
        tick(&mut m, at(22_000)),
        vec![Notice::Closed { conn: c[2] }]
    );
}

#[test]
fn a_client_that_disconnects_while_waiting_is_rolled_back_only_when_its_wait_ends() {
    let mut m = default_server();
    let c = connect(&mut m, 3);
    ok(&mut m, c[0], insert("r", "-"), at(0));
    ok(&mut m, c[0], insert("q", "-"), at(0));
    ok(&mut m, c[0], Statement::Begin, at(0));
    ok(&mut m, c[0], select("r"), at(0));
    ok(&mut m, c[1], Statement::Begin, at(1));
    ok(&mut m, c[1], select("q"), at(1));
    blocked(&mut m, c[1], select("r"), at(1));
    let mut notices = Vec::new();
    m.disconnect(c[1], at(2), &mut notices);
    assert!(notices.is_empty());
    // The server has not noticed: q is still locked.
    ok(&mut m, c[2], Statement::Begin, at(3));
    blocked(&mut m, c[2], select("q"), at(3));
    // The wait ends, the reply cannot be sent, the transaction goes, and q with it.
    let (_, notices) = run(&mut m, c[0], Statement::Commit, at(4));
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(matches!(&notices[0], Notice::Reply { conn, .. } if *conn == c[2]));
    assert!(!m.is_open(c[1]));
}

#[test]
fn begin_inside_a_transaction_commits_it_first() {
    let mut m = default_server();
    let c = connect(&mut m, 2);
    ok(&mut m, c[0], Statement::Begin, at(0));
    ok(&mut m, c[0], insert("r", "a"), at(0));
    ok(&mut m, c[0], Statement::Begin, at(1));
    ok(&mut m, c[0], Statement::Rollback, at(2));
    assert_eq!(m.snapshot().row("r").map(|r| r.locker.as_str()), Some("a"));
    assert_eq!(ok(&mut m, c[1], delete("r"), at(3)), done(1));
}

#[test]
fn a_crash_keeps_every_commit_with_flush_at_commit() {
    let mut m = server(MysqlConfig {
        flush: FlushPolicy::AtCommit,
        ..MysqlConfig::default()
    });
    let c = connect(&mut m, 2);
    ok(&mut m, c[0], insert("kept", "a"), at(100));
    assert_eq!(
        ok(&mut m, c[1], Statement::NextFence, at(150)),
        Outcome::Value(1)
    );
    ok(&mut m, c[1], Statement::Begin, at(200));
    ok(&mut m, c[1], insert("in-flight", "b"), at(200));
    ok(&mut m, c[1], claim("kept", "b"), at(200));
    // The crash comes at once: nothing waits for a flush.
    let disk = m.durable().clone();
    let mut r = MysqlModel::restart(disk, 300);
    assert_eq!(r.row("kept").unwrap().locker, "a");
    assert_eq!(r.row("in-flight"), None);
    // Connections are gone; a new one never reuses an old id.
    let (applied, _) = run(&mut r, c[1], Statement::Commit, at(300));
    assert_eq!(applied, Applied::Reply(Err(SqlError::ServerGone)));
    let fresh = r.connect(at(300));
    assert!(fresh > c[1]);
    // Nothing is locked after recovery, and the counters went on.
    ok(&mut r, fresh, Statement::Begin, at(301));
    assert!(row_of(ok(&mut r, fresh, select("kept"), at(301))).is_some());
    assert_eq!(
        ok(&mut r, fresh, Statement::NextFence, at(301)),
        Outcome::Value(2)
    );
    ok(&mut r, fresh, insert("new", "c"), at(301));
    // The in-flight insert took id 2, but no commit after it put the counter on disk: the id
    // is given again (harmless: the row that had it never existed for anyone else).
    assert_eq!(r.row("new").unwrap().id, 2);
}

#[test]
fn a_crash_loses_the_commits_since_the_last_flush_with_flush_every_second() {
    let mut m = server(MysqlConfig {
        flush: FlushPolicy::EverySecond,
        ..MysqlConfig::default()
    });
    let c = m.connect(at(0));
    ok(&mut m, c, insert("early", "a"), at(100));
    assert_eq!(m.durable().row("early"), None);
    assert_eq!(m.next_deadline_ms(), Some(1_000));
    assert!(tick(&mut m, at(1_000)).is_empty());
    assert!(m.durable().row("early").is_some());
    assert_eq!(m.next_deadline_ms(), Some(2_000));
    ok(&mut m, c, insert("late", "a"), at(1_500));
    assert_eq!(
        ok(&mut m, c, Statement::NextFence, at(1_600)),
        Outcome::Value(1)
    );
    let mut r = MysqlModel::restart(m.durable().clone(), 1_700);
    assert!(r.row("early").is_some());
    assert_eq!(r.row("late"), None);
    // The sequence went back with the lost second: the same token is handed out again.
    let c = r.connect(at(1_700));
    assert_eq!(
        ok(&mut r, c, Statement::NextFence, at(1_700)),
        Outcome::Value(1)
    );
    // Flushes go on from the restart.
    assert_eq!(r.next_deadline_ms(), Some(2_000));
}

#[test]
fn now_is_the_servers_wall_clock_when_the_statement_started() {
    let mut m = default_server();
    let c = connect(&mut m, 2);
    ok(&mut m, c[0], insert("r", "a"), at(0));
    assert_eq!(m.row("r").unwrap().update_time_ms, EPOCH_MS);
    let take = |mono: u64, wall: u64| {
        (
            Statement::TakeOver {
                resource: "r".into(),
                locker: "b".into(),
                version: 9,
                ttl_ms: 10_000,
            },
            ServerTime {
                wall_ms: EPOCH_MS + wall,
                mono_ms: mono,
            },
        )
    };
    // Not strictly older than the lease: kept.
    for wall in [5_000, 10_000] {
        let (st, t) = take(wall, wall);
        assert_eq!(ok(&mut m, c[1], st, t), done(0));
    }
    // The database's clock jumps 20 s at monotonic 10 001: the lease is over by ITS clock.
    let (st, t) = take(10_001, 30_001);
    assert_eq!(ok(&mut m, c[1], st, t), done(1));
    let row = m.row("r").unwrap().clone();
    assert_eq!(
        (row.locker.as_str(), row.version, row.reentrant_cnt),
        ("b", 9, 1)
    );
    assert_eq!(
        (row.create_time_ms, row.update_time_ms),
        (EPOCH_MS, EPOCH_MS + 30_001)
    );
    // A statement that waited writes the time it started, not the time it ran.
    ok(&mut m, c[0], Statement::Begin, at(40_000));
    ok(&mut m, c[0], select("r"), at(40_000));
    blocked(&mut m, c[1], claim("r", "c"), at(41_000));
    run(&mut m, c[0], Statement::Commit, at(45_000));
    assert_eq!(m.row("r").unwrap().update_time_ms, EPOCH_MS + 41_000);
}

#[test]
fn update_reports_changed_rows_and_only_touches_the_lockers_row() {
    let mut m = default_server();
    let c = m.connect(at(0));
    ok(&mut m, c, insert("r", "a"), at(0));
    let update = |locker: &str, count| Statement::Update {
        resource: "r".into(),
        locker: locker.into(),
        count,
        version: 0,
    };
    assert_eq!(ok(&mut m, c, update("b", 5), at(1)), done(0));
    assert_eq!(ok(&mut m, c, update("a", 5), at(1)), done(1));
    // The same values in the same millisecond change nothing.
    assert_eq!(ok(&mut m, c, update("a", 5), at(1)), done(0));
    assert_eq!(m.row("r").unwrap().reentrant_cnt, 5);
    let mine = Statement::Delete {
        resource: "r".into(),
        locker: Some("b".into()),
    };
    assert_eq!(ok(&mut m, c, mine, at(2)), done(0));
    assert!(m.row("r").is_some());
}

#[test]
fn resource_names_are_plain_data() {
    let mut m = default_server();
    let c = m.connect(at(0));
    let longest = "x".repeat(MAX_NAME_CHARS);
    let wide = "é".repeat(MAX_NAME_CHARS);
    assert_eq!((longest.len(), wide.len()), (255, 510));
    let names: Vec<String> = [
        "it's",
        "'",
        "a\"b",
        "back\\slash",
        "\\'",
        "100%",
        "%",
        "a_b",
        "a%b",
        "_",
        "",
        "Lock",
        "lock",
        "lock ",
        "x'); DROP TABLE lock_table; --",
        &longest,
        &wide,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (i, name) in names.iter().enumerate() {
        let st = Statement::Insert {
            resource: name.clone(),
            locker: format!("locker-{i}"),
            count: 1,
            version: i as u64,
        };
        assert_eq!(ok(&mut m, c, st, at(i as u64)), done(1), "{name:?}");
    }
    // Each name is its own row: no case folding, no trailing-space padding, no wildcards.
    for (i, name) in names.iter().enumerate() {
        let row = row_of(ok(&mut m, c, select(name), at(100))).unwrap();
        assert_eq!((&row.resource_name, row.version), (name, i as u64));
    }
    assert_eq!(ok(&mut m, c, delete("%"), at(101)), done(1));
    assert_eq!(ok(&mut m, c, delete("_"), at(101)), done(1));
    assert_eq!(m.snapshot().rows().count(), names.len() - 2);
    assert!(m.row("100%").is_some() && m.row("a_b").is_some() && m.row("a%b").is_some());
    // One character more than the column holds is refused, and changes nothing.
    let too_long = format!("{longest}x");
    let (applied, _) = run(&mut m, c, insert(&too_long, "l"), at(102));
    assert_eq!(
        applied,
        Applied::Reply(Err(SqlError::DataTooLong {
            column: "resource_name".into()
        }))
    );
    assert_eq!(row_of(ok(&mut m, c, select(&too_long), at(103))), None);
    assert_eq!(m.snapshot().rows().count(), names.len() - 2);
}
