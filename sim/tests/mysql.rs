//! The MySQL locks in simulation (`mysql-row`, `mysql-unique`, `mysql-for-update-held`): what a
//! database buys (durable commits, a server clock for leases, a sequence for fencing tokens) and
//! what it does not (a transaction is a lease too: `wait_timeout` ends it under an idle holder,
//! and a server restart rolls it back; a lock without expiry outlives a holder that died).

mod common;

use common::search::{find, nothing_found, options};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Entry, KeyChange, Op};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Fault, MysqlParams, Params, Persistence};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::ExploreOptions;
use lockcheck_sim::run;

const MYSQL: [Algorithm; 3] = [
    Algorithm::MysqlRow,
    Algorithm::MysqlUnique,
    Algorithm::MysqlForUpdateHeld,
];

fn kinds(violations: &[lockcheck_core::checker::Violation]) -> Vec<ViolationKind> {
    violations.iter().map(|v| v.kind).collect()
}

/// The server's idle-connection timeout in these stories: 5 s.
const WAIT_TIMEOUT_MS: u64 = 5_000;

/// Two clients of `algorithm`; client-0 takes the lock first (client-1 starts half a second
/// later) and works for `hold_ms`.
fn two_clients(algorithm: Algorithm, hold_ms: u64) -> Scenario {
    let mut s = Scenario::new(algorithm);
    s.params.mysql.wait_timeout_ms = Some(WAIT_TIMEOUT_MS);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = hold_ms;
    s.duration_ms = 30_000;
    s.faults = vec![Fault::Pause {
        at_ms: 0,
        node: "client-1".into(),
        for_ms: 500,
    }];
    s
}

fn pause_holder(mut s: Scenario, for_ms: u64) -> Scenario {
    s.faults.push(Fault::Pause {
        at_ms: 600,
        node: "client-0".into(),
        for_ms,
    });
    s
}

#[test]
fn a_holder_idle_past_wait_timeout_loses_the_transaction_held_lock() {
    // Work 2 s, paused 6 s: the connection sat idle for more than wait_timeout, the server
    // closed it and rolled back, and client-1's waiting SELECT … FOR UPDATE got the row.
    let outcome = run(&pause_holder(
        two_clients(Algorithm::MysqlForUpdateHeld, 2_000),
        6_000,
    ));
    assert_eq!(
        kinds(&outcome.violations),
        [ViolationKind::MutualExclusion],
        "{:?}",
        outcome.violations
    );
    assert_eq!(outcome.violations[0].clients, ["client-0", "client-1"]);
    // Paused 2 s: 4 s of silence is within wait_timeout; nothing happens.
    let outcome = run(&pause_holder(
        two_clients(Algorithm::MysqlForUpdateHeld, 2_000),
        2_000,
    ));
    assert!(!outcome.violated(), "{:?}", outcome.violations);
}

#[test]
fn explore_finds_the_wait_timeout_violation_and_fencing_stops_it() {
    let params = Params {
        mysql: MysqlParams {
            wait_timeout_ms: Some(WAIT_TIMEOUT_MS),
            ..MysqlParams::default()
        },
        ..Params::default()
    };
    let f = find(&options(
        Algorithm::MysqlForUpdateHeld,
        &[FaultProfile::Pause],
        params.clone(),
        300,
    ));
    assert_eq!(f.outcome.violations[0].kind, ViolationKind::MutualExclusion);
    let [Fault::Pause { node, for_ms, .. }] = f.scenario.faults.as_slice() else {
        panic!("not a single pause: {:?}", f.scenario.faults);
    };
    assert_eq!(node, &f.outcome.violations[0].clients[0]);
    // The holder's connection was idle for its pause and its work: together past wait_timeout.
    assert!(
        for_ms + f.scenario.workload.hold_ms > WAIT_TIMEOUT_MS,
        "{for_ms} + {}",
        f.scenario.workload.hold_ms
    );

    let fenced = Params {
        fencing: true,
        ..params
    };
    nothing_found(&options(
        Algorithm::MysqlForUpdateHeld,
        &[FaultProfile::Pause],
        fenced,
        300,
    ));
}

#[test]
fn a_mysql_row_without_a_ttl_stays_held_when_its_holder_crashes_a_liveness_failure() {
    let mut s = two_clients(Algorithm::MysqlRow, 5_000);
    s.faults.push(Fault::Crash {
        at_ms: 1_000,
        node: "client-0".into(),
        scope: lockcheck_core::scenario::CrashScope::Machine,
    });
    let outcome = run(&s);
    assert_eq!(
        kinds(&outcome.violations),
        [ViolationKind::Deadlock],
        "never a safety violation: {:?}",
        outcome.violations
    );
    let story = &outcome.violations[0].story;
    assert!(
        story.contains("last held by client-0") && story.contains("crashed at 1000.0 ms"),
        "{story}"
    );
}

#[test]
fn a_forward_jump_of_the_database_clock_breaks_a_mysql_row_lease_and_fencing_rejects_the_stale_holder(
) {
    // A 10 s lease; client-0 works 6 s; the database's clock leaps 20 s ahead after 1 s, so its
    // row looks expired and client-1 takes it over.
    let mut s = two_clients(Algorithm::MysqlRow, 6_000);
    s.params.ttl_ms = Some(10_000);
    s.faults.push(Fault::ClockJump {
        at_ms: 1_000,
        node: "mysql-0".into(),
        by_ms: 20_000,
    });
    let outcome = run(&s);
    assert_eq!(
        kinds(&outcome.violations),
        [ViolationKind::MutualExclusion],
        "{:?}",
        outcome.violations
    );
    s.params.fencing = true;
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    assert_eq!(outcome.stale_accesses.len(), 1, "client-0's exit");
    assert_eq!(outcome.stale_accesses[0].client, "client-0");
}

#[test]
fn server_crashes_with_durable_commits_never_break_the_row_locks() {
    for algorithm in [Algorithm::MysqlRow, Algorithm::MysqlUnique] {
        nothing_found(&ExploreOptions {
            safety_only: true,
            ..options(
                algorithm,
                &[
                    FaultProfile::CrashRestart,
                    FaultProfile::CrashDelayedRestart,
                ],
                Params::default(),
                300,
            )
        });
    }
}

#[test]
fn flushing_the_log_once_a_second_lets_a_crash_hand_a_row_lock_to_two_clients() {
    let params = Params {
        persistence: Some(Persistence::Everysec),
        ..Params::default()
    };
    let f = find(&ExploreOptions {
        safety_only: true,
        ..options(
            Algorithm::MysqlRow,
            &[FaultProfile::CrashRestart],
            params,
            500,
        )
    });
    assert!(f
        .outcome
        .violations
        .iter()
        .any(|v| v.kind == ViolationKind::MutualExclusion));
    // The crash took the committed lock row with it.
    assert!(f.outcome.history.entries.iter().any(|e: &Entry| matches!(
        &e.op,
        Op::Key {
            change: KeyChange::Lost,
            ..
        }
    )));
}

#[test]
fn a_server_restart_rolls_back_a_transaction_held_lock_under_its_holder() {
    // client-0 holds from about 0.15 s; the server crashes and comes back at 0.3 s; client-1
    // asks at 0.5 s and gets the row: the restart rolled client-0's transaction back.
    let mut s = two_clients(Algorithm::MysqlForUpdateHeld, 3_000);
    s.faults.push(Fault::Crash {
        at_ms: 300,
        node: "mysql-0".into(),
        scope: lockcheck_core::scenario::CrashScope::Machine,
    });
    s.faults.push(Fault::Restart {
        at_ms: 300,
        node: "mysql-0".into(),
    });
    let outcome = run(&s);
    assert!(
        kinds(&outcome.violations).contains(&ViolationKind::MutualExclusion),
        "{:?}",
        outcome.violations
    );
    // The fence comes from a sequence, which the restart does not roll back.
    s.params.fencing = true;
    let outcome = run(&s);
    assert!(
        !kinds(&outcome.violations).contains(&ViolationKind::MutualExclusion),
        "{:?}",
        outcome.violations
    );
    assert!(!outcome.stale_accesses.is_empty());
}

#[test]
fn no_faults_no_violation() {
    for algorithm in MYSQL {
        nothing_found(&options(
            algorithm,
            &[FaultProfile::None],
            Params {
                mysql: MysqlParams {
                    wait_timeout_ms: Some(WAIT_TIMEOUT_MS),
                    ..MysqlParams::default()
                },
                ..Params::default()
            },
            200,
        ));
    }
}

#[test]
fn mysql_settings_that_cannot_be_honoured_are_refused() {
    let mut s = Scenario::new(Algorithm::MysqlUnique);
    s.params.ttl_ms = Some(5_000);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("ttl_ms") && e.contains("no lease"), "{e}");
    let mut s = Scenario::new(Algorithm::MysqlRow);
    s.params.persistence = Some(Persistence::None);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("redo log"), "{e}");
    s.params.persistence = None;
    s.params.mysql.lock_wait_timeout_ms = Some(0);
    assert!(s.validate().is_err());
    let mut redis = Scenario::new(Algorithm::SingleRedis);
    redis.params.mysql.lock_wait_timeout_ms = Some(1_000);
    let e = redis.validate().unwrap_err().to_string();
    assert!(e.contains("lock_wait_timeout_ms"), "{e}");
    let mut held = Scenario::new(Algorithm::MysqlForUpdateHeld);
    held.workload.hold_until_validity = true;
    let e = held.validate().unwrap_err().to_string();
    assert!(e.contains("hold_until_validity"), "{e}");
}
