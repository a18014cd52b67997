//! `lockcheck explore`: one search, its minimal counterexample and its report.

use super::params::ParamArgs;
use super::progress::{progress_bar, rates};
use super::{parse_algorithm, parse_jobs, usage, EXIT_OK};
use clap::Args;
use lockcheck_core::checker::Severity;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::Report;
use lockcheck_core::scenario::Params;
use lockcheck_core::verdict::Coverage;
use lockcheck_search::cell::{self, CellSearch, CellVerdict, Persisted};
use lockcheck_search::explore::{check_options, Careful, ExploreOptions, Shard};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The arguments of `lockcheck explore`.
#[derive(Args)]
// A negative number is a value the checks refuse by name, not an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct ExploreArgs {
    /// The algorithm (every registered one is listed under --help).
    #[arg(long, value_name = "NAME", long_help = super::algorithm_help())]
    pub algorithm: String,
    /// Fault profiles, comma-separated: none, pause, clock-jump, clock-drift,
    /// crash-restart, crash-delayed-restart, partition, delay, failover (needs --replicas), all.
    #[arg(long, value_name = "F[,F...]")]
    faults: String,
    /// Cases to try before concluding nothing is found.
    #[arg(long, default_value_t = 500)]
    cases: u32,
    /// Seed of the search: the same seed finds the same minimal case.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where to write the report. Failing cases are also kept in DIR/regressions/ and run
    /// first the next time. The default is ignored by git: `reports/` itself holds the
    /// committed reference run (`lockcheck matrix`), which a search must not edit.
    #[arg(long, value_name = "DIR", default_value = super::RUNS_DIR)]
    out: PathBuf,
    /// Lease length in ms (Redis locks: default 10000; mysql-row: no lease unless given).
    #[arg(long, value_name = "MS")]
    ttl_ms: Option<u64>,
    /// Number of servers (redlock: an odd number, default 5).
    #[arg(long, value_name = "N")]
    nodes: Option<u32>,
    /// Largest clock drift clock-drift draws, as a fraction: 0.005 keeps every clock within
    /// half of Redlock's default drift factor.
    #[arg(long, value_name = "FRACTION", default_value_t = lockcheck_core::profile::DEFAULT_MAX_DRIFT)]
    max_drift: f64,
    /// Longest partition the partition profile draws, in ms (default: twice the lease or
    /// session timeout). A ZooKeeper session outlives only partitions well inside its timeout.
    #[arg(long, value_name = "MS")]
    max_partition_ms: Option<u64>,
    /// The scenario parameters (fencing, persistence, each backend's settings).
    #[command(flatten)]
    params: ParamArgs,
    /// Count only safety violations (two holders, a lock freed under its holder), not
    /// deadlocks or order: search for what breaks mutual exclusion.
    #[arg(long)]
    safety_only: bool,
    /// Count only this kind of violation: mutual_exclusion, foreign_release, foreign_extend,
    /// freed_while_held, deadlock, stuck or fifo_order (e.g. foreign_extend separates a
    /// watchdog that checks its owner from one that does not, which two holders under pauses
    /// cannot: both lose their lock to a long pause).
    #[arg(long, value_name = "KIND")]
    violation: Option<String>,
    /// Clients that check their lock before each access (workload.check_before_access), the
    /// client teams write to stay safe: always, or in half the cases (a failure shrinks towards
    /// the classic client). [default: never]
    #[arg(long, value_name = "always|half|never")]
    careful: Option<String>,
    /// Threads running cases at once [default: all cores]. The result is the same whatever
    /// the number: each case has its own seed and runtime, and the lowest failing case wins.
    #[arg(long, value_name = "J")]
    jobs: Option<usize>,
    /// Run only slice I of N of the case space (1-based: 1/2 and 2/2), e.g. one per CI job;
    /// the failing case of lowest index across the slices is the unsharded search's.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
}

/// Runs `lockcheck explore`.
pub fn explore(args: ExploreArgs) -> anyhow::Result<u8> {
    let (options, faults, out) = options(args)?;
    search(&options, &faults, &out)
}

/// The search the arguments describe, with the `--faults` text (it names the report) and the
/// output directory; a usage error when they cannot be searched ([`check_options`], the check
/// every caller of the library shares).
fn options(args: ExploreArgs) -> anyhow::Result<(ExploreOptions, String, PathBuf)> {
    let ExploreArgs {
        algorithm,
        faults,
        cases,
        seed,
        out,
        ttl_ms,
        nodes,
        max_drift,
        max_partition_ms,
        params: flags,
        safety_only,
        violation,
        careful,
        jobs,
        shard,
    } = args;
    let only = violation
        .map(|kind| super::parse_violation_kind(&kind))
        .transpose()?;
    let careful = careful
        .map(|c| Careful::parse(&c).map_err(usage))
        .transpose()?
        .unwrap_or_default();
    let algorithm = parse_algorithm(&algorithm)?;
    let profiles = FaultProfile::parse_list(&faults).map_err(usage)?;
    // The flags are flat; each backend's settings go to its group of the scenario's params,
    // where a lock on another backend refuses them by name.
    let mut params = Params {
        ttl_ms,
        nodes,
        ..Params::default()
    };
    flags.apply(algorithm, &mut params)?;
    let shard = match shard {
        Some(text) => Shard::parse(&text).map_err(usage)?,
        None => Shard::default(),
    };
    let options = ExploreOptions {
        params,
        max_drift,
        max_partition_ms,
        safety_only,
        only,
        careful,
        jobs: parse_jobs(jobs)?,
        shard,
        ..ExploreOptions::new(algorithm, profiles, cases, seed)
    };
    check_options(&options).map_err(|e| usage(e.to_string()))?;
    lockcheck_sim::script_file::rehearse(options.algorithm, &options.params).map_err(usage)?;
    Ok((options, faults, out))
}

/// Searches, and prints what was found for people.
fn search(options: &ExploreOptions, faults: &str, out: &Path) -> anyhow::Result<u8> {
    let bar = progress_bar(u64::from(options.cases), "cases")?;
    let started = Instant::now();
    let done = AtomicU64::new(0);
    let cell = CellSearch {
        id: format!("{}-{}", options.algorithm.name(), faults.replace(',', "+")),
        options: options.clone(),
        out: out.to_path_buf(),
        settle_on_regression: false,
    };
    let searched = cell::search(&cell, &|| {
        bar.set_position(done.fetch_add(1, Ordering::Relaxed) + 1)
    })?;
    bar.finish_and_clear();
    let name = options.algorithm.name();
    let code = match &searched.verdict {
        CellVerdict::NotFound(Coverage {
            cases,
            simulated_ns,
        }) => {
            say!(
                "NOT FOUND: {name} × [{faults}]: no violation in {cases} cases ({:.0} simulated \
                 seconds) with seed {}",
                *simulated_ns as f64 / 1e9,
                options.seed,
            );
            EXIT_OK
        }
        CellVerdict::Found(found) => {
            let report = &found.report;
            // The word of the worst finding the search counted (all of them are safety
            // violations under --safety-only).
            let worst = lockcheck_search::explore::worst_counted(options, &report.violations)
                .unwrap_or(Severity::Unsafe);
            let word = worst.word();
            match found.case_index {
                Some(k) => say!(
                    "{word}: {name} × [{faults}]: found at case {k} after {} cases, shrunk in {} runs",
                    found.cases,
                    searched.stats.shrink_runs
                ),
                None => say!(
                    "{word}: {name} × [{faults}]: a persisted failure ({}{}) still fails; the \
                     search did not reach it in {} cases",
                    lockcheck_search::regression::path(out, &cell.id).display(),
                    found.regression.as_ref().map_or_else(String::new, origin),
                    found.cases
                ),
            }
            say!("  {}", report.summary);
            if worst != Severity::Unsafe {
                // The search stops at its first failing case, which may fail on liveness alone
                // (the summary says whether that case was safe): how to search for safety alone.
                say!("  to search for safety violations alone: --safety-only");
            }
            say!("  minimal schedule:");
            for line in &report.schedule {
                say!("    {line}");
            }
            if searched.unwritten.is_empty() {
                say!("  report: {}", found.path.display());
                say!(
                    "  timeline: {}",
                    Report::timeline_path(&found.path).display()
                );
                say!("  replay: {}", report.replay_command);
            } else {
                say!(
                    "  report: {} could not be written (why: below)",
                    found.path.display()
                );
            }
            worst.exit_code()
        }
    };
    say!(
        "{}",
        rates(&[&searched.stats], started.elapsed(), options.jobs, false)
    );
    Ok(super::after_writes(code, &searched.unwritten))
}

/// Where a persisted failure was found, and whether its history is still the one it had then.
pub fn origin(persisted: &Persisted) -> String {
    let r = &persisted.regression;
    format!(
        ", found with seed {} at case {}{}",
        r.found_with_seed,
        r.case_index,
        if persisted.history_changed {
            "; its history differs from when it was found"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use lockcheck_core::profile::FaultProfile;
    use lockcheck_core::Algorithm;
    use lockcheck_search::matrix::{plan, Row};

    fn parse(flags: &[&str]) -> anyhow::Result<ExploreOptions> {
        let argv = ["lockcheck", "explore", "--faults", "none"]
            .into_iter()
            .chain(flags.iter().copied());
        let Command::Explore(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not explore");
        };
        options(*args).map(|(options, ..)| options)
    }

    #[test]
    fn a_variant_flag_lands_in_the_params_and_an_unknown_one_names_the_known_ones() {
        let o = parse(&[
            "--algorithm",
            "redis-reentrant",
            "--variant",
            "redisson-3.23",
        ])
        .unwrap();
        assert_eq!(o.params.variant.as_deref(), Some("redisson-3.23"));
        let e = parse(&["--algorithm", "redis-reentrant", "--variant", "redisson-2"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("redisson-2") && e.contains("redisson-3.52+, redisson-3.51"),
            "{e}"
        );
        let e = parse(&["--algorithm", "single-redis", "--variant", "redisson-3.23"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("single-redis has no library variants"), "{e}");
    }

    #[test]
    fn the_algorithm_help_lists_each_variant_with_its_versions_and_sources() {
        let help = crate::cli::algorithm_help();
        for a in Algorithm::ALL {
            for v in a.description().variants {
                assert!(
                    help.contains(v.name) && help.contains(v.versions),
                    "{}",
                    v.name
                );
                let first_file = v.follows.split(',').next().unwrap();
                assert!(help.contains(first_file), "{}: {first_file}", v.name);
            }
        }
        // The variant lines (indented under their algorithm) are wrapped.
        let width = Algorithm::ALL.iter().map(|a| a.name().len()).max().unwrap();
        let under = " ".repeat(width + 4);
        let variant_lines = help.lines().filter(|l| l.starts_with(&under));
        assert!(variant_lines.clone().count() > 8, "{help}");
        assert!(
            variant_lines.clone().all(|l| l.chars().count() <= 110),
            "{help}"
        );
    }

    #[test]
    fn every_cells_rerun_flags_parse_back_to_its_search() {
        let (mut searched, mut scripted) = (0, 0);
        let mut rows: Vec<Row> = Algorithm::ALL.iter().copied().map(Row::built_in).collect();
        rows.extend(lockcheck_search::matrix::default_rows());
        // Users' locks: their rerun flags carry `--script FILE`, which must set exactly what
        // the row's file set (the scripts, fencing, the watchdog for an extend script).
        for example in ["plain-del.toml", "fenced.toml", "watchdog.json"] {
            let file = format!(
                "{}/examples/redis-script/{example}",
                env!("CARGO_MANIFEST_DIR")
            );
            let script = lockcheck_sim::script_file::load(std::path::Path::new(&file))
                .unwrap_or_else(|e| panic!("{e}"));
            rows.push(Row {
                algorithm: Algorithm::from_name("redis-script").unwrap(),
                variant: None,
                user: Some(lockcheck_search::matrix::UserLock { file, script }),
                nodes: None,
            });
        }
        for (spec, base) in plan(&rows, FaultProfile::ALL) {
            let Ok(params) = spec.params(base) else {
                continue;
            };
            let flags = spec
                .explore_flags(&params)
                .unwrap_or_else(|e| panic!("{}: {e}", spec.id()));
            let argv = ["lockcheck", "explore"]
                .into_iter()
                .chain(flags.split(' '))
                .chain(["--cases", "7", "--seed", "3", "--jobs", "1"]);
            let Command::Explore(args) = Cli::try_parse_from(argv)
                .unwrap_or_else(|e| panic!("{}: {flags}: {e}", spec.id()))
                .command
            else {
                panic!("{flags}: not explore");
            };
            let (options, ..) =
                options(*args).unwrap_or_else(|e| panic!("{}: {flags}: {e}", spec.id()));
            let expected = ExploreOptions {
                params,
                safety_only: true,
                ..ExploreOptions::new(spec.algorithm, vec![spec.profile], 7, 3)
            };
            assert_eq!(options, expected, "{}: {flags}", spec.id());
            searched += 1;
            scripted += usize::from(spec.script.is_some());
        }
        assert!(searched > 50, "{searched} cells");
        assert!(scripted >= 3 * 8, "{scripted} cells of users' locks");
    }
}
