//! [`ZkStore`] for a simulated client: one session with the simulated ZooKeeper server, kept
//! alive by pings every third of its timeout, with the client-side states a ZooKeeper client
//! library reports and the reconnection it does, timed as the Java client (`ClientCnxn`, which
//! Curator runs on) times them:
//!
//! - **No per-request timeout.** A request waits for its answer, however late, for as long as
//!   its connection lives; anything the server sends (an answer, late or not, a pong, a watch
//!   event) counts as hearing from it. A connection is given up after two thirds of the session
//!   timeout without hearing anything (the Java client's `readTimeout`), and a connection
//!   attempt after the session timeout divided by the number of servers (its `connectTimeout`);
//!   every request still waiting on a lost connection then fails with a connection loss (maybe
//!   applied), as `ClientCnxn.cleanup` fails them.
//! - **Disconnected** as soon as the connection is reset (the server's process died, or a
//!   restarted server refused the old connection), or given up as above.
//! - **Reconnection**: while disconnected, the client tries the next server with its session id
//!   after a random pause of up to `RECONNECT_INTERVAL` (the Java client's `startConnect` sleeps
//!   `nextInt(1000)` ms before every attempt but the first; the Rust client real mode runs
//!   tries at once, the bottom of that range); the server takes the session up again if it has
//!   not expired, and the client re-registers the watches it still holds (`SetWatches`, with the
//!   last zxid it saw: a watched node deleted meanwhile fires at once). Then **Connected**.
//! - **Expired** when the server says so; a fresh session is opened on the next request.
//! - **Guaranteed deletes** ([`ZkStore::delete_in_background`], Curator's `guaranteed()`): a
//!   task of the session tries the delete every `RECONNECT_INTERVAL` while connected, until
//!   the server answers or the session is gone.

use super::model::{self, SetWatches};
use super::node::{ZkMessage, ZkPush, ZkReply, ZkRequest, ZkResponse};
use crate::net::RpcClient;
use futures_util::future::{select, Either};
use lockcheck_algorithms::zookeeper::{
    CreateMode, SessionState, Stat, WatchEvent, ZkError, ZkNotice, ZkStore, Zxid,
};
use lockcheck_algorithms::{Env, StoreError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

/// The longest a disconnected client waits before trying a server again: the Java client sleeps
/// a random time below a second before each connection attempt, and a reconnection in time
/// revives the session.
const RECONNECT_INTERVAL: Duration = Duration::from_secs(1);

/// How long a connection may stay silent before the client gives it up: two thirds of the
/// session timeout (`ClientCnxn`'s `readTimeout`).
fn read_timeout(session_timeout: Duration) -> Duration {
    session_timeout * 2 / 3
}

/// When a lost SYN is first sent again: Linux's initial retransmission timeout (`TCP_TIMEOUT_INIT`),
/// doubled at each retransmission.
const SYN_RETRANSMISSION: Duration = Duration::from_secs(1);

struct Session {
    id: Option<model::SessionId>,
    timeout: Duration,
    state: SessionState,
    /// Client monotonic time of the last answer from the server.
    last_heard: Duration,
    notices: VecDeque<ZkNotice>,
    waker: Option<Waker>,
    /// Whether the connection carrying the session is up. False after a reset or a refusal, or
    /// once the client gave up on a silent connection: the next request reconnects first.
    connected: bool,
    /// The highest zxid seen in a reply: where `SetWatches` starts.
    last_zxid: Zxid,
    /// The watches this client left and has not seen fire, re-registered on a reconnection.
    watches: SetWatches,
    /// The connection was lost: the pinger should start reconnecting now, not at its next tick.
    kicked: bool,
    pinger: Option<Waker>,
    /// The server (of an ensemble, the member) its connection is to, by its place in `servers`.
    member: usize,
    /// How many servers there are: a lost connection moves to the next member.
    members: usize,
    /// Its connections so far: each (re)connection opens the next, and its requests carry its
    /// number (a server carries out a session's requests only from its latest connection).
    connection: u64,
    /// The tasks waiting for an answer on the connection, woken when it is lost.
    waiting: Vec<Waker>,
    /// A connection attempt is under way (one at a time, as the Java client's one `SendThread`
    /// makes them); the tasks waiting for its outcome.
    attempt: Option<Vec<Waker>>,
}

/// One client's ZooKeeper session, shared with its ping and event tasks.
pub struct SimZk<E: Env> {
    rpc: Rc<RpcClient>,
    env: E,
    /// The standalone server, or the ensemble's members.
    servers: Rc<Vec<usize>>,
    session: Rc<RefCell<Session>>,
}

impl<E: Env + Clone + 'static> SimZk<E> {
    /// A client of the server at node `servers[0]`, or of the ensemble whose members are
    /// `servers`, starting on `servers[first]` and moving to the next member each time its
    /// connection is lost (the Java client tries the members of its connect string in turn),
    /// asking for `session_timeout`. Starts its ping and event tasks on the calling node (they
    /// die with it). Its requests have no timeout of their own (see the module's documentation).
    pub fn new(
        rpc: Rc<RpcClient>,
        env: E,
        servers: Vec<usize>,
        first: usize,
        session_timeout: Duration,
    ) -> Self {
        let session = Rc::new(RefCell::new(Session {
            id: None,
            timeout: session_timeout,
            state: SessionState::Disconnected,
            last_heard: env.mono_now(),
            notices: VecDeque::new(),
            waker: None,
            connected: false,
            last_zxid: 0,
            watches: SetWatches::default(),
            kicked: false,
            pinger: None,
            member: first,
            members: servers.len(),
            connection: 0,
            waiting: Vec::new(),
            attempt: None,
        }));
        let store = SimZk {
            rpc,
            env,
            servers: Rc::new(servers),
            session,
        };
        store.spawn_pinger();
        store.spawn_event_listener();
        store
    }

    fn notify(session: &RefCell<Session>, notice: ZkNotice) {
        let mut s = session.borrow_mut();
        s.notices.push_back(notice);
        if let Some(waker) = s.waker.take() {
            waker.wake();
        }
    }

    fn set_state(session: &RefCell<Session>, state: SessionState) {
        if session.borrow().state == state {
            return;
        }
        session.borrow_mut().state = state;
        Self::notify(session, ZkNotice::State(state));
    }

    /// Before a connection is made, each failed attempt moves to the next member (a lost
    /// connection moves in [`Self::lose_connection`]). A single server stays itself.
    fn next_member_unless_connected(&self) {
        let mut s = self.session.borrow_mut();
        if !s.connected {
            s.member = (s.member + 1) % s.members;
        }
    }

    /// The connection is gone: Disconnected (unless the session is already known expired), and
    /// the pinger starts reconnecting.
    fn lose_connection(session: &RefCell<Session>) {
        let was_connected = std::mem::replace(&mut session.borrow_mut().connected, false);
        if !was_connected {
            return;
        }
        {
            let mut s = session.borrow_mut();
            s.member = (s.member + 1) % s.members;
        }
        if session.borrow().state == SessionState::Connected {
            Self::set_state(session, SessionState::Disconnected);
        }
        let mut s = session.borrow_mut();
        s.kicked = true;
        if let Some(waker) = s.pinger.take() {
            waker.wake();
        }
        for waker in std::mem::take(&mut s.waiting) {
            waker.wake();
        }
    }

    /// The session `id` is gone on the server.
    fn expired(session: &RefCell<Session>, id: model::SessionId) {
        if session.borrow().id == Some(id) {
            {
                let mut s = session.borrow_mut();
                s.id = None;
                s.watches = SetWatches::default();
            }
            Self::set_state(session, SessionState::Expired);
        }
    }

    fn spawn_event_listener(&self) {
        let (rpc, session, env) = (self.rpc.clone(), self.session.clone(), self.env.clone());
        madsim::task::spawn_local(async move {
            loop {
                let payload = rpc.next_push().await;
                if crate::net::is_reset(&payload) {
                    Self::lose_connection(&session);
                    continue;
                }
                let Ok(push) = payload.downcast::<ZkPush>() else {
                    continue;
                };
                let ZkPush(event) = *push;
                // Anything the server sends is news that the connection lives.
                session.borrow_mut().last_heard = env.mono_now();
                if session.borrow().id != Some(event.session) {
                    continue; // an event of an earlier session
                }
                session.borrow_mut().watches.fired(&event.path, event.kind);
                Self::notify(
                    &session,
                    ZkNotice::Watch(WatchEvent {
                        path: event.path,
                        kind: event.kind,
                    }),
                );
            }
        });
    }

    /// Another handle to this session, for its tasks.
    fn handle(&self) -> Self {
        SimZk {
            rpc: self.rpc.clone(),
            env: self.env.clone(),
            servers: self.servers.clone(),
            session: self.session.clone(),
        }
    }

    fn spawn_pinger(&self) {
        let this = self.handle();
        madsim::task::spawn_local(async move {
            loop {
                let (timeout, state, connected) = {
                    let s = this.session.borrow();
                    (s.timeout, s.state, s.connected)
                };
                let interval = if state == SessionState::Disconnected || !connected {
                    this.reconnect_pause(timeout)
                } else {
                    timeout / 3
                };
                this.nap(interval).await;
                let Some(id) = this.session.borrow().id else {
                    continue;
                };
                if !this.session.borrow().connected {
                    // Errors are judged inside: the next round tries again.
                    let _ = this.reconnect(id).await;
                    continue;
                }
                let ping = ZkRequest::Ping { session: id };
                match this.send(ping).await {
                    Ok(ZkResponse::Pong) => Self::set_state(&this.session, SessionState::Connected),
                    Ok(ZkResponse::Expired) => Self::expired(&this.session, id),
                    _ => this.judge_silence(),
                }
            }
        });
    }

    /// The pause before a connection attempt: random, below [`RECONNECT_INTERVAL`] (and a third
    /// of the session timeout).
    fn reconnect_pause(&self, timeout: Duration) -> Duration {
        self.env
            .random_between(Duration::ZERO, RECONNECT_INTERVAL.min(timeout / 3))
    }

    /// Sleeps `interval`, or less if the connection is lost meanwhile (then the first reconnect
    /// attempt comes a [`Self::reconnect_pause`] after the loss, not at the next ping).
    async fn nap(&self, interval: Duration) {
        let kicked = std::future::poll_fn(|cx| {
            let mut s = self.session.borrow_mut();
            if std::mem::take(&mut s.kicked) {
                Poll::Ready(())
            } else {
                s.pinger = Some(cx.waker().clone());
                Poll::Pending
            }
        });
        if let Either::Right(((), _)) = select(pin!(self.env.sleep(interval)), pin!(kicked)).await {
            let timeout = self.session.borrow().timeout;
            self.env.sleep(self.reconnect_pause(timeout)).await;
        }
    }

    /// Ends when connection number `connection` is lost: given up here after two thirds of the
    /// session timeout without hearing from the server (`ClientCnxn`'s `readTimeout`: a reply
    /// to any request, a pong or a watch event each count), or lost by another of the
    /// session's tasks (a reset, a refusal) or replaced by a newer connection.
    async fn connection_lost(&self, connection: u64) {
        loop {
            let (gone, deadline) = {
                let s = self.session.borrow();
                (
                    s.connection != connection || !s.connected,
                    s.last_heard + read_timeout(s.timeout),
                )
            };
            if gone {
                return;
            }
            let now = self.env.mono_now();
            if now >= deadline {
                Self::lose_connection(&self.session);
                return;
            }
            let lost = std::future::poll_fn(|cx| {
                let mut s = self.session.borrow_mut();
                if s.connection != connection || !s.connected {
                    return Poll::Ready(());
                }
                if !s.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                    s.waiting.push(cx.waker().clone());
                }
                Poll::Pending
            });
            select(pin!(self.env.sleep(deadline - now)), pin!(lost)).await;
        }
    }

    /// After a request without an answer: two thirds of the timeout without hearing from the
    /// server, and the client gives the connection up (Disconnected) and will reconnect.
    fn judge_silence(&self) {
        let (silent, timeout) = {
            let s = self.session.borrow();
            (self.env.mono_now().saturating_sub(s.last_heard), s.timeout)
        };
        if silent >= read_timeout(timeout) {
            Self::lose_connection(&self.session);
        }
    }

    /// Takes session `id` up again on a new connection, re-registering the watches still held.
    /// While another task's attempt is under way, waits for its outcome instead of making one
    /// of its own (a request queued while the Java client connects goes out on that connection,
    /// or fails with it).
    async fn reconnect(&self, id: model::SessionId) -> Result<(), StoreError> {
        if self.session.borrow().attempt.is_some() {
            std::future::poll_fn(|cx| {
                let mut s = self.session.borrow_mut();
                match &mut s.attempt {
                    Some(waiters) => {
                        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                            waiters.push(cx.waker().clone());
                        }
                        Poll::Pending
                    }
                    None => Poll::Ready(()),
                }
            })
            .await;
            return if self.session.borrow().connected {
                Ok(())
            } else {
                Err(StoreError::ConnectionLost(
                    "the connection attempt under way failed".into(),
                ))
            };
        }
        // However the attempt ends (its outcome, or its task dropped), the waiters go on.
        struct Attempt<'a>(&'a RefCell<Session>);
        impl Drop for Attempt<'_> {
            fn drop(&mut self) {
                let waiters = self.0.borrow_mut().attempt.take();
                for waker in waiters.into_iter().flatten() {
                    waker.wake();
                }
            }
        }
        self.session.borrow_mut().attempt = Some(Vec::new());
        let _attempt = Attempt(&self.session);
        self.attempt_reconnect(id).await
    }

    async fn attempt_reconnect(&self, id: model::SessionId) -> Result<(), StoreError> {
        let (last_zxid, watches) = {
            let s = self.session.borrow();
            (s.last_zxid, s.watches.clone())
        };
        let request = ZkRequest::Reconnect {
            session: id,
            last_zxid,
            watches,
        };
        match self.send(request).await {
            Ok(ZkResponse::Reconnected) => {
                self.session.borrow_mut().connected = true;
                Self::set_state(&self.session, SessionState::Connected);
                Ok(())
            }
            Ok(ZkResponse::Expired) => {
                self.session.borrow_mut().connected = true;
                Self::expired(&self.session, id);
                Ok(())
            }
            Ok(other) => Err(StoreError::Unreachable(format!(
                "unexpected answer {other:?}"
            ))),
            Err(e) => {
                self.judge_silence();
                Err(e)
            }
        }
    }

    async fn send(&self, request: ZkRequest) -> Result<ZkResponse, StoreError> {
        let connecting = matches!(
            request,
            ZkRequest::Open { .. } | ZkRequest::Reconnect { .. }
        );
        let (connection, timeout, members) = {
            let mut s = self.session.borrow_mut();
            if connecting {
                // A connect request is the first on a new connection.
                s.connection += 1;
            }
            (s.connection, s.timeout, s.members)
        };
        let message = ZkMessage {
            request,
            push_to: self.rpc.local_addr(),
            connection,
        };
        let server = self.servers[self.session.borrow().member];
        let answer = if connecting {
            self.connect(server, message, timeout / members as u32)
                .await
        } else {
            // No timeout of its own: the answer, or the end of its connection (given up at two
            // thirds of the session timeout without news; a pong does not overtake a pending
            // request, as the server answers a connection's requests in order). The call's own
            // bound is only a backstop, past the point where the connection is given up.
            let call = pin!(self.rpc.call(server, message, timeout * 2));
            match select(call, pin!(self.connection_lost(connection))).await {
                Either::Left((answer, _)) => answer,
                Either::Right(((), _)) => {
                    return Err(StoreError::ConnectionLost(format!(
                        "no news from the server for two thirds of the session timeout ({} ms)",
                        read_timeout(timeout).as_millis()
                    )))
                }
            }
        };
        match answer {
            Ok(ZkReply {
                response: ZkResponse::NotServing,
                ..
            }) => {
                // A member that serves no one closes the connection: try the next one.
                self.next_member_unless_connected();
                Self::lose_connection(&self.session);
                Err(StoreError::ConnectionLost(
                    "the ensemble member is not serving".into(),
                ))
            }
            Ok(ZkReply { response, zxid }) => {
                let mut s = self.session.borrow_mut();
                s.last_heard = self.env.mono_now();
                s.last_zxid = s.last_zxid.max(zxid);
                Ok(response)
            }
            Err(e) => {
                // No connection could be made: the next attempt goes to the next member.
                self.next_member_unless_connected();
                // A reset or a refusal: the socket is gone, whatever the session's fate.
                if !matches!(e, StoreError::Timeout) {
                    Self::lose_connection(&self.session);
                }
                Err(e)
            }
        }
    }

    /// A connection attempt to `server` carrying `message` (a connect request), given up after
    /// `connect_timeout` (the Java client's `connectTimeout`: the session timeout shared among
    /// the servers to try). While a partition that loses messages cuts the link, the attempt's
    /// SYN is lost and the kernel sends it again 1, 2, 4… s later (Linux's initial
    /// retransmission timeout, doubling), so a connection across a cut that heals is made at the
    /// first retransmission after the heal, not one connect timeout later.
    async fn connect(
        &self,
        server: usize,
        message: ZkMessage,
        connect_timeout: Duration,
    ) -> Result<ZkReply, StoreError> {
        let started = self.env.mono_now();
        let mut next_syn = started;
        let mut backoff = SYN_RETRANSMISSION;
        loop {
            let now = self.env.mono_now();
            let left = connect_timeout.saturating_sub(now.saturating_sub(started));
            if left.is_zero() {
                return Err(StoreError::Timeout);
            }
            if !self.rpc.cut_off_from(server) {
                return self.rpc.call(server, message, left).await;
            }
            next_syn += backoff;
            backoff *= 2;
            self.env.sleep(next_syn.saturating_sub(now).min(left)).await;
        }
    }

    /// The session to use, opening one if there is none (first use, or after an expiry), and
    /// reconnecting first if its connection was lost.
    async fn session_id(&self) -> Result<model::SessionId, StoreError> {
        let (id, connected) = {
            let s = self.session.borrow();
            (s.id, s.connected)
        };
        if let Some(id) = id {
            if connected {
                return Ok(id);
            }
            self.reconnect(id).await?;
            if let Some(id) = self.session.borrow().id {
                return Ok(id);
            }
        }
        let timeout_ms = self.session.borrow().timeout.as_millis() as u64;
        match self.send(ZkRequest::Open { timeout_ms }).await? {
            ZkResponse::Opened {
                session,
                timeout_ms,
            } => {
                {
                    let mut s = self.session.borrow_mut();
                    s.id = Some(session);
                    s.timeout = Duration::from_millis(timeout_ms);
                    s.connected = true;
                    s.watches = SetWatches::default();
                }
                Self::set_state(&self.session, SessionState::Connected);
                Ok(session)
            }
            other => Err(StoreError::Unreachable(format!(
                "unexpected answer {other:?}"
            ))),
        }
    }

    async fn op(
        &self,
        op: model::Op,
    ) -> Result<Result<(model::OpResult, Option<model::Stat>), ZkError>, StoreError> {
        let session = self.session_id().await?;
        match self.send(ZkRequest::Op { session, op }).await? {
            ZkResponse::Result(model::OpResult::Error(e), _) => Ok(Err(e)),
            ZkResponse::Result(result, stat) => Ok(Ok((result, stat))),
            ZkResponse::Expired => {
                Self::expired(&self.session, session);
                Ok(Err(ZkError::SessionExpired))
            }
            other => Err(StoreError::Unreachable(format!(
                "unexpected answer {other:?}"
            ))),
        }
    }
}

fn unexpected(result: model::OpResult) -> StoreError {
    StoreError::Unreachable(format!("unexpected result {result:?}"))
}

/// A node the session goes on removing in the background after the client gave up on it
/// ([`ZkStore::delete_in_background`], [`ZkStore::find_and_delete_in_background`]).
enum Removal {
    /// This node.
    Node(String),
    /// The child of `parent` whose name contains `mark`, if there is one.
    Protected {
        /// The lock's path.
        parent: String,
        /// The protection prefix.
        mark: String,
    },
}

impl<E: Env + Clone + 'static> SimZk<E> {
    /// Goes on with `removal` every reconnection interval while the session lives and is
    /// connected, until the server answers it (removed, or nothing to remove) or the session
    /// ends (and its ephemeral nodes with it).
    fn remove_in_background(&self, removal: Removal) {
        let Some(id) = self.session.borrow().id else {
            return; // no session: its ephemeral nodes are gone
        };
        let this = self.handle();
        madsim::task::spawn_local(async move {
            loop {
                this.env.sleep(RECONNECT_INTERVAL).await;
                let (current, connected) = {
                    let s = this.session.borrow();
                    (s.id, s.connected)
                };
                if current != Some(id) {
                    return; // the session ended, and its nodes with it
                }
                if !connected {
                    continue; // the pinger reconnects; try once it has
                }
                let path = match &removal {
                    Removal::Node(path) => path.clone(),
                    Removal::Protected { parent, mark } => {
                        let op = model::Op::GetChildren {
                            path: parent.clone(),
                            watch: false,
                        };
                        match this.send(ZkRequest::Op { session: id, op }).await {
                            Ok(ZkResponse::Expired) => return Self::expired(&this.session, id),
                            Ok(ZkResponse::Result(model::OpResult::Children(children), _)) => {
                                match children.into_iter().find(|c| c.contains(mark.as_str())) {
                                    Some(name) => format!("{parent}/{name}"),
                                    None => return, // nothing of ours there
                                }
                            }
                            // No such parent: nothing of ours under it.
                            Ok(_) => return,
                            Err(_) => {
                                this.judge_silence();
                                continue;
                            }
                        }
                    }
                };
                let op = model::Op::Delete { path, version: -1 };
                match this.send(ZkRequest::Op { session: id, op }).await {
                    Ok(ZkResponse::Expired) => return Self::expired(&this.session, id),
                    // Deleted, or an answer that it cannot be (no such node): done either way.
                    Ok(_) => return,
                    Err(_) => this.judge_silence(),
                }
            }
        });
    }
}

impl<E: Env + Clone + 'static> ZkStore for SimZk<E> {
    async fn create(
        &self,
        path: &str,
        data: Vec<u8>,
        mode: CreateMode,
    ) -> Result<Result<(String, Stat), ZkError>, StoreError> {
        let op = model::Op::Create {
            path: path.to_string(),
            data,
            mode,
        };
        Ok(match self.op(op).await? {
            Ok((model::OpResult::Created(path), Some(stat))) => Ok((path, stat)),
            Ok((other, _)) => return Err(unexpected(other)),
            Err(e) => Err(e),
        })
    }

    async fn delete(&self, path: &str, version: i32) -> Result<Result<(), ZkError>, StoreError> {
        let op = model::Op::Delete {
            path: path.to_string(),
            version,
        };
        Ok(match self.op(op).await? {
            Ok((model::OpResult::Deleted, _)) => Ok(()),
            Ok((other, _)) => return Err(unexpected(other)),
            Err(e) => Err(e),
        })
    }

    fn delete_in_background(&self, path: &str) {
        self.remove_in_background(Removal::Node(path.to_string()));
    }

    fn find_and_delete_in_background(&self, parent: &str, mark: &str) {
        self.remove_in_background(Removal::Protected {
            parent: parent.to_string(),
            mark: mark.to_string(),
        });
    }

    async fn exists(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<Result<Option<Stat>, ZkError>, StoreError> {
        let op = model::Op::Exists {
            path: path.to_string(),
            watch,
        };
        Ok(match self.op(op).await? {
            Ok((model::OpResult::Stat(stat), _)) => {
                if watch {
                    // On a node that exists it is a data watch; on one that does not, an exist
                    // watch (the client keeps them apart for `SetWatches`).
                    let mut s = self.session.borrow_mut();
                    let table = if stat.is_some() {
                        &mut s.watches.data
                    } else {
                        &mut s.watches.exist
                    };
                    table.insert(path.to_string());
                }
                Ok(stat)
            }
            Ok((other, _)) => return Err(unexpected(other)),
            Err(e) => Err(e),
        })
    }

    async fn get_children(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<Result<Vec<String>, ZkError>, StoreError> {
        let op = model::Op::GetChildren {
            path: path.to_string(),
            watch,
        };
        Ok(match self.op(op).await? {
            Ok((model::OpResult::Children(c), _)) => {
                if watch {
                    self.session
                        .borrow_mut()
                        .watches
                        .child
                        .insert(path.to_string());
                }
                Ok(c)
            }
            Ok((other, _)) => return Err(unexpected(other)),
            Err(e) => Err(e),
        })
    }

    async fn next_event(&self) -> ZkNotice {
        std::future::poll_fn(|cx| {
            let mut s = self.session.borrow_mut();
            match s.notices.pop_front() {
                Some(notice) => Poll::Ready(notice),
                None => {
                    s.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    fn state(&self) -> SessionState {
        self.session.borrow().state
    }

    fn session_id(&self) -> Option<model::SessionId> {
        self.session.borrow().id
    }
}
