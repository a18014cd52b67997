//! A simulated MariaDB server: the [`MysqlModel`] behind the network as a [`Server`]. Its
//! `NOW()` is the node's own wall clock, its timeouts (`innodb_lock_wait_timeout`,
//! `wait_timeout`) run on the node's monotonic clock, a statement that waits for a row lock is
//! answered when the lock comes (without holding up other connections), and what survives a
//! crash is what the model's flush policy made durable.

use super::model::{Applied, ConnId, MysqlConfig, MysqlModel, Notice, ServerTime, Snapshot};
use crate::net::{Handled, Peer};
use crate::server::{KeyEvent, Node, Server};
use crate::world::World;
use lockcheck_algorithms::mysql::{Reply, Row, Statement};
use lockcheck_core::history::KeyChange;
use lockcheck_core::scenario::{FlushPolicy, Persistence};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Mutex;
use std::task::{Poll, Waker};
use std::time::Duration;

/// A request of a MySQL client connection.
#[derive(Clone, Debug)]
pub enum MysqlRequest {
    /// Open a connection. `attempt` numbers the client's connects, so that it can close one
    /// whose answer it gave up on.
    Connect {
        /// The client's number for this connect.
        attempt: u64,
    },
    /// The client gave up on connect `attempt` and closes that socket: if the server opened a
    /// connection for it, it is closed now (the FIN follows the SYN on the same link), not left
    /// idle until `wait_timeout`.
    AbandonConnect {
        /// The client's number of the connect.
        attempt: u64,
    },
    /// Run a statement on connection `conn`.
    Execute {
        /// The connection.
        conn: ConnId,
        /// The statement.
        statement: Statement,
    },
    /// The client closes `conn` (it gave up on a reply, so it drops the socket).
    Disconnect {
        /// The connection.
        conn: ConnId,
    },
}

/// A MySQL server's answer.
#[derive(Clone, Debug)]
pub enum MysqlResponse {
    /// The connection is open.
    Connected(ConnId),
    /// A statement's reply.
    Reply(Reply),
    /// The connection is closed.
    Disconnected,
}

/// The committed lock rows as last seen, kept outside the node: after a crash, what the restarted
/// server no longer has was lost.
#[derive(Default)]
pub struct Witness {
    rows: Mutex<BTreeMap<String, Row>>,
}

/// A reply slot for a statement that waits for a row lock.
#[derive(Default)]
struct Slot {
    reply: Option<Reply>,
    waker: Option<Waker>,
}

/// One MariaDB server process, shared by the tasks of its node.
pub struct MysqlServer {
    node: Node<MysqlServer>,
    model: RefCell<MysqlModel>,
    /// Statements waiting for a row lock, by connection.
    waiting: RefCell<BTreeMap<ConnId, Rc<RefCell<Slot>>>>,
    /// The client process (its connection's address) of each open connection: its death closes
    /// them all.
    owners: RefCell<BTreeMap<ConnId, SocketAddr>>,
    /// The connection each client process's connect opened, until the client uses it or
    /// abandons it (its abandon may arrive after its next connect: it is sent by a task of its
    /// own).
    attempts: RefCell<BTreeMap<(SocketAddr, u64), ConnId>>,
    /// The client node that wrote each `locker` value (a lock's owner identity).
    lockers: RefCell<BTreeMap<String, usize>>,
    /// The model's generation at the last diff and sync; `None` before the first.
    settled: Cell<Option<u64>>,
}

impl Server for MysqlServer {
    type Request = MysqlRequest;
    type Durable = Snapshot;
    type Kept = Witness;

    /// The model decides what a crash keeps (its flush policy); the disk keeps that.
    fn persistence(_: &World, _: usize) -> Persistence {
        Persistence::Always
    }

    /// It recovers from the disk (committed rows and counters; no connections, nothing locked),
    /// and records as lost the committed lock rows the crash took.
    fn start(node: Node<Self>, recovered: Option<Snapshot>) -> Self {
        let mono = node.mono_ms();
        let model = match recovered {
            Some(snapshot) => MysqlModel::restart(snapshot, mono),
            None => MysqlModel::new(config_of(&node.world, node.me), mono),
        };
        // What the crash lost: committed rows the recovered server does not have as they were.
        {
            let mut seen = node.kept.rows.lock().unwrap();
            let recovered = model.snapshot();
            let lost: Vec<Row> = seen
                .values()
                .filter(|row| recovered.row(&row.resource_name) != Some(*row))
                .cloned()
                .collect();
            for row in lost {
                let value = Some(row.locker.clone());
                node.record(KeyEvent::new(
                    &row.resource_name,
                    KeyChange::Lost,
                    value,
                    None,
                ));
                seen.remove(&row.resource_name);
            }
        }
        let server = MysqlServer {
            node,
            model: RefCell::new(model),
            waiting: RefCell::new(BTreeMap::new()),
            owners: RefCell::new(BTreeMap::new()),
            attempts: RefCell::new(BTreeMap::new()),
            lockers: RefCell::new(BTreeMap::new()),
            settled: Cell::new(None),
        };
        server.settle(Vec::new(), None);
        server
    }

    fn node(&self) -> &Node<Self> {
        &self.node
    }

    fn handle(self: &Rc<Self>, from: Peer, request: MysqlRequest) -> Handled {
        let handled = self.execute(from, request);
        // The timer is woken only by a deadline earlier than the one it sleeps towards (a lock
        // wait that began). One that moved later (an idle connection's, renewed by every
        // statement) lets it wake at the old one, find nothing due and sleep again: cheaper than
        // waking it for every request.
        self.node.due.offer(self.model.borrow().next_deadline_ms());
        handled
    }

    /// It ends each of the client's connections as if the client had disconnected (rolling back
    /// what they held), at once rather than after `wait_timeout`.
    fn connection_closed(&self, from: Peer) {
        let now = self.now();
        let mut notices = Vec::new();
        let conns: Vec<ConnId> = self
            .owners
            .borrow()
            .iter()
            .filter(|(_, owner)| **owner == from.addr)
            .map(|(conn, _)| *conn)
            .collect();
        self.attempts
            .borrow_mut()
            .retain(|(client, _), _| *client != from.addr);
        for conn in conns {
            self.owners.borrow_mut().remove(&conn);
            self.model.borrow_mut().disconnect(conn, now, &mut notices);
        }
        self.settle(notices, None);
        self.node.due.offer(self.model.borrow().next_deadline_ms());
    }

    /// The model's next deadline: a lock wait's timeout, an idle connection's, a flush.
    fn next_due(&self) -> Option<(u64, Duration)> {
        let now = self.now();
        self.model.borrow().next_deadline_ms().map(|at| {
            let left = Duration::from_millis(at.saturating_sub(now.mono_ms));
            (at, left.max(Duration::from_millis(1)))
        })
    }

    fn on_due(&self) {
        let mut notices = Vec::new();
        self.model.borrow_mut().tick(self.now(), &mut notices);
        self.settle(notices, None);
    }
}

impl MysqlServer {
    fn now(&self) -> ServerTime {
        ServerTime {
            wall_ms: self.node.wall_ms(),
            mono_ms: self.node.mono_ms(),
        }
    }

    fn record(&self, key: &str, change: KeyChange, locker: &str, by: Option<usize>) {
        let value = Some(locker.to_string());
        self.node.record(KeyEvent::new(key, change, value, by));
    }

    /// Hands late replies to their waiting statements, records what the commits changed (by
    /// `by`, the client whose statement ran), and writes what the flush policy made durable.
    fn settle(&self, notices: Vec<Notice>, by: Option<usize>) {
        for notice in notices {
            if let Notice::Reply { conn, reply } = notice {
                if let Some(slot) = self.waiting.borrow_mut().remove(&conn) {
                    let mut slot = slot.borrow_mut();
                    slot.reply = Some(reply);
                    if let Some(waker) = slot.waker.take() {
                        waker.wake();
                    }
                }
            }
            // A connection closed by wait_timeout learns it at its next statement (2006).
        }
        // Most requests commit nothing: then there is nothing to diff or write.
        let generation = self.model.borrow().generation();
        if self.settled.replace(Some(generation)) == Some(generation) {
            return;
        }
        let committed = self.model.borrow().snapshot();
        let mut seen = self.node.kept.rows.lock().unwrap();
        let before = std::mem::take(&mut *seen);
        for (name, row) in &before {
            if committed.row(name).is_none() {
                self.record(name, KeyChange::Deleted, &row.locker, by);
            }
        }
        for row in committed.rows() {
            let changed = before.get(&row.resource_name).is_none_or(|old| old != row);
            if changed {
                let writer = self.lockers.borrow().get(&row.locker).copied();
                self.record(&row.resource_name, KeyChange::Set, &row.locker, writer);
            }
            seen.insert(row.resource_name.clone(), row.clone());
        }
        drop(seen);
        // Every commit's log record reaches the OS at once (it survives a process crash);
        // the flush policy decides what is fsynced (what survives a machine crash).
        self.node.disk.write(committed);
        self.node.disk.fsync(self.model.borrow().durable().clone());
    }

    fn execute(&self, peer: Peer, request: MysqlRequest) -> Handled {
        let from = peer.node;
        let now = self.now();
        let mut notices = Vec::new();
        let response = match request {
            MysqlRequest::Connect { attempt } => {
                let conn = self.model.borrow_mut().connect(now);
                self.owners.borrow_mut().insert(conn, peer.addr);
                self.attempts
                    .borrow_mut()
                    .insert((peer.addr, attempt), conn);
                MysqlResponse::Connected(conn)
            }
            MysqlRequest::AbandonConnect { attempt } => {
                let opened = self.attempts.borrow_mut().remove(&(peer.addr, attempt));
                if let Some(conn) = opened {
                    self.owners.borrow_mut().remove(&conn);
                    self.model.borrow_mut().disconnect(conn, now, &mut notices);
                }
                MysqlResponse::Disconnected
            }
            MysqlRequest::Disconnect { conn } => {
                self.owners.borrow_mut().remove(&conn);
                self.model.borrow_mut().disconnect(conn, now, &mut notices);
                MysqlResponse::Disconnected
            }
            MysqlRequest::Execute { conn, statement } => {
                // A connection in use was not abandoned.
                self.attempts
                    .borrow_mut()
                    .retain(|(client, _), c| *client != peer.addr || *c != conn);
                // A locker first named by a statement that then fails wrote nothing: it is not
                // kept (mysql-unique draws a token per attempt, so a waiter polling for a year
                // would otherwise leave a year of them behind).
                let mut new_locker = None;
                if let Some(locker) = locker_of(&statement) {
                    let mut lockers = self.lockers.borrow_mut();
                    if lockers.insert(locker.to_string(), from).is_none() {
                        new_locker = Some(locker.to_string());
                    }
                }
                let applied = self
                    .model
                    .borrow_mut()
                    .apply(conn, &statement, now, &mut notices);
                if let (Some(locker), Applied::Reply(Err(_))) = (&new_locker, &applied) {
                    self.lockers.borrow_mut().remove(locker);
                }
                match applied {
                    Applied::Reply(reply) => MysqlResponse::Reply(reply),
                    Applied::Blocked => {
                        let slot = Rc::new(RefCell::new(Slot::default()));
                        self.waiting.borrow_mut().insert(conn, slot.clone());
                        self.settle(notices, Some(from));
                        return Handled::later(async move {
                            let reply = std::future::poll_fn(|cx| {
                                let mut slot = slot.borrow_mut();
                                match slot.reply.take() {
                                    Some(reply) => Poll::Ready(reply),
                                    None => {
                                        slot.waker = Some(cx.waker().clone());
                                        Poll::Pending
                                    }
                                }
                            })
                            .await;
                            MysqlResponse::Reply(reply)
                        });
                    }
                }
            }
        };
        self.settle(notices, Some(from));
        Handled::now(response)
    }
}

/// The `locker` a statement writes, if any.
fn locker_of(statement: &Statement) -> Option<&str> {
    match statement {
        Statement::Insert { locker, .. }
        | Statement::Update { locker, .. }
        | Statement::Claim { locker, .. }
        | Statement::TakeOver { locker, .. } => Some(locker),
        _ => None,
    }
}

/// The settings of server node `node` in `world`'s scenario.
pub fn config_of(world: &World, node: usize) -> MysqlConfig {
    let scenario = &world.scenario;
    let p = &scenario.params;
    let persistence = p.persistence_of(scenario.algorithm, world.topology.name(node));
    MysqlConfig {
        lock_wait_timeout_ms: p.mysql.lock_wait_timeout_ms(),
        wait_timeout_ms: p.mysql.wait_timeout_ms(),
        flush: FlushPolicy::of(persistence),
    }
}
