//! A simulated ZooKeeper server: the znode tree, sessions and one-shot watches that lock recipes
//! use, as a pure state machine.
//!
//! Nothing here does I/O, reads a clock or draws a random number: the caller passes the server's
//! clocks into every call. Two clocks, because the real server uses two: node timestamps
//! (`ctime`/`mtime`) come from the wall clock (`Time.currentWallTime()`), while session expiry
//! runs on the monotonic one (`Time.currentElapsedTime()`, i.e. `System.nanoTime()`), so a wall
//! clock jump on a ZooKeeper server never expires a session. The semantics follow ZooKeeper 3.8's
//! own code (`PrepRequestProcessor`, `DataTree`, `SessionTrackerImpl`, `ExpiryQueue`,
//! `WatchManager`, `PathUtils`), because a lock recipe that is wrong against a real server must
//! be wrong here too.
//!
//! The model is one standalone server. What it leaves out: ACLs (everything is world-writable),
//! multi-ops, containers/TTL nodes, persistent watches, quotas, `jute.maxbuffer` limits, and the
//! connection layer (a session has exactly one connection, so watches belong to sessions, and a
//! client that reconnects must re-register its watches itself).
//!
//! Iteration order matters for replay, so every collection is a `BTreeMap`/`BTreeSet` or a `Vec`.
//! Where the real server iterates a hash set (children of a node, watchers of a path, ephemerals
//! of a session, sessions in one expiry bucket) the model uses sorted order instead.

pub use lockcheck_algorithms::zookeeper::store::{
    CreateMode, EventType, SessionId, Stat, ZkError, Zxid,
};
use lockcheck_core::scenario::DEFAULT_TICK_TIME_MS;
use std::collections::{BTreeMap, BTreeSet};

/// A request from a client, in its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `create(path, data, OPEN_ACL_UNSAFE, mode)`.
    Create {
        /// The path, or the prefix of the path for a sequential mode.
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// Persistent or ephemeral, sequential or not.
        mode: CreateMode,
    },
    /// `delete(path, version)`.
    Delete {
        /// The node.
        path: String,
        /// The version the node must have; -1 matches any.
        version: i32,
    },
    /// `exists(path, watch)`.
    Exists {
        /// The node.
        path: String,
        /// Leave a data watch, even if the node does not exist (it then fires on creation).
        watch: bool,
    },
    /// `getData(path, watch)`.
    GetData {
        /// The node.
        path: String,
        /// Leave a data watch, if the node exists.
        watch: bool,
    },
    /// `setData(path, data, version)`.
    SetData {
        /// The node.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The version the node must have; -1 matches any.
        version: i32,
    },
    /// `getChildren(path, watch)`.
    GetChildren {
        /// The node.
        path: String,
        /// Leave a child watch, if the node exists.
        watch: bool,
    },
}

impl Op {
    /// Whether the request is a write: it goes through the transaction log and takes a zxid,
    /// even when it fails (the server assigns the zxid before checking the request, and logs a
    /// failed one as an error transaction).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Op::Create { .. } | Op::Delete { .. } | Op::SetData { .. }
        )
    }

    fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::Delete { path, .. }
            | Op::Exists { path, .. }
            | Op::GetData { path, .. }
            | Op::SetData { path, .. }
            | Op::GetChildren { path, .. } => path,
        }
    }
}

/// The server's reply to an [`Op`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// `Create`: the path actually created (with the sequence suffix if any).
    Created(String),
    /// `Delete` succeeded.
    Deleted,
    /// `Exists` (`None`: no such node) and `SetData` (always `Some`: the node after the write).
    Stat(Option<Stat>),
    /// `GetData`: the data and the stat.
    Data(Vec<u8>, Stat),
    /// `GetChildren`: the children's names, sorted bytewise. The real server returns them in
    /// `HashSet` order, which no client may rely on (recipes sort them), so sorted is both
    /// faithful to the contract and deterministic.
    Children(Vec<String>),
    /// The request failed.
    Error(ZkError),
}

/// The watches a client re-registers on a new connection (`SetWatches`), by the kind the client
/// left them as: `getData`/`exists` on a node that existed (data), `exists` on a node that did
/// not (exist), `getChildren` (child).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetWatches {
    /// Data watches.
    pub data: BTreeSet<String>,
    /// Exist watches.
    pub exist: BTreeSet<String>,
    /// Child watches.
    pub child: BTreeSet<String>,
}

impl SetWatches {
    /// Forgets the watches an event on `path` of kind `kind` fired, as the client's watch
    /// manager does (`ZKWatchManager.materialize`).
    pub fn fired(&mut self, path: &str, kind: EventType) {
        match kind {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.data.remove(path);
                self.exist.remove(path);
            }
            EventType::NodeChildrenChanged => {
                self.child.remove(path);
            }
            EventType::NodeDeleted => {
                self.data.remove(path);
                self.exist.remove(path);
                self.child.remove(path);
            }
        }
    }
}

/// A watch that fired: the notification the server sends to `session`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    /// The session that left the watch.
    pub session: SessionId,
    /// The watched path.
    pub path: String,
    /// What happened.
    pub kind: EventType,
}

/// A znode: its data, its stat fields and the names of its children.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    data: Vec<u8>,
    czxid: Zxid,
    mzxid: Zxid,
    pzxid: Zxid,
    ctime_ms: u64,
    mtime_ms: u64,
    version: i32,
    /// The number of children ever created under the node: the server's internal `cversion`,
    /// which names sequential children. The `cversion` a stat reports is derived from it (see
    /// [`Node::stat`]).
    cversion: i32,
    ephemeral_owner: SessionId,
    children: BTreeSet<String>,
}

impl Node {
    /// `DataTree.createStat`: every zxid is the creating one, both times the creation time.
    fn new(data: Vec<u8>, zxid: Zxid, time_ms: u64, ephemeral_owner: SessionId) -> Self {
        Node {
            data,
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ctime_ms: time_ms,
            mtime_ms: time_ms,
            version: 0,
            cversion: 0,
            ephemeral_owner,
            children: BTreeSet::new(),
        }
    }

    /// `DataNode.copyStat`. The server counts only child creations in its `cversion` but
    /// reports the number of changes to the children (creations and deletions, "v3
    /// semantics"): every child created is either still there or was deleted, so the reported
    /// value is `2 × creations − children` (Java int arithmetic: it wraps). A node whose children
    /// were added without a transaction (`/zookeeper` on a fresh server) reports a negative one.
    fn stat(&self) -> Stat {
        let num_children = i32::try_from(self.children.len()).unwrap_or(i32::MAX);
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            pzxid: self.pzxid,
            ctime_ms: self.ctime_ms,
            mtime_ms: self.mtime_ms,
            version: self.version,
            cversion: self.cversion.wrapping_mul(2).wrapping_sub(num_children),
            ephemeral_owner: self.ephemeral_owner,
            data_length: i32::try_from(self.data.len()).unwrap_or(i32::MAX),
            num_children,
        }
    }
}

/// The nodes a fresh server has (`DataTree`'s constructor): `/`, `/zookeeper`,
/// `/zookeeper/quota` and `/zookeeper/config`, all with all-zero stat fields (they are added
/// without a transaction, so even the root's count of creations stays 0, and its reported
/// `cversion` is -1, `/zookeeper`'s -2).
fn initial_tree() -> BTreeMap<String, Node> {
    let with_children = |names: &[&str]| {
        let mut node = Node::new(Vec::new(), 0, 0, 0);
        node.children = names.iter().map(|name| (*name).to_owned()).collect();
        node
    };
    BTreeMap::from([
        ("/".to_owned(), with_children(&["zookeeper"])),
        ("/zookeeper".to_owned(), with_children(&["config", "quota"])),
        ("/zookeeper/config".to_owned(), with_children(&[])),
        ("/zookeeper/quota".to_owned(), with_children(&[])),
    ])
}

/// The nodes no request may delete (`DataTree.isSpecialPath`).
const SPECIAL_PATHS: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// A live session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Session {
    /// The negotiated timeout.
    timeout_ms: u64,
    /// When the expirer ends the session unless a request renews it first, on the monotonic
    /// clock.
    deadline_ms: u64,
}

/// What the server keeps in its data directory, so a restart comes back with it: the tree, the
/// sessions with their timeouts, the last zxid, and the configuration (`zoo.cfg` survives a
/// restart too). No watches: they live in connections, and clients re-register them. No renewal
/// times either: the real snapshot stores only each session's timeout, and a restarted server
/// gives every session a fresh full timeout from its start (`SessionTrackerImpl`'s constructor
/// tracks each restored session anew), so a client can reconnect before it is expired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    nodes: BTreeMap<String, Node>,
    sessions: BTreeMap<SessionId, u64>,
    zxid: Zxid,
    next_session: SessionId,
    tick_time_ms: u64,
}

/// One ZooKeeper server (standalone): tree, sessions, watches and the zxid counter.
#[derive(Clone, Debug)]
pub struct ZkModel {
    nodes: BTreeMap<String, Node>,
    sessions: BTreeMap<SessionId, Session>,
    /// Watches left by `exists`/`getData`, by path.
    data_watches: BTreeMap<String, BTreeSet<SessionId>>,
    /// Watches left by `getChildren`, by path.
    child_watches: BTreeMap<String, BTreeSet<SessionId>>,
    /// Each session's connection: the number (counted by its client) of the connection that
    /// last opened or reconnected it. Not on disk: connections die with the process, and a
    /// restored session is owned by whichever connection takes it up first.
    owners: BTreeMap<SessionId, u64>,
    /// The last zxid given out.
    zxid: Zxid,
    /// The id the next session gets. A counter rather than the real server's time-based ids,
    /// and persisted, so a restarted server never hands out an id it gave before.
    next_session: SessionId,
    tick_time_ms: u64,
    /// Whether a request first ends the sessions past their deadline (a standalone server,
    /// whose expirer needs no one's agreement). An ensemble's tree leaves that to the leader's
    /// expirer, which ends them only with a quorum ([`ZkModel::quorum_expires`]).
    expires_inline: bool,
}

impl Default for ZkModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ZkModel {
    /// A fresh server with the default tick ([`DEFAULT_TICK_TIME_MS`]).
    pub fn new() -> Self {
        Self::with_tick_time(DEFAULT_TICK_TIME_MS)
    }

    /// A fresh server with `tickTime = tick_time_ms`. The tick bounds session timeouts (2 to 20
    /// ticks, the defaults of `minSessionTimeout`/`maxSessionTimeout`) and is the granularity of
    /// session expiry.
    ///
    /// # Panics
    /// If `tick_time_ms` is 0 (the real server refuses to start too).
    pub fn with_tick_time(tick_time_ms: u64) -> Self {
        assert!(tick_time_ms > 0, "tickTime must be positive");
        ZkModel {
            nodes: initial_tree(),
            sessions: BTreeMap::new(),
            data_watches: BTreeMap::new(),
            child_watches: BTreeMap::new(),
            owners: BTreeMap::new(),
            zxid: 0,
            next_session: 1,
            tick_time_ms,
            expires_inline: true,
        }
    }

    /// This tree as an ensemble's: a request no longer ends the sessions past their deadline on
    /// its way, since a session's close is a proposal that commits only with a quorum (the
    /// leader's expirer, `ensemble::State::expire`, does it then). A session past its deadline
    /// meanwhile is closing: no ping or request renews it, and its nodes stay.
    pub fn quorum_expires(mut self) -> Self {
        self.expires_inline = false;
        self
    }

    /// A server restarted from its data directory at `now_mono_ms` (its monotonic clock). Every
    /// restored session gets a full timeout from now, as in the real server; no watches survive.
    pub fn restore(snapshot: Snapshot, now_mono_ms: u64) -> Self {
        let mut model = ZkModel {
            nodes: snapshot.nodes,
            sessions: BTreeMap::new(),
            data_watches: BTreeMap::new(),
            child_watches: BTreeMap::new(),
            owners: BTreeMap::new(),
            zxid: snapshot.zxid,
            next_session: snapshot.next_session,
            tick_time_ms: snapshot.tick_time_ms,
            expires_inline: true,
        };
        for (id, timeout_ms) in snapshot.sessions {
            let deadline_ms = model.deadline(now_mono_ms, timeout_ms);
            model.sessions.insert(
                id,
                Session {
                    timeout_ms,
                    deadline_ms,
                },
            );
        }
        model
    }

    /// What the server has on disk now. ZooKeeper logs every transaction before applying it
    /// (fsync on by default), so this is the whole state except watches.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            nodes: self.nodes.clone(),
            sessions: self
                .sessions
                .iter()
                .map(|(id, session)| (*id, session.timeout_ms))
                .collect(),
            zxid: self.zxid,
            next_session: self.next_session,
            tick_time_ms: self.tick_time_ms,
        }
    }

    /// The configured `tickTime`.
    pub fn tick_time_ms(&self) -> u64 {
        self.tick_time_ms
    }

    /// The last zxid given out (0 on a fresh server).
    pub fn last_zxid(&self) -> Zxid {
        self.zxid
    }

    /// Opens a session asking for `timeout_ms`; returns its id and the negotiated timeout,
    /// clamped to `[2 × tickTime, 20 × tickTime]` as `processConnectRequest` does. Creating a
    /// session is a transaction (`createSession`), so it takes a zxid.
    pub fn open_session(&mut self, timeout_ms: u64, now_mono_ms: u64) -> (SessionId, u64) {
        let negotiated = timeout_ms.clamp(2 * self.tick_time_ms, 20 * self.tick_time_ms);
        let id = self.next_session;
        self.next_session += 1;
        self.zxid += 1;
        let deadline_ms = self.deadline(now_mono_ms, negotiated);
        self.sessions.insert(
            id,
            Session {
                timeout_ms: negotiated,
                deadline_ms,
            },
        );
        (id, negotiated)
    }

    /// A ping (or the renewal every request does): pushes the session's deadline to a full
    /// timeout from now. A session that is unknown, closed or past its deadline gets
    /// `SessionExpired` — past its deadline even if [`ZkModel::expire_due`] has not run yet,
    /// because the real expirer wakes exactly at the deadline, before any later request.
    pub fn touch(&mut self, session: SessionId, now_mono_ms: u64) -> Result<(), ZkError> {
        let tick = self.tick_time_ms;
        match self.sessions.get_mut(&session) {
            Some(live) if now_mono_ms < live.deadline_ms => {
                live.deadline_ms = round_to_next_tick(now_mono_ms, live.timeout_ms, tick);
                Ok(())
            }
            _ => Err(ZkError::SessionExpired),
        }
    }

    /// The client's `connection` opened or took up `session`: from now on the session's requests
    /// on its earlier connections are not carried out ([`ZkModel::moved_on`]).
    pub fn claim(&mut self, session: SessionId, connection: u64) {
        let owner = self.owners.entry(session).or_insert(connection);
        *owner = (*owner).max(connection);
    }

    /// Whether `session` has moved on from `connection`: a later connection of its client has
    /// opened or reconnected it. A real server closes the session's older connection when it
    /// reconnects (so what was still on its way there is never read), and an ensemble's leader
    /// refuses a request from a member that no longer owns the session
    /// (`SessionMovedException`): either way, the request is not carried out.
    pub fn moved_on(&self, session: SessionId, connection: u64) -> bool {
        self.owners
            .get(&session)
            .is_some_and(|&owner| connection < owner)
    }

    /// The negotiated timeout of a session that is still open (it may be past its deadline if
    /// [`ZkModel::expire_due`] has not run).
    pub fn session_timeout_ms(&self, session: SessionId) -> Option<u64> {
        self.sessions.get(&session).map(|live| live.timeout_ms)
    }

    /// The open sessions (some may be past their deadline if [`ZkModel::expire_due`] has not
    /// run), by id.
    pub fn session_ids(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.sessions.keys().copied()
    }

    /// The earliest deadline of any open session on the monotonic clock: when the harness
    /// should next call [`ZkModel::expire_due`].
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.sessions.values().map(|live| live.deadline_ms).min()
    }

    /// Every ephemeral node by its owning session: what a restarted server knows of the nodes
    /// each session's end will delete.
    pub fn ephemerals(&self) -> BTreeMap<SessionId, BTreeSet<String>> {
        let mut owned: BTreeMap<SessionId, BTreeSet<String>> = BTreeMap::new();
        for (path, node) in &self.nodes {
            if node.ephemeral_owner != 0 {
                owned
                    .entry(node.ephemeral_owner)
                    .or_default()
                    .insert(path.clone());
            }
        }
        owned
    }

    /// A client reconnects `session` on a new connection: renews it (or `SessionExpired`), drops
    /// the watches its old connection held (the server removes a closed connection's watchers),
    /// and re-registers the client's own list, as `SetWatches` does (`DataTree.setWatches`): a
    /// data watch on a node now gone fires `NodeDeleted` and one on a node written after
    /// `relative_zxid` (the last zxid the client saw) fires `NodeDataChanged`; an exist watch on
    /// a node that now exists fires `NodeCreated`; a child watch fires `NodeDeleted` or, if the
    /// children changed after `relative_zxid`, `NodeChildrenChanged`. The rest are left set.
    pub fn reconnect(
        &mut self,
        session: SessionId,
        relative_zxid: Zxid,
        watches: &SetWatches,
        now_mono_ms: u64,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(), ZkError> {
        if self.expires_inline {
            self.expire_due(now_mono_ms, events);
        }
        self.touch(session, now_mono_ms)?;
        self.drop_watches(session);
        self.rewatch(session, relative_zxid, watches, events);
        Ok(())
    }

    /// Sets `session`'s `watches` again on this tree, as a member does with a reconnecting
    /// client's `SetWatches` or with its own clients' watches when it catches up: a watch whose
    /// node changed since `relative_zxid` fires at once (appended to `events`), the others are
    /// left.
    pub fn rewatch(
        &mut self,
        session: SessionId,
        relative_zxid: Zxid,
        watches: &SetWatches,
        events: &mut Vec<WatchEvent>,
    ) {
        let mut fired = |path: &str, kind| {
            events.push(WatchEvent {
                session,
                path: path.to_owned(),
                kind,
            })
        };
        for path in &watches.data {
            match self.nodes.get(path) {
                None => fired(path, EventType::NodeDeleted),
                Some(node) if node.mzxid > relative_zxid => fired(path, EventType::NodeDataChanged),
                Some(_) => add_watch(&mut self.data_watches, path, session),
            }
        }
        for path in &watches.exist {
            match self.nodes.get(path) {
                Some(_) => fired(path, EventType::NodeCreated),
                None => add_watch(&mut self.data_watches, path, session),
            }
        }
        for path in &watches.child {
            match self.nodes.get(path) {
                None => fired(path, EventType::NodeDeleted),
                Some(node) if node.pzxid > relative_zxid => {
                    fired(path, EventType::NodeChildrenChanged)
                }
                Some(_) => add_watch(&mut self.child_watches, path, session),
            }
        }
    }

    /// Removes every watch `session` left: its connection closed, and the server removes a
    /// closed connection's watchers (the client re-registers them when it reconnects).
    pub fn drop_watches(&mut self, session: SessionId) {
        for table in [&mut self.data_watches, &mut self.child_watches] {
            table.retain(|_, sessions| {
                sessions.remove(&session);
                !sessions.is_empty()
            });
        }
    }

    /// The stat of the node at `path`, if any, without a session or a watch (for checkers).
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(Node::stat)
    }

    /// Runs one request of `session`.
    ///
    /// A malformed path is refused first, with nothing else happening (the Java client checks
    /// paths before sending, so the server never sees the request). Then sessions due at
    /// `now_mono_ms` expire (the real expirer would already have run), the request renews its
    /// own session (or fails with `SessionExpired`), and the request runs. Writes take a zxid
    /// whether they succeed or not, and stamp `ctime`/`mtime` with `now_wall_ms`. Every watch
    /// that fires, from expiries or from the request, is appended to `events`.
    pub fn apply(
        &mut self,
        session: SessionId,
        op: &Op,
        now_mono_ms: u64,
        now_wall_ms: u64,
        events: &mut Vec<WatchEvent>,
    ) -> OpResult {
        let sequential = matches!(op, Op::Create { mode, .. } if mode.is_sequential());
        if !valid_path(op.path(), sequential) {
            return OpResult::Error(ZkError::BadArguments);
        }
        if self.expires_inline {
            self.expire_due(now_mono_ms, events);
        }
        if let Err(err) = self.touch(session, now_mono_ms) {
            return OpResult::Error(err);
        }
        if op.is_write() {
            self.zxid += 1;
        }
        let result = match op {
            Op::Create { path, data, mode } => {
                self.create(session, path, data, *mode, now_wall_ms, events)
            }
            Op::Delete { path, version } => self.delete(path, *version, events),
            Op::SetData {
                path,
                data,
                version,
            } => self.set_data(path, data, *version, now_wall_ms, events),
            Op::Exists { .. } | Op::GetData { .. } | Op::GetChildren { .. } => {
                return self.read_checked(session, op);
            }
        };
        result.unwrap_or_else(OpResult::Error)
    }

    /// Answers the read `op` (`exists`, `getData`, `getChildren`) of `session` from this tree as
    /// it stands, leaving its watch: what a member does with a read from its own replica (a
    /// follower does not ask the leader, and its replica may lag). Sessions are not looked at:
    /// the member that answers does that from its own view. A write is refused as
    /// `BadArguments` (it is a proposal, never answered from a replica).
    pub fn read(&mut self, session: SessionId, op: &Op) -> OpResult {
        if !valid_path(op.path(), false) {
            return OpResult::Error(ZkError::BadArguments);
        }
        self.read_checked(session, op)
    }

    /// [`ZkModel::read`] of a path already checked.
    fn read_checked(&mut self, session: SessionId, op: &Op) -> OpResult {
        let result = match op {
            Op::Exists { path, watch } => {
                if *watch {
                    add_watch(&mut self.data_watches, path, session);
                }
                Ok(OpResult::Stat(self.stat(path)))
            }
            Op::GetData { path, watch } => self.nodes.get(path).ok_or(ZkError::NoNode).map(|n| {
                let reply = OpResult::Data(n.data.clone(), n.stat());
                if *watch {
                    add_watch(&mut self.data_watches, path, session);
                }
                reply
            }),
            Op::GetChildren { path, watch } => {
                self.nodes.get(path).ok_or(ZkError::NoNode).map(|n| {
                    let reply = OpResult::Children(n.children.iter().cloned().collect());
                    if *watch {
                        add_watch(&mut self.child_watches, path, session);
                    }
                    reply
                })
            }
            Op::Create { .. } | Op::Delete { .. } | Op::SetData { .. } => {
                Err(ZkError::BadArguments)
            }
        };
        result.unwrap_or_else(OpResult::Error)
    }

    /// Takes `session`'s watches out of this tree, as the client would list them when it sets
    /// them again (`SetWatches`): a data watch on a node that exists is a data watch, one on a
    /// node that does not is an exist watch.
    pub fn take_watches(&mut self, session: SessionId) -> SetWatches {
        let mut watches = SetWatches::default();
        for (path, sessions) in &self.data_watches {
            if sessions.contains(&session) {
                if self.nodes.contains_key(path) {
                    watches.data.insert(path.clone());
                } else {
                    watches.exist.insert(path.clone());
                }
            }
        }
        for (path, sessions) in &self.child_watches {
            if sessions.contains(&session) {
                watches.child.insert(path.clone());
            }
        }
        self.drop_watches(session);
        watches
    }

    /// The session expirer: ends every session whose deadline is at or before `now_mono_ms`,
    /// earliest deadline first (ties by id), each as its own `closeSession` transaction. Returns
    /// the ids of the sessions it ended.
    pub fn expire_due(&mut self, now_mono_ms: u64, events: &mut Vec<WatchEvent>) -> Vec<SessionId> {
        let mut due: Vec<(u64, SessionId)> = self
            .sessions
            .iter()
            .filter(|(_, live)| live.deadline_ms <= now_mono_ms)
            .map(|(id, live)| (live.deadline_ms, *id))
            .collect();
        due.sort_unstable();
        due.into_iter()
            .map(|(_, id)| {
                self.end_session(id, events);
                id
            })
            .collect()
    }

    /// The client closes its session: like an expiry, at once. A session that has already
    /// ended (or is past its deadline) gets `SessionExpired`.
    pub fn close_session(
        &mut self,
        session: SessionId,
        now_mono_ms: u64,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(), ZkError> {
        if self.expires_inline {
            self.expire_due(now_mono_ms, events);
        }
        if !self.sessions.contains_key(&session) {
            return Err(ZkError::SessionExpired);
        }
        self.end_session(session, events);
        Ok(())
    }

    /// The `closeSession` transaction, from the client or the expirer: one zxid for the whole
    /// session, its ephemeral nodes deleted in path order with that zxid. The session's own
    /// watches are dropped first: its connection is gone (expiry) or going (close), so nobody
    /// would receive them.
    fn end_session(&mut self, session: SessionId, events: &mut Vec<WatchEvent>) {
        self.sessions.remove(&session);
        self.owners.remove(&session);
        for table in [&mut self.data_watches, &mut self.child_watches] {
            table.retain(|_, sessions| {
                sessions.remove(&session);
                !sessions.is_empty()
            });
        }
        self.zxid += 1;
        let zxid = self.zxid;
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, node)| node.ephemeral_owner == session)
            .map(|(path, _)| path.clone())
            .collect();
        for path in owned {
            self.remove_node(&path, zxid, events);
        }
    }

    /// `pRequest2TxnCreate` then `DataTree.createNode`, with the checks in the server's order:
    /// parent exists, name free, parent not ephemeral.
    fn create(
        &mut self,
        session: SessionId,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        now_wall_ms: u64,
        events: &mut Vec<WatchEvent>,
    ) -> Result<OpResult, ZkError> {
        let parent_path = parent_of(path).to_owned();
        let parent = self.nodes.get(&parent_path).ok_or(ZkError::NoNode)?;
        let actual = if mode.is_sequential() {
            // Java's `%010d` of the parent's cversion; Rust's `{:010}` pads a negative number
            // the same way ("-000000001") should the counter ever wrap.
            format!("{path}{:010}", parent.cversion)
        } else {
            path.to_owned()
        };
        if self.nodes.contains_key(&actual) {
            return Err(ZkError::NodeExists);
        }
        if parent.ephemeral_owner != 0 {
            return Err(ZkError::NoChildrenForEphemerals);
        }
        let zxid = self.zxid;
        let owner = if mode.is_ephemeral() { session } else { 0 };
        let name = actual[parent_path.len()..]
            .trim_start_matches('/')
            .to_owned();
        if let Some(parent) = self.nodes.get_mut(&parent_path) {
            parent.cversion = parent.cversion.wrapping_add(1);
            parent.pzxid = zxid;
            parent.children.insert(name);
        }
        self.nodes.insert(
            actual.clone(),
            Node::new(data.to_vec(), zxid, now_wall_ms, owner),
        );
        fire(
            &mut self.data_watches,
            &actual,
            EventType::NodeCreated,
            &BTreeSet::new(),
            events,
        );
        fire(
            &mut self.child_watches,
            &parent_path,
            EventType::NodeChildrenChanged,
            &BTreeSet::new(),
            events,
        );
        Ok(OpResult::Created(actual))
    }

    /// The delete request's checks, in the server's order: a deletable path, the node exists,
    /// the version matches, no children.
    fn delete(
        &mut self,
        path: &str,
        version: i32,
        events: &mut Vec<WatchEvent>,
    ) -> Result<OpResult, ZkError> {
        if SPECIAL_PATHS.contains(&path) {
            return Err(ZkError::BadArguments);
        }
        let node = self.nodes.get(path).ok_or(ZkError::NoNode)?;
        if version != -1 && version != node.version {
            return Err(ZkError::BadVersion);
        }
        if !node.children.is_empty() {
            return Err(ZkError::NotEmpty);
        }
        self.remove_node(path, self.zxid, events);
        Ok(OpResult::Deleted)
    }

    /// `DataTree.deleteNode`: the parent's `pzxid` moves (its count of creations does not, so
    /// its reported `cversion` goes up by one), then the
    /// node's data watchers get `NodeDeleted`, its child watchers too unless they already got
    /// it from a data watch, and the parent's child watchers `NodeChildrenChanged`.
    fn remove_node(&mut self, path: &str, zxid: Zxid, events: &mut Vec<WatchEvent>) {
        if self.nodes.remove(path).is_none() {
            return;
        }
        let parent_path = parent_of(path).to_owned();
        if let Some(parent) = self.nodes.get_mut(&parent_path) {
            parent
                .children
                .remove(path[parent_path.len()..].trim_start_matches('/'));
            parent.pzxid = parent.pzxid.max(zxid);
        }
        let notified = fire(
            &mut self.data_watches,
            path,
            EventType::NodeDeleted,
            &BTreeSet::new(),
            events,
        );
        fire(
            &mut self.child_watches,
            path,
            EventType::NodeDeleted,
            &notified,
            events,
        );
        fire(
            &mut self.child_watches,
            &parent_path,
            EventType::NodeChildrenChanged,
            &BTreeSet::new(),
            events,
        );
    }

    /// `setData`: the node exists, the version matches; then data, `version`, `mtime`, `mzxid`.
    fn set_data(
        &mut self,
        path: &str,
        data: &[u8],
        version: i32,
        now_wall_ms: u64,
        events: &mut Vec<WatchEvent>,
    ) -> Result<OpResult, ZkError> {
        let zxid = self.zxid;
        let node = self.nodes.get_mut(path).ok_or(ZkError::NoNode)?;
        if version != -1 && version != node.version {
            return Err(ZkError::BadVersion);
        }
        // 3.8's `checkAndIncVersion` is a plain `+ 1` (wrapping, as Java ints do).
        node.version = node.version.wrapping_add(1);
        node.data = data.to_vec();
        node.mtime_ms = now_wall_ms;
        node.mzxid = zxid;
        let stat = node.stat();
        fire(
            &mut self.data_watches,
            path,
            EventType::NodeDataChanged,
            &BTreeSet::new(),
            events,
        );
        Ok(OpResult::Stat(Some(stat)))
    }

    /// `ExpiryQueue.roundToNextInterval(now + timeout)` for this server's tick.
    fn deadline(&self, now_mono_ms: u64, timeout_ms: u64) -> u64 {
        round_to_next_tick(now_mono_ms, timeout_ms, self.tick_time_ms)
    }
}

/// The real expirer keeps sessions in buckets one tick wide and ends a whole bucket when the
/// monotonic clock reaches its upper bound, so a session lives between its timeout and its
/// timeout plus one tick after its last renewal: `(t / tick + 1) × tick` for `t = now + timeout`.
fn round_to_next_tick(now_mono_ms: u64, timeout_ms: u64, tick_ms: u64) -> u64 {
    let t = now_mono_ms.saturating_add(timeout_ms);
    (t / tick_ms).saturating_add(1).saturating_mul(tick_ms)
}

/// The parent of a (valid) path, as the server computes it: everything before the last `/`,
/// with the empty string meaning the root. `"/"` is its own parent, which makes a
/// non-sequential create of `/` fail with `NodeExists` as it does on the real server.
fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Leaves a one-shot watch (a second one by the same session on the same path is the same watch).
fn add_watch(table: &mut BTreeMap<String, BTreeSet<SessionId>>, path: &str, session: SessionId) {
    table.entry(path.to_owned()).or_default().insert(session);
}

/// `WatchManager.triggerWatch`: removes every watch on `path` (they are one-shot) and notifies
/// their sessions in id order, except those in `suppress`. Returns the sessions whose watches
/// were removed.
fn fire(
    table: &mut BTreeMap<String, BTreeSet<SessionId>>,
    path: &str,
    kind: EventType,
    suppress: &BTreeSet<SessionId>,
    events: &mut Vec<WatchEvent>,
) -> BTreeSet<SessionId> {
    let watchers = table.remove(path).unwrap_or_default();
    for session in watchers.difference(suppress) {
        events.push(WatchEvent {
            session: *session,
            path: path.to_owned(),
            kind,
        });
    }
    watchers
}

/// `PathUtils.validatePath`: absolute, no trailing `/` (except the root), no empty, `.` or `..`
/// component, no control or otherwise excluded characters. A sequential create's path is checked
/// with a digit appended, since the server appends the suffix (so `/lock/` is a valid prefix).
/// Java checks UTF-16 units and refuses `\ud800`–`\uf8ff`: surrogates (so every character
/// outside the BMP) and the private-use area. A Rust `char` is never a surrogate, hence the
/// separate `<= 0xffff` test.
fn valid_path(path: &str, sequential: bool) -> bool {
    let owned;
    let path = if sequential {
        owned = format!("{path}1");
        owned.as_str()
    } else {
        path
    };
    if !path.starts_with('/') {
        return false;
    }
    if path == "/" {
        return true;
    }
    if path.ends_with('/') {
        return false;
    }
    path[1..].split('/').all(|name| {
        !name.is_empty()
            && name != "."
            && name != ".."
            && name.chars().all(|c| {
                !matches!(c, '\u{0}'..='\u{1f}'
                    | '\u{7f}'..='\u{9f}'
                    | '\u{e000}'..='\u{f8ff}'
                    | '\u{fff0}'..='\u{ffff}')
                    && u32::from(c) <= 0xffff
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: u64 = DEFAULT_TICK_TIME_MS;

    fn create(path: &str, mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: Vec::new(),
            mode,
        }
    }

    fn exists(path: &str, watch: bool) -> Op {
        Op::Exists {
            path: path.into(),
            watch,
        }
    }

    fn delete(path: &str, version: i32) -> Op {
        Op::Delete {
            path: path.into(),
            version,
        }
    }

    fn children(path: &str, watch: bool) -> Op {
        Op::GetChildren {
            path: path.into(),
            watch,
        }
    }

    /// Runs `op` at monotonic time `mono` (wall clock = mono + 1_000_000) and returns the reply
    /// and the events.
    fn run(m: &mut ZkModel, s: SessionId, op: &Op, mono: u64) -> (OpResult, Vec<WatchEvent>) {
        let mut events = Vec::new();
        let r = m.apply(s, op, mono, mono + 1_000_000, &mut events);
        (r, events)
    }

    fn ok(m: &mut ZkModel, s: SessionId, op: &Op) -> OpResult {
        let (r, _) = run(m, s, op, 0);
        assert!(!matches!(r, OpResult::Error(_)), "{op:?} failed: {r:?}");
        r
    }

    fn event(session: SessionId, path: &str, kind: EventType) -> WatchEvent {
        WatchEvent {
            session,
            path: path.into(),
            kind,
        }
    }

    fn session(m: &mut ZkModel) -> SessionId {
        m.open_session(10_000, 0).0
    }

    #[test]
    fn a_fresh_server_has_the_root_and_the_zookeeper_subtree() {
        let mut m = ZkModel::new();
        let s = session(&mut m);
        assert_eq!(
            ok(&mut m, s, &children("/", false)),
            OpResult::Children(vec!["zookeeper".into()])
        );
        let root = m.stat("/").unwrap();
        // 2 × 0 creations − 1 child, as a real 3.8 server reports it.
        assert_eq!((root.czxid, root.cversion, root.num_children), (0, -1, 1));
        assert_eq!(m.stat("/zookeeper").unwrap().cversion, -2);
        // The system nodes cannot be deleted; creating "/" finds it there already.
        for path in SPECIAL_PATHS {
            assert_eq!(
                run(&mut m, s, &delete(path, -1), 0).0,
                OpResult::Error(ZkError::BadArguments),
                "{path}"
            );
        }
        assert_eq!(
            run(&mut m, s, &create("/", CreateMode::Persistent), 0).0,
            OpResult::Error(ZkError::NodeExists)
        );
    }

    #[test]
    fn sequential_numbers_come_from_the_parents_cversion_and_are_never_reused() {
        let mut m = ZkModel::new();
        let s = session(&mut m);
        ok(&mut m, s, &create("/lock", CreateMode::Persistent));
        ok(&mut m, s, &create("/other", CreateMode::Persistent));
        let seq = |m: &mut ZkModel, parent: &str| match ok(
            m,
            s,
            &create(&format!("{parent}/n-"), CreateMode::EphemeralSequential),
        ) {
            OpResult::Created(path) => path,
            r => panic!("{r:?}"),
        };
        assert_eq!(seq(&mut m, "/lock"), "/lock/n-0000000000");
        assert_eq!(seq(&mut m, "/lock"), "/lock/n-0000000001");
        // Per parent: another parent starts at 0.
        assert_eq!(seq(&mut m, "/other"), "/other/n-0000000000");
        // A plain child also moves the counter.
        ok(&mut m, s, &create("/lock/plain", CreateMode::Persistent));
        // Deleting does not give numbers back, though the reported cversion counts deletions
        // too (3 creations and 2 deletions).
        ok(&mut m, s, &delete("/lock/n-0000000001", -1));
        ok(&mut m, s, &delete("/lock/plain", -1));
        assert_eq!(m.stat("/lock").unwrap().cversion, 5);
        assert_eq!(seq(&mut m, "/lock"), "/lock/n-0000000003");
        // A sequential create of a bare "/parent/" prefix is valid: the name is just the number.
        assert_eq!(
            ok(
                &mut m,
                s,
                &create("/lock/", CreateMode::PersistentSequential)
            ),
            OpResult::Created("/lock/0000000004".into())
        );
        // A name already taken by the computed number fails, and still counts as a write.
        ok(
            &mut m,
            s,
            &create("/other/x0000000002", CreateMode::Persistent),
        );
        let before = m.last_zxid();
        assert_eq!(
            run(
                &mut m,
                s,
                &create("/other/x", CreateMode::PersistentSequential),
                0
            )
            .0,
            OpResult::Error(ZkError::NodeExists)
        );
        assert_eq!(m.last_zxid(), before + 1);
        assert_eq!(
            ok(&mut m, s, &children("/lock", false)),
            OpResult::Children(vec![
                "0000000004".into(),
                "n-0000000000".into(),
                "n-0000000003".into()
            ])
        );
    }

    #[test]
    fn expiry_deletes_ephemerals_and_fires_the_predecessor_watch() {
        let mut m = ZkModel::new();
        let (a, timeout) = m.open_session(4_000, 0);
        assert_eq!(timeout, 4_000);
        let (b, _) = m.open_session(60_000, 0);
        ok(&mut m, a, &create("/lock", CreateMode::Persistent));
        let a_node = match ok(
            &mut m,
            a,
            &create("/lock/n-", CreateMode::EphemeralSequential),
        ) {
            OpResult::Created(p) => p,
            r => panic!("{r:?}"),
        };
        ok(
            &mut m,
            b,
            &create("/lock/n-", CreateMode::EphemeralSequential),
        );
        // B waits on its predecessor; a parent watcher (B again, via getChildren) sees the change.
        assert!(matches!(
            ok(&mut m, b, &exists(&a_node, true)),
            OpResult::Stat(Some(_))
        ));
        ok(&mut m, b, &children("/lock", true));
        // A watched its own node too: its watches go with it.
        ok(&mut m, a, &exists(&a_node, true));

        let mut events = Vec::new();
        // A's deadline: (0 + 4000) rounded up to the next tick boundary = 6000.
        assert_eq!(m.next_expiry_ms(), Some(6_000));
        assert!(m.expire_due(5_999, &mut events).is_empty());
        assert_eq!(m.expire_due(6_000, &mut events), vec![a]);
        assert_eq!(
            events,
            vec![
                event(b, &a_node, EventType::NodeDeleted),
                event(b, "/lock", EventType::NodeChildrenChanged),
            ]
        );
        assert_eq!(m.stat(&a_node), None);
        assert_eq!(
            run(&mut m, a, &exists("/lock", false), 6_000).0,
            OpResult::Error(ZkError::SessionExpired)
        );
        assert_eq!(m.touch(a, 6_000), Err(ZkError::SessionExpired));
        assert_eq!(m.touch(b, 6_000), Ok(()));
    }

    #[test]
    fn a_wall_clock_jump_never_expires_a_session_but_a_monotonic_gap_does() {
        let mut m = ZkModel::new();
        let (s, timeout) = m.open_session(4_000, 0);
        ok(&mut m, s, &create("/e", CreateMode::Ephemeral));
        // The wall clock leaps a day ahead; the monotonic clock has moved 1 s.
        let mut events = Vec::new();
        let day = 86_400_000;
        let r = m.apply(s, &exists("/e", false), 1_000, day, &mut events);
        assert!(matches!(r, OpResult::Stat(Some(_))));
        assert!(m.expire_due(1_000, &mut events).is_empty());
        // ctime/mtime do follow the wall clock.
        let r = m.apply(
            s,
            &create("/late", CreateMode::Persistent),
            1_000,
            day,
            &mut events,
        );
        assert!(matches!(r, OpResult::Created(_)));
        assert_eq!(m.stat("/late").unwrap().ctime_ms, day);
        // A monotonic gap longer than timeout + one tick expires it, wall clock notwithstanding.
        let gap_end = 1_000 + timeout + TICK;
        let r = m.apply(s, &exists("/e", false), gap_end, day, &mut events);
        assert_eq!(r, OpResult::Error(ZkError::SessionExpired));
        assert_eq!(m.stat("/e"), None);
        assert!(m.session_timeout_ms(s).is_none());
    }

    #[test]
    fn touch_and_any_request_renew_the_session() {
        let mut m = ZkModel::new();
        let (s, _) = m.open_session(4_000, 0); // deadline 6000
        let (t, _) = m.open_session(4_000, 0);
        // Pings every 3 s keep s alive far beyond its timeout.
        for now in (3_000..30_000).step_by(3_000) {
            assert_eq!(m.touch(s, now), Ok(()), "{now}");
        }
        // Any request renews too, even a failing one.
        for now in (3_000..30_000).step_by(3_000) {
            let r = run(&mut m, t, &delete("/missing", -1), now).0;
            assert_eq!(r, OpResult::Error(ZkError::NoNode), "{now}");
        }
        assert!(m.expire_due(29_999, &mut Vec::new()).is_empty());
        // The last renewal was at 27000: deadline (27000 + 4000) rounded up = 32000.
        assert_eq!(m.next_expiry_ms(), Some(32_000));
        // Past the deadline even a ping is refused, before the expirer has run.
        assert_eq!(m.touch(s, 32_000), Err(ZkError::SessionExpired));
        assert_eq!(m.expire_due(32_000, &mut Vec::new()), vec![s, t]);
    }

    #[test]
    fn watches_are_one_shot() {
        let mut m = ZkModel::new();
        let s = session(&mut m);
        let w = session(&mut m);
        // exists on a missing node leaves a watch that fires on creation.
        assert_eq!(ok(&mut m, w, &exists("/a", true)), OpResult::Stat(None));
        let (_, events) = run(&mut m, s, &create("/a", CreateMode::Persistent), 0);
        assert_eq!(events, vec![event(w, "/a", EventType::NodeCreated)]);
        // Fired once: the next write is silent.
        let set = |version| Op::SetData {
            path: "/a".into(),
            data: b"x".to_vec(),
            version,
        };
        assert!(run(&mut m, s, &set(-1), 0).1.is_empty());
        // getData leaves a data watch, twice is still one watch.
        let get = Op::GetData {
            path: "/a".into(),
            watch: true,
        };
        assert!(matches!(ok(&mut m, w, &get), OpResult::Data(d, _) if d == b"x"));
        ok(&mut m, w, &get);
        let (_, events) = run(&mut m, s, &set(-1), 0);
        assert_eq!(events, vec![event(w, "/a", EventType::NodeDataChanged)]);
        assert!(run(&mut m, s, &set(-1), 0).1.is_empty());
        // getChildren's watch fires on a child, once.
        ok(&mut m, w, &children("/a", true));
        let (_, events) = run(&mut m, s, &create("/a/c", CreateMode::Persistent), 0);
        assert_eq!(events, vec![event(w, "/a", EventType::NodeChildrenChanged)]);
        assert!(run(&mut m, s, &delete("/a/c", -1), 0).1.is_empty());
        // getData/getChildren on a missing node fail and leave no watch.
        let get_missing = Op::GetData {
            path: "/b".into(),
            watch: true,
        };
        assert_eq!(
            run(&mut m, w, &get_missing, 0).0,
            OpResult::Error(ZkError::NoNode)
        );
        assert_eq!(
            run(&mut m, w, &children("/b", true), 0).0,
            OpResult::Error(ZkError::NoNode)
        );
        assert!(run(&mut m, s, &create("/b", CreateMode::Persistent), 0)
            .1
            .is_empty());
        // A data watch and a child watch on a deleted node give one NodeDeleted per session.
        ok(&mut m, w, &exists("/b", true));
        ok(&mut m, w, &children("/b", true));
        ok(&mut m, w, &children("/", true));
        let (_, events) = run(&mut m, s, &delete("/b", -1), 0);
        assert_eq!(
            events,
            vec![
                event(w, "/b", EventType::NodeDeleted),
                event(w, "/", EventType::NodeChildrenChanged),
            ]
        );
    }

    #[test]
    fn delete_and_set_data_check_the_version() {
        let mut m = ZkModel::new();
        let s = session(&mut m);
        ok(&mut m, s, &create("/a", CreateMode::Persistent));
        let set = |version| Op::SetData {
            path: "/a".into(),
            data: b"v".to_vec(),
            version,
        };
        assert_eq!(
            run(&mut m, s, &set(1), 0).0,
            OpResult::Error(ZkError::BadVersion)
        );
        assert!(matches!(ok(&mut m, s, &set(0)), OpResult::Stat(Some(st)) if st.version == 1));
        assert_eq!(
            run(&mut m, s, &delete("/a", 0), 0).0,
            OpResult::Error(ZkError::BadVersion)
        );
        assert!(m.stat("/a").is_some());
        assert_eq!(ok(&mut m, s, &delete("/a", 1)), OpResult::Deleted);
        assert_eq!(
            run(&mut m, s, &delete("/a", -1), 0).0,
            OpResult::Error(ZkError::NoNode)
        );
        assert_eq!(
            run(&mut m, s, &set(-1), 0).0,
            OpResult::Error(ZkError::NoNode)
        );
    }

    #[test]
    fn delete_of_a_node_with_children_is_not_empty() {
        let mut m = ZkModel::new();
        let s = session(&mut m);
        ok(&mut m, s, &create("/a", CreateMode::Persistent));
        ok(&mut m, s, &create("/a/b", CreateMode::Persistent));
        assert_eq!(
            run(&mut m, s, &delete("/a", -1), 0).0,
            OpResult::Error(ZkError::NotEmpty)
        );
        // The version is checked before the children.
        assert_eq!(
            run(&mut m, s, &delete("/a", 7), 0).0,
            OpResult::Error(ZkError::BadVersion)
        );
        ok(&mut m, s, &delete("/a/b", -1));
        ok(&mut m, s, &delete("/a", -1));
    }

    #[test]
    fn ephemeral_nodes_cannot_have_children_and_parents_must_exist() {
        let mut m = ZkModel::new();
        let s = session(&mut m);
        ok(&mut m, s, &create("/e", CreateMode::Ephemeral));
        for mode in [CreateMode::Persistent, CreateMode::EphemeralSequential] {
            assert_eq!(
                run(&mut m, s, &create("/e/c", mode), 0).0,
                OpResult::Error(ZkError::NoChildrenForEphemerals)
            );
        }
        assert_eq!(
            run(&mut m, s, &create("/nope/c", CreateMode::Persistent), 0).0,
            OpResult::Error(ZkError::NoNode)
        );
        // An existing name wins over the ephemeral parent (the server checks it first).
        assert_eq!(
            run(&mut m, s, &create("/e", CreateMode::Persistent), 0).0,
            OpResult::Error(ZkError::NodeExists)
        );
        assert_eq!(m.stat("/e").unwrap().ephemeral_owner, s);
        assert_eq!(m.stat("/e").unwrap().cversion, 0);
    }

    #[test]
    fn malformed_paths_are_bad_arguments_and_change_nothing() {
        let mut m = ZkModel::new();
        let s = session(&mut m);
        let zxid = m.last_zxid();
        for path in [
            "",
            "a",
            "/a/",
            "//a",
            "/a//b",
            "/.",
            "/a/..",
            "/a/./b",
            "/a\u{0}",
            "/\u{1}",
            "/\u{e000}",
            "/\u{1f600}",
        ] {
            for op in [
                create(path, CreateMode::Persistent),
                delete(path, -1),
                exists(path, true),
            ] {
                assert_eq!(
                    run(&mut m, s, &op, 0).0,
                    OpResult::Error(ZkError::BadArguments),
                    "{path:?}"
                );
            }
        }
        assert_eq!(m.last_zxid(), zxid);
        // Dots inside names and non-ASCII in the BMP are fine.
        ok(&mut m, s, &create("/a.b", CreateMode::Persistent));
        ok(&mut m, s, &create("/...", CreateMode::Persistent));
        ok(&mut m, s, &create("/é", CreateMode::Persistent));
    }

    #[test]
    fn snapshot_and_restore_keep_tree_and_sessions_but_not_watches() {
        let mut m = ZkModel::new();
        let (a, _) = m.open_session(4_000, 0);
        let (b, _) = m.open_session(4_000, 0);
        ok(&mut m, a, &create("/lock", CreateMode::Persistent));
        ok(
            &mut m,
            a,
            &create("/lock/n-", CreateMode::EphemeralSequential),
        );
        ok(&mut m, b, &exists("/lock/n-0000000000", true));
        ok(&mut m, b, &children("/lock", true));
        let snap = m.snapshot();
        let zxid = m.last_zxid();

        // Restarted at monotonic 5000, when a's old deadline (6000) is near.
        let mut r = ZkModel::restore(snap.clone(), 5_000);
        assert_eq!(r.snapshot(), snap);
        assert_eq!(r.last_zxid(), zxid);
        assert_eq!(r.session_timeout_ms(a), Some(4_000));
        assert_eq!(r.stat("/lock/n-0000000000").unwrap().ephemeral_owner, a);
        // Every session got a fresh timeout from the restart: (5000 + 4000) rounded up.
        assert_eq!(r.next_expiry_ms(), Some(10_000));
        assert!(r.expire_due(9_999, &mut Vec::new()).is_empty());
        // New sessions never reuse an id.
        let (c, _) = r.open_session(8_000, 5_000);
        assert!(c > b);
        // The watches are gone: a's expiry notifies nobody.
        assert_eq!(r.touch(b, 9_000), Ok(()));
        let mut events = Vec::new();
        assert_eq!(r.expire_due(10_000, &mut events), vec![a]);
        assert!(events.is_empty());
        assert_eq!(r.stat("/lock/n-0000000000"), None);
        // The original is untouched by the copy.
        assert!(m.stat("/lock/n-0000000000").is_some());
    }

    #[test]
    fn zxids_and_versions_progress_as_the_server_assigns_them() {
        let mut m = ZkModel::new();
        assert_eq!(m.last_zxid(), 0);
        let s = session(&mut m); // createSession: zxid 1
        assert_eq!(m.last_zxid(), 1);
        let mut events = Vec::new();
        m.apply(
            s,
            &create("/p", CreateMode::Persistent),
            0,
            100,
            &mut events,
        );
        let p = m.stat("/p").unwrap();
        assert_eq!(
            p,
            Stat {
                czxid: 2,
                mzxid: 2,
                pzxid: 2,
                ctime_ms: 100,
                mtime_ms: 100,
                version: 0,
                cversion: 0,
                ephemeral_owner: 0,
                data_length: 0,
                num_children: 0,
            }
        );
        assert_eq!(m.stat("/").unwrap().pzxid, 2);
        // One creation, two children (with /zookeeper): 2 × 1 − 2.
        assert_eq!(m.stat("/").unwrap().cversion, 0);
        // Reads take no zxid.
        ok(&mut m, s, &exists("/p", false));
        ok(&mut m, s, &children("/p", false));
        assert_eq!(m.last_zxid(), 2);
        // setData: zxid 3.
        let set = Op::SetData {
            path: "/p".into(),
            data: b"abc".to_vec(),
            version: -1,
        };
        m.apply(s, &set, 0, 200, &mut events);
        let p = m.stat("/p").unwrap();
        assert_eq!(
            (p.czxid, p.mzxid, p.pzxid, p.ctime_ms, p.mtime_ms),
            (2, 3, 2, 100, 200)
        );
        assert_eq!((p.version, p.data_length), (1, 3));
        // A failed write still takes a zxid (4) and changes nothing.
        assert_eq!(
            run(&mut m, s, &create("/p", CreateMode::Persistent), 0).0,
            OpResult::Error(ZkError::NodeExists)
        );
        assert_eq!(m.last_zxid(), 4);
        // Child create (5): parent cversion and pzxid move, its mzxid does not.
        ok(&mut m, s, &create("/p/c", CreateMode::Ephemeral));
        let p = m.stat("/p").unwrap();
        assert_eq!((p.cversion, p.pzxid, p.mzxid, p.num_children), (1, 5, 3, 1));
        // Child delete (6): pzxid moves, and the reported cversion (changes to the children).
        ok(&mut m, s, &delete("/p/c", -1));
        let p = m.stat("/p").unwrap();
        assert_eq!((p.cversion, p.pzxid, p.num_children), (2, 6, 0));
        // closeSession is one transaction (8) for all its ephemerals.
        ok(&mut m, s, &create("/p/e1", CreateMode::Ephemeral)); // 7
        ok(&mut m, s, &create("/e2", CreateMode::Ephemeral)); // 8
        assert_eq!(m.close_session(s, 0, &mut events), Ok(()));
        assert_eq!(m.last_zxid(), 9);
        assert_eq!(m.stat("/p").unwrap().pzxid, 9);
        assert_eq!(m.stat("/").unwrap().pzxid, 9);
        assert_eq!(
            m.close_session(s, 0, &mut events),
            Err(ZkError::SessionExpired)
        );
        assert_eq!(m.last_zxid(), 9);
        // A request on the closed session takes no zxid.
        assert_eq!(
            run(&mut m, s, &create("/x", CreateMode::Persistent), 0).0,
            OpResult::Error(ZkError::SessionExpired)
        );
        assert_eq!(m.last_zxid(), 9);
    }

    #[test]
    fn negotiated_timeouts_are_clamped_to_two_and_twenty_ticks() {
        let mut m = ZkModel::new();
        assert_eq!(m.open_session(1, 0).1, 2 * TICK);
        assert_eq!(m.open_session(5_000, 0).1, 5_000);
        assert_eq!(m.open_session(1_000_000, 0).1, 20 * TICK);
        let mut m = ZkModel::with_tick_time(500);
        assert_eq!(m.tick_time_ms(), 500);
        assert_eq!(m.open_session(100, 0).1, 1_000);
        assert_eq!(m.open_session(30_000, 0).1, 10_000);
        // Session ids are a counter from 1, never 0 (0 means "no owner").
        let (id, _) = m.open_session(1_000, 0);
        assert_eq!(id, 3);
    }

    /// Herd effect: every waiter watches the lock node and all wake on its deletion; with
    /// predecessor watching (the fair recipe) only the next in line wakes.
    #[test]
    fn herd_wakes_every_watcher_while_predecessor_watching_wakes_one() {
        let mut m = ZkModel::new();
        let holder = session(&mut m);
        let waiters: Vec<SessionId> = (0..4).map(|_| session(&mut m)).collect();
        ok(&mut m, holder, &create("/herd", CreateMode::Ephemeral));
        for w in &waiters {
            ok(&mut m, *w, &exists("/herd", true));
        }
        let (_, events) = run(&mut m, holder, &delete("/herd", -1), 0);
        let expected: Vec<WatchEvent> = waiters
            .iter()
            .map(|w| event(*w, "/herd", EventType::NodeDeleted))
            .collect();
        assert_eq!(events, expected);

        // Fair: each session creates a sequential node and watches only its predecessor.
        ok(&mut m, holder, &create("/fair", CreateMode::Persistent));
        let all: Vec<SessionId> = std::iter::once(holder).chain(waiters).collect();
        let mut nodes = Vec::new();
        for s in &all {
            match ok(
                &mut m,
                *s,
                &create("/fair/n-", CreateMode::EphemeralSequential),
            ) {
                OpResult::Created(p) => nodes.push(p),
                r => panic!("{r:?}"),
            }
        }
        for i in 1..all.len() {
            ok(&mut m, all[i], &exists(&nodes[i - 1], true));
        }
        let (_, events) = run(&mut m, holder, &delete(&nodes[0], -1), 0);
        assert_eq!(
            events,
            vec![event(all[1], &nodes[0], EventType::NodeDeleted)]
        );
        // And the holder's session ending the same way (expiry) wakes only the next one too.
        let mut events = Vec::new();
        m.close_session(all[1], 0, &mut events).unwrap();
        assert_eq!(
            events,
            vec![event(all[2], &nodes[1], EventType::NodeDeleted)]
        );
    }

    /// A lagging replica (a copy of the tree from before a delete) answers reads as it stands,
    /// and keeps the watch left there; when the member catches up, the watch is set again on the
    /// current tree and fires for what changed since the replica's zxid.
    #[test]
    fn a_stale_replica_answers_reads_and_its_watches_fire_on_catching_up() {
        let mut m = ZkModel::new().quorum_expires();
        let holder = session(&mut m);
        let waiter = session(&mut m);
        ok(&mut m, holder, &create("/held", CreateMode::Ephemeral));
        let mut stale = m.clone();
        let behind = stale.last_zxid();
        let (_, events) = run(&mut m, holder, &delete("/held", -1), 0);
        assert!(events.is_empty(), "nobody watched it on the current tree");
        // The lagging member still shows the node, and leaves the watch on its own tree.
        assert!(matches!(
            stale.read(waiter, &exists("/held", true)),
            OpResult::Stat(Some(_))
        ));
        assert!(matches!(
            m.read(waiter, &exists("/held", false)),
            OpResult::Stat(None)
        ));
        assert!(matches!(
            stale.read(waiter, &create("/x", CreateMode::Ephemeral)),
            OpResult::Error(ZkError::BadArguments)
        ));
        let watches = stale.take_watches(waiter);
        assert_eq!(watches.data, BTreeSet::from(["/held".to_string()]));
        assert!(watches.exist.is_empty() && watches.child.is_empty());
        let mut events = Vec::new();
        m.rewatch(waiter, behind, &watches, &mut events);
        assert_eq!(events, vec![event(waiter, "/held", EventType::NodeDeleted)]);
        // A watch on a node that did not change is left set, and fires on the next change.
        ok(&mut m, holder, &create("/still", CreateMode::Ephemeral));
        let mut stale = m.clone();
        assert!(matches!(
            stale.read(waiter, &exists("/still", true)),
            OpResult::Stat(Some(_))
        ));
        let watches = stale.take_watches(waiter);
        let mut events = Vec::new();
        m.rewatch(waiter, m.last_zxid(), &watches, &mut events);
        assert!(events.is_empty());
        let (_, events) = run(&mut m, holder, &delete("/still", -1), 0);
        assert_eq!(
            events,
            vec![event(waiter, "/still", EventType::NodeDeleted)]
        );
    }

    /// An ensemble's tree ends no session on a request's way: only its leader's expirer does,
    /// with a quorum. A session past its deadline is refused (closing), its nodes stay.
    #[test]
    fn an_ensembles_tree_leaves_expiry_to_the_leader() {
        let mut m = ZkModel::new().quorum_expires();
        let holder = session(&mut m);
        let other = session(&mut m);
        ok(&mut m, holder, &create("/held", CreateMode::Ephemeral));
        let late = 3_600_000;
        let mut events = Vec::new();
        let reconnect = m.reconnect(other, 0, &SetWatches::default(), late, &mut events);
        assert_eq!(reconnect, Err(ZkError::SessionExpired));
        assert!(m.stat("/held").is_some(), "no inline expiry");
        assert!(events.is_empty());
        assert_eq!(m.expire_due(late, &mut events), vec![holder, other]);
        assert!(m.stat("/held").is_none());
    }

    #[test]
    fn events_of_several_sessions_come_in_session_order() {
        let mut m = ZkModel::new();
        let ids: Vec<SessionId> = (0..3).map(|_| session(&mut m)).collect();
        // Registered in reverse order, reported in id order.
        for s in ids.iter().rev() {
            ok(&mut m, *s, &exists("/x", true));
        }
        let (_, events) = run(&mut m, ids[0], &create("/x", CreateMode::Persistent), 0);
        let got: Vec<SessionId> = events.iter().map(|e| e.session).collect();
        assert_eq!(got, ids);
    }

    #[test]
    fn error_codes_match_keeper_exception() {
        assert_eq!(ZkError::NoNode.code(), -101);
        assert_eq!(ZkError::SessionExpired.code(), -112);
        assert_eq!(ZkError::NoNode.to_string(), "KeeperErrorCode = NoNode");
    }

    /// The server writes its snapshot only when the zxid moved (`node.rs`): that is sound only if
    /// nothing the snapshot holds changes without a transaction. Random requests of every kind,
    /// on two sessions, with time passing and sessions expiring, must never change the snapshot
    /// while leaving the zxid where it was.
    #[test]
    fn the_snapshot_changes_only_with_the_zxid() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        #[derive(Clone, Debug)]
        enum Action {
            Open(u64),
            Touch(usize),
            Reconnect(usize, bool),
            Apply(usize, Op),
            Close(usize),
            DropWatches(usize),
            Wait(u64),
        }
        let path = prop::sample::select(vec!["/a", "/a/b", "/c", "/a/b-0000000000", "/bad/"]);
        let mode = prop::sample::select(vec![
            CreateMode::Persistent,
            CreateMode::Ephemeral,
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
        ]);
        let op = prop_oneof![
            (path.clone(), mode).prop_map(|(p, m)| create(p, m)),
            (path.clone(), -1i32..2).prop_map(|(p, v)| delete(p, v)),
            (path.clone(), any::<bool>()).prop_map(|(p, w)| exists(p, w)),
            (path.clone(), any::<bool>()).prop_map(|(p, w)| children(p, w)),
            (path.clone(), any::<bool>()).prop_map(|(p, watch)| Op::GetData {
                path: p.into(),
                watch
            }),
            (path, -1i32..2).prop_map(|(p, version)| Op::SetData {
                path: p.into(),
                data: b"x".to_vec(),
                version
            }),
        ];
        let action = prop_oneof![
            1 => (1u64..30_000).prop_map(Action::Open),
            1 => (0usize..3).prop_map(Action::Touch),
            1 => (0usize..3, any::<bool>()).prop_map(|(s, w)| Action::Reconnect(s, w)),
            4 => (0usize..3, op).prop_map(|(s, op)| Action::Apply(s, op)),
            1 => (0usize..3).prop_map(Action::Close),
            1 => (0usize..3).prop_map(Action::DropWatches),
            1 => (0u64..20_000).prop_map(Action::Wait),
        ];
        let mut runner = TestRunner::new(Config {
            cases: 500,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&prop::collection::vec(action, 1..40), |actions| {
                let mut m = ZkModel::new();
                let mut sessions: Vec<SessionId> = vec![99];
                let mut now = 0;
                let mut events = Vec::new();
                for action in &actions {
                    let (zxid, before) = (m.last_zxid(), m.snapshot());
                    let pick = |i: &usize| sessions[i % sessions.len()];
                    match action {
                        Action::Open(timeout) => sessions.push(m.open_session(*timeout, now).0),
                        Action::Touch(i) => {
                            let _ = m.touch(pick(i), now);
                        }
                        Action::Reconnect(i, watch) => {
                            let mut watches = SetWatches::default();
                            if *watch {
                                watches.data.insert("/a".into());
                                watches.child.insert("/a".into());
                            }
                            let _ = m.reconnect(pick(i), zxid, &watches, now, &mut events);
                        }
                        Action::Apply(i, op) => {
                            m.apply(pick(i), op, now, now + 1_000_000, &mut events);
                        }
                        Action::Close(i) => {
                            let _ = m.close_session(pick(i), now, &mut events);
                        }
                        Action::DropWatches(i) => m.drop_watches(pick(i)),
                        Action::Wait(ms) => {
                            now += ms;
                            m.expire_due(now, &mut events);
                        }
                    }
                    if m.last_zxid() == zxid {
                        prop_assert_eq!(&m.snapshot(), &before, "after {:?}", action);
                    }
                }
                Ok(())
            })
            .unwrap();
    }
}
