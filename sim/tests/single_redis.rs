//! single-redis under faults: the known results of the literature, reproduced in simulation.
//! Each test reads like the story it checks.

mod common;

use common::search::{find, nothing_found};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Kind, Op, Phase};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::Report;
use lockcheck_core::scenario::{Fault, Params, Persistence};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::ExploreOptions;
use lockcheck_sim::replay;
use lockcheck_sim::run;

fn options(profile: FaultProfile, params: Params, cases: u32) -> ExploreOptions {
    common::search::options(Algorithm::SingleRedis, &[profile], params, cases)
}

/// A story: two clients, client-0 gets the lock first and holds it for `hold_ms`.
fn two_clients(hold_ms: u64) -> Scenario {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = hold_ms;
    s.duration_ms = 30_000;
    s
}

/// Holds client-1 back for its first 100 ms, so client-0 is the first holder whatever the seed
/// (both start at the same instant, and which runs first is the seed's choice). Stories about
/// "the holder" need to know who it is.
fn client_0_first() -> Fault {
    Fault::Pause {
        at_ms: 0,
        node: "client-1".into(),
        for_ms: 100,
    }
}

#[test]
fn one_seed_replays_to_an_identical_history() {
    let mut s = two_clients(2_000);
    s.workload.acquisitions_per_client = 3;
    s.faults = vec![Fault::Pause {
        at_ms: 500,
        node: "client-0".into(),
        for_ms: 12_000,
    }];
    let a = run(&s);
    let b = run(&s);
    assert!(!a.history.entries.is_empty());
    assert_eq!(a.digest(), b.digest());
    assert_eq!(a.history, b.history);
    let mut other_seed = s.clone();
    other_seed.seed += 1;
    assert_ne!(
        run(&other_seed).digest(),
        a.digest(),
        "the seed must matter"
    );
}

#[test]
fn no_faults_no_violation_over_a_thousand_cases() {
    nothing_found(&options(FaultProfile::None, Params::default(), 1_000));
}

#[test]
fn pause_longer_than_validity_breaks_single_redis_and_the_report_replays() {
    let finding = find(&options(FaultProfile::Pause, Params::default(), 500));
    let v = &finding.outcome.violations[0];
    assert_eq!(v.kind, ViolationKind::MutualExclusion);

    // Shrunk to one pause, of a client that held the lock, longer than what it had left.
    let [Fault::Pause {
        at_ms,
        node,
        for_ms,
    }] = finding.scenario.faults.as_slice()
    else {
        panic!("not a single pause: {:?}", finding.scenario.faults);
    };
    let pause_ns = at_ms * 1_000_000;
    let history = &finding.outcome.history.entries;
    let (acquired_ns, valid_ns) = history
        .iter()
        .rev()
        .filter(|e| &e.node == node && e.kind == Kind::Ok && e.true_ns <= pause_ns)
        .filter_map(|e| match e.op {
            Op::Acquire {
                valid_ns: Some(v), ..
            } => Some((e.true_ns, v)),
            _ => None,
        })
        .next()
        .expect("the paused client had acquired the lock");
    let released_before_pause = history.iter().any(|e| {
        &e.node == node
            && matches!(e.op, Op::Release { .. })
            && e.true_ns > acquired_ns
            && e.true_ns <= pause_ns
    });
    assert!(
        !released_before_pause,
        "the paused client still held the lock"
    );
    // The pause pushed the holder's critical section past its validity: the section ends after
    // acquired + validity, and the same case without the pause is safe.
    let remaining_ns = (acquired_ns + valid_ns).saturating_sub(pause_ns);
    let work_left_ns =
        (acquired_ns + finding.scenario.workload.hold_ms * 1_000_000).saturating_sub(pause_ns);
    assert!(
        for_ms * 1_000_000 + work_left_ns > remaining_ns,
        "pause {for_ms} ms + work left {work_left_ns} ns, validity left {remaining_ns} ns"
    );
    let mut unpaused = finding.scenario.clone();
    unpaused.faults.clear();
    assert!(!run(&unpaused).violated(), "the pause is what breaks it");
    assert_eq!(&v.clients[0], node, "the paused client is the stale holder");

    // The report round-trips through JSON and replays to the identical history.
    let dir = std::env::temp_dir().join(format!("lockcheck-test-{}", std::process::id()));
    let mut report = finding.report(&[FaultProfile::Pause], 1);
    let path = report.write(&dir, "pause").expect("report written");
    let read = Report::read(&path).expect("report read back");
    assert_eq!(read, report);
    let replayed = replay(&read);
    assert!(
        replayed.identical(),
        "diverged at {:?}",
        replayed.first_difference
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn crash_and_immediate_restart_without_persistence_breaks_single_redis() {
    let params = Params {
        persistence: Some(Persistence::None),
        ..Params::default()
    };
    let finding = find(&options(FaultProfile::CrashRestart, params, 500));
    assert_eq!(
        finding.outcome.violations[0].kind,
        ViolationKind::MutualExclusion
    );
    assert!(finding
        .scenario
        .faults
        .iter()
        .any(|f| matches!(f, Fault::Crash { node, .. } if node == "redis-0")));
}

#[test]
fn crash_and_immediate_restart_with_fsync_always_is_safe() {
    let params = Params {
        persistence: Some(Persistence::Always),
        ..Params::default()
    };
    nothing_found(&options(FaultProfile::CrashRestart, params, 300));
}

#[test]
fn forward_clock_jump_on_the_redis_node_breaks_single_redis() {
    // client-0 holds the lock for 5 s; one second in, the server's clock leaps 20 s ahead, the
    // key expires at once, and client-1 walks in while client-0 is still working.
    let mut s = two_clients(5_000);
    s.faults = vec![Fault::ClockJump {
        at_ms: 1_000,
        node: "redis-0".into(),
        by_ms: 20_000,
    }];
    let outcome = run(&s);
    assert!(outcome
        .violations
        .iter()
        .any(|v| v.kind == ViolationKind::MutualExclusion));
    // The same story without the jump is safe.
    s.faults.clear();
    assert!(!run(&s).violated());
    // And explore finds it on its own.
    let finding = find(&options(FaultProfile::ClockJump, Params::default(), 500));
    assert!(finding.scenario.faults.iter().any(
        |f| matches!(f, Fault::ClockJump { node, by_ms, .. } if node == "redis-0" && *by_ms > 0)
    ));
}

#[test]
fn fencing_rejects_the_stale_holder() {
    // client-0 pauses 15 s inside its critical section, longer than the 10 s TTL.
    let mut s = two_clients(2_000);
    s.faults = vec![
        client_0_first(),
        Fault::Pause {
            at_ms: 500,
            node: "client-0".into(),
            for_ms: 15_000,
        },
    ];
    let unfenced = run(&s);
    assert!(
        unfenced.violated(),
        "without fencing the pause breaks the lock"
    );

    s.params.fencing = true;
    let fenced = run(&s);
    assert!(!fenced.violated(), "{:?}", fenced.violations);
    let stale = &fenced.stale_accesses;
    assert!(
        stale.iter().any(|a| a.client == "client-0"),
        "the stale holder's access was rejected: {stale:?}"
    );
    // Both clients were accepted on entry, with growing fencing tokens.
    let fences: Vec<u64> = fenced
        .history
        .entries
        .iter()
        .filter_map(|e| match &e.op {
            Op::Resource {
                phase: Phase::Enter,
                fence: Some(f),
                accepted: true,
                ..
            } => Some(*f),
            _ => None,
        })
        .collect();
    assert!(
        fences.len() >= 2 && fences.windows(2).all(|w| w[0] < w[1]),
        "{fences:?}"
    );
}

#[test]
fn fencing_with_pauses_is_never_found_unsafe() {
    let params = Params {
        fencing: true,
        ..Params::default()
    };
    nothing_found(&options(FaultProfile::Pause, params, 200));
}

#[test]
fn delayed_restart_of_at_least_the_ttl_is_safe_without_persistence() {
    nothing_found(&options(
        FaultProfile::CrashDelayedRestart,
        Params::default(),
        300,
    ));
}

#[test]
fn partitions_never_give_single_redis_two_grants_but_a_held_write_lands_late() {
    // A holder cut off from the server keeps its client-side validity; a request or reply lost in
    // the cut is "maybe applied" and undone. The lock is never granted twice: with the fencing
    // token, nothing is found.
    let fenced = Params {
        fencing: true,
        ..Params::default()
    };
    nothing_found(&options(FaultProfile::Partition, fenced.clone(), 300));
    // Without it, a write the holder sent into a partition that holds messages (TCP) arrives
    // after the lease, inside the next holder's section (Kleppmann's delayed packet); the same
    // with a plain delay.
    let held = find(&options(FaultProfile::Partition, Params::default(), 300));
    assert!(
        matches!(
            held.scenario.faults[..],
            [Fault::Partition { hold: true, .. }]
        ),
        "{}",
        held.scenario.to_json()
    );
    let delayed = find(&options(FaultProfile::Delay, Params::default(), 300));
    assert!(
        matches!(delayed.scenario.faults[..], [Fault::Delay { .. }]),
        "{}",
        delayed.scenario.to_json()
    );
    nothing_found(&options(FaultProfile::Delay, fenced, 300));
}

#[test]
fn message_loss_and_delay_are_deterministic_and_safe() {
    let mut s = two_clients(1_000);
    s.workload.acquisitions_per_client = 4;
    s.faults = vec![
        Fault::Loss {
            at_ms: 0,
            node: "client-0".into(),
            rate: 0.5,
            for_ms: 10_000,
        },
        Fault::Delay {
            at_ms: 0,
            node: "redis-0".into(),
            extra_ms: 30,
            for_ms: 10_000,
        },
    ];
    let a = run(&s);
    assert_eq!(a.digest(), run(&s).digest());
    assert!(!a.violated(), "{:?}", a.violations);
    // Both clients still did all their work. An entry the resource accepted but whose reply
    // was lost does not count for the client, which does that section again: at least 8.
    let entered = a
        .history
        .entries
        .iter()
        .filter(|e| {
            matches!(
                &e.op,
                Op::Resource {
                    phase: Phase::Enter,
                    accepted: true,
                    ..
                }
            )
        })
        .count();
    assert!(entered >= 8, "{entered} critical sections entered");
    assert!(
        !a.history.entries.iter().any(|e| matches!(&e.op,
            Op::Note { text } if text.contains("still running at the run's hard limit"))),
        "a client did not finish its work"
    );
}

#[test]
fn the_watchdog_keeps_a_long_holder_safe_until_a_pause_outlasts_the_ttl() {
    // Work for 25 s on a 10 s lease: only renewal makes that legal.
    let mut s = two_clients(25_000);
    s.duration_ms = 60_000;
    s.params.watchdog = true;
    s.faults = vec![client_0_first()];
    let renewed = run(&s);
    assert!(!renewed.violated(), "{:?}", renewed.violations);
    let renewals = renewed
        .history
        .entries
        .iter()
        .filter(|e| {
            matches!(
                &e.op,
                Op::Key { change: lockcheck_core::history::KeyChange::ExpiryChanged, by: Some(b), .. }
                    if b == "client-0"
            )
        })
        .count();
    assert!(renewals >= 6, "the watchdog renews every TTL/3: {renewals}");

    // Without the watchdog the same work outlives the lease.
    s.params.watchdog = false;
    assert!(run(&s).violated());

    // A GC pause freezes the watchdog with the rest of the process.
    s.params.watchdog = true;
    s.faults.push(Fault::Pause {
        at_ms: 2_000,
        node: "client-0".into(),
        for_ms: 12_000,
    });
    assert!(run(&s).violated());
}

/// The watchdog runs from the acquisition, as Redisson's and python-redis-lock's do, not from
/// the first access: client-0 takes the lock at 9 ms and is paused at 15 ms, while its entry to
/// the resource is on its way, for 6,700 ms, less than the 10 s lease. Its watchdog's first
/// renewal fell due during the pause, so it renews as soon as the process runs again (6.72 s),
/// and nobody else gets the lock. A watchdog started only once the entry was answered would renew
/// first at 10.0 s, after the key expired: two holders, a failure the libraries do not have.
#[test]
fn the_watchdog_renews_from_the_acquisition_so_a_pause_before_the_first_access_is_covered() {
    let mut s = two_clients(15_000);
    s.duration_ms = 40_000;
    s.params.watchdog = true;
    s.faults = vec![
        client_0_first(),
        Fault::Pause {
            at_ms: 15,
            node: "client-0".into(),
            for_ms: 6_700,
        },
    ];
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let history = &outcome.history.entries;
    let entered_in_the_pause = history.iter().any(|e| {
        e.node == "client-0"
            && e.true_ns < 1_000_000_000
            && matches!(
                &e.op,
                Op::Access {
                    phase: Phase::Enter,
                    ..
                }
            )
    });
    assert!(
        entered_in_the_pause,
        "client-0's entry went out before the pause"
    );
    let renewed_on_waking = history.iter().any(|e| {
        (6_715_000_000..6_750_000_000).contains(&e.true_ns)
            && matches!(
                &e.op,
                Op::Key { change: lockcheck_core::history::KeyChange::ExpiryChanged, by: Some(b), .. }
                    if b == "client-0"
            )
    });
    assert!(renewed_on_waking, "client-0's watchdog renews as it wakes");
}

#[test]
fn exploration_is_deterministic() {
    let opts = options(FaultProfile::Pause, Params::default(), 500);
    let a = find(&opts);
    let b = find(&opts);
    assert_eq!(a.scenario, b.scenario);
    assert_eq!(a.outcome.digest(), b.outcome.digest());
    assert_eq!((a.cases, a.shrink_runs), (b.cases, b.shrink_runs));
}

#[test]
fn everysec_persistence_loses_only_the_last_second() {
    use lockcheck_core::scenario::Persistence;
    // client-0 takes the lock at ~10 ms and works for 5 s; redis-0 crashes and restarts at once.
    let crash_at = |at_ms: u64| {
        let mut s = two_clients(5_000);
        s.params.persistence = Some(Persistence::Everysec);
        s.faults = vec![
            Fault::Crash {
                at_ms,
                node: "redis-0".into(),
                scope: lockcheck_core::scenario::CrashScope::Machine,
            },
            Fault::Restart {
                at_ms,
                node: "redis-0".into(),
            },
        ];
        run(&s)
    };
    // At 3 s the lock is on disk (fsynced at 1 s): client-1 still finds it taken.
    assert!(!crash_at(3_000).violated());
    // At 0.5 s the first fsync has not happened: the restarted server has forgotten the lock.
    assert!(crash_at(500).violated());
}

/// Shrinking really shrinks (issue 14): the first failing case of a pause search is shrunk to
/// fewer faults and a shorter workload, with a single pause, no longer than the original's
/// longest, that still breaks the lock. With shrinking switched off the reported scenario would
/// be the original, and this fails.
#[test]
fn shrinking_leaves_a_smaller_case_that_still_fails() {
    let finding = find(&options(FaultProfile::Pause, Params::default(), 200));
    let (shrunk, original) = (&finding.scenario, &finding.original);
    assert!(finding.shrink_runs > 0);
    assert_ne!(
        shrunk, original,
        "the reported case is the first failing case itself"
    );
    let pauses = |s: &Scenario| -> Vec<u64> {
        s.faults
            .iter()
            .filter_map(|f| match f {
                Fault::Pause { for_ms, .. } => Some(*for_ms),
                _ => None,
            })
            .collect()
    };
    assert_eq!(pauses(shrunk).len(), 1, "{}", shrunk.to_json());
    assert!(shrunk.faults.len() <= original.faults.len());
    assert!(pauses(shrunk)[0] <= pauses(original).into_iter().max().unwrap());
    let size = |s: &Scenario| {
        (
            s.faults.len(),
            s.clients,
            s.workload.acquisitions_per_client,
            s.workload.hold_ms + s.workload.think_ms,
        )
    };
    assert!(
        size(shrunk) < size(original),
        "not smaller: {:?} vs {:?}",
        size(shrunk),
        size(original)
    );
    assert!(run(shrunk).violated(), "the shrunk case still fails");
}

/// The watchdog renews every third of the TTL (Redisson's `internalLockLeaseTime / 3`), from
/// the acquisition to the release: a 3 s lease held for 10 s is extended nine times, each
/// renewal one second (plus a round trip) after the one before. (Mutation check: a watchdog
/// renewing every TTL, which lets the lease run out between renewals under any delay, fails
/// this.)
#[test]
fn the_watchdog_renews_every_third_of_the_ttl() {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(3_000);
    s.params.watchdog = true;
    s.clients = 1;
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 10_000;
    s.duration_ms = 20_000;
    s.validate().unwrap();
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    let renewals: Vec<u64> = outcome
        .history
        .entries
        .iter()
        .filter(|e| {
            matches!(&e.op, Op::Key { change: lockcheck_core::history::KeyChange::ExpiryChanged,
                by: Some(by), .. } if by == "client-0")
        })
        .map(|e| e.true_ns / 1_000_000)
        .collect();
    assert_eq!(renewals.len(), 9, "{renewals:?}");
    for gap in renewals.windows(2).map(|w| w[1] - w[0]) {
        assert!(
            (1_000..1_050).contains(&gap),
            "renewals a third of the TTL apart: {renewals:?}"
        );
    }
}

/// Issue 39 item 2, the shrunk story's cause: a holder paused for less than its TTL loses its
/// lock when its watchdog's renewal fell due inside the pause. The story says so — the lock's
/// last renewal and its expiry inside the pause — rather than leave "paused 8.751 s < TTL 10 s"
/// as if a pause under the lease could break it by itself.
#[test]
fn a_story_tells_a_lock_that_expired_inside_a_pause_shorter_than_its_lease() {
    let mut s = two_clients(2_733);
    s.duration_ms = 40_000;
    s.params.watchdog = true;
    s.faults = vec![
        client_0_first(),
        Fault::Pause {
            at_ms: 1_452,
            node: "client-0".into(),
            for_ms: 8_751,
        },
    ];
    let outcome = run(&s);
    assert!(
        outcome.violated(),
        "the renewal due at 3.3 s fell in the pause"
    );
    let story = lockcheck_search::cell::story(&Report::of_run(&s, &outcome));
    assert!(
        story.contains("client-0 paused 8.751 s < TTL 10 s at 1452 ms"),
        "{story}"
    );
    assert!(
        story.contains("(its lock, lock on redis-0, last set or extended at "),
        "{story}"
    );
    assert!(story.contains(" ms, inside the pause)"), "{story}");
    // A pause that no lock expired in tells nothing more.
    s.faults[1] = Fault::Pause {
        at_ms: 1_452,
        node: "client-0".into(),
        for_ms: 1_000,
    };
    let outcome = run(&s);
    let story = lockcheck_search::cell::story(&Report::of_run(&s, &outcome));
    assert!(!story.contains("inside the pause"), "{story}");
}
