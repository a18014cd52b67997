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

/// Where a report's randomness came from is read from the report: one written today says
/// `per_client` and replays with it; the same report without the field is from before
/// per-client streams and reads as `shared`, while a hand-written scenario file without it is
/// `per_client`.
#[test]
fn a_report_without_its_randomness_field_is_from_before_per_client_streams() {
    use lockcheck_core::scenario::{Algorithm, Randomness, Scenario};
    let mut scenario = Scenario::new(Algorithm::ZkRwLock);
    scenario.clients = 3;
    scenario.duration_ms = 20_000;
    scenario.seed = 11;
    let mut report = Report::of_run(&scenario, &lockcheck_sim::run(&scenario));
    let dir = std::env::temp_dir().join(format!("lockcheck-old-files-{}", std::process::id()));
    let path = report.write(&dir, "randomness").unwrap();
    let read = Report::read(&path).unwrap();
    assert_eq!(read.scenario.randomness, Randomness::PerClient);
    assert!(replay(&read).identical(), "today's report replays");

    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json["scenario"]
        .as_object_mut()
        .unwrap()
        .remove("randomness")
        .expect("a report says where its randomness came from");
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let old = Report::read(&path).unwrap();
    assert_eq!(old.scenario.randomness, Randomness::Shared);
    std::fs::remove_dir_all(&dir).unwrap();

    let file = Scenario::from_json(r#"{"algorithm": "zk-rwlock"}"#).unwrap();
    assert_eq!(file.randomness, Randomness::PerClient);
}
