//! A simulated Redis server as a madsim node: the [`RedisModel`] behind the network, reading
//! expiry from the node's own wall clock, with active expiry and a persistence policy.

use super::model::{KeyEffect, RedisModel, Snapshot};
use crate::disk::Disk;
use crate::net::{serve, Handled, Request, Response, RpcClient};
use crate::signal::{Due, Signal};
use crate::world::World;
use lockcheck_algorithms::redis::{Command, Reply};
use lockcheck_core::clock::WALL_ORIGIN_NS;
use lockcheck_core::history::{History, KeyChange, Kind, Op};
use lockcheck_core::scenario::Persistence;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Redis runs active expiry `hz` = 10 times a second.
const ACTIVE_EXPIRE_EVERY: Duration = Duration::from_millis(100);
/// `appendfsync everysec`.
const FSYNC_EVERY: Duration = Duration::from_secs(1);

/// The server's wall clock in ms since the Unix epoch: what Redis's `mstime()` returns.
fn server_now_ms(world: &World, me: usize) -> u64 {
    (world.wall_ns(me).max(0) / 1_000_000) as u64
}

fn record_effects(world: &World, me: usize, by: Option<&str>, effects: Vec<KeyEffect>) {
    for effect in effects {
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
            _ => by.map(str::to_string),
        };
        world.record(
            me,
            Kind::Observe,
            Op::Key {
                key,
                change,
                field,
                value,
                by,
                expires_local_ns: expires_at_ms.map(|ms| ms as i64 * 1_000_000 - WALL_ORIGIN_NS),
            },
        );
    }
}

/// A restarted server came back with `recovered`: every key it held before the crash, by the
/// history's account, that is gone or holds another string is recorded as lost, so the
/// checkers see the lock (or the fair lock's queue) vanish rather than linger.
fn record_losses(world: &World, me: usize, recovered: &RedisModel) {
    let held = world.with_history(|history| recorded_keys(history, world.topology.name(me)));
    for (key, value) in held {
        let kept = match recovered.peek(&key) {
            None => false,
            Some(now) => value.is_none() || now == value.as_deref(),
        };
        if !kept {
            world.record(
                me,
                Kind::Observe,
                Op::Key {
                    key,
                    change: KeyChange::Lost,
                    field: None,
                    value,
                    by: None,
                    expires_local_ns: None,
                },
            );
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

/// One server's state, shared by the tasks of its node.
struct Server {
    world: Arc<World>,
    me: usize,
    disk: Arc<Disk<Snapshot>>,
    model: RefCell<RedisModel>,
    /// Writes applied (as a primary) or reflected (as a replica): Redis's replication offset.
    offset: Cell<u64>,
    /// The offset each replica last acknowledged.
    acked: RefCell<BTreeMap<usize, u64>>,
    /// The active expiry cycle's wake-up (key deadlines in server ms).
    expiry: Due,
    /// Under `everysec`: told when a write leaves something to fsync.
    written: Signal,
}

impl Server {
    fn is_primary(&self) -> bool {
        self.world.primary() == self.me
    }

    fn handle(self: &Rc<Self>, from: usize, request: Request) -> Handled {
        match request {
            Request::Redis(Command::Wait {
                replicas,
                timeout_ms,
            }) => {
                let server = self.clone();
                Handled::Later(Box::pin(async move {
                    Response::Redis(Reply::Int(server.wait(replicas, timeout_ms).await))
                }))
            }
            Request::Redis(command) => Handled::Now(Response::Redis(self.apply(from, &command))),
            Request::Sync => Handled::Now(Response::Sync {
                snapshot: self.model.borrow().snapshot(),
                offset: self.offset.get(),
            }),
            Request::Ack { offset } => {
                let mut acked = self.acked.borrow_mut();
                let seen = acked.entry(from).or_insert(0);
                *seen = (*seen).max(offset);
                Handled::Now(Response::Ack)
            }
            // Redis keeps nothing per connection that a lock relies on.
            Request::ConnectionClosed => Handled::NoReply,
            Request::Access(_) | Request::Zk(..) | Request::Mysql(_) => Handled::Now(
                Response::Redis(Reply::Error("ERR not a Redis request".into())),
            ),
        }
    }

    fn apply(&self, from: usize, command: &Command) -> Reply {
        let mut effects = Vec::new();
        let mut model = self.model.borrow_mut();
        let reply = model.apply(command, server_now_ms(&self.world, self.me), &mut effects);
        if command.is_write() {
            self.offset.set(self.offset.get() + 1);
            // The AOF: every write reaches the OS before its reply; `always` also fsyncs it.
            match self.disk.policy() {
                Persistence::Always => self.disk.sync(model.snapshot()),
                Persistence::Everysec => self.write_aof(model.snapshot()),
                Persistence::None => {}
            }
        }
        self.expiry.offer(model.next_expiry_ms());
        let by = self.world.topology.name(from).to_string();
        record_effects(&self.world, self.me, Some(&by), effects);
        reply
    }

    /// `appendfsync everysec`: the write reaches the OS now, its fsync comes from
    /// [`Server::fsync_everysec`].
    fn write_aof(&self, snapshot: Snapshot) {
        self.disk.write(snapshot);
        self.written.notify();
    }

    /// `appendfsync everysec` as Redis 7 does it (`flushAppendOnlyFile`): the AOF is fsynced when
    /// something was written and at least a second has passed since the last fsync, so a write
    /// after a quiet second is fsynced at once and one right after an fsync waits out the rest of
    /// the second. A server with nothing to fsync sleeps until something is written. (Redis
    /// measures the second on its wall clock, `mstime()`; the model uses the server's monotonic
    /// clock, so a wall-clock jump neither hastens nor holds back an fsync.)
    async fn fsync_everysec(self: Rc<Self>) {
        let (world, me) = (self.world.clone(), self.me);
        let every_ms = FSYNC_EVERY.as_millis() as u64;
        // Redis starts counting at start-up (`initServer` sets `aof_last_fsync`).
        let mut last_ms = world.mono_ns(me) / 1_000_000;
        loop {
            let seen = self.written.changes();
            if !self.disk.has_unsynced() {
                self.written.after(seen).await;
                continue;
            }
            let now_ms = world.mono_ns(me) / 1_000_000;
            let due_ms = last_ms.saturating_add(every_ms);
            if now_ms < due_ms {
                let left = Duration::from_millis(due_ms - now_ms);
                crate::timer::sleep(world.clock(me).true_duration(left)).await;
            }
            self.disk.sync_written();
            last_ms = world.mono_ns(me) / 1_000_000;
        }
    }

    /// The active expiry cycle: every 100 ms of the server's clock it removes the keys past their
    /// deadline (as the primary; replicas take deletions from it). It sleeps through the cycles
    /// that would find nothing: until the first one after the earliest deadline, or until a
    /// command sets an earlier one, the server's clock is moved or the primary changes.
    async fn expire_actively(self: Rc<Self>) {
        let (world, me) = (self.world.clone(), self.me);
        let every_ms = ACTIVE_EXPIRE_EVERY.as_millis() as u64;
        loop {
            // Replicas do not expire keys themselves: they take deletions from the primary.
            let target = if self.is_primary() {
                self.model.borrow().next_expiry_ms()
            } else {
                None
            };
            // A key is expired one millisecond after its deadline; the cycle runs on 100 ms steps.
            let due = target.map(|deadline| {
                let left_ms = (deadline + 1).saturating_sub(server_now_ms(&world, me));
                let cycles = left_ms.div_ceil(every_ms).max(1);
                (
                    deadline,
                    Duration::from_millis(cycles.saturating_mul(every_ms)),
                )
            });
            if !self.expiry.sleep(&world, me, due).await {
                continue;
            }
            let mut effects = Vec::new();
            let now = server_now_ms(&world, me);
            self.model.borrow_mut().expire_due(now, &mut effects);
            if !effects.is_empty() {
                self.offset.set(self.offset.get() + 1);
            }
            record_effects(&world, me, None, effects);
        }
    }

    /// `WAIT`: how many replicas acknowledged the current offset within `timeout_ms` (the
    /// server's monotonic clock; 0 waits forever, as in Redis).
    async fn wait(&self, replicas: u32, timeout_ms: u64) -> i64 {
        let target = self.offset.get();
        let deadline = self.world.mono_ns(self.me) + timeout_ms * 1_000_000;
        loop {
            let done = self
                .acked
                .borrow()
                .values()
                .filter(|&&offset| offset >= target)
                .count() as i64;
            if done >= i64::from(replicas)
                || (timeout_ms > 0 && self.world.mono_ns(self.me) >= deadline)
            {
                return done;
            }
            madsim::time::sleep(WAIT_POLL).await;
        }
    }

    /// A replica's loop: pull the primary's data set every `replication_lag_ms`, replace its own
    /// with it, and acknowledge. A promoted replica stops pulling; a restarted old primary that
    /// is no longer the primary starts.
    async fn replicate(self: Rc<Self>) {
        let lag = Duration::from_millis(self.world.scenario.params.redis.replication_lag_ms());
        let timeout = Duration::from_millis(self.world.scenario.params.request_timeout_ms);
        let rpc = RpcClient::bind(self.world.clone(), self.me).await;
        loop {
            madsim::time::sleep(self.world.clock(self.me).true_duration(lag)).await;
            if self.is_primary() {
                continue;
            }
            let primary = self.world.primary();
            if let Ok(Response::Sync { snapshot, offset }) =
                rpc.call(primary, Request::Sync, timeout).await
            {
                if self.is_primary() {
                    continue; // promoted while the sync was in flight
                }
                match self.disk.policy() {
                    Persistence::Always => self.disk.sync(snapshot.clone()),
                    Persistence::Everysec => self.write_aof(snapshot.clone()),
                    Persistence::None => {}
                }
                *self.model.borrow_mut() = RedisModel::restore(snapshot);
                self.offset.set(offset);
                let _ = rpc.call(primary, Request::Ack { offset }, timeout).await;
            }
        }
    }
}

/// How often a blocked `WAIT` looks at the replicas' acknowledgements.
const WAIT_POLL: Duration = Duration::from_millis(1);

/// Runs a Redis server on node `me` until the node is killed; on (re)start it loads what
/// `disk` kept. It acts as the primary while the world says it is, and as a replica otherwise.
pub async fn run_server(world: Arc<World>, me: usize, disk: Arc<Disk<Snapshot>>) {
    let crashed = world.power(me).last_crash;
    let model = match disk.load(crashed) {
        Some(snapshot) => RedisModel::restore(snapshot),
        None => RedisModel::new(),
    };
    if crashed.is_some() {
        record_losses(&world, me, &model);
    }
    let server = Rc::new(Server {
        world: world.clone(),
        me,
        disk: disk.clone(),
        model: RefCell::new(model),
        offset: Cell::new(0),
        acked: RefCell::new(BTreeMap::new()),
        expiry: Due::default(),
        written: Signal::default(),
    });

    madsim::task::spawn_local(server.clone().expire_actively());

    if disk.policy() == Persistence::Everysec {
        madsim::task::spawn_local(server.clone().fsync_everysec());
    }

    if world.scenario.params.redis.replicas > 0 {
        madsim::task::spawn_local(server.clone().replicate());
    }

    serve(world, me, move |from, request| server.handle(from, request)).await
}
