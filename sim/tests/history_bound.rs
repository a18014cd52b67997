//! A run's history stays bounded however long the run (#40 item 2): a client polling a lock held
//! for a year folds its refusals into one entry, folding changes no verdict, and what still
//! grows stops at the cap and is refused.

use lockcheck_algorithms::describe::Lease;
use lockcheck_core::history::{Entry, History, Op, Retention};
use lockcheck_core::limits::MAX_HISTORY_ENTRIES;
use lockcheck_core::scenario::{Fault, Scenario};
use lockcheck_core::{Algorithm, Outcome};
use lockcheck_sim::run_keeping;

const HOUR_MS: u64 = 3_600_000;
const YEAR_MS: u64 = lockcheck_core::limits::MAX_MS;

/// Two clients of `algorithm` with a lease of a year (if it has a lease); client-0 takes the lock and is paused
/// for `pause_ms` while it holds it, and client-1 polls all that time.
fn holder_paused(algorithm: Algorithm, pause_ms: u64) -> Scenario {
    let mut s = Scenario::new(algorithm);
    if matches!(algorithm.lease(), Lease::Ttl { .. }) {
        s.params.ttl_ms = Some(YEAR_MS);
    }
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 2_000;
    s.duration_ms = (2 * pause_ms).min(YEAR_MS);
    s.seed = 7;
    s.faults = vec![Fault::Pause {
        at_ms: 500,
        node: "client-0".into(),
        for_ms: pause_ms,
    }];
    s.validate().expect("a valid scenario");
    s
}

fn attempts(h: &History) -> u64 {
    h.entries.iter().map(Entry::attempts).sum()
}

#[test]
fn a_ten_hour_wait_on_a_year_long_lease_is_a_few_hundred_entries() {
    // Before folding: 224,000 entries (one per poll), a 57 MB report. The single-server locks
    // that poll: Redis's SET NX every retry delay, MySQL's unique insert.
    for algorithm in [Algorithm::SingleRedis, Algorithm::MysqlUnique] {
        let outcome = lockcheck_sim::run(&holder_paused(algorithm, 10 * HOUR_MS));
        let h = &outcome.history;
        assert!(
            attempts(h) > 100_000,
            "{algorithm:?}: client-1 polled the whole pause ({} attempts)",
            attempts(h)
        );
        assert!(
            h.entries.len() < 1_000,
            "{algorithm:?}: {} entries for a 10 h wait",
            h.entries.len()
        );
        let bytes = serde_json::to_string(h).unwrap().len();
        assert!(bytes < 300_000, "{algorithm:?}: {bytes} bytes of history");
        assert!(!outcome.violated(), "{:?}", outcome.violations);
        assert_eq!(outcome.cut_short(), None);
    }
}

/// What the checkers found, with the entries they point at written out (a folded history's
/// indices are smaller past its first fold).
fn findings(o: &Outcome) -> Vec<String> {
    o.violations
        .iter()
        .map(|v| {
            let entries: Vec<String> = v
                .entries
                .iter()
                .map(|&i| {
                    let e = &o.history.entries[i];
                    format!("{} {} {:?} {}", e.true_ns, e.node, e.kind, e.op.name())
                })
                .collect();
            format!(
                "{:?} {:?} {} {} {entries:?}",
                v.kind, v.clients, v.at_ns, v.story
            )
        })
        .collect()
}

/// Everything but the attempts, in order.
fn the_rest(h: &History) -> Vec<String> {
    h.entries
        .iter()
        .filter(|e| !matches!(e.op, Op::Attempt { .. }))
        .map(|e| format!("{} {} {:?} {:?}", e.true_ns, e.node, e.kind, e.op))
        .collect()
}

/// Runs `s` folding after 2 refusals and not folding at all: the same run, the same verdict.
fn folds_alike(name: &str, s: &Scenario) -> bool {
    let folded = run_keeping(
        s,
        Retention {
            fold_after: 2,
            ..Retention::default()
        },
    );
    let plain = run_keeping(
        s,
        Retention {
            fold_after: u64::MAX,
            ..Retention::default()
        },
    );
    assert_eq!(findings(&folded), findings(&plain), "{name}");
    assert_eq!(folded.availability, plain.availability, "{name}");
    assert_eq!(folded.wakeups, plain.wakeups, "{name}");
    assert_eq!(
        the_rest(&folded.history),
        the_rest(&plain.history),
        "{name}"
    );
    assert_eq!(
        attempts(&folded.history),
        attempts(&plain.history),
        "{name}"
    );
    folded.history.entries.len() < plain.history.entries.len()
}

#[test]
fn folding_changes_no_verdict_of_any_story() {
    // Every story under tests/scenarios (safe ones, unsafe ones, stuck waiters, deadlocks), and
    // a year-long lease's waits on each polling backend.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut folded = 0;
    let mut violated = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let s = Scenario::from_json(&text).unwrap();
        folded += usize::from(folds_alike(&path.display().to_string(), &s));
        violated += usize::from(lockcheck_sim::run(&s).violated());
    }
    assert!(
        files.len() > 40 && folded >= 5 && violated > 10,
        "{} stories, {folded} folded, {violated} violated",
        files.len()
    );
    for algorithm in [
        Algorithm::SingleRedis,
        Algorithm::Redlock,
        Algorithm::RedisFair,
        Algorithm::MysqlRow,
    ] {
        let s = holder_paused(algorithm, HOUR_MS / 4);
        assert!(folds_alike(&format!("{algorithm:?}"), &s), "{algorithm:?}");
    }
}

#[test]
fn a_run_whose_history_reaches_the_cap_stops_there_and_says_so() {
    // Redlock's waiter takes the masters the paused holder does not have and gives them back
    // at every poll: key changes on servers, which nothing folds.
    let s = holder_paused(Algorithm::Redlock, YEAR_MS);
    let retention = Retention {
        max_entries: 5_000,
        ..Retention::default()
    };
    let outcome = run_keeping(&s, retention);
    let h = &outcome.history;
    assert_eq!(h.entries.len(), 5_000);
    let note = outcome.cut_short().expect("cut short");
    assert!(
        note.starts_with("history full: 5000 entries by ")
            && note.contains("mostly key entries")
            && note.ends_with("the run stopped here"),
        "{note}"
    );
    // Stopped at once: minutes of simulated time, not the year of the pause.
    assert!(h.entries.last().unwrap().true_ns < HOUR_MS * 1_000_000);
    let refusal = outcome.refusal(&s).unwrap();
    assert!(
        refusal.contains(&format!("at most {MAX_HISTORY_ENTRIES} history entries"))
            && refusal.contains("params.ttl_ms (31536000000 ms)")
            && refusal.contains("faults[0].for_ms (31536000000 ms)")
            && refusal.contains("duration_ms (31536000000 ms)"),
        "{refusal}"
    );
    // A run within the cap is not cut short.
    assert_eq!(
        lockcheck_sim::run(&Scenario::new(Algorithm::Redlock)).cut_short(),
        None
    );
}
