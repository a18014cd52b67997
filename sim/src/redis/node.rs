//! A simulated Redis server: the [`RedisModel`] behind the network as a [`Server`], reading
//! expiry from the node's own wall clock, with active expiry, a persistence policy and
//! asynchronous replication.

use super::model::{KeyEffect, RedisModel, Snapshot};
use crate::net::{Handled, Peer, Port, RpcClient};
use crate::server::{KeyEvent, Node, Server};
use crate::signal::Signal;
use crate::world::World;
use lockcheck_algorithms::redis::{Command, Reply};
use lockcheck_core::history::{History, KeyChange, Op};
use lockcheck_core::scenario::Persistence;
use lockcheck_core::topology::Role;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// Redis runs `serverCron`, and in it the active expiry cycle, `hz` = 10 times a second.
const ACTIVE_EXPIRE_EVERY_MS: u64 = 100;
/// `appendfsync everysec`.
const FSYNC_EVERY: Duration = Duration::from_secs(1);

/// What a Redis server is sent.
#[derive(Debug)]
pub enum RedisRequest {
    /// A client's command.
    Command(Command),
    /// A replica asks its primary for the data set (asynchronous replication, pulled).
    Sync,
    /// A replica tells its primary it has applied everything up to `offset`.
    Ack {
        /// The primary's write offset the replica's data set reflects.
        offset: u64,
    },
    /// `SUBSCRIBE channel`: from now on, what is published to `channel` is pushed to this
    /// connection, until it closes (or the server's process ends).
    Subscribe {
        /// The channel.
        channel: String,
    },
}

/// What a Redis server pushes to a subscribed connection unasked: a message published to a
/// channel it subscribes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The channel.
    pub channel: String,
    /// The message.
    pub message: String,
}

/// A Redis server's answer.
#[derive(Debug)]
pub enum RedisResponse {
    /// A command's reply.
    Reply(Reply),
    /// The primary's data set, as of its write `offset`.
    Sync {
        /// The data set.
        snapshot: Snapshot,
        /// How many writes it reflects.
        offset: u64,
    },
    /// An acknowledgement.
    Ack,
    /// `SUBSCRIBE`'s confirmation.
    Subscribed,
}

/// The history's account of a key effect.
fn key_event(effect: KeyEffect, by: Option<usize>) -> KeyEvent {
    let (key, change, field, value, expires_at_ms) = match effect {
        KeyEffect::Set {
            key,
            value,
            expires_at_ms,
        } => (key, KeyChange::Set, None, Some(value), expires_at_ms),
        KeyEffect::Deleted { key, value } => (key, KeyChange::Deleted, None, value, None),
        KeyEffect::Expired { key, value } => (key, KeyChange::Expired, None, value, None),
        KeyEffect::ExpiryChanged { key, expires_at_ms } => {
            (key, KeyChange::ExpiryChanged, None, None, expires_at_ms)
        }
        KeyEffect::HashField {
            key,
            field,
            value: Some(value),
        } => (key, KeyChange::FieldSet, Some(field), Some(value), None),
        KeyEffect::HashField {
            key,
            field,
            value: None,
        } => (key, KeyChange::FieldRemoved, Some(field), None, None),
        KeyEffect::ListPushed { key, value } => {
            (key, KeyChange::ListPushed, None, Some(value), None)
        }
        KeyEffect::ListRemoved { key, value } => {
            (key, KeyChange::ListRemoved, None, Some(value), None)
        }
    };
    let by = match change {
        KeyChange::Expired | KeyChange::Lost => None,
        _ => by,
    };
    KeyEvent {
        key,
        change,
        field,
        value,
        by,
        expires_at_ms,
    }
}

/// Records `effects`, done by client node `by` (`None`: by the server itself).
fn record_effects(node: &Node<RedisServer>, by: Option<usize>, effects: Vec<KeyEffect>) {
    for effect in effects {
        node.record(key_event(effect, by));
    }
}

/// A restarted server came back with `recovered`: every key it held before the crash, by the
/// history's account, that is gone or holds another string is recorded as lost, so the
/// checkers see the lock (or the fair lock's queue) vanish rather than linger.
fn record_losses(node: &Node<RedisServer>, recovered: &RedisModel) {
    let (world, me) = (&node.world, node.me);
    let held = world.with_history(|history| recorded_keys(history, world.topology.name(me)));
    for (key, value) in held {
        let kept = match recovered.peek(&key) {
            None => false,
            Some(now) => value.is_none() || now == value.as_deref(),
        };
        if !kept {
            node.record(KeyEvent::new(&key, KeyChange::Lost, value, None));
        }
    }
}

/// The keys server `node` holds by the history's account (every key effect a server has is
/// recorded): each key with the string it holds (`None`: a hash, list or sorted set).
fn recorded_keys(history: &History, node: &str) -> BTreeMap<String, Option<String>> {
    let mut keys = BTreeMap::new();
    for e in history.entries.iter().filter(|e| e.node == node) {
        let Op::Key {
            key, change, value, ..
        } = &e.op
        else {
            continue;
        };
        match change {
            KeyChange::Set => {
                keys.insert(key.clone(), value.clone());
            }
            KeyChange::FieldSet | KeyChange::ListPushed => {
                keys.entry(key.clone()).or_insert(None);
            }
            KeyChange::Deleted | KeyChange::Expired | KeyChange::Lost => {
                keys.remove(key);
            }
            KeyChange::ExpiryChanged | KeyChange::FieldRemoved | KeyChange::ListRemoved => {}
        }
    }
    keys
}

/// The first `serverCron` run at or after monotonic ms `earliest`, for a process whose first
/// run was at `from`.
fn next_cycle(from: u64, earliest: u64) -> u64 {
    if earliest <= from {
        return from;
    }
    from + (earliest - from).div_ceil(ACTIVE_EXPIRE_EVERY_MS) * ACTIVE_EXPIRE_EVERY_MS
}

/// One Redis server process, shared by the tasks of its node.
pub struct RedisServer {
    node: Node<RedisServer>,
    model: RefCell<RedisModel>,
    /// Writes applied (as a primary) or reflected (as a replica): Redis's replication offset.
    offset: Cell<u64>,
    /// The offset each replica last acknowledged.
    acked: RefCell<BTreeMap<usize, u64>>,
    /// The replicas that replicate from it, as `INFO replication` lists them: each replica's
    /// node, with its connection and when it was last heard from (server monotonic ms). One is
    /// dropped when its connection closes (its process died) or after `repl-timeout` of silence
    /// ([`REPL_TIMEOUT_MS`])
    /// (`None` for one that connected before the run: see [`RedisServer::start`]).
    replicas: RefCell<BTreeMap<usize, (Option<SocketAddr>, u64)>>,
    /// Each client's `WAIT` target: the replication offset when its last command ended,
    /// whatever the command (Redis 7.0's `c->woff`, set after every `call()` in
    /// `processCommand`; 7.2 sets it only after a command that propagated something). The
    /// offset moves without the client's writes too (Sentinel's hellos, the `GETACK` a blocked
    /// `WAIT` sends): so once a replica stopped acknowledging, a `WAIT` after any command
    /// counts it out, a read's or a refused script's included, as on a real 7.0 server
    /// (`real/tests/redis_replication_conformance.rs`).
    wait_targets: RefCell<BTreeMap<usize, u64>>,
    /// Under `everysec`: told when a write leaves something to fsync.
    written: Signal,
    /// The port its pushes leave from.
    pusher: Port,
    /// Its monotonic ms when its `serverCron` first ran: the cycles' phase (see
    /// [`RedisServer::next_due`]).
    cron_from_ms: u64,
}

impl Server for RedisServer {
    type Request = RedisRequest;
    type Durable = Snapshot;
    type Kept = ();

    fn persistence(world: &World, node: usize) -> Persistence {
        let scenario = &world.scenario;
        scenario
            .params
            .persistence_of(scenario.algorithm, world.topology.name(node))
    }

    /// It acts as the primary while the world says it is, and as a replica otherwise. The first
    /// primary's first start finds its replicas connected and in sync with its empty data set:
    /// they were started and synced before the clients, as real mode starts them (listed by
    /// `INFO replication`, acknowledged offset 0), until they are heard from themselves.
    fn start(node: Node<Self>, recovered: Option<Snapshot>) -> Self {
        let model = match recovered {
            Some(snapshot) => RedisModel::restore(snapshot),
            None => RedisModel::new(),
        };
        if node.crashed.is_some() {
            record_losses(&node, &model);
        }
        let pusher = crate::net::bind_pusher(node.world.clone(), node.me);
        // `initServer` arms `serverCron` 1 ms after the process starts, and each run arms the
        // next `1000 / hz` ms later on the monotonic clock. A first start happened before the
        // run, at the origin of the server's clock (`core::server_clock`, drawn from the seed):
        // the phase of its cycles within the run is that origin's.
        let cron_from_ms = match node.crashed {
            None => 0,
            Some(_) => node.mono_ms() + 1,
        };
        let (mut replicas, mut acked) = (BTreeMap::new(), BTreeMap::new());
        let world = &node.world;
        if node.crashed.is_none()
            && world.primary() == node.me
            && world.scenario.params.redis.replicas > 0
        {
            for replica in world.topology.with_role(Role::Server) {
                if replica != node.me {
                    replicas.insert(replica, (None, node.mono_ms()));
                    acked.insert(replica, 0);
                }
            }
        }
        RedisServer {
            node,
            model: RefCell::new(model),
            offset: Cell::new(0),
            acked: RefCell::new(acked),
            replicas: RefCell::new(replicas),
            wait_targets: RefCell::new(BTreeMap::new()),
            written: Signal::default(),
            pusher,
            cron_from_ms,
        }
    }

    fn node(&self) -> &Node<Self> {
        &self.node
    }

    fn handle(self: &Rc<Self>, peer: Peer, request: RedisRequest) -> Handled {
        let from = peer.node;
        match request {
            RedisRequest::Command(Command::Wait {
                replicas,
                timeout_ms,
            }) => {
                let server = self.clone();
                Handled::later(async move {
                    RedisResponse::Reply(server.wait(from, replicas, timeout_ms).await)
                })
            }
            RedisRequest::Command(Command::Info { section }) => {
                let reply = Reply::Bulk(self.info(&section));
                self.command_ended(from);
                Handled::now(RedisResponse::Reply(reply))
            }
            RedisRequest::Command(command) => {
                Handled::now(RedisResponse::Reply(self.apply(from, &command)))
            }
            RedisRequest::Subscribe { channel } => {
                self.model.borrow_mut().subscribe(&channel, peer.addr);
                Handled::now(RedisResponse::Subscribed)
            }
            RedisRequest::Sync => {
                self.heard_from_replica(peer);
                Handled::now(RedisResponse::Sync {
                    snapshot: self.model.borrow().snapshot(),
                    offset: self.offset_now(),
                })
            }
            RedisRequest::Ack { offset } => {
                self.heard_from_replica(peer);
                let mut acked = self.acked.borrow_mut();
                let seen = acked.entry(from).or_insert(0);
                *seen = (*seen).max(offset);
                Handled::now(RedisResponse::Ack)
            }
        }
    }

    /// A connection that closed takes its subscriptions with it.
    fn connection_closed(&self, from: Peer) {
        self.model.borrow_mut().connection_closed(from.addr);
        // A replica whose process died: its replication link closed with it.
        self.replicas
            .borrow_mut()
            .retain(|&node, (addr, _)| match addr {
                Some(addr) => *addr != from.addr,
                None => node != from.node,
            });
    }

    /// The active expiry cycle runs in `serverCron`, every 100 ms of the server's monotonic
    /// clock counted from its process's start (`hz` 10; `dynamic-hz` raises it only past 200
    /// clients a tick), as the primary (replicas take deletions from it). A key past its
    /// deadline on the wall clock is removed by the first cycle after it: so when an expiry
    /// shows (and reaches the replicas) depends on the process's phase, drawn with its clock's
    /// origin. It sleeps through the cycles that would find nothing: until the first one after
    /// the earliest deadline, or until a command sets an earlier one, the server's clock is
    /// moved or the primary changes.
    fn next_due(&self) -> Option<(u64, Duration)> {
        // Replicas do not expire keys themselves: they take deletions from the primary.
        let target = if self.is_primary() {
            self.model.borrow().next_expiry_ms()
        } else {
            None
        };
        target.map(|deadline| {
            let now_mono = self.node.mono_ms();
            // A key is expired one millisecond after its deadline on the wall clock.
            let left_ms = (deadline + 1).saturating_sub(self.node.wall_ms()).max(1);
            let cycle = next_cycle(self.cron_from_ms, now_mono + left_ms);
            (deadline, Duration::from_millis(cycle - now_mono))
        })
    }

    /// One active expiry cycle: it removes the keys past their deadline.
    fn on_due(&self) {
        let mut effects = Vec::new();
        let now = self.node.wall_ms();
        self.model.borrow_mut().expire_due(now, &mut effects);
        if !effects.is_empty() {
            self.offset.set(self.offset.get() + 1);
        }
        record_effects(&self.node, None, effects);
    }

    fn spawn_tasks(self: &Rc<Self>) {
        if self.node.disk.policy() == Persistence::Everysec {
            madsim::task::spawn_local(self.clone().fsync_everysec());
        }
        if self.node.world.scenario.params.redis.replicas > 0 {
            madsim::task::spawn_local(self.clone().replicate());
        }
    }
}

impl RedisServer {
    fn is_primary(&self) -> bool {
        self.node.world.primary() == self.node.me
    }

    fn apply(&self, from: usize, command: &Command) -> Reply {
        let mut effects = Vec::new();
        let mut model = self.model.borrow_mut();
        let reply = model.apply(command, self.node.wall_ms(), &mut effects);
        if command.is_write() {
            self.offset.set(self.offset.get() + 1);
            // The AOF: every write reaches the OS before its reply; `always` also fsyncs it.
            self.persist(|| model.snapshot());
        }
        self.node.due.offer(model.next_expiry_ms());
        // Pushed as TCP carries it (a partition holds it until the heal); a push to a
        // connection that has died is lost with it.
        for (channel, message) in model.take_published() {
            for to in model.subscribers(&channel) {
                let push = Published {
                    channel: channel.clone(),
                    message: message.clone(),
                };
                crate::net::push(
                    &self.node.world,
                    &self.pusher,
                    self.node.me,
                    to,
                    Box::new(push),
                );
            }
        }
        drop(model);
        self.command_ended(from);
        record_effects(&self.node, Some(from), effects);
        reply
    }

    /// A command of client node `from` ended: its `WAIT` target is the offset now.
    fn command_ended(&self, from: usize) {
        self.wait_targets
            .borrow_mut()
            .insert(from, self.offset_now());
    }

    /// The replication offset now: the writes (and `GETACK`s) it fed its replicas and, as a
    /// primary, Sentinel's hellos: every [`SENTINEL_HELLO_MS`] of its monotonic clock Sentinel
    /// publishes on `__sentinel__:hello` through the primary, and the `PUBLISH` is propagated,
    /// moving the offset (a replica that runs acknowledges it at its next sync; one that is
    /// paused falls behind it). Counted from the clock rather than by a task of its own, so that
    /// runs that never read it are the same as before it was modelled.
    fn offset_now(&self) -> u64 {
        let hellos = if self.is_primary() {
            self.node.mono_ms() / SENTINEL_HELLO_MS
        } else {
            0
        };
        self.offset.get() + hellos
    }

    /// Hands the data set to the AOF as the persistence policy says.
    fn persist(&self, snapshot: impl FnOnce() -> Snapshot) {
        let disk = &self.node.disk;
        match disk.policy() {
            Persistence::Always => disk.sync(snapshot()),
            Persistence::Everysec => {
                // The write reaches the OS now, its fsync comes from `fsync_everysec`.
                disk.write(snapshot());
                self.written.notify();
            }
            Persistence::None => {}
        }
    }

    /// `appendfsync everysec` as Redis 7 does it (`flushAppendOnlyFile`): the AOF is fsynced when
    /// something was written and at least a second has passed since the last fsync, so a write
    /// after a quiet second is fsynced at once and one right after an fsync waits out the rest of
    /// the second. A server with nothing to fsync sleeps until something is written. (Redis
    /// measures the second on its wall clock, `mstime()`; the model uses the server's monotonic
    /// clock, so a wall-clock jump neither hastens nor holds back an fsync.)
    async fn fsync_everysec(self: Rc<Self>) {
        let node = &self.node;
        let every_ms = FSYNC_EVERY.as_millis() as u64;
        // Redis starts counting at start-up (`initServer` sets `aof_last_fsync`).
        let mut last_ms = node.mono_ms();
        loop {
            let seen = self.written.changes();
            if !node.disk.has_unsynced() {
                self.written.after(seen).await;
                continue;
            }
            let now_ms = node.mono_ms();
            let due_ms = last_ms.saturating_add(every_ms);
            if now_ms < due_ms {
                let left = Duration::from_millis(due_ms - now_ms);
                crate::timer::sleep(node.world.clock(node.me).true_duration(left)).await;
            }
            node.disk.sync_written();
            last_ms = node.mono_ms();
        }
    }

    /// Notes that the replica behind `peer` asked for the data set or acknowledged it.
    fn heard_from_replica(&self, peer: Peer) {
        let now = self.node.mono_ms();
        self.replicas
            .borrow_mut()
            .insert(peer.node, (Some(peer.addr), now));
    }

    /// Whether `replica` is connected to it at `now_ms`: heard from within `repl-timeout`, its
    /// connection open.
    fn is_connected(&self, replica: usize, now_ms: u64) -> bool {
        self.replicas
            .borrow()
            .get(&replica)
            .is_some_and(|(_, heard)| now_ms.saturating_sub(*heard) < REPL_TIMEOUT_MS)
    }

    /// `INFO section`: `replication` answers its role and, as a primary, `connected_slaves`
    /// (what Redisson reads); any other section is answered empty.
    fn info(&self, section: &str) -> String {
        if !section.eq_ignore_ascii_case("replication") {
            return String::new();
        }
        if self.is_primary() {
            let now = self.node.mono_ms();
            let connected = self
                .replicas
                .borrow()
                .keys()
                .filter(|&&r| self.is_connected(r, now))
                .count();
            format!("# Replication\r\nrole:master\r\nconnected_slaves:{connected}\r\n")
        } else {
            "# Replication\r\nrole:slave\r\n".to_string()
        }
    }

    /// `WAIT`: how many connected replicas acknowledged the last write of client node `from`
    /// (every write before the `WAIT` on its connection) within `timeout_ms` (the server's
    /// monotonic clock; 0 waits forever, as in Redis). A replica refuses it; a primary that
    /// becomes a replica while the `WAIT` blocks unblocks it with an error, as Redis does when
    /// it is made a replica (`replicationSetMaster` → `disconnectAllBlockedClients`).
    async fn wait(&self, from: usize, replicas: u32, timeout_ms: u64) -> Reply {
        let (world, me) = (&self.node.world, self.node.me);
        if !self.is_primary() {
            return Reply::Error(WAIT_ON_A_REPLICA.into());
        }
        let target = self.wait_targets.borrow().get(&from).copied().unwrap_or(0);
        // The `WAIT` is a command too: the next one's target is the offset as it ends here,
        // before the `GETACK` below.
        self.command_ended(from);
        let deadline = world.mono_ns(me) + timeout_ms * 1_000_000;
        let mut asked = false;
        loop {
            let now = self.node.mono_ms();
            let done = self
                .acked
                .borrow()
                .iter()
                .filter(|(&node, &offset)| offset >= target && self.is_connected(node, now))
                .count() as i64;
            if done >= i64::from(replicas) || (timeout_ms > 0 && world.mono_ns(me) >= deadline) {
                return Reply::Int(done);
            }
            if !asked {
                // A `WAIT` that blocks asks the replicas for an acknowledgement: Redis feeds
                // `REPLCONF GETACK *` into the replication stream (`beforeSleep`), which moves
                // the offset past what any replica has acknowledged.
                asked = true;
                self.offset.set(self.offset.get() + 1);
            }
            madsim::time::sleep(WAIT_POLL).await;
            if !self.is_primary() {
                return Reply::Error(WAIT_UNBLOCKED.into());
            }
        }
    }

    /// A replica's loop: pull the primary's data set every `replication_lag_ms`, replace its own
    /// with it, and acknowledge. A promoted replica stops pulling; a restarted old primary that
    /// is no longer the primary starts.
    async fn replicate(self: Rc<Self>) {
        let (world, me) = (self.node.world.clone(), self.node.me);
        let lag = Duration::from_millis(world.scenario.params.redis.replication_lag_ms());
        let timeout = Duration::from_millis(world.scenario.params.request_timeout_ms);
        let rpc = RpcClient::bind(world.clone(), me).await;
        loop {
            madsim::time::sleep(world.clock(me).true_duration(lag)).await;
            if self.is_primary() {
                continue;
            }
            let primary = world.primary();
            if let Ok(RedisResponse::Sync { snapshot, offset }) =
                rpc.call(primary, RedisRequest::Sync, timeout).await
            {
                if self.is_primary() {
                    continue; // promoted while the sync was in flight
                }
                self.persist(|| snapshot.clone());
                *self.model.borrow_mut() = RedisModel::restore(snapshot);
                self.offset.set(offset);
                let ack = RedisRequest::Ack { offset };
                let _: Result<RedisResponse, _> = rpc.call(primary, ack, timeout).await;
            }
        }
    }
}

/// How often Sentinel publishes its hello through the primary: real mode's Sentinel's period
/// (`SENTINEL DEBUG publish-period 100`, `real/src/replication.rs`; Sentinel's default is 2 s).
/// Either way the offset moves well within a replica's acknowledgement cadence.
const SENTINEL_HELLO_MS: u64 = 100;

/// How often a blocked `WAIT` looks at the replicas' acknowledgements.
const WAIT_POLL: Duration = Duration::from_millis(1);

/// Redis 7's reply to a `WAIT` sent to a replica.
const WAIT_ON_A_REPLICA: &str =
    "ERR WAIT cannot be used with replica instances. Please also note that \
     since Redis 4.0 if a replica is configured to be writable (which is not the default) writes \
     to replicas are just local and are not propagated.";

/// Redis's reply to a client blocked in `WAIT` when its server is made a replica.
const WAIT_UNBLOCKED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// `repl-timeout` (Redis's default, 60 s): a replica not heard from for that long is dropped.
const REPL_TIMEOUT_MS: u64 = 60_000;

#[cfg(test)]
mod tests {
    use super::next_cycle;

    #[test]
    fn a_cycle_runs_every_100_ms_from_the_process_first_one() {
        // A first start before the run: cycles at multiples of 100 of the monotonic clock.
        assert_eq!(next_cycle(0, 1), 100);
        assert_eq!(next_cycle(0, 100), 100);
        assert_eq!(next_cycle(0, 101), 200);
        // A restart at 5_037: its first cycle 1 ms later, and every 100 ms from there.
        assert_eq!(next_cycle(5_038, 5_000), 5_038);
        assert_eq!(next_cycle(5_038, 5_038), 5_038);
        assert_eq!(next_cycle(5_038, 5_039), 5_138);
        assert_eq!(next_cycle(5_038, 15_100), 15_138);
    }
}
