//! [`EtcdStore`] over a real etcd's JSON gateway ([`crate::etcd_gateway`]), with the session
//! lease kept alive as the Go client's `concurrency.Session` does, the way the simulated client
//! (`lockcheck_sim::etcd::store`) does it:
//!
//! - the lease is granted on first use and kept alive as the Go client's lessor times it
//!   ([`lockcheck_algorithms::etcd::lessor`]): a send loop every 500 ms sends a keep-alive once
//!   the last answer is a third of the TTL old (at every wake-up while none is answered), each on
//!   a connection of its own and counted whenever its answer comes (no per-request timeout on the
//!   keep-alive stream); a deadline loop every second ends the session once no answer came
//!   within the TTL of the last one (5 s before the first), and an answer with TTL 0 ends it at
//!   once;
//! - a watch for a key's deletion is a streamed `POST /v3/watch` on a connection of its own,
//!   registered again from the same revision when that connection breaks; its registration
//!   waits at most the store's timeout, and one that fails is tried again 500 ms later;
//! - each request waits at most the store's timeout. No answer in time → [`StoreError::Timeout`]
//!   (the connection is dropped: a late answer would be read as the next one's); a refused
//!   connection → [`StoreError::Unreachable`] (not applied); a connection that broke after the
//!   request may have gone out → [`StoreError::ConnectionLost`]. A member's refusal to serve
//!   is what the simulated member's `Unavailable` is: `request timed out` a timeout, `no
//!   leader` or a dropped proposal unreachable;
//! - of a cluster ([`RealEtcd::cluster`]), the simulated client's rules, the Go client 3.4's:
//!   each request and each watch's registration to the next member round-robin (client `i`
//!   starting on member `i mod n`), moving on while a member refuses the connection; the
//!   keep-alives on one member until one fails, then on the next. Each member is reached
//!   through the client's own proxy to it, which answers a refused connection (a crashed
//!   member) with a reset once it has accepted it: a refusal is told from a connection that
//!   broke after the request went out by asking again ([`EtcdClient::telling_refusals`]).
//!
//! [`EtcdClient`] is the same requests without the session, for the conformance suite.

use crate::etcd_gateway::{self, b64, int, kvs, revision, Connection, HttpError};
use crate::gate::PauseGate;
use lockcheck_algorithms::etcd::lessor::{self, KeepAlive};
use lockcheck_algorithms::etcd::{
    EtcdError, EtcdStore, KeyValue, LeaseId, Range, Revision, Txn, TxnResult,
};
use lockcheck_algorithms::StoreError;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How soon a watch is registered again after it could not be (the Go client's retry wait).
const RESEND: Duration = lessor::SEND_LOOP;

/// etcd's requests on one connection, each bounded by a timeout.
pub struct EtcdClient {
    addr: SocketAddr,
    timeout: Duration,
    connection: RefCell<Option<Connection>>,
    /// Whether a fresh connection that breaks before its answer is checked for a refusal (see
    /// [`EtcdClient::telling_refusals`]).
    check_open: bool,
}

impl EtcdClient {
    /// A client of the gateway at `addr`; nothing is connected until the first request.
    pub fn new(addr: SocketAddr, timeout: Duration) -> EtcdClient {
        EtcdClient {
            addr,
            timeout,
            connection: RefCell::new(None),
            check_open: false,
        }
    }

    /// The same client, telling a member that refuses connections from one that broke a
    /// connection after the request went out: a member reached through a proxy answers a
    /// refused connection with a reset once the proxy has accepted it, as a member killed while
    /// it served the request does. So when a connection this request opened breaks before its
    /// answer, the member is asked its status (`/v3/maintenance/status`) on a connection of its
    /// own: reset (or refused) again, the member is down and the request is
    /// [`StoreError::Unreachable`], not applied, and a cluster's client moves on to the next
    /// member as the Go balancer does; answered or unanswered, it is
    /// [`StoreError::ConnectionLost`] as before. Nothing is sent ahead of the request, so what
    /// reaches a member is what the simulated client sends. (A member killed while it served
    /// the first request of a connection, and still down when asked, reads as a refusal: the
    /// one case told wrong, a request applied as the member died.)
    pub fn telling_refusals(mut self) -> EtcdClient {
        self.check_open = true;
        self
    }

    /// The gateway's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `POST path` with `body`: the status and the answer.
    pub async fn call(&self, path: &str, body: Value) -> Result<(u16, Value), StoreError> {
        let fresh = self.connection.borrow().is_none();
        let exchange = async {
            let taken = self.connection.borrow_mut().take();
            let mut connection = match taken {
                Some(c) => c,
                None => Connection::open(self.addr).await?,
            };
            let answer = connection.post(path, &body).await?;
            // Kept only after a whole answer: a connection with an answer still due is dropped.
            *self.connection.borrow_mut() = Some(connection);
            Ok::<_, HttpError>(answer)
        };
        let timed = tokio::time::timeout(self.timeout, exchange).await;
        match timed {
            Ok(Err(HttpError::Broken(why))) if fresh => Err(self.broken(why).await),
            timed => self.outcome(timed),
        }
    }

    /// What a fresh connection that broke before its answer stands for (see
    /// [`EtcdClient::telling_refusals`]).
    async fn broken(&self, why: String) -> StoreError {
        if self.check_open && refuses(self.addr, self.timeout).await {
            StoreError::Unreachable(format!(
                "etcd at {}: refused (the connection was reset, and so is the next): {why}",
                self.addr
            ))
        } else {
            StoreError::ConnectionLost(why)
        }
    }

    fn outcome<T>(
        &self,
        timed: Result<Result<T, HttpError>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        match timed {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(HttpError::Connect(e))) => Err(StoreError::Unreachable(format!(
                "etcd at {}: {e}",
                self.addr
            ))),
            Ok(Err(HttpError::Broken(why))) => Err(StoreError::ConnectionLost(why)),
            Err(_) => Err(StoreError::Timeout),
        }
    }

    /// `LeaseGrant`: the lease and the TTL granted.
    pub async fn grant(&self, ttl_s: i64) -> Result<(LeaseId, i64), StoreError> {
        granted(self.call(GRANT, grant_json(ttl_s)).await?)
    }

    /// One `LeaseKeepAlive`: the lease's TTL, 0 when the member does not have it.
    pub async fn keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError> {
        kept_alive(self.call(KEEP_ALIVE, lease_json(lease)).await?)
    }

    /// `LeaseRevoke`.
    pub async fn revoke(&self, lease: LeaseId) -> Result<Result<(), EtcdError>, StoreError> {
        let (status, answer) = self.call("/v3/lease/revoke", lease_json(lease)).await?;
        Ok(match status {
            200 => Ok(()),
            _ => Err(server_error(&answer)?),
        })
    }

    /// `Txn`.
    pub async fn txn(&self, txn: &Txn) -> Result<Result<TxnResult, EtcdError>, StoreError> {
        txn_answer(self.call(TXN, etcd_gateway::txn_json(txn)).await?, txn)
    }

    /// `Range`, with the header's revision.
    pub async fn range(&self, range: &Range) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        ranged(self.call(RANGE, etcd_gateway::range_json(range)).await?)
    }

    /// `DeleteRange` of one key: how many keys it deleted, and the header's revision.
    pub async fn delete(&self, key: &str) -> Result<(i64, Revision), StoreError> {
        deleted(self.call(DELETE, json!({ "key": b64(key) })).await?)
    }
}

const GRANT: &str = "/v3/lease/grant";
const KEEP_ALIVE: &str = "/v3/lease/keepalive";
const TXN: &str = "/v3/kv/txn";
const RANGE: &str = "/v3/kv/range";
const DELETE: &str = "/v3/kv/deleterange";

fn grant_json(ttl_s: i64) -> Value {
    json!({ "TTL": ttl_s.to_string() })
}

fn lease_json(lease: LeaseId) -> Value {
    json!({ "ID": lease.to_string() })
}

/// Whether the member at `addr` refuses connections now: a connection to it is refused, or
/// reset before it answers a status request (what a proxy does when its member refuses). A
/// member that answers, or does not within `bound`, does not refuse.
async fn refuses(addr: SocketAddr, bound: Duration) -> bool {
    let ask = async {
        match Connection::open(addr).await {
            Err(HttpError::Connect(_)) => true,
            Err(HttpError::Broken(_)) => true,
            Ok(mut connection) => matches!(
                connection.post("/v3/maintenance/status", &json!({})).await,
                Err(HttpError::Broken(_))
            ),
        }
    };
    tokio::time::timeout(bound, ask).await.unwrap_or(false)
}

/// A `LeaseGrant` answer: the lease and the TTL granted.
fn granted((status, answer): (u16, Value)) -> Result<(LeaseId, i64), StoreError> {
    if status != 200 {
        return Err(failure(&answer));
    }
    Ok((int(&answer, "ID"), int(&answer, "TTL")))
}

/// A `LeaseKeepAlive` answer: the lease's TTL, 0 when the member does not have it. An error
/// (the stream's `{"error": …}`, e.g. a follower that found no leader) is an error, not a TTL.
fn kept_alive((_, answer): (u16, Value)) -> Result<i64, StoreError> {
    match answer.get("result") {
        Some(result) => Ok(int(result, "TTL")),
        None => Err(failure(&answer)),
    }
}

/// A `Txn` answer.
fn txn_answer(
    (status, answer): (u16, Value),
    txn: &Txn,
) -> Result<Result<TxnResult, EtcdError>, StoreError> {
    Ok(match status {
        200 => Ok(etcd_gateway::txn_result(&answer, txn)),
        _ => Err(server_error(&answer)?),
    })
}

/// A `Range` answer, with the header's revision.
fn ranged((status, answer): (u16, Value)) -> Result<(Vec<KeyValue>, Revision), StoreError> {
    if status != 200 {
        return Err(failure(&answer));
    }
    Ok((kvs(&answer), revision(&answer)))
}

/// A `DeleteRange` answer: how many keys it deleted, and the header's revision.
fn deleted((status, answer): (u16, Value)) -> Result<(i64, Revision), StoreError> {
    if status != 200 {
        return Err(failure(&answer));
    }
    Ok((int(&answer, "deleted"), revision(&answer)))
}

/// The message of an error answer: a unary call's `"error"` is a string, a stream's an object
/// with a `"message"`.
fn error_message(answer: &Value) -> &str {
    match answer.get("error") {
        Some(Value::String(message)) => message,
        Some(error) => error.get("message").and_then(Value::as_str).unwrap_or(""),
        None => "",
    }
}

/// What a member's refusal to serve stands for, as the simulated member's `Unavailable`
/// answers do: `request timed out` (a proposal that may yet commit) is a timeout; a member
/// without a leader, a proposal raft dropped, a read cut short by a change of leader were never
/// applied. `None` for any other error.
fn unavailable(message: &str) -> Option<StoreError> {
    const NOT_APPLIED: [&str; 5] = [
        "no leader",
        "proposal dropped",
        "leader changed",
        "not leader",
        "too many requests",
    ];
    if message.contains("request timed out") {
        Some(StoreError::Timeout)
    } else if NOT_APPLIED.iter().any(|m| message.contains(m)) {
        Some(StoreError::Unreachable(format!("etcd: {message}")))
    } else {
        None
    }
}

/// An error answer where the call has no error of its own to give: a refusal to serve
/// ([`unavailable`]), or a broken exchange, named.
fn failure(answer: &Value) -> StoreError {
    unavailable(error_message(answer))
        .unwrap_or_else(|| StoreError::ConnectionLost(format!("etcd answered an error: {answer}")))
}

/// The etcd error an error answer stands for; a refusal to serve is that ([`unavailable`]); one
/// the algorithms do not know is a broken exchange, named.
fn server_error(answer: &Value) -> Result<EtcdError, StoreError> {
    let message = error_message(answer);
    if message.contains("requested lease not found") {
        Ok(EtcdError::LeaseNotFound)
    } else if message.contains("duplicate key given in txn request") {
        Ok(EtcdError::DuplicateKey)
    } else {
        Err(failure(answer))
    }
}

/// Waits, on a connection of its own, for the deletion of `key` at or after revision `from`:
/// `Ok(())` when it came, an error when the connection failed first.
pub async fn watch_deleted(addr: SocketAddr, key: &str, from: Revision) -> Result<(), HttpError> {
    let connection = register_watch(addr, key, from).await?;
    follow_watch(connection).await
}

/// A watch of `key` from revision `from`, registered on a connection of its own to `addr`.
async fn register_watch(
    addr: SocketAddr,
    key: &str,
    from: Revision,
) -> Result<Connection, HttpError> {
    let mut connection = Connection::open(addr).await?;
    let request =
        json!({ "create_request": { "key": b64(key), "start_revision": from.to_string() } });
    connection.post_stream("/v3/watch", &request).await?;
    Ok(connection)
}

/// Reads a registered watch until it reports a deletion (`Ok`) or its connection fails.
async fn follow_watch(mut connection: Connection) -> Result<(), HttpError> {
    while let Some(message) = connection.next_line().await? {
        let events = message
            .get("result")
            .and_then(|r| r.get("events"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if events
            .iter()
            .any(|e| e.get("type").and_then(Value::as_str) == Some("DELETE"))
        {
            return Ok(());
        }
    }
    Err(HttpError::Broken("the watch stream ended".into()))
}

/// Every session lease the clients of one run were granted, in the order they were granted: on
/// servers the user runs, the run revokes them at its end ([`crate::endpoints::revoke_leases`])
/// rather than leave each one on the server for its TTL.
pub type LeaseLedger = Rc<RefCell<Vec<LeaseId>>>;

/// The session as the client knows it.
#[derive(Default)]
struct Session {
    lease: Option<LeaseId>,
    /// Its keep-alive, on the store's clock ([`RealEtcd::clock`]), once the lease is granted.
    keep_alive: Option<KeepAlive>,
    done: bool,
}

/// One client's connections to real etcd members (one, or a cluster's), with its session.
///
/// With several members it follows the simulated client's rules (`lockcheck_sim::etcd::store`),
/// which are the Go client 3.4's: each request, and each registration of a watch, goes to the
/// next member round-robin, starting at the member the client was given, and to the ones after
/// it while a member refuses the connection; the keep-alives stay on one member until one fails,
/// then go to the next. Each member is reached on a connection of its own, kept between
/// requests.
pub struct RealEtcd {
    /// Per member (member order): its client, with the connection kept between requests.
    members: Vec<EtcdClient>,
    /// The member the next request goes to (an index into `members`).
    next: Cell<usize>,
    /// The member the keep-alives go to, until one fails.
    stream: Rc<Cell<usize>>,
    /// How long a request, or a watch's registration, waits.
    timeout: Duration,
    /// The store's clock starts here: [`KeepAlive`] reads durations since.
    epoch: Instant,
    /// When the client's first keep-alive started: the lessor's deadline loop wakes every
    /// second from then, for every session.
    lessor_started: Rc<Cell<Option<Duration>>>,
    ttl: Duration,
    gate: PauseGate,
    session: Rc<RefCell<Session>>,
    ended: Rc<Notify>,
    /// Bumped when a session ends, so that a waiter that looked before the notice still sees it.
    ends: Rc<Cell<u64>>,
    /// The keep-alive tasks: aborted when the store is dropped, as a killed process's are. A
    /// crashed client's task drops its store, and its lease must then lapse, not be kept alive
    /// by tasks that outlived it (the simulation kills every task of a crashed client's node).
    tasks: Rc<RefCell<JoinSet<()>>>,
    /// Where each lease granted is written down for the run ([`RealEtcd::with_ledger`]).
    ledger: Option<LeaseLedger>,
}

impl Drop for RealEtcd {
    fn drop(&mut self) {
        // A task may hold the set for a moment only; never across an await.
        if let Ok(mut tasks) = self.tasks.try_borrow_mut() {
            tasks.abort_all();
        }
    }
}

impl RealEtcd {
    /// A client of the member at `addr` (through its proxy), whose session lease asks for `ttl`;
    /// each request waits at most `timeout`. The client passes `gate` before and after every
    /// request (see [`PauseGate`]).
    pub fn new(addr: SocketAddr, ttl: Duration, timeout: Duration, gate: PauseGate) -> RealEtcd {
        RealEtcd::cluster(vec![addr], 0, ttl, timeout, gate)
    }

    /// A client of the members at `addrs` (member order, each through its proxy), starting on
    /// member `first mod n`, as [`RealEtcd::new`] is of one.
    pub fn cluster(
        addrs: Vec<SocketAddr>,
        first: usize,
        ttl: Duration,
        timeout: Duration,
        gate: PauseGate,
    ) -> RealEtcd {
        let first = first % addrs.len().max(1);
        let check_open = addrs.len() > 1;
        let members = addrs
            .iter()
            .map(|&addr| {
                let client = EtcdClient::new(addr, timeout);
                if check_open {
                    client.telling_refusals()
                } else {
                    client
                }
            })
            .collect();
        RealEtcd {
            members,
            next: Cell::new(first),
            stream: Rc::new(Cell::new(first)),
            timeout,
            epoch: Instant::now(),
            lessor_started: Rc::default(),
            ttl,
            gate,
            session: Rc::default(),
            ended: Rc::new(Notify::new()),
            ends: Rc::default(),
            tasks: Rc::default(),
            ledger: None,
        }
    }

    /// The same client, writing down in `ledger` every session lease it is granted.
    pub fn with_ledger(mut self, ledger: LeaseLedger) -> RealEtcd {
        self.ledger = Some(ledger);
        self
    }

    /// The member the next request goes to, the round-robin moved past it.
    fn take_next(&self) -> usize {
        let first = self.next.get();
        self.next.set((first + 1) % self.members.len());
        first
    }

    /// `POST path` with `body` to the next member, and to the ones after it while a member
    /// refuses the connection; gated.
    async fn call(&self, path: &str, body: Value) -> Result<(u16, Value), StoreError> {
        self.gate.pass().await;
        let n = self.members.len();
        let first = self.take_next();
        let mut result = Err(StoreError::Unreachable("no member".into()));
        for k in 0..n {
            result = self.members[(first + k) % n].call(path, body.clone()).await;
            if !matches!(result, Err(StoreError::Unreachable(_))) {
                break;
            }
        }
        self.gate.pass().await;
        result
    }

    fn end(session: &RefCell<Session>, ended: &Notify, ends: &Cell<u64>, lease: LeaseId) {
        let mut s = session.borrow_mut();
        if s.lease == Some(lease) && !s.done {
            s.done = true;
            ends.set(ends.get() + 1);
            ended.notify_waiters();
        }
    }

    /// The store's clock: time since it was made.
    fn clock(epoch: Instant) -> Duration {
        Instant::now().saturating_duration_since(epoch)
    }

    /// Keeps `lease` alive until it is done: the Go lessor's send loop and deadline loop
    /// ([`lessor`]). A paused client runs neither (each passes the gate).
    fn spawn_keep_alive(&self, lease: LeaseId) {
        let (gate, session, epoch) = (self.gate.clone(), self.session.clone(), self.epoch);
        let (ended, ends) = (self.ended.clone(), self.ends.clone());
        let current = move |session: &RefCell<Session>| {
            let s = session.borrow();
            s.lease == Some(lease) && !s.done
        };
        let bound = lessor::answer_bound(self.ttl);
        let addrs: Rc<[SocketAddr]> = self.members.iter().map(EtcdClient::addr).collect();
        let stream = self.stream.clone();
        let tasks = Rc::downgrade(&self.tasks);
        // Finished sends are reaped here, so the set holds only what runs.
        while self.tasks.borrow_mut().try_join_next().is_some() {}
        {
            let (gate, session, ended, ends) =
                (gate.clone(), session.clone(), ended.clone(), ends.clone());
            self.tasks.borrow_mut().spawn_local(async move {
                while current(&session) {
                    gate.pass().await;
                    let due = session
                        .borrow()
                        .keep_alive
                        .is_some_and(|k| k.due(Self::clock(epoch)));
                    if due {
                        let (gate, session, ended, ends) =
                            (gate.clone(), session.clone(), ended.clone(), ends.clone());
                        let (addrs, stream) = (addrs.clone(), stream.clone());
                        let Some(tasks) = tasks.upgrade() else {
                            return;
                        };
                        let mut tasks = tasks.borrow_mut();
                        while tasks.try_join_next().is_some() {}
                        tasks.spawn_local(async move {
                            // Any failure moves the stream on: no refusal to tell.
                            let answer = EtcdClient::new(addrs[stream.get()], bound)
                                .keep_alive(lease)
                                .await;
                            gate.pass().await;
                            let Ok(ttl_s) = answer else {
                                // The stream failed: the next is made on another member.
                                stream.set((stream.get() + 1) % addrs.len());
                                return;
                            };
                            if !current(&session) {
                                return;
                            }
                            let now = Self::clock(epoch);
                            let alive = session
                                .borrow_mut()
                                .keep_alive
                                .as_mut()
                                .is_some_and(|k| k.answered(now, ttl_s));
                            if !alive {
                                Self::end(&session, &ended, &ends, lease);
                            }
                        });
                    }
                    tokio::time::sleep(lessor::SEND_LOOP).await;
                }
            });
        }
        let origin = self.lessor_started.get().unwrap_or_default();
        self.tasks.borrow_mut().spawn_local(async move {
            loop {
                let wake = lessor::next_deadline_check(origin, Self::clock(epoch));
                tokio::time::sleep_until(epoch + wake).await;
                gate.pass().await;
                if !current(&session) {
                    return;
                }
                let lapsed = session
                    .borrow()
                    .keep_alive
                    .is_some_and(|k| k.lapsed(Self::clock(epoch)));
                if lapsed {
                    return Self::end(&session, &ended, &ends, lease);
                }
            }
        });
    }

    /// Registers a watch of `key` from `from` on the next member, or the ones after it while a
    /// member refuses the connection: the watch's connection, or `None` when no member took it
    /// within the request timeout.
    async fn register(&self, key: &str, from: Revision) -> Option<Connection> {
        let n = self.members.len();
        let first = self.take_next();
        for k in 0..n {
            let member = &self.members[(first + k) % n];
            let registering = register_watch(member.addr(), key, from);
            let outcome = match tokio::time::timeout(self.timeout, registering).await {
                // A watch's connection is always fresh.
                Ok(Err(HttpError::Broken(why))) => Err(member.broken(why).await),
                timed => member.outcome(timed),
            };
            match outcome {
                Ok(connection) => return Some(connection),
                Err(StoreError::Unreachable(_)) => continue,
                Err(_) => return None,
            }
        }
        None
    }
}

impl EtcdStore for RealEtcd {
    async fn session(&self) -> Result<LeaseId, StoreError> {
        {
            let s = self.session.borrow();
            if let (Some(lease), false) = (s.lease, s.done) {
                return Ok(lease);
            }
        }
        let ttl_s = self.ttl.as_secs().max(1) as i64;
        let (lease, _) = granted(self.call(GRANT, grant_json(ttl_s)).await?)?;
        if let Some(ledger) = &self.ledger {
            ledger.borrow_mut().push(lease);
        }
        // `NewSession` asks for keep-alive as soon as the grant is answered.
        let now = Self::clock(self.epoch);
        if self.lessor_started.get().is_none() {
            self.lessor_started.set(Some(now));
        }
        *self.session.borrow_mut() = Session {
            lease: Some(lease),
            keep_alive: Some(KeepAlive::started(now)),
            done: false,
        };
        self.spawn_keep_alive(lease);
        Ok(lease)
    }

    fn session_done(&self) -> bool {
        let s = self.session.borrow();
        s.lease.is_none() || s.done
    }

    async fn session_ended(&self) {
        let seen = self.ends.get();
        loop {
            let notified = self.ended.notified();
            if self.session_done() || self.ends.get() != seen {
                return;
            }
            notified.await;
        }
    }

    async fn txn(&self, txn: Txn) -> Result<Result<TxnResult, EtcdError>, StoreError> {
        txn_answer(self.call(TXN, etcd_gateway::txn_json(&txn)).await?, &txn)
    }

    async fn range(&self, range: Range) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        ranged(self.call(RANGE, etcd_gateway::range_json(&range)).await?)
    }

    async fn delete(&self, key: &str) -> Result<i64, StoreError> {
        Ok(deleted(self.call(DELETE, json!({ "key": b64(key) })).await?)?.0)
    }

    async fn wait_deleted(&self, key: &str, from: Revision) {
        loop {
            self.gate.pass().await;
            let registered = self.register(key, from).await;
            self.gate.pass().await;
            let Some(connection) = registered else {
                // Not registered: again after the Go client's retry wait.
                tokio::time::sleep(RESEND).await;
                continue;
            };
            if follow_watch(connection).await.is_ok() {
                return;
            }
            // The watch's connection failed: registered again at once, from the same revision,
            // on the next member (as the simulated client does when its connection is lost).
        }
    }
}
