//! `lockcheck`: which distributed lock can you trust, under which faults?
//!
//! This file only parses the command line and calls the library; see `lockcheck --help`.

use anyhow::Context;
use clap::{Parser, Subcommand};
use lockcheck_real::profile::{Profile, Shape};
use lockcheck_real::{RealError, Servers};
use lockcheck_sim::cell::{self, CellSearch, CellStats, CellVerdict};
use lockcheck_sim::explore::{ExploreOptions, FaultProfile, Shard};
use lockcheck_sim::matrix::{self, Budget, CellResult, MatrixEvent, MatrixOptions};
use lockcheck_sim::report::{replay, Report, RunWorld};
use lockcheck_sim::scenario::{Params, Persistence};
use lockcheck_sim::{run, Algorithm, Outcome, Scenario};
use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Exit code: nothing found, or replay identical.
const EXIT_OK: u8 = 0;
/// Exit code: a violation was found, or a replay diverged.
const EXIT_FOUND: u8 = 1;
/// Exit code: bad input (or an environment problem such as an unwritable directory, or a
/// server binary that is not installed).
const EXIT_USAGE: u8 = 2;
/// Exit code: interrupted by Ctrl-C (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

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
Exit codes: 0 = nothing found (or replay identical), 1 = violation found (or replay diverged), \
2 = bad input.",
    after_help = "Examples:\n  \
lockcheck explore --algorithm single-redis --faults pause\n  \
lockcheck replay reports/single-redis-pause-1a2b3c4d.json\n  \
lockcheck run scenario.json --report reports/\n  \
lockcheck matrix\n  \
lockcheck check expectations/known-results.toml\n  \
lockcheck real --algorithm single-redis --faults pause"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario file deterministically and print the verdict.
    ///
    /// The file is JSON: {"algorithm": "single-redis", "params": {...}, "clients": 2,
    /// "workload": {...}, "duration_ms": 60000, "seed": 7, "faults": [...]}. Keys not given take
    /// their defaults (see README.md); unknown keys are errors.
    Run {
        /// The scenario file.
        file: PathBuf,
        /// Write a report (JSON with the full history) into this directory.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
    },
    /// Search fault schedules for a violation, shrink it to a minimal one, write a report.
    Explore {
        /// The algorithm: single-redis, redlock, redis-reentrant, redis-fair, zk-sequential,
        /// zk-herd, zk-rwlock, mysql-row, mysql-unique, mysql-for-update-held.
        #[arg(long, value_name = "NAME")]
        algorithm: String,
        /// Fault profiles, comma-separated: none, pause, clock-jump, clock-drift,
        /// crash-restart, crash-delayed-restart, partition, failover (needs --replicas), all.
        #[arg(long, value_name = "F[,F...]")]
        faults: String,
        /// Cases to try before concluding nothing is found.
        #[arg(long, default_value_t = 500)]
        cases: u32,
        /// Seed of the search: the same seed finds the same minimal case.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Where to write the report. Failing cases are also kept in DIR/regressions/ and run
        /// first the next time.
        #[arg(long, value_name = "DIR", default_value = "reports")]
        out: PathBuf,
        /// Lease length in ms (Redis locks: default 10000; mysql-row: no lease unless given).
        #[arg(long, value_name = "MS")]
        ttl_ms: Option<u64>,
        /// Use fencing tokens, checked by the resource.
        #[arg(long)]
        fencing: bool,
        /// Server persistence: none, everysec, always (Redis default none; MySQL default always,
        /// i.e. innodb_flush_log_at_trx_commit=1, everysec for =2).
        #[arg(long, value_name = "P")]
        persistence: Option<String>,
        /// Asynchronous replicas of a single-server lock (the failover profile needs one).
        #[arg(long, value_name = "N", default_value_t = 0)]
        replicas: u32,
        /// After acquiring, WAIT for this many replicas (Redisson's WAIT).
        #[arg(long, value_name = "N", default_value_t = 0)]
        wait_replicas: u32,
        /// Number of servers (redlock: an odd number, default 5).
        #[arg(long, value_name = "N")]
        nodes: Option<u32>,
        /// Crashed servers stay down at least this long (crash-delayed-restart raises it to the TTL).
        #[arg(long, value_name = "MS", default_value_t = 0)]
        restart_delay_ms: u64,
        /// Largest clock drift clock-drift draws, as a fraction: 0.005 keeps every clock within
        /// half of Redlock's default drift factor.
        #[arg(long, value_name = "FRACTION", default_value_t = lockcheck_sim::explore::DEFAULT_MAX_DRIFT)]
        max_drift: f64,
        /// Longest partition the partition profile draws, in ms (default: twice the lease or
        /// session timeout). A ZooKeeper session outlives only partitions well inside its timeout.
        #[arg(long, value_name = "MS")]
        max_partition_ms: Option<u64>,
        /// ZooKeeper session timeout in ms (4000 to 40000).
        #[arg(long, value_name = "MS", default_value_t = 10_000)]
        session_timeout_ms: u64,
        /// ZooKeeper: treat a disconnected session as a lost lock (instead of suspended).
        #[arg(long)]
        suspended_is_lost: bool,
        /// MySQL: the server's wait_timeout in ms (idle connections are closed and their
        /// transactions rolled back; default 8 hours). Redis: WAIT's timeout (default 50).
        #[arg(long, value_name = "MS")]
        wait_timeout_ms: Option<u64>,
        /// MySQL: innodb_lock_wait_timeout in ms (default 50000).
        #[arg(long, value_name = "MS")]
        lock_wait_timeout_ms: Option<u64>,
        /// Count only safety violations (two holders, a lock freed under its holder), not
        /// deadlocks or order: search for what breaks mutual exclusion.
        #[arg(long)]
        safety_only: bool,
        /// Threads running cases at once [default: all cores]. The result is the same whatever
        /// the number: each case has its own seed and runtime, and the lowest failing case wins.
        #[arg(long, value_name = "J")]
        jobs: Option<usize>,
        /// Run only slice I of N of the case space (1-based: 1/2 and 2/2), e.g. one per CI job;
        /// the failing case of lowest index across the slices is the unsharded search's.
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
    },
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
lockcheck matrix --budget-seconds 30               # 30 s per cell; each cell records its cases\n  \
lockcheck matrix --shard 1/2 --out m1              # on machine 1 (machine 2: --shard 2/2 --out m2)\n  \
lockcheck merge m1 m2 --out reports                # the matrix of the unsharded run\n\n\
Exit codes: 0 = written, 2 = bad input (unknown algorithm or profile, --cases 0, both --cases \
and --budget-seconds, --shard with --budget-seconds).")]
    Matrix {
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
        /// Only these algorithms, comma-separated [default: all].
        #[arg(long, value_name = "A[,A...]")]
        algorithms: Option<String>,
        /// Only these fault profiles, comma-separated [default: all].
        #[arg(long, value_name = "F[,F...]")]
        faults: Option<String>,
    },
    /// Join the output directories of `lockcheck matrix --shard I/N` runs into one matrix.
    ///
    /// Per cell, the lowest failing case across the shards is the one the unsharded search finds
    /// (its report is copied); cases and simulated time add up. The result is byte for byte the
    /// matrix of one unsharded run with the same seed and --cases. Shards that do not fit
    /// together (another seed, budget or set of cells; a shard missing or given twice) are
    /// refused with exit code 2.
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
    /// Each [[expect]] entry names an algorithm, its params (the scenario file's names), fault
    /// profiles, a budget (cases) and the expected verdict, "unsafe" or "not-found". Exit 1 when
    /// an entry expected not-found is found unsafe (its report path is printed) or one expected
    /// unsafe is not found within its budget; 0 when every entry is as expected; 2 for a
    /// malformed file (the line is named). Failing cases are kept in DIR/regressions/ and run
    /// first the next time; one that still fails settles its entry at once.
    #[command(after_help = "Example:\n  \
lockcheck check expectations/known-results.toml\n\n\
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
(count only this kind, e.g. \"mutual_exclusion\").")]
    Check {
        /// The expectations file.
        file: PathBuf,
        /// Where to write reports of the violations found, and the regressions.
        #[arg(long, value_name = "DIR", default_value = "reports/check")]
        out: PathBuf,
        /// Entries searched at once [default: all cores]. Never changes a verdict.
        #[arg(long, value_name = "J")]
        jobs: Option<usize>,
    },
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
    /// ZooKeeper, the MySQL locks against MariaDB. Faults: pauses, crashes and restarts of clients
    /// and servers, partitions, clock jumps and drifts of clients and servers, message delay and
    /// loss (a loss on a TCP link is a retransmission's stall). A real run is not byte-replayable
    /// (the machine decides the interleaving); its scenario is, here and in the simulation
    /// (`lockcheck run FILE`).
    #[command(after_help = "Examples:\n  \
lockcheck real --algorithm single-redis --faults pause\n  \
lockcheck real --algorithm redlock --faults clock-jump --report reports/\n  \
lockcheck real --algorithm redlock --nodes 3 --clients 4\n  \
lockcheck real --algorithm single-redis --endpoints 127.0.0.1:6379\n  \
lockcheck real --algorithm zk-sequential --faults pause\n  \
lockcheck real --scenario scenario.json\n\n\
Exit codes: 0 = nothing found, 1 = violation found, 2 = bad input, a server missing \
(apt-get install redis-server / zookeeper / mariadb-server), a server that would not start or an endpoint that \
does not answer, 130 = interrupted (every server started was stopped).")]
    Real {
        /// The algorithm (any of `lockcheck explore --help`'s).
        #[arg(long, value_name = "NAME", required_unless_present = "scenario")]
        algorithm: Option<String>,
        /// The fault profile, one story each: `none` (clients contend, no fault); `pause` (the
        /// first holder is paused inside its critical section until its lease has surely ended,
        /// while the others wait); `partition` (ZooKeeper locks: the first holder is cut off as
        /// long, and keeps working); `clock-jump` (a server holding the first holder's key jumps
        /// 2 × TTL forward; Redlock: Kleppmann's story on 3 masters); `restart` (that server is
        /// killed and restarted empty at once; Redlock: seed 002's story).
        #[arg(
            long,
            value_name = "F",
            default_value = "none",
            conflicts_with = "scenario"
        )]
        faults: String,
        /// Run this scenario file (the `lockcheck run` format) instead of a profile.
        #[arg(long, value_name = "FILE")]
        scenario: Option<PathBuf>,
        /// Clients stop acquiring after this many ms [profile default: 30000].
        #[arg(long, value_name = "MS")]
        duration_ms: Option<u64>,
        /// Number of clients [profile default: 3].
        #[arg(long, value_name = "N")]
        clients: Option<u32>,
        /// Lease length in ms: the TTL, or a ZooKeeper lock's session timeout [profile default:
        /// 2000, ZooKeeper 4000 (two ticks, the shortest a server grants), short so that a run
        /// takes seconds].
        #[arg(long, value_name = "MS")]
        ttl_ms: Option<u64>,
        /// Number of servers (redlock: an odd number ≥ 3, default 5).
        #[arg(long, value_name = "N")]
        nodes: Option<u32>,
        /// Use servers you already run (containers included) instead of starting them:
        /// HOST:PORT, comma-separated, one per server in order (redlock: one per master).
        /// lockcheck only connects to them, so faults that need a server's process (crash,
        /// restart, server pause, server clock) are refused; client faults stay real. The lock
        /// uses the key `lock` (Redis).
        #[arg(long, value_name = "ADDRS", value_delimiter = ',')]
        endpoints: Option<Vec<String>>,
        /// Write a report (JSON with the full history, marked as a real run, and its scenario
        /// beside it) into this directory.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
    },
}

/// Bad input: every error ends the program with exit code 2 and its message.
fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::msg(message.into())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // madsim warns on every runtime after the first in a thread that std's HashMap
                // seeds are not deterministic; lockcheck uses no std HashMap in simulated code.
                .unwrap_or_else(|_| {
                    // The ZooKeeper client warns of every failed reconnection, which a real run
                    // with pauses and partitions causes on purpose.
                    tracing_subscriber::EnvFilter::new(
                        "warn,madsim::sim::rand=error,zookeeper_client=error",
                    )
                }),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("lockcheck: {e:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Run { file, report } => run_file(&file, report.as_deref()),
        Command::Explore {
            algorithm,
            faults,
            cases,
            seed,
            out,
            ttl_ms,
            fencing,
            persistence,
            nodes,
            restart_delay_ms,
            max_drift,
            replicas,
            wait_replicas,
            max_partition_ms,
            session_timeout_ms,
            suspended_is_lost,
            wait_timeout_ms,
            lock_wait_timeout_ms,
            safety_only,
            jobs,
            shard,
        } => {
            let algorithm = parse_algorithm(&algorithm)?;
            let profiles = FaultProfile::parse_list(&faults).map_err(usage)?;
            let persistence = match persistence.as_deref() {
                None => None,
                Some("none") => Some(Persistence::None),
                Some("everysec") => Some(Persistence::Everysec),
                Some("always") => Some(Persistence::Always),
                Some(other) => {
                    return Err(usage(format!(
                        "unknown persistence '{other}' (known: none, everysec, always)"
                    )))
                }
            };
            if max_partition_ms == Some(0) {
                return Err(usage("--max-partition-ms must be at least 1"));
            }
            if cases == 0 {
                return Err(usage("--cases must be at least 1"));
            }
            if !(0.0..1.0).contains(&max_drift) {
                return Err(usage(format!(
                    "--max-drift must be in [0, 1), got {max_drift}"
                )));
            }
            let params = Params {
                ttl_ms,
                fencing,
                persistence,
                nodes,
                restart_delay_ms,
                replicas,
                wait_replicas,
                session_timeout_ms,
                suspended_is_lost,
                wait_timeout_ms,
                lock_wait_timeout_ms,
                ..Params::default()
            };
            let mut check = Scenario::new(algorithm);
            check.params = params.clone();
            check.validate().map_err(|e| usage(e.to_string()))?;
            let jobs = parse_jobs(jobs)?;
            let shard = match shard {
                Some(text) => Shard::parse(&text).map_err(usage)?,
                None => Shard::default(),
            };
            let options = ExploreOptions {
                params,
                max_drift,
                max_partition_ms,
                safety_only,
                jobs,
                shard,
                ..ExploreOptions::new(algorithm, profiles, cases, seed)
            };
            explore_cmd(&options, &faults, &out)
        }
        Command::Matrix {
            cases,
            budget_seconds,
            seed,
            jobs,
            shard,
            out,
            algorithms,
            faults,
        } => {
            // clap refuses --cases together with --budget-seconds.
            let budget = match budget_seconds {
                Some(0) => return Err(usage("--budget-seconds must be at least 1")),
                Some(s) => Budget::Seconds(s),
                None if cases == 0 => return Err(usage("--cases must be at least 1")),
                None => Budget::Cases(cases),
            };
            let shard = shard
                .map(|text| Shard::parse(&text).map_err(usage))
                .transpose()?;
            if shard.is_some() && matches!(budget, Budget::Seconds(_)) {
                return Err(usage(
                    "--shard needs --cases: with a wall-time budget each machine runs a \
                     different number of cases, and the shards would not join into one search",
                ));
            }
            let algorithms = match algorithms {
                None => Algorithm::ALL.to_vec(),
                Some(list) => {
                    let mut out = Vec::new();
                    for name in list.split(',').map(str::trim) {
                        let a = parse_algorithm(name)?;
                        if !out.contains(&a) {
                            out.push(a);
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
                algorithms,
                profiles,
                budget,
                seed,
                jobs: parse_jobs(jobs)?,
                shard,
            };
            matrix_cmd(&options, &out)
        }
        Command::Merge { dirs, out } => merge_cmd(&dirs, &out),
        Command::Check { file, out, jobs } => check_cmd(&file, &out, parse_jobs(jobs)?),
        Command::Replay { report } => replay_cmd(&report),
        Command::Timeline { report } => timeline_cmd(&report),
        Command::Real {
            algorithm,
            faults,
            scenario,
            duration_ms,
            clients,
            ttl_ms,
            nodes,
            endpoints,
            report,
        } => {
            let servers = match endpoints {
                None => Servers::Launched,
                Some(list) => Servers::Endpoints(
                    list.iter()
                        .map(|e| resolve(e))
                        .collect::<anyhow::Result<_>>()?,
                ),
            };
            let scenario = match scenario {
                Some(file) => {
                    let mut s = read_scenario(&file)?;
                    if let Some(name) = algorithm.filter(|name| name != s.algorithm.name()) {
                        return Err(usage(format!(
                            "--algorithm {name} contradicts {}, which runs {}",
                            file.display(),
                            s.algorithm.name()
                        )));
                    }
                    s.duration_ms = duration_ms.unwrap_or(s.duration_ms);
                    s.clients = clients.unwrap_or(s.clients);
                    if let Some(ms) = ttl_ms {
                        lockcheck_real::profile::set_lease(&mut s, ms);
                    }
                    s.params.nodes = nodes.or(s.params.nodes);
                    s.validate().map_err(|e| usage(e.to_string()))?;
                    s
                }
                None => {
                    let algorithm = parse_algorithm(algorithm.as_deref().unwrap_or_default())?;
                    lockcheck_real::support::check_algorithm(algorithm)
                        .map_err(|e| usage(e.to_string()))?;
                    let profile = Profile::from_name(&faults).ok_or_else(|| {
                        let known: Vec<&str> = Profile::ALL.iter().map(|(_, n)| *n).collect();
                        usage(format!(
                            "unknown fault profile '{faults}' for real runs (known: {})",
                            known.join(", ")
                        ))
                    })?;
                    let defaults = Shape::for_algorithm(algorithm);
                    let shape = Shape {
                        clients: clients.unwrap_or(defaults.clients),
                        ttl_ms: ttl_ms.unwrap_or(defaults.ttl_ms),
                        duration_ms: duration_ms.unwrap_or(defaults.duration_ms),
                        nodes,
                        ..defaults
                    };
                    lockcheck_real::profile::scenario(algorithm, profile, &shape)
                        .map_err(|e| usage(e.to_string()))?
                }
            };
            real_cmd(&scenario, &servers, report.as_deref())
        }
    }
}

/// `--jobs`: at least 1; all cores when not given.
fn parse_jobs(jobs: Option<usize>) -> anyhow::Result<usize> {
    match jobs {
        Some(0) => Err(usage("--jobs must be at least 1")),
        Some(j) => Ok(j),
        None => Ok(std::thread::available_parallelism().map_or(1, usize::from)),
    }
}

fn parse_algorithm(name: &str) -> anyhow::Result<Algorithm> {
    Algorithm::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        usage(format!(
            "unknown algorithm '{name}' (known: {})",
            known.join(", ")
        ))
    })
}

/// `HOST:PORT` as one socket address (a name is resolved; its first address is taken).
fn resolve(endpoint: &str) -> anyhow::Result<SocketAddr> {
    endpoint
        .to_socket_addrs()
        .map_err(|e| {
            usage(format!(
                "--endpoints: '{endpoint}': {e} (expected HOST:PORT)"
            ))
        })?
        .next()
        .ok_or_else(|| usage(format!("--endpoints: '{endpoint}' resolves to no address")))
}

fn real_cmd(
    scenario: &Scenario,
    servers: &Servers,
    report_dir: Option<&Path>,
) -> anyhow::Result<u8> {
    lockcheck_real::preflight_on(scenario, servers).map_err(|e| usage(e.to_string()))?;
    let against = match servers {
        Servers::Launched => "servers lockcheck starts".to_string(),
        Servers::Endpoints(e) => e
            .iter()
            .map(SocketAddr::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    };
    println!(
        "real run: {} with {} client(s), {} {} ms, against {against}",
        scenario.algorithm.name(),
        scenario.clients,
        match scenario.algorithm {
            a if a.is_zookeeper() => "session timeout",
            Algorithm::MysqlForUpdateHeld => "wait_timeout",
            _ => "TTL",
        },
        scenario.algorithm.lease_ms(&scenario.params),
    );
    for fault in &scenario.faults {
        println!("  {}", fault.describe());
    }
    let real = match lockcheck_real::run_on(scenario, servers) {
        Ok(real) => real,
        Err(e @ RealError::Interrupted) => {
            eprintln!("lockcheck: {e}");
            return Ok(EXIT_INTERRUPTED);
        }
        Err(e) => return Err(usage(e.to_string())),
    };
    let outcome = &real.outcome;
    let mut report = Report::of_real_run(scenario, outcome);
    print_outcome(&report, outcome);
    if let Some(dir) = report_dir {
        let path = report.write(dir, &format!("real-{}", scenario.algorithm.name()))?;
        println!("report: {}", path.display());
        println!("timeline: {}", Report::timeline_path(&path).display());
        println!("rerun: {}", report.replay_command);
    }
    println!(
        "{} history entries in {:.1} s; {} server process(es) started and stopped",
        outcome.history.entries.len(),
        real.elapsed.as_secs_f64(),
        real.server_pids.len()
    );
    // One line: saved to a file, it reruns here (`lockcheck real --scenario FILE`) or in the
    // simulation (`lockcheck run FILE`); the run itself is not byte-replayable.
    println!(
        "scenario (a real run is not byte-replayable; its scenario is): {}",
        serde_json::to_string(scenario)?
    );
    Ok(if outcome.violated() {
        EXIT_FOUND
    } else {
        EXIT_OK
    })
}

/// The verdict of one run, for people: the summary, each violation and rejected stale access,
/// availability, and the wake-ups of a ZooKeeper lock.
fn print_outcome(report: &Report, outcome: &Outcome) {
    println!("{}", report.summary);
    for v in &outcome.violations {
        println!("  {:?}: {}", v.kind, v.story);
    }
    for s in &outcome.stale_accesses {
        println!(
            "  stale access rejected: {} with fence {:?} at {:.1} ms",
            s.client,
            s.fence,
            s.at_ns as f64 / 1e6
        );
    }
    let a = &outcome.availability;
    for (label, rate) in [
        ("all servers reachable", a.all_reachable),
        ("a minority unreachable", a.minority_unreachable),
        ("a majority unreachable", a.majority_unreachable),
    ] {
        if rate.attempts > 0 {
            println!(
                "  attempts with {label}: {} of {} acquired",
                rate.acquired, rate.attempts
            );
        }
    }
    let w = &outcome.wakeups;
    if !w.is_empty() {
        println!(
            "  wake-ups: {} release(s) woke {} waiter(s), {:.2} per release, at most {}",
            w.releases,
            w.wakeups,
            w.mean(),
            w.max_per_release
        );
    }
}

/// The scenario file at `file`; a usage error naming the file when it cannot be read or parsed.
fn read_scenario(file: &Path) -> anyhow::Result<Scenario> {
    let text =
        std::fs::read_to_string(file).map_err(|e| usage(format!("{}: {e}", file.display())))?;
    Scenario::from_json(&text).map_err(|e| usage(format!("{}: {e}", file.display())))
}

fn run_file(file: &Path, report_dir: Option<&Path>) -> anyhow::Result<u8> {
    let scenario = read_scenario(file)?;
    let outcome = run(&scenario);
    let mut report = Report::of_run(&scenario, &outcome);
    print_outcome(&report, &outcome);
    println!("history hash {}", outcome.digest);
    if let Some(dir) = report_dir {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        let path = report.write(dir, &stem)?;
        println!("report: {}", path.display());
        println!("timeline: {}", Report::timeline_path(&path).display());
    }
    Ok(if outcome.violated() {
        EXIT_FOUND
    } else {
        EXIT_OK
    })
}

/// A progress bar on stderr when it is a terminal, hidden otherwise (logs and pipes get only the
/// final lines).
fn progress_bar(len: u64, unit: &str) -> anyhow::Result<indicatif::ProgressBar> {
    let bar = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(len)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{bar:40}} {{pos}}/{{len}} {unit} {{per_sec}} {{elapsed_precise}} {{msg}}"
        ))
        .context("progress bar template")?,
    );
    Ok(bar)
}

/// Rates for people: the search's cases per second apart from the time spent shrinking. Each
/// cell's search time is its own: one thread's for `matrix` and `check` (`per_thread`), the wall
/// time of all threads for `explore`.
fn rates(stats: &[&CellStats], wall: Duration, threads: usize, per_thread: bool) -> String {
    let cases: u64 = stats.iter().map(|s| u64::from(s.cases)).sum();
    let search: f64 = stats.iter().map(|s| s.search.as_secs_f64()).sum();
    let shrink_runs: u64 = stats.iter().map(|s| u64::from(s.shrink_runs)).sum();
    let shrink: f64 = stats.iter().map(|s| s.shrink.as_secs_f64()).sum();
    let regressions: usize = stats.iter().map(|s| s.regressions).sum();
    let replayed = if regressions > 0 {
        format!(" (after {regressions} persisted failure(s) replayed first)")
    } else {
        String::new()
    };
    format!(
        "search: {cases} cases in {search:.1} s{replayed}, {:.0} cases/s{}; shrinking: \
         {shrink_runs} runs in {shrink:.1} s; {:.1} s wall on {threads} thread(s)",
        cases as f64 / search.max(1e-9),
        if per_thread { " per thread" } else { "" },
        wall.as_secs_f64()
    )
}

fn explore_cmd(options: &ExploreOptions, faults: &str, out: &Path) -> anyhow::Result<u8> {
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
        CellVerdict::NotFound {
            cases,
            simulated_ns,
        } => {
            println!(
                "NOT FOUND: {name} × [{faults}]: no violation in {cases} cases ({:.0} simulated \
                 seconds) with seed {}",
                *simulated_ns as f64 / 1e9,
                options.seed,
            );
            EXIT_OK
        }
        CellVerdict::Unsafe(found) => {
            let report = &found.report;
            match found.case_index {
                Some(k) => println!(
                    "UNSAFE: {name} × [{faults}]: found at case {k} after {} cases, shrunk in {} runs",
                    found.cases,
                    searched.stats.shrink_runs
                ),
                None => println!(
                    "UNSAFE: {name} × [{faults}]: a persisted failure ({}) still fails; the \
                     search did not reach it in {} cases",
                    lockcheck_sim::regression::path(out, &cell.id).display(),
                    found.cases
                ),
            }
            println!("  {}", report.summary);
            println!("  minimal schedule:");
            for line in &report.schedule {
                println!("    {line}");
            }
            println!("  report: {}", found.path.display());
            println!(
                "  timeline: {}",
                Report::timeline_path(&found.path).display()
            );
            println!("  replay: {}", report.replay_command);
            EXIT_FOUND
        }
    };
    println!(
        "{}",
        rates(&[&searched.stats], started.elapsed(), options.jobs, false)
    );
    Ok(code)
}

fn matrix_cmd(options: &MatrixOptions, out: &Path) -> anyhow::Result<u8> {
    let cells = matrix::plan(&options.algorithms, &options.profiles).len();
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
            if matches!(result, CellResult::Unsafe { .. }) {
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
        if let CellResult::Unsafe { story, report, .. } = &c.result {
            println!("UNSAFE {}: {story}", c.id);
            println!("  report: {}", out.join(report).display());
        }
    }
    println!(
        "matrix: {} cells: {} UNSAFE, {} not found, {} skipped; {} and {}",
        m.cells.len(),
        count(|r| matches!(r, CellResult::Unsafe { .. })),
        count(|r| matches!(r, CellResult::NotFound { .. })),
        count(|r| matches!(r, CellResult::Skipped { .. })),
        out.join(matrix::MARKDOWN_FILE).display(),
        out.join(matrix::JSON_FILE).display(),
    );
    let stats: Vec<&CellStats> = run.stats.values().collect();
    println!("{}", rates(&stats, started.elapsed(), options.jobs, true));
    Ok(EXIT_OK)
}

fn merge_cmd(dirs: &[PathBuf], out: &Path) -> anyhow::Result<u8> {
    let m = matrix::merge(dirs, out).map_err(|e| usage(e.to_string()))?;
    let unsafe_cells = m
        .cells
        .iter()
        .filter(|c| matches!(c.result, CellResult::Unsafe { .. }))
        .count();
    println!(
        "merged {} shard(s): {} cells, {unsafe_cells} UNSAFE; {} and {}",
        dirs.len(),
        m.cells.len(),
        out.join(matrix::MARKDOWN_FILE).display(),
        out.join(matrix::JSON_FILE).display(),
    );
    Ok(EXIT_OK)
}

fn check_cmd(file: &Path, out: &Path, jobs: usize) -> anyhow::Result<u8> {
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
            settle_on_regression: entry.expect == lockcheck_sim::expectations::Expected::NotFound,
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
            lockcheck_sim::expectations::Expected::Unsafe => "UNSAFE",
            lockcheck_sim::expectations::Expected::NotFound => "not found",
        };
        let settled = if searched.stats.regression_failed && searched.stats.cases == 0 {
            " (a persisted failure still fails)"
        } else {
            ""
        };
        let verdict = match &searched.verdict {
            CellVerdict::Unsafe(u) => match u.case_index {
                Some(k) => format!("UNSAFE at case {k} ({} cases)", u.cases),
                None => format!("UNSAFE{settled}"),
            },
            CellVerdict::NotFound {
                cases,
                simulated_ns,
            } => format!(
                "not found in {cases} cases ({:.1} simulated hours)",
                *simulated_ns as f64 / 3.6e12
            ),
        };
        if ok {
            println!("ok    {} ({at}): {verdict}", entry.name);
        } else {
            failed += 1;
            println!(
                "FAIL  {} ({at}): expected {expected}, got {verdict}",
                entry.name
            );
            if let Some(about) = &entry.about {
                println!("      expected because: {about}");
            }
            match &searched.verdict {
                CellVerdict::Unsafe(u) => {
                    println!("      {}", u.story);
                    println!("      report: {}", u.path.display());
                }
                CellVerdict::NotFound { .. } => println!(
                    "      the known violation was not found within the budget: a change lost \
                     it, or the entry needs more cases or other params"
                ),
            }
        }
        stats.push(searched.stats);
    }
    let refs: Vec<&CellStats> = stats.iter().collect();
    println!(
        "check: {} entries, {} as expected, {failed} not; {}",
        entries.len(),
        entries.len() - failed,
        rates(&refs, started.elapsed(), jobs, true)
    );
    Ok(if failed > 0 { EXIT_FOUND } else { EXIT_OK })
}

/// (Re)writes the HTML timeline of the report at `path`, beside it.
fn timeline_cmd(path: &Path) -> anyhow::Result<u8> {
    let report = Report::read(path).map_err(|e| usage(e.to_string()))?;
    let html = report
        .write_timeline(path)
        .map_err(|e| usage(e.to_string()))?;
    println!("timeline: {}", html.display());
    Ok(EXIT_OK)
}

fn replay_cmd(path: &Path) -> anyhow::Result<u8> {
    let report = Report::read(path).map_err(|e| usage(e.to_string()))?;
    if report.world == RunWorld::Real {
        return Err(usage(format!(
            "{}: a run against real servers is not byte-replayable (the machine decided its \
             interleaving); rerun its scenario: {}",
            path.display(),
            report.replay_command
        )));
    }
    let replayed = replay(&report);
    if replayed.identical() {
        println!(
            "identical: {} entries, history hash {} ({})",
            replayed.outcome.history.entries.len(),
            replayed.outcome.digest,
            report.summary
        );
        Ok(EXIT_OK)
    } else {
        let at = replayed.first_difference.unwrap_or(0);
        println!(
            "DIVERGED at history entry {at}: report hash {}, replay hash {}",
            report.history_hash, replayed.outcome.digest
        );
        if let Some(e) = report.history.entries.get(at) {
            println!("  report: {}", serde_json::to_string(e)?);
        }
        if let Some(e) = replayed.outcome.history.entries.get(at) {
            println!("  replay: {}", serde_json::to_string(e)?);
        }
        Ok(EXIT_FOUND)
    }
}
