//! redis-fair in simulation: waiters are granted in queue order, and it is still a lease lock.

mod common;

use common::scenario_file;
use lockcheck_core::verdict::Coverage;

use lockcheck_core::checker::{fifo, Liveness, ViolationKind};
use lockcheck_core::history::{KeyChange, Op};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::{explore, Exploration, ExploreOptions};
use lockcheck_sim::run;

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
    assert!(fifo(h, &Liveness::of(&s)).is_empty());
}

#[test]
fn no_faults_no_violation_and_fifo_holds_over_generated_cases() {
    let options = ExploreOptions::new(Algorithm::RedisFair, vec![FaultProfile::None], 300, 4);
    match explore(&options, &|_| {}).unwrap() {
        Exploration::NotFound(Coverage { cases, .. }) => assert_eq!(cases, 300),
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

/// Who entered the critical section, in order.
fn entered(s: &Scenario) -> Vec<String> {
    run(s)
        .history
        .entries
        .iter()
        .filter_map(|e| match &e.op {
            Op::Resource {
                client,
                phase: lockcheck_core::history::Phase::Enter,
                accepted: true,
                ..
            } => Some(client.clone()),
            _ => None,
        })
        .collect()
}

/// Story (ORDER): client-0 holds for 2 s; client-1 queues at once and polls. client-2, whose
/// wall clock runs 3 s ahead, asks at 1.5 s: by its clock client-1's place (kept 1 s from its
/// last poll, the scenario's queue timeout) has long lapsed, so its script drops client-1, a
/// live waiter, from the queue and puts client-2 first. At the release client-2 is granted
/// before client-1, which queued 1.4 s earlier: the fair lock's order rests on the clients'
/// clocks. The order check judges who was still polling, not the queue's word, and reports it;
/// with a right clock the order holds (the real server agrees: `real/tests/redis.rs`).
#[test]
fn a_client_whose_clock_runs_ahead_drops_a_live_waiter_and_jumps_the_queue() {
    let s = scenario_file("redis-fair-clock-ahead-jumps-the-queue.json");
    let outcome = run(&s);
    let order: Vec<_> = outcome
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::FifoOrder)
        .collect();
    assert_eq!(order.len(), 1, "{:#?}", outcome.violations);
    assert_eq!(order[0].clients, vec!["client-2"]);
    assert!(
        order[0].story.contains("still polling"),
        "{}",
        order[0].story
    );
    assert_eq!(entered(&s), vec!["client-0", "client-2", "client-1"]);

    let mut right_clock = s.clone();
    right_clock.faults.remove(0);
    assert!(!run(&right_clock).violated());
    assert_eq!(
        entered(&right_clock),
        vec!["client-0", "client-1", "client-2"]
    );
}
