//! The ranges allow a lease, a pause and a run of a year, a thousand clients and a hundred
//! thousand sections each (#40 item 2): what a run keeps stays within stated bounds
//! (docs/scenarios.md, "Bounds"), and what would not fit is refused, exit 2, naming the parameter.

mod common;

use common::{lockcheck, report_in, stderr, stdout, Scratch};

/// Two single-redis clients with a year-long lease; client-0 holds the lock and is paused for
/// `pause_ms` while client-1 polls (every 200 ms), with `extra` params.
fn paused_holder(pause_ms: u64, extra: &str) -> String {
    format!(
        r#"{{"algorithm": "single-redis", "params": {{"ttl_ms": 31536000000{extra}}},
            "clients": 2, "workload": {{"acquisitions_per_client": 1, "hold_ms": 2000}},
            "duration_ms": {}, "seed": 7,
            "faults": [{{"at_ms": 500, "fault": "pause", "node": "client-0", "for_ms": {pause_ms}}}]}}"#,
        2 * pause_ms
    )
}

fn assert_refused(o: &std::process::Output, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{}{err}", stdout(o));
    for needle in needles {
        assert!(err.contains(needle), "no {needle:?} in: {err}");
    }
}

#[test]
fn a_ten_hour_wait_writes_a_small_report_that_replays() {
    // Before folding: 224,000 history entries, a 57 MB report and an 88 MB timeline.
    let scratch = Scratch::new("bound-wait");
    let file = scratch.file("wait.json", &paused_holder(10 * 3_600_000, ""));
    let out = scratch.sub("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let report = report_in(&out);
    let bytes = std::fs::metadata(&report).unwrap().len();
    assert!(bytes < 1_000_000, "a {bytes}-byte report for a 10 h wait");
    let html = std::fs::metadata(report.with_extension("html"))
        .unwrap()
        .len();
    assert!(html < 2_000_000, "a {html}-byte timeline for a 10 h wait");
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("\"count\": "), "the wait is folded");
    let o = lockcheck(&["replay", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("identical: "), "{}", stdout(&o));
}

#[test]
fn a_workload_too_big_to_keep_is_refused_before_it_runs_naming_the_parameter() {
    let scratch = Scratch::new("bound-workload");
    for (text, needles) in [
        (
            r#"{"algorithm": "single-redis", "clients": 1000,
                "workload": {"acquisitions_per_client": 100000}}"#,
            vec![
                "workload.acquisitions_per_client: 1000 client(s) × 100000 critical section(s) \
                 would record at least 1300000000 history entries",
                "more than a run keeps (500000)",
            ],
        ),
        (
            r#"{"algorithm": "redis-reentrant", "clients": 1000,
                "workload": {"reentrant_depth": 1000}}"#,
            vec!["workload.reentrant_depth: ", "more than a run keeps"],
        ),
        (
            r#"{"algorithm": "redis-reentrant", "params": {"watchdog": true, "ttl_ms": 30},
                "workload": {"hold_ms": 31536000000}}"#,
            vec![
                "workload.hold_ms: ",
                "the watchdog's renewals of a 30 ms lease",
            ],
        ),
    ] {
        let file = scratch.file("big.json", text);
        let o = lockcheck(&["run", file.to_str().unwrap()]);
        assert_refused(&o, &needles);
    }
}

#[test]
fn a_run_that_outgrows_the_history_stops_and_is_refused_naming_what_makes_it_long() {
    // One attempt per acquisition: every poll is an acquire of its own (invoke, attempt,
    // fail), which nothing folds; a year-long pause would record 470 million entries.
    let scratch = Scratch::new("bound-cap");
    let file = scratch.file(
        "cap.json",
        &paused_holder(31_536_000_000 / 2, r#", "retry_count": 1"#),
    );
    let out = scratch.sub("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert_refused(
        &o,
        &[
            "history full: 500000 entries by ",
            "mostly acquire entries",
            "A run keeps at most 500000 history entries",
            "Shorten duration_ms (31536000000 ms), params.ttl_ms (31536000000 ms), \
             faults[0].for_ms (15768000000 ms)",
        ],
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "no report");
}
