//! `lockcheck check`: searches and stories against the verdicts they must reach.

use super::progress::{progress_bar, rates};
use super::{usage, EXIT_FOUND, EXIT_OK};
use lockcheck_core::checker::{safety_answer, Severity, ViolationKind};
use lockcheck_core::report::Report;
use lockcheck_core::verdict::{Coverage, VerdictKind};
use lockcheck_sim::cell::{self, CellSearch, CellStats, CellVerdict, Searched};
use lockcheck_sim::expectations::{Check, Story};
use lockcheck_sim::explore::ExploreOptions;
use lockcheck_sim::matrix;
use std::path::Path;
use std::time::Instant;

/// What one entry's run came to.
enum Ran {
    /// A search's result, and what it searched.
    Search(
        Result<Searched, lockcheck_sim::cell::CellError>,
        Box<ExploreOptions>,
    ),
    /// A story's run: the violations that count (their kinds and one-line stories), and its
    /// report.
    Story {
        counted: Vec<(ViolationKind, String)>,
        /// The run's safety answer, whatever counted ([`safety_answer`]).
        safety: String,
        report: anyhow::Result<std::path::PathBuf>,
        stats: CellStats,
    },
}

/// Runs a story entry once, and writes its report into `out` under the entry's name.
fn run_story(name: &str, story: &Story, out: &Path) -> Ran {
    let started = Instant::now();
    let outcome = lockcheck_sim::run(&story.scenario);
    let counted = story
        .counted(&outcome.violations)
        .iter()
        .map(|v| (v.kind, v.story.clone()))
        .collect();
    let mut report = Report::of_run(&story.scenario, &outcome);
    let report = report.write(out, name).map_err(anyhow::Error::from);
    Ran::Story {
        counted,
        safety: safety_answer(&outcome.violations, true),
        report,
        stats: CellStats {
            cases: 1,
            search: started.elapsed(),
            shrink_runs: 0,
            shrink: Default::default(),
            regressions: 0,
            regression_failed: false,
            regressions_changed: 0,
        },
    }
}

/// Runs `lockcheck check FILE`.
pub fn check(file: &Path, out: &Path, jobs: usize) -> anyhow::Result<u8> {
    let entries = lockcheck_sim::expectations::read(file).map_err(|e| usage(e.to_string()))?;
    let bar = progress_bar(entries.len() as u64, "entries")?;
    let started = Instant::now();
    let results = cell::in_parallel(&entries, jobs, |entry| {
        let ran = match &entry.check {
            // A persisted failure that still fails settles an entry expected not-found (it is
            // UNSAFE, exit 1) at once. An entry expected UNSAFE is searched anyway: its search
            // must still find the violation within its budget, whatever old files the out dir
            // holds.
            Check::Search(options) => Ran::Search(
                cell::search(
                    &CellSearch {
                        id: entry.name.clone(),
                        options: options.clone(),
                        out: out.to_path_buf(),
                        settle_on_regression: entry.expect == VerdictKind::NotFound,
                    },
                    &|| {},
                ),
                Box::new(options.clone()),
            ),
            Check::Story(story) => run_story(&entry.name, story, out),
        };
        bar.inc(1);
        ran
    });
    bar.finish_and_clear();
    let mut failed = 0;
    let mut stats = Vec::new();
    for (entry, ran) in entries.iter().zip(results) {
        let at = format!("{}:{}", file.display(), entry.line);
        let (ok, verdict, detail, entry_stats) = match ran {
            Ran::Search(result, options) => {
                let searched = result
                    .map_err(|e| usage(format!("{}: {}: {e}", file.display(), entry.name)))?;
                let (verdict, detail) = search_verdict(&options, &searched);
                (
                    entry.met_by(&searched.verdict),
                    verdict,
                    detail,
                    searched.stats,
                )
            }
            Ran::Story {
                counted,
                safety,
                report,
                stats,
            } => {
                let report = report
                    .map_err(|e| usage(format!("{}: {}: {e}", file.display(), entry.name)))?;
                let found = !counted.is_empty();
                let worst = counted.iter().map(|(k, _)| k.severity()).min();
                let verdict = if let Some(worst) = worst {
                    let kinds: Vec<&str> = counted.iter().map(|(k, _)| k.name()).collect();
                    let safety = if worst == Severity::Unsafe {
                        String::new()
                    } else {
                        format!("; {safety}")
                    };
                    format!(
                        "{} (the story's run: {}){safety}",
                        worst.word(),
                        kinds.join(", ")
                    )
                } else {
                    "safe (no violation in the story's run)".to_string()
                };
                let mut detail: Vec<String> = counted.into_iter().map(|(_, s)| s).collect();
                detail.push(format!("report: {}", report.display()));
                let expected_found = entry.expect == VerdictKind::Found;
                (found == expected_found, verdict, detail, stats)
            }
        };
        let expected = match (&entry.check, entry.expect) {
            (_, VerdictKind::Found) => expected_word(&entry.check),
            (Check::Search(_), VerdictKind::NotFound) => "not found",
            (Check::Story(_), VerdictKind::NotFound) => "safe",
        };
        if ok {
            say!("ok    {} ({at}): {verdict}", entry.name);
        } else {
            failed += 1;
            say!(
                "FAIL  {} ({at}): expected {expected}, got {verdict}",
                entry.name
            );
            if let Some(about) = &entry.about {
                say!("      expected because: {about}");
            }
            for line in detail {
                say!("      {line}");
            }
        }
        stats.push(entry_stats);
    }
    let refs: Vec<&CellStats> = stats.iter().collect();
    say!(
        "check: {} entries, {} as expected, {failed} not; {}",
        entries.len(),
        entries.len() - failed,
        rates(&refs, started.elapsed(), jobs, true)
    );
    Ok(if failed > 0 { EXIT_FOUND } else { EXIT_OK })
}

/// A search's verdict in one line, and what to show when it was not the expected one.
fn search_verdict(options: &ExploreOptions, searched: &Searched) -> (String, Vec<String>) {
    let settled = if searched.stats.regression_failed && searched.stats.cases == 0 {
        " (a persisted failure still fails)"
    } else {
        ""
    };
    match &searched.verdict {
        CellVerdict::Found(u) => {
            let worst = lockcheck_sim::explore::worst_counted(options, &u.report.violations)
                .unwrap_or(Severity::Unsafe);
            // The kinds it counted, by the names an entry's `violation` takes.
            let kinds: std::collections::BTreeSet<&str> = u
                .report
                .violations
                .iter()
                .filter(|v| lockcheck_sim::explore::counts(options, v.kind))
                .map(|v| v.kind.name())
                .collect();
            let kinds = kinds.into_iter().collect::<Vec<_>>().join(", ");
            let word = format!("{} ({kinds})", worst.word());
            let verdict = match (u.case_index, &u.regression) {
                (Some(k), _) => format!("{word} at case {k} ({} cases)", u.cases),
                (None, Some(persisted)) => {
                    format!(
                        "{word}{settled} (persisted{})",
                        super::explore::origin(persisted)
                    )
                }
                (None, None) => format!("{word}{settled}"),
            };
            // A liveness finding still says whether its case was safe.
            let verdict = if worst == Severity::Unsafe {
                verdict
            } else {
                format!("{verdict}; {}", safety_answer(&u.report.violations, true))
            };
            (
                verdict,
                vec![u.story.clone(), format!("report: {}", u.path.display())],
            )
        }
        CellVerdict::NotFound(Coverage {
            cases,
            simulated_ns,
        }) => (
            format!(
                "not found in {cases} cases ({} simulated)",
                matrix::hours(*simulated_ns)
            ),
            vec![
                "the known violation was not found within the budget: a change lost it, or the \
                 entry needs more cases or other params"
                    .to_string(),
            ],
        ),
    }
}

/// What an entry expected to find, in the words its finding would have: UNSAFE when it counts
/// safety violations only (the default), the word of the one kind it counts (`violation`), or
/// any violation.
fn expected_word(check: &Check) -> &'static str {
    let (safety_only, only) = match check {
        Check::Search(options) => (options.safety_only, options.only),
        Check::Story(story) => (story.safety_only, story.only),
    };
    match only {
        Some(kind) => kind.severity().word(),
        None if safety_only => "UNSAFE",
        None => "a violation (UNSAFE, DEADLOCK, STUCK or ORDER)",
    }
}
