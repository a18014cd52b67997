//! Redlock under faults: seed 002's story, Kleppmann's clock and pause arguments, and the
//! conditions under which antirez argues it is safe.

mod common;

use common::scenario_file;
use lockcheck_core::verdict::Coverage;

use common::search::find;
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{KeyChange, Op};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Fault, Params};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::{explore, Exploration, ExploreOptions, Finding};
use lockcheck_sim::run;

/// The masters on which `token` was written.
fn masters_holding(finding: &Finding, token: &str) -> Vec<String> {
    finding
        .outcome
        .history
        .entries
        .iter()
        .filter(|e| {
            matches!(&e.op, Op::Key { change: KeyChange::Set, value: Some(v), .. } if v == token)
        })
        .map(|e| e.node.clone())
        .collect()
}

#[test]
fn seed_002_immediate_restart_without_persistence_gives_two_holders() {
    // Three masters. client-1 locks redis-1 + redis-2 (redis-0 is cut off); redis-1 crashes and
    // comes back at once, empty; client-0 locks redis-0 + redis-1 while client-1 still works.
    let outcome = run(&scenario_file("redlock-seed-002-restart.json"));
    let v = &outcome.violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].kind, ViolationKind::MutualExclusion);
    assert_eq!(v[0].clients.len(), 2);
}

#[test]
fn seed_002_with_a_partition_that_holds_messages_is_safe_as_it_is_over_tcp() {
    // The same file, but the partition holds what is sent across it until the heal, as a TCP
    // connection retransmits (and as real mode's proxies do): the SETs sent to redis-0 during
    // the cut land after it, and the run is safe, as `lockcheck real` finds it
    // (real/tests/redis.rs). With the messages lost, it is UNSAFE (the test above).
    let keys_on_redis_0 = |hold: bool| {
        let mut s = scenario_file("redlock-seed-002-restart.json");
        let Fault::Partition { hold: h, .. } = &mut s.faults[0] else {
            panic!("the file's first fault is its partition");
        };
        *h = hold;
        let outcome = run(&s);
        let written: Vec<u64> = outcome
            .history
            .entries
            .iter()
            .filter(|e| {
                e.node == "redis-0"
                    && matches!(
                        &e.op,
                        Op::Key {
                            change: KeyChange::Set,
                            ..
                        }
                    )
            })
            .map(|e| e.true_ns / 1_000_000)
            .collect();
        (outcome.violated(), written)
    };
    let (violated, written) = keys_on_redis_0(true);
    assert!(!violated);
    // Nothing reached redis-0 while it was cut off (1 ms to 1001 ms); what was held arrived
    // within a latency of the heal.
    assert!(written.iter().all(|&ms| ms >= 1_001), "{written:?}");
    assert!(
        written.iter().any(|&ms| (1_001..1_011).contains(&ms)),
        "{written:?}"
    );
    // Lost: nothing arrives late, and the run is UNSAFE. (A write can still land within a
    // latency of the heal: an attempt that begins just as the cut heals.)
    let (violated, written) = keys_on_redis_0(false);
    assert!(violated);
    assert!(written.iter().all(|&ms| ms >= 1_001), "{written:?}");
}

#[test]
fn seed_002_restart_delayed_past_the_ttl_is_safe() {
    let outcome = run(&scenario_file("redlock-seed-002-delayed-restart.json"));
    assert!(!outcome.violated(), "{:?}", outcome.violations);
}

#[test]
fn a_forward_clock_jump_on_a_master_of_the_holders_quorum_breaks_redlock() {
    let finding = find(&ExploreOptions::new(
        Algorithm::Redlock,
        vec![FaultProfile::ClockJump],
        500,
        1,
    ));
    // The shrunk schedule keeps one master's jump; a client's jump of a millisecond may stay
    // beside it when removing it moves every later event (the search shrinks to a local
    // minimum, not to the smallest story).
    let masters: Vec<_> = finding
        .scenario
        .faults
        .iter()
        .filter(|f| !f.nodes().iter().all(|n| n.starts_with("client-")))
        .collect();
    let [Fault::ClockJump { node, by_ms, .. }] = masters.as_slice() else {
        panic!("not a single master's jump: {:?}", finding.scenario.faults);
    };
    assert!(*by_ms > 0, "a forward jump");
    let holder_token = &finding.outcome.violations[0].tokens[0];
    let quorum = masters_holding(&finding, holder_token);
    assert!(
        quorum.contains(node),
        "{node} jumped, but the holder's quorum was {quorum:?}"
    );
}

/// Two clients; client-1 is cut off for the first second so client-0 acquires alone.
fn client_0_alone_first() -> Scenario {
    let mut s = Scenario::new(Algorithm::Redlock);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 2_000;
    s.duration_ms = 40_000;
    s.faults = vec![Fault::Partition {
        at_ms: 0,
        isolate: vec!["client-1".into()],
        for_ms: 1_000,
        hold: false,
        from: None,
    }];
    s
}

#[test]
fn a_holder_paused_after_acquiring_past_its_validity_breaks_redlock() {
    let mut s = client_0_alone_first();
    s.faults.push(Fault::Pause {
        at_ms: 500,
        node: "client-0".into(),
        for_ms: 12_000,
    });
    let outcome = run(&s);
    assert!(outcome.violated());
    assert_eq!(outcome.violations[0].clients[0], "client-0");
}

#[test]
fn a_pause_before_the_acquisition_completes_is_caught_by_the_elapsed_time_check() {
    // Clients start at 2 ms; a send waits 1 ms in madsim before its 1–10 ms of latency, so
    // client-0's SETs leave at ~3 ms and no reply can be back before ~6 ms. It is frozen at 4 ms
    // for 12 s. When it wakes, a majority said OK but the TTL is spent: it must not use
    // the lock.
    let mut s = client_0_alone_first();
    s.faults.push(Fault::Pause {
        at_ms: 4,
        node: "client-0".into(),
        for_ms: 12_000,
    });
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let history = &outcome.history.entries;
    let first_token_sets = history
        .iter()
        .filter(|e| {
            e.true_ns < 12_000_000_000
                && matches!(&e.op, Op::Key { change: KeyChange::Set, by: Some(b), .. } if b == "client-0")
        })
        .count();
    assert!(
        first_token_sets >= 3,
        "a majority accepted before the pause"
    );
    let first_ok = history
        .iter()
        .find(|e| e.node == "client-0" && e.kind == lockcheck_core::history::Kind::Ok)
        .expect("client-0 acquires eventually");
    assert!(
        first_ok.true_ns > 12_000_000_000,
        "the lock acquired before the pause was never reported as held"
    );
}

#[test]
fn drift_within_the_factor_and_delayed_restarts_never_break_redlock() {
    // Partitions are not in this list any more: since searches draw partitions that hold the
    // holder's write (TCP) and deliver it after its lease, they find the delayed write, which
    // no lock prevents without a fencing token and Redlock cannot have one (Kleppmann, 2016).
    let options = ExploreOptions {
        max_drift: 0.005,
        ..ExploreOptions::new(
            Algorithm::Redlock,
            vec![FaultProfile::ClockDrift, FaultProfile::CrashDelayedRestart],
            2_000,
            3,
        )
    };
    match explore(&options, &|_| {}).expect("exploration runs") {
        Exploration::NotFound(Coverage { cases, .. }) => assert_eq!(cases, 2_000),
        Exploration::Found(f) => panic!(
            "{}\n{}",
            f.outcome.violations[0].story,
            f.scenario.to_json()
        ),
    }
}

#[test]
fn redlock_refuses_fencing_and_even_master_counts() {
    let mut s = Scenario::new(Algorithm::Redlock);
    s.params.fencing = true;
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("fencing") && e.contains("random"), "{e}");
    s.params = Params {
        nodes: Some(4),
        ..Params::default()
    };
    assert!(s.validate().unwrap_err().to_string().contains("odd"));
    s.params.allow_even_nodes = true;
    s.validate()
        .expect("an even count is allowed when asked for");
}

#[test]
fn a_minority_of_masters_down_does_not_stop_acquisitions_but_a_majority_does() {
    let crash = |node: &str| Fault::Crash {
        at_ms: 0,
        node: node.into(),
        scope: lockcheck_core::scenario::CrashScope::Machine,
    };
    let mut s = Scenario::new(Algorithm::Redlock);
    s.duration_ms = 20_000;
    s.faults = vec![crash("redis-0"), crash("redis-1")];
    let minority = run(&s);
    assert!(!minority.violated());
    let a = minority.availability;
    assert_eq!(a.all_reachable.attempts, 0);
    assert!(a.minority_unreachable.acquired >= 6, "{a:?}");

    s.faults.push(crash("redis-2"));
    let majority = run(&s).availability;
    assert!(majority.majority_unreachable.attempts > 0);
    assert_eq!(majority.majority_unreachable.acquired, 0, "{majority:?}");
}

#[test]
fn per_node_settings_fix_seed_002_on_the_master_that_restarts() {
    use lockcheck_core::scenario::{NodeParams, Persistence};
    let unsafe_story = scenario_file("redlock-seed-002-restart.json");
    for fix in [
        NodeParams {
            restart_delay_ms: Some(10_000),
            ..NodeParams::default()
        },
        NodeParams {
            persistence: Some(Persistence::Always),
            ..NodeParams::default()
        },
    ] {
        let mut s = unsafe_story.clone();
        s.params.per_node.insert("redis-1".into(), fix.clone());
        let outcome = run(&s);
        assert!(!outcome.violated(), "{fix:?}: {:?}", outcome.violations);
        // The same setting on a master that does not restart changes nothing.
        let mut elsewhere = unsafe_story.clone();
        elsewhere.params.per_node.insert("redis-2".into(), fix);
        assert!(run(&elsewhere).violated());
    }
    let mut s = unsafe_story;
    s.params
        .per_node
        .insert("client-0".into(), NodeParams::default());
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("not a server"));
}
