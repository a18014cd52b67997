//! Joining the matrices of shards into the unsharded one.

use super::{file_name, io, Budget, Cell, CellResult, Matrix, MatrixError};
use crate::cell::{self};
use crate::explore::Shard;
use crate::regression;
use lockcheck_core::report::Report;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Joins the matrices that `lockcheck matrix --shard I/N` wrote into `dirs` (one per shard, every
/// shard exactly once) into the matrix one unsharded run would have written, and writes it with
/// its reports into `out`. Per cell, the lowest failing case across the shards is the unsharded
/// search's (its report is copied, counting the cases of every shard up to it); cases and
/// simulated time of cells with no failure add up. The shards' persisted failures join `out`'s
/// (see [`regression::merge`]). Shards that do not fit together (another seed, budget, version or
/// set of cells; a shard missing or given twice; a cell whose recorded cases its shard cannot
/// have run) are refused before anything is written.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Matrix, MatrixError> {
    let bad = |m: String| Err(MatrixError::Invalid(m));
    if dirs.is_empty() {
        return bad("merge needs the output directory of every shard".into());
    }
    let mut parts: Vec<(&PathBuf, Matrix)> = Vec::new();
    for dir in dirs {
        parts.push((dir, Matrix::read(dir)?));
    }
    let out_abs = std::path::absolute(out).map_err(io(out))?;
    for (dir, _) in &parts {
        if std::path::absolute(dir).map_err(io(dir))? == out_abs {
            return bad(format!(
                "--out {}: that is a shard's own directory; merge into another",
                out.display()
            ));
        }
    }
    let (first_dir, first) = (parts[0].0, parts[0].1.clone());
    let Some(count) = first.shard.map(|s| s.count) else {
        return bad(format!(
            "{}: not a shard (written without --shard); there is nothing to merge",
            first_dir.display()
        ));
    };
    if matches!(first.budget, Budget::Seconds(_)) {
        return bad(format!(
            "{}: a wall-time budget; only shards of a --cases matrix join into one search",
            first_dir.display()
        ));
    }
    let mut seen: BTreeMap<u32, &PathBuf> = BTreeMap::new();
    for (dir, part) in &parts {
        let Some(shard) = part.shard else {
            return bad(format!(
                "{}: not a shard (written without --shard)",
                dir.display()
            ));
        };
        let differs = |what: &str| {
            bad(format!(
                "{} and {} do not fit together: different {what}",
                first_dir.display(),
                dir.display()
            ))
        };
        if shard.count != count {
            return differs("shard counts");
        }
        if part.seed != first.seed {
            return differs("seeds");
        }
        if part.budget != first.budget {
            return differs("budgets (--cases)");
        }
        if part.careful != first.careful {
            return differs("clients (--careful)");
        }
        if part.lockcheck != first.lockcheck {
            return differs("lockcheck versions");
        }
        if part.algorithms != first.algorithms || part.profiles != first.profiles {
            return differs("algorithms or fault profiles");
        }
        let same_cells = part.cells.len() == first.cells.len()
            && part
                .cells
                .iter()
                .zip(&first.cells)
                .all(|(a, b)| a.id == b.id && a.spec == b.spec && a.params == b.params);
        if !same_cells {
            return differs("cells or cell parameters");
        }
        if let Budget::Cases(n) = part.budget {
            check_shard_cells(dir, part, shard, n)?;
        }
        check_shard_reports(dir, part)?;
        if let Some(other) = seen.insert(shard.index, dir) {
            return bad(format!(
                "shard {}/{count} given twice: {} and {}",
                shard.index + 1,
                other.display(),
                dir.display()
            ));
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !seen.contains_key(i))
        .map(|i| format!("{}/{count}", i + 1))
        .collect();
    if !missing.is_empty() {
        return bad(format!("shard(s) {} missing", missing.join(", ")));
    }
    let previous = Matrix::read(out).ok();
    // In shard order, so that ties (a regression in two shards) resolve the same on every run.
    parts.sort_by_key(|(_, p)| p.shard.map(|s| s.index));
    let mut cells = Vec::new();
    for (i, template) in first.cells.iter().enumerate() {
        let results: Vec<(&PathBuf, &CellResult)> = parts
            .iter()
            .map(|(d, p)| (*d, &p.cells[i].result))
            .collect();
        let result = merge_cell(&template.id, &results, out)?;
        cells.push(Cell {
            result,
            ..template.clone()
        });
    }
    // Every shard's persisted failures, so that the next run from `out` replays them first as it
    // would have from the shards' own directories.
    let sources: Vec<&Path> = parts.iter().map(|(d, _)| d.as_path()).collect();
    for cell in &cells {
        if !matches!(cell.result, CellResult::Skipped { .. }) {
            regression::merge(out, &cell.id, &sources).map_err(|source| MatrixError::Cell {
                id: cell.id.clone(),
                source: source.into(),
            })?;
        }
    }
    let matrix = Matrix {
        shard: None,
        cells,
        ..first
    };
    matrix.write(out)?;
    matrix.remove_replaced(previous.as_ref(), out)?;
    Ok(matrix)
}

/// Checks that the cells of `part`, written as shard `shard` of a matrix of `cases` cases per
/// cell, hold what that one run can have written: a failing case of its own slice of the case
/// space, below the budget, and as many cases as the slice has up to it (or in all, for a cell
/// where the search found nothing). A matrix.json edited by hand, or copied between runs of other
/// shards, seeds or budgets, is refused here instead of joining into a matrix no run would write.
fn check_shard_cells(
    dir: &Path,
    part: &Matrix,
    shard: Shard,
    cases: u32,
) -> Result<(), MatrixError> {
    let name = format!("{}/{}", shard.index + 1, shard.count);
    for cell in &part.cells {
        let bad = |m: String| {
            Err(MatrixError::Invalid(format!(
                "{}: cell {}: {m}; it is not what `lockcheck matrix --cases {cases} --shard \
                 {name}` writes",
                dir.display(),
                cell.id
            )))
        };
        let (ran, expected) = match &cell.result {
            CellResult::Skipped { .. } => continue,
            CellResult::Found {
                case_index: Some(k),
                cases: ran,
                ..
            } => {
                if *k >= u64::from(cases) {
                    return bad(format!(
                        "failing case {k} is past the budget of {cases} cases"
                    ));
                }
                if !shard.owns(*k) {
                    return bad(format!(
                        "failing case {k} is not in shard {name}'s slice (the cases whose index \
                         is {} modulo {})",
                        shard.index, shard.count
                    ));
                }
                // `k < cases`, so `k + 1` fits.
                (*ran, shard.slots(*k as u32 + 1))
            }
            CellResult::Found { cases: ran, .. } | CellResult::NotFound { cases: ran, .. } => {
                (*ran, shard.slots(cases))
            }
        };
        if ran != expected {
            return bad(format!(
                "{ran} cases run where the shard's slice has {expected}"
            ));
        }
    }
    Ok(())
}

/// Checks every UNSAFE cell of `part` (the shard in `dir`) against its report: the report is a
/// file of the shard's own directory (a bare file name: no `..`, no absolute path, not a
/// symbolic link, so that `merge` reads nothing outside the shards it was given), it is this
/// cell's (named after the cell and its history's hash), it says what the cell says (UNSAFE,
/// the same story, the same search), and it replays as written. A report swapped for another
/// cell's or another run's, or edited, is refused here, naming the cell, before anything is
/// written.
fn check_shard_reports(dir: &Path, part: &Matrix) -> Result<(), MatrixError> {
    for cell in &part.cells {
        let CellResult::Found {
            cases,
            case_index,
            story,
            report,
        } = &cell.result
        else {
            continue;
        };
        let bad = |m: String| {
            Err(MatrixError::Invalid(format!(
                "{}: cell {}: report '{}' {m}; it is not what `lockcheck matrix` wrote for this \
                 cell",
                dir.display(),
                cell.id,
                lockcheck_core::input::clip(report)
            )))
        };
        let bare = {
            let mut parts = Path::new(report).components();
            matches!(
                (parts.next(), parts.next()),
                (Some(std::path::Component::Normal(_)), None)
            ) && !report.contains(['/', '\\'])
        };
        if !bare {
            return bad("is not a file of the shard's own directory (a bare file name)".into());
        }
        let path = dir.join(report);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return bad("is a symbolic link, which merge does not follow".into());
            }
            Ok(meta) if !meta.file_type().is_file() => {
                return bad("is not a regular file".into());
            }
            Ok(_) => {}
            Err(e) => return bad(format!("cannot be read: {e}")),
        }
        let r = match Report::read(&path) {
            Ok(r) => r,
            Err(e) => return bad(format!("cannot be read: {e}")),
        };
        let named = r.path_in(Path::new(""), &cell.id);
        if named.as_os_str() != report.as_str() {
            return bad(format!(
                "is not this cell's: a report of its history would be named '{}'",
                named.display()
            ));
        }
        if r.verdict != lockcheck_core::verdict::VerdictKind::Found {
            return bad("reports no violation".into());
        }
        if r.history.digest() != r.history_hash {
            return bad("was edited: its history does not have the hash it records".into());
        }
        if cell::story(&r) != *story {
            return bad("tells another story than the cell".into());
        }
        let search = r.search.as_ref().map(|s| (s.seed, s.cases));
        let expected = case_index.map(|_| (part.seed, *cases));
        if search != expected {
            return bad("was found by another search than the cell's".into());
        }
        let replayed = lockcheck_sim::replay(&r);
        if !replayed.identical() {
            let what = match (replayed.first_difference, replayed.differences.first()) {
                (Some(at), _) => format!("history entry {at}"),
                (None, Some(d)) => d.field.to_string(),
                (None, None) => "?".into(),
            };
            return bad(format!(
                "was edited: it does not replay as written ({what})"
            ));
        }
    }
    Ok(())
}

/// One cell of the merged matrix from its shards' results.
fn merge_cell(
    id: &str,
    results: &[(&PathBuf, &CellResult)],
    out: &Path,
) -> Result<CellResult, MatrixError> {
    let total_cases: u32 = results
        .iter()
        .map(|(_, r)| match r {
            CellResult::Found { cases, .. } | CellResult::NotFound { cases, .. } => *cases,
            CellResult::Skipped { .. } => 0,
        })
        .sum();
    if let Some((_, CellResult::Skipped { reason })) = results.first() {
        return Ok(CellResult::Skipped {
            reason: reason.clone(),
        });
    }
    let found = results
        .iter()
        .filter_map(|(dir, r)| match r {
            CellResult::Found {
                case_index: Some(k),
                story,
                report,
                ..
            } => Some((*k, *dir, story, report)),
            _ => None,
        })
        .min_by_key(|(k, ..)| *k);
    if let Some((k, dir, story, report)) = found {
        // Every shard ran all its cases below k (none failed there), so the whole search ran
        // cases 0..=k: the unsharded search's count.
        let cases = u32::try_from(k + 1).unwrap_or(u32::MAX);
        let mut r = Report::read(&dir.join(report))?;
        if let Some(search) = r.search.as_mut() {
            search.cases = cases;
        }
        let path = r.write(out, id)?;
        return Ok(CellResult::Found {
            cases,
            case_index: Some(k),
            story: story.clone(),
            report: file_name(&path),
        });
    }
    let regression = results.iter().find_map(|(dir, r)| match r {
        CellResult::Found {
            case_index: None,
            story,
            report,
            ..
        } => Some((*dir, story, report)),
        _ => None,
    });
    if let Some((dir, story, report)) = regression {
        let mut r = Report::read(&dir.join(report))?;
        let path = r.write(out, id)?;
        return Ok(CellResult::Found {
            cases: total_cases,
            case_index: None,
            story: story.clone(),
            report: file_name(&path),
        });
    }
    Ok(CellResult::NotFound {
        cases: total_cases,
        simulated_ns: results
            .iter()
            .map(|(_, r)| match r {
                CellResult::NotFound { simulated_ns, .. } => *simulated_ns,
                _ => 0,
            })
            .sum(),
    })
}
