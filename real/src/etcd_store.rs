//! [`EtcdStore`] over a real etcd's JSON gateway ([`crate::etcd_gateway`]), with the session
//! lease kept alive as the Go client's `concurrency.Session` does, the way the simulated client
//! (`lockcheck_sim::etcd::store`) does it:
//!
//! - the lease is granted on first use; a task keeps it alive every third of its TTL (every
//!   500 ms while unanswered); the session is done once no keep-alive was answered within the
//!   TTL after the last answer, or the member answers that it no longer has the lease;
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

/// How soon an unanswered keep-alive is sent again (the Go client's send loop runs every 500 ms).
const RESEND: Duration = Duration::from_millis(500);

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
    /// When, without another answered keep-alive, it is done.
    deadline: Option<Instant>,
    done: bool,
}

/// One client's connection to a real etcd member, with its session.
pub struct RealEtcd {
    client: Rc<EtcdClient>,
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

    fn spawn_keep_alive(&self, lease: LeaseId) {
        let (client, gate, session) =
            (self.client.clone(), self.gate.clone(), self.session.clone());
        let (ended, ends) = (self.ended.clone(), self.ends.clone());
        tokio::task::spawn_local(async move {
            loop {
                let (deadline, current) = {
                    let s = session.borrow();
                    (s.deadline, s.lease == Some(lease) && !s.done)
                };
                if !current {
                    return;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Self::end(&session, &ended, &ends, lease);
                }
                gate.pass().await;
                let answer = client.keep_alive(lease).await;
                gate.pass().await;
                let next = match answer {
                    Ok(ttl_s) if ttl_s > 0 => {
                        let ttl = Duration::from_secs(ttl_s as u64);
                        // The Go client counts the TTL from when the answer came.
                        session.borrow_mut().deadline = Some(Instant::now() + ttl);
                        ttl / 3
                    }
                    Ok(_) => return Self::end(&session, &ended, &ends, lease),
                    Err(_) => RESEND,
                };
                let until = session.borrow().deadline;
                let wake = until.map_or(Instant::now() + next, |d| (Instant::now() + next).min(d));
                tokio::time::sleep_until(wake).await;
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
        let asked = Instant::now();
        let (lease, ttl_s) = self.gated(self.client.grant(ttl_s)).await?;
        *self.session.borrow_mut() = Session {
            lease: Some(lease),
            deadline: Some(asked + Duration::from_secs(ttl_s as u64)),
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
