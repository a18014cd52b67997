//! The reports `lockcheck-core`'s timeline tests draw are simulated runs kept as files (that crate
//! cannot run the simulator). This test pins them to what the simulation gives today, so a change
//! of the simulation that alters them is seen here, and `LOCKCHECK_BLESS=1` rewrites them.

use lockcheck_core::report::Report;
use lockcheck_core::scenario::{Algorithm, Fault, Scenario};
use std::path::PathBuf;

/// The story of the CLI's tests: two clients, a 10 s lease, client-0 paused for 15 s while it
/// holds the lock; client-1 takes the expired lock and both are inside at once.
fn pause_scenario() -> Scenario {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(10_000);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 2_000;
    s.workload.think_ms = 100;
    s.duration_ms = 30_000;
    s.seed = 7;
    s.faults = vec![Fault::Pause {
        at_ms: 500,
        node: "client-0".into(),
        for_ms: 15_000,
    }];
    s
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/data")
        .join(name)
}

/// Compares the simulated report of `scenario` with the fixture `name`, or writes it when blessed.
fn pin(name: &str, scenario: &Scenario) -> Report {
    let report = Report::of_run(scenario, &lockcheck_sim::run(scenario));
    let json = serde_json::to_string_pretty(&report).expect("a report serializes") + "\n";
    let path = fixture(name);
    if std::env::var_os("LOCKCHECK_BLESS").is_some() {
        std::fs::write(&path, &json).expect("the fixture is writable");
    }
    let kept = std::fs::read_to_string(&path).expect("the fixture exists");
    let kept: Report = serde_json::from_str(&kept).expect("the fixture is a report");
    // The version is the only field that may differ without the simulation having changed.
    let first = report.history.first_difference(&kept.history);
    assert_eq!(
        first,
        None,
        "{}: the simulation no longer gives this history (rerun with LOCKCHECK_BLESS=1 if the \
         change is meant)",
        path.display()
    );
    assert_eq!(
        Report {
            lockcheck: String::new(),
            ..kept
        },
        Report {
            lockcheck: String::new(),
            ..report.clone()
        }
    );
    report
}

#[test]
fn the_pause_fixture_is_what_the_simulation_gives() {
    let report = pin("timeline-pause.json", &pause_scenario());
    assert!(
        !report.violations.is_empty(),
        "the pause story finds its violation"
    );
}

#[test]
fn the_quiet_fixture_is_what_the_simulation_gives() {
    let mut s = pause_scenario();
    s.faults.clear();
    let report = pin("timeline-quiet.json", &s);
    assert!(report.violations.is_empty());
}
