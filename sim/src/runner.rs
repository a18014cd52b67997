//! One deterministic run: build the nodes, start the nemesis and the workload, wait for the end,
//! probe liveness, check the history.

use crate::client::{run_client, run_probe};
use crate::nemesis;
use crate::resource::run_resource;
use crate::world::World;
use lockcheck_core::history::{History, Kind, Op, Retention};
use lockcheck_core::outcome::Outcome;
use lockcheck_core::report::{Replay, Report};
use lockcheck_core::scenario::Scenario;
use lockcheck_core::topology::{Role, Topology};
use madsim::runtime::{Handle, Runtime};
use std::sync::Arc;
use std::time::Duration;

/// Waits until `world` counts a change after `seen`, or `ns` of simulated time have passed.
async fn wait_for_progress(world: &World, seen: u64, ns: u64) {
    let sleep = std::pin::pin!(crate::timer::sleep(Duration::from_nanos(ns)));
    let progress = std::pin::pin!(world.progress.after(seen));
    futures_util::future::select(sleep, progress).await;
}

/// Runs `scenario` (which must be valid) and checks it. Same scenario, same outcome. A run
/// whose history reaches the cap stops there ([`Outcome::cut_short`]).
pub fn run(scenario: &Scenario) -> Outcome {
    run_keeping(scenario, Retention::default())
}

/// [`run`], its history kept as `retention` says: how tests compare a folded history with
/// the same run recorded attempt by attempt, or reach the cap sooner.
pub fn run_keeping(scenario: &Scenario, retention: Retention) -> Outcome {
    let runtime = Runtime::with_seed_and_config(scenario.seed, madsim::Config::default());
    let history = runtime.block_on(simulate(scenario.clone(), retention));
    Outcome::of(history, scenario)
}

/// Reruns `report`'s scenario and compares the rerun with what the report records
/// ([`Replay::compare`]): what `lockcheck replay` prints.
pub fn replay(report: &Report) -> Replay {
    Replay::compare(report, run(&report.scenario))
}

/// Creates node `node` of `world`, running `body` (again on a restart).
pub(crate) fn start_node<F, Fut>(handle: &Handle, world: &Arc<World>, node: usize, body: F)
where
    F: Fn(Arc<World>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let w = world.clone();
    let id = handle
        .create_node()
        .name(world.topology.name(node))
        .ip(Topology::addr(node).ip())
        // Boxed: a node's main future is kilobytes (a client's holds the whole workload), and
        // madsim moves the future it is given several times on its way into the task.
        .init(move || Box::pin(body(w.clone())))
        .build()
        .id();
    world.set_node_id(node, id);
}

async fn simulate(scenario: Scenario, retention: Retention) -> History {
    let handle = Handle::current();
    let timeline = lockcheck_core::schedule::actions(&scenario);
    let quiet_ns = lockcheck_core::schedule::quiet_after_ns(&timeline);
    let world = Arc::new(World::with_retention(scenario, retention));
    let topology = world.topology.clone();
    let params = world.scenario.params.clone();

    for server in topology.with_role(Role::Server) {
        crate::backends::start_server(&handle, &world, server);
    }
    let resource = topology.resource();
    start_node(&handle, &world, resource, move |w| {
        run_resource(w, resource)
    });
    // Servers and the resource bind their ports before any client sends.
    madsim::time::sleep(Duration::from_millis(1)).await;
    let clients = topology.with_role(Role::Client);
    for &client in &clients {
        start_node(&handle, &world, client, move |w| run_client(w, client));
    }
    // No client has run yet: what is due at their start is in place for their first step.
    let timeline = nemesis::apply_due(&world, timeline);
    let nemesis = madsim::task::spawn(nemesis::run(world.clone(), timeline));

    // The run ends when every client is done (or down for good) and the nemesis is through, or,
    // for clients that never finish (blocked, or holding on), at a hard limit after the end.
    let limit_ns = lockcheck_core::schedule::hard_limit_ns(&world.scenario, quiet_ns);
    // How long a lock can outlive its holder: the lease, or for ZooKeeper the session.
    let ttl = Duration::from_millis(world.scenario.algorithm.lease_ms(&params));
    loop {
        let seen = world.progress.changes();
        let settled = clients
            .iter()
            .all(|&c| world.is_finished(c) || world.is_down(c));
        let now = world.true_ns();
        if (settled && now >= quiet_ns) || now >= limit_ns || world.history_full() {
            break;
        }
        let until = if settled { quiet_ns } else { limit_ns };
        wait_for_progress(&world, seen, until - now).await;
    }
    if world.history_full() {
        // Cut short: the faults still to come are not waited for.
        nemesis.abort();
    }
    let _ = nemesis.await;
    for &c in &clients {
        if !world.is_finished(c) && !world.is_down(c) {
            world.record(
                c,
                Kind::Observe,
                Op::Note {
                    text: format!(
                        "still running at the run's hard limit ({} left); stopped",
                        plural(world.remaining(c), "critical section")
                    ),
                },
            );
        }
        handle.kill(world.node_id(c));
    }

    // Liveness: with every fault over and every client stopped, the lock must come free within
    // twice the TTL (one TTL for a lease left by a stopped holder, one more as slack).
    let probe = topology.probe();
    // The probe needs the lock service: the primary of a single-server lock, a quorum of
    // Redlock masters. Down for good, there is no liveness to check.
    let needed = world.lock_servers();
    let down: Vec<usize> = needed
        .iter()
        .copied()
        .filter(|&s| world.is_down(s))
        .collect();
    let service_down = down.len() > needed.len() / 2;
    if world.history_full() {
        // Cut short: nothing more is recorded, and the run is refused rather than judged.
    } else if !service_down {
        let wait = 2 * ttl;
        let w = world.clone();
        start_node(&handle, &world, probe, move |w2| run_probe(w2, probe, wait));
        let probe_limit = world.true_ns() + (wait + Duration::from_secs(5)).as_nanos() as u64;
        // The probe node exits when its init future returns, which it counts as progress.
        loop {
            let seen = w.progress.changes();
            let now = w.true_ns();
            if handle.is_exit(w.node_id(probe)) || now >= probe_limit || w.history_full() {
                break;
            }
            wait_for_progress(&w, seen, probe_limit - now).await;
        }
    } else {
        let names: Vec<&str> = down.iter().map(|&s| topology.name(s)).collect();
        world.record(
            probe,
            Kind::Observe,
            Op::Note {
                text: format!(
                    "liveness not checked: {} still down at the end of the run",
                    names.join(", ")
                ),
            },
        );
    }
    let history = world.take_history();
    // Stop every node so that madsim drops their tasks with the runtime. A task waiting on a
    // waker it keeps in its own state (a mailbox, a watch) is a cycle nobody else breaks: the
    // task, the world it holds and its Lua states would outlive the run, a few hundred KB per
    // case of a search.
    for id in world.started_node_ids() {
        if !handle.is_exit(id) {
            handle.kill(id);
        }
    }
    history
}

fn plural(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
