//! The simulated server process, the same for every backend: what the machine keeps across a
//! crash (its [`Disk`], and what the simulator saw), how a process starts from it, its timer,
//! its connections closing, and how it records what it does to its keys.
//!
//! A backend brings a [`Server`]: its model behind the network, in a handful of methods. [`run`]
//! is the process: [`Server::start`] from what the disk kept after the last crash (by its scope:
//! a process crash keeps what was written, a machine crash what was synced), then one timer task
//! sleeping towards [`Server::next_due`], the backend's own tasks, and the requests, served one at
//! a time. Crashing it is killing its node, and restarting it is running [`run`] again on the
//! same [`Machine`] (madsim reruns a restarted node's main future): nothing in the process
//! survives, and everything on the machine does. [`start`] creates a server's machine and node,
//! as real mode's launcher starts a `ServerKind`.

use crate::disk::Disk;
use crate::net::{serve, Handled, Incoming, Peer};
use crate::signal::Due;
use crate::world::World;
use lockcheck_core::clock::WALL_ORIGIN_NS;
use lockcheck_core::history::{KeyChange, Kind, Op};
use lockcheck_core::scenario::{CrashScope, Persistence};
use madsim::runtime::Handle;
use std::any::Any;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// A backend's server, run by [`run`] (see the module's documentation).
pub trait Server: Sized + 'static {
    /// What its clients send (each backend's client sends it with `RpcClient::call`, and knows
    /// the response type).
    type Request: Any;
    /// What its disk holds: the state a restart recovers.
    type Durable: Clone + Send + 'static;
    /// What the simulator keeps for it beside the disk across restarts (`()` if nothing): what
    /// its history last showed, when that is how a restart's losses are told.
    type Kept: Default + Send + Sync + 'static;

    /// The policy its disk is written under, for server node `node`.
    fn persistence(world: &World, node: usize) -> Persistence;

    /// A process starting on `node`: from `recovered`, what the disk kept (`None` on the first
    /// start, or when nothing survived the crash); a restart records here what the crash lost.
    fn start(node: Node<Self>, recovered: Option<Self::Durable>) -> Self;

    /// The node it runs on.
    fn node(&self) -> &Node<Self>;

    /// Answers a request from `from`: now, later, or not at all.
    fn handle(self: &Rc<Self>, from: Peer, request: Self::Request) -> Handled;

    /// The process behind connection `from` died: its kernel closed the connection. Servers
    /// that keep per-connection state (a transaction, a session's watches) let it go: that
    /// connection's, not those of a newer process on the same node.
    fn connection_closed(&self, from: Peer) {
        let _ = from;
    }

    /// When its timer is next due: `(at, left)`, a deadline in the unit it offers to
    /// [`Node::due`] and how long until then on its own clock; `None`: nothing is due.
    fn next_due(&self) -> Option<(u64, Duration)>;

    /// Its timer's time came: advance its model's time (expire keys, sessions, lock waits).
    fn on_due(&self);

    /// Starts its own tasks, after the timer's (an fsync loop, replication).
    fn spawn_tasks(self: &Rc<Self>) {}
}

/// What a server's process is given: its node, its disk, what the simulator kept for it, and the
/// wake-up of its timer.
pub struct Node<S: Server> {
    /// The world it runs in.
    pub world: Arc<World>,
    /// Its node index.
    pub me: usize,
    /// Its disk: outlives the process, and the machine's crashes up to what was synced.
    pub disk: Arc<Disk<S::Durable>>,
    /// What the simulator keeps for it across restarts.
    pub kept: Arc<S::Kept>,
    /// Its timer's wake-up: offer it every deadline a request may have brought forward.
    pub due: Due,
    /// The scope of the crash it restarts after (`None`: its first start).
    pub crashed: Option<CrashScope>,
}

impl<S: Server> Node<S> {
    /// Its wall clock in ms since the Unix epoch (what `mstime()` or `NOW()` read).
    pub fn wall_ms(&self) -> u64 {
        (self.world.wall_ns(self.me).max(0) / 1_000_000) as u64
    }

    /// Its monotonic clock in ms.
    pub fn mono_ms(&self) -> u64 {
        self.world.mono_ns(self.me) / 1_000_000
    }

    /// Records what it did to one of its keys.
    pub fn record(&self, event: KeyEvent) {
        let by = event
            .by
            .map(|node| self.world.topology.name(node).to_string());
        self.world.record(
            self.me,
            Kind::Observe,
            Op::Key {
                key: event.key,
                change: event.change,
                field: event.field,
                value: event.value,
                by,
                expires_local_ns: event
                    .expires_at_ms
                    .map(|ms| ms as i64 * 1_000_000 - WALL_ORIGIN_NS),
            },
        );
    }
}

/// What a server did to one of its keys (a Redis key, a znode's path, a lock row's name), as
/// the checkers read it from the history.
pub struct KeyEvent {
    /// The key.
    pub key: String,
    /// What happened to it.
    pub change: KeyChange,
    /// The hash field it concerns, if any.
    pub field: Option<String>,
    /// The value it holds (set) or held (deleted, expired, lost): a lock's owner identity.
    pub value: Option<String>,
    /// The client node whose request did it (`None`: the server's own doing: an expiry, a loss).
    pub by: Option<usize>,
    /// When it expires, in ms of the server's wall clock since the Unix epoch.
    pub expires_at_ms: Option<u64>,
}

impl KeyEvent {
    /// `change` of `key` holding `value`, by client node `by`.
    pub fn new(key: &str, change: KeyChange, value: Option<String>, by: Option<usize>) -> Self {
        KeyEvent {
            key: key.to_string(),
            change,
            field: None,
            value,
            by,
            expires_at_ms: None,
        }
    }
}

/// What survives a server's crashes: its disk and what the simulator kept.
pub struct Machine<S: Server> {
    disk: Arc<Disk<S::Durable>>,
    kept: Arc<S::Kept>,
}

impl<S: Server> Machine<S> {
    /// The machine of server node `node`, before its first start.
    pub fn new(world: &World, node: usize) -> Self {
        Machine {
            disk: Arc::new(Disk::new(S::persistence(world, node))),
            kept: Arc::default(),
        }
    }
}

/// Runs server `S`'s process on node `me` of `machine` until the node is killed.
pub async fn run<S: Server>(world: Arc<World>, me: usize, machine: &Machine<S>) {
    let crashed = world.power(me).last_crash;
    let recovered = machine.disk.load(crashed);
    let node = Node {
        world: world.clone(),
        me,
        disk: machine.disk.clone(),
        kept: machine.kept.clone(),
        due: Due::default(),
        crashed,
    };
    let server = Rc::new(S::start(node, recovered));

    let timer = server.clone();
    madsim::task::spawn_local(async move {
        loop {
            let due = timer.next_due();
            let node = timer.node();
            if !node.due.sleep(&node.world, node.me, due).await {
                continue;
            }
            timer.on_due();
        }
    });
    server.spawn_tasks();

    serve(world, me, move |from, incoming| match incoming {
        Incoming::Request(request) => server.handle(from, request),
        Incoming::ConnectionClosed => {
            server.connection_closed(from);
            Handled::NoReply
        }
    })
    .await
}

/// Creates server `S`'s machine for node `node`, and the node that runs its process.
pub fn start<S: Server>(handle: &Handle, world: &Arc<World>, node: usize) {
    let machine = Arc::new(Machine::<S>::new(world, node));
    crate::runner::start_node(handle, world, node, move |w| {
        let machine = machine.clone();
        async move { run(w, node, &machine).await }
    });
}
