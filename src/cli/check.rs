//! `lockcheck check`: searches against the verdicts they must reach.

use super::progress::{progress_bar, rates};
use super::{usage, EXIT_FOUND, EXIT_OK};
use lockcheck_core::verdict::{Coverage, VerdictKind};
use lockcheck_sim::cell::{self, CellSearch, CellStats, CellVerdict};
use lockcheck_sim::matrix;
use std::path::Path;
use std::time::Instant;

/// Runs `lockcheck check FILE`.
pub fn check(file: &Path, out: &Path, jobs: usize) -> anyhow::Result<u8> {
    let entries = lockcheck_sim::expectations::read(file).map_err(|e| usage(e.to_string()))?;
    let bar = progress_bar(entries.len() as u64, "entries")?;
    let started = Instant::now();
    let results = cell::in_parallel(&entries, jobs, |entry| {
        // A persisted failure that still fails settles an entry expected not-found (it is
        // UNSAFE, exit 1) at once. An entry expected UNSAFE is searched anyway: its search must
        // still find the violation within its budget, whatever old files the out dir holds.
        let cell = CellSearch {
            id: entry.name.clone(),
            options: entry.options.clone(),
            out: out.to_path_buf(),
            settle_on_regression: entry.expect == VerdictKind::NotFound,
        };
        let result = cell::search(&cell, &|| {});
        bar.inc(1);
        result
    });
    bar.finish_and_clear();
    let mut failed = 0;
    let mut stats = Vec::new();
    for (entry, result) in entries.iter().zip(results) {
        let searched =
            result.map_err(|e| usage(format!("{}: {}: {e}", file.display(), entry.name)))?;
        let ok = entry.met_by(&searched.verdict);
        let at = format!("{}:{}", file.display(), entry.line);
        let expected = match entry.expect {
            VerdictKind::Found => "UNSAFE",
            VerdictKind::NotFound => "not found",
        };
        let settled = if searched.stats.regression_failed && searched.stats.cases == 0 {
            " (a persisted failure still fails)"
        } else {
            ""
        };
        let verdict = match &searched.verdict {
            CellVerdict::Found(u) => match (u.case_index, &u.regression) {
                (Some(k), _) => format!("UNSAFE at case {k} ({} cases)", u.cases),
                (None, Some(persisted)) => {
                    format!(
                        "UNSAFE{settled} (persisted{})",
                        super::explore::origin(persisted)
                    )
                }
                (None, None) => format!("UNSAFE{settled}"),
            },
            CellVerdict::NotFound(Coverage {
                cases,
                simulated_ns,
            }) => format!(
                "not found in {cases} cases ({} simulated)",
                matrix::hours(*simulated_ns)
            ),
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
            match &searched.verdict {
                CellVerdict::Found(u) => {
                    say!("      {}", u.story);
                    say!("      report: {}", u.path.display());
                }
                CellVerdict::NotFound(Coverage { .. }) => say!(
                    "      the known violation was not found within the budget: a change lost \
                     it, or the entry needs more cases or other params"
                ),
            }
        }
        stats.push(searched.stats);
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
