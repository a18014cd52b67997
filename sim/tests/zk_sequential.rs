//! zk-sequential (Curator's InterProcessMutex) in simulation: what ZooKeeper buys (no lease to
//! misjudge, sessions on the server's monotonic clock) and what it does not (pauses).

use lockcheck_sim::checker::ViolationKind;
use lockcheck_sim::explore::{explore, Exploration, ExploreOptions, FaultProfile};
use lockcheck_sim::history::{KeyChange, Op};
use lockcheck_sim::scenario::{Fault, Params};
use lockcheck_sim::{run, Algorithm, Scenario};

fn options(profile: FaultProfile, params: Params, cases: u32) -> ExploreOptions {
    ExploreOptions {
        params,
        ..ExploreOptions::new(Algorithm::ZkSequential, vec![profile], cases, 1)
    }
}

fn nothing_found(options: &ExploreOptions) {
    match explore(options, &|_| {}).unwrap() {
        Exploration::NotFound { cases, .. } => assert_eq!(cases, options.cases),
        Exploration::Found(f) => panic!("{:?}\n{}", f.outcome.violations, f.scenario.to_json()),
    }
}

#[test]
fn a_holder_paused_past_its_session_timeout_breaks_zk_sequential() {
    let params = Params::default();
    let Exploration::Found(f) =
        explore(&options(FaultProfile::Pause, params.clone(), 500), &|_| {}).unwrap()
    else {
        panic!("the pause violation was not found");
    };
    assert_eq!(f.outcome.violations[0].kind, ViolationKind::MutualExclusion);
    let [Fault::Pause { node, for_ms, .. }] = f.scenario.faults.as_slice() else {
        panic!("not a single pause: {:?}", f.scenario.faults);
    };
    assert_eq!(
        node, &f.outcome.violations[0].clients[0],
        "the paused client held it"
    );
    assert!(*for_ms > params.session_timeout_ms, "{for_ms} ms");
    // Its session expired on the server, which deleted its node: that is how the lock passed.
    assert!(f.outcome.history.entries.iter().any(|e| matches!(
        &e.op,
        Op::Key {
            change: KeyChange::Expired,
            ..
        }
    )));
}

#[test]
fn fencing_with_the_czxid_makes_pauses_safe() {
    let params = Params {
        fencing: true,
        ..Params::default()
    };
    nothing_found(&options(FaultProfile::Pause, params, 300));
}

#[test]
fn server_crashes_and_clock_jumps_never_break_zk_sequential() {
    nothing_found(&options(FaultProfile::CrashRestart, Params::default(), 300));
    nothing_found(&options(FaultProfile::ClockJump, Params::default(), 300));
    nothing_found(&options(FaultProfile::None, Params::default(), 300));
}

#[test]
fn a_wall_clock_jump_on_the_server_alone_never_expires_a_session() {
    // client-0 holds the lock for 25 s; the server's wall clock leaps a minute ahead, then back.
    let mut s = Scenario::new(Algorithm::ZkSequential);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 25_000;
    s.faults = vec![
        Fault::ClockJump {
            at_ms: 1_000,
            node: "zk-0".into(),
            by_ms: 60_000,
        },
        Fault::ClockJump {
            at_ms: 5_000,
            node: "zk-0".into(),
            by_ms: -120_000,
        },
    ];
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let expired = outcome
        .history
        .entries
        .iter()
        .filter(|e| {
            matches!(
                &e.op,
                Op::Key {
                    change: KeyChange::Expired,
                    ..
                }
            )
        })
        .count();
    assert_eq!(expired, 0, "no session expired");
}

#[test]
fn zk_sequential_rejects_settings_it_cannot_honour() {
    let mut s = Scenario::new(Algorithm::ZkSequential);
    s.params.session_timeout_ms = 1_000;
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("session_timeout_ms"));
    s.params.session_timeout_ms = 10_000;
    s.params.nodes = Some(3);
    assert!(s.validate().unwrap_err().to_string().contains("ensembles"));
}

#[test]
fn the_lock_passes_in_the_order_the_server_created_the_nodes() {
    let path = format!(
        "{}/tests/scenarios/zk-sequential-contention.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let s = Scenario::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let grants = outcome
        .history
        .entries
        .iter()
        .filter(|e| {
            e.kind == lockcheck_sim::history::Kind::Ok
                && e.node != "probe"
                && matches!(&e.op, Op::Acquire { token: Some(t), .. } if t.starts_with("/lock/"))
        })
        .count();
    assert_eq!(
        grants, 6,
        "three clients, two sections each, all judged by sequence_order"
    );
    assert!(lockcheck_sim::checker::sequence_order(&outcome.history.entries).is_empty());
}
