//! Running a matrix: every cell's search, in parallel, with the files they write.

use super::{
    file_name, plan, Budget, Cell, CellResult, CellSpec, Matrix, MatrixError, MatrixOptions, Row,
};
use crate::cell::{self, CellSearch, CellStats, CellVerdict};
use crate::explore::ExploreOptions;
use lockcheck_core::scenario::Params;
use lockcheck_core::verdict::Coverage;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// What happened while a matrix ran, for a progress display.
#[derive(Clone, Copy, Debug)]
pub enum MatrixEvent<'a> {
    /// A case of some cell's search ran.
    Case,
    /// A cell is done.
    CellDone {
        /// Its name.
        id: &'a str,
        /// Its verdict.
        result: &'a CellResult,
    },
}

/// A matrix run: what was written, and where the time went.
#[derive(Clone, Debug)]
pub struct MatrixRun {
    /// The matrix, as written.
    pub matrix: Matrix,
    /// Where the time of each searched cell went, by cell name.
    pub stats: BTreeMap<String, CellStats>,
    /// What could not be written (a report, a regression entry, the matrix's own files), each
    /// with why: the matrix's verdicts stand, for the caller to say before these errors.
    pub unwritten: Vec<String>,
}

/// Runs every cell of `options` and writes `matrix.json`, `matrix.md`, the counterexamples'
/// reports and the regression files into `out`. A file that cannot be written (a read-only or
/// full `out`) does not hide the verdicts: it is listed in [`MatrixRun::unwritten`].
pub fn run_matrix(
    options: &MatrixOptions,
    out: &Path,
    progress: &(dyn Fn(MatrixEvent<'_>) + Sync),
) -> Result<MatrixRun, MatrixError> {
    options.check()?;
    let previous = Matrix::read(out).ok();
    let specs = plan(&options.rows, &options.profiles);
    let results = cell::in_parallel(&specs, options.jobs, |(spec, base)| {
        let id = spec.id();
        let (params, result, stats, unwritten) = match spec.params(base.clone()) {
            Err(reason) => (None, Ok(CellResult::Skipped { reason }), None, Vec::new()),
            Ok(params) => {
                let search = CellSearch {
                    id: id.clone(),
                    options: explore_options(options, spec, params.clone()),
                    out: out.to_path_buf(),
                    settle_on_regression: false,
                };
                match cell::search(&search, &|| progress(MatrixEvent::Case)) {
                    Ok(searched) => (
                        Some(params),
                        Ok(result_of(&searched.verdict)),
                        Some(searched.stats),
                        searched.unwritten,
                    ),
                    Err(source) => (
                        Some(params),
                        Err(MatrixError::Cell {
                            id: id.clone(),
                            source,
                        }),
                        None,
                        Vec::new(),
                    ),
                }
            }
        };
        if let Ok(result) = &result {
            progress(MatrixEvent::CellDone { id: &id, result });
        }
        (id, spec.clone(), params, result, stats, unwritten)
    });
    let mut cells = Vec::new();
    let mut stats = BTreeMap::new();
    let mut unwritten = Vec::new();
    for (id, spec, params, result, cell_stats, not_written) in results {
        if let Some(s) = cell_stats {
            stats.insert(id.clone(), s);
        }
        unwritten.extend(not_written.into_iter().map(|e| format!("{id}: {e}")));
        cells.push(Cell {
            id,
            spec,
            params,
            result: result?,
        });
    }
    let matrix = Matrix {
        lockcheck: env!("CARGO_PKG_VERSION").to_string(),
        seed: options.seed,
        budget: options.budget,
        shard: options.shard,
        careful: options.careful,
        algorithms: options.rows.iter().map(Row::name).collect(),
        profiles: options.profiles.clone(),
        cells,
    };
    if let Err(e) = matrix
        .write(out)
        .and_then(|()| matrix.remove_replaced(previous.as_ref(), out))
    {
        unwritten.push(e.to_string());
    }
    Ok(MatrixRun {
        matrix,
        stats,
        unwritten,
    })
}

/// The search of one cell.
fn explore_options(options: &MatrixOptions, spec: &CellSpec, params: Params) -> ExploreOptions {
    let (cases, time_limit) = match options.budget {
        Budget::Cases(n) => (n, None),
        Budget::Seconds(s) => (u32::MAX, Some(Duration::from_secs(s))),
    };
    ExploreOptions {
        params,
        safety_only: true,
        careful: options.careful,
        shard: options.shard.unwrap_or_default(),
        time_limit,
        ..ExploreOptions::new(spec.algorithm, vec![spec.profile], cases, options.seed)
    }
}

fn result_of(verdict: &CellVerdict) -> CellResult {
    match verdict {
        CellVerdict::Found(u) => CellResult::Found {
            cases: u.cases,
            case_index: u.case_index,
            story: u.story.clone(),
            report: file_name(&u.path),
        },
        CellVerdict::NotFound(Coverage {
            cases,
            simulated_ns,
        }) => CellResult::NotFound {
            cases: *cases,
            simulated_ns: *simulated_ns,
        },
    }
}
