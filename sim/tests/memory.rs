//! A run leaves nothing behind: searches run thousands of cases in one process, and whatever a
//! case keeps (its world with the history, the servers' state and Lua states) is kept for all
//! of them. One test in its own binary, so no other run is alive while it counts.

use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Backend;
use lockcheck_core::Algorithm;
use lockcheck_search::explore::{scenarios, ExploreOptions};
use lockcheck_sim::run;
use lockcheck_sim::world::live_worlds;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

#[test]
fn no_world_outlives_its_run_under_any_fault_or_backend() {
    for algorithm in Algorithm::ALL {
        let mut options = ExploreOptions::new(*algorithm, vec![FaultProfile::All], 4, 0);
        // MariaDB's 8 h wait_timeout makes a crashed client's lock cost 8 h of simulated time.
        if algorithm.backend() == Backend::Mysql {
            options.params.mysql.wait_timeout_ms = Some(10_000);
        }
        if algorithm.description().scripted {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../examples/redis-script/compare-and-delete.toml");
            let file = lockcheck_sim::script_file::load(&path).expect("the example reads");
            options.params.redis.script = Some(file.script);
        }
        let strategy = scenarios(&options);
        let mut runner = TestRunner::deterministic();
        for _ in 0..4 {
            let s = strategy.new_tree(&mut runner).unwrap().current();
            let outcome = run(&s);
            assert!(!outcome.history.entries.is_empty());
            assert_eq!(
                live_worlds(),
                0,
                "a run of {} left its world alive: {}",
                algorithm.name(),
                s.to_json()
            );
        }
    }
}
