//! [`EtcdStore`] for a simulated client: one connection to the simulated etcd member, and the
//! session lease the Go client's `concurrency.Session` keeps.
//!
//! The session's lease is granted on first use with the scenario's TTL and kept alive by a task
//! of the client's node, as the Go client's lease keep-alive loop does: a keep-alive once its
//! last answer is a third of the TTL old (after an unanswered one, again every 500 ms); the
//! session is *done* once no keep-alive was answered within the TTL of the last answer, or the
//! member answers that it no longer has the lease (TTL 0). A done session's next use grants a
//! new lease. A watch is re-registered, from where it left off, after its connection was lost.

use super::node::{EtcdPush, EtcdRequest, EtcdResponse};
use crate::net::RpcClient;
use crate::signal::Signal;
use lockcheck_algorithms::etcd::{
    EtcdError, EtcdStore, KeyValue, LeaseId, Range, Revision, Txn, TxnResult,
};
use lockcheck_algorithms::{Env, StoreError};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// How soon an unanswered keep-alive is sent again (the Go client's send loop runs every 500 ms).
const RESEND: Duration = Duration::from_millis(500);

/// The session as the client knows it.
#[derive(Default)]
struct Session {
    lease: Option<LeaseId>,
    /// Client monotonic time after which, without another answered keep-alive, it is done.
    deadline: Duration,
    done: bool,
}

/// One client's connection to the simulated etcd member, with its session: a handle the
/// keep-alive task shares.
#[derive(Clone)]
pub struct SimEtcd<E: Env>(Rc<Shared<E>>);

/// What a [`SimEtcd`] and its keep-alive task share.
pub struct Shared<E: Env> {
    rpc: Rc<RpcClient>,
    env: E,
    server: usize,
    request_timeout: Duration,
    /// The TTL the session's lease is asked for.
    ttl: Duration,
    session: RefCell<Session>,
    /// Counts the ends of sessions: what `session_ended` waits for.
    ended: Signal,
    /// Counts lost connections: a watch is registered again after one.
    reconnects: Signal,
    /// Whether the last request on the connection went unanswered (timed out). TCP retransmits
    /// unacknowledged data until it is acknowledged or reset, so such a connection learns that
    /// its member restarted soon after the member is back; see `wait_deleted`.
    unanswered: std::cell::Cell<bool>,
    /// Counts the requests that went unanswered.
    timeouts: Signal,
}

impl<E: Env> std::ops::Deref for SimEtcd<E> {
    type Target = Shared<E>;

    fn deref(&self) -> &Shared<E> {
        &self.0
    }
}

impl<E: Env + Clone + 'static> SimEtcd<E> {
    /// A client of the member at node `server`, whose session leases ask for `ttl`.
    pub fn new(
        rpc: Rc<RpcClient>,
        env: E,
        server: usize,
        ttl: Duration,
        request_timeout: Duration,
    ) -> Self {
        SimEtcd(Rc::new(Shared {
            rpc,
            env,
            server,
            request_timeout,
            ttl,
            session: RefCell::default(),
            ended: Signal::default(),
            reconnects: Signal::default(),
            unanswered: std::cell::Cell::default(),
            timeouts: Signal::default(),
        }))
    }

    async fn call(&self, request: EtcdRequest) -> Result<EtcdResponse, StoreError> {
        let result = self
            .rpc
            .call(self.server, request, self.request_timeout)
            .await;
        match &result {
            Err(StoreError::Unreachable(_) | StoreError::ConnectionLost(_)) => {
                self.unanswered.set(false);
                self.reconnects.notify();
            }
            Err(StoreError::Timeout) => {
                self.unanswered.set(true);
                self.timeouts.notify();
            }
            Ok(_) => self.unanswered.set(false),
        }
        result
    }

    /// An answer of the wrong kind (a bug in the simulated server, not a fault of the run).
    fn unexpected(response: EtcdResponse) -> StoreError {
        StoreError::Unreachable(format!("not the answer asked for: {response:?}"))
    }

    /// Marks the session `lease` done, unless a newer one took its place.
    fn end(session: &RefCell<Session>, ended: &Signal, lease: LeaseId) {
        let mut s = session.borrow_mut();
        if s.lease == Some(lease) && !s.done {
            s.done = true;
            ended.notify();
        }
    }

    /// Keeps `lease` alive until it is done, on the client's node.
    fn spawn_keep_alive(&self, lease: LeaseId) {
        let this = self.clone();
        madsim::task::spawn_local(async move {
            loop {
                let (deadline, current) = {
                    let s = this.session.borrow();
                    (s.deadline, s.lease == Some(lease) && !s.done)
                };
                if !current {
                    return;
                }
                let sent = this.env.mono_now();
                if sent >= deadline {
                    return Self::end(&this.session, &this.ended, lease);
                }
                let next = match this.call(EtcdRequest::KeepAlive { lease }).await {
                    Ok(EtcdResponse::KeptAlive { ttl_s }) if ttl_s > 0 => {
                        let ttl_now = Duration::from_secs(ttl_s as u64);
                        let mut s = this.session.borrow_mut();
                        if s.lease == Some(lease) {
                            // The Go client counts the TTL from when the answer came.
                            s.deadline = this.env.mono_now() + ttl_now;
                        }
                        ttl_now / 3
                    }
                    Ok(EtcdResponse::KeptAlive { .. }) => {
                        return Self::end(&this.session, &this.ended, lease);
                    }
                    Ok(_) | Err(_) => RESEND,
                };
                // Wake for the next keep-alive, or at the deadline if that comes first.
                let now = this.env.mono_now();
                let deadline = this.session.borrow().deadline;
                let nap = next.min(deadline.saturating_sub(now));
                this.env.sleep(nap).await;
            }
        });
    }
}

impl<E: Env + Clone + 'static> EtcdStore for SimEtcd<E> {
    async fn session(&self) -> Result<LeaseId, StoreError> {
        {
            let s = self.session.borrow();
            if let (Some(lease), false) = (s.lease, s.done) {
                return Ok(lease);
            }
        }
        let ttl_s = self.ttl.as_secs().max(1) as i64;
        let asked = self.env.mono_now();
        match self.call(EtcdRequest::Grant { ttl_s }).await? {
            EtcdResponse::Granted { lease, ttl_s } => {
                let ttl = Duration::from_secs(ttl_s as u64);
                *self.session.borrow_mut() = Session {
                    lease: Some(lease),
                    // The Go client's first deadline counts from when keep-alive began.
                    deadline: asked + ttl,
                    done: false,
                };
                self.spawn_keep_alive(lease);
                Ok(lease)
            }
            other => Err(Self::unexpected(other)),
        }
    }

    fn session_done(&self) -> bool {
        let s = self.session.borrow();
        s.lease.is_none() || s.done
    }

    async fn session_ended(&self) {
        let seen = self.ended.changes();
        if self.session_done() {
            return;
        }
        self.ended.after(seen).await;
    }

    async fn txn(&self, txn: Txn) -> Result<Result<TxnResult, EtcdError>, StoreError> {
        match self.call(EtcdRequest::Txn(txn)).await? {
            EtcdResponse::Txn(result) => Ok(result),
            other => Err(Self::unexpected(other)),
        }
    }

    async fn range(&self, range: Range) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        match self.call(EtcdRequest::Range(range)).await? {
            EtcdResponse::Range(kvs, revision) => Ok((kvs, revision)),
            other => Err(Self::unexpected(other)),
        }
    }

    async fn delete(&self, key: &str) -> Result<i64, StoreError> {
        let key = key.to_string();
        match self.call(EtcdRequest::Delete { key }).await? {
            EtcdResponse::Deleted(deleted, _) => Ok(deleted),
            other => Err(Self::unexpected(other)),
        }
    }

    async fn wait_deleted(&self, key: &str, from: Revision) {
        loop {
            let seen = self.reconnects.changes();
            let watch = EtcdRequest::Watch {
                key: key.to_string(),
                from,
            };
            if self.call(watch).await.is_err() {
                self.env.sleep(RESEND).await;
                continue;
            }
            // Until the deletion comes, or the connection carrying the watch is lost. While a
            // request on it is unanswered, its retransmission (TCP's) reaches a member that came
            // back within RESEND, and that member's reset ends the connection: the watch is
            // registered again then, as the Go client's watcher does when its stream breaks.
            loop {
                let unanswered = self.timeouts.changes();
                let push = std::pin::pin!(self.rpc.next_push());
                let lost = std::pin::pin!(self.reconnects.after(seen));
                let retransmit = std::pin::pin!(async {
                    if !self.unanswered.get() {
                        self.timeouts.after(unanswered).await;
                    }
                    self.env.sleep(RESEND).await
                });
                let ended = futures_util::future::select(lost, retransmit);
                match futures_util::future::select(push, ended).await {
                    futures_util::future::Either::Left((payload, _)) => {
                        if crate::net::is_reset(&payload) {
                            break;
                        }
                        if let Ok(event) = payload.downcast::<EtcdPush>() {
                            if event.key == key && event.revision >= from {
                                return;
                            }
                        }
                    }
                    futures_util::future::Either::Right(_) => break,
                }
            }
        }
    }
}
