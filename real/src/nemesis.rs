//! The real nemesis: carries out the scenario's faults at their times, for real.
//!
//! The schedule is expanded exactly as the simulator expands it
//! ([`lockcheck_core::schedule::actions`], a pure function): a pause becomes a pause and a resume, a
//! restart waits out `restart_delay_ms` after its crash, a crash of a server already down is
//! skipped. Then each action is applied when the run's clock reaches it:
//! - pause / resume of a client: its [`crate::gate::PauseGate`] closes / opens; of a client
//!   process (`--client`, [`crate::client_process`]): `SIGSTOP` / `SIGCONT` to its process group;
//! - crash of a client: its task is dropped at once, with its connections (a killed client
//!   process; a client process is killed for real, `SIGKILL` to its group); restart: a new task for it, a new process with new randomness, going on with the
//!   critical sections it had left;
//! - pause / resume of a server: `SIGSTOP` / `SIGCONT` to its process;
//! - crash of a server: `SIGKILL`; restart: the binary again on the same port and directory,
//!   recorded once it is ready (a real restart takes some milliseconds, a JVM's about a second;
//!   the simulated one is instantaneous). The schedule does not wait for it: a cluster member
//!   is ready only once its peers answer, and the fault that keeps them from answering (a delay
//!   on its links, a partition) may end while it waits;
//! - clock jump / drift of a server: its shift file ([`crate::timeshift::ClockFile`]) is
//!   rewritten, and the server, which runs with the time-shift library preloaded, reads its
//!   clocks moved from then on; of a client: its `Env`'s [`crate::timeshift::ClockShift`];
//! - partition (cut / heal of a group): every link that crosses the group's border is cut or
//!   healed, counted per link as the simulation counts them. A link between a client and a server
//!   is that client's proxy to that server (a blackhole while cut: TCP holds the bytes, where the
//!   simulation loses its messages); a link between a client and the resource loses the client's
//!   accesses and their replies, as lost messages do in the simulation, or, for a partition that
//!   holds messages, keeps them in flight until the heal and then delivers them, late, as the
//!   simulation does. A link between two members of a ZooKeeper ensemble is each member's
//!   proxies to the other (`crate::ensemble`), cut both ways; between two members of an etcd
//!   cluster, the pair's proxies behind the members' front doors
//!   ([`crate::etcd_cluster::Cluster::cut`], both ways), counted per pair. Nothing flows in real mode
//!   between other servers, two clients, or a server and the resource, so cutting those changes
//!   nothing, as in the simulation of independent servers;
//! - loss / delay on a node: every proxy of that node (a client's to each server, or each
//!   client's to that server, and an etcd cluster member's links to the other members) is
//!   impaired with what a message across it suffers
//!   ([`crate::proxy::Impairment`]: TCP turns a loss into a retransmission's stall), and the
//!   node's accesses to the resource are dropped and delayed as in the simulation.
//!
//! - failover to a replica: Sentinel performs it ([`crate::replication::Replication::failover`]):
//!   the nemesis asks for it at the scenario's time and records it when Sentinel names the
//!   replica as the primary, about a second later (the simulation's is instantaneous); the
//!   actions after it wait for it, so that nothing scheduled after the failover happens before
//!   it. A failover Sentinel does not carry out is an error of the run.
//!
//! Every action is recorded as a `nemesis` entry, as in the simulation. [`crate::support::check`]
//! has refused every other kind of fault before the run started.

use crate::error::RealError;
use crate::launcher::Launcher;
use crate::replication::Replication;
use crate::timeshift::ClockFile;
use crate::world::RealWorld;
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::schedule::{actions, Action, Actions};
use lockcheck_core::topology::Role;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Records the nemesis's action `text`, of `kind`, on node `target`, as the simulation does.
fn record_nemesis(world: &RealWorld, target: usize, kind: &str, text: String) {
    world.record(
        target,
        Kind::Observe,
        Op::Nemesis {
            kind: kind.to_string(),
            action: text,
            target: Some(world.topology().name(target).to_string()),
        },
    );
}

/// The outcome of a restarted server's wait for readiness (a wait aborted because the server
/// was crashed again is no error).
async fn join_restart(task: JoinHandle<Result<(), RealError>>) -> Result<(), RealError> {
    match task.await {
        Ok(result) => result,
        Err(e) if e.is_cancelled() => Ok(()),
        Err(e) => panic!("a restarted server's readiness task panicked: {e}"),
    }
}

/// The nemesis of one run.
pub struct Nemesis {
    world: Rc<RealWorld>,
    launcher: Rc<RefCell<Launcher>>,
    /// Per server (in server order) whose clock the scenario moves: its shift file.
    server_clocks: RefCell<BTreeMap<usize, ClockFile>>,
    /// When the last action is due (ns since the start).
    quiet_ns: u64,
    /// Actions not yet applied, in order.
    pending: std::collections::VecDeque<(u64, Action, String)>,
    /// The replicated servers' Sentinel, which performs failovers.
    replication: Option<Rc<Replication>>,
    /// Per pair of etcd cluster members (lower, higher; server order): how many partitions in
    /// force cut them apart. The cluster cuts a pair once ([`crate::etcd_cluster::Cluster::cut`]),
    /// so overlapping partitions are counted here, as a proxy's link counts its causes.
    member_cuts: RefCell<BTreeMap<(usize, usize), u32>>,
    /// Per server restarted and not yet ready: the task that waits for it. The schedule goes on
    /// meanwhile: a member of a cluster becomes ready only once its peers answer, and a fault
    /// due meanwhile (a delay on its links ending, a partition healing) may be what it waits
    /// for.
    restarting: RefCell<BTreeMap<usize, JoinHandle<Result<(), RealError>>>>,
}

impl Nemesis {
    /// The nemesis of `world`'s scenario, acting on the servers of `launcher` (started in server
    /// order) and on the clocks of the servers in `server_clocks` (by server order), which run
    /// with the time-shift library.
    pub fn new(
        world: Rc<RealWorld>,
        launcher: Rc<RefCell<Launcher>>,
        server_clocks: BTreeMap<usize, ClockFile>,
    ) -> Nemesis {
        let schedule: Actions = actions(&world.scenario);
        Nemesis {
            world,
            launcher,
            server_clocks: RefCell::new(server_clocks),
            quiet_ns: lockcheck_core::schedule::quiet_after_ns(&schedule),
            pending: schedule.into(),
            replication: None,
            member_cuts: RefCell::default(),
            restarting: RefCell::default(),
        }
    }

    /// The nemesis, with `replication`'s Sentinel performing the scenario's failovers.
    pub fn with_replication(mut self, replication: Option<Rc<Replication>>) -> Nemesis {
        self.replication = replication;
        self
    }

    /// When every fault has ended (ns since the start; 0 without faults).
    pub fn quiet_after_ns(&self) -> u64 {
        self.quiet_ns
    }

    /// Applies every action due by now, without waiting for later ones. The runner calls this
    /// before it starts the clients, so that faults at 0 ms (a client held back from the start)
    /// are in force before any client runs.
    pub async fn strike_due(&mut self) -> Result<(), RealError> {
        while self
            .pending
            .front()
            .is_some_and(|(at, _, _)| *at <= self.world.true_ns())
        {
            let (_, action, text) = self.pending.pop_front().expect("checked above");
            self.apply(action, text).await?;
        }
        Ok(())
    }

    /// Applies the rest of the schedule, sleeping to each action's time, and ends once every
    /// server it restarted is ready (or with the error of one that was not).
    pub async fn run(mut self) -> Result<(), RealError> {
        while let Some((at, action, text)) = self.pending.pop_front() {
            let now = self.world.true_ns();
            if at > now {
                tokio::time::sleep(Duration::from_nanos(at - now)).await;
            }
            self.check_restarts().await?;
            self.apply(action, text).await?;
        }
        let restarting = std::mem::take(&mut *self.restarting.borrow_mut());
        for (_, task) in restarting {
            join_restart(task).await?;
        }
        Ok(())
    }

    /// The error of a restarted server that did not become ready, if one has ended so.
    async fn check_restarts(&self) -> Result<(), RealError> {
        let finished: Vec<usize> = self
            .restarting
            .borrow()
            .iter()
            .filter(|(_, task)| task.is_finished())
            .map(|(&s, _)| s)
            .collect();
        for s in finished {
            let task = self.restarting.borrow_mut().remove(&s);
            if let Some(task) = task {
                join_restart(task).await?;
            }
        }
        Ok(())
    }

    /// Stops waiting for server `s`'s restart (it is crashed or restarted again).
    fn forget_restart(&self, s: usize) {
        if let Some(task) = self.restarting.borrow_mut().remove(&s) {
            task.abort();
        }
    }

    /// Server `server`'s shift file; the runner made one for every server whose clock the
    /// scenario moves.
    fn server_clock(
        &self,
        server: usize,
        text: &str,
    ) -> Result<std::cell::RefMut<'_, ClockFile>, RealError> {
        std::cell::RefMut::filter_map(self.server_clocks.borrow_mut(), |c| c.get_mut(&server))
            .map_err(|_| {
                RealError::Unsupported(format!(
                    "{text}: server {server} was started without the time-shift library"
                ))
            })
    }

    async fn apply(&self, action: Action, text: String) -> Result<(), RealError> {
        let world = &self.world;
        let topology = world.topology();
        let target = match &action {
            Action::Pause(n)
            | Action::Resume(n)
            | Action::Crash(n, _)
            | Action::Restart(n)
            | Action::ClockJump(n, _)
            | Action::ClockDrift(n, _)
            | Action::MessagesSettled(n)
            | Action::Skipped(n) => *n,
            // Whether the scenario's partition holds messages or not, a real one holds them on
            // the way to a server: the proxies blackhole the link and TCP delivers what it held
            // after the heal. The way to the in-process resource follows the scenario.
            Action::Cut(_, links) | Action::Heal(_, links) => {
                let cut = matches!(action, Action::Cut(..));
                tracing::info!(at_ms = world.true_ns() / 1_000_000, "nemesis: {text}");
                self.partition(links, cut);
                let target = links.group[0];
                record_nemesis(world, target, action.kind(), text);
                return Ok(());
            }
            Action::MessagesStart(n, id, loss, delay) => {
                world.set_message_fault(*n, *id, Some((*loss, *delay)));
                *n
            }
            Action::MessagesEnd(n, id) => {
                world.set_message_fault(*n, *id, None);
                *n
            }
            Action::Failover(n) => {
                let (Some(replication), Some(server)) = (&self.replication, world.server_of(*n))
                else {
                    return Err(RealError::Unsupported(format!(
                        "{text}: failover needs replicated servers (params.redis.replicas)"
                    )));
                };
                tracing::info!(
                    at_ms = world.true_ns() / 1_000_000,
                    "nemesis: {text} (asking Sentinel)"
                );
                replication.failover(server).await?;
                world.set_primary(server);
                tracing::info!(
                    at_ms = world.true_ns() / 1_000_000,
                    "nemesis: Sentinel promoted {}",
                    topology.name(*n)
                );
                record_nemesis(world, *n, action.kind(), text);
                return Ok(());
            }
        };
        let kind = action.kind();
        let server = world.server_of(target);
        let client = (topology.role(target) == Role::Client).then_some(target);
        tracing::info!(at_ms = world.true_ns() / 1_000_000, "nemesis: {text}");
        match (action, client, server) {
            (
                Action::Skipped(_)
                | Action::MessagesStart(..)
                | Action::MessagesEnd(..)
                | Action::MessagesSettled(_),
                _,
                _,
            ) => {}
            (Action::Crash(..), Some(c), _) => world.crash_client(c),
            (Action::Restart(_), Some(c), _) => world.start_client(c),
            // A client process is stopped for real: everything in it, its library's threads
            // included.
            (Action::Pause(_), Some(c), _) => match world.processes() {
                Some(processes) => processes.pause(c, true),
                None => world.gates[c].close(),
            },
            (Action::Resume(_), Some(c), _) => match world.processes() {
                Some(processes) => processes.pause(c, false),
                None => world.gates[c].open(),
            },
            (Action::Pause(_), _, Some(s)) => self.launcher.borrow_mut().pause(s)?,
            (Action::Resume(_), _, Some(s)) => self.launcher.borrow_mut().resume(s)?,
            (Action::Crash(..), _, Some(s)) => {
                self.forget_restart(s);
                self.launcher.borrow_mut().crash(s)?;
                world.set_down(s, true);
            }
            (Action::Restart(_), _, Some(s)) => {
                self.forget_restart(s);
                self.launcher.borrow_mut().respawn(s)?;
                // Recorded once it is ready, by a task of its own: the schedule goes on.
                let (launcher, world) = (self.launcher.clone(), self.world.clone());
                let task = tokio::task::spawn_local(async move {
                    Launcher::until_ready(&launcher, s).await?;
                    world.set_down(s, false);
                    tracing::info!(
                        at_ms = world.true_ns() / 1_000_000,
                        "nemesis: {text} (ready)"
                    );
                    record_nemesis(&world, target, kind, text);
                    Ok(())
                });
                self.restarting.borrow_mut().insert(s, task);
                return Ok(());
            }
            // A client process whose clock moves runs under the time-shift library.
            (Action::ClockJump(_, by_ns), Some(c), _) => {
                match world.processes().and_then(|p| p.clock(c)) {
                    Some(mut file) => file.jump(by_ns),
                    None => world.clocks[c].borrow_mut().jump(by_ns),
                }
            }
            (Action::ClockDrift(_, rate), Some(c), _) => {
                match world.processes().and_then(|p| p.clock(c)) {
                    Some(mut file) => file.drift(rate),
                    None => world.clocks[c].borrow_mut().drift(rate),
                }
            }
            (Action::ClockJump(_, by_ns), _, Some(s)) => self.server_clock(s, &text)?.jump(by_ns),
            (Action::ClockDrift(_, rate), _, Some(s)) => self.server_clock(s, &text)?.drift(rate),
            (action, _, _) => {
                return Err(RealError::Unsupported(format!(
                    "{} of {} ({text})",
                    action.kind(),
                    topology.name(target)
                )))
            }
        }
        record_nemesis(world, target, kind, text);
        Ok(())
    }

    /// Cuts (or heals) every link between `group` and the rest that carries anything in real
    /// mode: a client's proxy to a server, a client's way to the resource, the links between
    /// two members of a ZooKeeper ensemble or of an etcd cluster.
    fn partition(&self, partition: &lockcheck_core::schedule::Cut, cut: bool) {
        let world = &self.world;
        let topology = world.topology();
        let resource = topology.resource();
        let servers = topology.with_role(Role::Server);
        for client in topology.with_role(Role::Client) {
            let links = world.links.get(client).into_iter().flatten();
            for (server, link) in servers.iter().zip(links) {
                if partition.cuts(client, *server) {
                    if cut {
                        link.cut();
                    } else {
                        link.heal();
                    }
                }
            }
            if partition.cuts(client, resource) {
                world.cut_from_resource(client, cut, partition.hold);
            }
        }
        // Between ensemble members: both of a member's proxies to the other (a real partition
        // holds what crosses it on these too, and TCP or the members' timeouts deal with it).
        for peer in &world.peer_links {
            if partition.cuts(servers[peer.from], servers[peer.to]) {
                for link in &peer.links {
                    if cut {
                        link.cut();
                    } else {
                        link.heal();
                    }
                }
            }
        }
        // Between etcd cluster members: the pair's links, both ways, through the cluster; cut
        // by the first partition in force across the pair, healed after the last.
        if let Some(cluster) = world.etcd_cluster() {
            let mut counts = self.member_cuts.borrow_mut();
            for (i, &a) in servers.iter().enumerate() {
                for (j, &b) in servers.iter().enumerate().skip(i + 1) {
                    if !partition.cuts(a, b) {
                        continue;
                    }
                    let count = counts.entry((i, j)).or_default();
                    if cut {
                        *count += 1;
                        if *count == 1 {
                            cluster.cut(i, j);
                        }
                    } else if *count > 0 {
                        *count -= 1;
                        if *count == 0 {
                            cluster.heal(i, j);
                        }
                    }
                }
            }
        }
    }
}
