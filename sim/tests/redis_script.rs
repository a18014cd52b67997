//! redis-script: the user's own Lua lock, from the files in `examples/redis-script/`. Each
//! example is pinned here by the story that defines it, and set beside the built-in lock it
//! renders where there is one (`single-redis`, `redis-plain-del`): the same scenario must get the
//! same verdict, since the scripts are the same and run in the same simulated Redis.

mod common;

use common::search::{find, nothing_found, options};
use common::{hold_back, paused_holder};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Fault, Params, ScenarioError};
use lockcheck_core::{Algorithm, Outcome, Scenario};
use lockcheck_sim::run;
use lockcheck_sim::script_file::{load, ScriptFile, ScriptFileError};
use std::path::PathBuf;

fn example_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/redis-script")
        .join(name)
}

/// The example `name`, read as `--script` reads it.
fn example(name: &str) -> ScriptFile {
    load(&example_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// redis-script's parameters with the example `name`, as `--script` sets them.
fn params_of(name: &str) -> Params {
    let file = example(name);
    let mut params = Params {
        fencing: file.fencing,
        watchdog: file.script.extend.is_some(),
        ..Params::default()
    };
    params.redis.script = Some(file.script);
    params
}

/// `s` running the example `name` instead of its algorithm.
fn scripted(s: &Scenario, name: &str) -> Scenario {
    let mut s = s.clone();
    s.algorithm = Algorithm::RedisScript;
    let given = params_of(name);
    s.params.redis.script = given.redis.script;
    s.validate().expect("a valid redis-script scenario");
    s
}

fn kinds(outcome: &Outcome) -> Vec<ViolationKind> {
    outcome.violations.iter().map(|v| v.kind).collect()
}

/// The violations' stories, with the algorithm's name taken out (a story may name it).
fn stories(outcome: &Outcome, name: &str) -> Vec<String> {
    (outcome.violations.iter())
        .map(|v| v.story.replace(name, "ALGORITHM"))
        .collect()
}

#[test]
fn the_compare_and_delete_lock_is_found_safe_without_faults() {
    nothing_found(&options(
        Algorithm::RedisScript,
        &[FaultProfile::None],
        params_of("compare-and-delete.toml"),
        300,
    ));
}

/// A pause longer than the TTL breaks it, as it breaks single-redis: the search finds the very
/// same case, shrunk to the very same schedule and story.
#[test]
fn the_compare_and_delete_lock_breaks_under_pauses_exactly_as_single_redis() {
    let script = find(&options(
        Algorithm::RedisScript,
        &[FaultProfile::Pause],
        params_of("compare-and-delete.toml"),
        200,
    ));
    let built_in = find(&options(
        Algorithm::SingleRedis,
        &[FaultProfile::Pause],
        Params::default(),
        200,
    ));
    assert_eq!(kinds(&script.outcome), vec![ViolationKind::MutualExclusion]);
    assert_eq!(script.case_index, built_in.case_index);
    assert_eq!(script.scenario.faults, built_in.scenario.faults);
    assert_eq!(
        stories(&script.outcome, "redis-script"),
        stories(&built_in.outcome, "single-redis")
    );
}

#[test]
fn a_release_by_plain_del_frees_the_next_holders_lock_as_redis_plain_del_does() {
    let built_in = run(&paused_holder(Algorithm::RedisPlainDel));
    let script = run(&scripted(
        &paused_holder(Algorithm::RedisPlainDel),
        "plain-del.toml",
    ));
    assert!(
        kinds(&script).contains(&ViolationKind::ForeignRelease),
        "client-0's DEL deletes client-1's lock: {:#?}",
        script.violations
    );
    assert_eq!(
        stories(&script, "redis-script"),
        stories(&built_in, "redis-plain-del")
    );
    // The compare-and-delete release leaves client-1's lock alone.
    let careful = run(&scripted(
        &paused_holder(Algorithm::SingleRedis),
        "compare-and-delete.toml",
    ));
    assert!(
        !kinds(&careful).contains(&ViolationKind::ForeignRelease),
        "{:#?}",
        careful.violations
    );
}

#[test]
fn a_search_of_pauses_finds_the_plain_del_unsafe() {
    let finding = find(&options(
        Algorithm::RedisScript,
        &[FaultProfile::Pause],
        params_of("plain-del.toml"),
        200,
    ));
    assert!(
        kinds(&finding.outcome).contains(&ViolationKind::ForeignRelease),
        "{:#?}",
        finding.outcome.violations
    );
}

/// client-0 alone at first, crashed (for good) at `at_ms`.
fn crashed_at(at_ms: u64) -> Scenario {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.workload.acquisitions_per_client = 1;
    s.duration_ms = 20_000;
    s.faults = vec![
        hold_back("client-1"),
        Fault::Crash {
            at_ms,
            node: "client-0".into(),
            scope: Default::default(),
        },
    ];
    s
}

/// SETNX, then PEXPIRE: a client that dies between the two leaves a key without expiry, and
/// the lock is never free again. Crashing client-0 at each millisecond of its first
/// acquisition finds that moment; at no moment does the same crash deadlock the one-command
/// `SET NX PX`.
#[test]
fn a_client_crash_between_setnx_and_expire_deadlocks_the_lock() {
    let mut deadlocked = Vec::new();
    for at_ms in 0..40 {
        let split = run(&scripted(&crashed_at(at_ms), "setnx-then-expire.toml"));
        if kinds(&split).contains(&ViolationKind::Deadlock) {
            deadlocked.push(at_ms);
        }
        let atomic = run(&scripted(&crashed_at(at_ms), "compare-and-delete.toml"));
        assert!(
            !kinds(&atomic).contains(&ViolationKind::Deadlock),
            "SET NX PX at {at_ms} ms: {:#?}",
            atomic.violations
        );
    }
    assert!(
        !deadlocked.is_empty(),
        "no crash between SETNX and PEXPIRE was found"
    );
    // The window is the round trip between the two commands, not the whole run.
    assert!(deadlocked.len() < 20, "{deadlocked:?}");
}

/// A careful client (it checks its lock before each access) with a watchdog, paused past its
/// TTL in the middle of a long section: client-1 takes the expired lock. When client-0 wakes,
/// its watchdog renews before it touches the resource again. An extend that checks the owner
/// fails, so client-0 knows it lost the lock and keeps out; one that does not check renews
/// client-1's lock and tells client-0 its lock is good: two holders.
fn careful_holder_paused(algorithm: Algorithm) -> Scenario {
    let mut s = Scenario::new(algorithm);
    s.params.watchdog = true;
    s.workload.acquisitions_per_client = 1;
    s.workload.check_before_access = true;
    s.workload.hold_ms = 30_000;
    s.duration_ms = 60_000;
    s.faults = vec![
        hold_back("client-1"),
        Fault::Pause {
            at_ms: 500,
            node: "client-0".into(),
            for_ms: 12_000,
        },
    ];
    s
}

#[test]
fn an_extend_that_does_not_check_the_owner_renews_another_clients_lock() {
    let unchecked = run(&scripted(
        &careful_holder_paused(Algorithm::SingleRedis),
        "extend-any-owner.toml",
    ));
    assert!(
        kinds(&unchecked).contains(&ViolationKind::MutualExclusion),
        "{:#?}",
        unchecked.violations
    );
    let checked = run(&scripted(
        &careful_holder_paused(Algorithm::SingleRedis),
        "watchdog.json",
    ));
    let built_in = run(&careful_holder_paused(Algorithm::SingleRedis));
    assert_eq!(kinds(&checked), Vec::new(), "{:#?}", checked.violations);
    assert_eq!(kinds(&built_in), Vec::new(), "{:#?}", built_in.violations);
}

#[test]
fn the_fenced_lock_hands_out_tokens_the_resource_checks() {
    let s = scripted(&paused_holder(Algorithm::SingleRedis), "fenced.toml");
    let mut s = s;
    s.params.fencing = true;
    s.validate().expect("fencing with an integer>0 acquire");
    let outcome = run(&s);
    assert!(
        !kinds(&outcome).contains(&ViolationKind::MutualExclusion),
        "{:#?}",
        outcome.violations
    );
    assert!(
        !outcome.stale_accesses.is_empty(),
        "client-0's late access carries an older token and is rejected"
    );
    // Fencing reads the last acquire script's reply as the token: "ok" is not a number.
    let mut wrong = scripted(
        &paused_holder(Algorithm::SingleRedis),
        "compare-and-delete.toml",
    );
    wrong.params.fencing = true;
    let e = wrong.validate().unwrap_err().to_string();
    assert!(
        e.contains("params.fencing") && e.contains("integer>0"),
        "{e}"
    );
}

#[test]
fn a_scenario_without_scripts_or_with_scripts_for_another_lock_is_refused() {
    let e = Scenario::new(Algorithm::RedisScript)
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("--script FILE"), "{e}");
    let mut other = Scenario::new(Algorithm::SingleRedis);
    other.params.redis.script = params_of("plain-del.toml").redis.script;
    let e = other.validate().unwrap_err().to_string();
    assert!(
        e.contains("params.redis.script") && e.contains("single-redis"),
        "{e}"
    );
    let mut zk = Scenario::new(Algorithm::ZkSequential);
    zk.params.redis.script = params_of("plain-del.toml").redis.script;
    let e = zk.validate().unwrap_err();
    assert!(
        matches!(&e, ScenarioError::Invalid(m) if m.contains("params.redis (script)")),
        "{e}"
    );
}

/// Writes a script file into a fresh directory and reads it back.
fn load_text(name: &str, text: &str) -> Result<ScriptFile, ScriptFileError> {
    let dir = std::env::temp_dir().join(format!("lockcheck-script-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    load(&path)
}

const ACQUIRE: &str = r#"
[acquire]
script = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])"
keys = ["key"]
argv = ["token", "ttl_ms"]
acquired = "ok"
"#;

#[test]
fn a_syntax_error_is_refused_before_any_run_naming_the_script_and_line() {
    let text = format!(
        "{ACQUIRE}\n[release]\nscript = \"\"\"\nlocal v = redis.call('GET', KEYS[1])\nif v == ARGV[1] then\n  return redis.call('DEL' KEYS[1])\nend\nreturn 0\"\"\"\nkeys = [\"key\"]\nargv = [\"token\"]\nreleased = \"1\"\n"
    );
    let e = load_text("syntax.toml", &text).unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, ScriptFileError::Compile { .. }), "{message}");
    assert!(
        message.contains("the release script does not compile")
            && message.contains("user_script:3:"),
        "{message}"
    );
}

#[test]
fn the_file_says_how_each_reply_is_read_and_which_keys_exist() {
    let no_rule = format!("{ACQUIRE}\n[release]\nscript = \"return 1\"\n");
    let e = load_text("no_rule.toml", &no_rule).unwrap_err().to_string();
    assert!(e.contains("release: give 'released'"), "{e}");
    let bad_key = format!(
        "{ACQUIRE}\n[release]\nscript = \"return 1\"\nkeys = [\"token\"]\nreleased = \"1\"\n"
    );
    let e = load_text("bad_key.toml", &bad_key).unwrap_err().to_string();
    assert!(e.contains("'token' is not a key"), "{e}");
    let bad_word = format!("{ACQUIRE}\n[release]\nscript = \"return 1\"\nreleased = \"yes\"\n");
    let e = load_text("bad_word.toml", &bad_word)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("release.released") && e.contains("integer>0"),
        "{e}"
    );
}

/// The first history entry whose error mentions `text`.
fn error_with(outcome: &Outcome, text: &str) -> Option<String> {
    let json = serde_json::to_value(&outcome.history).unwrap();
    json.as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.get("error").and_then(|e| e.as_str()))
        .find(|e| e.contains(text))
        .map(str::to_string)
}

#[test]
fn a_runtime_error_is_recorded_naming_the_script_and_line_not_as_a_busy_lock() {
    let text = format!(
        "{ACQUIRE}\n[release]\nscript = \"\"\"\nlocal owner = redis.call('GET', KEYS[1])\nreturn owner + 1\"\"\"\nkeys = [\"key\"]\nargv = [\"token\"]\nreleased = \"1\"\n"
    );
    let file = load_text("runtime.toml", &text).expect("it compiles");
    let mut s = Scenario::new(Algorithm::RedisScript);
    s.params.redis.script = Some(file.script);
    s.workload.acquisitions_per_client = 1;
    let outcome = run(&s);
    let error = error_with(&outcome, "release script failed")
        .unwrap_or_else(|| panic!("no release error in {:#?}", outcome.history));
    assert!(error.contains("@user_script:2"), "{error}");
}

#[test]
fn a_script_that_touches_a_key_not_in_keys_is_reported() {
    let text = format!(
        "{ACQUIRE}\n[release]\nscript = \"redis.call('DEL', 'lock:owner') return redis.call('DEL', KEYS[1])\"\nkeys = [\"key\"]\nreleased = \"1\"\n"
    );
    let file = load_text("undeclared.toml", &text).expect("it compiles");
    let mut s = Scenario::new(Algorithm::RedisScript);
    s.params.redis.script = Some(file.script);
    s.workload.acquisitions_per_client = 1;
    let outcome = run(&s);
    let error = error_with(&outcome, "not in KEYS")
        .unwrap_or_else(|| panic!("no KEYS error in {:#?}", outcome.history));
    assert!(
        error.contains("release script failed") && error.contains("'lock:owner'"),
        "{error}"
    );
}

#[test]
fn a_report_embeds_the_scripts_and_replays_without_the_file() {
    let s = scripted(&paused_holder(Algorithm::RedisPlainDel), "plain-del.toml");
    let json = s.to_json();
    assert!(json.contains("return redis.call('DEL', KEYS[1])"), "{json}");
    let back = Scenario::from_json(&json).expect("reads back");
    assert_eq!(back, s);
    assert_eq!(run(&back).digest(), run(&s).digest());
}

#[test]
fn every_example_reads_and_compiles() {
    let dir = example_path("");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml") || n.ends_with(".json"))
        // The examples' expected verdicts, for `lockcheck check` (tests/script_cli.rs).
        .filter(|n| n != "expectations.toml")
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    for name in names {
        let mut s = Scenario::new(Algorithm::RedisScript);
        s.params = params_of(&name);
        s.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
