//! The state of one run that lives outside every node: clocks, power, links (in [`Links`]) and
//! the history. The simulator owns these, as FoundationDB's simulator owns the network, clocks and
//! disks; nodes reach them only through their own [`crate::env::SimEnv`], store and server glue.

use crate::links::Links;
use crate::signal::Signal;
use lockcheck_algorithms::describe::Servers;
use lockcheck_core::clock::{NodeClock, WALL_ORIGIN_NS};
use lockcheck_core::history::{History, Kind, Op, Recording, Retention};
use lockcheck_core::scenario::{CrashScope, Scenario};
use lockcheck_core::topology::Topology;
use madsim::task::NodeId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Worlds alive in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many worlds are alive in this process. A finished run leaves none behind: a task that
/// outlives its run keeps its world, with the history and every server's state, alive, and a
/// search of thousands of cases would keep them all.
pub fn live_worlds() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// A run's shared state. One per run; every node holds an `Arc` to it.
pub struct World {
    /// The scenario being run.
    pub scenario: Scenario,
    /// Its nodes.
    pub topology: Topology,
    /// Simulated time elapsed at the start of the run (madsim's clock, never the host's).
    start: Duration,
    clocks: Mutex<Vec<NodeClock>>,
    /// The history, folded and capped as both worlds record it ([`Recording`]).
    history: Mutex<Recording>,
    /// Partitions and message faults (see [`Links`]).
    links: Mutex<Links>,
    node_ids: Mutex<Vec<Option<NodeId>>>,
    /// Per node: whether it is up, and what its crashes were.
    power: Mutex<Vec<Power>>,
    /// Per client: critical sections still to do (kept here so a restarted client goes on).
    remaining: Mutex<Vec<u32>>,
    /// Per client: finished its workload.
    finished: Mutex<Vec<bool>>,
    /// The server clients send to, for single-server algorithms (changed by `failover`).
    primary: Mutex<usize>,
    /// Bound addresses and their inboxes.
    network: Mutex<crate::net::Network>,
    /// Nodes paused now ([`World::pause`]; an ensemble's members read this to tell a peer that
    /// answers nothing, as a silent TCP peer is told by its timeouts).
    paused: Mutex<std::collections::BTreeSet<usize>>,
    /// A ZooKeeper ensemble's replicated state, shared by its members (none for other runs).
    pub ensemble: std::sync::OnceLock<std::sync::Arc<crate::zookeeper::ensemble::Ensemble>>,
    /// An etcd cluster's raft state and committed keyspace, shared by its members (none for
    /// other runs).
    pub etcd_cluster: std::sync::OnceLock<std::sync::Arc<crate::etcd::cluster::Cluster>>,
    /// What the run's main task waits for instead of polling: a node crashed or restarted, a
    /// client finished, or the probe ended.
    pub progress: Signal,
    /// What a server's timers wait for besides their own deadline: a node's clock was moved
    /// (its deadlines now fall at other true times) or another server became the primary.
    pub clocks_and_roles: Signal,
    /// What an ensemble's members wait for besides their timers: who reaches whom changed
    /// ([`World::reach_changed`]).
    pub reach: Signal,
}

/// Whether a node is up, and what its crashes were: what the network and a restarting server
/// need to know of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Power {
    /// Crashed and not restarted.
    pub down: bool,
    /// How it last crashed (`None`: never). While `down`, how it is down; after the restart,
    /// what the restart recovers from.
    pub last_crash: Option<CrashScope>,
    /// How many times it has crashed. A connection opened to an earlier incarnation is dead
    /// (see [`crate::net`]).
    pub incarnation: u64,
}

impl Power {
    /// Whether its process is down while its machine is up: its kernel refuses connections.
    pub fn refuses(&self) -> bool {
        self.down && self.last_crash == Some(CrashScope::Process)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

impl World {
    /// A fresh world for `scenario`, with true time starting now. Call inside the runtime.
    pub fn new(scenario: Scenario) -> World {
        World::with_retention(scenario, Retention::default())
    }

    /// [`World::new`], its history kept as `retention` says (tests fold sooner, or not at all).
    pub fn with_retention(scenario: Scenario, retention: Retention) -> World {
        let topology = scenario.topology();
        let n = topology.len();
        let clients = scenario.clients as usize;
        let per_client = scenario.workload.acquisitions_per_client;
        // A server's monotonic clock starts where its process's start left it, so its periodic
        // timers (a ZooKeeper tick, etcd's lessor loop, Redis's expiry cycle) have a phase of
        // their own (`core::server_clock`); the clients' start at 0.
        let clocks = (0..n)
            .map(|i| match topology.role(i) {
                lockcheck_core::topology::Role::Server => NodeClock::reading(
                    0,
                    WALL_ORIGIN_NS,
                    lockcheck_core::server_clock::origin_ms(&scenario, topology.name(i))
                        * 1_000_000,
                ),
                _ => NodeClock::default(),
            })
            .collect();
        LIVE.fetch_add(1, Ordering::Relaxed);
        World {
            scenario,
            topology,
            start: madsim::time::TimeHandle::current().elapsed(),
            clocks: Mutex::new(clocks),
            history: Mutex::new(Recording::new(retention)),
            links: Mutex::new(Links::new(n)),
            node_ids: Mutex::new(vec![None; n]),
            power: Mutex::new(vec![Power::default(); n]),
            remaining: Mutex::new(vec![per_client; clients]),
            finished: Mutex::new(vec![false; clients]),
            primary: Mutex::new(clients),
            network: Mutex::new(crate::net::Network::default()),
            paused: Mutex::new(std::collections::BTreeSet::new()),
            ensemble: std::sync::OnceLock::new(),
            etcd_cluster: std::sync::OnceLock::new(),
            progress: Signal::default(),
            clocks_and_roles: Signal::default(),
            reach: Signal::default(),
        }
    }

    /// The simulated network's bindings (see [`crate::net`]).
    pub(crate) fn network(&self) -> std::sync::MutexGuard<'_, crate::net::Network> {
        self.network.lock().unwrap()
    }

    /// Pauses node `node`: madsim freezes its tasks, and the world remembers it, because madsim
    /// keeps no pause state anyone can read (an ensemble's members ask [`World::is_paused`]).
    /// The one way to pause a node, so the two cannot disagree.
    pub fn pause(&self, handle: &madsim::runtime::Handle, node: usize) {
        handle.pause(self.node_id(node));
        self.paused.lock().unwrap().insert(node);
    }

    /// Resumes node `node` (see [`World::pause`]).
    pub fn resume(&self, handle: &madsim::runtime::Handle, node: usize) {
        handle.resume(self.node_id(node));
        self.paused.lock().unwrap().remove(&node);
    }

    /// Whether node `node` is paused now.
    pub fn is_paused(&self, node: usize) -> bool {
        self.paused.lock().unwrap().contains(&node)
    }

    /// True time since the start of the run.
    pub fn true_ns(&self) -> u64 {
        (madsim::time::TimeHandle::current().elapsed() - self.start).as_nanos() as u64
    }

    /// A copy of node `node`'s clock.
    pub fn clock(&self, node: usize) -> NodeClock {
        self.clocks.lock().unwrap()[node].clone()
    }

    /// Changes node `node`'s clock at the current true time.
    pub fn adjust_clock(&self, node: usize, change: impl FnOnce(&mut NodeClock, u64)) {
        let now = self.true_ns();
        change(&mut self.clocks.lock().unwrap()[node], now);
        self.clocks_and_roles.notify();
    }

    /// Node `node`'s wall clock now, in ns since the Unix epoch.
    pub fn wall_ns(&self, node: usize) -> i64 {
        self.clock(node).wall_ns(self.true_ns())
    }

    /// Node `node`'s monotonic clock now.
    pub fn mono_ns(&self, node: usize) -> u64 {
        self.clock(node).mono_ns(self.true_ns())
    }

    /// Appends to the history, stamped with true time and `node`'s wall clock. Once the
    /// history is full ([`Recording`]'s cap), nothing more is kept, and the run is told to stop
    /// (its main task waits on [`World::progress`]).
    pub fn record(&self, node: usize, kind: Kind, op: Op) {
        let true_ns = self.true_ns();
        let local_ns = self.clock(node).wall_ns(true_ns) - WALL_ORIGIN_NS;
        let name = self.topology.name(node);
        let mut history = self.history.lock().unwrap();
        let was_full = history.is_full();
        history.push(true_ns, name, local_ns, kind, op);
        if !was_full && history.is_full() {
            drop(history);
            self.progress.notify();
        }
    }

    /// Whether the history is full: the run is to stop.
    pub fn history_full(&self) -> bool {
        self.history.lock().unwrap().is_full()
    }

    /// Reads the history so far without copying it.
    pub fn with_history<R>(&self, read: impl FnOnce(&History) -> R) -> R {
        read(self.history.lock().unwrap().history())
    }

    /// The history so far.
    pub fn history(&self) -> History {
        self.history.lock().unwrap().history().clone()
    }

    /// The history, taken out of the world (what a finished run hands on, without a copy).
    pub fn take_history(&self) -> History {
        let mut recording = self.history.lock().unwrap();
        std::mem::take(&mut *recording).into_history()
    }

    /// Registers the madsim id of node `node`.
    pub fn set_node_id(&self, node: usize, id: NodeId) {
        self.node_ids.lock().unwrap()[node] = Some(id);
    }

    /// The madsim ids of every node started so far.
    pub fn started_node_ids(&self) -> Vec<NodeId> {
        self.node_ids
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .copied()
            .collect()
    }

    /// The madsim id of node `node`.
    pub fn node_id(&self, node: usize) -> NodeId {
        self.node_ids.lock().unwrap()[node].expect("node not started")
    }

    /// Who reaches whom changed: a link was cut or healed, a node paused, resumed, crashed or
    /// restarted. An ensemble's members act on it at once (a real one's election messages and
    /// commits, held across a cut, are answered the moment it heals).
    pub fn reach_changed(&self) {
        self.reach.notify();
    }

    /// Marks node `node` crashed by `scope`: a new incarnation starts, and every connection to
    /// the old one is dead.
    pub fn set_crashed(&self, node: usize, scope: CrashScope) {
        let power = &mut self.power.lock().unwrap()[node];
        power.down = true;
        power.last_crash = Some(scope);
        power.incarnation += 1;
        self.progress.notify();
    }

    /// Marks node `node` running again.
    pub fn set_restarted(&self, node: usize) {
        self.power.lock().unwrap()[node].down = false;
        self.progress.notify();
    }

    /// Node `node`'s power state now.
    pub fn power(&self, node: usize) -> Power {
        self.power.lock().unwrap()[node]
    }

    /// Whether node `node` is crashed.
    pub fn is_down(&self, node: usize) -> bool {
        self.power(node).down
    }

    /// The links between nodes: partitions and message faults (see [`Links`]).
    pub fn links(&self) -> std::sync::MutexGuard<'_, Links> {
        self.links.lock().unwrap()
    }

    /// The current primary server.
    pub fn primary(&self) -> usize {
        *self.primary.lock().unwrap()
    }

    /// Makes `node` the primary.
    pub fn set_primary(&self, node: usize) {
        *self.primary.lock().unwrap() = node;
        self.clocks_and_roles.notify();
    }

    /// The servers the lock talks to right now: every Redlock master, or the current primary of
    /// a single-server lock (replicas serve no client until promoted).
    pub fn lock_servers(&self) -> Vec<usize> {
        match self.scenario.algorithm.description().servers {
            Servers::Masters { .. } => self
                .topology
                .with_role(lockcheck_core::topology::Role::Server),
            Servers::One => vec![self.primary()],
        }
    }

    /// How many of `servers` node `node` cannot reach right now: crashed, or cut off in either
    /// direction.
    pub fn unreachable(&self, node: usize, servers: &[usize]) -> usize {
        let links = self.links();
        servers
            .iter()
            .filter(|&&s| self.is_down(s) || links.is_cut(node, s) || links.is_cut(s, node))
            .count()
    }

    /// Takes one critical section from client `client`'s allowance; false when none is left.
    pub fn take_acquisition(&self, client: usize) -> bool {
        let mut r = self.remaining.lock().unwrap();
        if r[client] == 0 {
            return false;
        }
        r[client] -= 1;
        true
    }

    /// Critical sections client `client` still has to do.
    pub fn remaining(&self, client: usize) -> u32 {
        self.remaining.lock().unwrap()[client]
    }

    /// Marks client `client` finished.
    pub fn finish(&self, client: usize) {
        self.finished.lock().unwrap()[client] = true;
        self.progress.notify();
    }

    /// Whether client `client` finished its workload.
    pub fn is_finished(&self, client: usize) -> bool {
        self.finished.lock().unwrap()[client]
    }
}
