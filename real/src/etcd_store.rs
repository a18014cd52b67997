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
//!   registered again from the same revision when that connection breaks;
//! - each request waits at most the store's timeout. No answer in time → [`StoreError::Timeout`]
//!   (the connection is dropped: a late answer would be read as the next one's); a refused
//!   connection → [`StoreError::Unreachable`] (not applied); a connection that broke after the
//!   request may have gone out → [`StoreError::ConnectionLost`].
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
use tokio::time::Instant;

/// How soon a watch is registered again after it could not be (the Go client's retry wait).
const RESEND: Duration = lessor::SEND_LOOP;

/// etcd's requests on one connection, each bounded by a timeout.
pub struct EtcdClient {
    addr: SocketAddr,
    timeout: Duration,
    connection: RefCell<Option<Connection>>,
}

impl EtcdClient {
    /// A client of the gateway at `addr`; nothing is connected until the first request.
    pub fn new(addr: SocketAddr, timeout: Duration) -> EtcdClient {
        EtcdClient {
            addr,
            timeout,
            connection: RefCell::new(None),
        }
    }

    /// `POST path` with `body`: the status and the answer.
    pub async fn call(&self, path: &str, body: Value) -> Result<(u16, Value), StoreError> {
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
        match tokio::time::timeout(self.timeout, exchange).await {
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
        let (_, answer) = self
            .call("/v3/lease/grant", json!({ "TTL": ttl_s.to_string() }))
            .await?;
        Ok((int(&answer, "ID"), int(&answer, "TTL")))
    }

    /// One `LeaseKeepAlive`: the lease's TTL, 0 when the member does not have it.
    pub async fn keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError> {
        let (_, answer) = self
            .call("/v3/lease/keepalive", json!({ "ID": lease.to_string() }))
            .await?;
        Ok(answer.get("result").map_or(0, |r| int(r, "TTL")))
    }

    /// `LeaseRevoke`.
    pub async fn revoke(&self, lease: LeaseId) -> Result<Result<(), EtcdError>, StoreError> {
        let (status, answer) = self
            .call("/v3/lease/revoke", json!({ "ID": lease.to_string() }))
            .await?;
        Ok(match status {
            200 => Ok(()),
            _ => Err(server_error(&answer)?),
        })
    }

    /// `Txn`.
    pub async fn txn(&self, txn: &Txn) -> Result<Result<TxnResult, EtcdError>, StoreError> {
        let (status, answer) = self.call("/v3/kv/txn", etcd_gateway::txn_json(txn)).await?;
        Ok(match status {
            200 => Ok(etcd_gateway::txn_result(&answer, txn)),
            _ => Err(server_error(&answer)?),
        })
    }

    /// `Range`, with the header's revision.
    pub async fn range(&self, range: &Range) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        let (_, answer) = self
            .call("/v3/kv/range", etcd_gateway::range_json(range))
            .await?;
        Ok((kvs(&answer), revision(&answer)))
    }

    /// `DeleteRange` of one key: how many keys it deleted, and the header's revision.
    pub async fn delete(&self, key: &str) -> Result<(i64, Revision), StoreError> {
        let (_, answer) = self
            .call("/v3/kv/deleterange", json!({ "key": b64(key) }))
            .await?;
        Ok((int(&answer, "deleted"), revision(&answer)))
    }
}

/// The etcd error an error answer stands for; one the algorithms do not know is a broken
/// exchange, named.
fn server_error(answer: &Value) -> Result<EtcdError, StoreError> {
    let message = answer.get("error").and_then(Value::as_str).unwrap_or("");
    if message.contains("requested lease not found") {
        Ok(EtcdError::LeaseNotFound)
    } else if message.contains("duplicate key given in txn request") {
        Ok(EtcdError::DuplicateKey)
    } else {
        Err(StoreError::ConnectionLost(format!(
            "etcd answered an error: {answer}"
        )))
    }
}

/// Waits, on a connection of its own, for the deletion of `key` at or after revision `from`:
/// `Ok(())` when it came, an error when the connection failed first.
pub async fn watch_deleted(addr: SocketAddr, key: &str, from: Revision) -> Result<(), HttpError> {
    let mut connection = Connection::open(addr).await?;
    let request =
        json!({ "create_request": { "key": b64(key), "start_revision": from.to_string() } });
    connection.post_stream("/v3/watch", &request).await?;
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

/// The session as the client knows it.
#[derive(Default)]
struct Session {
    lease: Option<LeaseId>,
    /// Its keep-alive, on the store's clock ([`RealEtcd::clock`]), once the lease is granted.
    keep_alive: Option<KeepAlive>,
    done: bool,
}

/// One client's connection to a real etcd member, with its session.
pub struct RealEtcd {
    client: Rc<EtcdClient>,
    /// Where keep-alives go: each on a connection of its own, with no timeout short of the
    /// lease's (an answer counts whenever it comes).
    addr: SocketAddr,
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
}

impl RealEtcd {
    /// A client of the member at `addr` (through its proxy), whose session lease asks for `ttl`;
    /// each request waits at most `timeout`. The client passes `gate` before and after every
    /// request (see [`PauseGate`]).
    pub fn new(addr: SocketAddr, ttl: Duration, timeout: Duration, gate: PauseGate) -> RealEtcd {
        RealEtcd {
            client: Rc::new(EtcdClient::new(addr, timeout)),
            addr,
            epoch: Instant::now(),
            lessor_started: Rc::default(),
            ttl,
            gate,
            session: Rc::default(),
            ended: Rc::new(Notify::new()),
            ends: Rc::default(),
        }
    }

    async fn gated<T>(&self, request: impl std::future::Future<Output = T>) -> T {
        self.gate.pass().await;
        let result = request.await;
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
        let addr = self.addr;
        {
            let (gate, session, ended, ends) =
                (gate.clone(), session.clone(), ended.clone(), ends.clone());
            tokio::task::spawn_local(async move {
                while current(&session) {
                    gate.pass().await;
                    let due = session
                        .borrow()
                        .keep_alive
                        .is_some_and(|k| k.due(Self::clock(epoch)));
                    if due {
                        let (gate, session, ended, ends) =
                            (gate.clone(), session.clone(), ended.clone(), ends.clone());
                        tokio::task::spawn_local(async move {
                            let answer = EtcdClient::new(addr, bound).keep_alive(lease).await;
                            gate.pass().await;
                            let Ok(ttl_s) = answer else {
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
        tokio::task::spawn_local(async move {
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
        let (lease, _) = self.gated(self.client.grant(ttl_s)).await?;
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
        self.gated(self.client.txn(&txn)).await
    }

    async fn range(&self, range: Range) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        self.gated(self.client.range(&range)).await
    }

    async fn delete(&self, key: &str) -> Result<i64, StoreError> {
        Ok(self.gated(self.client.delete(key)).await?.0)
    }

    async fn wait_deleted(&self, key: &str, from: Revision) {
        loop {
            self.gate.pass().await;
            let watched = watch_deleted(self.client.addr, key, from).await;
            self.gate.pass().await;
            match watched {
                Ok(()) => return,
                // The watch's connection failed: register it again, from the same revision.
                Err(_) => tokio::time::sleep(RESEND).await,
            }
        }
    }
}
