//! Verdicts that were wrong after server restarts, each pinned by its story (issue 14): a
//! restart must neither hide a later violation nor invent one. Scenario files are under
//! `tests/scenarios/`; `lockcheck run FILE` tells each story.

mod common;

use common::{scenario_file, seed_where_first_holder_is};

use common::search::{nothing_found, options};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{CrashScope, Fault, Params};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_sim::run;

fn kinds(s: &Scenario) -> Vec<ViolationKind> {
    run(s).violations.iter().map(|v| v.kind).collect()
}

/// Story: two clients; client-0 takes the ZooKeeper lock; at 1 s the server crashes and restarts
/// at once; at 2 s client-0 is paused for 20 s, past its 10 s session. The restarted server
/// keeps the tree and the sessions (they are on disk) but not the watches; a real client sees
/// its connection reset, reconnects within its session and re-registers its watches
/// (`SetWatches`). So client-1 hears client-0's node go when the session expires, enters, and
/// the paused holder's late write lands inside its section: UNSAFE, as without the restart.
/// Before connections were modelled, client-1 never heard of the restart, its watch died with
/// the server, and lockcheck said "no violation".
#[test]
fn a_zookeeper_restart_does_not_hide_a_later_pause_past_the_session() {
    for algorithm in [
        Algorithm::ZkSequential,
        Algorithm::ZkHerd,
        Algorithm::ZkRwLock,
    ] {
        for file in [
            "zk-holder-pause-no-restart.json",
            "zk-restart-then-holder-pause.json",
            "zk-machine-restart-then-holder-pause.json",
        ] {
            let mut s = scenario_file(file);
            s.algorithm = algorithm;
            if algorithm == Algorithm::ZkRwLock {
                // Writers only: two readers may rightly share the lock.
                s.workload.read_fraction = Some(0.0);
            }
            // The story needs the paused client to be the holder.
            s.seed = seed_where_first_holder_is(&s, "client-0");
            let seed = s.seed;
            assert!(
                kinds(&s).contains(&ViolationKind::MutualExclusion),
                "{file} as {} (seed {seed}): {:?}",
                algorithm.name(),
                run(&s).violations
            );
        }
    }
}

/// The waiter's wake-up after the restart comes from its reconnection: it looks again at once
/// (the Java client delivers the connection's state changes to every watcher), well before the
/// paused holder's session expires, and its re-registered watch fires at the expiry.
#[test]
fn after_a_restart_the_waiter_reconnects_and_is_woken_by_the_expiry() {
    let mut s = scenario_file("zk-restart-then-holder-pause.json");
    // The story needs the paused client to be the holder.
    s.seed = seed_where_first_holder_is(&s, "client-0");
    let outcome = run(&s);
    let watch_fired_at_expiry = outcome.history.entries.iter().any(|e| {
        matches!(&e.op, lockcheck_core::history::Op::Watch { event, to, .. }
            if event == "node_deleted" && to == "client-1")
            && e.true_ns > 2_000_000_000
    });
    assert!(watch_fired_at_expiry, "{:#?}", outcome.history.entries);
}

/// Story: a restarted ZooKeeper server rebuilt its record of which session owns which ephemeral
/// node empty, so nodes deleted by expiries after the restart left no history entry, and the
/// order check flagged a grant that passed a node which was in fact gone. The ownership is on
/// disk (each node's `ephemeralOwner`): every expiry is recorded, and no order violation is left
/// under restarts and pauses (the search found one at once before).
#[test]
fn expiries_after_a_zookeeper_restart_are_recorded_and_no_false_order_violation_is_left() {
    let mut o = options(
        Algorithm::ZkSequential,
        &[FaultProfile::CrashRestart, FaultProfile::Pause],
        Params::default(),
        300,
    );
    o.only = Some(ViolationKind::FifoOrder);
    nothing_found(&o);

    let mut s = scenario_file("zk-restart-then-holder-pause.json");
    s.seed = seed_where_first_holder_is(&s, "client-0");
    let expired = run(&s).history.entries.iter().any(|e| {
        e.node == "zk-0"
            && matches!(&e.op, lockcheck_core::history::Op::Key { change, .. }
                if *change == lockcheck_core::history::KeyChange::Expired)
    });
    assert!(
        expired,
        "the holder's node expired after the restart, on the record"
    );
}

/// Story: a Redis server restarted without persistence comes back empty; the fair lock's queue
/// and hash are gone. Nothing recorded that loss, and the FIFO check kept the lost queue's
/// waiters "waiting" forever, so the next grant looked like a queue jump (a search of redis-fair
/// under delayed restarts reported one at its first case). Losses are recorded now, and a queue
/// that is gone holds nobody.
///
/// The story as a scenario file: client-0 holds, client-1 queues before client-2; the server's
/// process is killed at 1 s and restarted empty at 1.5 s. client-1 is paused from 2 s to 3.5 s,
/// over the attempt it would make first (each waiter attempts again at least every 2.5 s, half
/// its place-keeping deadline), so client-2 asks first after the restart and takes the lock
/// (while client-0 is still inside: UNSAFE, the lost lock), ahead of client-1, whose place went
/// with the queue: no ORDER.
#[test]
fn a_redis_restart_that_loses_the_fair_queue_is_no_order_violation() {
    let s = scenario_file("redis-fair-restart-loses-the-queue.json");
    assert_eq!(kinds(&s), vec![ViolationKind::MutualExclusion]);
    let granted: Vec<String> = run(&s)
        .history
        .entries
        .iter()
        .filter(|e| e.kind == lockcheck_core::history::Kind::Ok)
        .filter(|e| matches!(e.op, lockcheck_core::history::Op::Acquire { .. }))
        .map(|e| e.node.clone())
        .collect();
    assert_eq!(
        granted[..3],
        ["client-0", "client-2", "client-1"],
        "{granted:?}"
    );

    let mut o = options(
        Algorithm::RedisFair,
        &[FaultProfile::CrashDelayedRestart],
        Params::default(),
        300,
    );
    o.only = Some(ViolationKind::FifoOrder);
    nothing_found(&o);
}

/// The order check keeps a waiter dropped from redis-fair's queue in the race when it was still
/// polling; only a clock that disagrees with time drops such a waiter. Without clock faults a
/// search must find no order violation: late messages (a `delay` fault's last delayed poll
/// arrives long after the fault stops delaying, and its deadline is already past), held
/// partitions and crashed clients (a dead process's last push arriving after its successor's
/// first) each made one before the check learned of them.
#[test]
fn without_clock_faults_no_waiter_is_passed_over_in_redis_fair() {
    for profile in [
        FaultProfile::Delay,
        FaultProfile::Partition,
        FaultProfile::Pause,
        FaultProfile::CrashRestart,
    ] {
        let mut o = options(Algorithm::RedisFair, &[profile], Params::default(), 300);
        o.only = Some(ViolationKind::FifoOrder);
        nothing_found(&o);
    }
}

/// A restart without persistence records every key the server lost, so a reader of the history
/// sees the lock vanish at the restart; with `persistence: everysec`, a process crash loses
/// nothing (every write reached the operating system) while a machine crash loses what was not
/// fsynced.
#[test]
fn restarts_record_what_they_lost_and_only_a_machine_crash_loses_unsynced_writes() {
    let lost_after = |scope: CrashScope, persistence: &str| {
        let mut s: Scenario = serde_json::from_str(&format!(
            r#"{{"algorithm": "single-redis", "params": {{"persistence": "{persistence}"}},
                "clients": 1, "workload": {{"acquisitions_per_client": 1, "hold_ms": 3000}},
                "duration_ms": 10000}}"#
        ))
        .unwrap();
        s.faults = vec![
            Fault::Crash {
                at_ms: 1_000,
                node: "redis-0".into(),
                scope,
            },
            Fault::Restart {
                at_ms: 1_000,
                node: "redis-0".into(),
            },
        ];
        run(&s)
            .history
            .entries
            .iter()
            .filter(|e| {
                matches!(&e.op, lockcheck_core::history::Op::Key { key, change, .. }
                    if key == "lock" && *change == lockcheck_core::history::KeyChange::Lost)
            })
            .count()
    };
    assert_eq!(lost_after(CrashScope::Machine, "none"), 1);
    assert_eq!(lost_after(CrashScope::Process, "none"), 1);
    // The lock was written well within the second before the crash: never fsynced.
    assert_eq!(lost_after(CrashScope::Machine, "everysec"), 1);
    assert_eq!(lost_after(CrashScope::Process, "everysec"), 0);
    assert_eq!(lost_after(CrashScope::Machine, "always"), 0);
}

/// `appendfsync everysec` follows Redis 7's rule (`flushAppendOnlyFile`): a write that comes after
/// a quiet second is fsynced at once, and only one that follows an fsync within the second waits
/// for the end of that second. One client takes the lock at ~10 ms (fsynced at 1 s, a second
/// after the server started), releases it at ~1 s (fsynced at 2 s), thinks for 3 s and takes it
/// again at ~4 s, after a quiet second: a machine crash 90 ms later must find the lock on disk.
/// With an fsync on a fixed one-second timer the lock would be lost.
#[test]
fn everysec_fsyncs_a_write_after_a_quiet_second_at_once() {
    let s: Scenario = serde_json::from_str(
        r#"{"algorithm": "single-redis", "params": {"persistence": "everysec"}, "clients": 1,
            "workload": {"acquisitions_per_client": 2, "hold_ms": 1000, "think_ms": 3000},
            "duration_ms": 10000,
            "faults": [
              {"fault": "crash", "at_ms": 4100, "node": "redis-0", "scope": "machine"},
              {"fault": "restart", "at_ms": 4100, "node": "redis-0"}]}"#,
    )
    .unwrap();
    let outcome = run(&s);
    let entries = &outcome.history.entries;
    let second_acquire_ns = entries
        .iter()
        .filter(|e| {
            e.kind == lockcheck_core::history::Kind::Ok
                && matches!(e.op, lockcheck_core::history::Op::Acquire { .. })
        })
        .nth(1)
        .map(|e| e.true_ns)
        .expect("the client acquires twice");
    assert!(
        (2_000_000_000..4_100_000_000).contains(&second_acquire_ns),
        "the story needs the second acquisition after a quiet second and before the crash: {second_acquire_ns} ns"
    );
    let lost = entries.iter().any(|e| {
        matches!(&e.op, lockcheck_core::history::Op::Key { key, change, .. }
            if key == "lock" && *change == lockcheck_core::history::KeyChange::Lost)
    });
    assert!(
        !lost,
        "the lock written after a quiet second was not fsynced at once"
    );
}

/// Story (item 7 of issue 14): client-0 holds `mysql-for-update-held` (its open transaction's
/// row lock) and its process is killed at 1 s. Its kernel closes the socket, MariaDB rolls the
/// transaction back at once, and client-1, blocked in `SELECT … FOR UPDATE`, gets the row within
/// a moment. If instead its machine dies, nobody closes the socket: the row stays locked until
/// the server drops the idle connection at `wait_timeout` (30 s here).
#[test]
fn a_killed_client_releases_a_transaction_lock_at_once_a_dead_machine_only_at_wait_timeout() {
    let second_grant_ms = |file: &str| {
        let mut s = scenario_file(file);
        // The story kills the holder: client-0 must be it.
        s.seed = seed_where_first_holder_is(&s, "client-0");
        let outcome = run(&s);
        assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
        outcome
            .history
            .entries
            .iter()
            .find(|e| {
                e.node == "client-1"
                    && e.kind == lockcheck_core::history::Kind::Ok
                    && matches!(e.op, lockcheck_core::history::Op::Acquire { .. })
            })
            .map(|e| e.true_ns / 1_000_000)
            .expect("client-1 acquires")
    };
    let killed = second_grant_ms("mysql-held-client-process-crash.json");
    let dead_machine = second_grant_ms("mysql-held-client-machine-crash.json");
    assert!((1_000..2_000).contains(&killed), "{killed} ms");
    assert!(
        (30_000..32_000).contains(&dead_machine),
        "{dead_machine} ms"
    );
}

/// Story (item 5): client-0 holds the ZooKeeper lock for 15 s; from 1 s it is cut off from the
/// ZooKeeper server alone for 14.5 s, past its 10 s session, while the resource stays within
/// reach. client-1 gets the lock when the session expires, and client-0's last write lands in
/// its section: UNSAFE. Cut off from everyone (the only partition searches used to draw), its
/// write is lost and nothing is found; with the fencing token the resource turns it away.
#[test]
fn a_holder_cut_off_from_zookeeper_alone_still_writes_past_its_session() {
    let s = scenario_file("zk-holder-cut-off-from-zookeeper-only.json");
    assert_eq!(kinds(&s), vec![ViolationKind::MutualExclusion]);
    let mut everyone = s.clone();
    if let Fault::Partition { from, .. } = &mut everyone.faults[1] {
        *from = None;
    }
    assert_eq!(kinds(&everyone), vec![]);
    let mut fenced = s.clone();
    fenced.params.fencing = true;
    assert_eq!(kinds(&fenced), vec![]);
    assert_eq!(run(&fenced).stale_accesses.len(), 1);
}

/// Story (item 6, Kleppmann's delayed packet): client-0 holds single Redis for 9.5 s of its
/// 10 s lease; from 9 s its messages take 3 s longer. Its last write, sent at 9.5 s, arrives at
/// 12.5 s, after its lease ran out and client-1 entered: UNSAFE. With the fencing token the
/// resource turns the late write away.
#[test]
fn a_write_delayed_past_the_lease_lands_in_the_next_holders_section() {
    let s = scenario_file("single-redis-delayed-write.json");
    assert_eq!(kinds(&s), vec![ViolationKind::MutualExclusion]);
    let mut fenced = s.clone();
    fenced.params.fencing = true;
    assert_eq!(kinds(&fenced), vec![]);
    assert_eq!(run(&fenced).stale_accesses.len(), 1);
}
