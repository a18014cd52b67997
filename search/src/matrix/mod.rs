//! The verdict matrix: every algorithm (with and without fencing where it has a token) × every
//! fault profile. Each cell is UNSAFE, with its minimal counterexample's report and the story in
//! one line, or NOT FOUND, with the cases it ran and the simulated time they covered — never
//! "safe" without its budget. Written as `matrix.json` (for machines, and for [`merge`]) and
//! `matrix.md` (for people); both are functions of the cells alone, so the same command writes
//! the same bytes on any machine, with any number of threads or shards.
//!
//! A cell counts **safety** violations only (two holders at the resource, a lock freed under its
//! holder), the sense of "unsafe" in the known-results table; deadlocks and order are liveness,
//! which `lockcheck explore` without `--safety-only` searches for.
//!
//! Here, the options and what `matrix.json` holds; beside it, one file per stage of a matrix's
//! life, so that a change to one (a row, a column of the table, a check of the shards) is read
//! in one place: `plan.rs` (the rows and the cells they make), `run.rs` (searching the cells),
//! `markdown.rs` (`matrix.md`) and `merge.rs` (joining shards).

use crate::cell::CellError;
use crate::explore::{Careful, Shard};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::{shell_quote, ReportError};
use lockcheck_core::scenario::Params;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use thiserror::Error;

mod markdown;
mod merge;
mod plan;
mod run;

pub use markdown::hours;
pub use merge::merge;
pub use plan::{default_rows, has_fencing, plan, CellSpec, Row, UserLock};
pub use run::{run_matrix, MatrixEvent, MatrixRun};

/// Cases per cell when neither `--cases` nor `--budget-seconds` is given: the whole matrix then
/// takes a few minutes on 2 cores (docs/matrix-and-check.md gives the measured time).
pub const DEFAULT_CASES: u32 = 1_000;

/// The `wait_timeout` of the MariaDB server in the `mysql-for-update-held` cells, in ms: the other
/// locks' lease, so that a pause can outlast it within a run. (With MariaDB's default of 8 hours a
/// generated run would last 32 simulated hours and take seconds, and no pause would reach it.)
pub const FOR_UPDATE_WAIT_TIMEOUT_MS: u64 = 10_000;

/// The file names a matrix directory holds.
pub const JSON_FILE: &str = "matrix.json";
/// The rendering for people.
pub const MARKDOWN_FILE: &str = "matrix.md";

/// Something the matrix could not do.
#[derive(Debug, Error)]
pub enum MatrixError {
    /// A cell's search failed.
    #[error("cell {id}: {source}")]
    Cell {
        /// The cell.
        id: String,
        /// Why.
        source: CellError,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A `matrix.json` is not one.
    #[error("{path}: not a lockcheck matrix: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A counterexample report could not be read or written.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// The options cannot be carried out, or shards do not fit together.
    #[error("{0}")]
    Invalid(String),
}

/// How long each cell searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// This many cases per cell: the verdicts are deterministic.
    Cases(u32),
    /// This much wall time per cell, in seconds. A cell records the cases it ran, so that
    /// `--cases` reproduces its verdict; the same command may run more or fewer on another
    /// machine.
    Seconds(u64),
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixOptions {
    /// The rows, in order (each with its fencing variant where it has one).
    pub rows: Vec<Row>,
    /// The columns, in order.
    pub profiles: Vec<FaultProfile>,
    /// Each cell's budget.
    pub budget: Budget,
    /// Seed of every cell's search.
    pub seed: u64,
    /// Cells searched at once (each on one thread). Never changes the result.
    pub jobs: usize,
    /// This run's slice of every cell's case space; `None` for all of it.
    pub shard: Option<Shard>,
    /// Which clients check their lock before each access, in every cell (the classic client
    /// by default): a team's matrix of the clients it writes.
    pub careful: Careful,
}

impl MatrixOptions {
    /// Whether the options can be carried out: what [`run_matrix`] refuses before it searches a
    /// cell or writes a file. (Each cell's search is checked by [`crate::explore::check_options`].)
    pub fn check(&self) -> Result<(), MatrixError> {
        use lockcheck_core::limits;
        let invalid = |m: &str| Err(MatrixError::Invalid(m.into()));
        limits::within("--jobs", self.jobs, 1, limits::MAX_JOBS).map_err(MatrixError::Invalid)?;
        if let Some(shard) = self.shard {
            shard.check().map_err(MatrixError::Invalid)?;
        }
        let mut prefixes: BTreeMap<String, String> = BTreeMap::new();
        for row in &self.rows {
            if let Some(other) = prefixes.insert(row.cell_prefix(), row.name()) {
                return Err(MatrixError::Invalid(format!(
                    "{} and {}: both would name their cells {}-…; give the script files \
                     different names",
                    other,
                    row.name(),
                    row.cell_prefix()
                )));
            }
        }
        match self.budget {
            Budget::Cases(n) => {
                limits::within("--cases", n, 1, limits::MAX_CASES).map_err(MatrixError::Invalid)
            }
            Budget::Seconds(s) if self.shard.is_none() => {
                limits::within("--budget-seconds", s, 1, limits::MAX_BUDGET_SECONDS)
                    .map_err(MatrixError::Invalid)
            }
            Budget::Seconds(_) => invalid(
                "--shard needs --cases: with a wall-time budget each machine would run a \
                 different number of cases, and the shards would not join into one search",
            ),
        }
    }
}

/// A whole matrix (or one shard's part of it), as `matrix.json` holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Version of lockcheck that wrote it.
    pub lockcheck: String,
    /// Seed of every cell's search.
    pub seed: u64,
    /// Each cell's budget.
    pub budget: Budget,
    /// The slice of each cell's case space this file covers; absent for the whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Which clients checked their lock before each access (`--careful`); absent for none.
    #[serde(default, skip_serializing_if = "Careful::is_never")]
    pub careful: Careful,
    /// The rows, in order, by their names as `--algorithms` takes them ([`Row::name`]).
    pub algorithms: Vec<String>,
    /// The columns, in order.
    pub profiles: Vec<FaultProfile>,
    /// Every cell, row by row.
    pub cells: Vec<Cell>,
}

/// One cell and its verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Its name (see [`CellSpec::id`]).
    pub id: String,
    /// Which search.
    #[serde(flatten)]
    pub spec: CellSpec,
    /// The parameters searched with; absent for a skipped cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Params>,
    /// The verdict.
    #[serde(flatten)]
    pub result: CellResult,
}

/// A cell's verdict as `matrix.json` keeps it: a [`Verdict`](lockcheck_core::verdict::Verdict)
/// whose evidence is the report's file name, or a cell that does not exist. (Written
/// `"verdict": "unsafe"` for a finding: a cell counts only safety violations.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum CellResult {
    /// A safety violation was found.
    #[serde(rename = "unsafe")]
    Found {
        /// Cases run up to and including the failing one (when only a persisted regression
        /// failed: every case the search ran).
        cases: u32,
        /// The failing case's index in the cell's search; absent when only a persisted
        /// regression failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        case_index: Option<u64>,
        /// The violation in one line, with the faults that caused it.
        story: String,
        /// The report's file name, beside `matrix.json`.
        report: String,
    },
    /// Nothing in the budget: not a proof of safety.
    NotFound {
        /// Cases run.
        cases: u32,
        /// Simulated time they covered, in ns.
        simulated_ns: u64,
    },
    /// The cell does not exist for this algorithm (e.g. `failover` without replicas).
    Skipped {
        /// Why.
        reason: String,
    },
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MatrixError + '_ {
    move |source| MatrixError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Matrix {
    /// The report files its UNSAFE cells name.
    fn reports(&self) -> Vec<&str> {
        self.cells
            .iter()
            .filter_map(|c| match &c.result {
                CellResult::Found { report, .. } => Some(report.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Removes from `dir` the reports (`.json`, and a `.html` beside one) that `previous`, the
    /// matrix written there before, named for a cell this one searched again and no longer
    /// names, so that a regenerated directory holds only current counterexamples. Files the matrix did not write (an
    /// `explore` report, say) are never touched.
    fn remove_replaced(&self, previous: Option<&Matrix>, dir: &Path) -> Result<(), MatrixError> {
        let Some(previous) = previous else {
            return Ok(());
        };
        let current = self.reports();
        // Only cells this matrix searched again: a partial matrix (`--algorithms`, `--faults`)
        // written over a full one leaves the other cells' reports alone.
        let searched: BTreeSet<&str> = self.cells.iter().map(|c| c.id.as_str()).collect();
        let replaced = previous
            .cells
            .iter()
            .filter(|c| searched.contains(c.id.as_str()));
        for old in replaced.filter_map(|c| match &c.result {
            CellResult::Found { report, .. } => Some(report.as_str()),
            _ => None,
        }) {
            if current.contains(&old) || old.contains(['/', '\\']) {
                continue;
            }
            let json = dir.join(old);
            for stale in [json.with_extension("html"), json] {
                match std::fs::remove_file(&stale) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(io(&stale)(e));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Writes `matrix.json` and `matrix.md` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), MatrixError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let json = dir.join(JSON_FILE);
        let text = serde_json::to_string_pretty(self).expect("a matrix serializes");
        lockcheck_core::output::write_atomically(&json, (text + "\n").as_bytes())
            .map_err(io(&json))?;
        let md = dir.join(MARKDOWN_FILE);
        lockcheck_core::output::write_atomically(&md, self.to_markdown().as_bytes())
            .map_err(io(&md))
    }

    /// Reads `DIR/matrix.json`.
    pub fn read(dir: &Path) -> Result<Matrix, MatrixError> {
        let path = dir.join(JSON_FILE);
        let text = lockcheck_core::input::read_text(&path, lockcheck_core::input::MAX_REPORT_BYTES)
            .map_err(io(&path))?;
        lockcheck_core::input::parse_json(&text).map_err(|e| MatrixError::Malformed {
            message: format!("at {}: {}", e.path, e.message),
            path,
        })
    }

    /// The command that writes this matrix again.
    pub fn command(&self) -> String {
        let mut command = String::from("lockcheck matrix");
        match self.budget {
            Budget::Cases(n) => {
                let _ = write!(command, " --cases {n}");
            }
            Budget::Seconds(s) => {
                let _ = write!(command, " --budget-seconds {s}");
            }
        }
        let _ = write!(command, " --seed {}", self.seed);
        let default: Vec<String> = default_rows().iter().map(Row::name).collect();
        if self.algorithms != default {
            let names: Vec<String> = self.algorithms.iter().map(|a| shell_quote(a)).collect();
            let _ = write!(command, " --algorithms {}", names.join(","));
        }
        if self.profiles != FaultProfile::ALL {
            let names: Vec<&str> = self.profiles.iter().map(|p| p.name()).collect();
            let _ = write!(command, " --faults {}", names.join(","));
        }
        if let Some(shard) = self.shard {
            let _ = write!(command, " --shard {}/{}", shard.index + 1, shard.count);
        }
        if !self.careful.is_never() {
            let _ = write!(command, " --careful {}", self.careful.name());
        }
        command
    }
}
