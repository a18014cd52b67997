//! `lockcheck matrix` and `lockcheck merge`: the verdict matrix, whole or joined from shards.

use super::progress::{progress_bar, rates};
use super::{parse_algorithm, parse_jobs, usage, EXIT_OK};
use clap::Args;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Params;
use lockcheck_search::cell::CellStats;
use lockcheck_search::explore::Shard;
use lockcheck_search::matrix::{
    self, Budget, CellResult, MatrixEvent, MatrixOptions, Row, UserLock,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The arguments of `lockcheck matrix`.
#[derive(Args)]
// A negative number is a value the checks refuse by name, not an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct MatrixArgs {
    /// Cases per cell. Deterministic: the same seed gives the same matrix.
    #[arg(long, value_name = "N", conflicts_with = "budget_seconds",
          default_value_t = matrix::DEFAULT_CASES)]
    cases: u32,
    /// Wall time per cell instead of a case count; each cell records the cases it ran, so
    /// `--cases` reproduces its verdict.
    #[arg(long, value_name = "S")]
    budget_seconds: Option<u64>,
    /// Seed of every cell's search.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Cells searched at once [default: all cores]. Never changes the result.
    #[arg(long, value_name = "J")]
    jobs: Option<usize>,
    /// Run only slice I of N of every cell's cases (1-based), e.g. one per CI job; join the
    /// shards' directories with `lockcheck merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// Where to write the matrix, the reports and the regressions.
    #[arg(long, value_name = "DIR", default_value = "reports")]
    out: PathBuf,
    /// Only these algorithms, comma-separated [default: all of lockcheck's own, each with its
    /// library variants]. A variant is `ALGORITHM@VARIANT` (`redis-reentrant@redisson-3.23`;
    /// `explore --help` lists them). Your Redis
    /// Lua lock is `redis-script:FILE` (the script file of `explore --script`): its row runs
    /// FILE's scripts, so a team's CI can pin its lock's verdicts (`lockcheck check` takes
    /// `script = "FILE"` in an entry).
    #[arg(long, value_name = "A[,A...]")]
    algorithms: Option<String>,
    /// Only these fault profiles, comma-separated [default: all].
    #[arg(long, value_name = "F[,F...]")]
    faults: Option<String>,
    /// Clients that check their lock before each access in every cell: always, or in half the
    /// cases [default: never, the classic client]. A team's matrix of the client it writes.
    #[arg(long, value_name = "always|half|never")]
    careful: Option<String>,
}

/// Runs `lockcheck matrix`.
pub fn matrix(args: MatrixArgs) -> anyhow::Result<u8> {
    let MatrixArgs {
        cases,
        budget_seconds,
        seed,
        jobs,
        shard,
        out,
        algorithms,
        faults,
        careful,
    } = args;
    let careful = careful
        .map(|c| lockcheck_search::explore::Careful::parse(&c).map_err(usage))
        .transpose()?
        .unwrap_or_default();
    // clap refuses --cases together with --budget-seconds; run_matrix checks the rest.
    let budget = match budget_seconds {
        Some(s) => Budget::Seconds(s),
        None => Budget::Cases(cases),
    };
    let shard = shard
        .map(|text| Shard::parse(&text).map_err(usage))
        .transpose()?;
    let rows = match algorithms {
        None => matrix::default_rows(),
        Some(list) => {
            let mut out: Vec<Row> = Vec::new();
            for item in list.split(',').map(str::trim) {
                let row = parse_row(item)?;
                if !out.iter().any(|r| r.name() == row.name()) {
                    out.push(row);
                }
            }
            out
        }
    };
    let profiles = match faults {
        None => FaultProfile::ALL.to_vec(),
        Some(list) => FaultProfile::parse_list(&list).map_err(usage)?,
    };
    let options = MatrixOptions {
        rows,
        profiles,
        budget,
        seed,
        jobs: parse_jobs(jobs)?,
        shard,
        careful,
    };
    run(&options, &out)
}

/// One item of `--algorithms`: an algorithm's name, or `ALGORITHM:FILE` for a user's lock (an
/// algorithm that runs the user's scripts, with the scripts of FILE). The file is read,
/// compiled and run once without faults here, before any cell is searched, so that a broken
/// script is a usage error naming it rather than a matrix of verdicts about nothing.
fn parse_row(item: &str) -> anyhow::Result<Row> {
    // `NAME/N`: the lock on N servers (an etcd cluster). A user's file may hold `/`, so only
    // an item without one is read so.
    if !item.contains(':') {
        if let Some((name, nodes)) = item.rsplit_once('/') {
            let nodes: u32 = nodes.parse().map_err(|_| {
                usage(format!(
                    "--algorithms {}: NAME/N takes a number of servers after '/'",
                    lockcheck_core::input::clip(item)
                ))
            })?;
            let row = parse_row(name)?;
            let params = Params {
                variant: row.variant.map(str::to_string),
                nodes: Some(nodes),
                ..Params::default()
            };
            params.check_for(row.algorithm).map_err(|e| {
                usage(format!(
                    "--algorithms {}: {e}",
                    lockcheck_core::input::clip(item)
                ))
            })?;
            return Ok(Row {
                nodes: Some(nodes),
                ..row
            });
        }
    }
    let (name, file) = match item.split_once(':') {
        Some((name, file)) => (name, Some(file)),
        None => (item, None),
    };
    if let Some((name, variant)) = name.split_once('@') {
        let algorithm = parse_algorithm(name)?;
        if file.is_some() {
            return Err(usage(format!(
                "--algorithms {}: a variant takes no file",
                lockcheck_core::input::clip(item)
            )));
        }
        // The scenario's own check names the known variants (or says there are none).
        let params = Params {
            variant: Some(variant.to_string()),
            ..Params::default()
        };
        params
            .check_for(algorithm)
            .map_err(|e| usage(format!("--algorithms {name}@…: {e}")))?;
        let description = algorithm.description();
        let known = description.variant(Some(variant)).expect("checked above");
        // The default variant is the algorithm's own row.
        let is_default = description.variants.first() == Some(known);
        return Ok(Row {
            variant: (!is_default).then_some(known.name),
            ..Row::built_in(algorithm)
        });
    }
    let algorithm = parse_algorithm(name)?;
    let scripted = algorithm.description().scripted;
    match file {
        None if scripted => Err(usage(format!(
            "--algorithms {name}: it runs your scripts; name their file: {name}:FILE \
             (the format: `lockcheck explore --help`)"
        ))),
        None => Ok(Row::built_in(algorithm)),
        Some(_) if !scripted => Err(usage(format!(
            "--algorithms {}: {name} runs its own code and takes no file (only an algorithm \
             that runs your scripts does, as redis-script:FILE)",
            lockcheck_core::input::clip(item)
        ))),
        Some("") => Err(usage(format!(
            "--algorithms {name}:: the file is missing after ':'"
        ))),
        Some(file) => {
            let script = lockcheck_sim::script_file::load(Path::new(file))
                .map_err(|e| usage(e.to_string()))?;
            let row = Row {
                algorithm,
                variant: None,
                user: Some(UserLock {
                    file: file.to_string(),
                    script,
                }),
                nodes: None,
            };
            let (spec, base) =
                matrix::plan(std::slice::from_ref(&row), &[FaultProfile::None]).remove(0);
            let params = spec
                .params(base)
                .map_err(|e| usage(format!("--algorithms {item}: {e}")))?;
            lockcheck_sim::script_file::rehearse(algorithm, &params)
                .map_err(|e| usage(format!("--algorithms {item}: {e}")))?;
            Ok(row)
        }
    }
}

/// Runs the matrix, and prints its UNSAFE cells and a summary for people.
fn run(options: &MatrixOptions, out: &Path) -> anyhow::Result<u8> {
    let cells = matrix::plan(&options.rows, &options.profiles).len();
    let bar = progress_bar(cells as u64, "cells")?;
    let started = Instant::now();
    let cases = AtomicU64::new(0);
    let found = AtomicU64::new(0);
    let run = matrix::run_matrix(options, out, &|event| match event {
        MatrixEvent::Case => {
            let n = cases.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_multiple_of(64) {
                bar.set_message(format!(
                    "{n} cases, {} UNSAFE",
                    found.load(Ordering::Relaxed)
                ));
            }
        }
        MatrixEvent::CellDone { result, .. } => {
            if matches!(result, CellResult::Found { .. }) {
                found.fetch_add(1, Ordering::Relaxed);
            }
            bar.inc(1);
        }
    })
    .map_err(|e| usage(e.to_string()))?;
    bar.finish_and_clear();
    let m = &run.matrix;
    let count = |f: fn(&CellResult) -> bool| m.cells.iter().filter(|c| f(&c.result)).count();
    for c in &m.cells {
        if let CellResult::Found { story, report, .. } = &c.result {
            say!("UNSAFE {}: {story}", c.id);
            let path = out.join(report);
            if path.is_file() {
                say!("  report: {}", path.display());
            } else {
                say!(
                    "  report: {} could not be written (why: below)",
                    path.display()
                );
            }
        }
    }
    say!(
        "matrix: {} cells: {} UNSAFE, {} not found, {} skipped; {} and {}",
        m.cells.len(),
        count(|r| matches!(r, CellResult::Found { .. })),
        count(|r| matches!(r, CellResult::NotFound { .. })),
        count(|r| matches!(r, CellResult::Skipped { .. })),
        out.join(matrix::MARKDOWN_FILE).display(),
        out.join(matrix::JSON_FILE).display(),
    );
    let stats: Vec<&CellStats> = run.stats.values().collect();
    say!("{}", rates(&stats, started.elapsed(), options.jobs, true));
    Ok(super::after_writes(EXIT_OK, &run.unwritten))
}
/// Runs `lockcheck merge`.
pub fn merge(dirs: &[PathBuf], out: &Path) -> anyhow::Result<u8> {
    let m = matrix::merge(dirs, out).map_err(|e| usage(e.to_string()))?;
    let unsafe_cells = m
        .cells
        .iter()
        .filter(|c| matches!(c.result, CellResult::Found { .. }))
        .count();
    say!(
        "merged {} shard(s): {} cells, {unsafe_cells} UNSAFE; {} and {}",
        dirs.len(),
        m.cells.len(),
        out.join(matrix::MARKDOWN_FILE).display(),
        out.join(matrix::JSON_FILE).display(),
    );
    Ok(EXIT_OK)
}
