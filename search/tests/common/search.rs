//! Searching from a test: the options of a story, and the two outcomes a test expects.

use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Params;
use lockcheck_core::verdict::Coverage;
use lockcheck_core::Algorithm;
use lockcheck_search::explore::{explore, Exploration, ExploreOptions, Finding};

/// A search of `algorithm` under `profiles` with `params`, `cases` cases, seed 1.
pub fn options(
    algorithm: Algorithm,
    profiles: &[FaultProfile],
    params: Params,
    cases: u32,
) -> ExploreOptions {
    ExploreOptions {
        params,
        ..ExploreOptions::new(algorithm, profiles.to_vec(), cases, 1)
    }
}

/// The shrunk violation the search must find.
pub fn find(options: &ExploreOptions) -> Finding {
    match explore(options, &|_| {}).expect("exploration runs") {
        Exploration::Found(f) => *f,
        Exploration::NotFound(Coverage { cases, .. }) => panic!(
            "{}: nothing found in {cases} cases",
            options.algorithm.name()
        ),
    }
}

/// The search must run every case and find nothing.
pub fn nothing_found(options: &ExploreOptions) {
    match explore(options, &|_| {}).expect("exploration runs") {
        Exploration::NotFound(Coverage { cases, .. }) => assert_eq!(cases, options.cases),
        Exploration::Found(f) => panic!(
            "{}: unexpected violation: {:?}\n{}",
            options.algorithm.name(),
            f.outcome.violations,
            f.scenario.to_json()
        ),
    }
}
