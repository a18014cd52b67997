//! `lockcheck real --client`: real lock libraries in processes of their own, driven over the
//! client protocol, against real servers, with real faults on the processes; and clients that
//! break the protocol, which end the run with an error naming them (never a verdict, never a
//! hang), every process gone.
//!
//! Each reference client (`clients/`) is pinned by the story the issue names for it (a pause past
//! the lease: UNSAFE; for kazoo, a partition past the session too, UNSAFE, and the client that
//! checks its session before each access: nothing found under partitions, UNSAFE when paused)
//! and compared with lockcheck's own rendition of the same lock under the same scenario: where
//! they differ, that is a finding, printed side by side.

mod common;

use common::{alive, installed, one_at_a_time};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::scenario::{Fault, Persistence, Scenario};
use lockcheck_core::Algorithm;
use lockcheck_real::launcher::{Redis, ZooKeeper};
use lockcheck_real::profile::{self, Profile, Shape};
use lockcheck_real::{run, run_with, ClientCommand, RealError, RealRun, Servers};
use std::io::Write;
use std::time::{Duration, Instant};

const PYTHON: &str = "/usr/bin/python3";

fn redis_installed() -> bool {
    installed(&Redis {
        persistence: Persistence::None,
    })
}

fn zookeeper_installed() -> bool {
    installed(&ZooKeeper {
        session_timeout_ms: 4_000,
        tick_time_ms: lockcheck_core::scenario::DEFAULT_TICK_TIME_MS,
    })
}

/// Whether Debian's Python has `module` (and its package): says so and skips when not, fails
/// under CI=true.
fn python_has(module: &str, package: &str) -> bool {
    let found = std::process::Command::new(PYTHON)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return true;
    }
    let install = format!("apt-get install {package}");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{PYTHON} cannot import {module} under CI=true: .ci/run must `{install}`");
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipping a reference-client test: {install}"
    );
    false
}

/// The reference client `file` (under `clients/`) run by Debian's Python.
fn python_client(file: &str) -> ClientCommand {
    ClientCommand::new(format!(
        "{PYTHON} {}/../clients/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn story(algorithm: Algorithm, faults: Profile) -> Scenario {
    let mut s = profile::scenario(algorithm, faults, &Shape::for_story(algorithm, faults)).unwrap();
    profile::fit_story(faults, &mut s);
    s
}

/// Runs `scenario` with `client`'s processes; checks every one of them is gone afterwards.
fn run_client(scenario: &Scenario, client: &ClientCommand) -> RealRun {
    let real = run_with(scenario, &Servers::Launched, Some(client))
        .unwrap_or_else(|e| panic!("the run with `{}` failed: {e}", client.command));
    let clients = scenario.clients as usize;
    assert!(
        real.client_pids.len() > clients,
        "one process per client and one for the probe: {:?}",
        real.client_pids
    );
    assert_gone(&real.client_pids);
    real
}

/// No process of these groups runs any more (a zombie left for init to reap runs nothing; one
/// that `kill -9` is tearing down is given a second to finish).
fn assert_gone(groups: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !still_running(groups).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = still_running(groups);
    assert!(left.is_empty(), "client processes still run: {left:?}");
}

/// The processes of `groups` that are not zombies: PID, group, /proc stat line.
fn still_running(groups: &[u32]) -> Vec<(u32, u32, String)> {
    let running: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the command's name in parentheses: state, ppid, pgrp.
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let pgrp: u32 = fields.get(2)?.parse().ok()?;
            (fields[0] != "Z").then_some((pid, pgrp, stat))
        })
        .collect();
    running
        .into_iter()
        .filter(|(_, g, _)| groups.contains(g))
        .collect()
}

fn verdict(real: &RealRun) -> String {
    match real.outcome.violations.first() {
        None => "no violation".into(),
        Some(v) => format!("{:?}: {}", v.kind, v.story),
    }
}

/// The library's verdict beside lockcheck's rendition's, on the same scenario, for the test's
/// output; whether they agree.
fn side_by_side(library: &str, with_library: &RealRun, scenario: &Scenario) -> bool {
    let rendition = run(scenario).unwrap_or_else(|e| panic!("lockcheck's own run failed: {e}"));
    let kinds = |r: &RealRun| common::kinds(&r.outcome.violations);
    let agree = kinds(with_library) == kinds(&rendition);
    // The rendition as `--algorithms` names it: with its library variant, when it has one.
    let rendition_name = match &scenario.params.variant {
        Some(variant) => format!("{}@{variant}", scenario.algorithm.name()),
        None => scenario.algorithm.name().to_string(),
    };
    let _ = writeln!(
        std::io::stderr().lock(),
        "{library}: {}\nlockcheck's {}: {}\n{}",
        verdict(with_library),
        rendition_name,
        verdict(&rendition),
        if agree {
            "they agree"
        } else {
            "FINDING: the library and lockcheck's rendition differ"
        }
    );
    agree
}

fn assert_two_holders(real: &RealRun, client: &str) {
    let v = real
        .outcome
        .violations
        .first()
        .unwrap_or_else(|| panic!("no violation:\n{:#?}", real.outcome.history.entries));
    assert_eq!(v.kind, ViolationKind::MutualExclusion, "{v:?}");
    assert!(v.clients.iter().any(|c| c == client), "{v:?}");
}

#[test]
fn redis_py_lock_paused_past_its_ttl_lets_a_second_holder_in() {
    if !redis_installed() || !python_has("redis", "python3-redis") {
        return;
    }
    let _one = one_at_a_time();
    let scenario = story(Algorithm::SingleRedis, Profile::Pause);
    let real = run_client(&scenario, &python_client("redis_py_lock.py"));
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("redis-py Lock", &real, &scenario),
        "redis-py's Lock and single-redis differ under the pause story"
    );
}

#[test]
fn redis_py_lock_without_faults_gives_every_client_its_sections() {
    if !redis_installed() || !python_has("redis", "python3-redis") {
        return;
    }
    let _one = one_at_a_time();
    let scenario = story(Algorithm::SingleRedis, Profile::None);
    let real = run_client(&scenario, &python_client("redis_py_lock.py"));
    assert!(
        real.outcome.violations.is_empty(),
        "{:#?}",
        real.outcome.violations
    );
    let sections = common::sections(&real);
    let wanted = scenario.clients * scenario.workload.acquisitions_per_client;
    assert_eq!(sections as u32, wanted, "{:#?}", real.outcome.history);
}

#[test]
fn kazoo_lock_paused_past_its_session_lets_a_second_holder_in() {
    if !zookeeper_installed() || !python_has("kazoo", "python3-kazoo") {
        return;
    }
    let _one = one_at_a_time();
    let scenario = story(Algorithm::ZkSequential, Profile::Pause);
    let real = run_client(&scenario, &python_client("kazoo_lock.py"));
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("kazoo Lock", &real, &scenario),
        "kazoo's Lock and zk-sequential differ under the pause story"
    );
}

/// Whether Debian's Curator jars (and what they need) are installed: says so and skips when
/// not, fails under CI=true.
fn curator_installed() -> bool {
    let classpath = curator_classpath();
    let missing: Vec<&str> = classpath
        .split(':')
        .filter(|jar| !std::path::Path::new(jar).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let install =
        "apt-get install libcurator-recipes-java libcurator-framework-java libzookeeper-java";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{missing:?} missing under CI=true: .ci/run must `{install}`");
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipping a reference-client test: {install}"
    );
    false
}

/// The classpath of `clients/CuratorLock.java`: `clients/curator-classpath`, one line.
fn curator_classpath() -> String {
    let path = format!(
        "{}/../clients/curator-classpath",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .to_string()
}

#[test]
fn curator_interprocess_mutex_paused_past_its_session_lets_a_second_holder_in() {
    if !zookeeper_installed() || !curator_installed() {
        return;
    }
    let _one = one_at_a_time();
    let scenario = story(Algorithm::ZkSequential, Profile::Pause);
    let client = ClientCommand::new(format!(
        "java -cp {} {}/../clients/CuratorLock.java",
        curator_classpath(),
        env!("CARGO_MANIFEST_DIR")
    ));
    let real = run_client(&scenario, &client);
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("Curator InterProcessMutex", &real, &scenario),
        "Curator's InterProcessMutex and zk-sequential differ under the pause story"
    );
}

#[test]
fn a_crashed_client_process_is_killed_and_started_again() {
    if !redis_installed() || !python_has("redis", "python3-redis") {
        return;
    }
    let _one = one_at_a_time();
    let mut scenario = story(Algorithm::SingleRedis, Profile::None);
    let fault = |json: &str| serde_json::from_str::<Fault>(json).unwrap();
    scenario.faults = vec![
        fault(r#"{"fault":"crash","at_ms":300,"node":"client-0","scope":"process"}"#),
        fault(r#"{"fault":"restart","at_ms":600,"node":"client-0"}"#),
    ];
    scenario.validate().unwrap();
    let real = run_client(&scenario, &python_client("redis_py_lock.py"));
    // Three clients, client-0 once more after its crash, and the probe.
    assert_eq!(real.client_pids.len(), 5, "{:?}", real.client_pids);
    let notes = real
        .outcome
        .history
        .entries
        .iter()
        .filter(|e| matches!(&e.op, lockcheck_core::history::Op::Note { text } if text.contains("incarnation 2")))
        .count();
    assert_eq!(notes, 1, "client-0's second process is in the history");
}

/// A client made of `script` (a shell command) that first writes its PID to a file, so the test
/// can tell it is gone after the run's error.
fn shell_client(dir: &std::path::Path, script: &str) -> ClientCommand {
    let mut c = ClientCommand::new(format!("echo $$ >> {}/pids; {script}", dir.display()));
    c.start_timeout = Duration::from_secs(3);
    c.silence = Duration::from_secs(3);
    c
}

/// Runs the no-fault story of single-redis with `script` as its clients: the error, within
/// `within`, and that every process it started is gone.
fn bad_client(script: &str, within: Duration) -> String {
    let dir = std::env::temp_dir().join(format!(
        "lockcheck-bad-client-{}-{}",
        std::process::id(),
        script.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = story(Algorithm::SingleRedis, Profile::None);
    let started = Instant::now();
    let error = match run_with(
        &scenario,
        &Servers::Launched,
        Some(&shell_client(&dir, script)),
    ) {
        Err(e @ RealError::Client { .. }) => e.to_string(),
        other => panic!("expected a client error, got {other:?}"),
    };
    assert!(started.elapsed() < within, "took {:?}", started.elapsed());
    let pids: Vec<u32> = std::fs::read_to_string(dir.join("pids"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(!pids.is_empty());
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        pids.iter().all(|&p| !alive(p, "")),
        "left running: {pids:?}"
    );
    assert_gone(&pids);
    std::fs::remove_dir_all(&dir).unwrap();
    error
}

#[test]
fn a_client_that_prints_something_else_is_an_error_naming_it_and_the_line() {
    if !redis_installed() {
        return;
    }
    let _one = one_at_a_time();
    let error = bad_client(
        "echo 'connecting to redis' >&2; echo 'hello there'; sleep 30",
        Duration::from_secs(20),
    );
    assert!(error.contains("client-0"), "{error}");
    assert!(error.contains("hello there"), "{error}");
    assert!(
        error.contains("connecting to redis"),
        "stderr kept: {error}"
    );
}

#[test]
fn a_client_that_exits_is_an_error_with_its_stderr() {
    if !redis_installed() {
        return;
    }
    let _one = one_at_a_time();
    let error = bad_client(
        r#"echo '{"v":1,"op":"ready"}'; read line; echo 'Traceback: no module named redis' >&2; exit 3"#,
        Duration::from_secs(20),
    );
    assert!(error.contains("exited"), "{error}");
    assert!(error.contains("exit status: 3"), "{error}");
    assert!(error.contains("no module named redis"), "{error}");
}

#[test]
fn a_silent_client_is_an_error_not_a_hang() {
    if !redis_installed() {
        return;
    }
    let _one = one_at_a_time();
    let error = bad_client(
        r#"echo '{"v":1,"op":"ready"}'; sleep 60"#,
        Duration::from_secs(40),
    );
    assert!(error.contains("said nothing"), "{error}");
}

#[test]
fn a_client_of_another_protocol_version_is_refused() {
    if !redis_installed() {
        return;
    }
    let _one = one_at_a_time();
    let error = bad_client(
        r#"echo '{"v":2,"op":"ready"}'; sleep 30"#,
        Duration::from_secs(20),
    );
    assert!(error.contains("version 2"), "{error}");
}

#[test]
fn a_client_process_whose_clock_jumps_reads_the_jumped_clock() {
    if !redis_installed() {
        return;
    }
    let _one = one_at_a_time();
    let mut scenario = story(Algorithm::SingleRedis, Profile::None);
    scenario.duration_ms = 1_000;
    let day_ms: i64 = 86_400_000;
    scenario.faults = vec![serde_json::from_str::<Fault>(&format!(
        r#"{{"fault":"clock_jump","at_ms":0,"node":"client-0","by_ms":{day_ms}}}"#
    ))
    .unwrap()];
    scenario.validate().unwrap();
    // Every acquire is answered with an error whose reason is the client's wall clock, read by
    // `date` (a child of the client: the time-shift library is inherited).
    let mut client = ClientCommand::new(
        r#"echo '{"v":1,"op":"ready"}'; while read line; do echo "{\"v\":1,\"op\":\"error\",\"reason\":\"$(date +%s)\"}"; done"#,
    );
    client.silence = Duration::from_secs(5);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let real = run_with(&scenario, &Servers::Launched, Some(&client)).unwrap();
    let clock_of = |node: &str| -> Vec<i64> {
        real.outcome
            .history
            .entries
            .iter()
            .filter(|e| e.node == node)
            .filter_map(|e| match &e.op {
                lockcheck_core::history::Op::Acquire {
                    error: Some(reason),
                    ..
                } => reason.parse().ok(),
                _ => None,
            })
            .collect()
    };
    let (jumped, unmoved) = (clock_of("client-0"), clock_of("client-1"));
    assert!(!jumped.is_empty() && !unmoved.is_empty());
    let day_s = day_ms / 1000;
    assert!(
        jumped.iter().all(|&t| t >= now_s + day_s - 60),
        "client-0 read {jumped:?}, a day after {now_s}"
    );
    assert!(
        unmoved.iter().all(|&t| t < now_s + 60),
        "client-1 read {unmoved:?}, about {now_s}"
    );
    assert_gone(&real.client_pids);
}

/// The history's release of `client` that failed, with why (a `lost` line's reason).
fn lost_reasons(real: &RealRun, client: &str) -> Vec<String> {
    real.outcome
        .history
        .entries
        .iter()
        .filter(|e| e.node == client && e.kind == lockcheck_core::history::Kind::Fail)
        .filter_map(|e| match &e.op {
            lockcheck_core::history::Op::Release {
                error: Some(why), ..
            } => Some(why.clone()),
            _ => None,
        })
        .collect()
}

/// The end of `client`'s first process's stderr, as the run's report keeps it.
fn stderr_of(real: &RealRun, client: &str) -> Vec<String> {
    let run = real
        .client
        .as_ref()
        .expect("a --client run keeps its clients' stderr");
    run.stderr
        .iter()
        .find(|s| s.client == client && s.incarnation == 1)
        .unwrap_or_else(|| panic!("no stderr kept for {client}: {run:?}"))
        .lines
        .clone()
}

#[test]
fn kazoo_lock_cut_off_past_its_session_lets_a_second_holder_in() {
    if !zookeeper_installed() || !python_has("kazoo", "python3-kazoo") {
        return;
    }
    let _one = one_at_a_time();
    let scenario = story(Algorithm::ZkSequential, Profile::Partition);
    let real = run_client(&scenario, &python_client("kazoo_lock.py"));
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("kazoo Lock", &real, &scenario),
        "kazoo's Lock and zk-sequential differ under the partition story"
    );
}

#[test]
fn kazoo_lock_checking_its_session_before_each_access_stays_out_when_cut_off() {
    if !zookeeper_installed() || !python_has("kazoo", "python3-kazoo") {
        return;
    }
    let _one = one_at_a_time();
    let scenario = story(Algorithm::ZkSequential, Profile::Partition);
    let real = run_client(&scenario, &python_client("kazoo_checked_lock.py"));
    assert!(
        real.outcome.violations.is_empty(),
        "{:#?}\n{:#?}",
        real.outcome.violations,
        real.outcome.history.entries
    );
    // For the right reason: client-0 saw its session suspended while cut off, before the
    // server expired it and let the next holder in, and gave the lock up instead of writing
    // after the heal.
    let entries = &real.outcome.history.entries;
    let lost = lost_reasons(&real, "client-0");
    let after_s: f64 = lost
        .iter()
        .find_map(|why| {
            let (_, rest) = why.split_once("(SUSPENDED ")?;
            rest.split_once(" s after it")?.0.parse().ok()
        })
        .unwrap_or_else(|| panic!("client-0 did not give its lock up: {lost:?}\n{entries:#?}"));
    let acquired_ns = entries
        .iter()
        .find(|e| {
            e.node == "client-0"
                && e.kind == lockcheck_core::history::Kind::Ok
                && matches!(e.op, lockcheck_core::history::Op::Acquire { .. })
        })
        .expect("client-0 acquired")
        .true_ns;
    let suspended_ns = acquired_ns + (after_s * 1e9) as u64;
    let next_in_ns = entries
        .iter()
        .find_map(|e| match &e.op {
            lockcheck_core::history::Op::Resource {
                client,
                phase: lockcheck_core::history::Phase::Enter,
                accepted: true,
                ..
            } if client != "client-0" => Some(e.true_ns),
            _ => None,
        })
        .expect("another client took the lock");
    let heal_ns = scenario
        .faults
        .iter()
        .find_map(|f| match f {
            Fault::Partition { at_ms, for_ms, .. } => Some((at_ms + for_ms) * 1_000_000),
            _ => None,
        })
        .expect("the story's partition");
    assert!(
        next_in_ns < heal_ns,
        "the partition did not outlast client-0's session: the next holder entered at {next_in_ns} ns, the heal was at {heal_ns} ns"
    );
    assert!(
        suspended_ns < next_in_ns,
        "client-0 saw its session suspended at {suspended_ns} ns, after the next holder entered at {next_in_ns} ns"
    );
    let stderr = stderr_of(&real, "client-0");
    assert!(
        stderr.iter().any(|l| l.contains("SUSPENDED")),
        "kazoo's state change is in client-0's stderr: {stderr:?}"
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "kazoo Lock checking its session: {}; client-0 suspended at {:.0} ms, the next holder in \
         at {:.0} ms, the heal at {:.0} ms",
        verdict(&real),
        suspended_ns as f64 / 1e6,
        next_in_ns as f64 / 1e6,
        heal_ns as f64 / 1e6
    );
}

/// A pause defeats the check: on waking, the process's view of its session is what it was when
/// it stopped. Under the plain pause story that is a race (FINDING, docs/check-your-lock.md): the server closed
/// the expired session's connection during the pause, and on waking kazoo's connection thread
/// reads that close and marks the session SUSPENDED while the main thread checks; either may run
/// first (UNSAFE in about half the runs here). This pins the story without the race: the
/// server's close reaches client-0 a second after it woke (its link to the server alone stays
/// silent that long, as when the close is lost and must be timed out), so the check reads the
/// stale CONNECTED, and the late write goes in beside the next holder's: UNSAFE.
#[test]
fn kazoo_lock_checking_its_session_paused_past_it_reads_a_stale_state_on_waking() {
    if !zookeeper_installed() || !python_has("kazoo", "python3-kazoo") {
        return;
    }
    let _one = one_at_a_time();
    let mut scenario = story(Algorithm::ZkSequential, Profile::Pause);
    let (at_ms, for_ms) = scenario
        .faults
        .iter()
        .find_map(|f| match f {
            Fault::Pause {
                at_ms,
                node,
                for_ms,
            } if node == "client-0" => Some((*at_ms, *for_ms)),
            _ => None,
        })
        .expect("the story pauses client-0");
    scenario.faults.push(Fault::Partition {
        at_ms,
        isolate: vec!["client-0".into()],
        from: Some(vec!["zk-0".into()]),
        for_ms: for_ms + 1_000,
        hold: false,
    });
    scenario.validate().unwrap();
    let real = run_client(&scenario, &python_client("kazoo_checked_lock.py"));
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("kazoo Lock checking its session", &real, &scenario),
        "the checking kazoo client and zk-sequential differ when paused past the session"
    );
}

/// `clients/node-redlock/`, where `.ci/run` installs node-redlock with `npm ci`.
fn node_redlock_dir() -> String {
    format!("{}/../clients/node-redlock", env!("CARGO_MANIFEST_DIR"))
}

/// Whether node and node-redlock (installed by `npm ci` in `clients/node-redlock`) are there:
/// says so and skips when not, fails under CI=true.
fn node_redlock_installed() -> bool {
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let dir = node_redlock_dir();
    let redlock = std::path::Path::new(&dir).join("node_modules/redlock/package.json");
    if node && redlock.exists() {
        return true;
    }
    let install = format!("install node and npm, then `npm ci` in {dir}");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "node-redlock is missing under CI=true (node on PATH: {node}, {} exists: {}): \
             .ci/run must {install}",
            redlock.display(),
            redlock.exists()
        );
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipping a reference-client test: {install}"
    );
    false
}

#[test]
fn node_redlock_paused_past_its_ttl_lets_a_second_holder_in() {
    if !redis_installed() || !node_redlock_installed() {
        return;
    }
    let _one = one_at_a_time();
    let scenario = story(Algorithm::Redlock, Profile::Pause);
    let client = ClientCommand::new(format!("node {}/redlock_client.js", node_redlock_dir()));
    let started = Instant::now();
    let real = run_client(&scenario, &client);
    let _ = writeln!(
        std::io::stderr().lock(),
        "node-redlock run: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("node-redlock", &real, &scenario),
        "node-redlock and redlock differ under the pause story"
    );
    // The same story told by lockcheck's rendition of node-redlock 4.2.0 (`redlock --variant
    // node-redlock`: validity by the wall clock, one value per lock call, its retry draw and
    // unlock): it must agree with the library as well.
    let mut rendition = scenario.clone();
    rendition.params.variant = Some("node-redlock".into());
    rendition.validate().unwrap();
    assert!(
        side_by_side("node-redlock", &real, &rendition),
        "node-redlock and redlock --variant node-redlock differ under the pause story"
    );
}

/// node-redlock's own hole, told with real faults: its attempt is timed by `Date.now()`.
/// client-0 takes the lock once without faults (its `EVALSHA`s load the scripts), then asks
/// again at about 2.5 s while its proxies hold up its SETs and their replies 2.5 s each (the
/// keys are set at about 5 s and expire at 7 s; the replies arrive at 7.5 s), and its
/// process's wall clock is stepped back 5 s meanwhile (the time-shift library, inherited by
/// node); client-1 is cut off until 8 s. node-redlock 4.2.0 finds that the attempt took no time
/// and hands client-0 a lock whose keys are gone, while client-1 takes it again: UNSAFE, as
/// lockcheck's `redlock --variant node-redlock` says in the same run of real servers, and as
/// the simulation says (`sim/tests/redlock_implementations.rs`, the same file). lockcheck's
/// `redlock` (the reference, on the monotonic clock) refuses the late grant.
#[test]
fn node_redlock_timing_its_attempt_by_a_clock_stepped_back_lets_a_second_holder_in() {
    if !redis_installed() || !node_redlock_installed() {
        return;
    }
    let _one = one_at_a_time();
    let scenario = common::sim_scenario("redlock-client-clock-steps-back-slow-replies.json");
    assert_eq!(scenario.params.variant.as_deref(), Some("node-redlock"));
    let client = ClientCommand::new(format!("node {}/redlock_client.js", node_redlock_dir()));
    let real = run_client(&scenario, &client);
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("node-redlock", &real, &scenario),
        "node-redlock and redlock --variant node-redlock differ when the clock steps back"
    );
    let mut reference = scenario.clone();
    reference.params.variant = None;
    reference.validate().unwrap();
    let rendition = run(&reference).unwrap_or_else(|e| panic!("lockcheck's own run failed: {e}"));
    assert_eq!(
        common::kinds(&rendition.outcome.violations),
        [],
        "the reference refuses a grant that took 5 s of a 2 s TTL"
    );
}

/// Debian's Go and the etcd 3.4.23 client sources, from which `clients/go-etcd-mutex/main.go`
/// is built.
const GO_SOURCES: &str = "/usr/share/gocode/src/go.etcd.io/etcd/clientv3/concurrency/mutex.go";

/// The reference client `clients/go-etcd-mutex/main.go`, built once for this test binary into a
/// private directory (its build cache there too, so nothing another user wrote is linked in):
/// `None`, saying so, when Debian's Go or the etcd client sources are missing; under CI=true
/// that fails.
fn go_etcd_mutex() -> Option<ClientCommand> {
    static BUILT: std::sync::OnceLock<Result<std::path::PathBuf, String>> =
        std::sync::OnceLock::new();
    let go = std::process::Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !go || !std::path::Path::new(GO_SOURCES).exists() {
        let install = "apt-get install golang-go golang-etcd-server-dev";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("go (on PATH: {go}) or {GO_SOURCES} missing under CI=true: .ci/run must `{install}`");
        }
        let _ = writeln!(
            std::io::stderr().lock(),
            "skipping a reference-client test: {install}"
        );
        return None;
    }
    let built = BUILT.get_or_init(|| {
        let dir = lockcheck_real::private_dir::fresh("go-etcd-mutex").map_err(|e| e.to_string())?;
        let binary = dir.join("go-etcd-mutex");
        let source = format!(
            "{}/../clients/go-etcd-mutex/main.go",
            env!("CARGO_MANIFEST_DIR")
        );
        let out = std::process::Command::new("go")
            .args(["build", "-o"])
            .arg(&binary)
            .arg(&source)
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOCACHE", dir.join("cache"))
            .env("GOFLAGS", "")
            .output()
            .map_err(|e| format!("go build: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "go build {source} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(binary)
    });
    let binary = built.as_ref().unwrap_or_else(|e| panic!("{e}"));
    Some(ClientCommand::new(binary.display().to_string()))
}

/// etcd's own Go client (3.4.23's `concurrency.Mutex`, what lockcheck's `etcd-mutex@etcd-3.4`
/// renders) paused past its lease: UNSAFE, as the rendition says in the same run of a real etcd.
#[test]
fn go_etcd_mutex_paused_past_its_lease_lets_a_second_holder_in() {
    if !common::installed(&lockcheck_real::launcher::Etcd) {
        return;
    }
    let Some(client) = go_etcd_mutex() else {
        return;
    };
    let _one = one_at_a_time();
    let mut scenario = story(Algorithm::EtcdMutex, Profile::Pause);
    scenario.params.variant = Some("etcd-3.4".into());
    scenario.validate().unwrap();
    let real = run_client(&scenario, &client);
    assert_two_holders(&real, "client-0");
    assert!(
        side_by_side("etcd Go client 3.4 Mutex", &real, &scenario),
        "the Go client's Mutex and etcd-mutex@etcd-3.4 differ under the pause story"
    );
}

/// The story that separates the Go client's versions
/// (`sim/tests/scenarios/etcd-waiter-whose-lease-ran-out.json`: a waiter paused past its lease
/// takes the lock once the holder releases, without reading its own key, gone with the lease),
/// told by the real 3.4.23 client: UNSAFE, client-1 beside client-0, as `etcd-mutex@etcd-3.4`
/// says in simulation (`check`: `etcd-3-4-waiter-whose-lease-ran-out`) and against the same
/// real etcd here.
#[test]
fn go_etcd_mutex_3_4_takes_a_lock_its_lapsed_lease_lost_as_its_rendition_does() {
    if !common::installed(&lockcheck_real::launcher::Etcd) {
        return;
    }
    let Some(client) = go_etcd_mutex() else {
        return;
    };
    let _one = one_at_a_time();
    let mut scenario = common::sim_scenario("etcd-waiter-whose-lease-ran-out.json");
    scenario.params.variant = Some("etcd-3.4".into());
    scenario.validate().unwrap();
    let real = run_client(&scenario, &client);
    assert_two_holders(&real, "client-1");
    assert!(
        side_by_side("etcd Go client 3.4 Mutex", &real, &scenario),
        "the Go client's Mutex and etcd-mutex@etcd-3.4 differ under the waiter story"
    );
}
