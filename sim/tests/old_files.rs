//! Files lockcheck wrote before a change of format still read and replay: a report is evidence,
//! and evidence must outlive the tool's refactors.

use lockcheck_core::report::Report;
use lockcheck_sim::replay;
use std::path::Path;

/// A failover report written before the parameters were grouped by backend (`"replicas": 1`
/// flat, and the old writer's `session_timeout_ms` / `queue_timeout_ms` /
/// `replication_lag_ms` defaults in every file): it reads, its settings land in their groups,
/// and it replays to the same history.
#[test]
fn a_report_from_before_the_parameter_groups_replays_identically() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report-before-param-groups.json");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("\"session_timeout_ms\": 10000"),
        "the fixture is of the old form"
    );
    let report = Report::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let p = &report.scenario.params;
    assert_eq!(p.redis.replicas, 1);
    assert_eq!(
        p.zookeeper,
        Default::default(),
        "the old writer's default counts as not given"
    );
    let replayed = replay(&report);
    assert!(
        replayed.identical(),
        "first difference at entry {:?}; {:?}",
        replayed.first_difference,
        replayed.differences
    );
    assert!(!report.violations.is_empty());
}
