//! A simulated standalone ZooKeeper server: the [`ZkModel`] behind the network as a [`Server`],
//! sessions expiring by the server's monotonic clock, watch events pushed to the session's
//! client, and the tree and sessions on disk (ZooKeeper logs every transaction before it
//! answers, so a restart keeps both).

use super::model::{Op, OpResult, SessionId, SetWatches, Snapshot, WatchEvent, ZkModel};
use super::serve;
use crate::net::{push, Handled, Peer};
use crate::server::{KeyEvent, Node, Server};
use crate::world::World;
use lockcheck_algorithms::zookeeper::Zxid;
use lockcheck_core::history::{KeyChange, Kind, Op as HistoryOp};
use lockcheck_core::scenario::Persistence;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// What a ZooKeeper client sends: a request, and where the server pushes the session's watch
/// events.
#[derive(Debug)]
pub struct ZkMessage {
    /// The request.
    pub request: ZkRequest,
    /// The client's address for pushed events.
    pub push_to: SocketAddr,
    /// Which of the client's connections it came on: the client counts its connections, each
    /// (re)connection opening the next. A server takes a session's requests only from the
    /// connection that last opened or reconnected it (see [`ZkResponse::SessionMoved`]).
    pub connection: u64,
}

/// What a ZooKeeper server answers: the response, with the last zxid the server had given out
/// when it answered (the reply header's zxid).
#[derive(Debug)]
pub struct ZkReply {
    /// The response.
    pub response: ZkResponse,
    /// The reply header's zxid.
    pub zxid: Zxid,
}

/// A request of a ZooKeeper client.
#[derive(Clone, Debug)]
pub enum ZkRequest {
    /// Open a session asking for this timeout.
    Open {
        /// Requested timeout in ms.
        timeout_ms: u64,
    },
    /// Take `session` up again on a new connection (after a reset, or after the client gave
    /// up on a silent one), re-registering the watches the client still holds (`SetWatches`,
    /// relative to the last zxid it saw).
    Reconnect {
        /// The session.
        session: SessionId,
        /// The last zxid the client saw in a reply.
        last_zxid: Zxid,
        /// The watches it left and has not seen fire.
        watches: SetWatches,
    },
    /// Keep `session` alive.
    Ping {
        /// The session.
        session: SessionId,
    },
    /// An operation in `session`.
    Op {
        /// The session.
        session: SessionId,
        /// The operation.
        op: Op,
    },
}

/// A ZooKeeper server's answer.
#[derive(Clone, Debug)]
pub enum ZkResponse {
    /// The session opened, with the negotiated timeout.
    Opened {
        /// Its id.
        session: SessionId,
        /// Negotiated timeout in ms.
        timeout_ms: u64,
    },
    /// The ping renewed the session.
    Pong,
    /// The session is taken up on the new connection.
    Reconnected,
    /// The operation's result; for a create, the new node's stat too (`create2`).
    Result(OpResult, Option<super::model::Stat>),
    /// The session is gone.
    Expired,
    /// An ensemble member that serves no one now (cut off from a quorum, or looking for a
    /// leader): the real one closes the connection at once, and the client moves on.
    NotServing,
    /// The request came on a connection its session has since left, and was not carried out:
    /// a server closes a session's older connection when the session reconnects
    /// (`processConnectRequest`: `closeSession(sessionId, CLIENT_RECONNECT)`), and an ensemble's
    /// leader refuses a request whose session another member now owns
    /// (`SessionMovedException`). Nobody hears it: the client left that connection behind.
    SessionMoved,
}

/// A watch event pushed to a client.
#[derive(Clone, Debug)]
pub struct ZkPush(pub WatchEvent);

/// One ZooKeeper server process, shared by the tasks of its node.
pub struct ZkServer {
    node: Node<ZkServer>,
    /// The endpoint watch events leave from.
    pusher: crate::net::Port,
    model: RefCell<ZkModel>,
    /// Where each session's client is, for pushing its watch events.
    clients: RefCell<BTreeMap<SessionId, (usize, SocketAddr)>>,
    /// Each session's ephemeral nodes, so their deletion by expiry shows in the history (taken
    /// from the tree on a restart: the nodes are on disk, and so is who owns them).
    ephemerals: RefCell<BTreeMap<SessionId, BTreeSet<String>>>,
    /// The zxid of the snapshot last written to disk (`None`: nothing written by this process).
    /// Only transactions change what a snapshot holds, and each takes a zxid, so a request that
    /// leaves the zxid alone (a read, a ping) has nothing to write: writing the whole tree after
    /// every request was a tenth of a ZooKeeper run.
    persisted: std::cell::Cell<Option<Zxid>>,
}

impl Server for ZkServer {
    type Request = ZkMessage;
    type Durable = Snapshot;
    type Kept = ();

    /// ZooKeeper logs every transaction to disk before it answers.
    fn persistence(_: &World, _: usize) -> Persistence {
        Persistence::Always
    }

    /// Sessions restored from disk get a fresh timeout, as on a real restart.
    fn start(node: Node<Self>, recovered: Option<Snapshot>) -> Self {
        let mono = node.mono_ms();
        // A restored tree is what the disk holds; a fresh one is written by the first request.
        let (model, persisted) = match recovered {
            Some(snapshot) => {
                let model = ZkModel::restore(snapshot, mono);
                let zxid = model.last_zxid();
                (model, Some(zxid))
            }
            None => (ZkModel::new(), None),
        };
        let pusher = crate::net::bind_pusher(node.world.clone(), node.me);
        let ephemerals = model.ephemerals();
        ZkServer {
            node,
            pusher,
            model: RefCell::new(model),
            clients: RefCell::new(BTreeMap::new()),
            ephemerals: RefCell::new(ephemerals),
            persisted: std::cell::Cell::new(persisted),
        }
    }

    fn node(&self) -> &Node<Self> {
        &self.node
    }

    fn handle(self: &Rc<Self>, from: Peer, message: ZkMessage) -> Handled {
        let (response, events) = self.apply(
            from.node,
            message.push_to,
            message.connection,
            message.request,
        );
        let zxid = self.model.borrow().last_zxid();
        let server = self.clone();
        // The events and the reply leave from a task of their own, as they always have: sending
        // them from here would be the same messages one scheduling step earlier, and would give
        // every ZooKeeper seed a new history for nothing.
        Handled::later(async move {
            server.deliver(events);
            ZkReply { response, zxid }
        })
    }

    /// Its sessions stay until they expire (a killed client sends no `closeSession`), but the
    /// connection's watches go.
    fn connection_closed(&self, from: Peer) {
        let sessions: Vec<SessionId> = self
            .clients
            .borrow()
            .iter()
            .filter(|(_, (_, addr))| *addr == from.addr)
            .map(|(session, _)| *session)
            .collect();
        for session in sessions {
            self.clients.borrow_mut().remove(&session);
            self.model.borrow_mut().drop_watches(session);
        }
    }

    /// The session expirer. ZooKeeper's `SessionTrackerImpl` sleeps until the next expiry bucket
    /// (deadlines are rounded to ticks) and ends the sessions in it; so does this one: it wakes
    /// at the earliest deadline, or when a request sets an earlier one or the server's clock is
    /// changed. A session renewed in between is simply not due yet, and the expirer sleeps again.
    fn next_due(&self) -> Option<(u64, Duration)> {
        let mono = self.node.mono_ms();
        self.model.borrow().next_expiry_ms().map(|deadline| {
            (
                deadline,
                Duration::from_millis(deadline.saturating_sub(mono)),
            )
        })
    }

    fn on_due(&self) {
        let mono = self.node.mono_ms();
        let mut events = Vec::new();
        let expired = self.model.borrow_mut().expire_due(mono, &mut events);
        if !expired.is_empty() {
            self.expire(&expired);
            self.note_watches(&events);
            self.persist();
        }
        self.deliver(events);
    }
}

impl ZkServer {
    fn now(&self) -> (u64, u64) {
        (self.node.mono_ms(), self.node.wall_ms())
    }

    fn record(&self, path: &str, change: KeyChange, by: Option<usize>) {
        // The node's path is its identity, as a Redis lock's token is.
        let value = Some(path.to_string());
        self.node.record(KeyEvent::new(path, change, value, by));
    }

    /// Records the watches that fired, right after the change that fired them (so each
    /// `node_deleted` is told apart from the next node at the same path).
    fn note_watches(&self, events: &[WatchEvent]) {
        for event in events {
            let Some(&(client, _)) = self.clients.borrow().get(&event.session) else {
                continue; // nobody to tell: not a wake-up
            };
            let world = &self.node.world;
            world.record(
                self.node.me,
                Kind::Observe,
                HistoryOp::Watch {
                    path: event.path.clone(),
                    event: serve::event_name(event.kind).to_string(),
                    to: world.topology.name(client).to_string(),
                },
            );
        }
    }

    /// Logs what the last transactions changed before the reply leaves, as ZooKeeper does.
    fn persist(&self) {
        let model = self.model.borrow();
        let zxid = model.last_zxid();
        if self.persisted.replace(Some(zxid)) != Some(zxid) {
            self.node.disk.sync(model.snapshot());
        }
    }

    fn deliver(&self, events: Vec<WatchEvent>) {
        for event in events {
            let target = self.clients.borrow().get(&event.session).copied();
            if let Some((_, addr)) = target {
                push(
                    &self.node.world,
                    &self.pusher,
                    self.node.me,
                    addr,
                    Box::new(ZkPush(event)),
                );
            }
        }
    }

    fn expire(&self, sessions: &[SessionId]) {
        for session in sessions {
            let nodes = self.ephemerals.borrow_mut().remove(session);
            for path in nodes.unwrap_or_default() {
                self.record(&path, KeyChange::Expired, None);
            }
            self.clients.borrow_mut().remove(session);
        }
    }

    /// Applies `request` from client node `from` (pushed events go to `addr`): the response, and
    /// the watch events to push.
    fn apply(
        &self,
        from: usize,
        addr: SocketAddr,
        connection: u64,
        request: ZkRequest,
    ) -> (ZkResponse, Vec<WatchEvent>) {
        let (mono, wall) = self.now();
        let mut events = Vec::new();
        let expired = self.model.borrow_mut().expire_due(mono, &mut events);
        self.expire(&expired);
        self.note_watches(&events);
        let fired_by_expiry = events.len();
        let mut model = self.model.borrow_mut();
        let answer = serve::answer(
            &mut model,
            &mut self.ephemerals.borrow_mut(),
            connection,
            request,
            mono,
            wall,
            &mut events,
        );
        if let Some(session) = answer.attach {
            self.clients.borrow_mut().insert(session, (from, addr));
        }
        if let Some((path, change)) = &answer.change {
            self.record(path, *change, Some(from));
        }
        self.node.due.offer(model.next_expiry_ms());
        drop(model);
        self.note_watches(&events[fired_by_expiry..]);
        self.persist();
        (answer.response, events)
    }
}
