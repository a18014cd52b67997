//! Liveness stories (issue 14, items 4 and 8): a lock that is free must reach its waiters. The
//! stuck check ([`lockcheck_core::checker::stuck`]) reports a waiter that waits on, with the lock
//! free and the service up and reachable, for longer than a bound; these stories pin
//! both what it must find and what it must not. Scenario files are under `tests/scenarios/`.

mod common;

use common::scenario_file;

use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_sim::run;

/// The clients of each finding of `kind`.
fn found(s: &Scenario, kind: ViolationKind) -> Vec<String> {
    run(s)
        .violations
        .iter()
        .filter(|v| v.kind == kind)
        .map(|v| v.clients[0].clone())
        .collect()
}

/// Acquisitions per client (the probe left out).
fn acquisitions(s: &Scenario) -> Vec<(String, usize)> {
    let outcome = run(s);
    let mut per: std::collections::BTreeMap<String, usize> = Default::default();
    for e in &outcome.history.entries {
        if matches!(e.op, Op::Acquire { .. }) && e.kind == Kind::Ok && e.node != "probe" {
            *per.entry(e.node.clone()).or_default() += 1;
        }
    }
    per.into_iter().collect()
}

/// Story (item 4): client-0 holds the ZooKeeper lock for 5 s; the server's process is killed
/// and restarted at 1 s. client-1's watch died with the server; before connections were
/// modelled it never looked again, and the lock stayed free from 5.1 s to the end of the run
/// unreported. Now client-1 reconnects and re-registers its watch, and is woken at the release.
#[test]
fn after_a_zookeeper_restart_the_waiter_is_woken_by_the_release() {
    for algorithm in [
        Algorithm::ZkSequential,
        Algorithm::ZkHerd,
        Algorithm::ZkRwLock,
    ] {
        let mut s = scenario_file("zk-restart-then-release.json");
        s.algorithm = algorithm;
        let outcome = run(&s);
        assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
        assert_eq!(
            acquisitions(&s),
            vec![("client-0".into(), 1), ("client-1".into(), 1)],
            "{}",
            algorithm.name()
        );
    }
}

/// Story: the holder's release is sent while the ZooKeeper server is down (it is back 8 s
/// later). Every attempt goes unanswered and the lock node stays. Curator's locks delete with
/// `guaranteed()`: the session deletes the node once it has reconnected, and every client gets
/// its three sections. Without that the node stayed for as long as its client lived, and the
/// stuck check found the other client waiting on a free lock.
#[test]
fn curators_guaranteed_delete_frees_a_lock_whose_release_was_lost() {
    for algorithm in [Algorithm::ZkSequential, Algorithm::ZkRwLock] {
        let mut s = scenario_file("zk-release-lost-while-server-down.json");
        s.algorithm = algorithm;
        s.workload.read_fraction = Some(0.0);
        assert_eq!(found(&s, ViolationKind::Stuck), Vec::<String>::new());
        assert_eq!(
            acquisitions(&s),
            vec![("client-0".into(), 3), ("client-1".into(), 3)],
            "{}",
            algorithm.name()
        );
    }
}

/// Story: a fair lock (Redisson's) keeps a waiter's place until a deadline `queue_timeout_ms`
/// (5 s) after its last poll, by the waiter's own wall clock. client-1 holds; client-0 queues
/// first, client-2 behind it; client-0 dies in the queue. From client-1's release the lock is
/// free, but only the head of the queue may take it. With a right clock the dead head's place
/// lapses within the bound (twice the queue timeout, the longest a dead client's claim lasts
/// here); with its clock 30 s ahead it lasts 30 s longer, and client-2 is STUCK (the real server
/// agrees: `real/tests/redis.rs`).
#[test]
fn a_dead_waiter_whose_clock_ran_ahead_blocks_the_fair_queue() {
    let s = scenario_file("redis-fair-dead-waiter-clock-ahead.json");
    assert_eq!(found(&s, ViolationKind::Stuck), vec!["client-2"]);
    let mut right_clock = s.clone();
    right_clock.faults.remove(0);
    assert_eq!(
        found(&right_clock, ViolationKind::Stuck),
        Vec::<String>::new()
    );
}

/// Story: client-0 holds; from 1 s it and the ZooKeeper server are cut off from everyone else
/// for 2.5 s (the sessions ride that out). It releases inside the cut, so the server's watch
/// event to the waiting client-1 crosses the cut. A partition used to lose it like any message,
/// and client-1, whose connection never broke, waited on a free lock for good (the stuck check
/// found it in a search). TCP retransmits an event until it is acknowledged: it arrives at the
/// heal, and client-1 takes the lock (the real server agrees: `real/tests/zookeeper_servers.rs`).
#[test]
fn a_watch_event_sent_across_a_partition_arrives_after_the_heal() {
    let s = scenario_file("zk-watch-event-across-a-partition.json");
    assert_eq!(run(&s).violations, vec![]);
    assert_eq!(
        acquisitions(&s),
        vec![("client-0".into(), 1), ("client-1".into(), 1)]
    );
}

/// When client-1 took the lock, in ms of true time, if it did.
fn client_1_acquired_ms(s: &Scenario) -> Option<u64> {
    run(s)
        .history
        .entries
        .iter()
        .find(|e| e.node == "client-1" && e.kind == Kind::Ok && matches!(e.op, Op::Acquire { .. }))
        .map(|e| e.true_ns / 1_000_000)
}

/// Story (item 8): client-0 takes the lock (client-1 starts 300 ms late) and its process is
/// killed 1 s into its 5 s section, never to come back. The others must get the lock: after
/// the 10 s lease (Redis locks), after the session expires (ZooKeeper: the kill closes no
/// session), at once (a transaction-held MySQL row: the server rolls back on the closed
/// socket). A lock that never ends by itself (seed 001's unique-key row, no lease) is held by
/// the dead client forever: the probe's DEADLOCK.
#[test]
fn a_holder_killed_mid_section_leaves_the_lock_after_its_lease_session_or_socket() {
    for (algorithm, from_ms, to_ms) in [
        (Algorithm::SingleRedis, 10_000, 11_000),
        (Algorithm::Redlock, 9_800, 11_000),
        (Algorithm::RedisFair, 10_000, 11_000),
        (Algorithm::ZkSequential, 7_000, 14_000),
        (Algorithm::ZkHerd, 7_000, 14_000),
        (Algorithm::MysqlForUpdateHeld, 1_000, 1_500),
    ] {
        let mut s = scenario_file("holder-crashes-mid-section.json");
        s.algorithm = algorithm;
        assert_eq!(run(&s).violations, vec![], "{}", algorithm.name());
        let at = client_1_acquired_ms(&s).expect("client-1 gets the lock");
        assert!(
            (from_ms..to_ms).contains(&at),
            "{}: client-1 acquired at {at} ms",
            algorithm.name()
        );
    }
    let mut s = scenario_file("holder-crashes-mid-section.json");
    s.algorithm = Algorithm::MysqlUnique;
    assert_eq!(found(&s, ViolationKind::Deadlock), vec!["probe"]);
    assert_eq!(client_1_acquired_ms(&s), None);
}
