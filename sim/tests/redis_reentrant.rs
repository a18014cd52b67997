//! redis-reentrant (Redisson's RLock) in simulation: nesting keeps the count, the watchdog renews
//! only while held, and a pause past the lease still breaks it.

mod common;

use common::counts;
use lockcheck_core::history::{KeyChange, Kind, Op};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Fault;
use lockcheck_core::verdict::Coverage;
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::{explore, Exploration, ExploreOptions};
use lockcheck_sim::run;

fn nested(depth: u32) -> Scenario {
    let mut s = Scenario::new(Algorithm::RedisReentrant);
    s.workload.reentrant_depth = depth;
    s.workload.acquisitions_per_client = 2;
    s.duration_ms = 30_000;
    s
}

#[test]
fn nested_acquires_and_releases_keep_the_count_and_free_only_at_zero() {
    let outcome = run(&nested(3));
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let c = counts(&outcome.history.entries, "client-0");
    let one_section = [1, 2, 3, 2, 1, 0].map(Some).to_vec();
    assert_eq!(&c[..6], one_section.as_slice());
    assert_eq!(c[6], None, "deleted right after the count reached zero");
    assert_eq!(c.len(), 14, "two sections of three levels: {c:?}");
}

#[test]
fn a_holder_paused_past_the_lease_breaks_redis_reentrant() {
    let options = ExploreOptions::new(Algorithm::RedisReentrant, vec![FaultProfile::Pause], 500, 1);
    let Exploration::Found(f) = explore(&options, &|_| {}).unwrap() else {
        panic!("the pause violation was not found");
    };
    assert!(matches!(
        f.scenario.faults.as_slice(),
        [Fault::Pause { .. }]
    ));
}

#[test]
fn no_faults_no_violation_with_nesting() {
    let options = ExploreOptions::new(Algorithm::RedisReentrant, vec![FaultProfile::None], 300, 2);
    assert!(matches!(
        explore(&options, &|_| {}).unwrap(),
        Exploration::NotFound(Coverage { cases: 300, .. })
    ));
}

#[test]
fn the_watchdog_renews_while_held_and_never_after_release() {
    let mut s = nested(2);
    s.params.watchdog = true;
    s.workload.hold_ms = 25_000;
    s.workload.acquisitions_per_client = 1;
    s.duration_ms = 60_000;
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let h = &outcome.history.entries;
    let released_at = h
        .iter()
        .find(|e| {
            matches!(&e.op, Op::Key { key, change: KeyChange::Deleted, by: Some(b), .. } if b == "client-0" && key == "lock")
        })
        .map(|e| e.true_ns)
        .expect("client-0 freed the lock");
    let renewals_by = |from: u64, to: u64| {
        h.iter()
            .filter(|e| e.true_ns > from && e.true_ns < to)
            .filter(|e| {
                matches!(&e.op, Op::Key { key, change: KeyChange::ExpiryChanged, by: Some(b), .. } if b == "client-0" && key == "lock")
            })
            .count()
    };
    // Held from about 0 s to 25 s on a 10 s lease: renewed every 3.3 s while held...
    assert!(renewals_by(100_000_000, released_at - 100_000_000) >= 6);
    // ...and never after the release (client-0 does not acquire again).
    assert_eq!(renewals_by(released_at, u64::MAX), 0);
    assert!(h
        .iter()
        .filter(|e| e.node == "client-0" && e.kind == Kind::Ok)
        .any(|e| matches!(e.op, Op::Release { .. })));
}
