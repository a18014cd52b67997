//! single-redis on a primary with asynchronous replicas: a failover loses the lock (seed 001's
//! high-availability trade-off); `WAIT` narrows the window.

mod common;

use common::scenario_file;

use lockcheck_core::checker::ViolationKind;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Fault, Params, RedisParams};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::{explore, Exploration, ExploreOptions};
use lockcheck_sim::run;

#[test]
fn failover_before_replication_gives_two_holders() {
    // client-0 locks redis-0 at ~10 ms; the primary dies at 40 ms, before the replica's next
    // pull; redis-1 is promoted without the key and client-1 locks it.
    let outcome = run(&scenario_file("single-redis-failover.json"));
    assert_eq!(outcome.violations.len(), 1, "{:?}", outcome.violations);
    assert_eq!(outcome.violations[0].kind, ViolationKind::MutualExclusion);
}

#[test]
fn waiting_for_a_replica_closes_that_window() {
    // The same crash and failover, but the client WAITs for one of two replicas: client-0's
    // acquisition is never confirmed before the crash, so no one works on a lost lock.
    let outcome = run(&scenario_file("single-redis-failover-wait.json"));
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let entered = outcome
        .history
        .entries
        .iter()
        .filter(|e| {
            matches!(
                e.op,
                lockcheck_core::history::Op::Resource {
                    phase: lockcheck_core::history::Phase::Enter,
                    accepted: true,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        entered, 2,
        "both clients still did their work on the new primary"
    );
}

#[test]
fn explore_finds_the_failover_violation() {
    let options = ExploreOptions {
        params: Params {
            redis: RedisParams {
                replicas: 1,
                ..RedisParams::default()
            },
            ..Params::default()
        },
        ..ExploreOptions::new(
            Algorithm::SingleRedis,
            vec![FaultProfile::Failover],
            2_000,
            1,
        )
    };
    let Exploration::Found(f) = explore(&options, &|_| {}).unwrap() else {
        panic!("no failover violation found");
    };
    assert!(f
        .scenario
        .faults
        .iter()
        .any(|x| matches!(x, Fault::Failover { node, .. } if node == "redis-1")));
}

#[test]
fn failover_needs_a_replica() {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.faults = vec![Fault::Failover {
        at_ms: 5,
        node: "redis-0".into(),
    }];
    assert!(s.validate().unwrap_err().to_string().contains("replica"));
    s.params.redis.replicas = 1;
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("already the primary"));
    let options = ExploreOptions::new(Algorithm::SingleRedis, vec![FaultProfile::Failover], 5, 1);
    assert!(explore(&options, &|_| {}).is_err());
}
