//! The search at scale: threads and shards change how fast cases run, never what is found.

mod common;

use common::search::options;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Params;
use lockcheck_core::verdict::Coverage;
use lockcheck_core::Algorithm;
use lockcheck_search::explore::{explore, Exploration, ExploreOptions, Shard};

fn search(base: &ExploreOptions, jobs: usize, shard: Shard) -> Exploration {
    let options = ExploreOptions {
        jobs,
        shard,
        ..base.clone()
    };
    explore(&options, &|_| {}).expect("exploration runs")
}

/// What a search found, as a comparable summary: the failing case's index, its shrunk scenario
/// and history digest; or the cases and simulated time of a search that found nothing.
fn summary(e: &Exploration) -> String {
    match e {
        Exploration::Found(f) => format!(
            "found case {} after {} cases ({} ns): {} -> {}",
            f.case_index,
            f.cases,
            f.simulated_ns,
            f.scenario.to_json(),
            f.outcome.digest()
        ),
        Exploration::NotFound(Coverage {
            cases,
            simulated_ns,
        }) => format!("not found in {cases} cases ({simulated_ns} ns)"),
    }
}

#[test]
fn one_thread_or_two_find_the_same_case_and_shrink_it_the_same() {
    let base = options(
        Algorithm::Redlock,
        &[FaultProfile::ClockJump],
        Params::default(),
        300,
    );
    let one = summary(&search(&base, 1, Shard::default()));
    assert!(one.starts_with("found"), "{one}");
    assert_eq!(one, summary(&search(&base, 2, Shard::default())));
    assert_eq!(one, summary(&search(&base, 3, Shard::default())));
}

#[test]
fn a_search_that_finds_nothing_covers_the_same_cases_on_any_number_of_threads() {
    let base = options(
        Algorithm::SingleRedis,
        &[FaultProfile::None],
        Params::default(),
        60,
    );
    let one = summary(&search(&base, 1, Shard::default()));
    assert!(one.starts_with("not found in 60 cases"), "{one}");
    assert_eq!(one, summary(&search(&base, 2, Shard::default())));
}

#[test]
fn shards_joined_by_their_lowest_failing_case_are_the_unsharded_search() {
    let base = options(
        Algorithm::SingleRedis,
        &[FaultProfile::Pause],
        Params::default(),
        200,
    );
    let Exploration::Found(whole) = search(&base, 1, Shard::default()) else {
        panic!("the pause violation is found");
    };
    let shards: Vec<Exploration> = (1..=3)
        .map(|i| search(&base, 1, Shard::parse(&format!("{i}/3")).unwrap()))
        .collect();
    let lowest = shards
        .iter()
        .filter_map(|e| match e {
            Exploration::Found(f) => Some(f),
            Exploration::NotFound(Coverage { .. }) => None,
        })
        .min_by_key(|f| f.case_index)
        .expect("some shard finds it");
    assert_eq!(lowest.case_index, whole.case_index);
    assert_eq!(lowest.scenario, whole.scenario);
    assert_eq!(lowest.outcome.digest(), whole.outcome.digest());
    // The shard that holds the lowest failing case ran exactly its own cases up to it.
    let index = (whole.case_index % 3) as u32;
    assert_eq!(
        u64::from(lowest.cases),
        (whole.case_index - u64::from(index)) / 3 + 1
    );
}

#[test]
fn shards_are_named_one_based_and_bad_ones_refused() {
    assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 1, count: 4 }));
    for bad in ["0/2", "3/2", "1/0", "1", "a/b", ""] {
        assert!(Shard::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_time_budget_runs_a_prefix_that_a_case_count_reproduces() {
    // However many cases the wall-time budget allows, they are cases 0..n: a search of exactly n
    // cases (which is what a cell records) reaches the same verdict over the same cases.
    let base = ExploreOptions {
        cases: u32::MAX,
        time_limit: Some(std::time::Duration::from_millis(300)),
        ..options(
            Algorithm::SingleRedis,
            &[FaultProfile::None],
            Params::default(),
            0,
        )
    };
    let timed = search(&base, 2, Shard::default());
    let Exploration::NotFound(Coverage { cases, .. }) = timed else {
        panic!("nothing to find without faults: {}", summary(&timed));
    };
    let counted = ExploreOptions {
        cases,
        time_limit: None,
        ..base.clone()
    };
    assert_eq!(
        summary(&timed),
        summary(&search(&counted, 1, Shard::default()))
    );
}
