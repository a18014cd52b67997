//! The state of one real run that lives outside the clients' tasks: the scenario, the servers'
//! addresses and whether they are up, each client's routes to them (its proxies), the clients'
//! pause gates, the links partitions cut and message faults impair, the resource and the
//! history.
//! The counterpart of the simulator's `World`, for a world whose clocks, disks and network are
//! the real ones.

use crate::endpoints::Login;
use crate::gate::PauseGate;
use crate::proxy::{Impairment, Link};
use crate::recorder::Recorder;
use crate::resource::Resource;
use crate::timeshift::ClockShift;
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::message_faults::MessageFaults;
use lockcheck_core::scenario::Scenario;
use lockcheck_core::topology::{Role, Topology};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The partitions in force between one client and the resource.
#[derive(Clone, Copy, Debug, Default)]
struct ResourceCuts {
    /// Partitions that lose what crosses them.
    losing: u32,
    /// Partitions that hold what crosses them until they heal.
    holding: u32,
}

/// A run's shared state. One per run, shared by the client tasks, the nemesis and the runner
/// (all on one thread).
pub struct RealWorld {
    /// The scenario being run.
    pub scenario: Scenario,
    /// The history.
    pub recorder: Rc<Recorder>,
    /// The protected resource.
    pub resource: Resource,
    /// Server addresses, in server order (`redis-0`, `redis-1`, …).
    pub servers: Vec<SocketAddr>,
    /// How the clients log in to the servers (nothing, on servers lockcheck starts).
    pub login: Login,
    /// etcd: every session lease the run's clients were granted ([`RealWorld::with_leases`]).
    pub leases: crate::etcd_store::LeaseLedger,
    /// Per client, per server: the address of the proxy the client reaches that server through.
    pub routes: Vec<Vec<SocketAddr>>,
    /// How the liveness probe reaches the servers, when not directly (see
    /// [`RealWorld::with_probe_routes`]).
    probe_routes: Option<Vec<SocketAddr>>,
    /// Per client, per server: that proxy's link (cut by the client's pauses and by
    /// partitions).
    pub links: Vec<Vec<Link>>,
    /// Per client: its pause gate.
    pub gates: Vec<PauseGate>,
    /// Between the servers of an ensemble: each member's proxies to each other member (empty
    /// for servers that do not talk to each other), which partitions cut.
    pub peer_links: Vec<crate::ensemble::PeerLink>,
    /// An etcd cluster's member-to-member links, which partitions cut and message faults on a
    /// member impair.
    etcd_cluster: Option<Rc<crate::etcd_cluster::Cluster>>,
    /// Per client: partitions in force between it and the resource.
    resource_cuts: RefCell<Vec<ResourceCuts>>,
    /// Woken whenever a partition between a client and the resource heals, for the accesses a
    /// holding partition keeps in flight.
    resource_healed: tokio::sync::Notify,
    /// The `loss` and `delay` faults in force, by node.
    messages: RefCell<MessageFaults>,
    /// Draws which accesses to the resource a `loss` fault drops (seeded by the scenario).
    resource_losses: RefCell<StdRng>,
    /// Per client: its clocks, which its `Env` reads and the nemesis moves.
    pub clocks: Vec<Rc<RefCell<ClockShift>>>,
    /// Per server: crashed and not restarted.
    down: RefCell<Vec<bool>>,
    /// Per client: critical sections still to do.
    remaining: RefCell<Vec<u32>>,
    /// Per client: finished its workload.
    finished: RefCell<Vec<bool>>,
    /// Per client: its running task (none while crashed, and before it starts).
    tasks: RefCell<Vec<Option<JoinHandle<()>>>>,
    /// Per client: crashed and not restarted.
    clients_down: RefCell<Vec<bool>>,
    /// Per client: how many times it was started; a restarted client is a new process, with new
    /// randomness (new tokens, a new owner id).
    incarnations: RefCell<Vec<u64>>,
    /// With Redis replicas: Sentinel's address and each server's announced address, which
    /// clients find the primary by ([`RealWorld::with_sentinel`]).
    sentinel: Option<(SocketAddr, Vec<SocketAddr>)>,
    /// The primary (in server order) since the last failover: the one server the lock of a
    /// replicated Redis talks to, as far as the history's accounts go.
    primary: std::cell::Cell<usize>,
    /// With `--client`: the user's client processes, which run the workload instead of
    /// lockcheck's own clients.
    processes: Option<Rc<crate::client_process::ClientProcesses>>,
    /// The first error of a client process: it ends the run.
    client_error: RefCell<Option<crate::error::RealError>>,
}

impl RealWorld {
    /// The same world, its clients logging in to the servers as `login`.
    pub fn with_login(mut self, login: Login) -> RealWorld {
        self.login = login;
        self
    }

    /// The same world, its etcd clients writing down the session leases they are granted in
    /// `ledger` (which outlives the world: the run revokes them at its end).
    pub fn with_leases(mut self, ledger: crate::etcd_store::LeaseLedger) -> RealWorld {
        self.leases = ledger;
        self
    }

    /// The world of `scenario`, whose servers listen on `servers`, each client reaching them
    /// through its `routes` (per client, per server: a proxy's address and link; a client
    /// without routes reaches the servers directly); time starts now. Each client's links are
    /// attached to its pause gate.
    pub fn new(
        scenario: Scenario,
        servers: Vec<SocketAddr>,
        routes: Vec<Vec<(SocketAddr, Link)>>,
    ) -> RealWorld {
        let topology: Topology = scenario.topology();
        let recorder = Rc::new(Recorder::new(topology.clone()));
        let resource = Resource::new(
            recorder.clone(),
            topology.resource(),
            scenario.params.fencing,
        );
        let clients = scenario.clients as usize;
        let per_client = scenario.workload.acquisitions_per_client;
        let gates: Vec<PauseGate> = (0..clients).map(|_| PauseGate::new()).collect();
        let (routes, links): (Vec<Vec<SocketAddr>>, Vec<Vec<Link>>) = routes
            .into_iter()
            .map(|to_servers| to_servers.into_iter().unzip())
            .unzip();
        for (gate, client_links) in gates.iter().zip(&links) {
            client_links.iter().for_each(|l| gate.attach(l.clone()));
        }
        RealWorld {
            recorder,
            resource,
            gates,
            routes,
            probe_routes: None,
            links,
            peer_links: Vec::new(),
            etcd_cluster: None,
            resource_cuts: RefCell::new(vec![ResourceCuts::default(); clients]),
            resource_healed: tokio::sync::Notify::new(),
            messages: RefCell::new(MessageFaults::new(topology.len())),
            resource_losses: RefCell::new(StdRng::seed_from_u64(scenario.seed)),
            clocks: (0..clients).map(|_| Rc::default()).collect(),
            down: RefCell::new(vec![false; servers.len()]),
            remaining: RefCell::new(vec![per_client; clients]),
            finished: RefCell::new(vec![false; clients]),
            tasks: RefCell::new((0..clients).map(|_| None).collect()),
            clients_down: RefCell::new(vec![false; clients]),
            incarnations: RefCell::new(vec![0; clients]),
            sentinel: None,
            primary: std::cell::Cell::new(0),
            processes: None,
            client_error: RefCell::new(None),
            servers,
            login: Login::default(),
            leases: Default::default(),
            scenario,
        }
    }

    /// The world with its Redis servers replicated under the Sentinel at `sentinel`, which
    /// names server `i` by `announced[i]`: clients ask it for the primary.
    pub fn with_sentinel(mut self, sentinel: SocketAddr, announced: Vec<SocketAddr>) -> RealWorld {
        self.sentinel = Some((sentinel, announced));
        self
    }

    /// The world whose clients are `processes` (`--client`), started before time began.
    pub fn with_processes(
        mut self,
        processes: Rc<crate::client_process::ClientProcesses>,
    ) -> RealWorld {
        self.processes = Some(processes);
        self
    }

    /// The user's client processes, with `--client`.
    pub fn processes(&self) -> Option<&crate::client_process::ClientProcesses> {
        self.processes.as_deref()
    }

    /// Ends the run with `error` (a client process that broke the protocol); the first one
    /// stands.
    pub fn fail_client(&self, error: crate::error::RealError) {
        self.client_error.borrow_mut().get_or_insert(error);
    }

    /// The error a client process ended the run with, if one did.
    pub fn take_client_error(&self) -> Option<crate::error::RealError> {
        self.client_error.borrow_mut().take()
    }

    /// How client `client` finds the primary, when the servers are replicated under Sentinel:
    /// Sentinel names a server, and the client reaches it by its own route.
    pub fn sentinel_route(&self, client: usize) -> Option<crate::replication::SentinelRoute> {
        let (sentinel, announced) = self.sentinel.as_ref()?;
        Some(crate::replication::SentinelRoute {
            sentinel: *sentinel,
            announced: announced.clone(),
            routes: self.servers_for(client),
        })
    }

    /// Records that Sentinel made server `server` (in server order) the primary.
    pub fn set_primary(&self, server: usize) {
        self.primary.set(server);
    }

    /// The servers (in server order) the lock talks to now: with replicas, the primary alone
    /// (replicas serve no client until promoted); otherwise every server.
    pub fn lock_servers(&self) -> Vec<usize> {
        if self.sentinel.is_some() {
            vec![self.primary.get()]
        } else {
            (0..self.servers.len()).collect()
        }
    }

    /// How many of the lock's servers ([`RealWorld::lock_servers`]) are crashed now.
    pub fn lock_servers_down(&self) -> usize {
        let down = self.down.borrow();
        self.lock_servers().iter().filter(|&&s| down[s]).count()
    }

    /// The world with `peer_links` between its servers (an ensemble's).
    pub fn with_peer_links(mut self, peer_links: Vec<crate::ensemble::PeerLink>) -> RealWorld {
        self.peer_links = peer_links;
        self
    }

    /// The world with `cluster`'s links between its servers (an etcd cluster's), if any.
    pub fn with_etcd_cluster(
        mut self,
        cluster: Option<Rc<crate::etcd_cluster::Cluster>>,
    ) -> RealWorld {
        self.etcd_cluster = cluster;
        self
    }

    /// The etcd cluster the servers are, if they are one.
    pub fn etcd_cluster(&self) -> Option<&crate::etcd_cluster::Cluster> {
        self.etcd_cluster.as_deref()
    }

    /// The run's nodes.
    pub fn topology(&self) -> &Topology {
        self.recorder.topology()
    }

    /// Time since the start of the run, in ns.
    pub fn true_ns(&self) -> u64 {
        self.recorder.true_ns()
    }

    /// Appends to the history as node `node`.
    pub fn record(&self, node: usize, kind: Kind, op: Op) {
        self.recorder.record(node, kind, op);
    }

    /// The server order (0 for `redis-0`) of topology node `node`, if it is a server.
    pub fn server_of(&self, node: usize) -> Option<usize> {
        self.topology()
            .with_role(Role::Server)
            .iter()
            .position(|&n| n == node)
    }

    /// Marks server `server` (in server order) crashed or up again.
    pub fn set_down(&self, server: usize, down: bool) {
        self.down.borrow_mut()[server] = down;
    }

    /// How many servers are crashed now.
    pub fn servers_down(&self) -> usize {
        self.down.borrow().iter().filter(|d| **d).count()
    }

    /// The names of the servers crashed now.
    pub fn down_names(&self) -> Vec<String> {
        let servers = self.topology().with_role(Role::Server);
        self.down
            .borrow()
            .iter()
            .zip(servers)
            .filter(|(down, _)| **down)
            .map(|(_, n)| self.topology().name(n).to_string())
            .collect()
    }

    /// The servers as client `client` reaches them: its proxies, or the servers themselves for
    /// a node without routes (the liveness probe).
    pub fn servers_for(&self, client: usize) -> Vec<SocketAddr> {
        self.routes
            .get(client)
            .filter(|routes| !routes.is_empty())
            .cloned()
            .or_else(|| self.probe_routes.clone())
            .unwrap_or_else(|| self.servers.clone())
    }

    /// The same world, its liveness probe reaching the servers through `routes` (proxies no
    /// fault acts on) rather than directly: over TLS, which the proxies speak.
    pub fn with_probe_routes(mut self, routes: Vec<SocketAddr>) -> RealWorld {
        self.probe_routes = Some(routes);
        self
    }

    /// Counts one partition more (`cut`) or fewer between client `client` and the resource; a
    /// `hold`ing one keeps what crosses it in flight until it heals, the others lose it.
    pub fn cut_from_resource(&self, client: usize, cut: bool, hold: bool) {
        if let Some(cuts) = self.resource_cuts.borrow_mut().get_mut(client) {
            let count = if hold {
                &mut cuts.holding
            } else {
                &mut cuts.losing
            };
            *count = if cut {
                *count + 1
            } else {
                count.saturating_sub(1)
            };
        }
        if !cut {
            self.resource_healed.notify_waiters();
        }
    }

    /// Carries a message between client `client` and the resource across the partitions in
    /// force, as the simulated network does: lost (false) when a partition that loses messages
    /// separates them, now or when the holding ones have healed; otherwise it waits until no
    /// holding partition separates them (a TCP connection retransmitting), and true.
    pub async fn cross_to_resource(&self, client: usize) -> bool {
        loop {
            let healed = self.resource_healed.notified();
            let cuts = self.resource_cuts.borrow().get(client).copied();
            let cuts = cuts.unwrap_or_default();
            if cuts.losing > 0 {
                return false;
            }
            if cuts.holding == 0 {
                return true;
            }
            healed.await;
        }
    }

    /// Starts (`Some((loss, delay))`) or ends (`None`) message fault `id` on node `node`, and
    /// impairs every link of `node` (a client's proxies, or every client's proxy to a server,
    /// and a cluster member's links to the other members, both ways) with what a message across
    /// it suffers now.
    pub fn set_message_fault(&self, node: usize, id: usize, fault: Option<(f64, Duration)>) {
        self.messages.borrow_mut().set(node, id, fault);
        let topology = &self.topology();
        let servers = topology.with_role(Role::Server);
        let messages = self.messages.borrow();
        for client in topology.with_role(Role::Client) {
            let links = self.links.get(client).into_iter().flatten();
            for (&server, link) in servers.iter().zip(links) {
                if client == node || server == node {
                    let (loss, delay) = messages.between(client, server);
                    link.impair(Impairment { delay, loss });
                }
            }
        }
        if let Some(cluster) = &self.etcd_cluster {
            for (i, &from) in servers.iter().enumerate() {
                for (j, &to) in servers.iter().enumerate() {
                    let Some(link) = cluster.link(i, j).filter(|_| from == node || to == node)
                    else {
                        continue;
                    };
                    let (loss, delay) = messages.between(from, to);
                    link.impair(Impairment { delay, loss });
                }
            }
        }
    }

    /// What a message from `from` to `to` suffers now: its drop probability and added latency.
    pub fn message_faults(&self, from: usize, to: usize) -> (f64, Duration) {
        self.messages.borrow().between(from, to)
    }

    /// Whether a message from `from` to the resource, or back, is lost now: a draw from the
    /// scenario's seed against the `loss` faults in force.
    pub fn resource_message_lost(&self, from: usize, to: usize) -> bool {
        let (loss, _) = self.message_faults(from, to);
        loss > 0.0 && self.resource_losses.borrow_mut().gen::<f64>() < loss
    }

    /// Whether a partition separates client `client` from the resource now (holding or not).
    pub fn is_cut_from_resource(&self, client: usize) -> bool {
        self.resource_cuts
            .borrow()
            .get(client)
            .is_some_and(|c| c.losing + c.holding > 0)
    }

    /// Takes one critical section from client `client`'s allowance; false when none is left.
    pub fn take_acquisition(&self, client: usize) -> bool {
        let mut r = self.remaining.borrow_mut();
        if r[client] == 0 {
            return false;
        }
        r[client] -= 1;
        true
    }

    /// Critical sections client `client` still has to do.
    pub fn remaining(&self, client: usize) -> u32 {
        self.remaining.borrow()[client]
    }

    /// Marks client `client` finished.
    pub fn finish(&self, client: usize) {
        self.finished.borrow_mut()[client] = true;
    }

    /// Whether client `client` finished its workload.
    pub fn is_finished(&self, client: usize) -> bool {
        self.finished.borrow()[client]
    }

    /// Starts client `client`'s workload as a new task (a new process: the next incarnation),
    /// going on with the critical sections it has left.
    pub fn start_client(self: &Rc<Self>, client: usize) {
        self.incarnations.borrow_mut()[client] += 1;
        self.clients_down.borrow_mut()[client] = false;
        let task = if self.processes.is_some() {
            tokio::task::spawn_local(crate::client_process::drive(self.clone(), client))
        } else {
            tokio::task::spawn_local(crate::client::run_client(self.clone(), client))
        };
        self.tasks.borrow_mut()[client] = Some(task);
    }

    /// Kills client `client` (`kill -9` of a client process): its task is dropped at once, with
    /// its connections, which the servers see closed; whatever it held, it holds no more in its
    /// own view, and the servers keep until they notice.
    pub fn crash_client(&self, client: usize) {
        self.clients_down.borrow_mut()[client] = true;
        if let Some(task) = self.tasks.borrow_mut()[client].take() {
            task.abort();
        }
        if let Some(processes) = &self.processes {
            processes.kill(client);
        }
    }

    /// Client `client`'s task if it ended without finishing its workload, which only a panic
    /// does (a crash drops the task from here first). The runner re-raises the panic rather than
    /// judge a history that silently lacks that client.
    pub fn take_failed_task(&self, client: usize) -> Option<JoinHandle<()>> {
        let mut tasks = self.tasks.borrow_mut();
        let ended = tasks[client].as_ref().is_some_and(JoinHandle::is_finished);
        if ended && !self.is_finished(client) {
            tasks[client].take()
        } else {
            None
        }
    }

    /// Whether client `client` is crashed (and not restarted).
    pub fn is_client_down(&self, client: usize) -> bool {
        self.clients_down.borrow()[client]
    }

    /// Node `node`'s incarnation if it is a client: 1 for its first start, one more for each
    /// restart; 0 for other nodes (the probe).
    pub fn incarnation_of(&self, node: usize) -> u64 {
        self.incarnations.borrow().get(node).copied().unwrap_or(0)
    }

    /// Stops every client task (at the end of the run), and kills every client process.
    pub fn stop_clients(&self) {
        for (client, task) in self.tasks.borrow_mut().iter_mut().enumerate() {
            if let Some(task) = task.take() {
                task.abort();
            }
            if let Some(processes) = &self.processes {
                processes.kill(client);
            }
        }
    }
}
