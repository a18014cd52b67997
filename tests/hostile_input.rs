//! Input that tries to make lockcheck lie or fall over: numbers out of range, files without end,
//! text after the document, huge strings, edited reports. Each case is written out; each must
//! end in a clear error (exit 2, naming the field) or, for an edited report, in DIVERGED (exit 1)
//! naming what was edited, never in a verdict.

mod common;

use common::{lockcheck, report_in, stderr, stdout, Scratch, PAUSE_STORY};
use std::process::Output;

/// The longest duration any field accepts (`lockcheck_core::limits::MAX_MS`), written out: 365
/// days in ms.
const MAX_MS: u64 = 31_536_000_000;

fn run_text(scratch: &Scratch, name: &str, text: &str) -> Output {
    let file = scratch.file(name, text);
    lockcheck(&["run", file.to_str().unwrap()])
}

fn assert_usage(o: &Output, needles: &[&str], what: &str) {
    assert_eq!(
        o.status.code(),
        Some(2),
        "{what}: expected exit 2\n{}{}",
        stdout(o),
        stderr(o)
    );
    let err = stderr(o);
    for needle in needles {
        assert!(err.contains(needle), "{what}: {err:?} lacks {needle:?}");
    }
    assert!(err.len() < 2_000, "{what}: an error of {} bytes", err.len());
    assert!(!err.contains("panicked"), "{what}: {err}");
}

#[test]
fn numbers_out_of_range_are_refused_naming_the_field() {
    let scratch = Scratch::new("ranges");
    let big = 1u64 << 62;
    let cases: Vec<(String, &str)> = vec![
        (
            format!(r#"{{"algorithm": "single-redis", "duration_ms": {big}}}"#),
            "duration_ms must be within 1..=31536000000",
        ),
        (
            format!(
                r#"{{"algorithm": "single-redis", "faults": [
                    {{"fault": "clock_jump", "at_ms": 10, "node": "client-0", "by_ms": {big}}}]}}"#
            ),
            "faults[0] (clock_jump): by_ms must be within",
        ),
        (
            format!(
                r#"{{"algorithm": "single-redis", "faults": [
                    {{"fault": "clock_jump", "at_ms": 10, "node": "client-0", "by_ms": -{big}}}]}}"#
            ),
            "by_ms must be within",
        ),
        (
            format!(r#"{{"algorithm": "single-redis", "params": {{"restart_delay_ms": {big}}}}}"#),
            "params.restart_delay_ms must be within 0..=31536000000",
        ),
        (
            format!(
                r#"{{"algorithm": "single-redis", "params": {{"ttl_ms": {}}}}}"#,
                i64::MAX
            ),
            "params.ttl_ms must be within",
        ),
        (
            format!(
                r#"{{"algorithm": "single-redis", "workload": {{"hold_ms": {}}}}}"#,
                1u64 << 63
            ),
            "workload.hold_ms must be within",
        ),
        (
            format!(
                r#"{{"algorithm": "single-redis", "faults": [
                    {{"fault": "pause", "at_ms": 10, "node": "client-0", "for_ms": {}}}]}}"#,
                MAX_MS + 1
            ),
            "faults[0] (pause): for_ms must be within",
        ),
        (
            r#"{"algorithm": "single-redis", "clients": 64000}"#.into(),
            "clients must be within 1..=1000",
        ),
        (
            r#"{"algorithm": "redlock", "params": {"nodes": 64001}}"#.into(),
            "params.nodes must be within 1..=99",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"replicas": 70000}}"#.into(),
            "params.redis.replicas must be within 0..=16",
        ),
        (
            r#"{"algorithm": "single-redis", "workload": {"acquisitions_per_client": 4000000000}}"#
                .into(),
            "workload.acquisitions_per_client must be within",
        ),
        (
            format!(
                r#"{{"algorithm": "single-redis", "faults": [
                    {{"fault": "delay", "at_ms": 10, "node": "client-0", "extra_ms": {MAX_MS}, "for_ms": 5}},
                    {{"fault": "delay", "at_ms": 20, "node": "redis-0", "extra_ms": 1, "for_ms": 5}}]}}"#
            ),
            "the delays' extra_ms add up",
        ),
        (
            format!(
                r#"{{"algorithm": "single-redis", "faults": [
                    {{"fault": "clock_jump", "at_ms": 10, "node": "client-0", "by_ms": {MAX_MS}}},
                    {{"fault": "clock_jump", "at_ms": 20, "node": "client-0", "by_ms": 1}}]}}"#
            ),
            "client-0's clock jumps add up",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let o = run_text(&scratch, &format!("s{i}.json"), text);
        assert_usage(&o, &[needle], text);
    }
}

#[test]
fn the_longest_spans_accepted_run_to_an_end_with_their_work_done() {
    // A run as long as allowed, and clocks thrown as far as allowed either way: the clients do
    // their critical sections, and the run ends when they are done, not at once and not never.
    let scratch = Scratch::new("edges");
    let text = format!(
        r#"{{"algorithm": "single-redis", "duration_ms": {MAX_MS},
            "workload": {{"acquisitions_per_client": 2, "hold_ms": 10}},
            "faults": [
              {{"fault": "clock_jump", "at_ms": 0, "node": "client-0", "by_ms": {MAX_MS}}},
              {{"fault": "clock_jump", "at_ms": 0, "node": "client-1", "by_ms": -{MAX_MS}}},
              {{"fault": "clock_drift", "at_ms": 0, "node": "redis-0", "rate": 100}}]}}"#
    );
    let file = scratch.file("edge.json", &text);
    let out = scratch.0.join("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let report = report_in(&out);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let entries = json["history"].as_array().unwrap();
    let released = entries
        .iter()
        .filter(|e| e["type"] == "ok" && e["f"] == "release")
        .filter(|e| e["node"].as_str().is_some_and(|n| n.starts_with("client-")))
        .count();
    assert_eq!(released, 4, "every critical section of both clients ended");
}

#[test]
fn flags_and_expectations_out_of_range_are_refused_naming_them() {
    let big = (1u64 << 62).to_string();
    for (args, needle) in [
        (
            vec!["--cases", "2000000000"],
            "cases (--cases) must be within 1..=1000000000",
        ),
        (vec!["--jobs", "100000"], "--jobs must be within 1..=1024"),
        (
            vec!["--max-partition-ms", big.as_str()],
            "max_partition_ms (--max-partition-ms) must be within",
        ),
        (
            vec!["--ttl-ms", big.as_str()],
            "params.ttl_ms must be within",
        ),
        (vec!["--shard", "1/2000000000"], "at most 1000000000 shards"),
        (
            vec!["--violation", "two-holders"],
            "unknown violation kind 'two-holders' (known: mutual_exclusion,",
        ),
        (
            vec!["--safety-only", "--violation", "deadlock"],
            "--violation deadlock is not a safety violation",
        ),
        (
            vec!["--careful", "sometimes"],
            "careful 'sometimes': expected never, half or always",
        ),
    ] {
        let mut all = vec![
            "explore",
            "--algorithm",
            "single-redis",
            "--faults",
            "pause",
        ];
        all.extend(&args);
        let o = lockcheck(&all);
        assert_usage(&o, &[needle], &args.join(" "));
    }
    let o = lockcheck(&["matrix", "--budget-seconds", &big]);
    assert_usage(&o, &["--budget-seconds must be within"], "matrix");
    let o = lockcheck(&["real", "--algorithm", "single-redis", "--ttl-ms", &big]);
    assert_usage(&o, &["--ttl-ms must be within"], "real");
    // Issue 40 item 3: one server given as three masters is refused before anything runs.
    let o = lockcheck(&[
        "real",
        "--algorithm",
        "redlock",
        "--nodes",
        "3",
        "--endpoints",
        "127.0.0.1:6399,localhost:6398,127.0.0.1:6399",
    ]);
    assert_usage(
        &o,
        &["'127.0.0.1:6399' and '127.0.0.1:6399' are the same server"],
        "real --endpoints A,B,A",
    );

    let scratch = Scratch::new("expect-range");
    let file = scratch.file(
        "e.toml",
        "[[expect]]\nname = \"x\"\nalgorithm = \"single-redis\"\nfaults = [\"pause\"]\n\
         cases = 2000000000\nexpect = \"unsafe\"\n",
    );
    let o = lockcheck(&["check", file.to_str().unwrap()]);
    assert_usage(&o, &["e.toml:1", "cases (--cases) must be within"], "check");
}

/// Issue 40 item 7: serde reads a struct from a list of its fields in order; a scenario
/// never is: `"workload": [1, 20000]` is refused, naming where, not run as another workload.
#[test]
fn a_list_where_an_object_belongs_is_refused() {
    let scratch = Scratch::new("positional");
    for (text, needle) in [
        (
            r#"{"algorithm": "single-redis", "workload": [1, 20000]}"#,
            "workload: expected an object with named fields",
        ),
        (
            r#"{"algorithm": "single-redis", "params": [10000]}"#,
            "params",
        ),
        (
            r#"{"algorithm": "single-redis", "faults": [["pause", 0, "client-0", 100]]}"#,
            "faults[0]: expected an object with named fields",
        ),
    ] {
        let o = run_text(&scratch, "list.json", text);
        assert_usage(&o, &[needle], text);
    }
}

#[test]
fn a_file_without_end_is_refused_at_the_cap() {
    // A device is no input at all (it used to be read up to the cap: 1 GiB for a report).
    let o = lockcheck(&["run", "/dev/zero"]);
    assert_usage(&o, &["/dev/zero", "not a regular file"], "run /dev/zero");
    let o = lockcheck(&["replay", "/dev/zero"]);
    assert_usage(&o, &["/dev/zero", "not a regular file"], "replay /dev/zero");
    // A regular file past the cap (sparse: it takes no room).
    let scratch = Scratch::new("cap");
    let big = scratch.0.join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((16 << 20) + 1)
        .unwrap();
    let o = lockcheck(&["run", big.to_str().unwrap()]);
    assert_usage(&o, &["big.json", "larger than 16 MiB"], "run big.json");
    // Issue 40 item 7: the TLS files too, before anything connects.
    let o = lockcheck(&[
        "real",
        "--algorithm",
        "single-redis",
        "--endpoints",
        "127.0.0.1:6399",
        "--tls-ca",
        "/dev/zero",
    ]);
    assert_usage(
        &o,
        &["--tls-ca /dev/zero", "not a regular file"],
        "--tls-ca",
    );
}

#[test]
fn a_huge_string_is_not_echoed_back_in_full() {
    let scratch = Scratch::new("huge");
    // Within the size cap (16 MiB), so that it is parsed and quoted.
    let name = "x".repeat(10 << 20);
    for (file, text) in [
        ("algorithm.json", format!(r#"{{"algorithm": "{name}"}}"#)),
        (
            "node.json",
            format!(
                r#"{{"algorithm": "single-redis", "faults": [
                    {{"fault": "pause", "at_ms": 1, "node": "{name}", "for_ms": 5}}]}}"#
            ),
        ),
    ] {
        let o = run_text(&scratch, file, &text);
        assert_usage(&o, &["(10485760 bytes)"], file);
    }
}

#[test]
fn text_after_the_document_is_an_error() {
    let scratch = Scratch::new("trailing");
    let o = run_text(
        &scratch,
        "two.json",
        r#"{"algorithm": "single-redis"} {"algorithm": "redlock"}"#,
    );
    assert_usage(&o, &["text after the end of the document"], "scenario");

    // A report with garbage after it is refused, not replayed.
    let file = scratch.file(
        "s.json",
        r#"{"algorithm": "single-redis", "duration_ms": 3000, "seed": 4}"#,
    );
    let out = scratch.0.join("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report = report_in(&out);
    let mut text = std::fs::read_to_string(&report).unwrap();
    text.push_str("garbage\n");
    let bad = scratch.file("garbage.json", &text);
    let o = lockcheck(&["replay", bad.to_str().unwrap()]);
    assert_usage(&o, &["text after the end of the document"], "report");
}

#[test]
fn an_edited_report_does_not_replay_as_identical() {
    let scratch = Scratch::new("edited");
    let file = scratch.file("pause.json", PAUSE_STORY);
    let out = scratch.0.join("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report = report_in(&out);
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let o = lockcheck(&["replay", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit, &str); 6] = [
        (
            "verdict",
            |r| r["verdict"] = "no_violation".into(),
            "verdict: report \"no_violation\", replay \"violation\"",
        ),
        (
            "violations",
            |r| r["violations"] = serde_json::json!([]),
            "violations: report [], replay [",
        ),
        ("seed", |r| r["seed"] = 8.into(), "seed: report 8, replay 7"),
        (
            "history_hash",
            |r| r["history_hash"] = "0000000000000000".into(),
            "history_hash: report \"0000000000000000\", replay \"",
        ),
        (
            "summary",
            |r| r["summary"] = "single-redis: no violation in this run".into(),
            "summary: report",
        ),
        (
            "a history entry",
            |r| r["history"][3]["true_ns"] = 1.into(),
            "DIVERGED at history entry 3: report hash",
        ),
    ];
    for (what, edit, needle) in edits {
        let mut edited = original.clone();
        edit(&mut edited);
        let path = scratch.file("edited.json", &edited.to_string());
        let o = lockcheck(&["replay", path.to_str().unwrap()]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{what}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let said = stdout(&o);
        assert!(said.contains("DIVERGED"), "{what}: {said}");
        assert!(said.contains(needle), "{what}: {said} lacks {needle:?}");
        if let Some(line) = said.lines().find(|l| l.contains("report hash")) {
            let hashes: Vec<&str> = line
                .split(", ")
                .map(|part| part.rsplit(' ').next().unwrap())
                .collect();
            assert_ne!(hashes[0], hashes[1], "{what}: {line}");
        }
    }
}
