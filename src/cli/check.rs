//! `lockcheck check`: searches and stories against the verdicts they must reach.

use super::progress::{progress_bar, rates};
use super::{usage, EXIT_FOUND, EXIT_OK};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::report::Report;
use lockcheck_core::verdict::{Coverage, VerdictKind};
use lockcheck_sim::cell::{self, CellSearch, CellStats, CellVerdict, Searched};
use lockcheck_sim::expectations::{Check, Story};
use lockcheck_sim::matrix;
use std::path::Path;
use std::time::Instant;

/// What one entry's run came to.
enum Ran {
    /// A search's result.
    Search(Result<Searched, lockcheck_sim::cell::CellError>),
    /// A story's run: the violations that count (their kinds and one-line stories), and its
    /// report.
    Story {
        counted: Vec<(ViolationKind, String)>,
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
            Check::Search(options) => Ran::Search(cell::search(
                &CellSearch {
                    id: entry.name.clone(),
                    options: options.clone(),
                    out: out.to_path_buf(),
                    settle_on_regression: entry.expect == VerdictKind::NotFound,
                },
                &|| {},
            )),
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
            Ran::Search(result) => {
                let searched = result
                    .map_err(|e| usage(format!("{}: {}: {e}", file.display(), entry.name)))?;
                let (verdict, detail) = search_verdict(&searched);
                (
                    entry.met_by(&searched.verdict),
                    verdict,
                    detail,
                    searched.stats,
                )
            }
            Ran::Story {
                counted,
                report,
                stats,
            } => {
                let report = report
                    .map_err(|e| usage(format!("{}: {}: {e}", file.display(), entry.name)))?;
                let found = !counted.is_empty();
                let verdict = if found {
                    let kinds: Vec<String> =
                        counted.iter().map(|(k, _)| format!("{k:?}")).collect();
                    format!("UNSAFE (the story's run: {})", kinds.join(", "))
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
            (_, VerdictKind::Found) => "UNSAFE",
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
fn search_verdict(searched: &Searched) -> (String, Vec<String>) {
    let settled = if searched.stats.regression_failed && searched.stats.cases == 0 {
        " (a persisted failure still fails)"
    } else {
        ""
    };
    match &searched.verdict {
        CellVerdict::Found(u) => {
            let verdict = match (u.case_index, &u.regression) {
                (Some(k), _) => format!("UNSAFE at case {k} ({} cases)", u.cases),
                (None, Some(persisted)) => {
                    format!(
                        "UNSAFE{settled} (persisted{})",
                        super::explore::origin(persisted)
                    )
                }
                (None, None) => format!("UNSAFE{settled}"),
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
