//! Real mode's speed (#8): acquire + release pairs per second of `single-redis` (lockcheck's own
//! algorithm code on its real Redis store) against one loopback `redis-server`, at concurrency 1,
//! 8 and 64, measured side by side in one run with `redis-benchmark` sending the same commands
//! (`SET key token NX PX ttl`, then `EVALSHA` of the release script), with the same commands sent
//! straight through redis-rs (what lockcheck's own code costs), and with the `rslock` crate (a
//! published Rust Redlock) on the same server. Each of the `c` clients locks a key of its own,
//! so the figures measure the lock's cost, not waiting for one another.
//!
//! ```sh
//! cargo bench -p lockcheck-real --bench redis_throughput
//! ```
//!
//! Prints a table and writes `target/bench/redis_throughput.json`. Without `redis-server` (and
//! `redis-benchmark`, same package) it says how to install them and measures nothing.
//! `LOCKCHECK_BENCH_SECONDS` (default 2) sets how long each measurement runs.

use lockcheck_algorithms::redis::single::{Attempt, SingleRedis, SingleRedisConfig, RELEASE_LUA};
use lockcheck_core::scenario::Persistence;
use lockcheck_real::env::RealEnv;
use lockcheck_real::gate::PauseGate;
use lockcheck_real::launcher::Launcher;
use lockcheck_real::redis_store::RealRedis;
use serde_json::json;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The lease every lock takes: long enough never to expire during a measurement.
const TTL: Duration = Duration::from_secs(10);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Runs `clients` clients to completion on one thread, each as a task of its own on a
/// `LocalSet`, as real mode runs its clients. (Not one `join_all` of every client: for a few
/// futures it polls all of them whenever one is woken.)
fn on_local_tasks<F, Fut>(clients: usize, client: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let local = tokio::task::LocalSet::new();
    let tasks: Vec<_> = (0..clients).map(|i| local.spawn_local(client(i))).collect();
    runtime().block_on(local.run_until(async {
        for task in tasks {
            task.await.expect("a client does not panic");
        }
    }));
}

/// lockcheck's `single-redis`: `clients` clients on one thread, a task each (as real mode runs them), each
/// with its own connection and key, acquiring and releasing for `time`; pairs per second.
fn ours(addr: SocketAddr, clients: usize, time: Duration) -> f64 {
    let pairs = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    on_local_tasks(clients, |i| {
        let pairs = pairs.clone();
        async move {
            let env = RealEnv::new(7, i, 0, PauseGate::new());
            let lock = SingleRedis::new(
                RealRedis::new(addr, Duration::from_secs(5), PauseGate::new()),
                SingleRedisConfig {
                    key: format!("bench:ours:{i}"),
                    ttl: TTL,
                    drift_factor: 0.01,
                    retry_delay: Duration::from_millis(10),
                    retry_count: Some(1),
                    max_retry_delay: Duration::from_millis(10),
                    fencing: false,
                    wait_replicas: None,
                },
            );
            while start.elapsed() < time {
                let Ok(Attempt::Acquired(guard)) = lock.try_acquire(&env).await else {
                    panic!("the key is this client's alone, and the server answers");
                };
                assert!(lock.release(&guard).await.expect("the server answers"));
                pairs.set(pairs.get() + 1);
            }
        }
    });
    pairs.get() as f64 / start.elapsed().as_secs_f64()
}

/// The same two commands sent straight through redis-rs (the version lockcheck's store uses),
/// with no lock code around them: a connection per client, `SET key token NX PX`, then
/// `EVALSHA` of the release script; pairs per second. What lockcheck adds is the difference to
/// `ours`; what the crate version adds is the difference to `rslock` (built on an older redis-rs).
fn direct(addr: SocketAddr, clients: usize, time: Duration, sha: &str) -> f64 {
    let pairs = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    on_local_tasks(clients, |i| {
        let (pairs, sha) = (pairs.clone(), sha.to_owned());
        async move {
            let client = redis::Client::open(format!("redis://{addr}/")).expect("a valid url");
            let mut connection = client
                .get_multiplexed_async_connection()
                .await
                .expect("the server answers");
            let key = format!("bench:direct:{i}");
            while start.elapsed() < time {
                let set: redis::Value = redis::cmd("SET")
                    .arg(&key)
                    .arg("token")
                    .arg("NX")
                    .arg("PX")
                    .arg(TTL.as_millis() as u64)
                    .query_async(&mut connection)
                    .await
                    .expect("the server answers");
                assert_eq!(set, redis::Value::Okay, "the key is this client's alone");
                let released: i64 = redis::cmd("EVALSHA")
                    .arg(&sha)
                    .arg(1)
                    .arg(&key)
                    .arg("token")
                    .query_async(&mut connection)
                    .await
                    .expect("the server answers");
                assert_eq!(released, 1);
                pairs.set(pairs.get() + 1);
            }
        }
    });
    pairs.get() as f64 / start.elapsed().as_secs_f64()
}

/// `rslock` on the same server, the same way; pairs per second. `shared`: one `LockManager` for
/// every client, as one process with many tasks uses it (its one multiplexed connection
/// pipelines the clients' commands); otherwise a manager, and so a connection, per client, as
/// lockcheck's clients (separate processes, each behind its own proxy) have.
fn rslock(addr: SocketAddr, clients: usize, time: Duration, shared: bool) -> f64 {
    let pairs = Rc::new(Cell::new(0u64));
    let url = format!("redis://{addr}/");
    let managers: Vec<_> = (0..if shared { 1 } else { clients })
        .map(|_| rslock::LockManager::new(vec![url.clone()]))
        .collect();
    let start = Instant::now();
    on_local_tasks(clients, |i| {
        let (pairs, manager) = (pairs.clone(), managers[i % managers.len()].clone());
        async move {
            let key = format!("bench:rslock:{i}");
            while start.elapsed() < time {
                let lock = manager
                    .lock(key.as_bytes(), TTL)
                    .await
                    .expect("the key is this client's alone");
                manager.unlock(&lock).await;
                pairs.set(pairs.get() + 1);
            }
        }
    });
    pairs.get() as f64 / start.elapsed().as_secs_f64()
}

/// `redis-benchmark`'s requests per second for `command` at concurrency `clients`.
fn redis_benchmark(addr: SocketAddr, clients: usize, requests: u64, command: &[&str]) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(["-c", &clients.to_string(), "-n", &requests.to_string()])
        .args(["-r", "1000000", "-q", "--csv"])
        .args(command)
        .output()
        .expect("redis-benchmark runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // `"test","rps",…` then one line per test: the rate is the second field.
    text.lines()
        .filter_map(|line| line.split(',').nth(1))
        .filter_map(|rps| rps.trim_matches('"').parse::<f64>().ok())
        .next()
        .unwrap_or_else(|| panic!("redis-benchmark printed no rate:\n{text}"))
}

/// The release script's SHA-1, loaded into the server as lockcheck's client would load it.
fn load_release_script(addr: SocketAddr) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(["SCRIPT", "LOAD", RELEASE_LUA])
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn main() {
    let installed = ["redis-server", "redis-benchmark", "redis-cli"]
        .iter()
        .all(|b| Command::new(b).arg("--version").output().is_ok());
    if !installed {
        println!("redis_throughput: redis-server and redis-benchmark are not installed (apt-get install redis-server); nothing measured");
        return;
    }
    let seconds = std::env::var("LOCKCHECK_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2u64);
    let time = Duration::from_secs(seconds);
    let launcher = RefCell::new(Launcher::new().expect("a temp dir"));
    let index = launcher
        .borrow_mut()
        .add_redis("redis-0", Persistence::None)
        .expect("redis-server starts");
    runtime()
        .block_on(Launcher::until_ready(&launcher, index))
        .expect("redis-server gets ready");
    let addr = launcher.borrow().addr(index);
    let sha = load_release_script(addr);

    println!("single-redis acquire+release pairs/s against one loopback redis-server ({seconds} s each)\n");
    println!("| clients | lockcheck | redis-benchmark (SET NX PX + EVALSHA) | redis-rs direct | rslock, a connection per client | rslock, one shared manager | lockcheck ÷ redis-benchmark | lockcheck ÷ redis-rs direct | lockcheck ÷ rslock (per client) | lockcheck ÷ rslock (shared) |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for clients in [1usize, 8, 64] {
        let ours = ours(addr, clients, time);
        // As many requests as lockcheck made pairs, so both run about as long.
        let requests = ((ours * seconds as f64) as u64).max(10_000);
        let set = redis_benchmark(
            addr,
            clients,
            requests,
            &["SET", "bench:rb:__rand_int__", "token", "NX", "PX", "10000"],
        );
        let release = redis_benchmark(
            addr,
            clients,
            requests,
            &["EVALSHA", &sha, "1", "bench:rb:__rand_int__", "token"],
        );
        // One pair is one of each, back to back.
        let benchmark = 1.0 / (1.0 / set + 1.0 / release);
        let direct = direct(addr, clients, time, &sha);
        let rslock_own = rslock(addr, clients, time, false);
        let rslock_shared = rslock(addr, clients, time, true);
        println!(
            "| {clients} | {ours:.0} | {benchmark:.0} | {direct:.0} | {rslock_own:.0} | {rslock_shared:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
            ours / benchmark,
            ours / direct,
            ours / rslock_own,
            ours / rslock_shared
        );
        rows.push(json!({
            "clients": clients,
            "lockcheck_pairs_per_s": ours,
            "redis_benchmark_pairs_per_s": benchmark,
            "redis_benchmark_set_per_s": set,
            "redis_benchmark_evalsha_per_s": release,
            "redis_rs_direct_pairs_per_s": direct,
            "vs_redis_rs_direct": ours / direct,
            "rslock_per_client_pairs_per_s": rslock_own,
            "rslock_shared_pairs_per_s": rslock_shared,
            "vs_redis_benchmark": ours / benchmark,
            "vs_rslock_per_client": ours / rslock_own,
            "vs_rslock_shared": ours / rslock_shared,
        }));
    }
    // Benches run in the package's directory: the workspace's target dir is one up.
    let dir = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("bench");
    std::fs::create_dir_all(&dir).expect("the target dir is writable");
    let path = dir.join("redis_throughput.json");
    let report = json!({ "seconds": seconds, "rows": rows });
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap() + "\n")
        .expect("the target dir is writable");
    println!("\nwritten: {}", path.display());
}
