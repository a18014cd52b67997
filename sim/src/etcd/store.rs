//! [`EtcdStore`] for a simulated client: one connection to the simulated etcd member, and the
//! session lease the Go client's `concurrency.Session` keeps.
//!
//! The session's lease is granted on first use with the scenario's TTL and kept alive by tasks
//! of the client's node timed as the Go client's lessor
//! ([`lockcheck_algorithms::etcd::lessor`]): a send loop every 500 ms that sends a keep-alive
//! once the last answer is a third of the TTL old (at every wake-up while none is answered), an
//! answer counted whenever it comes (no per-request timeout on the keep-alive stream), and a
//! deadline loop every second that ends the session once no answer came within the TTL of the
//! last one (5 s before the first); an answer with TTL 0 ends it at once. A done session's next
//! use grants a new lease. A watch is re-registered, from where it left off, after its
//! connection was lost.

use super::node::{EtcdPush, EtcdRequest, EtcdResponse};
use crate::net::RpcClient;
use crate::signal::Signal;
use lockcheck_algorithms::etcd::lessor::{self, KeepAlive};
use lockcheck_algorithms::etcd::{
    EtcdError, EtcdStore, KeyValue, LeaseId, Range, Revision, Txn, TxnResult,
};
use lockcheck_algorithms::{Env, StoreError};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// How soon a watch is registered again after it could not be (the Go client's retry wait).
const RESEND: Duration = lessor::SEND_LOOP;

/// The session as the client knows it.
#[derive(Default)]
struct Session {
    lease: Option<LeaseId>,
    /// Its keep-alive, once the lease is granted.
    keep_alive: Option<KeepAlive>,
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
    /// The members it knows (one for a lone member).
    servers: Vec<usize>,
    /// The member the next request goes to (an index into `servers`): the Go client 3.4's
    /// balancer picks its connections round-robin, one request after another.
    next: std::cell::Cell<usize>,
    /// The member its keep-alive stream is on: it stays there until it fails, then moves on,
    /// as the Go lessor's stream is made again on another connection.
    stream: std::cell::Cell<usize>,
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
    /// When the client's first keep-alive started: the lessor's deadline loop wakes every
    /// second from then, for every session of the client.
    lessor_started: std::cell::Cell<Option<Duration>>,
}

impl<E: Env> std::ops::Deref for SimEtcd<E> {
    type Target = Shared<E>;

    fn deref(&self) -> &Shared<E> {
        &self.0
    }
}

impl<E: Env + Clone + 'static> SimEtcd<E> {
    /// A client of the members at nodes `servers` (one, or a cluster's), starting with the
    /// `first`, whose session leases ask for `ttl`.
    pub fn new(
        rpc: Rc<RpcClient>,
        env: E,
        servers: Vec<usize>,
        first: usize,
        ttl: Duration,
        request_timeout: Duration,
    ) -> Self {
        let first = first % servers.len().max(1);
        SimEtcd(Rc::new(Shared {
            rpc,
            env,
            servers,
            next: std::cell::Cell::new(first),
            stream: std::cell::Cell::new(first),
            request_timeout,
            ttl,
            session: RefCell::default(),
            ended: Signal::default(),
            reconnects: Signal::default(),
            unanswered: std::cell::Cell::default(),
            timeouts: Signal::default(),
            lessor_started: std::cell::Cell::default(),
        }))
    }

    /// Sends `request` to the next member (round-robin), and to the ones after it while a
    /// member refuses the connection (the balancer picks only connections that are up). A
    /// member's error answer is the error it stands for.
    async fn call(&self, request: EtcdRequest) -> Result<EtcdResponse, StoreError> {
        let n = self.servers.len();
        let first = self.next.get();
        self.next.set((first + 1) % n);
        let mut result = Err(StoreError::Unreachable("no member".into()));
        let mut request = Some(request);
        for k in 0..n {
            let server = self.servers[(first + k) % n];
            // A copy only while another member may still be asked (one member: none).
            let Some(this) = (if k + 1 < n {
                request.clone()
            } else {
                request.take()
            }) else {
                break;
            };
            result = self.rpc.call(server, this, self.request_timeout).await;
            if !matches!(result, Err(StoreError::Unreachable(_))) {
                break;
            }
        }
        match &result {
            Err(StoreError::Timeout) => self.mark_unanswered(),
            other => self.note_answer(other),
        }
        match result {
            Ok(EtcdResponse::Unavailable {
                reason,
                maybe_applied,
            }) => Err(if maybe_applied {
                StoreError::Timeout
            } else {
                StoreError::Unreachable(reason.to_string())
            }),
            other => other,
        }
    }

    /// A request on the connection has gone unanswered past the request timeout: what TCP
    /// retransmits (see `wait_deleted`).
    fn mark_unanswered(&self) {
        self.unanswered.set(true);
        self.timeouts.notify();
    }

    /// A request's outcome other than a timeout: an answer, or the connection's end.
    fn note_answer(&self, result: &Result<EtcdResponse, StoreError>) {
        match result {
            Err(StoreError::Unreachable(_) | StoreError::ConnectionLost(_)) => {
                self.unanswered.set(false);
                self.reconnects.notify();
            }
            Ok(_) => self.unanswered.set(false),
            Err(_) => {}
        }
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

    /// Whether `lease` is the session's and not done.
    fn current(&self, lease: LeaseId) -> bool {
        let s = self.session.borrow();
        s.lease == Some(lease) && !s.done
    }

    /// Keeps `lease` alive until it is done, on the client's node: the Go lessor's send loop and
    /// deadline loop ([`lessor`]).
    fn spawn_keep_alive(&self, lease: LeaseId) {
        let this = self.clone();
        madsim::task::spawn_local(async move {
            while this.current(lease) {
                let now = this.env.mono_now();
                let due = this.session.borrow().keep_alive.is_some_and(|k| k.due(now));
                if due {
                    this.spawn_one_keep_alive(lease);
                }
                this.env.sleep(lessor::SEND_LOOP).await;
            }
        });
        let this = self.clone();
        madsim::task::spawn_local(async move {
            loop {
                let origin = this.lessor_started.get().unwrap_or_default();
                let now = this.env.mono_now();
                let wake = lessor::next_deadline_check(origin, now);
                this.env.sleep(wake.saturating_sub(now)).await;
                if !this.current(lease) {
                    return;
                }
                let now = this.env.mono_now();
                let lapsed = this
                    .session
                    .borrow()
                    .keep_alive
                    .is_some_and(|k| k.lapsed(now));
                if lapsed {
                    return Self::end(&this.session, &this.ended, lease);
                }
            }
        });
    }

    /// Sends one keep-alive for `lease` and counts its answer whenever it comes. After the
    /// request timeout without one, the connection is marked as having a request unanswered
    /// (what TCP retransmits; see `wait_deleted`), and the answer is still awaited.
    fn spawn_one_keep_alive(&self, lease: LeaseId) {
        let this = self.clone();
        madsim::task::spawn_local(async move {
            let bound = lessor::answer_bound(this.ttl);
            let server = this.servers[this.stream.get()];
            let call =
                std::pin::pin!(this
                    .rpc
                    .call(server, EtcdRequest::KeepAlive { lease }, bound));
            let late = std::pin::pin!(this.env.sleep(this.request_timeout));
            let answer = match futures_util::future::select(call, late).await {
                futures_util::future::Either::Left((answer, _)) => answer,
                futures_util::future::Either::Right(((), call)) => {
                    this.mark_unanswered();
                    call.await
                }
            };
            this.note_answer(&answer);
            let Ok(EtcdResponse::KeptAlive { ttl_s }) = answer else {
                // The stream failed: the next is made on another member.
                let n = this.servers.len();
                this.stream.set((this.stream.get() + 1) % n);
                return;
            };
            if !this.current(lease) {
                return;
            }
            let now = this.env.mono_now();
            let alive = {
                let mut s = this.session.borrow_mut();
                s.keep_alive
                    .as_mut()
                    .is_some_and(|k| k.answered(now, ttl_s))
            };
            if !alive {
                Self::end(&this.session, &this.ended, lease);
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
        match self.call(EtcdRequest::Grant { ttl_s }).await? {
            EtcdResponse::Granted { lease, .. } => {
                // `NewSession` asks for keep-alive as soon as the grant is answered.
                let now = self.env.mono_now();
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
