//! The minimal schedule a search reports is minimal: its faults in the order they strike, none
//! beginning after the violation was certain, and none the failure can do without (removing any
//! one of them makes the case pass, or fail less badly).

mod common;

use common::search::{find, options};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Params;
use lockcheck_core::Algorithm;
use lockcheck_search::explore::{counts, worst_counted, ExploreOptions};

/// Searches whose shrunk cases held an unneeded fault or faults out of order before the
/// schedule was tidied (the matrix's Redisson clock-jump and fair-lock partition cells among
/// them), and a few plain ones.
fn searches() -> Vec<ExploreOptions> {
    let mut all = Vec::new();
    for (algorithm, profiles) in [
        (Algorithm::SingleRedis, vec![FaultProfile::Pause]),
        (
            Algorithm::SingleRedis,
            vec![FaultProfile::ClockJump, FaultProfile::Pause],
        ),
        (Algorithm::RedisReentrant, vec![FaultProfile::ClockJump]),
        (Algorithm::RedisFair, vec![FaultProfile::Partition]),
        (Algorithm::Redlock, vec![FaultProfile::All]),
        (Algorithm::ZkSequential, vec![FaultProfile::All]),
    ] {
        let mut o = options(algorithm, &profiles, Params::default(), 300);
        o.seed = 0;
        o.safety_only = true;
        all.push(o);
    }
    all
}

#[test]
fn a_minimal_schedule_is_sorted_ends_by_the_violation_and_keeps_only_what_it_needs() {
    for options in searches() {
        let finding = find(&options);
        let name = format!("{} × {:?}", options.algorithm.name(), options.profiles);
        let faults = &finding.scenario.faults;
        assert!(
            faults.is_sorted_by_key(|f| f.at_ms()),
            "{name}: not in the order they strike: {}",
            finding.scenario.to_json()
        );
        let certain_ns = finding
            .outcome
            .violations
            .iter()
            .filter(|v| counts(&options, v.kind))
            .map(|v| v.at_ns)
            .min()
            .expect("a finding has a counted violation");
        for f in faults {
            assert!(
                f.at_ms() * 1_000_000 <= certain_ns,
                "{name}: {} begins after the violation ({} ns)",
                f.describe(),
                certain_ns
            );
        }
        let bar = worst_counted(&options, &finding.outcome.violations);
        for i in 0..faults.len() {
            let mut without = finding.scenario.clone();
            let removed = without.faults.remove(i);
            if without.validate().is_err() {
                continue;
            }
            let outcome = lockcheck_sim::run(&without);
            let worst = worst_counted(&options, &outcome.violations);
            assert!(
                worst.is_none() || worst > bar || outcome.cut_short().is_some(),
                "{name}: still fails without {}",
                removed.describe()
            );
        }
    }
}
