//! The search's generator as the differential search uses it: careful clients drawn only when
//! asked for, members of a ZooKeeper ensemble cut off from each other, and stories kept clear of
//! the thresholds their verdicts turn on.

use lockcheck_core::margin;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Algorithm, Fault, Scenario};
use lockcheck_search::explore::{draw, scenarios, scenarios_where, Careful, ExploreOptions};

fn draws(options: &ExploreOptions, n: u64) -> Vec<Scenario> {
    let strategy = scenarios(options);
    (0..n)
        .map(|case| draw(&strategy, 7, case).unwrap())
        .collect()
}

fn ensemble(profiles: Vec<FaultProfile>) -> ExploreOptions {
    let mut options = ExploreOptions::new(Algorithm::ZkSequential, profiles, 100, 7);
    options.params.nodes = Some(3);
    options
}

#[test]
fn careful_clients_are_drawn_only_when_asked_for() {
    let mut options = ensemble(vec![FaultProfile::Pause]);
    assert!(draws(&options, 40)
        .iter()
        .all(|s| !s.workload.check_before_access));
    options.careful = Careful::Half;
    let careful = draws(&options, 40)
        .iter()
        .filter(|s| s.workload.check_before_access)
        .count();
    assert!((5..35).contains(&careful), "{careful} of 40 careful");
    // A team pinning the client it writes: every case's clients are careful.
    options.careful = Careful::Always;
    assert!(draws(&options, 40)
        .iter()
        .all(|s| s.workload.check_before_access));
}

/// Whether `fault` cuts servers off from servers only.
fn members_apart(fault: &Fault) -> bool {
    match fault {
        Fault::Partition {
            isolate,
            from: Some(from),
            ..
        } => isolate
            .iter()
            .chain(from)
            .all(|n| n.starts_with("zk-") || n.starts_with("redis-")),
        _ => false,
    }
}

#[test]
fn an_ensemble_partition_cuts_members_off_from_members_and_independent_masters_are_not() {
    let cut = draws(&ensemble(vec![FaultProfile::Partition]), 60)
        .iter()
        .flat_map(|s| s.faults.clone())
        .filter(members_apart)
        .count();
    assert!(cut > 0, "no member cut off from the others in 60 stories");
    let mut redlock = ExploreOptions::new(Algorithm::Redlock, vec![FaultProfile::Partition], 60, 7);
    redlock.params.nodes = Some(3);
    assert!(
        draws(&redlock, 60)
            .iter()
            .flat_map(|s| s.faults.clone())
            .all(|f| !members_apart(&f)),
        "Redlock's masters never talk to each other"
    );
}

#[test]
fn a_story_kept_clear_of_the_thresholds_keeps_every_span_a_margin_away() {
    let mut options = ensemble(vec![FaultProfile::Pause, FaultProfile::Partition]);
    options.params.zookeeper.session_timeout_ms = Some(5_000);
    let strategy = scenarios_where(&options, |s| margin::closest(s, 250).is_none());
    let thresholds = margin::thresholds(&Scenario {
        params: options.params.clone(),
        ..Scenario::new(Algorithm::ZkSequential)
    });
    for case in 0..40 {
        let s = draw(&strategy, 3, case).unwrap();
        for fault in &s.faults {
            let span = match fault {
                Fault::Pause { for_ms, .. } | Fault::Partition { for_ms, .. } => *for_ms,
                _ => continue,
            };
            for t in &thresholds {
                assert!(
                    span.abs_diff(t.ms) >= 250,
                    "case {case}: {} is within 250 ms of the {} ({} ms)",
                    fault.describe(),
                    t.name,
                    t.ms
                );
            }
        }
    }
}
