//! A client library's declared lease (`lockcheck real --client-lease-ms`) is what the liveness
//! checks judge by: a waiter that waits three times the lease lockcheck gave, on a lock nobody
//! holds, is STUCK under that lease and not under a longer one the library declares.

use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{History, Kind, Op};
use lockcheck_core::{Algorithm, Outcome, Scenario};

const S: u64 = 1_000_000_000;

/// single-redis with a 10 s TTL: client-0 takes the lock and releases it at 1 s; client-1 asks
/// at 1.5 s and is never answered until the history ends at 31.5 s (three leases later), with
/// the lock free and every server up all along.
fn scenario_and_history() -> (Scenario, History) {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(10_000);
    let mut h = History::default();
    let acquire = |token: Option<&str>| Op::Acquire {
        token: token.map(str::to_string),
        fence: None,
        valid_ns: None,
        error: None,
        shared: false,
    };
    let release = Op::Release {
        token: "t0".into(),
        error: None,
    };
    h.push(S / 10, "client-0", 0, Kind::Invoke, acquire(None));
    h.push(S / 5, "client-0", 0, Kind::Ok, acquire(Some("t0")));
    h.push(S, "client-0", 0, Kind::Invoke, release.clone());
    h.push(S, "client-0", 0, Kind::Ok, release);
    h.push(3 * S / 2, "client-1", 0, Kind::Invoke, acquire(None));
    h.push(
        31 * S + S / 2,
        "client-0",
        0,
        Kind::Observe,
        Op::Note { text: "end".into() },
    );
    (s, h)
}

#[test]
fn a_declared_lease_longer_than_the_given_one_moves_the_stuck_bound() {
    let (s, h) = scenario_and_history();
    let given = Outcome::of(h.clone(), &s);
    let stuck: Vec<_> = given
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::Stuck)
        .collect();
    assert_eq!(stuck.len(), 1, "{:#?}", given.violations);
    assert_eq!(stuck[0].clients, vec!["client-1"]);
    assert!(!stuck[0].story.contains("declared"), "{}", stuck[0].story);

    let declared = Outcome::of_with_lease(h.clone(), &s, 60_000);
    assert!(
        declared
            .violations
            .iter()
            .all(|v| v.kind != ViolationKind::Stuck),
        "a 60 s lease allows a 120 s wait: {:#?}",
        declared.violations
    );
    assert_eq!(declared.history, given.history);

    // A declared lease shorter than the given one judges by it too, and says so.
    let short = Outcome::of_with_lease(h, &s, 5_000);
    let stuck: Vec<_> = short
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::Stuck)
        .collect();
    assert_eq!(stuck.len(), 1, "{:#?}", short.violations);
    assert_eq!(stuck[0].at_ns, 11 * S + S / 2, "10 s after client-1 asked");
    assert!(
        stuck[0]
            .story
            .contains("judged by the client's declared lease, 5000 ms, not the 10000 ms"),
        "{}",
        stuck[0].story
    );
}
