//! Simulation benchmarks (#8): runs per second of each reference scenario, simulated time per
//! wall second, time to detect and to shrink each known-unsafe cell, and search scaling with
//! `--jobs`. Not a test: it measures, prints a table and writes `target/bench/simulation.json`.
//!
//! ```sh
//! cargo bench -p lockcheck-sim --bench simulation
//! ```
//!
//! `LOCKCHECK_BENCH_SEEDS` (default 20) sets how many exploration seeds the time-to-detect
//! figures take; `LOCKCHECK_BENCH_SECONDS` (default 3) how long each reference scenario runs;
//! `LOCKCHECK_BENCH_IDLE_RUNS` (default 20) how many runs each idle-time figure takes.
//! Wall times depend on the machine and its load: the ratios (jobs 2 ÷ jobs 1) are measured side
//! by side in one run, so they compare like with like.

use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{
    Algorithm, Fault, MysqlParams, Params, Persistence, RedisParams, Scenario,
};
use lockcheck_core::topology::Role;
use lockcheck_core::verdict::Coverage;
use lockcheck_search::explore::{explore, Exploration, ExploreOptions};
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The allocator the `lockcheck` binary uses, so that the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The issue's reference scenarios: no faults, default workload.
fn reference(algorithm: Algorithm, clients: u32, nodes: Option<u32>) -> Scenario {
    let mut s = Scenario::new(algorithm);
    s.clients = clients;
    s.duration_ms = 10_000;
    s.params.nodes = nodes;
    s
}

/// Runs `scenario` with seeds 0, 1, … for `budget` of wall time (at least 10 runs): runs per
/// second and simulated seconds per wall second.
fn throughput(scenario: &Scenario, budget: Duration) -> (f64, f64, u64) {
    let start = Instant::now();
    let mut runs = 0u64;
    let mut simulated_ns = 0u64;
    while runs < 10 || start.elapsed() < budget {
        let mut s = scenario.clone();
        s.seed = runs;
        let outcome = lockcheck_sim::run(&s);
        simulated_ns += outcome.history.entries.last().map_or(0, |e| e.true_ns);
        runs += 1;
    }
    let wall = start.elapsed().as_secs_f64();
    (runs as f64 / wall, simulated_ns as f64 / 1e9 / wall, runs)
}

/// A known-unsafe cell of the design's table: what `explore` searches.
struct Cell {
    name: &'static str,
    options: ExploreOptions,
}

fn cell(name: &'static str, algorithm: Algorithm, profile: FaultProfile, params: Params) -> Cell {
    Cell {
        name,
        options: ExploreOptions {
            params,
            ..ExploreOptions::new(algorithm, vec![profile], 5_000, 1)
        },
    }
}

fn known_unsafe() -> Vec<Cell> {
    let none = Params {
        persistence: Some(Persistence::None),
        ..Params::default()
    };
    vec![
        cell(
            "single-redis × pause",
            Algorithm::SingleRedis,
            FaultProfile::Pause,
            Params::default(),
        ),
        cell(
            "single-redis × crash-restart (no persistence)",
            Algorithm::SingleRedis,
            FaultProfile::CrashRestart,
            none.clone(),
        ),
        cell(
            "single-redis + replica × failover",
            Algorithm::SingleRedis,
            FaultProfile::Failover,
            Params {
                redis: RedisParams {
                    replicas: 1,
                    ..RedisParams::default()
                },
                ..Params::default()
            },
        ),
        cell(
            "redlock × clock-jump",
            Algorithm::Redlock,
            FaultProfile::ClockJump,
            Params::default(),
        ),
        cell(
            "redlock × crash-restart (no persistence)",
            Algorithm::Redlock,
            FaultProfile::CrashRestart,
            none,
        ),
        cell(
            "redlock × pause",
            Algorithm::Redlock,
            FaultProfile::Pause,
            Params::default(),
        ),
        cell(
            "zk-sequential × pause",
            Algorithm::ZkSequential,
            FaultProfile::Pause,
            Params::default(),
        ),
        // The server's default wait_timeout is 8 hours; the design's story is told with a short
        // one, as the simulation's tests do.
        cell(
            "mysql-for-update-held × pause (wait_timeout 10 s)",
            Algorithm::MysqlForUpdateHeld,
            FaultProfile::Pause,
            Params {
                mysql: MysqlParams {
                    wait_timeout_ms: Some(10_000),
                    ..MysqlParams::default()
                },
                ..Params::default()
            },
        ),
    ]
}

/// Median and worst of `xs` (seconds).
fn median_max(xs: &mut [f64]) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    let median = if xs.is_empty() {
        f64::NAN
    } else if xs.len() % 2 == 1 {
        xs[xs.len() / 2]
    } else {
        (xs[xs.len() / 2 - 1] + xs[xs.len() / 2]) / 2.0
    };
    (median, xs.last().copied().unwrap_or(f64::NAN))
}

/// Explores `cell` with seeds 1..=`seeds`: per seed, the wall time to the first violation
/// (the search, up to the last case it ran) and the time to shrink it.
fn detection(cell: &Cell, seeds: u64) -> Value {
    let (mut detect, mut shrink, mut cases) = (Vec::new(), Vec::new(), Vec::new());
    let mut missed = 0;
    for seed in 1..=seeds {
        let options = ExploreOptions {
            seed,
            ..cell.options.clone()
        };
        let start = Instant::now();
        // The last case's completion ends the search; what follows is shrinking.
        let searched = Mutex::new(Duration::ZERO);
        let progress = |_done: u32| *searched.lock().unwrap() = start.elapsed();
        let found = explore(&options, &progress).expect("the cells are valid");
        let total = start.elapsed();
        match found {
            Exploration::Found(f) => {
                let searched = *searched.lock().unwrap();
                detect.push(searched.as_secs_f64());
                shrink.push((total - searched).as_secs_f64());
                cases.push(f.cases as f64);
            }
            Exploration::NotFound(Coverage { .. }) => missed += 1,
        }
    }
    let (detect_median, detect_worst) = median_max(&mut detect);
    let (shrink_median, shrink_worst) = median_max(&mut shrink);
    let (cases_median, cases_worst) = median_max(&mut cases);
    json!({
        "cell": cell.name,
        "seeds": seeds,
        "not_found": missed,
        "detect_s": { "median": detect_median, "worst": detect_worst },
        "shrink_s": { "median": shrink_median, "worst": shrink_worst },
        "cases_to_detect": { "median": cases_median, "worst": cases_worst },
    })
}

/// Cases per second of a search that runs every case, with `jobs` threads: Redlock without
/// faults, which must find nothing. (A search that finds something stops early and shrinks on
/// one thread, which measures the shrink, not the scaling: this benchmark used `clock-drift`,
/// whose seed 9 finds a violation at case 42 on the current simulator, and reported 1.2x.)
fn search_rate(jobs: usize) -> f64 {
    let options = ExploreOptions {
        jobs,
        ..ExploreOptions::new(Algorithm::Redlock, vec![FaultProfile::None], 400, 9)
    };
    let start = Instant::now();
    let result = explore(&options, &|_| {}).expect("valid");
    match result {
        Exploration::NotFound(Coverage { cases, .. }) => {
            cases as f64 / start.elapsed().as_secs_f64()
        }
        Exploration::Found(f) => panic!(
            "Redlock without faults failed at case {}: a bug, not a benchmark result",
            f.case_index
        ),
    }
}

/// A line of `/proc/self/status` in KB (`VmHWM`: the peak resident set so far; `VmRSS`: now).
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Peak memory against cases: a search that finds nothing must not keep what its cases used.
/// Redlock without faults on one thread, 400 cases and then 4,000 more in the same process; the
/// peak after both must stay near the peak after the first (measured first, before the other
/// benchmarks raise the peak).
fn memory() -> Value {
    let mut rows = Vec::new();
    for cases in [400, 4000] {
        let options = ExploreOptions {
            jobs: 1,
            ..ExploreOptions::new(Algorithm::Redlock, vec![FaultProfile::None], cases, 3)
        };
        let result = explore(&options, &|_| {}).expect("valid");
        assert!(
            matches!(result, Exploration::NotFound(Coverage { .. })),
            "Redlock without faults failed: a bug, not a benchmark result"
        );
        let (peak, now) = (status_kb("VmHWM"), status_kb("VmRSS"));
        println!("| after {cases} more cases | {peak} | {now} |");
        rows.push(json!({ "cases": cases, "peak_kb": peak, "rss_kb": now }));
    }
    let ratio = rows[1]["peak_kb"].as_f64().unwrap() / rows[0]["peak_kb"].as_f64().unwrap();
    println!("| peak ratio (4,400 cases / 400) | {ratio:.2}× | |");
    json!({ "searches": rows, "peak_ratio": ratio })
}

/// Idle simulated time (#15 item 2): an hour in which nothing happens must cost about as much as
/// the run around it. Per model, the wall time per run of the reference scenario (3 clients, no
/// faults), of the same with an hour of thinking between critical sections (servers up, clients
/// connected), and of the same with every server paused for an hour (clients back off), from
/// `runs` seeds each, measured one right after the other; with the history entries per run.
fn idle(runs: u64) -> Value {
    const HOUR_MS: u64 = 3_600_000;
    let mut rows = Vec::new();
    for (name, algorithm, nodes) in [
        ("single-redis", Algorithm::SingleRedis, None),
        ("redlock", Algorithm::Redlock, Some(5)),
        ("redis-fair", Algorithm::RedisFair, None),
        ("zk-sequential", Algorithm::ZkSequential, None),
        ("mysql-row", Algorithm::MysqlRow, None),
        ("mysql-for-update-held", Algorithm::MysqlForUpdateHeld, None),
    ] {
        let base = reference(algorithm, 3, nodes);
        let mut thinking = base.clone();
        thinking.workload.think_ms = HOUR_MS / 2;
        thinking.duration_ms = 3 * HOUR_MS;
        let mut paused = base.clone();
        paused.duration_ms = 2 * HOUR_MS;
        let topology = paused.topology();
        paused.faults = topology
            .with_role(Role::Server)
            .into_iter()
            .map(|server| Fault::Pause {
                at_ms: 1_000,
                node: topology.name(server).to_string(),
                for_ms: HOUR_MS,
            })
            .collect();
        let mut figures = Vec::new();
        for s in [&base, &thinking, &paused] {
            let start = Instant::now();
            let mut entries = 0;
            for seed in 0..runs {
                let mut s = s.clone();
                s.seed = seed;
                entries += lockcheck_sim::run(&s).history.entries.len();
            }
            let ms = start.elapsed().as_secs_f64() * 1e3 / runs as f64;
            figures.push((ms, entries as f64 / runs as f64));
        }
        let [(base_ms, base_entries), (think_ms, think_entries), (pause_ms, pause_entries)] =
            figures[..]
        else {
            unreachable!()
        };
        println!(
            "| {name} | {base_ms:.2} ({base_entries:.0}) | {think_ms:.2} ({think_entries:.0}) | \
             {:.2}× | {pause_ms:.2} ({pause_entries:.0}) | {:.2}× |",
            think_ms / base_ms,
            pause_ms / base_ms
        );
        rows.push(json!({
            "model": name,
            "reference_ms": base_ms, "reference_entries": base_entries,
            "idle_hour_ms": think_ms, "idle_hour_entries": think_entries,
            "paused_hour_ms": pause_ms, "paused_hour_entries": pause_entries,
        }));
    }
    json!(rows)
}

fn main() {
    let seconds = env_number("LOCKCHECK_BENCH_SECONDS", 3);
    let seeds = env_number("LOCKCHECK_BENCH_SEEDS", 20);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("lockcheck simulation benchmarks ({cores} cores, {seconds} s per reference scenario, {seeds} seeds per cell)\n");

    println!("| memory (redlock, no faults, one job) | peak RSS KB | RSS KB |");
    println!("|---|---|---|");
    let memory = memory();
    println!();

    println!("| idle time (ms per run, history entries) | reference, 10 s | + an hour between sections | ratio | + every server paused an hour | ratio |");
    println!("|---|---|---|---|---|---|");
    let idle = idle(env_number("LOCKCHECK_BENCH_IDLE_RUNS", 20));
    println!();

    println!("| reference scenario | runs/s (1 core) | simulated s per wall s | runs |");
    println!("|---|---|---|---|");
    let mut references = Vec::new();
    for (name, s) in [
        (
            "single-redis, 2 clients, 10 s",
            reference(Algorithm::SingleRedis, 2, None),
        ),
        (
            "redlock, 5 masters, 3 clients, 10 s",
            reference(Algorithm::Redlock, 3, Some(5)),
        ),
        (
            "zk-sequential, 3 clients, 10 s",
            reference(Algorithm::ZkSequential, 3, None),
        ),
        (
            "mysql-row, 3 clients, 10 s",
            reference(Algorithm::MysqlRow, 3, None),
        ),
    ] {
        let (rate, speed, runs) = throughput(&s, Duration::from_secs(seconds));
        println!("| {name} | {rate:.0} | {speed:.0} | {runs} |");
        references.push(
            json!({ "scenario": name, "runs_per_s": rate, "sim_speedup": speed, "runs": runs }),
        );
    }

    println!("\n| known-unsafe cell | detect median s | detect worst s | shrink median s | shrink worst s | cases (median) | not found |");
    println!("|---|---|---|---|---|---|---|");
    let mut cells = Vec::new();
    for cell in known_unsafe() {
        let d = detection(&cell, seeds);
        println!(
            "| {} | {:.3} | {:.3} | {:.2} | {:.2} | {} | {} |",
            cell.name,
            d["detect_s"]["median"].as_f64().unwrap_or(f64::NAN),
            d["detect_s"]["worst"].as_f64().unwrap_or(f64::NAN),
            d["shrink_s"]["median"].as_f64().unwrap_or(f64::NAN),
            d["shrink_s"]["worst"].as_f64().unwrap_or(f64::NAN),
            d["cases_to_detect"]["median"].as_f64().unwrap_or(f64::NAN),
            d["not_found"],
        );
        cells.push(d);
    }

    // Side by side, twice each, so that a burst of load on the machine hits both.
    let mut one = Vec::new();
    let mut two = Vec::new();
    for _ in 0..2 {
        one.push(search_rate(1));
        two.push(search_rate(2));
    }
    let (one, two) = (
        one.iter().sum::<f64>() / one.len() as f64,
        two.iter().sum::<f64>() / two.len() as f64,
    );
    println!("\n| search (redlock, no faults, 400 cases) | cases/s |\n|---|---|");
    println!(
        "| --jobs 1 | {one:.0} |\n| --jobs 2 | {two:.0} |\n| ratio | {:.2}× |",
        two / one
    );

    let report = json!({
        "cores": cores,
        "reference": references,
        "detection": cells,
        "scaling": { "jobs1_cases_per_s": one, "jobs2_cases_per_s": two, "ratio": two / one },
        "memory": memory,
        "idle": idle,
    });
    // Benches run in the package's directory: the workspace's target dir is one up.
    let dir = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("bench");
    std::fs::create_dir_all(&dir).expect("the target dir is writable");
    let path = dir.join("simulation.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap() + "\n")
        .expect("the target dir is writable");
    println!("\nwritten: {}", path.display());
}
