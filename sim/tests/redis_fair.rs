//! redis-fair in simulation: waiters are granted in queue order, and it is still a lease lock.

use lockcheck_sim::checker::{fifo, ViolationKind};
use lockcheck_sim::explore::{explore, Exploration, ExploreOptions, FaultProfile};
use lockcheck_sim::history::{KeyChange, Op};
use lockcheck_sim::{run, Algorithm, Scenario};

#[test]
fn waiters_are_granted_in_the_order_the_server_queued_them() {
    let mut s = Scenario::new(Algorithm::RedisFair);
    s.clients = 4;
    s.workload.acquisitions_per_client = 3;
    s.workload.hold_ms = 500;
    s.duration_ms = 40_000;
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let h = &outcome.history.entries;
    // The check had something to judge: waiters queued, and grants to queued waiters.
    let queued = h
        .iter()
        .filter(|e| {
            matches!(
                e.op,
                Op::Key {
                    change: KeyChange::ListPushed,
                    ..
                }
            )
        })
        .count();
    assert!(queued >= 6, "contention put waiters in the queue: {queued}");
    assert!(fifo(h).is_empty());
}

#[test]
fn no_faults_no_violation_and_fifo_holds_over_generated_cases() {
    let options = ExploreOptions::new(Algorithm::RedisFair, vec![FaultProfile::None], 300, 4);
    match explore(&options, &|_| {}).unwrap() {
        Exploration::NotFound { cases, .. } => assert_eq!(cases, 300),
        Exploration::Found(f) => panic!("{:?}\n{}", f.outcome.violations, f.scenario.to_json()),
    }
}

#[test]
fn a_holder_paused_past_the_lease_breaks_redis_fair() {
    let options = ExploreOptions::new(Algorithm::RedisFair, vec![FaultProfile::Pause], 500, 1);
    let Exploration::Found(f) = explore(&options, &|_| {}).unwrap() else {
        panic!("the pause violation was not found");
    };
    assert_eq!(f.outcome.violations[0].kind, ViolationKind::MutualExclusion);
}
