//! One real run: check the scenario can be carried out, start the servers, start the nemesis and
//! the clients, wait for the end, probe liveness, stop everything, check the history.
//!
//! The algorithms keep state in `RefCell`s (they are not `Send`), so the whole run is on one
//! thread: a tokio current-thread runtime with a `LocalSet`, every client a local task.

use crate::backend::server_kind;
use crate::client::run_probe;
use crate::client_process::{ClientCommand, ClientProcesses};
use crate::endpoints::Endpoints;
use crate::ensemble::{self, Ensemble};
use crate::error::RealError;
use crate::etcd_cluster::{self, Cluster};
use crate::launcher::Launcher;
use crate::nemesis::Nemesis;
use crate::proxy::Proxy;
use crate::replication::Replication;
use crate::signals;
use crate::support;
use crate::timeshift::{self, ClockFile};
use crate::world::RealWorld;
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::scenario::{Backend, Fault};
use lockcheck_core::schedule::hard_limit_ns;
use lockcheck_core::topology::Role;
use lockcheck_core::{Outcome, Scenario};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
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
    /// With `--client`: the PID of every client process the run started (each its process
    /// group's leader; restarts and the probe included). All are killed by the time the run
    /// returns.
    pub client_pids: Vec<u32>,
    /// With `--client`: the command and the end of each client process's stderr (what the
    /// library logged), for the report.
    pub client: Option<lockcheck_core::report::ClientRun>,
    /// How long the run took.
    pub elapsed: Duration,
    /// On servers the user runs: what the run created there and removed at the end (empty with
    /// `keep`, or on servers lockcheck started).
    pub removed: Vec<String>,
    /// On servers the user runs: what the run created there and left, because the user kept it
    /// or its removal failed (then with why).
    pub left: Vec<String>,
}

/// How often the runner looks whether the clients are done.
const POLL: Duration = Duration::from_millis(20);

/// Where a real run's servers come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Servers {
    /// lockcheck starts them itself, one process per server node, and stops them at the end.
    #[default]
    Launched,
    /// Servers the user runs (containers included), one address per server node in server
    /// order. lockcheck only connects to them: faults that need the server's process are refused;
    /// what the run writes is named after the scenario's key, checked free before and removed
    /// after (see [`crate::endpoints`]).
    Endpoints(Endpoints),
}

/// Runs `scenario` against servers lockcheck starts itself, and checks it.
///
/// Refuses, before starting anything, a scenario that is invalid or asks for what real mode cannot
/// do yet ([`support::check`]), and fails when a server binary is not installed. Every server it
/// started is stopped before it returns, whatever the outcome, and on Ctrl-C
/// ([`RealError::Interrupted`]).
pub fn run(scenario: &Scenario) -> Result<RealRun, RealError> {
    run_on(scenario, &Servers::Launched)
}

/// Runs `scenario` against `servers` and checks it; [`run`] when they are [`Servers::Launched`].
/// Endpoints must all answer before the run starts ([`RealError::Unreachable`]).
pub fn run_on(scenario: &Scenario, servers: &Servers) -> Result<RealRun, RealError> {
    run_with(scenario, servers, None)
}

/// Runs `scenario` against `servers` and checks it, its clients being processes of `client`'s
/// command ([`crate::client_process`]) when given, lockcheck's own rendition of the algorithm
/// otherwise ([`run_on`]). Every client process started is killed by the end, whatever the
/// outcome, and on Ctrl-C.
pub fn run_with(
    scenario: &Scenario,
    servers: &Servers,
    client: Option<&ClientCommand>,
) -> Result<RealRun, RealError> {
    // Caught before anything starts, so that no signal finds a server without lockcheck
    // stopping it (nor is lost to a disposition inherited from a shell).
    let _watch = signals::watch();
    preflight_on(scenario, servers)?;
    if let Some(signal) = signals::caught() {
        return Err(RealError::Interrupted(signal));
    }
    if let Some(client) = client {
        crate::client_process::check(scenario, client)?;
    }
    let launcher = Rc::new(RefCell::new(Launcher::new()?));
    let processes = client.map(|c| {
        Rc::new(ClientProcesses::new(
            c.clone(),
            launcher.borrow().root().join("clients"),
        ))
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RealError::Runtime)?;
    let local = LocalSet::new();
    let started = Instant::now();
    // Set once the user's servers were found free of the run's names: from then on what is there
    // under them is the run's own, and is removed at the end.
    let claimed = Rc::new(std::cell::Cell::new(false));
    let leases = crate::etcd_store::LeaseLedger::default();
    // The names the client's library writes beside the run's (`--client-keys`), checked free
    // before and removed after as the run's own are.
    let declared = client.map_or(&[][..], |c| &c.keys[..]);
    let result = local.block_on(&runtime, async {
        tokio::select! {
            result = execute(scenario, servers, launcher.clone(), claimed.clone(), processes.clone(), leases.clone()) => result,
            signal = signals::caught_one() => Err(RealError::Interrupted(signal)),
        }
    });
    // What the run created on the user's servers goes, whatever the outcome (an interrupted run
    // included), unless the user keeps it. Before the servers were found free, nothing under the
    // run's names is the run's: it is left alone.
    let (removed, left) = match servers {
        Servers::Endpoints(endpoints) if claimed.get() => {
            let leases = leases.borrow().clone();
            local.block_on(&runtime, clean_up(scenario, endpoints, &leases, declared))
        }
        _ => (Vec::new(), Vec::new()),
    };
    let server_pids = launcher.borrow().started_pids();
    let client_pids = processes.as_ref().map_or(Vec::new(), |p| p.started_pids());
    // The client processes first: their clock files are in the launcher's directory.
    if let Some(processes) = &processes {
        processes.close();
        // The stderr readers see their pipes close; the report keeps what they read to the end.
        local.block_on(&runtime, processes.drained());
    }
    let client = processes.as_ref().map(|p| p.report());
    // Every server stopped and its directory removed here, whoever else still holds the
    // launcher; the tasks and their handles on it go next.
    launcher.borrow_mut().close();
    drop(local);
    drop(runtime);
    drop(launcher);
    drop(processes);
    // A signal caught while a server was being prepared (inside `mariadb-install-db`) ended that
    // preparation as a failure; it is an interruption all the same.
    if let Some(signal) = signals::caught() {
        return Err(RealError::Interrupted(signal));
    }
    Ok(RealRun {
        outcome: result?,
        server_pids,
        client_pids,
        client,
        elapsed: started.elapsed(),
        removed,
        left,
    })
}

/// What [`run`] checks before it starts anything: that the scenario is valid and supported in
/// real mode ([`support::check`]) and that its servers' binaries are on PATH.
pub fn preflight(scenario: &Scenario) -> Result<(), RealError> {
    preflight_on(scenario, &Servers::Launched)
}

/// What [`run_on`] checks before it starts anything: [`preflight`] for launched servers; for
/// endpoints, one per server node and no fault that needs a server's process
/// ([`support::check_endpoints`]).
pub fn preflight_on(scenario: &Scenario, servers: &Servers) -> Result<(), RealError> {
    support::check(scenario)?;
    if let Servers::Endpoints(endpoints) = servers {
        support::check_endpoints(scenario, endpoints.addrs.len())?;
        return crate::endpoints::check_login(scenario, &endpoints.login);
    }
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

/// What [`launch`] started: the servers' addresses (server order), the shift files of those
/// whose clock the scenario moves (by server order), and the links between the members of a
/// ZooKeeper ensemble or an etcd cluster, which must live as long as the run.
struct Launched {
    addrs: Vec<SocketAddr>,
    server_clocks: BTreeMap<usize, ClockFile>,
    ensemble: Option<Ensemble>,
    etcd_cluster: Option<Rc<Cluster>>,
}

/// Starts `scenario`'s servers with `launcher` and waits until they are ready.
async fn launch(
    scenario: &Scenario,
    launcher: &Rc<RefCell<Launcher>>,
) -> Result<Launched, RealError> {
    let topology = scenario.topology();
    let server_nodes = topology.with_role(Role::Server);
    if scenario.is_zookeeper_ensemble() {
        let (addrs, ensemble) = ensemble::launch(scenario, launcher).await?;
        return Ok(Launched {
            addrs,
            server_clocks: BTreeMap::new(),
            ensemble: Some(ensemble),
            etcd_cluster: None,
        });
    }
    if scenario.is_etcd_cluster() {
        return launch_etcd_cluster(scenario, launcher).await;
    }
    // The servers, all started at once, then each waited for. A server whose clock the
    // scenario moves runs with the time-shift library, from the start (a preload cannot be added
    // later).
    let mut servers = Vec::new();
    let mut server_clocks = BTreeMap::new();
    for (order, &node) in server_nodes.iter().enumerate() {
        let name = topology.name(node);
        let mut env = Vec::new();
        if moves_clock(scenario, name) {
            let file = ClockFile::create(&launcher.borrow().root().join(format!("{name}.clock")))?;
            env = file.env(&timeshift::library()?);
            server_clocks.insert(order, file);
        }
        let index = launcher
            .borrow_mut()
            .add(name, server_kind(scenario, name)?, env)?;
        servers.push(index);
    }
    for &index in &servers {
        Launcher::until_ready(launcher, index).await?;
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

    Ok(Launched {
        addrs,
        server_clocks,
        ensemble: None,
        etcd_cluster: None,
    })
}

/// Starts `scenario`'s etcd cluster (`etcd-0`, …, launcher index `i` for member `i`, which is
/// its server order) and makes its highest member the leader, as the simulated cluster starts
/// ([`etcd_cluster::make_leader`]).
async fn launch_etcd_cluster(
    scenario: &Scenario,
    launcher: &Rc<RefCell<Launcher>>,
) -> Result<Launched, RealError> {
    let topology = scenario.topology();
    let names: Vec<&str> = topology
        .with_role(Role::Server)
        .into_iter()
        .map(|n| topology.name(n))
        .collect();
    let members = names.len();
    let cluster = etcd_cluster::launch(members, launcher).await?;
    for (i, name) in names.iter().enumerate() {
        // The nemesis acts on launcher index `i` for server `i`: the cluster's members must be
        // the launcher's first servers, named as the scenario names them.
        let started = launcher.borrow().name(i).to_string();
        if started != *name {
            return Err(RealError::Server {
                server: name.to_string(),
                reason: format!("the cluster started {started} as server {i}"),
            });
        }
    }
    etcd_cluster::make_leader(cluster.members(), members - 1).await?;
    let addrs = cluster.members().to_vec();
    tracing::info!(
        "etcd cluster ready, {} leads: {}",
        names[members - 1],
        addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Launched {
        addrs,
        server_clocks: BTreeMap::new(),
        ensemble: None,
        etcd_cluster: Some(Rc::new(cluster)),
    })
}

/// Whether `scenario` jumps or drifts the clock of node `name`.
fn moves_clock(scenario: &Scenario, name: &str) -> bool {
    scenario.faults.iter().any(|f| {
        matches!(f, Fault::ClockJump { .. } | Fault::ClockDrift { .. }) && f.nodes().contains(&name)
    })
}

async fn execute(
    scenario: &Scenario,
    servers: &Servers,
    launcher: Rc<RefCell<Launcher>>,
    claimed: Rc<std::cell::Cell<bool>>,
    processes: Option<Rc<ClientProcesses>>,
    leases: crate::etcd_store::LeaseLedger,
) -> Result<Outcome, RealError> {
    let topology = scenario.topology();
    let params = &scenario.params;
    let server_nodes = topology.with_role(Role::Server);
    let Launched {
        addrs,
        server_clocks,
        ensemble,
        etcd_cluster,
    } = match servers {
        Servers::Launched => launch(scenario, &launcher).await?,
        Servers::Endpoints(endpoints) => {
            use crate::endpoints::{identity, occupied, prepare, reach};
            let named = || {
                server_nodes
                    .iter()
                    .map(|&n| topology.name(n))
                    .zip(&endpoints.addrs)
            };
            let login = &endpoints.login;
            // Every server answers, is given once (by what it says it is, not only by its
            // address) and holds nothing of the run's before anything is written.
            let mut asked = Vec::new();
            for (name, &addr) in named() {
                if !port_open(addr).await {
                    return Err(RealError::Unreachable {
                        server: name.to_string(),
                        addr,
                    });
                }
                reach(scenario, name, addr, login).await?;
                if endpoints.addrs.len() > 1 {
                    asked.push((name, addr, identity(scenario, name, addr, login).await?));
                }
            }
            crate::endpoints::distinct(&asked)?;
            let declared = processes.as_ref().map_or(&[][..], |p| &p.client().keys[..]);
            for (name, &addr) in named() {
                let mut found = occupied(scenario, name, addr, login).await?;
                found.extend(
                    crate::declared::occupied(scenario, declared, name, addr, login).await?,
                );
                if !found.is_empty() {
                    return Err(RealError::Occupied {
                        server: name.to_string(),
                        found,
                    });
                }
            }
            claimed.set(true);
            for (name, &addr) in named() {
                prepare(scenario, name, addr, login).await?;
            }
            Launched {
                addrs: endpoints.addrs.clone(),
                server_clocks: BTreeMap::new(),
                ensemble: None,
                etcd_cluster: None,
            }
        }
    };

    // Every client reaches every server through a proxy of its own, so that a fault can act on
    // one link (a partition) or on all of one client's links (its pause). The proxies live until
    // the end of this function; dropping them ends their tasks.
    //
    // Over TLS (endpoints only), the proxies speak it to the servers, except to MariaDB, which
    // its client speaks end to end (see crate::tls); the probe then reaches the servers through
    // proxies of its own, which no fault acts on.
    let mut login = match servers {
        Servers::Endpoints(endpoints) => endpoints.login.clone(),
        Servers::Launched => Default::default(),
    };
    let proxy_tls = match scenario.algorithm.backend() {
        Backend::Mysql => {
            login.tls = login.tls.map(|tls| tls.naming(addrs[0]));
            None
        }
        _ => login.tls.clone(),
    };
    let start_proxy = |upstream: SocketAddr, link_seed: u64| {
        let tls = proxy_tls.clone();
        async move {
            Proxy::start_tls(upstream, link_seed, tls)
                .await
                .map_err(|source| RealError::Proxy { upstream, source })
        }
    };
    if let Some(processes) = &processes {
        processes.log_in_as(&login, scenario.algorithm.backend());
    }
    let clients = topology.with_role(Role::Client);
    let mut proxies: Vec<Vec<Proxy>> = Vec::new();
    for (c, _) in clients.iter().enumerate() {
        let mut to_servers = Vec::new();
        for (i, &upstream) in addrs.iter().enumerate() {
            // Each link draws its losses from its own stream of the scenario's seed.
            let link_seed = scenario.seed ^ (((c as u64) << 32) | i as u64);
            to_servers.push(start_proxy(upstream, link_seed).await?);
        }
        proxies.push(to_servers);
    }
    let mut probe_proxies = Vec::new();
    if proxy_tls.is_some() {
        for &upstream in &addrs {
            probe_proxies.push(start_proxy(upstream, scenario.seed).await?);
        }
    }
    let routes = proxies
        .iter()
        .map(|to_servers| to_servers.iter().map(|p| (p.addr(), p.link())).collect())
        .collect();

    // Replicas: the servers replicate through their ingress proxies, under a Sentinel, before
    // time starts (the first sync is not part of the run).
    let replication = if params.redis.replicas > 0 {
        let lag = Duration::from_millis(params.redis.replication_lag_ms());
        let first_failover = scenario
            .faults
            .iter()
            .filter_map(|f| match f {
                Fault::Failover { at_ms, node } => Some((*at_ms, node)),
                _ => None,
            })
            .min_by_key(|(at_ms, _)| *at_ms)
            .and_then(|(_, node)| topology.index_of(node))
            .and_then(|n| server_nodes.iter().position(|&s| s == n));
        Some(Rc::new(
            Replication::start(&launcher, &addrs, lag, scenario.seed, first_failover).await?,
        ))
    } else {
        None
    };

    // Client processes start before time does (a JVM takes seconds), each reaching the servers
    // through its own proxies, and are all ready when it starts.
    if let Some(processes) = &processes {
        let routes: Vec<Vec<SocketAddr>> = proxies
            .iter()
            .map(|to_servers| to_servers.iter().map(Proxy::addr).collect())
            .collect();
        // All at once: JVMs start in parallel.
        futures_util::future::try_join_all(
            clients
                .iter()
                .zip(&routes)
                .map(|(&c, routes)| processes.start(scenario, c, routes, 1)),
        )
        .await?;
    }

    // Time starts now.
    let peer_links = ensemble
        .as_ref()
        .map(|e| e.links.clone())
        .unwrap_or_default();
    let mut world = RealWorld::new(scenario.clone(), addrs, routes)
        .with_peer_links(peer_links)
        .with_etcd_cluster(etcd_cluster.clone())
        .with_login(login)
        .with_leases(leases);
    if !probe_proxies.is_empty() {
        world = world.with_probe_routes(probe_proxies.iter().map(Proxy::addr).collect());
    }
    if let Some(processes) = &processes {
        world = world.with_processes(processes.clone());
    }
    if let Some(replication) = &replication {
        world = world.with_sentinel(replication.sentinel(), replication.announced());
    }
    let world = Rc::new(world);
    let mut nemesis = Nemesis::new(world.clone(), launcher.clone(), server_clocks)
        .with_replication(replication.clone());
    let quiet_ns = nemesis.quiet_after_ns();
    nemesis.strike_due().await?;
    for &c in &clients {
        // A client crashed at 0 ms (by `strike_due`) starts only when the nemesis restarts it.
        if !world.is_client_down(c) {
            world.start_client(c);
        }
    }
    let mut nemesis = Some(tokio::task::spawn_local(nemesis.run()));

    // As in the simulation: the run ends when every client is done and the nemesis is through,
    // or, for clients that never finish, at a hard limit after the end.
    let limit_ns = hard_limit_ns(scenario, quiet_ns);
    loop {
        if nemesis.as_ref().is_some_and(JoinHandle::is_finished) {
            match nemesis.take().expect("checked above").await {
                Ok(result) => result?,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("the nemesis task was cancelled: {e}"),
            }
        }
        if let Some(error) = world.take_client_error() {
            return Err(error);
        }
        for &c in &clients {
            if let Some(task) = world.take_failed_task(c) {
                match task.await {
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    other => panic!("client {c}'s task ended without finishing: {other:?}"),
                }
            }
        }
        let settled = clients
            .iter()
            .all(|&c| world.is_finished(c) || world.is_client_down(c));
        if (settled && nemesis.is_none()) || world.true_ns() >= limit_ns {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    if let Some(nemesis) = nemesis {
        nemesis.abort();
    }
    // A client process that broke the protocol as the run ended: still an error, not a verdict.
    if let Some(error) = world.take_client_error() {
        return Err(error);
    }
    for &c in &clients {
        if !world.is_finished(c) && !world.is_client_down(c) {
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
    }
    world.stop_clients();

    // Liveness: with every fault over and every client stopped, the lock must come free within
    // twice the TTL. Without the lock service (a majority of its servers down, or the primary
    // of replicated servers), there is none.
    let down = world.down_names();
    let lock_servers = world.lock_servers();
    if world.lock_servers_down() > lock_servers.len() / 2 {
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
        // A client's library that declared its own lease may hold the lock that long.
        let lease_ms = processes
            .as_ref()
            .and_then(|p| p.client().lease_ms)
            .unwrap_or_else(|| scenario.algorithm.lease_ms(params));
        let wait = 2 * Duration::from_millis(lease_ms);
        if let Some(processes) = &processes {
            // A client process has timeouts of its own, and ends the run with an error rather
            // than hang.
            crate::client_process::probe(&world, wait).await?;
            processes.close();
        } else if tokio::time::timeout(
            wait + Duration::from_secs(5),
            run_probe(world.clone(), wait),
        )
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

    // A server that refused TLS during the run (it passed before): what the run saw of it is
    // no evidence about the lock.
    if let Some((proxy, why)) = proxies
        .iter()
        .flatten()
        .chain(&probe_proxies)
        .find_map(|p| p.tls_refusal().map(|why| (p, why)))
    {
        return Err(RealError::Tls(format!(
            "{} refused the TLS handshake during the run: {why}",
            proxy.upstream()
        )));
    }
    drop(proxies);
    drop(probe_proxies);
    drop(replication);
    drop(ensemble);
    // The run's handle on the cluster; its proxies and front doors close with the world's (at
    // the latest when `run_with` drops the tasks' `LocalSet`, after the members are stopped).
    drop(etcd_cluster);
    let history = world.recorder.history();
    // A client's library that declared its own lease is judged by it (STUCK's bound).
    Ok(match processes.as_ref().and_then(|p| p.client().lease_ms) {
        Some(lease_ms) => Outcome::of_with_lease(history, scenario, lease_ms),
        None => Outcome::of(history, scenario),
    })
}

/// Removes what the run created on the user's servers, unless the user keeps it: what was
/// removed, and what was left (kept, or with why its removal failed). On etcd, the session
/// leases the run's clients were granted (`leases`) are revoked first, rather than left on the
/// server until their TTL runs out; with `--keep` they are left (revoking a lease deletes the
/// keys it holds), and said. The names a client's library declared (`declared`, patterns of
/// [`crate::declared`]) go (or stay) with the run's own.
async fn clean_up(
    scenario: &Scenario,
    endpoints: &Endpoints,
    leases: &[lockcheck_algorithms::etcd::store::LeaseId],
    declared: &[String],
) -> (Vec<String>, Vec<String>) {
    let topology = scenario.topology();
    let names = topology.with_role(Role::Server);
    let mut removed = Vec::new();
    let mut left = Vec::new();
    if let (false, Some(&first)) = (leases.is_empty(), names.first()) {
        let name = topology.name(first);
        if endpoints.keep {
            left.push(format!(
                "{name}: {} etcd session lease(s), until their TTL runs out (--keep)",
                leases.len()
            ));
        } else {
            match crate::endpoints::revoke_leases(name, endpoints, leases).await {
                Ok(gone) => removed.extend(gone.into_iter().map(|g| format!("{name}: {g}"))),
                Err(e) => {
                    tracing::warn!("{e}");
                    left.push(format!("{name}: session leases not revoked: {e}"));
                }
            }
        }
    }
    for (&node, &addr) in names.iter().zip(&endpoints.addrs) {
        let name = topology.name(node);
        if endpoints.keep {
            let key = scenario.params.lock_key();
            left.push(format!("{name}: what the run wrote under '{key}' (--keep)"));
            if !declared.is_empty() {
                let names: Vec<String> = crate::declared::names(scenario, declared)
                    .iter()
                    .map(|n| format!("'{}'", lockcheck_core::input::clip(&n.shown())))
                    .collect();
                left.push(format!(
                    "{name}: what the client wrote under {} (--keep)",
                    names.join(", ")
                ));
            }
            continue;
        }
        match crate::endpoints::remove(scenario, name, addr, &endpoints.login).await {
            Ok(gone) => removed.extend(gone.into_iter().map(|g| format!("{name}: {g}"))),
            Err(e) => {
                tracing::warn!("{e}");
                left.push(format!("{name}: not removed: {e}"));
            }
        }
        match crate::declared::remove(scenario, declared, name, addr, &endpoints.login).await {
            Ok(gone) => removed.extend(gone.into_iter().map(|g| format!("{name}: {g}"))),
            Err(e) => {
                tracing::warn!("{e}");
                left.push(format!(
                    "{name}: the client's declared names not removed: {e}"
                ));
            }
        }
    }
    (removed, left)
}

/// Whether anything accepts a connection at `addr` within a second (what [`RealError::Unreachable`]
/// says when not; what answers is for [`crate::endpoints::reach`] to judge).
async fn port_open(addr: SocketAddr) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}
