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

/// `lockcheck ARGS` in `dir`, its stdout and stderr read, with how much memory it took at most
/// (its peak resident set, in KiB, from `wait4`).
// Reaped by `wait4`, which `Child::wait` cannot stand in for (it gives no resource usage).
#[allow(clippy::zombie_processes)]
fn lockcheck_measured(dir: &std::path::Path, args: &[&str]) -> (Output, i64) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        stdout.read_to_end(&mut out).unwrap();
        out
    });
    stderr.read_to_end(&mut err).unwrap();
    let out = reader.join().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own unreaped child, with valid pointers.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t);
    let status = std::os::unix::process::ExitStatusExt::from_raw(status);
    (
        Output {
            status,
            stdout: out,
            stderr: err,
        },
        usage.ru_maxrss,
    )
}

/// Issue 40 item 7: a report past the cap (1 GiB) is refused before a byte of it is read: it
/// used to be read to the cap first (`replay` and `timeline` of a huge file peaked at gigabytes
/// before refusing it).
#[test]
fn a_report_past_the_cap_is_refused_before_it_is_read() {
    let scratch = Scratch::new("huge-report");
    let big = scratch.0.join("big.json");
    // Sparse: it claims the size, and takes no room.
    std::fs::File::create(&big)
        .unwrap()
        .set_len((1 << 30) + 1)
        .unwrap();
    for verb in ["replay", "timeline"] {
        let (o, peak_kib) = lockcheck_measured(&scratch.0, &[verb, "big.json"]);
        assert_usage(&o, &["big.json", "larger than 1 GiB"], verb);
        assert!(
            peak_kib < 100 << 10,
            "{verb}: {peak_kib} KiB at the peak to refuse a file it need not read"
        );
    }
}

/// Issue 40 item 7: a TLS file is read up to 4 MiB, never more.
#[test]
fn a_tls_file_past_its_cap_is_refused() {
    let scratch = Scratch::new("tls-cap");
    let ca = scratch.0.join("ca.pem");
    std::fs::File::create(&ca)
        .unwrap()
        .set_len((4 << 20) + 1)
        .unwrap();
    for flag in ["--tls-ca", "--tls-cert", "--tls-key"] {
        let mut args = vec![
            "real",
            "--algorithm",
            "single-redis",
            "--endpoints",
            "127.0.0.1:6399",
            flag,
            ca.to_str().unwrap(),
        ];
        if flag != "--tls-ca" {
            // A certificate goes with its key.
            let other = if flag == "--tls-cert" {
                "--tls-key"
            } else {
                "--tls-cert"
            };
            args.extend([other, ca.to_str().unwrap()]);
        }
        let o = lockcheck(&args);
        assert_usage(&o, &["ca.pem", "larger than 4 MiB"], flag);
    }
}

/// Issue 40 item 7: a TOML list where a table belongs would be read as the table's fields in
/// order (`params = [...]` as `key`, `nodes`, …); it is refused, naming where, as JSON's is.
#[test]
fn a_toml_list_where_a_table_belongs_is_refused() {
    let scratch = Scratch::new("toml-positional");
    for (body, needle) in [
        (
            "params = [\"k\", 1, false, 10000]\n",
            "e.toml:1: [[expect]] 'x': params: expected a table",
        ),
        (
            "params = { redis = [1] }\n",
            "params.redis: expected a table",
        ),
    ] {
        let file = scratch.file(
            "e.toml",
            &format!(
                "[[expect]]\nname = \"x\"\nalgorithm = \"single-redis\"\nfaults = [\"pause\"]\n\
                 cases = 1\nexpect = \"unsafe\"\n{body}"
            ),
        );
        let o = lockcheck(&["check", file.to_str().unwrap()]);
        assert_usage(&o, &[needle, "by position"], body);
    }
    // A script file's step written as a list.
    let script = scratch.file(
        "lock.toml",
        "release = [\"return redis.call('DEL', KEYS[1])\", \"\", [\"key\"]]\n\n\
         [[acquire]]\nscript = \"return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])\"\n\
         keys = [\"key\"]\nargv = [\"token\", \"ttl_ms\"]\nacquired = \"ok\"\n",
    );
    let o = lockcheck(&[
        "explore",
        "--algorithm",
        "redis-script",
        "--script",
        script.to_str().unwrap(),
        "--faults",
        "none",
    ]);
    assert_usage(&o, &["release: expected a table", "by position"], "script");
}

/// Issue 40 item 7: a name read from a file is printed with what would act on the terminal (an
/// escape sequence, a carriage return) escaped, on standard error and on standard output.
#[test]
fn escape_sequences_in_names_never_reach_the_terminal() {
    let scratch = Scratch::new("escapes");
    for (name, text) in [
        (
            "algorithm.json",
            r#"{"algorithm": "single\u001b[31mredis\r"}"#.to_string(),
        ),
        (
            "node.json",
            r#"{"algorithm": "single-redis", "faults": [
                {"fault": "pause", "at_ms": 1, "node": "cl\u001b[2Jient", "for_ms": 5}]}"#
                .to_string(),
        ),
    ] {
        let o = run_text(&scratch, name, &text);
        assert_usage(&o, &["\\u{1b}["], name);
        assert!(!o.stderr.contains(&0x1b), "{name}: {:?}", stderr(&o));
    }
    // A directory whose name holds an escape, printed on standard output.
    let file = scratch.file(
        "s.json",
        r#"{"algorithm": "single-redis", "duration_ms": 3000, "seed": 4}"#,
    );
    let out = scratch.0.join("re\u{1b}]0;pwned\u{7}ports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("re\\u{1b}]0;pwned\\u{7}ports"),
        "{}",
        stdout(&o)
    );
    assert!(!o.stdout.contains(&0x1b) && !o.stdout.contains(&0x07));
}

/// Issue 40 item 7: a float out of range is quoted in a few characters (`{}` of 1e308 is 309
/// digits; docs/scenarios.md promises at most 60 characters of a value), and so is one in range.
#[test]
fn a_huge_or_tiny_float_is_printed_in_a_few_characters() {
    let scratch = Scratch::new("floats");
    for (text, needle) in [
        (
            r#"{"algorithm": "single-redis", "faults": [
                {"fault": "clock_drift", "at_ms": 0, "node": "redis-0", "rate": 1e308}]}"#,
            "rate must be in (0, 100], got 1e308",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"drift_factor": -1e300}}"#,
            "drift_factor must be in [0, 1), got -1e300",
        ),
        (
            r#"{"algorithm": "single-redis", "faults": [
                {"fault": "loss", "at_ms": 0, "node": "redis-0", "rate": 1e308, "for_ms": 5}]}"#,
            "rate must be in [0, 1], got 1e308",
        ),
    ] {
        let o = run_text(&scratch, "f.json", text);
        assert_usage(&o, &[needle], text);
        assert!(stderr(&o).len() < 200, "{}", stderr(&o));
    }
    let o = lockcheck(&[
        "explore",
        "--algorithm",
        "single-redis",
        "--faults",
        "clock-drift",
        "--max-drift",
        "1e308",
    ]);
    assert_usage(&o, &["got 1e308"], "--max-drift");
    assert!(stderr(&o).len() < 200, "{}", stderr(&o));
    // In range, and tiny: the schedule says it in a few characters too.
    let file = scratch.file(
        "slow.json",
        r#"{"algorithm": "single-redis", "duration_ms": 3000, "faults": [
            {"fault": "clock_drift", "at_ms": 0, "node": "redis-0", "rate": 1e-300}]}"#,
    );
    let out = scratch.0.join("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report_in(&out)).unwrap()).unwrap();
    let line = report["schedule"][0].as_str().unwrap();
    assert_eq!(line, "0 ms: redis-0's clocks run at 1e-300x");
}

/// `lockcheck ARGS` in `dir`, unable to write a file past `bytes` (RLIMIT_FSIZE, with SIGXFSZ
/// ignored, so a write past it fails with EFBIG as on a full disk): a full `--out`.
fn lockcheck_on_a_full_disk(dir: &std::path::Path, bytes: u64, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lockcheck"));
    command.current_dir(dir).args(args);
    // SAFETY: signal and setrlimit are async-signal-safe; nothing else runs in the child.
    unsafe {
        command.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.output().expect("the binary runs")
}

/// Issue 40 item 7: an output directory that cannot take the report (full, read-only) does not
/// hide an UNSAFE finding: the verdict is printed, then what could not be written, and the exit
/// code is 2.
#[test]
fn a_full_output_directory_does_not_hide_an_unsafe_finding() {
    let scratch = Scratch::new("full-out");
    let story = scratch.file("pause.json", PAUSE_STORY);
    let expectations = scratch.file(
        "e.toml",
        "[[expect]]\nname = \"pause\"\nalgorithm = \"single-redis\"\nfaults = [\"pause\"]\n\
         cases = 100\nexpect = \"unsafe\"\n",
    );
    let cases: [(&str, Vec<&str>); 4] = [
        (
            "explore",
            vec![
                "explore",
                "--algorithm",
                "single-redis",
                "--faults",
                "pause",
                "--out",
                "explore",
            ],
        ),
        (
            "check",
            vec!["check", expectations.to_str().unwrap(), "--out", "check"],
        ),
        (
            "matrix",
            vec![
                "matrix",
                "--algorithms",
                "single-redis",
                "--faults",
                "pause",
                "--cases",
                "50",
                "--out",
                "matrix",
            ],
        ),
        (
            "run",
            vec!["run", story.to_str().unwrap(), "--report", "run"],
        ),
    ];
    let mut cases = cases.to_vec();
    if common::installed("redis-server") {
        cases.push((
            "real",
            vec![
                "real",
                "--algorithm",
                "single-redis",
                "--faults",
                "pause",
                "--report",
                "real",
            ],
        ));
    }
    for (verb, args) in cases {
        let o = lockcheck_on_a_full_disk(&scratch.0, 2048, &args);
        let (out, err) = (stdout(&o), stderr(&o));
        assert_eq!(o.status.code(), Some(2), "{verb}: {out}{err}");
        assert!(
            out.contains("UNSAFE"),
            "{verb}: the verdict is hidden: {out}{err}"
        );
        assert!(err.contains("File too large"), "{verb}: {err}");
        assert!(!err.contains("panicked"), "{verb}: {err}");
    }
}
