//! [`ZkStore`] over a real ZooKeeper session: a thin mapping of the algorithms' requests onto the
//! `zookeeper-client` crate, answering as the simulated client (`lockcheck_sim::zookeeper::store`)
//! answers.
//!
//! - **Sessions.** The first request opens a session asking for the scenario's timeout. The crate
//!   keeps it alive itself (its own task pings every 3/20 of the timeout, declares the connection
//!   lost after 2/5 of it without an answer, reconnects, and gives up on the session 7/5 of the
//!   timeout after it last heard from the server). Once the session has ended (the server said it
//!   expired, or the crate gave up on it), the next request opens a fresh one, as Curator does.
//!   A session is opened by a task of its own, so a slow first start (a cold JVM) is not
//!   abandoned when a request's timeout passes: the next request picks it up.
//! - **Replies.** Server errors are `Ok(Err(ZkError))`, with the crate's client-side path checks
//!   reported as [`ZkError::BadArguments`], as the Java client (and the model) do. A request on an
//!   ended session answers [`ZkError::SessionExpired`] and ends it here too. A request waits for
//!   its answer however late it comes, as the Java client's do: only a connection lost with the
//!   request possibly sent (the crate's own judgement) is [`StoreError::Timeout`], the request
//!   perhaps applied (the crate sends a request queued while disconnected once it reconnects);
//!   a request still unanswered after a whole session timeout is given up the same way, a
//!   backstop the crate's connection loss comes before. Opening a session waits at most the
//!   request timeout (the opening goes on for the next request). A server that cannot be reached
//!   when a session is opened is [`StoreError::Unreachable`].
//! - **Notices.** Session state changes (Connected, Disconnected, Expired) and the watches that
//!   fire come through [`ZkStore::next_event`] in the order the crate reports them, from the
//!   session they belong to only (a late event of an ended session is dropped). Each watch is a
//!   one-shot watcher of the crate, awaited by a task of this store; a watch of an ended session
//!   never fires.
//! - **Pauses.** The client's [`PauseGate`] is passed before and after every request, and a notice
//!   is handed out only while the gate is open. The crate's own task (its pings) does not pass the
//!   gate: a paused client's network is frozen by its proxies instead (see [`crate::gate`]).
//!
//! Every task of the store ends when it is dropped, and dropping it closes its connection; the
//! session is left to expire on the server, as a killed client process leaves it.

use crate::gate::PauseGate;
use lockcheck_algorithms::zookeeper::store::{
    CreateMode, EventType, SessionId, SessionState, Stat, WatchEvent, ZkError, ZkNotice, ZkStore,
};
use lockcheck_algorithms::StoreError;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use zookeeper_client as zk;

/// The store's way to the server.
enum Link {
    /// No session: none opened yet, or the last one ended.
    Closed,
    /// A task is opening a session.
    Opening,
    /// The session requests go out in.
    Open {
        client: zk::Client,
        id: SessionId,
        /// Which of this store's sessions it is (its tasks carry the number).
        generation: u64,
    },
    /// The last attempt to open a session failed, for this reason; the next request tries again.
    Failed(String),
}

/// What the store shares with its tasks.
struct Shared {
    link: RefCell<Link>,
    /// The number of the newest session; tasks of older ones stay silent.
    generation: Cell<u64>,
    state: Cell<SessionState>,
    notices: RefCell<VecDeque<ZkNotice>>,
    /// Woken on every change of `link` and every new notice.
    changed: Notify,
    /// The store's tasks, aborted when it is dropped.
    tasks: RefCell<Vec<AbortHandle>>,
}

impl Shared {
    fn notify(&self, notice: ZkNotice) {
        self.notices.borrow_mut().push_back(notice);
        self.changed.notify_waiters();
    }

    fn set_state(&self, state: SessionState) {
        if self.state.replace(state) != state {
            self.notify(ZkNotice::State(state));
        }
    }

    /// Ends session `generation`, if it is still the current one.
    fn end_session(&self, generation: u64) {
        let current = matches!(
            &*self.link.borrow(),
            Link::Open { generation: g, .. } if *g == generation
        );
        if current {
            // Dropping the crate's client closes what is left of the session.
            *self.link.borrow_mut() = Link::Closed;
            self.set_state(SessionState::Expired);
            self.changed.notify_waiters();
        }
    }

    fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        let handle = tokio::task::spawn_local(task).abort_handle();
        let mut tasks = self.tasks.borrow_mut();
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }
}

/// One client's session with a real ZooKeeper server.
pub struct RealZk {
    /// The servers: one standalone server, or an ensemble's members.
    members: Vec<SocketAddr>,
    /// Which member a new session starts on (a client's own, as in the simulation).
    preferred: usize,
    session_timeout: Duration,
    request_timeout: Duration,
    gate: PauseGate,
    /// `digest` credentials (`user:password`) each session authenticates with.
    auth: Option<Vec<u8>>,
    shared: Rc<Shared>,
}

/// A seed for the thread's `fastrand` generator under which `zookeeper-client` tries the
/// member at `preferred` first, of a connect string of `members` addresses: the crate parses the
/// string into a list in its order and shuffles it (`IterableEndpoints::reset`) before its first
/// attempt. `None` for a single server, where there is nothing to order.
fn first_endpoint_seed(members: usize, preferred: usize) -> Option<u64> {
    if members < 2 {
        return None;
    }
    (0u64..).find(|&seed| {
        let mut order: Vec<usize> = (0..members).collect();
        fastrand::Rng::with_seed(seed).shuffle(&mut order);
        order[0] == preferred
    })
}

impl RealZk {
    /// A store whose sessions go to the server at `addr` asking for `session_timeout`; a request
    /// waits at most `request_timeout` for a session to be opened first, and then for its answer
    /// until the connection is lost (see the module's documentation). The client passes `gate` before and after every request. Nothing is
    /// connected until the first request. Its tasks are local: it must be used within a tokio
    /// `LocalSet`.
    pub fn new(
        addr: SocketAddr,
        session_timeout: Duration,
        request_timeout: Duration,
        gate: PauseGate,
    ) -> RealZk {
        RealZk::ensemble(vec![addr], 0, session_timeout, request_timeout, gate)
    }

    /// A store whose sessions go to an ensemble whose members are at `members`: each new
    /// session starts on member `preferred` (when it answers; else the crate tries the others),
    /// and the crate moves the session between members as the Java client does, trying them in
    /// an order of its own (shuffled) when the connection is lost. Otherwise as [`RealZk::new`].
    pub fn ensemble(
        members: Vec<SocketAddr>,
        preferred: usize,
        session_timeout: Duration,
        request_timeout: Duration,
        gate: PauseGate,
    ) -> RealZk {
        RealZk {
            members,
            preferred,
            session_timeout,
            request_timeout,
            gate,
            auth: None,
            shared: Rc::new(Shared {
                link: RefCell::new(Link::Closed),
                generation: Cell::new(0),
                state: Cell::new(SessionState::Disconnected),
                notices: RefCell::new(VecDeque::new()),
                changed: Notify::new(),
                tasks: RefCell::new(Vec::new()),
            }),
        }
    }

    /// The same, each session authenticating as `login` (ZooKeeper's `digest` scheme) when it
    /// names a user.
    pub fn with_login(mut self, login: &crate::endpoints::Login) -> RealZk {
        self.auth = login.zk_digest();
        self
    }

    /// Starts opening a session, by a task that outlives the request that asked for it.
    fn open(&self) {
        *self.shared.link.borrow_mut() = Link::Opening;
        let shared = self.shared.clone();
        let mut connector = zk::Client::connector();
        if let Some(auth) = &self.auth {
            connector = connector.with_auth("digest", auth);
        }
        let connector = connector
            .with_session_timeout(self.session_timeout)
            // One try, not a cycle until the session timeout: the next request tries again.
            .with_fail_eagerly()
            // Dropping the store closes its connection but not its session, which the server
            // then expires: what a killed client process leaves behind (a client crash drops
            // its store), and what the simulated client, which never closes its session, does.
            .with_detached();
        let addr = self
            .members
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let seed = first_endpoint_seed(self.members.len(), self.preferred);
        self.shared.spawn(async move {
            // The crate shuffles the connect string with the thread's `fastrand` generator as the
            // connection starts (in `connect`'s first poll, right after this): seeded here, the
            // shuffle puts the preferred member first.
            if let Some(seed) = seed {
                fastrand::seed(seed);
            }
            match connector.connect(&addr).await {
                Ok(client) => {
                    let generation = shared.generation.get() + 1;
                    shared.generation.set(generation);
                    let id = client.session_id().0 as SessionId;
                    let states = client.state_watcher();
                    tracing::debug!(%addr, session = %client.session_id(), "session opened");
                    *shared.link.borrow_mut() = Link::Open {
                        client,
                        id,
                        generation,
                    };
                    shared.set_state(SessionState::Connected);
                    shared.spawn(follow_states(shared.clone(), states, generation));
                }
                Err(e) => {
                    tracing::debug!(%addr, "no session: {e}");
                    *shared.link.borrow_mut() = Link::Failed(e.to_string());
                }
            }
            shared.changed.notify_waiters();
        });
    }

    /// The session to send in, opening one if there is none; with its generation.
    async fn session(&self) -> Result<(zk::Client, u64), StoreError> {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let failed = match &*self.shared.link.borrow() {
                Link::Open {
                    client, generation, ..
                } => return Ok((client.clone(), *generation)),
                Link::Opening => None,
                Link::Closed => Some(None),
                Link::Failed(why) => Some(Some(why.clone())),
            };
            match failed {
                None => changed.await,
                Some(None) => self.open(),
                Some(Some(why)) => {
                    *self.shared.link.borrow_mut() = Link::Closed;
                    return Err(StoreError::Unreachable(why));
                }
            }
        }
    }

    /// One request: the gate, a session, the request (given the session and its generation)
    /// until answered or its connection is lost, its answer mapped.
    async fn call<T, F, Fut>(&self, request: F) -> Result<Result<T, ZkError>, StoreError>
    where
        F: FnOnce(zk::Client, u64) -> Fut,
        Fut: Future<Output = Result<T, zk::Error>>,
    {
        self.gate.pass().await;
        let result = async {
            let (client, generation) = tokio::time::timeout(self.request_timeout, self.session())
                .await
                .map_err(|_| StoreError::Timeout)??;
            // No timeout of its own once sent, as the Java client (and the simulated one): the
            // answer, however late, or the crate's connection loss (2/5 of the session timeout
            // without news). The session timeout is a backstop past that.
            match tokio::time::timeout(self.session_timeout, request(client, generation)).await {
                Err(_) => Err(StoreError::Timeout),
                Ok(Ok(value)) => Ok(Ok(value)),
                Ok(Err(e)) => self.server_error(e, generation).map(Err),
            }
        }
        .await;
        self.gate.pass().await;
        result
    }

    /// A failed request as the algorithms see it.
    fn server_error(&self, e: zk::Error, generation: u64) -> Result<ZkError, StoreError> {
        use zk::Error as E;
        Ok(match e {
            E::NoNode => ZkError::NoNode,
            E::NodeExists => ZkError::NodeExists,
            E::BadVersion => ZkError::BadVersion,
            E::NotEmpty => ZkError::NotEmpty,
            E::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals,
            E::BadArguments(_) => ZkError::BadArguments,
            E::SessionExpired | E::SessionMoved | E::ClientClosed | E::AuthFailed => {
                self.shared.end_session(generation);
                ZkError::SessionExpired
            }
            // Sent, perhaps applied, never answered.
            E::ConnectionLoss | E::Timeout => return Err(StoreError::Timeout),
            other => return Err(StoreError::Unreachable(format!("ZooKeeper: {other}"))),
        })
    }

    /// Hands the event of a one-shot watch of session `generation` out as a notice when it
    /// fires.
    fn follow_watch(&self, watcher: zk::OneshotWatcher, generation: u64) {
        let shared = self.shared.clone();
        self.shared.spawn(async move {
            let event = watcher.changed().await;
            if shared.generation.get() != generation {
                return;
            }
            let kind = match event.event_type {
                zk::EventType::NodeCreated => EventType::NodeCreated,
                zk::EventType::NodeDeleted => EventType::NodeDeleted,
                zk::EventType::NodeDataChanged => EventType::NodeDataChanged,
                zk::EventType::NodeChildrenChanged => EventType::NodeChildrenChanged,
                // The session ended: its state says so.
                zk::EventType::Session => return,
            };
            shared.notify(ZkNotice::Watch(WatchEvent {
                path: event.path,
                kind,
            }));
        });
    }
}

/// Follows the crate's view of session `generation` until it ends.
async fn follow_states(shared: Rc<Shared>, mut states: zk::StateWatcher, generation: u64) {
    loop {
        let state = states.changed().await;
        if shared.generation.get() != generation {
            return;
        }
        match state {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                shared.set_state(SessionState::Connected)
            }
            zk::SessionState::Disconnected => shared.set_state(SessionState::Disconnected),
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed => {
                tracing::debug!("session ended: {state}");
                shared.end_session(generation);
                return;
            }
        }
    }
}

impl Drop for RealZk {
    fn drop(&mut self) {
        for task in self.shared.tasks.borrow_mut().drain(..) {
            task.abort();
        }
        // The crate's session is detached: its connection closes, the session stays until the
        // server expires it.
        *self.shared.link.borrow_mut() = Link::Closed;
    }
}

/// A stat as the algorithms (and the model) see it.
pub fn stat_of(stat: &zk::Stat) -> Stat {
    Stat {
        czxid: stat.czxid,
        mzxid: stat.mzxid,
        pzxid: stat.pzxid,
        ctime_ms: stat.ctime.max(0) as u64,
        mtime_ms: stat.mtime.max(0) as u64,
        version: stat.version,
        cversion: stat.cversion,
        ephemeral_owner: stat.ephemeral_owner as SessionId,
        data_length: stat.data_length,
        num_children: stat.num_children,
    }
}

fn mode_of(mode: CreateMode) -> zk::CreateMode {
    match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent,
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
    }
}

impl RealZk {
    /// Goes on deleting `path` in the background (or, with `mark`, the child of `path` whose
    /// name contains it: a protected create's node) while the session lives, until the server
    /// answers (deleted, or nothing to delete) or the session ends, and its ephemeral nodes
    /// with it. As the simulated client does (`sim/src/zookeeper/store.rs`).
    fn remove_in_background(&self, path: String, mark: Option<String>) {
        let generation = match &*self.shared.link.borrow() {
            Link::Open { generation, .. } => *generation,
            _ => return, // no session: its ephemeral nodes are gone
        };
        let (shared, gate) = (self.shared.clone(), self.gate.clone());
        let timeout = self.request_timeout;
        self.shared.spawn(async move {
            loop {
                // As often as the simulated client tries (its reconnection interval).
                tokio::time::sleep(Duration::from_secs(1)).await;
                gate.pass().await;
                let client = match &*shared.link.borrow() {
                    Link::Open {
                        client,
                        generation: g,
                        ..
                    } if *g == generation => client.clone(),
                    _ => return, // the session ended, and its nodes with it
                };
                let node = match &mark {
                    None => path.clone(),
                    Some(mark) => {
                        match tokio::time::timeout(timeout, client.list_children(&path)).await {
                            Ok(Ok(children)) => {
                                match children.into_iter().find(|c| c.contains(mark.as_str())) {
                                    Some(name) => format!("{path}/{name}"),
                                    None => return, // nothing of ours there
                                }
                            }
                            Ok(Err(zk::Error::NoNode)) => return,
                            Ok(Err(zk::Error::ConnectionLoss | zk::Error::Timeout)) | Err(_) => {
                                continue
                            }
                            Ok(Err(e)) => {
                                tracing::debug!(%path, "background find ends: {e}");
                                return;
                            }
                        }
                    }
                };
                match tokio::time::timeout(timeout, client.delete(&node, None)).await {
                    Ok(Ok(())) | Ok(Err(zk::Error::NoNode)) => return,
                    Ok(Err(zk::Error::ConnectionLoss | zk::Error::Timeout)) | Err(_) => {}
                    Ok(Err(e)) => {
                        tracing::debug!(%node, "background delete ends: {e}");
                        return;
                    }
                }
            }
        });
    }
}

impl ZkStore for RealZk {
    async fn create(
        &self,
        path: &str,
        data: Vec<u8>,
        mode: CreateMode,
    ) -> Result<Result<(String, Stat), ZkError>, StoreError> {
        self.call(|client, _| async move {
            let options = mode_of(mode).with_acls(zk::Acls::anyone_all());
            let (stat, sequence) = client.create(path, &data, &options).await?;
            // The crate answers the sequence number, not the path: the server's name is the
            // prefix and the number as `%010d` (the crate's `Display` of it).
            let created = if mode.is_sequential() {
                format!("{path}{sequence}")
            } else {
                path.to_string()
            };
            Ok((created, stat_of(&stat)))
        })
        .await
    }

    async fn delete(&self, path: &str, version: i32) -> Result<Result<(), ZkError>, StoreError> {
        self.call(|client, _| async move {
            let expected = (version != -1).then_some(version);
            client.delete(path, expected).await
        })
        .await
    }

    fn delete_in_background(&self, path: &str) {
        self.remove_in_background(path.to_string(), None);
    }

    fn find_and_delete_in_background(&self, parent: &str, mark: &str) {
        self.remove_in_background(parent.to_string(), Some(mark.to_string()));
    }

    async fn exists(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<Result<Option<Stat>, ZkError>, StoreError> {
        self.call(|client, generation| async move {
            if !watch {
                return Ok(client.check_stat(path).await?.as_ref().map(stat_of));
            }
            let (stat, watcher) = client.check_and_watch_stat(path).await?;
            self.follow_watch(watcher, generation);
            Ok(stat.as_ref().map(stat_of))
        })
        .await
    }

    async fn get_children(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<Result<Vec<String>, ZkError>, StoreError> {
        self.call(|client, generation| async move {
            if !watch {
                return client.list_children(path).await;
            }
            let (children, watcher) = client.list_and_watch_children(path).await?;
            self.follow_watch(watcher, generation);
            Ok(children)
        })
        .await
    }

    /// Waits for a notice, then for the gate to be open, and takes the notice only then (so a
    /// dropped wait loses nothing, and a paused client acts on nothing).
    async fn next_event(&self) -> ZkNotice {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.shared.notices.borrow().is_empty() {
                changed.await;
                continue;
            }
            self.gate.pass().await;
            if let Some(notice) = self.shared.notices.borrow_mut().pop_front() {
                return notice;
            }
        }
    }

    fn state(&self) -> SessionState {
        self.shared.state.get()
    }

    fn session_id(&self) -> Option<SessionId> {
        match &*self.shared.link.borrow() {
            Link::Open { id, .. } => Some(*id),
            _ => None,
        }
    }
}
