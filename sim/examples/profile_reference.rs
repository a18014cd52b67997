//! Runs one of the benchmark's reference scenarios for a fixed number of seeds, and nothing else:
//! the program to put under a profiler (`valgrind --tool=callgrind`, `perf record`), where the
//! benchmark's own timing loop and its other scenarios would only blur the picture.
//!
//! ```sh
//! cargo build --release -p lockcheck-sim --example profile_reference
//! valgrind --tool=callgrind target/release/examples/profile_reference redlock 50
//! ```
//!
//! A third argument runs the seeds on that many threads (each run owns its madsim runtime, as
//! in `explore --jobs`), to see whether a run alone scales with cores.

use lockcheck_core::{Algorithm, Scenario};
use std::process::ExitCode;

/// The allocator the `lockcheck` binary uses, so that the profile is the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (algorithm, clients, nodes) = match args.first().map(String::as_str) {
        Some("single-redis") => (Algorithm::SingleRedis, 2, None),
        Some("redlock") => (Algorithm::Redlock, 3, Some(5)),
        Some("zk-sequential") => (Algorithm::ZkSequential, 3, None),
        Some("mysql-row") => (Algorithm::MysqlRow, 3, None),
        _ => {
            eprintln!(
                "usage: profile_reference single-redis|redlock|zk-sequential|mysql-row [RUNS [THREADS]]"
            );
            return ExitCode::from(2);
        }
    };
    let runs: u64 = match args.get(1).map(|r| r.parse()) {
        None => 20,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("RUNS must be a positive whole number");
            return ExitCode::from(2);
        }
    };
    let threads: u64 = match args.get(2).map(|t| t.parse()) {
        None => 1,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("THREADS must be a positive whole number");
            return ExitCode::from(2);
        }
    };
    let entries: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut entries = 0;
                    for seed in (t..runs).step_by(threads as usize) {
                        let mut s = Scenario::new(algorithm);
                        s.clients = clients;
                        s.duration_ms = 10_000;
                        s.params.nodes = nodes;
                        s.seed = seed;
                        entries += lockcheck_sim::run(&s).history.entries.len();
                    }
                    entries
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a run does not panic"))
            .sum()
    });
    println!("{runs} runs, {entries} history entries");
    ExitCode::SUCCESS
}
