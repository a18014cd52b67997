//! The command line: what `lockcheck` accepts (its clap definitions), the exit codes, and what
//! every verb shares. Each verb lives in a module of its own, which turns its arguments into the
//! library's options and prints what the library found.

/// `println!` for the verdicts and paths the verbs print: a closed standard output (`lockcheck run
/// F | head -1`) is not an error of the run. Printing stops quietly; the work goes on (a report is
/// still written) and the exit code is the verdict's. Other write errors are ignored the same
/// way, since there is nowhere left to say them. What would act on a terminal (an escape
/// sequence, a carriage return in a name read from a file) is printed escaped
/// ([`lockcheck_core::input::terminal_text`]).
macro_rules! say {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!($($arg)*);
        let _ = writeln!(
            std::io::stdout(),
            "{}",
            lockcheck_core::input::terminal_text(&line)
        );
    }};
}

pub mod check;
pub mod check_accept;
pub mod check_format;
pub mod differential;
pub mod explore;
pub mod matrix;
pub mod params;
pub mod progress;
pub mod real;
pub mod real_search;
pub mod run;

use clap::{Parser, Subcommand};
use lockcheck_core::backend::BackendExt;
use lockcheck_core::Algorithm;
use std::path::PathBuf;

/// Where `explore` and `real --cases` write by default: a folder git ignores, so that a search
/// run from a checkout leaves it clean. `reports/` itself holds the reference run that
/// `lockcheck matrix` regenerates and that is committed.
pub const RUNS_DIR: &str = "reports/runs";

/// Exit code: nothing found, or replay identical.
pub const EXIT_OK: u8 = 0;
/// Exit code: a safety violation was found (the headline says UNSAFE), or a replay diverged.
/// A deadlock (DEADLOCK) exits with 3, an order finding (ORDER) with 4 and a stuck waiter
/// (STUCK) with 5: see
/// [`lockcheck_core::checker::Severity::exit_code`].
pub const EXIT_FOUND: u8 = 1;
/// Exit code: bad input (or an environment problem such as an unwritable directory, or a
/// server binary that is not installed).
pub const EXIT_USAGE: u8 = 2;

/// The exit code of a verb whose verdict (exit `code`) was printed, when some of its files could
/// not be written (`unwritten`: each failure, said here after the verdict): 2, so that the
/// missing files do not pass unnoticed; the verdict, UNSAFE included, is on standard output
/// all the same. `code` when everything was written.
pub fn after_writes(code: u8, unwritten: &[String]) -> u8 {
    if unwritten.is_empty() {
        return code;
    }
    for e in unwritten {
        eprintln!(
            "lockcheck: not written: {}",
            lockcheck_core::input::terminal_text(e)
        );
    }
    eprintln!(
        "lockcheck: the verdict above stands; the files named were not written (exit {EXIT_USAGE})"
    );
    EXIT_USAGE
}

/// The command line.
#[derive(Parser)]
#[command(
    name = "lockcheck",
    version,
    about = "Find out which distributed lock you can trust, under which faults.",
    long_about = "lockcheck runs lock algorithms (written once) in a deterministic simulation with \
injected faults: process pauses, clock jumps and drift, crashes and restarts, partitions. It checks \
that no two clients were ever inside the critical section at once, and turns every violation into a \
report you can replay byte for byte. `lockcheck real` runs the same algorithm code against real \
servers, with real faults.\n\n\
Exit codes: 0 = nothing found (or replay identical), 1 = UNSAFE: a safety violation (two holders, \
a lock freed under its holder; or a replay diverged), 2 = bad input, 3 = DEADLOCK: the lock never \
came free again after the faults, 4 = ORDER: a fair or sequential lock passed a waiter over, \
5 = STUCK: a waiter waited on while the lock was free and reachable (a lost wake-up). A run with \
several findings exits with its worst (UNSAFE, DEADLOCK, STUCK, ORDER).",
    after_help = "Examples:\n  \
lockcheck explore --algorithm single-redis --faults pause\n  \
lockcheck replay reports/single-redis-pause-1a2b3c4d.json\n  \
lockcheck run scenario.json --report reports/\n  \
lockcheck matrix\n  \
lockcheck check expectations/known-results.toml\n  \
lockcheck real --algorithm single-redis --faults pause"
)]
pub struct Cli {
    /// The verb and its arguments.
    #[command(subcommand)]
    pub command: Command,
}

/// A verb and its arguments.
#[derive(Subcommand)]
pub enum Command {
    /// Run one scenario file deterministically and print the verdict.
    ///
    /// The file is JSON: {"algorithm": "single-redis", "params": {...}, "clients": 2,
    /// "workload": {...}, "duration_ms": 60000, "seed": 7, "faults": [...]}. Keys not given take
    /// their defaults (see docs/scenarios.md); unknown keys are errors.
    Run {
        /// The scenario file.
        file: PathBuf,
        /// Write a report (JSON with the full history) into this directory.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
        /// redis-script: run the Lua scripts of this file (see `explore --help`) instead of
        /// those the scenario embeds.
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
        /// Model this version range of the algorithm's library instead of the scenario's
        /// `params.variant` (see `explore --help`, --algorithm).
        #[arg(long, value_name = "NAME")]
        variant: Option<String>,
    },
    /// Search fault schedules for a violation, shrink it to a minimal one, write a report.
    Explore(Box<explore::ExploreArgs>),
    /// Every algorithm (with and without fencing where it has a token) × every fault profile.
    ///
    /// Each cell is one search (counting safety violations only: two holders at the resource, a
    /// lock freed under its holder). A cell is UNSAFE, with its minimal counterexample's report
    /// and the story in one line, or "not found" with the cases it ran and the simulated time
    /// they covered. Writes DIR/matrix.md and DIR/matrix.json, each counterexample's report, and
    /// DIR/regressions/ (failing cases, run first the next time). The same command writes the
    /// same files whatever --jobs; shards joined by `lockcheck merge` write them too.
    /// Exits 0 when the matrix is written, whatever it found (`lockcheck check` is the gate).
    #[command(after_help = "Examples:\n  \
lockcheck matrix                                   # every cell, the default budget, into reports/\n  \
lockcheck matrix --cases 200 --out /tmp/m          # a quicker look\n  \
lockcheck matrix --algorithms redlock,zk-sequential --faults pause,clock-jump\n  \
lockcheck matrix --algorithms single-redis,redis-script:my-lock.toml --out ci/  # your lock beside ours\n  \
lockcheck matrix --budget-seconds 30               # 30 s per cell; each cell records its cases\n  \
lockcheck matrix --shard 1/2 --out m1              # on machine 1 (machine 2: --shard 2/2 --out m2)\n  \
lockcheck merge m1 m2 --out reports                # the matrix of the unsharded run\n\n\
Exit codes: 0 = written, 2 = bad input (unknown algorithm or profile, --cases 0, both --cases \
and --budget-seconds, --shard with --budget-seconds).")]
    Matrix(matrix::MatrixArgs),
    /// Join the output directories of `lockcheck matrix --shard I/N` runs into one matrix.
    ///
    /// Per cell, the lowest failing case across the shards is the one the unsharded search finds
    /// (its report is copied); cases and simulated time add up. The result is byte for byte the
    /// matrix of one unsharded run with the same seed and --cases. Every shard's persisted
    /// failures (DIR/regressions/) are kept in the merged directory, to be replayed first the
    /// next time. Shards that do not fit together (another seed, budget or set of cells; a shard
    /// missing or given twice; a cell whose cases are not its shard's) are refused with exit
    /// code 2.
    #[command(after_help = "Example:\n  \
lockcheck matrix --shard 1/3 --out m1   # on three machines, 1/3, 2/3, 3/3\n  \
lockcheck merge m1 m2 m3 --out reports")]
    Merge {
        /// The shards' output directories, every shard exactly once.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Where to write the merged matrix and its reports.
        #[arg(long, value_name = "DIR", default_value = "reports")]
        out: PathBuf,
    },
    /// Check searches against the verdicts they must reach (a TOML file of expectations).
    ///
    /// Each `[[expect]]` entry names an algorithm, its params (the scenario file's names), fault
    /// profiles, a budget (cases) and the expected verdict, "unsafe" or "not-found". Exit 1 when
    /// an entry expected not-found is found unsafe (its report and timeline paths are printed) or
    /// one expected unsafe is not found within its budget; 0 when every entry is as expected; 2
    /// for a malformed file (the line is named) or bad arguments. Failing cases are kept in
    /// DIR/regressions/ and run first the next time; one that still fails settles its entry at
    /// once.
    #[command(after_help = "Examples:\n  \
lockcheck check expectations/known-results.toml\n  \
lockcheck check ours.toml --format junit > lockcheck.xml      # for a CI's test report\n  \
lockcheck check ours.toml --format github                     # annotations in GitHub Actions\n  \
lockcheck check ours.toml --only our-lock-pause,our-lock-crash\n  \
lockcheck check ours.toml --accept > accepted.toml            # what the changed entries would say\n\n\
An entry:\n  \
[[expect]]\n  \
name = \"single-redis-pause\"\n  \
about = \"holder pause longer than the TTL\"\n  \
algorithm = \"single-redis\"\n  \
faults = [\"pause\"]\n  \
params = { ttl_ms = 10000 }\n  \
cases = 300\n  \
expect = \"unsafe\"\n\n\
Optional: seed, max_drift, max_partition_ms, safety_only (default true), violation \
(count only this kind: mutual_exclusion, foreign_release, foreign_extend, freed_while_held, \
deadlock, stuck, fifo_order), careful (\"always\": every client checks its lock before each \
access; \"half\": half the cases do; \"never\", the default).\n\n\
Formats (--format): text (the default: an ok or FAIL line per entry, a FAIL's story, report and \
timeline under it, then a summary); json (one document: per entry its verdict, the violation \
kinds counted, report and timeline paths, and the totals); junit (JUnit XML, one testcase per \
entry, a failure per entry not as expected); github (GitHub Actions: an ::error annotation at \
the entry's line per entry not as expected, ok lines, the summary). Only the format is written \
to standard output; a progress bar (on a terminal) and errors go to standard error.\n\n\
Exit codes: 0 = every entry as expected, 1 = some not, 2 = bad input (a malformed file, an \
unknown --only name, --accept with --format).")]
    Check(check::CheckArgs),
    /// Rerun a report and confirm that it yields the identical history.
    Replay {
        /// The report (JSON) written by `run --report` or `explore`.
        report: PathBuf,
    },
    /// Write the HTML timeline of a report beside it (REPORT.html), e.g. for a report written
    /// before lockcheck drew timelines. `run --report`, `explore` and `real --report` write it
    /// themselves.
    Timeline {
        /// The report (JSON).
        report: PathBuf,
    },
    /// Run the same algorithm code against real servers, with real faults.
    ///
    /// lockcheck starts the servers itself (redis-server from PATH, ZooKeeper from Debian's jars,
    /// on 127.0.0.1 ports, each in a temp dir), or connects to yours (--endpoints), runs the
    /// clients and the protected resource in this process on real time, with every client
    /// reaching every server through a TCP proxy of its own, carries out the faults for real (a
    /// client pause freezes the client and its network; a server pause is SIGSTOP/SIGCONT; a
    /// crash is kill -9; a restart starts the server again on its port and directory; a
    /// partition blackholes the proxies across it; a server's clock is moved by a small
    /// LD_PRELOAD library lockcheck compiles with cc), checks the history with the simulator's
    /// checker, and stops every server it started, also on Ctrl-C.
    ///
    /// Every algorithm runs: the Redis locks against redis-server, the ZooKeeper locks against
    /// ZooKeeper, the MySQL locks against MariaDB, etcd-mutex against etcd (whose clocks real
    /// mode cannot move: clock faults on it are refused). Faults: pauses, crashes and restarts
    /// of clients and servers, partitions, clock jumps and drifts of clients and servers,
    /// message delay and loss (a loss on a TCP link is a retransmission's stall). A real run is not byte-replayable
    /// (the machine decides the interleaving); its scenario is, here and in the simulation
    /// (`lockcheck run FILE`).
    #[command(after_help = "Examples:\n  \
lockcheck real --algorithm single-redis --faults pause\n  \
lockcheck real --algorithm redlock --faults clock-jump --report reports/\n  \
lockcheck real --algorithm redlock --nodes 3 --clients 4\n  \
lockcheck real --algorithm single-redis --endpoints 127.0.0.1:6379\n  \
lockcheck real --algorithm zk-sequential --faults pause\n  \
lockcheck real --scenario scenario.json\n\n\
Exit codes: 0 = nothing found, 1 = UNSAFE, 3 = DEADLOCK, 4 = ORDER, 5 = STUCK, 2 = bad input, a server missing \
(apt-get install redis-server / zookeeper / mariadb-server), a server that would not start or an endpoint that \
does not answer, 130 / 143 = interrupted by SIGINT (Ctrl-C) / SIGTERM (every server started was stopped \
and its directory removed).")]
    Real(Box<real::RealArgs>),
    /// Real servers judge the models: run the same drawn stories in the simulation and against
    /// real servers, and find where the two worlds disagree.
    ///
    /// The stories are `explore`'s (story k is explore's case k for the same seed), kept to what
    /// real mode can carry out, with every fault span (pause, partition, delay, clock step) at
    /// least --margin-ms away from the thresholds the verdict turns on (the lease, the lease plus
    /// the server's check interval, a ZooKeeper client's disconnect, syncLimit, a renewal
    /// interval), since a real machine cannot reproduce a schedule that hinges on milliseconds.
    /// Half of the drawn clients check their lock before each access, and every client but
    /// client-0 is held back 200 ms at the start (so the first holder is the same in both
    /// worlds). Each story runs once in
    /// the simulation and --repeat times against fresh real servers, and is classed: agree; SIM
    /// SAFE, REAL UNSAFE (a false "not found", listed first); SIM UNSAFE, REAL SAFE; or
    /// INCONCLUSIVE (the real runs split). Every disagreement gets a folder in --out with the
    /// scenario, both worlds' reports, compare.html (the timelines side by side under a
    /// one-screen summary) and the commands that rerun each world, and is shrunk to a smaller
    /// story that still disagrees within --shrink-runs real runs.
    #[command(after_help = "Examples:\n  \
lockcheck differential --algorithm single-redis --faults pause --stories 10\n  \
lockcheck differential --algorithm zk-sequential --nodes 3 --faults partition --stories 20\n  \
lockcheck differential --algorithm etcd-mutex --faults pause --lease-ttl-s 3\n  \
lockcheck differential --scenario reports/differential/case-4-sim-safe-real-unsafe/scenario.json\n\n\
Exit codes: 0 = no story the simulation finds safe was unsafe in all its real runs (other \
disagreements are listed), 1 = at least one was, 2 = bad input (an unknown algorithm or profile, \
a topology or fault real mode cannot carry out, a server not installed: refused before any \
server starts), 130 / 143 = interrupted (every server started was stopped).")]
    Differential(Box<differential::DifferentialArgs>),
}

/// Bad input: every error ends the program with exit code 2 and its message.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::msg(message.into())
}

/// `--jobs`: at least 1; all cores when not given.
pub fn parse_jobs(jobs: Option<usize>) -> anyhow::Result<usize> {
    use lockcheck_core::limits;
    match jobs {
        Some(j) => limits::within("--jobs", j, 1, limits::MAX_JOBS)
            .map(|()| j)
            .map_err(usage),
        None => Ok(std::thread::available_parallelism().map_or(1, usize::from)),
    }
}

/// `--algorithm`'s long help: every registered algorithm with its one-line summary and, under
/// it, the library versions it can model (`--variant`), from the registry, so that a new
/// algorithm is listed without touching the CLI.
pub fn algorithm_help() -> String {
    let width = Algorithm::ALL
        .iter()
        .map(|a| a.name().len())
        .max()
        .unwrap_or(0);
    let mut help = String::from("The algorithm, one of:");
    for a in Algorithm::ALL {
        let d = a.description();
        help.push_str(&format!(
            "\n  {:width$}  {} [{}]",
            d.name,
            d.summary,
            d.backend.name()
        ));
        // Its library's versions (--variant), under it: name and range, then what differs and
        // the source files followed, wrapped so that the list stays readable.
        if d.variants.is_empty() {
            continue;
        }
        let indent = " ".repeat(width + 4);
        help.push_str(&format!(
            "\n{indent}variants (--variant NAME; the first is the default):"
        ));
        let name_width = d.variants.iter().map(|v| v.name.len()).max().unwrap_or(0);
        let text_indent = format!("{indent}  {:name_width$}  ", "");
        for v in d.variants {
            help.push_str(&format!(
                "\n{indent}  {:name_width$}  {}",
                v.name, v.versions
            ));
            for line in wrap(v.about, 64).chain(wrap(&format!("follows {}", v.follows), 64)) {
                help.push_str(&format!("\n{text_indent}{line}"));
            }
        }
    }
    help
}

/// `text` in lines of at most `width` characters, broken between words (a longer word stands
/// alone on its line).
fn wrap(text: &str, width: usize) -> impl Iterator<Item = String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.into_iter()
}

/// Parses `--violation`.
pub fn parse_violation_kind(name: &str) -> anyhow::Result<lockcheck_core::checker::ViolationKind> {
    use lockcheck_core::checker::ViolationKind;
    ViolationKind::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = ViolationKind::ALL.iter().map(|k| k.name()).collect();
        usage(format!(
            "unknown violation kind '{}' (known: {})",
            lockcheck_core::input::clip(name),
            known.join(", ")
        ))
    })
}

/// Parses `--algorithm`.
pub fn parse_algorithm(name: &str) -> anyhow::Result<Algorithm> {
    Algorithm::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        usage(format!(
            "unknown algorithm '{}' (known: {})",
            lockcheck_core::input::clip(name),
            known.join(", ")
        ))
    })
}
