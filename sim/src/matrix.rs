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

use crate::cell::{self, CellError, CellSearch, CellStats, CellVerdict};
use crate::explore::{Careful, ExploreOptions, Shard};
use crate::regression;
use crate::script_file::ScriptFile;
use lockcheck_algorithms::describe::{Fencing, Lease};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::{shell_quote, Report, ReportError};
use lockcheck_core::scenario::{Algorithm, Params};
use lockcheck_core::verdict::Coverage;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

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

/// A row of the matrix (with its fencing row, where it has one): one of lockcheck's algorithms
/// (as its library's current release, or a named variant for another range of versions:
/// `redis-reentrant@redisson-3.23`), or a user's lock, an algorithm that runs the user's
/// scripts with the scripts of a file (`--algorithms redis-script:FILE`).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// A library variant other than the default ([`Description::variants`]).
    ///
    /// [`Description::variants`]: lockcheck_algorithms::describe::Description::variants
    pub variant: Option<&'static str>,
    /// The user's lock, for an algorithm that runs the user's scripts.
    pub user: Option<UserLock>,
    /// Servers other than the default (`params.nodes`): a cluster of etcd members
    /// (`etcd-mutex/3`).
    pub nodes: Option<u32>,
}

/// The rows of `lockcheck matrix` without `--algorithms`: every one of lockcheck's own
/// algorithms, each followed by its library variants other than the default, so that the
/// verdicts of the versions people run stand beside the current release's.
pub fn default_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for algorithm in Algorithm::built_in() {
        rows.push(Row::built_in(algorithm));
        for variant in algorithm.description().variants.iter().skip(1) {
            rows.push(Row {
                variant: Some(variant.name),
                ..Row::built_in(algorithm)
            });
        }
        // A lock on one etcd member, and on the three-member cluster people run: what raft's
        // leader changes and round-robin clients do to the same lock.
        if algorithm == Algorithm::EtcdMutex {
            rows.push(Row {
                nodes: Some(3),
                ..Row::built_in(algorithm)
            });
        }
    }
    rows
}

/// A user's lock as a matrix row: the file of its scripts, read.
#[derive(Clone, Debug, PartialEq)]
pub struct UserLock {
    /// The file as `--algorithms` named it: the row's name and its cells' rerun commands say
    /// it so.
    pub file: String,
    /// What the file holds.
    pub script: ScriptFile,
}

impl Row {
    /// A row of one of lockcheck's own algorithms.
    pub fn built_in(algorithm: Algorithm) -> Row {
        Row {
            algorithm,
            variant: None,
            user: None,
            nodes: None,
        }
    }

    /// Its name as `--algorithms` takes it: `single-redis`, `redis-reentrant@redisson-3.23`,
    /// `redis-script:locks/mine.toml`, `etcd-mutex/3` (on three servers).
    pub fn name(&self) -> String {
        let mut name = self.algorithm.name().to_string();
        if let Some(variant) = self.variant {
            name = format!("{name}@{variant}");
        }
        if let Some(nodes) = self.nodes {
            name = format!("{name}/{nodes}");
        }
        if let Some(user) = &self.user {
            name = format!("{name}:{}", user.file);
        }
        name
    }

    /// What its cells' names begin with: the algorithm's name, then a variant's, or for a
    /// user's lock the file's name (`redis-reentrant-redisson-3.23`, `redis-script-mine`; see
    /// [`CellSpec::id`]).
    pub fn cell_prefix(&self) -> String {
        cell_prefix(
            self.algorithm,
            self.variant,
            self.user.as_ref().map(|u| u.file.as_str()),
            self.nodes,
        )
    }

    /// The parameters its cells start from: the defaults, with the row's variant, or a user's
    /// lock's scripts.
    fn base_params(&self) -> Params {
        let mut params = Params {
            variant: self.variant.map(str::to_string),
            nodes: self.nodes,
            ..Params::default()
        };
        if let Some(user) = &self.user {
            user.script.apply_to(&mut params);
        }
        params
    }
}

/// The beginning of a cell's name: `algorithm`'s name, followed by its variant's, or for a
/// user's lock by its script file's name without the extension, in lowercase letters, digits
/// and `-` (cell names name files), then `-N-servers` for a row on `nodes` servers.
fn cell_prefix(
    algorithm: Algorithm,
    variant: Option<&str>,
    file: Option<&str>,
    nodes: Option<u32>,
) -> String {
    let prefix = prefix_of(algorithm, variant, file);
    match nodes {
        Some(n) => format!("{prefix}-{n}-servers"),
        None => prefix,
    }
}

/// [`cell_prefix`] without the servers.
fn prefix_of(algorithm: Algorithm, variant: Option<&str>, file: Option<&str>) -> String {
    if let Some(variant) = variant {
        return format!("{}-{variant}", algorithm.name());
    }
    let Some(file) = file else {
        return algorithm.name().to_string();
    };
    let stem = Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name = String::new();
    for c in stem.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_matches('-');
    if name.is_empty() {
        format!("{}-script", algorithm.name())
    } else {
        format!("{}-{name}", algorithm.name())
    }
}

/// Which search a cell is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellSpec {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// A library variant other than the default (also in the cell's parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// For a user's lock: the file of its scripts, as `--algorithms` named it (the scripts
    /// themselves are embedded in the cell's parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Servers other than the default (also in the cell's parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Whether the resource checks the lock's fencing token.
    pub fencing: bool,
    /// The fault profile.
    pub profile: FaultProfile,
}

impl CellSpec {
    /// The cell's name: `single-redis-pause`, `single-redis-fencing-pause`. Names its report and
    /// its regression file.
    pub fn id(&self) -> String {
        format!(
            "{}{}-{}",
            cell_prefix(
                self.algorithm,
                self.variant.as_deref(),
                self.script.as_deref(),
                self.nodes
            ),
            if self.fencing { "-fencing" } else { "" },
            self.profile.name()
        )
    }

    /// The parameters the cell searches with, from its row's `base` ([`plan`] gives it), or
    /// why the cell cannot be searched. Every cell takes the defaults (docs/scenarios.md; a user's lock
    /// with its scripts), except: fencing where the row says so; one replica for `failover`,
    /// which needs one to promote; and [`FOR_UPDATE_WAIT_TIMEOUT_MS`] for
    /// `mysql-for-update-held`.
    pub fn params(&self, base: Params) -> Result<Params, String> {
        let mut params = Params {
            fencing: self.fencing,
            ..base
        };
        if self.algorithm.lease() == Lease::IdleConnection {
            params.mysql.wait_timeout_ms = Some(FOR_UPDATE_WAIT_TIMEOUT_MS);
        }
        if self.profile == FaultProfile::Failover {
            if !has_replicas(self.algorithm) {
                return Err(
                    "no replica to promote: asynchronous replicas are modelled for the \
                            single-server Redis locks"
                        .into(),
                );
            }
            params.redis.replicas = 1;
        }
        params
            .check_for(self.algorithm)
            .map_err(|e| e.to_string())?;
        Ok(params)
    }

    /// The `lockcheck explore` flags that search this cell alone with `params` (its
    /// [`CellSpec::params`]; add `--cases`, `--seed`), or why there are none. Derived from the
    /// parameters themselves, not restated: every parameter that differs from its default
    /// becomes the `explore` flag of the same name (`wait_timeout_ms` → `--wait-timeout-ms`), so
    /// a parameter a cell comes to set cannot be left out of its rerun command. One that
    /// `explore` has no flag for is caught by the test that parses every cell's flags back.
    pub fn explore_flags(&self, params: &Params) -> Result<String, String> {
        let mut flags = format!("--algorithm {}", self.algorithm.name());
        // A user's lock: `--script FILE` sets what the file decides (the scripts, and with them
        // fencing and the watchdog); the other flags say what the cell sets beyond it.
        let mut base = Params::default();
        if let Some(file) = &self.script {
            let script = params
                .redis
                .script
                .clone()
                .ok_or("a user's lock without its scripts")?;
            ScriptFile {
                script,
                fencing: self.fencing,
            }
            .apply_to(&mut base);
            let _ = write!(flags, " --script {}", shell_quote(file));
        }
        let _ = write!(flags, " --faults {} --safety-only", self.profile.name());
        let to_map = |p: &Params| match serde_json::to_value(p) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("params serialize to a JSON object"),
        };
        let (set, default) = (to_map(params), to_map(&base));
        if let Some(key) = default.keys().find(|k| !set.contains_key(*k)) {
            return Err(format!("params.{key}: no flag unsets it"));
        }
        // A backend's group (`redis: {replicas: 1}`) is set by the flags of its settings'
        // names (`--replicas 1`): explore's flags are flat.
        let mut changed: Vec<(&String, &serde_json::Value)> = Vec::new();
        for (key, value) in &set {
            if default.get(key) == Some(value) {
                continue;
            }
            match value {
                serde_json::Value::Object(group)
                    if matches!(key.as_str(), "redis" | "zookeeper" | "mysql") =>
                {
                    // Only the settings that differ from the base's (a user's lock's scripts
                    // are in the redis group, set by `--script`).
                    let base = default.get(key).and_then(|b| b.as_object());
                    changed.extend(
                        group
                            .iter()
                            .filter(|(k, v)| base.and_then(|b| b.get(*k)) != Some(*v)),
                    );
                }
                _ => changed.push((key, value)),
            }
        }
        for (key, value) in changed {
            let flag = format!("--{}", key.replace('_', "-"));
            match value {
                serde_json::Value::Bool(true) => {
                    let _ = write!(flags, " {flag}");
                }
                serde_json::Value::Number(n) => {
                    let _ = write!(flags, " {flag} {n}");
                }
                serde_json::Value::String(text) => {
                    let _ = write!(flags, " {flag} {text}");
                }
                other => return Err(format!("params.{key} = {other}: no flag sets it")),
            }
        }
        Ok(flags)
    }
}

/// Whether `algorithm` produces a fencing token: a scenario accepts `fencing: true` exactly then.
pub fn has_fencing(algorithm: Algorithm) -> bool {
    algorithm.description().fencing == Fencing::Token
}

/// Whether `algorithm` can run with asynchronous replicas (and so be failed over).
fn has_replicas(algorithm: Algorithm) -> bool {
    algorithm.description().replicas
}

/// The cells of `rows` × `profiles`, each with the parameters its row starts from (for
/// [`CellSpec::params`]): each algorithm, then its fencing variant where it has a token, each
/// under every profile, in the order given. A user's lock has one row, fenced when its file
/// says its acquire script returns a token.
pub fn plan(rows: &[Row], profiles: &[FaultProfile]) -> Vec<(CellSpec, Params)> {
    let mut cells = Vec::new();
    for row in rows {
        let base = row.base_params();
        let fencings: &[bool] = match (&row.user, has_fencing(row.algorithm)) {
            (Some(user), _) => &[user.script.fencing][..],
            (None, true) => &[false, true],
            (None, false) => &[false],
        };
        for &fencing in fencings {
            for &profile in profiles {
                let spec = CellSpec {
                    algorithm: row.algorithm,
                    variant: row.variant.map(str::to_string),
                    script: row.user.as_ref().map(|u| u.file.clone()),
                    nodes: row.nodes,
                    fencing,
                    profile,
                };
                cells.push((spec, base.clone()));
            }
        }
    }
    cells
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

    /// The matrix for people: a table of verdicts, then each UNSAFE cell's story and report.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        let budget = match self.budget {
            Budget::Cases(n) => format!("{n} cases per cell"),
            Budget::Seconds(s) => format!(
                "{s} s of wall time per cell (each cell shows the cases it ran; rerun one with \
                 `--cases`)"
            ),
        };
        let _ = writeln!(md, "# Verdict matrix\n");
        if let Some(shard) = self.shard {
            let _ = writeln!(
                md,
                "**Shard {} of {}: a partial matrix** (each cell covers this shard's slice of \
                 its cases). Join the shards with `lockcheck merge DIR…`.\n",
                shard.index + 1,
                shard.count
            );
        }
        let _ = writeln!(
            md,
            "`{}` (lockcheck {}): seed {}, {budget}.\n\n\
             Each cell is one search: the algorithm, with the resource checking its fencing token \
             or not, under one fault profile. **UNSAFE**: a safety violation (two holders at the \
             resource, or a lock freed under its holder), shrunk to a minimal counterexample \
             whose report replays byte for byte. *not found*: nothing in that many cases, which \
             covered that much simulated time — not a proof of safety. Liveness failures \
             (deadlocks) and order are not counted here (`lockcheck explore` without \
             `--safety-only` searches for them).\n",
            self.command(),
            self.lockcheck,
            self.seed
        );
        let header: Vec<&str> = self.profiles.iter().map(|p| p.name()).collect();
        let _ = writeln!(md, "| algorithm | {} |", header.join(" | "));
        let _ = writeln!(md, "|---|{}", "---|".repeat(header.len()));
        let mut skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in self.cells.chunks(self.profiles.len().max(1)) {
            let Some(first) = row.first() else { continue };
            let row_name = match (&first.spec.variant, &first.spec.script) {
                (Some(variant), _) => format!("{}@{variant}", first.spec.algorithm.name()),
                (None, Some(file)) => format!("{}:{file}", first.spec.algorithm.name()),
                (None, None) => first.spec.algorithm.name().to_string(),
            };
            let row_name = match first.spec.nodes {
                Some(n) => format!("{row_name}/{n}"),
                None => row_name,
            };
            let name = if first.spec.fencing {
                format!("{row_name} + fencing")
            } else {
                row_name
            };
            let cells: Vec<String> = row
                .iter()
                .map(|c| match &c.result {
                    CellResult::Found { case_index, .. } => format!(
                        "[**UNSAFE**](#{}){}",
                        c.id,
                        if case_index.is_none() {
                            " (regression)"
                        } else {
                            ""
                        }
                    ),
                    CellResult::NotFound {
                        cases,
                        simulated_ns,
                    } => format!("not found: {cases} cases, {}", hours(*simulated_ns)),
                    CellResult::Skipped { reason } => {
                        skipped
                            .entry(reason.clone())
                            .or_default()
                            .push(c.id.clone());
                        "—".to_string()
                    }
                })
                .collect();
            let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
        }
        md.push('\n');
        for (reason, ids) in &skipped {
            let _ = writeln!(md, "— skipped ({}): {reason}.", ids.join(", "));
        }
        // A user's lock is fenced as its file says, in its one row.
        let without: Vec<&str> = self
            .algorithms
            .iter()
            .filter_map(|name| Algorithm::from_name(name))
            .filter(|a| !has_fencing(*a))
            .map(|a| a.name())
            .collect();
        if !without.is_empty() {
            let _ = writeln!(
                md,
                "No fencing row for {}: no monotonic token to check (a scenario refuses \
                 `fencing: true` for them).",
                without.join(", ")
            );
        }
        let _ = writeln!(
            md,
            "\nParameters: every default (README.md, \"Scenario files\"), except one replica in \
             the `failover` cells, `wait_timeout_ms` {FOR_UPDATE_WAIT_TIMEOUT_MS} for \
             `mysql-for-update-held`, and `restart_delay_ms` raised to the lease by \
             `crash-delayed-restart`. `clock-drift` draws rates within ±5 % (five times \
             Redlock's drift factor); `partition` draws cuts of up to twice the lease. Each \
             cell's exact parameters are in `matrix.json`."
        );
        if self.algorithms.iter().any(|name| name.contains('@')) {
            let _ = writeln!(
                md,
                "\nA row `ALGORITHM@VARIANT` is the algorithm as an older range of its library's \
                 versions behaves (`lockcheck explore --help` lists each variant, its versions \
                 and the source files it follows; the plain row is the current release)."
            );
        }
        if self.algorithms.iter().any(|name| name.contains(':')) {
            let _ = writeln!(
                md,
                "\nA row `ALGORITHM:FILE` is your lock: the algorithm runs the scripts of FILE \
                 (embedded in each cell's parameters, so its reports replay without the file), \
                 fenced when FILE says its acquire script returns a token."
            );
        }
        let mut any = false;
        for c in &self.cells {
            let CellResult::Found {
                cases,
                case_index,
                story,
                report,
            } = &c.result
            else {
                continue;
            };
            if !any {
                let _ = writeln!(md, "\n## UNSAFE cells");
                any = true;
            }
            let found = match case_index {
                Some(k) => format!("Found at case {k} ({cases} cases run)."),
                None => format!(
                    "A persisted regression still fails; the search did not reach it in \
                     {cases} cases."
                ),
            };
            let shard = self
                .shard
                .map(|s| format!(" --shard {}/{}", s.index + 1, s.count))
                .unwrap_or_default();
            let flags = c
                .params
                .as_ref()
                .ok_or_else(|| "no parameters recorded".to_string())
                .and_then(|params| c.spec.explore_flags(params));
            let careful = if self.careful.is_never() {
                String::new()
            } else {
                format!(" --careful {}", self.careful.name())
            };
            let rerun = match (case_index, flags) {
                (Some(k), Ok(flags)) => format!(
                    "rerun: `lockcheck explore {flags}{careful} --seed {} --cases {}{shard}`",
                    self.seed,
                    k + 1
                ),
                (Some(_), Err(why)) => format!("no `lockcheck explore` reruns it ({why})"),
                (None, _) => "`lockcheck replay` reruns it".to_string(),
            };
            let _ = writeln!(
                md,
                "\n### {}\n\n{found} {story}\n\nReport: [{report}]({report}) · {rerun}",
                c.id
            );
        }
        md
    }
}

/// Simulated time for people: hours with one decimal.
pub fn hours(ns: u64) -> String {
    format!("{:.1} h", ns as f64 / 3.6e12)
}

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
        let replayed = crate::runner::replay(&r);
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
