//! `etcd-mutex` on a simulated three-member etcd cluster (`params.nodes: 3`): raft's leader,
//! elections and quorum commits (`sim/src/etcd/cluster.rs`), members that forward proposals
//! and keep-alives to their leader (`sim/src/etcd/member.rs`), and a Go client whose requests
//! go to the members round-robin. The rules' figures are pinned against a real cluster in the
//! unit tests of `cluster.rs` and in `real/tests/etcd_cluster.rs`; these are the runs.

mod common;

use common::scenario_file;
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Entry, Op};
use lockcheck_core::scenario::Fault;
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_sim::run;

/// The members' notes (elected, stepped down), with their true times in ms.
fn notes(history: &[Entry]) -> Vec<(f64, String, String)> {
    history
        .iter()
        .filter_map(|e| match &e.op {
            Op::Note { text } => Some((e.true_ns as f64 / 1e6, e.node.clone(), text.clone())),
            _ => None,
        })
        .collect()
}

fn kinds(s: &Scenario) -> Vec<ViolationKind> {
    run(s).violations.iter().map(|v| v.kind).collect()
}

/// A cluster whose highest member (the leader at the start) is cut off from the other two for
/// 8 s while three clients take turns.
fn leader_isolated() -> Scenario {
    let mut s = Scenario::new(Algorithm::EtcdMutex);
    s.params.nodes = Some(3);
    s.clients = 3;
    s.duration_ms = 40_000;
    s.seed = 1;
    s.faults = vec![Fault::Partition {
        at_ms: 3_000,
        isolate: vec!["etcd-2".into()],
        from: Some(vec!["etcd-0".into(), "etcd-1".into()]),
        for_ms: 8_000,
        hold: true,
    }];
    s
}

/// One seed, one history, on a cluster as everywhere: elections, forwarded proposals and the
/// clients' round-robin draw nothing from outside the seed.
#[test]
fn one_seed_replays_to_an_identical_history_on_a_cluster() {
    let mut s = leader_isolated();
    s.faults.push(Fault::Pause {
        at_ms: 12_000,
        node: "etcd-0".into(),
        for_ms: 2_500,
    });
    let first = run(&s);
    assert_eq!(first.digest(), run(&s).digest());
    assert!(!notes(&first.history.entries).is_empty());
    s.seed = 2;
    assert_ne!(first.digest(), run(&s).digest());
}

/// The leader cut off from both followers (the real cluster: a new leader 0.98-1.80 s into the
/// cut, the old one stepped down by CheckQuorum 1.97 s into it): the followers elect one of
/// themselves within one to two election timeouts, the old leader steps down within two, and
/// at the heal the member cut off, which campaigned alone to a higher term, forces another
/// election. The lock stays safe: every client reaches the majority.
#[test]
fn an_isolated_leader_is_replaced_steps_down_and_forces_an_election_at_the_heal() {
    let s = leader_isolated();
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    let notes = notes(&outcome.history.entries);
    let elected = notes
        .iter()
        .find(|(t, _, n)| *t >= 3_000.0 && n.starts_with("elected"))
        .unwrap_or_else(|| panic!("no election: {notes:?}"));
    assert_ne!(elected.1, "etcd-2");
    assert!(
        (3_900.0..=5_000.0).contains(&elected.0),
        "elected at {} ms: {notes:?}",
        elected.0
    );
    let down = notes
        .iter()
        .find(|(_, m, n)| m == "etcd-2" && n.starts_with("stepped down (CheckQuorum"))
        .unwrap_or_else(|| panic!("etcd-2 never stepped down: {notes:?}"));
    assert!((3_000.0..=5_100.0).contains(&down.0), "{notes:?}");
    assert!(
        notes
            .iter()
            .any(|(t, _, n)| *t >= 11_000.0 && n.contains("a member answered term")),
        "{notes:?}"
    );
}

/// A release sent to a paused member while the leader is elsewhere: the client's request times
/// out, it takes the lock again with the same session (the Go client's mutex finds its own key
/// still there and holds at once), and when the member resumes it forwards the held delete to
/// the leader, which deletes the lock under its holder; the next waiter walks in. On one member
/// the same pause keeps the delete ahead of the acquire (one member answers one connection's
/// requests in order), and nothing happens. With fencing the create revision turns the stale
/// holder away (Jepsen's etcd advice: a lock needs a fencing token).
#[test]
fn a_release_held_at_a_paused_member_is_overtaken_by_the_next_acquire() {
    let cluster = scenario_file("etcd-cluster-release-overtaken.json");
    let found = kinds(&cluster);
    assert!(found.contains(&ViolationKind::FreedWhileHeld), "{found:?}");
    assert!(found.contains(&ViolationKind::MutualExclusion), "{found:?}");
    let one = scenario_file("etcd-release-at-a-paused-member.json");
    assert!(kinds(&one).is_empty());
    let mut fenced = cluster.clone();
    fenced.params.fencing = true;
    let outcome = run(&fenced);
    assert!(
        !outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::MutualExclusion),
        "{:?}",
        outcome.violations
    );
    assert!(!outcome.stale_accesses.is_empty());
}

/// A leader killed and restarted at once: it comes back a follower of no one, the others elect
/// one of themselves within one to two election timeouts of its last heartbeat, and no client's
/// lock is lost (every acknowledged write is the cluster's).
#[test]
fn a_killed_leader_is_replaced_and_the_lock_stays_safe() {
    let mut s = leader_isolated();
    s.faults = vec![
        Fault::Crash {
            at_ms: 3_000,
            node: "etcd-2".into(),
            scope: lockcheck_core::scenario::CrashScope::Process,
        },
        Fault::Restart {
            at_ms: 3_000,
            node: "etcd-2".into(),
        },
    ];
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    let notes = notes(&outcome.history.entries);
    let elected = notes
        .iter()
        .find(|(t, _, n)| *t >= 3_000.0 && n.starts_with("elected"))
        .unwrap_or_else(|| panic!("no election: {notes:?}"));
    assert!((3_800.0..=5_000.0).contains(&elected.0), "{notes:?}");
}

/// An odd cluster is a valid scenario; an even one is refused, naming the quorum it would need.
/// (Real mode refuses any cluster so far: `real/src/support.rs`'s tests.)
#[test]
fn an_even_cluster_is_refused_and_an_odd_one_is_valid() {
    let mut s = leader_isolated();
    assert!(s.validate().is_ok());
    s.params.nodes = Some(4);
    let e = s.validate().unwrap_err().to_string();
    assert!(
        e.contains("a cluster of 4 etcd members needs a quorum of 3"),
        "{e}"
    );
}
