//! One cell: a search as `matrix`, `check` and `explore` carry it out — the failures persisted by
//! earlier runs first ([`regression`]), then the search ([`explore`](crate::explore)), then the report.
//!
//! A search that finds a violation always decides the report, so a cell's report is the one a
//! fresh run (no regression files) writes, byte for byte. A persisted failure matters when the
//! search does not reach it (a smaller budget, another seed, a changed generator): the cell is
//! then UNSAFE by that regression, and its report is the regression's own run.

use crate::explore::{check_options, explore_in, fails, Exploration, ExploreError, ExploreOptions};
use crate::regression::{self, Regression, RegressionError, SearchKey};
use crate::world::{Simulation, World};
use lockcheck_core::history::{Entry, KeyChange, Op};
use lockcheck_core::report::{Report, ReportError};
use lockcheck_core::scenario::{CrashScope, Fault, Persistence, Scenario};
use lockcheck_core::verdict::{Coverage, Verdict};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a cell could not be searched.
#[derive(Debug, Error)]
pub enum CellError {
    /// A regression file could not be read or written.
    #[error(transparent)]
    Regression(#[from] RegressionError),
    /// The search could not run.
    #[error(transparent)]
    Explore(#[from] ExploreError),
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// What to search, and where its report and regressions go.
#[derive(Clone, Debug)]
pub struct CellSearch {
    /// Names the report (`OUT/ID-HASH.json`) and the regression file (`OUT/regressions/ID.json`).
    pub id: String,
    /// The search.
    pub options: ExploreOptions,
    /// The output directory.
    pub out: PathBuf,
    /// Whether a persisted failure that still fails settles the cell without searching (`check`
    /// judges verdicts; `matrix` and `explore` search anyway, for the report a fresh run writes).
    pub settle_on_regression: bool,
}

/// The verdict of a cell: the report of what it found (written), or the [`Coverage`] of a
/// search that found nothing.
pub type CellVerdict = Verdict<Box<CellFinding>>;

/// What a cell found: a safety violation (cells count no other), with its report.
#[derive(Clone, Debug)]
pub struct CellFinding {
    /// The report, as written.
    pub report: Report,
    /// Where it was written.
    pub path: PathBuf,
    /// The failing case's index in the search; `None` when only a persisted regression failed.
    pub case_index: Option<u64>,
    /// The persisted failure that made the cell UNSAFE, when the search did not reach it.
    pub regression: Option<Persisted>,
    /// Cases the search ran: up to and including the failing one, or all it ran when only a
    /// regression failed.
    pub cases: u32,
    /// The violation in one line, with the faults that caused it.
    pub story: String,
}

/// A persisted failure that still fails, as replayed.
#[derive(Clone, Debug)]
pub struct Persisted {
    /// Where it was found: the search, its seed and case.
    pub regression: Regression,
    /// Whether its replay's history differs from the one it had when found (it still fails, so
    /// it still counts; but the simulator or the algorithm changed since).
    pub history_changed: bool,
}

/// How the time of a cell was spent, for the summary people read (never written to a file that
/// must be reproducible).
#[derive(Clone, Copy, Debug, Default)]
pub struct CellStats {
    /// Cases the search ran.
    pub cases: u32,
    /// Wall time of the search (regressions and cases), without shrinking.
    pub search: Duration,
    /// Runs spent shrinking.
    pub shrink_runs: u32,
    /// Wall time spent shrinking.
    pub shrink: Duration,
    /// Persisted failures replayed.
    pub regressions: usize,
    /// Whether one of them still failed.
    pub regression_failed: bool,
    /// How many of those replayed yielded another history than when they were found.
    pub regressions_changed: usize,
}

/// The result of a cell.
#[derive(Clone, Debug)]
pub struct Searched {
    /// The verdict.
    pub verdict: CellVerdict,
    /// Where the time went.
    pub stats: CellStats,
    /// What could not be written (the report, the regression entry: a read-only or full output
    /// directory), each with why. The verdict stands all the same, for the caller to say before
    /// these errors: an UNSAFE finding is never hidden behind a failed write.
    pub unwritten: Vec<String>,
}

/// Searches one cell in the simulation; `on_case` is called after every case the search runs.
pub fn search(cell: &CellSearch, on_case: &(dyn Fn() + Sync)) -> Result<Searched, CellError> {
    search_in(&Simulation, cell, on_case)
}

/// [`search`] in `world`: the persisted failures are replayed there too, since a regression
/// holds only if the world that searches still fails it.
pub fn search_in(
    world: &dyn World,
    cell: &CellSearch,
    on_case: &(dyn Fn() + Sync),
) -> Result<Searched, CellError> {
    let options = &cell.options;
    check_options(options)?;
    let started = Instant::now();
    let key = SearchKey::of(options);
    let regressions = regression::load(&cell.out, &cell.id, &key)?;
    let unwritten = Mutex::new(Vec::new());
    // A write that fails is said with the verdict, not instead of it.
    let note = |e: &dyn std::fmt::Display| {
        unwritten
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e.to_string())
    };
    let mut stats = CellStats {
        regressions: regressions.len(),
        ..CellStats::default()
    };
    let still_failing = regressions.into_iter().find_map(|r| {
        let outcome = world.run(&r.scenario);
        if outcome.digest() != r.history_hash {
            stats.regressions_changed += 1;
        }
        fails(options, &outcome).then_some((r, outcome))
    });
    stats.regression_failed = still_failing.is_some();
    let (cases, simulated_ns) = if still_failing.is_some() && cell.settle_on_regression {
        (0, 0)
    } else {
        // The failure as drawn is kept (its regression entry and its report) the moment it is
        // found, and replaced by the shrunk one when shrinking ends: a search interrupted while
        // shrinking loses nothing it found.
        let unshrunk: Mutex<Option<(Scenario, Option<PathBuf>)>> = Mutex::new(None);
        let keep_unshrunk = |case: u64, scenario: &Scenario, outcome: &lockcheck_core::Outcome| {
            let kept = regression::record(
                &cell.out,
                &cell.id,
                Regression {
                    search: key.clone(),
                    found_with_seed: options.seed,
                    case_index: case,
                    scenario: scenario.clone(),
                    history_hash: outcome.digest(),
                },
            );
            let report = Report::of_run(scenario, outcome)
                .write(&cell.out, &cell.id)
                .ok();
            if kept.is_ok() {
                *unshrunk.lock().expect("never poisoned") = Some((scenario.clone(), report));
            }
        };
        match explore_in(world, options, &|_| on_case(), &keep_unshrunk)? {
            Exploration::Found(finding) => {
                stats.cases = finding.cases;
                stats.shrink_runs = finding.shrink_runs;
                stats.shrink = finding.shrink_elapsed;
                stats.search = started.elapsed().saturating_sub(finding.shrink_elapsed);
                let mut report = finding.report(&options.profiles, options.seed);
                let (path, report_written) = written(&mut report, cell, &note);
                let recorded = regression::record(
                    &cell.out,
                    &cell.id,
                    Regression {
                        search: key.clone(),
                        found_with_seed: options.seed,
                        case_index: finding.case_index,
                        scenario: finding.scenario.clone(),
                        history_hash: finding.outcome.digest(),
                    },
                );
                if let Err(e) = &recorded {
                    note(e);
                }
                // The unshrunk failure's entry and report give way to the shrunk one's (kept
                // when the shrunk one could not be written).
                let unshrunk = unshrunk.into_inner().expect("never poisoned");
                if let (Some((scenario, report)), true) =
                    (unshrunk, recorded.is_ok() && report_written)
                {
                    if scenario != finding.scenario {
                        if let Err(e) = regression::forget(&cell.out, &cell.id, &key, &scenario) {
                            note(&e);
                        }
                    }
                    if let Some(unshrunk_report) = report.filter(|r| *r != path) {
                        let _ = std::fs::remove_file(Report::timeline_path(&unshrunk_report));
                        let _ = std::fs::remove_file(&unshrunk_report);
                    }
                }
                let story = story(&report);
                let verdict = CellVerdict::Found(Box::new(CellFinding {
                    report,
                    path,
                    case_index: Some(finding.case_index),
                    regression: None,
                    cases: finding.cases,
                    story,
                }));
                return Ok(Searched {
                    verdict,
                    stats,
                    unwritten: unwritten.into_inner().unwrap_or_else(|p| p.into_inner()),
                });
            }
            Exploration::NotFound(Coverage {
                cases,
                simulated_ns,
            }) => (cases, simulated_ns),
        }
    };
    stats.cases = cases;
    stats.search = started.elapsed();
    let verdict = match still_failing {
        Some((regression, outcome)) => {
            let mut report = Report::of_run(&regression.scenario, &outcome);
            let (path, _) = written(&mut report, cell, &note);
            let story = story(&report);
            let history_changed = outcome.digest() != regression.history_hash;
            CellVerdict::Found(Box::new(CellFinding {
                report,
                path,
                case_index: None,
                regression: Some(Persisted {
                    regression,
                    history_changed,
                }),
                cases,
                story,
            }))
        }
        None => CellVerdict::NotFound(Coverage {
            cases,
            simulated_ns,
        }),
    };
    Ok(Searched {
        verdict,
        stats,
        unwritten: unwritten.into_inner().unwrap_or_else(|p| p.into_inner()),
    })
}

/// Writes `report` as the cell's ([`Report::write`]): where it goes, and whether it was
/// written (a failure goes to `note`).
fn written(
    report: &mut Report,
    cell: &CellSearch,
    note: &dyn Fn(&dyn std::fmt::Display),
) -> (PathBuf, bool) {
    match report.write(&cell.out, &cell.id) {
        Ok(path) => (path, true),
        Err(e) => {
            note(&e);
            (report.path_in(&cell.out, &cell.id), false)
        }
    }
}

/// Runs `work` on every item with up to `jobs` threads; the results come back in the items'
/// order, whatever order they finished in.
pub fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let worker = || loop {
        let i = {
            let mut n = next.lock().expect("no worker panics holding it");
            let i = *n;
            *n += 1;
            i
        };
        let Some(item) = items.get(i) else { return };
        let r = work(item);
        results.lock().expect("no worker panics holding it")[i] = Some(r);
    };
    std::thread::scope(|scope| {
        for _ in 1..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(worker);
        }
        worker();
    });
    results
        .into_inner()
        .expect("the workers are done")
        .into_iter()
        .map(|r| r.expect("every item was worked on"))
        .collect()
}

/// The violation of `report` in one line, after the faults of its (minimal) schedule, each told
/// against the lock's lease where that explains it: "client-1 paused 12.1 s > TTL 10 s at 9.9 s;
/// then client-1 entered at … : two holders at once".
pub fn story(report: &Report) -> String {
    let scenario = &report.scenario;
    let mut faults: Vec<&Fault> = scenario.faults.iter().collect();
    faults.sort_by_key(|f| f.at_ms());
    let faults: Vec<String> = faults
        .iter()
        .map(|f| {
            let mut told = fault_story(f, scenario);
            told.push_str(&expired_in_pause(f, &report.history.entries));
            told
        })
        .collect();
    let what = report
        .violations
        .first()
        .map_or_else(|| report.summary.clone(), |v| v.story.clone());
    if faults.is_empty() {
        format!("no faults; {what}")
    } else {
        format!("{}; then {what}", faults.join(", "))
    }
}

/// For a pause: when a lock its node last wrote (set, or extended) expired on a server while it
/// was paused, that lock's last write and expiry — the true cause when the pause itself was
/// shorter than the lease (its renewal was due inside the pause): " (its lock, lock on redis-0,
/// last set or extended at 6 ms, expired at 10039 ms, inside the pause)". Nothing otherwise.
fn expired_in_pause(fault: &Fault, history: &[Entry]) -> String {
    let Fault::Pause {
        at_ms,
        node,
        for_ms,
    } = fault
    else {
        return String::new();
    };
    let (from_ns, to_ns) = (at_ms * 1_000_000, (at_ms + for_ms) * 1_000_000);
    // Per server and key: who last wrote it (set, field, expiry), and when.
    let mut written: BTreeMap<(&str, &str), (&str, u64)> = BTreeMap::new();
    for e in history {
        let Op::Key {
            key, change, by, ..
        } = &e.op
        else {
            continue;
        };
        let at = (e.node.as_str(), key.as_str());
        match (change, by) {
            (KeyChange::Set | KeyChange::FieldSet | KeyChange::ExpiryChanged, Some(by)) => {
                written.insert(at, (by.as_str(), e.true_ns));
            }
            (KeyChange::Expired, _) if (from_ns..=to_ns).contains(&e.true_ns) => {
                if let Some(&(writer, last_ns)) = written.get(&at) {
                    if writer == node {
                        return format!(
                            " (its lock, {key} on {}, last set or extended at {} ms, expired at \
                             {} ms, inside the pause)",
                            e.node,
                            last_ns / 1_000_000,
                            e.true_ns / 1_000_000
                        );
                    }
                }
            }
            (KeyChange::Deleted | KeyChange::Expired | KeyChange::Lost, _) => {
                written.remove(&at);
            }
            _ => {}
        }
    }
    String::new()
}

/// The lease a fault is measured against: its name and length in ms (none for a lock that does not
/// expire).
pub fn lease(scenario: &Scenario) -> Option<(&'static str, u64)> {
    scenario.algorithm.lease_named(&scenario.params)
}

/// A span in seconds, exact to the millisecond ("10 s", "9.999 s"), so that a span just under the
/// lease never prints as equal to it.
fn secs(ms: u64) -> String {
    let (whole, frac) = (ms / 1000, ms % 1000);
    if frac == 0 {
        format!("{whole} s")
    } else {
        let digits = format!("{frac:03}");
        format!("{whole}.{} s", digits.trim_end_matches('0'))
    }
}

/// "> TTL 10 s", "= TTL 10 s" or "< TTL 10 s": how a span compares with the lease.
fn against_lease(span_ms: u64, scenario: &Scenario) -> String {
    match lease(scenario) {
        Some((name, ms)) => format!(
            " {} {name} {}",
            match span_ms.cmp(&ms) {
                std::cmp::Ordering::Greater => ">",
                std::cmp::Ordering::Equal => "=",
                std::cmp::Ordering::Less => "<",
            },
            secs(ms)
        ),
        None => String::new(),
    }
}

fn fault_story(fault: &Fault, scenario: &Scenario) -> String {
    let at = |ms: u64| format!("at {ms} ms");
    match fault {
        Fault::Pause {
            at_ms,
            node,
            for_ms,
        } => format!(
            "{node} paused {}{} {}",
            secs(*for_ms),
            against_lease(*for_ms, scenario),
            at(*at_ms)
        ),
        Fault::ClockJump { at_ms, node, by_ms } => format!(
            "{node}'s wall clock jumped {}{}{} {}",
            if *by_ms < 0 { "-" } else { "+" },
            secs(by_ms.unsigned_abs()),
            against_lease(by_ms.unsigned_abs(), scenario),
            at(*at_ms)
        ),
        Fault::ClockDrift { at_ms, node, rate } => {
            format!(
                "{node}'s clocks ran at {}x from {}",
                lockcheck_core::input::float_text(*rate),
                secs(*at_ms)
            )
        }
        Fault::Crash { at_ms, node, scope } => {
            let persistence = match scenario.params.persistence_of(scenario.algorithm, node) {
                Persistence::None => "none",
                Persistence::Everysec => "everysec",
                Persistence::Always => "always",
            };
            let how = match scope {
                CrashScope::Machine => "crashed",
                CrashScope::Process => "was killed (process crash)",
            };
            format!("{node} {how} {} (persistence {persistence})", at(*at_ms))
        }
        Fault::Restart { at_ms, node } => {
            let delay = scenario.params.restart_delay_of(node);
            if delay > 0 {
                format!("{node} restarted no sooner than {} later", secs(delay))
            } else {
                format!("{node} restarted {}", at(*at_ms))
            }
        }
        Fault::Failover { at_ms, node } => format!("{node} promoted {}", at(*at_ms)),
        Fault::Partition {
            at_ms,
            isolate,
            from,
            for_ms,
            hold,
        } => format!(
            "[{}] cut off{} {}{} {}{}",
            isolate.join(", "),
            lockcheck_core::scenario::from_clause(from),
            secs(*for_ms),
            against_lease(*for_ms, scenario),
            at(*at_ms),
            if *hold { ", its messages held" } else { "" }
        ),
        Fault::Loss { .. } | Fault::Delay { .. } => fault.describe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::{explore_noting, Exploration};
    use lockcheck_core::profile::FaultProfile;
    use lockcheck_core::scenario::Algorithm;

    /// Issue 40 item 6: the failing case is told as drawn before shrinking (so the cell keeps it
    /// at once, and an interruption while shrinking loses nothing), and once the search ends the
    /// cell's directory holds the shrunk failure alone: one regression entry, one report.
    #[test]
    fn a_failure_is_kept_as_drawn_before_shrinking_and_replaced_by_the_shrunk_one() {
        let options = ExploreOptions::new(Algorithm::SingleRedis, vec![FaultProfile::Pause], 50, 0);
        let told: Mutex<Vec<(u64, Scenario, bool)>> = Mutex::new(Vec::new());
        let found = |case: u64, s: &Scenario, o: &lockcheck_core::Outcome| {
            told.lock()
                .unwrap()
                .push((case, s.clone(), fails(&options, o)));
        };
        let Exploration::Found(finding) = explore_noting(&options, &|_| {}, &found).unwrap() else {
            panic!("single-redis under pauses fails within 50 cases");
        };
        let told = told.into_inner().unwrap();
        assert_eq!(told.len(), 1);
        assert_eq!(told[0].0, finding.case_index);
        assert_eq!(told[0].1, finding.original);
        assert!(told[0].2, "what is told fails");
        assert_ne!(finding.original, finding.scenario, "this failure shrinks");

        let out = std::env::temp_dir().join(format!("lockcheck-cell-kept-{}", std::process::id()));
        std::fs::remove_dir_all(&out).ok();
        let cell = CellSearch {
            id: "c".into(),
            options: options.clone(),
            out: out.clone(),
            settle_on_regression: false,
        };
        search(&cell, &|| {}).unwrap();
        let kept = regression::load(&out, "c", &SearchKey::of(&options)).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].scenario, finding.scenario);
        let reports: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.ends_with(".json").then_some(name)
            })
            .collect();
        assert_eq!(reports.len(), 1, "{reports:?}");
        std::fs::remove_dir_all(&out).ok();
    }
}
