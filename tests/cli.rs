//! The `lockcheck` binary as a user meets it: exit codes, messages, reports, replay across
//! processes.

mod common;

use common::{lockcheck, report_in, stderr, stdout, Scratch, PAUSE_STORY};
use std::path::Path;
use std::process::{Command, Output};

fn hash_line(o: &Output) -> String {
    stdout(o)
        .lines()
        .find(|l| l.starts_with("history hash"))
        .expect("run prints the history hash")
        .to_string()
}

#[test]
fn simulation_is_compiled_in() {
    // Guards against a build where RUSTFLAGS dropped `--cfg madsim`: the sim crate refuses to
    // compile then, and this test would not exist; here we also check the binary answers.
    let o = lockcheck(&["--help"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("explore"));
}

#[test]
fn explore_help_names_every_algorithm_and_profile() {
    let help = stdout(&lockcheck(&["explore", "--help"]));
    // The list comes from the registry: every algorithm, with its summary.
    for a in lockcheck_core::Algorithm::ALL {
        let d = a.description();
        assert!(
            help.contains(d.name) && help.contains(d.summary),
            "explore --help does not present {}",
            d.name
        );
    }
    for profile in [
        "none",
        "pause",
        "clock-jump",
        "clock-drift",
        "crash-restart",
        "crash-delayed-restart",
        "partition",
        "failover",
        "all",
    ] {
        assert!(
            help.contains(profile),
            "explore --help does not name {profile}"
        );
    }
}

#[test]
fn a_scenario_replays_identically_in_two_processes() {
    let scratch = Scratch::new("two-processes");
    let file = scratch.file("pause.json", PAUSE_STORY);
    let first = lockcheck(&["run", file.to_str().unwrap()]);
    let second = lockcheck(&["run", file.to_str().unwrap()]);
    assert_eq!(first.status.code(), Some(1), "{}", stdout(&first));
    assert_eq!(hash_line(&first), hash_line(&second));
}

#[test]
fn every_scenario_fixture_replays_identically_in_two_processes() {
    // One per algorithm family and fault story; a difference means something in the simulation
    // depends on the process (hash seeds, addresses, the host's clock or randomness).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sim/tests/scenarios");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.to_str().unwrap();
        let first = lockcheck(&["run", file]);
        let second = lockcheck(&["run", file]);
        assert_ne!(first.status.code(), Some(2), "{file}: {}", stderr(&first));
        assert_eq!(hash_line(&first), hash_line(&second), "{file}");
        seen += 1;
    }
    assert!(seen >= 6, "fixtures missing in {}", dir.display());
}

#[test]
fn run_writes_a_report_that_replays() {
    let scratch = Scratch::new("report");
    let file = scratch.file("pause.json", PAUSE_STORY);
    let out = scratch.0.join("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let report = report_in(&out);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for key in [
        "scenario",
        "seed",
        "schedule",
        "violations",
        "history",
        "history_hash",
        "replay_command",
    ] {
        assert!(json.get(key).is_some(), "report lacks {key}");
    }
    assert_eq!(json["violations"][0]["kind"], "mutual_exclusion");
    let r = lockcheck(&["replay", report.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}{}", stdout(&r), stderr(&r));
    assert!(stdout(&r).contains("identical"));

    // A tampered history no longer replays.
    let tampered = json.to_string().replacen("\"seed\":7", "\"seed\":8", 1);
    let bad = scratch.file("tampered.json", &tampered);
    let r = lockcheck(&["replay", bad.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1), "{}", stdout(&r));
    assert!(stdout(&r).contains("DIVERGED"));
}

#[test]
fn explore_finds_the_pause_violation_and_writes_a_replayable_report() {
    let scratch = Scratch::new("explore");
    let out = scratch.0.join("out");
    let o = lockcheck(&[
        "explore",
        "--algorithm",
        "single-redis",
        "--faults",
        "pause",
        "--cases",
        "300",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("UNSAFE"));
    let r = lockcheck(&["replay", report_in(&out).to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", stdout(&r));
}

#[test]
fn bad_input_exits_2_naming_the_problem() {
    let scratch = Scratch::new("bad-input");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "explore".into(),
                "--algorithm".into(),
                "zookeeper-magic".into(),
                "--faults".into(),
                "pause".into(),
            ],
            "zookeeper-magic",
        ),
        (
            vec![
                "explore".into(),
                "--algorithm".into(),
                "single-redis".into(),
                "--faults".into(),
                "pause,meteor".into(),
            ],
            "meteor",
        ),
        (
            vec![
                "explore".into(),
                "--algorithm".into(),
                "single-redis".into(),
                "--faults".into(),
                "pause".into(),
                "--ttl-ms".into(),
                "0".into(),
            ],
            "ttl_ms",
        ),
    ];
    // The search options explore checks through the library's one check (the same as an
    // expectations entry's), each named by its flag.
    let mut cases = cases;
    for (extra, needle) in [
        (&["--cases", "0"][..], "--cases"),
        (&["--max-drift", "1.5"][..], "--max-drift"),
        (&["--max-partition-ms", "0"][..], "--max-partition-ms"),
        (&["--jobs", "0"][..], "--jobs"),
        (&["--shard", "0/2"][..], "--shard"),
        (&["--faults", "failover"][..], "--replicas"),
        (&["--fencing", "--algorithm", "redlock"][..], "fencing"),
    ] {
        let mut args: Vec<String> = vec!["explore".into(), "--out".into()];
        args.push(scratch.0.join("explore-out").to_string_lossy().into_owned());
        for (flag, default) in [("--algorithm", "single-redis"), ("--faults", "pause")] {
            if !extra.contains(&flag) {
                args.extend([flag.to_string(), default.to_string()]);
            }
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        cases.push((args, needle));
    }
    let files = [
        (r#"{"algorithm": "paxos"}"#, "paxos"),
        (
            r#"{"algorithm": "single-redis", "params": {"ttl_ms": 0}}"#,
            "ttl_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"ttl_ms": -3}}"#,
            "params.ttl_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "faults": [{"at_ms": 5, "fault": "pause", "node": "client-0"}]}"#,
            "for_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "faults": [{"at_ms": 5, "fault": "pause", "node": "client-9", "for_ms": 5}]}"#,
            "client-9",
        ),
        (r#"{"algorithm": "single-redis", "#, "EOF"),
    ];
    let mut all = cases;
    for (i, (text, needle)) in files.iter().enumerate() {
        let f = scratch.file(&format!("bad{i}.json"), text);
        all.push((vec!["run".into(), f.to_str().unwrap().into()], needle));
    }
    let not_a_report = scratch.file("not-a-report.json", r#"{"hello": 1}"#);
    all.push((
        vec!["replay".into(), not_a_report.to_str().unwrap().into()],
        "not a lockcheck report",
    ));
    all.push((
        vec!["run".into(), "/nonexistent/scenario.json".into()],
        "/nonexistent/scenario.json",
    ));
    all.push((
        vec!["timeline".into(), not_a_report.to_str().unwrap().into()],
        "not a lockcheck report",
    ));
    all.push((
        vec!["timeline".into(), "/nonexistent/report.json".into()],
        "/nonexistent/report.json",
    ));
    for (args, needle) in all {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = lockcheck(&args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(
            stderr(&o).contains(needle),
            "{args:?}: stderr lacks {needle:?}: {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn committed_reports_still_replay_identically() {
    // The reference reports under reports/ are evidence a reader browses without running anything;
    // when a change alters what the simulator does, they must be regenerated (see docs/verdicts.md).
    // The matrix (`matrix.json`) sits beside them; each of its UNSAFE cells names its report.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "json") && !path.ends_with("matrix.json") {
            let r = lockcheck(&["replay", path.to_str().unwrap()]);
            assert_eq!(
                r.status.code(),
                Some(0),
                "{}: {}",
                path.display(),
                stdout(&r)
            );
            seen += 1;
        }
    }
    assert!(seen > 0, "no committed report in {}", dir.display());
}

#[test]
fn run_writes_the_html_timeline_beside_the_report_and_names_it() {
    let scratch = Scratch::new("timeline");
    let file = scratch.file("pause.json", PAUSE_STORY);
    let out = scratch.0.join("reports");
    let o = lockcheck(&[
        "run",
        file.to_str().unwrap(),
        "--report",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let report = report_in(&out);
    let html = report.with_extension("html");
    assert!(
        stdout(&o).contains(&format!("timeline: {}", html.display())),
        "{}",
        stdout(&o)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("class=\"violation\""));
    assert!(page.contains(&format!("lockcheck replay {}", report.display())));

    // `lockcheck timeline` draws the same page again from the report alone.
    std::fs::remove_file(&html).unwrap();
    let t = lockcheck(&["timeline", report.to_str().unwrap()]);
    assert_eq!(t.status.code(), Some(0), "{}{}", stdout(&t), stderr(&t));
    assert_eq!(std::fs::read_to_string(&html).unwrap(), page);
}

#[test]
fn committed_reports_have_their_current_timeline_beside_them() {
    // The HTML next to each reference report is what a reader opens first; it must be what this
    // lockcheck draws. After a change to the timeline, regenerate it: `lockcheck timeline
    // reports/NAME.json`.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
    let scratch = Scratch::new("committed-timelines");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let is_report = path.extension().is_some_and(|x| x == "json")
            && std::fs::read_to_string(&path).is_ok_and(|t| t.contains("\"history_hash\""));
        if !is_report {
            continue;
        }
        let copy = scratch.0.join(path.file_name().unwrap());
        std::fs::copy(&path, &copy).unwrap();
        let t = lockcheck(&["timeline", copy.to_str().unwrap()]);
        assert_eq!(t.status.code(), Some(0), "{}{}", stdout(&t), stderr(&t));
        let committed = std::fs::read_to_string(path.with_extension("html"))
            .unwrap_or_else(|e| panic!("{}: no timeline beside it: {e}", path.display()));
        assert!(
            std::fs::read_to_string(copy.with_extension("html")).unwrap() == committed,
            "{} is not what `lockcheck timeline {}` draws now: regenerate it",
            path.with_extension("html").display(),
            path.display()
        );
        seen += 1;
    }
    assert!(seen > 0, "no committed report in {}", dir.display());
}

/// `lockcheck real` with `envs` set for the child (e.g. a PATH without redis-server).
fn lockcheck_real(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("real")
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .expect("the binary runs")
}

#[test]
fn real_refuses_what_it_cannot_do_yet_with_exit_2() {
    // Refused before any server is needed: these pass without redis-server installed.
    let scratch = Scratch::new("real-refuses");
    // With replicas, a fault between two servers (their replication links) is the
    // simulator's alone so far.
    let replicated = scratch.file(
        "replicas.json",
        r#"{"algorithm": "single-redis", "params": {"replicas": 1},
            "faults": [{"at_ms": 10, "fault": "partition", "isolate": ["redis-0"], "for_ms": 100}]}"#,
    );
    for (args, needle) in [
        (
            vec!["--scenario", replicated.to_str().unwrap()],
            "between two Redis servers",
        ),
        (
            vec![
                "--algorithm",
                "zk-sequential",
                "--ttl-ms",
                "4000",
                "--session-timeout-ms",
                "6000",
            ],
            "--ttl-ms 4000 contradicts the lease the other flags give zk-sequential (6000 ms)",
        ),
        (
            vec!["--algorithm", "zk-sequential", "--wait-timeout-ms", "100"],
            "--wait-timeout-ms: zk-sequential has none",
        ),
        (
            vec!["--algorithm", "single-redis", "--persistence", "sometimes"],
            "unknown persistence 'sometimes'",
        ),
        (
            vec!["--algorithm", "single-redis", "--cases", "0"],
            "cases (--cases) must be",
        ),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--cases",
                "3",
                "--faults",
                "pause,nap",
            ],
            "unknown fault profile",
        ),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--cases",
                "3",
                "--clients",
                "2",
            ],
            "cannot be used with",
        ),
        (
            vec!["--algorithm", "single-redis", "--max-drift", "0.1"],
            "--cases",
        ),
        (
            vec!["--algorithm", "zk-rwlock", "--client", "true"],
            "--client: read/write locks",
        ),
        (
            vec!["--algorithm", "single-redis", "--client", " "],
            "--client: the command is empty",
        ),
        (
            vec![
                "--algorithm",
                "zk-rwlock",
                "--cases",
                "3",
                "--client",
                "true",
            ],
            "--client: read/write locks",
        ),
        (
            vec!["--algorithm", "single-redis", "--faults", "clock-drift"],
            "clock-drift is searched instead: add --cases N",
        ),
        (
            vec!["--algorithm", "single-redis", "--faults", "nap"],
            "unknown fault profile 'nap'",
        ),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--endpoints",
                "127.0.0.1:1,127.0.0.1:2",
            ],
            "2 endpoint(s) given; single-redis runs on 1 server(s): redis-0",
        ),
        (
            vec!["--algorithm", "single-redis", "--endpoints", "no-port-here"],
            "expected HOST:PORT",
        ),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--faults",
                "restart",
                "--endpoints",
                "127.0.0.1:1",
            ],
            "needs the server's process",
        ),
        (
            vec!["--algorithm", "single-redis", "--endpoints", "127.0.0.1:1"],
            "nothing answers at 127.0.0.1:1",
        ),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--faults",
                "pause",
                "--clients",
                "1",
            ],
            "at least 2 clients",
        ),
        (
            vec!["--algorithm", "redlock", "--nodes", "4"],
            "params.nodes",
        ),
        (
            vec!["--algorithm", "etcd-mutex", "--faults", "clock-jump"],
            "vDSO",
        ),
        (
            vec!["--algorithm", "etcd-mutex", "--ttl-ms", "2500"],
            "whole seconds",
        ),
        (
            vec!["--algorithm", "single-redis", "--key", "my-lock"],
            "params.key: 'my-lock' must start with a letter",
        ),
        (
            vec!["--algorithm", "single-redis", "--user", "alice"],
            "--endpoints",
        ),
        (vec!["--algorithm", "single-redis", "--keep"], "--endpoints"),
        (vec!["--algorithm", "single-redis", "--tls"], "--endpoints"),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--endpoints",
                "127.0.0.1:1",
                "--tls-cert",
                "c.pem",
            ],
            "--tls-key",
        ),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--endpoints",
                "127.0.0.1:1",
                "--tls-ca",
                "/nonexistent/ca.pem",
            ],
            "--tls-ca /nonexistent/ca.pem",
        ),
        (
            vec![
                "--algorithm",
                "single-redis",
                "--endpoints",
                "127.0.0.1:1",
                "--tls-ca",
                "Cargo.toml",
            ],
            "no PEM certificate",
        ),
    ] {
        let o = lockcheck_real(&args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn real_without_redis_server_says_how_to_install_it_and_exits_2() {
    let empty = Scratch::new("no-path");
    let o = lockcheck_real(
        &["--algorithm", "single-redis"],
        &[("PATH", empty.0.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("apt-get install redis-server"),
        "{}",
        stderr(&o)
    );
}

/// `real` and `explore` name faults alike: a story is named after explore's family
/// (`crash-restart`, with `restart` still read), a search takes explore's names (and `restart`),
/// and `real --help` lists explore's names. Refused before any server is needed.
#[test]
fn real_names_its_faults_as_explore_does() {
    for faults in ["crash-restart", "restart"] {
        // The restart story, refused only because it needs the server's process.
        let o = lockcheck_real(
            &[
                "--algorithm",
                "single-redis",
                "--faults",
                faults,
                "--endpoints",
                "127.0.0.1:1",
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(2), "{faults}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("kill redis-0's process")
                && stderr(&o).contains("needs the server's process"),
            "{faults}: {}",
            stderr(&o)
        );
    }
    // A search takes explore's names, and `restart` as crash-restart: refused here for the drift
    // bound alone, which is checked after the names.
    for faults in [
        "crash-restart,crash-delayed-restart",
        "restart",
        "pause,clock-drift,delay",
    ] {
        let o = lockcheck_real(
            &[
                "--algorithm",
                "single-redis",
                "--cases",
                "3",
                "--faults",
                faults,
                "--max-drift",
                "2",
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(2), "{faults}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("max_drift must be in [0, 1)"),
            "{faults}: {}",
            stderr(&o)
        );
    }
    // A family with no story says how to search it.
    for faults in ["crash-delayed-restart", "delay", "pause,partition"] {
        let o = lockcheck_real(&["--algorithm", "single-redis", "--faults", faults], &[]);
        assert_eq!(o.status.code(), Some(2), "{faults}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("add --cases N"),
            "{faults}: {}",
            stderr(&o)
        );
    }
    let real_help = stdout(&lockcheck(&["real", "--help"]));
    for name in [
        "none",
        "pause",
        "partition",
        "clock-jump",
        "clock-drift",
        "crash-restart",
        "crash-delayed-restart",
        "delay",
        "failover",
        "all",
    ] {
        assert!(real_help.contains(name), "real --help does not name {name}");
    }
    assert!(
        real_help.contains("`restart`, its old name"),
        "real --help says what became of `restart`"
    );
}

/// The failover story is told on a primary and two replicas: a `--replicas` that says otherwise
/// is refused, naming both, before any server starts (here no server could: PATH is empty), where
/// it used to turn docs/real-mode.md's safe WAIT story into a DEADLOCK on one replica.
#[test]
fn real_refuses_a_replica_count_that_contradicts_its_story_before_any_server_starts() {
    let empty = Scratch::new("replicas-conflict");
    let o = lockcheck_real(
        &[
            "--algorithm",
            "single-redis",
            "--replicas",
            "1",
            "--faults",
            "failover",
            "--wait-replicas",
            "1",
        ],
        &[("PATH", empty.0.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--replicas 1 contradicts the failover story")
            && err.contains("2 replicas (redis-0 primary, redis-1..2 replicas, sentinel)"),
        "{err}"
    );
    assert!(
        !err.contains("apt-get install"),
        "no server was looked for: {err}"
    );
    assert!(stdout(&o).is_empty(), "nothing ran: {}", stdout(&o));
}

fn redis_installed() -> bool {
    common::installed("redis-server")
}

#[test]
fn real_pause_finds_the_violation_and_reports_it_as_not_byte_replayable() {
    // docs/real-mode.md's command. Needs redis-server (CI installs it; elsewhere this is skipped).
    if !redis_installed() {
        return;
    }
    let dir = Scratch::new("real-report");
    let reports = dir.0.to_str().unwrap();
    let o = lockcheck_real(
        &[
            "--algorithm",
            "single-redis",
            "--faults",
            "pause",
            "--report",
            reports,
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("two holders at once"), "{}", stdout(&o));
    // The header names the servers and their roles.
    assert!(
        stdout(&o).starts_with("real run: single-redis on redis-0 (one server) with 3 client(s)"),
        "{}",
        stdout(&o)
    );

    // The report says where it came from; replay refuses it and names the rerun instead.
    let report = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.to_string_lossy().ends_with(".json")
                && !p.to_string_lossy().ends_with(".scenario.json")
        })
        .expect("a report was written");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["world"], "real");
    let o = lockcheck(&["replay", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not byte-replayable"), "{}", stderr(&o));

    // Its scenario, written beside it, runs in the simulator with the same verdict.
    let scenario = report.with_extension("scenario.json");
    let o = lockcheck(&["run", scenario.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn real_takes_explores_parameter_flags_into_its_story() {
    // `--fencing` on the pause story: the same question `explore --fencing` asks, for real.
    if !redis_installed() {
        return;
    }
    let o = lockcheck_real(
        &[
            "--algorithm",
            "single-redis",
            "--faults",
            "pause",
            "--clients",
            "2",
            "--fencing",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let scenario = stdout(&o)
        .lines()
        .find_map(|l| {
            l.split_once("its scenario is): ")
                .map(|(_, json)| json.to_string())
        })
        .expect("the scenario is printed");
    let json: serde_json::Value = serde_json::from_str(&scenario).unwrap();
    assert_eq!(json["params"]["fencing"], true, "{scenario}");
}

#[test]
fn real_cases_searches_real_runs_and_finds_the_pause_violation() {
    // `explore`'s generator against real servers, drawing only schedules that keep their story
    // on a real machine: the issue's search (seed 1), which used to find nothing in 20 cases,
    // finds the pause violation at case 2 (measured: 27 s). Each case's schedule is printed as
    // it starts; the first failing case is reported, and the simulation says whether it agrees.
    if !redis_installed() {
        return;
    }
    let dir = Scratch::new("real-cases");
    let reports = dir.0.to_str().unwrap();
    let o = lockcheck_real(
        &[
            "--algorithm",
            "single-redis",
            "--faults",
            "pause",
            "--cases",
            "4",
            "--seed",
            "1",
            "--report",
            reports,
        ],
        &[],
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(
        out.contains("UNSAFE: single-redis × [pause]: found for real at case"),
        "{out}"
    );
    assert!(out.contains("two holders at once"), "{out}");
    assert!(
        out.contains("real search: single-redis on redis-0 (one server) × [pause]"),
        "{out}"
    );
    // Each case's schedule, before its run: the hold-back of client-1, then the drawn pauses.
    assert!(out.contains("case 0: "), "{out}");
    assert!(out.contains("    0 ms: pause client-1 for 200 ms"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("    ") && l.contains(" ms: pause ") && !l.contains(" 0 ms:")),
        "{out}"
    );
    let real_report = dir
        .0
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with("real-single-redis-pause-")
                && name.ends_with(".json")
                && !name.ends_with(".scenario.json")
        });
    assert!(real_report.is_some(), "the real report is written: {out}");
    // The verdict of the simulation is said either way; where it agrees, its report replays.
    if out.contains("the simulation agrees") {
        let simulated = dir
            .0
            .read_dir()
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                name.starts_with("single-redis-real-case-") && name.ends_with(".json")
            })
            .expect("the simulated report is written");
        let o = lockcheck(&["replay", simulated.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    } else {
        assert!(out.contains("the simulation DISAGREES"), "{out}");
    }
}

#[test]
fn real_cases_without_faults_draws_every_profile_real_mode_can_carry_out() {
    // One case: the header names what is drawn from (every profile but failover, whose drawn
    // crash is a machine crash), where it used to draw from `none` and run no fault at all.
    if !redis_installed() {
        return;
    }
    let dir = Scratch::new("real-cases-all");
    let o = lockcheck_real(
        &[
            "--algorithm",
            "single-redis",
            "--cases",
            "1",
            "--report",
            dir.0.to_str().unwrap(),
        ],
        &[],
    );
    let out = stdout(&o);
    assert_ne!(o.status.code(), Some(2), "{out}{}", stderr(&o));
    assert!(
        out.contains(
            "× [pause,clock-jump,clock-drift,crash-restart,crash-delayed-restart,partition,delay]"
        ),
        "{out}"
    );
    let faults = out
        .lines()
        .filter(|l| l.starts_with("    ") && l.contains(" ms: "))
        .count();
    assert!(faults > 1, "a fault besides the hold-back: {out}");
}

/// A redis-server on a free port, killed by PID when dropped: a server the user runs.
struct UsersRedis {
    child: std::process::Child,
    port: u16,
}

impl UsersRedis {
    fn start() -> UsersRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = UsersRedis { child, port };
        // Ready when it answers PING.
        for _ in 0..500 {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let mut reply = [0u8; 7];
                if s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut reply).is_ok() {
                    return server;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("redis-server on port {port} did not answer");
    }
}

impl Drop for UsersRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn real_runs_against_a_server_the_user_already_runs() {
    if !redis_installed() {
        return;
    }
    let server = UsersRedis::start();
    // The user's own key named `lock`: before the run drew names of its own, it was taken for
    // the algorithm's lock (a "deadlock").
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.write_all(b"SET lock users\r\n").unwrap();
        let mut reply = [0u8; 5];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"+OK\r\n");
    }
    let endpoint = format!("127.0.0.1:{}", server.port);
    let o = lockcheck_real(
        &[
            "--algorithm",
            "single-redis",
            "--faults",
            "pause",
            "--endpoints",
            &endpoint,
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&endpoint), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("0 server process(es) started"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("lock name: lockcheck_"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("nothing of the run's is left on the servers"),
        "{}",
        stdout(&o)
    );
    drop(server);
}

/// A holder of a mysql-row lock without a TTL crashes: its row stays, and after the run the
/// probe cannot take the lock. That is a liveness failure, not a safety one: the headline says
/// DEADLOCK and the exit code is 3, so a CI reading 1 knows it means two holders.
#[test]
fn a_deadlock_is_headlined_deadlock_and_exits_3_not_1() {
    let scratch = Scratch::new("deadlock-exit");
    let file = scratch.file(
        "deadlock.json",
        r#"{"algorithm": "mysql-row", "workload": {"acquisitions_per_client": 1, "hold_ms": 5000},
            "duration_ms": 30000, "faults": [
              {"at_ms": 0, "fault": "pause", "node": "client-1", "for_ms": 500},
              {"at_ms": 1000, "fault": "crash", "node": "client-0"}]}"#,
    );
    let o = lockcheck(&["run", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).starts_with("DEADLOCK: mysql-row"),
        "{}",
        stdout(&o)
    );
}

/// A fair lock that hands the lock past a waiter queued before it is a fairness finding: the
/// headline says ORDER and the exit code is 4. The story: Redisson's fair lock, a client whose
/// clock runs 3 s ahead drops a live waiter from the queue and is granted first (see
/// `sim/tests/redis_fair.rs`).
#[test]
fn an_order_finding_is_headlined_order_and_exits_4() {
    let file = format!(
        "{}/sim/tests/scenarios/redis-fair-clock-ahead-jumps-the-queue.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = lockcheck(&["run", &file]);
    assert_eq!(o.status.code(), Some(4), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("ORDER: redis-fair"), "{out}");
    assert!(out.contains("client-2 was granted"), "{out}");
}

/// A waiter left waiting on a free lock is a liveness finding of its own: the headline says
/// STUCK and the exit code is 5. The story: Redisson's fair lock, the dead head of its queue
/// had a clock 30 s ahead, so its place outlives it (see `sim/tests/liveness.rs`); the run is
/// long enough for the place to lapse, so the probe takes the lock and there is no DEADLOCK.
#[test]
fn a_stuck_waiter_is_headlined_stuck_and_exits_5() {
    let scratch = Scratch::new("stuck-exit");
    let file = scratch.file(
        "stuck.json",
        r#"{"algorithm": "redis-fair", "clients": 3, "params": {"ttl_ms": 2000},
            "workload": {"acquisitions_per_client": 1, "hold_ms": 1000}, "duration_ms": 40000,
            "faults": [
              {"at_ms": 0, "fault": "clock_jump", "node": "client-0", "by_ms": 30000},
              {"at_ms": 0, "fault": "pause", "node": "client-0", "for_ms": 200},
              {"at_ms": 0, "fault": "pause", "node": "client-2", "for_ms": 400},
              {"at_ms": 700, "fault": "crash", "node": "client-0", "scope": "process"}]}"#,
    );
    let o = lockcheck(&["run", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(5), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("STUCK: redis-fair"), "{out}");
    assert!(out.contains("the bound is 10000.0 ms"), "{out}");
}

/// A closed standard output is not an error of the run: `lockcheck run F --report DIR | head -1`
/// used to panic with "Broken pipe" before the report was written. Now printing stops, the
/// report is written and the exit code is the verdict's. The pipe's reading end is closed before
/// lockcheck starts, so every write it makes fails.
#[test]
fn a_closed_stdout_ends_printing_but_not_the_run() {
    let scratch = Scratch::new("closed-stdout");
    let file = format!(
        "{}/sim/tests/scenarios/redis-fair-clock-ahead-jumps-the-queue.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", &file, "--report", scratch.0.to_str().unwrap()])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("the binary runs");
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let written = std::fs::read_dir(&scratch.0).unwrap().count();
    assert_eq!(written, 2, "the report and its timeline");
}

/// An I/O error is said once, with the path it is about, and is bad input (exit 2): here the
/// output directory is under a regular file.
#[test]
fn an_io_error_is_said_once_with_its_path() {
    let scratch = Scratch::new("io-error-once");
    let file = scratch.0.join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = file.join("out");
    let o = lockcheck(&[
        "explore",
        "--algorithm",
        "single-redis",
        "--faults",
        "pause",
        "--cases",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("Not a directory").count(), 1, "{err}");
    assert!(err.contains(out.to_str().unwrap()), "{err}");
}

/// A negative number for a flag is a value out of range, not an unknown argument.
#[test]
fn a_negative_value_is_refused_as_out_of_range() {
    let o = lockcheck(&[
        "explore",
        "--algorithm",
        "redlock",
        "--faults",
        "clock-drift",
        "--max-drift",
        "-0.1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("max_drift must be in [0, 1)"), "{err}");
    assert!(!err.contains("unexpected argument"), "{err}");
}

/// Files lockcheck writes are never written through a symbolic link: a link planted where a
/// search keeps its failing cases (here a dangling one, pointing out of `--out`) is refused with
/// exit 2, and nothing appears where it points.
#[test]
fn a_symbolic_link_in_the_output_directory_is_not_written_through() {
    let scratch = Scratch::new("symlink-out");
    let out = scratch.0.join("out");
    std::fs::create_dir_all(out.join("regressions")).unwrap();
    let outside = scratch.0.join("outside.json");
    std::os::unix::fs::symlink(&outside, out.join("regressions/single-redis-pause.json")).unwrap();
    let o = lockcheck(&[
        "explore",
        "--algorithm",
        "single-redis",
        "--faults",
        "pause",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
    assert!(!outside.exists());
}
