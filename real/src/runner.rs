//! One real run: check the scenario can be carried out, start the servers, start the nemesis and
//! the clients, wait for the end, probe liveness, stop everything, check the history.
//!
//! The algorithms keep state in `RefCell`s (they are not `Send`), so the whole run is on one
//! thread: a tokio current-thread runtime with a `LocalSet`, every client a local task.

use crate::backend::server_kind;
use crate::client::{run_client, run_probe};
use crate::error::RealError;
use crate::launcher::Launcher;
use crate::nemesis::Nemesis;
use crate::support;
use crate::world::RealWorld;
use lockcheck_sim::checker;
use lockcheck_sim::history::{Kind, Op};
use lockcheck_sim::topology::Role;
use lockcheck_sim::{Outcome, Scenario};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::task::{JoinHandle, LocalSet};

/// What a real run produced.
#[derive(Clone, Debug)]
pub struct RealRun {
    /// The history and the checker's verdict, of the same kind as a simulated run's. Its digest
    /// identifies this history; another run of the same scenario will not reproduce it.
    pub outcome: Outcome,
    /// The PID of every server process the run started (restarts included). All are stopped and
    /// reaped when the run returns.
    pub server_pids: Vec<u32>,
    /// How long the run took.
    pub elapsed: Duration,
}

/// How often the runner looks whether the clients are done.
const POLL: Duration = Duration::from_millis(20);

/// Runs `scenario` against real servers and checks it.
///
/// Refuses, before starting anything, a scenario that is invalid or asks for what real mode cannot
/// do yet ([`support::check`]), and fails when its server binary is not installed. Every server it
/// started is stopped before it returns, whatever the outcome, and on Ctrl-C
/// ([`RealError::Interrupted`]).
pub fn run(scenario: &Scenario) -> Result<RealRun, RealError> {
    preflight(scenario)?;
    let launcher = Rc::new(RefCell::new(Launcher::new()?));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RealError::Runtime)?;
    let local = LocalSet::new();
    let started = Instant::now();
    let result = local.block_on(&runtime, async {
        tokio::select! {
            result = execute(scenario, launcher.clone()) => result,
            () = interrupted() => Err(RealError::Interrupted),
        }
    });
    let server_pids = launcher.borrow().started_pids();
    launcher.borrow_mut().stop_all();
    // The tasks (and their handles on the launcher) go first; the launcher's drop then removes
    // the servers' directories.
    drop(local);
    drop(runtime);
    drop(launcher);
    Ok(RealRun {
        outcome: result?,
        server_pids,
        elapsed: started.elapsed(),
    })
}

/// What [`run`] checks before it starts anything: that the scenario is valid and supported in
/// real mode ([`support::check`]) and that its servers' binaries are on PATH.
pub fn preflight(scenario: &Scenario) -> Result<(), RealError> {
    support::check(scenario)?;
    let topology = scenario.topology();
    for node in topology.with_role(Role::Server) {
        let kind = server_kind(scenario, topology.name(node))?;
        if !kind.installed() {
            return Err(RealError::MissingBinary {
                binary: kind.binary(),
                install: kind.install(),
            });
        }
    }
    Ok(())
}

/// Completes on Ctrl-C; never, if the handler cannot be installed.
async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn execute(
    scenario: &Scenario,
    launcher: Rc<RefCell<Launcher>>,
) -> Result<Outcome, RealError> {
    let topology = scenario.topology();
    let params = &scenario.params;

    // The servers, all started at once, then each waited for.
    let server_nodes = topology.with_role(Role::Server);
    let mut servers = Vec::new();
    for &node in &server_nodes {
        let name = topology.name(node);
        let index = launcher
            .borrow_mut()
            .add(name, server_kind(scenario, name)?, Vec::new())?;
        servers.push(index);
    }
    for &index in &servers {
        Launcher::until_ready(&launcher, index).await?;
    }
    let addrs: Vec<_> = servers.iter().map(|&i| launcher.borrow().addr(i)).collect();
    tracing::info!(
        "{} server(s) ready: {}",
        addrs.len(),
        addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );

    // Time starts now.
    let world = Rc::new(RealWorld::new(scenario.clone(), addrs));
    let mut nemesis = Nemesis::new(world.clone(), launcher.clone());
    let quiet_ns = nemesis.quiet_after_ns();
    nemesis.strike_due().await?;
    let clients = topology.with_role(Role::Client);
    let tasks: Vec<JoinHandle<()>> = clients
        .iter()
        .map(|&c| tokio::task::spawn_local(run_client(world.clone(), c)))
        .collect();
    let mut nemesis = Some(tokio::task::spawn_local(nemesis.run()));

    // As in the simulation: the run ends when every client is done and the nemesis is through,
    // or, for clients that never finish, at a hard limit after the end.
    let ttl = Duration::from_millis(scenario.algorithm.lease_ms(params));
    let hold = Duration::from_millis(scenario.workload.hold_ms);
    let end_ns = scenario.duration_ms * 1_000_000;
    let limit_ns = end_ns.max(quiet_ns) + (2 * ttl.max(hold)).as_nanos() as u64 + 10_000_000_000;
    loop {
        if nemesis.as_ref().is_some_and(JoinHandle::is_finished) {
            match nemesis.take().expect("checked above").await {
                Ok(result) => result?,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("the nemesis task was cancelled: {e}"),
            }
        }
        let settled = clients.iter().all(|&c| world.is_finished(c));
        if (settled && nemesis.is_none()) || world.true_ns() >= limit_ns {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    if let Some(nemesis) = nemesis {
        nemesis.abort();
    }
    for (&c, task) in clients.iter().zip(&tasks) {
        if !world.is_finished(c) {
            let left = world.remaining(c);
            world.record(
                c,
                Kind::Observe,
                Op::Note {
                    text: format!(
                        "still running at the run's hard limit ({left} critical section(s) left); stopped"
                    ),
                },
            );
        }
        task.abort();
    }

    // Liveness: with every fault over and every client stopped, the lock must come free within
    // twice the TTL. Without the lock service (a majority of its servers down), there is none.
    let down = world.down_names();
    if down.len() > server_nodes.len() / 2 {
        world.record(
            topology.probe(),
            Kind::Observe,
            Op::Note {
                text: format!(
                    "liveness not checked: {} still down at the end of the run",
                    down.join(", ")
                ),
            },
        );
    } else {
        let wait = 2 * ttl;
        let probe = run_probe(world.clone(), wait);
        if tokio::time::timeout(wait + Duration::from_secs(5), probe)
            .await
            .is_err()
        {
            world.record(
                topology.probe(),
                Kind::Observe,
                Op::Note {
                    text: "the probe did not finish in time".into(),
                },
            );
        }
    }

    let history = world.recorder.history();
    Ok(Outcome {
        violations: checker::check(&history.entries),
        stale_accesses: checker::stale_accesses(&history.entries),
        availability: checker::availability(&history.entries),
        wakeups: checker::wakeups(&history.entries),
        digest: history.digest(),
        history,
    })
}
