//! `lockcheck differential`: the simulation judged by real servers.
//!
//! The bad-input tests need no server: everything is refused before one starts. The budget tests
//! run a few drawn stories per backend and topology against real servers (`--quick`: an agreeing
//! story is run for real once, a disagreeing one `--repeat` times) and fail when a story the
//! simulation finds safe was unsafe in every real run: a false "not found" of the models. The
//! longer budgets are run by hand (`FIDELITY.md` has the command and the latest results).

mod common;

use common::{lockcheck, stderr, stdout, Scratch};

#[test]
fn bad_input_is_refused_before_any_server_starts() {
    let scratch = Scratch::new("differential-bad");
    let out = scratch.0.join("out");
    let out = out.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--algorithm", "no-such-lock"],
            "unknown algorithm 'no-such-lock'",
        ),
        (
            vec!["--algorithm", "single-redis", "--faults", "gremlins"],
            "unknown fault profile 'gremlins'",
        ),
        (
            vec!["--algorithm", "single-redis", "--repeat", "0"],
            "--repeat",
        ),
        (
            vec!["--algorithm", "single-redis", "--stories", "0"],
            "--stories",
        ),
        (vec!["--algorithm", "redlock", "--nodes", "4"], "odd"),
        (
            vec!["--algorithm", "single-redis", "--faults", "failover"],
            "replica",
        ),
        (vec!["--algorithm", "single-redis", "--ttl-ms", "0"], "ttl"),
    ] {
        let mut full = vec!["differential", "--out", out];
        full.extend(&args);
        let o = lockcheck(&full);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).to_lowercase().contains(&says.to_lowercase()),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(!std::path::Path::new(out).exists(), "{args:?} wrote {out}");
    }
    // A machine crash cannot be made on one loopback machine: a scenario that asks for one is
    // refused with that reason, not run.
    let file = scratch.file(
        "machine-crash.json",
        r#"{"algorithm": "single-redis", "duration_ms": 10000,
            "faults": [{"at_ms": 100, "fault": "crash", "node": "redis-0"},
                       {"at_ms": 200, "fault": "restart", "node": "redis-0"}]}"#,
    );
    let o = lockcheck(&[
        "differential",
        "--out",
        out,
        "--scenario",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("machine crash"), "{}", stderr(&o));
    assert!(!std::path::Path::new(out).exists());
}

/// Runs a small differential search and checks that no story is simulation-safe and
/// real-unsafe in all of its real runs; returns what it printed.
fn budget(name: &str, binary: &str, args: &[&str]) -> Option<String> {
    if !common::installed(binary) {
        return None;
    }
    let scratch = Scratch::new(&format!("differential-{name}"));
    let out = scratch.0.join("out");
    let mut full = vec![
        "differential",
        "--stories",
        "2",
        "--repeat",
        "3",
        "--quick",
        "--shrink-runs",
        "0",
        "--out",
        out.to_str().unwrap(),
    ];
    full.extend(args);
    let o = lockcheck(&full);
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{name}: a story the simulation finds safe broke mutual exclusion in every real run:\n{text}\n{}",
        stderr(&o)
    );
    assert!(text.contains("2 stories:"), "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("differential.json")).unwrap())
            .unwrap();
    assert_eq!(summary["stories"].as_array().unwrap().len(), 2);
    Some(text)
}

#[test]
fn single_redis_agrees_with_a_real_redis() {
    budget(
        "single-redis",
        "redis-server",
        &["--algorithm", "single-redis", "--faults", "all"],
    );
}

#[test]
fn redlock_agrees_with_real_redis_masters() {
    budget(
        "redlock",
        "redis-server",
        &["--algorithm", "redlock", "--nodes", "3", "--faults", "all"],
    );
}

#[test]
fn a_primary_with_replicas_agrees_under_a_real_sentinel() {
    budget(
        "sentinel",
        "redis-server",
        &[
            "--algorithm",
            "single-redis",
            "--replicas",
            "1",
            "--faults",
            "failover,pause",
            "--ttl-ms",
            "8000",
        ],
    );
}

#[test]
fn zookeeper_standalone_agrees_with_a_real_server() {
    budget(
        "zk",
        "java",
        &["--algorithm", "zk-sequential", "--faults", "all"],
    );
}

#[test]
fn a_zookeeper_ensemble_agrees_with_a_real_ensemble() {
    budget(
        "zk-ensemble",
        "java",
        &[
            "--algorithm",
            "zk-sequential",
            "--nodes",
            "3",
            "--faults",
            "pause",
        ],
    );
}

#[test]
fn mariadb_agrees_with_a_real_server() {
    budget(
        "mariadb",
        "mariadbd",
        &["--algorithm", "mysql-row", "--faults", "all"],
    );
}

#[test]
fn etcd_agrees_with_a_real_member() {
    budget(
        "etcd",
        "etcd",
        &["--algorithm", "etcd-mutex", "--faults", "all"],
    );
}

/// Seed 002's file (a losing partition of `redis-0`, then `redis-1` restarted empty) is UNSAFE
/// in the simulation and safe for real, where TCP delivers across the partition
/// (`real/tests/redis.rs` pins both): a disagreement that does not hang on the machine. With a
/// pause of nobody's business added, the search writes its folder and shrinks the story (the
/// pause goes first or second, within four real runs).
#[test]
fn a_disagreement_gets_its_folder_and_shrinks_to_a_story_that_still_disagrees() {
    if !common::installed("redis-server") {
        return;
    }
    let scratch = Scratch::new("differential-shrink");
    let file = scratch.file(
        "seed-002-and-a-pause.json",
        r#"{
  "algorithm": "redlock",
  "params": { "nodes": 3, "ttl_ms": 10000, "persistence": "none", "restart_delay_ms": 0 },
  "clients": 2,
  "workload": { "acquisitions_per_client": 1, "hold_ms": 6000, "think_ms": 100 },
  "duration_ms": 8000,
  "seed": 2,
  "faults": [
    { "at_ms": 0,    "fault": "partition", "isolate": ["redis-0"], "for_ms": 1000 },
    { "at_ms": 2000, "fault": "crash",     "node": "redis-1", "scope": "process" },
    { "at_ms": 2000, "fault": "restart",   "node": "redis-1" },
    { "at_ms": 7000, "fault": "pause",     "node": "redis-2", "for_ms": 100 }
  ]
}"#,
    );
    let out = scratch.0.join("out");
    let o = lockcheck(&[
        "differential",
        "--scenario",
        file.to_str().unwrap(),
        "--repeat",
        "2",
        "--shrink-runs",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = stdout(&o);
    // Only a false "not found" fails a search.
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", stderr(&o));
    assert!(
        text.contains("SIM UNSAFE, REAL SAFE: story seed-002-and-a-pause"),
        "{text}"
    );
    let folder = out.join("seed-002-and-a-pause-sim-unsafe-real-safe");
    let names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for prefix in [
        "scenario.json",
        "compare.html",
        "README.txt",
        "simulation-",
        "real-1-",
        "real-2-",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "{prefix} missing from {names:?}"
        );
    }
    let page = std::fs::read_to_string(folder.join("compare.html")).unwrap();
    assert_eq!(
        page.matches("<iframe").count(),
        3,
        "the simulation and both real runs"
    );
    assert!(
        page.contains("rerun for real: lockcheck real --scenario"),
        "{page}"
    );
    let shrunk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("shrunk.json")).unwrap())
            .unwrap();
    let faults = shrunk["faults"].as_array().unwrap();
    assert!(
        faults.len() < 4 && faults.iter().all(|f| f["fault"] != "pause"),
        "the pause is dropped: {shrunk}"
    );
    assert!(text.contains("shrunk to"), "{text}");
}
