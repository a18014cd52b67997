//! [`ZkStore`] for a simulated client: one session with the simulated ZooKeeper server, kept
//! alive by pings every third of its timeout, with the client-side states a ZooKeeper client
//! library reports (Connected; Disconnected after two thirds of the timeout without an answer;
//! Expired when the server says so) and a fresh session on the next request after an expiry.

use super::model;
use super::node::{ZkPush, ZkRequest, ZkResponse};
use crate::net::{Request, Response, RpcClient};
use lockcheck_algorithms::zookeeper::{
    CreateMode, SessionState, Stat, WatchEvent, ZkError, ZkNotice, ZkStore,
};
use lockcheck_algorithms::{Env, StoreError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

/// How soon a disconnected client tries the server again: the Java client sleeps up to a second
/// between connection attempts, and a reconnection in time revives the session.
const RECONNECT_INTERVAL: Duration = Duration::from_secs(1);

struct Session {
    id: Option<model::SessionId>,
    timeout: Duration,
    state: SessionState,
    /// Client monotonic time of the last answer from the server.
    last_heard: Duration,
    notices: VecDeque<ZkNotice>,
    waker: Option<Waker>,
}

/// One client's ZooKeeper session, shared with its ping and event tasks.
pub struct SimZk<E: Env> {
    rpc: Rc<RpcClient>,
    env: E,
    server: usize,
    request_timeout: Duration,
    session: Rc<RefCell<Session>>,
}

impl<E: Env + Clone + 'static> SimZk<E> {
    /// A client of the server at node `server`, asking for `session_timeout`. Starts its ping
    /// and event tasks on the calling node (they die with it).
    pub fn new(
        rpc: Rc<RpcClient>,
        env: E,
        server: usize,
        session_timeout: Duration,
        request_timeout: Duration,
    ) -> Self {
        let session = Rc::new(RefCell::new(Session {
            id: None,
            timeout: session_timeout,
            state: SessionState::Disconnected,
            last_heard: env.mono_now(),
            notices: VecDeque::new(),
            waker: None,
        }));
        let store = SimZk {
            rpc,
            env,
            server,
            request_timeout,
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

    fn spawn_event_listener(&self) {
        let (rpc, session) = (self.rpc.clone(), self.session.clone());
        madsim::task::spawn_local(async move {
            loop {
                let Ok(push) = rpc.next_push().await.downcast::<ZkPush>() else {
                    continue;
                };
                let ZkPush(event) = *push;
                if session.borrow().id != Some(event.session) {
                    continue; // an event of an earlier session
                }
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

    fn spawn_pinger(&self) {
        let (rpc, env, session, server) = (
            self.rpc.clone(),
            self.env.clone(),
            self.session.clone(),
            self.server,
        );
        let request_timeout = self.request_timeout;
        madsim::task::spawn_local(async move {
            loop {
                let (timeout, state) = {
                    let s = session.borrow();
                    (s.timeout, s.state)
                };
                let interval = if state == SessionState::Disconnected {
                    RECONNECT_INTERVAL.min(timeout / 3)
                } else {
                    timeout / 3
                };
                env.sleep(interval).await;
                let Some(id) = session.borrow().id else {
                    continue;
                };
                let ping = Request::Zk(ZkRequest::Ping { session: id }, rpc.local_addr());
                match rpc.call(server, ping, request_timeout).await {
                    Ok(Response::Zk(ZkResponse::Pong)) => {
                        session.borrow_mut().last_heard = env.mono_now();
                        Self::set_state(&session, SessionState::Connected);
                    }
                    Ok(Response::Zk(ZkResponse::Expired)) => {
                        if session.borrow().id == Some(id) {
                            session.borrow_mut().id = None;
                            Self::set_state(&session, SessionState::Expired);
                        }
                    }
                    _ => {
                        let silent = env.mono_now().saturating_sub(session.borrow().last_heard);
                        if silent >= timeout * 2 / 3 {
                            Self::set_state(&session, SessionState::Disconnected);
                        }
                    }
                }
            }
        });
    }

    async fn send(&self, request: ZkRequest) -> Result<ZkResponse, StoreError> {
        let request = Request::Zk(request, self.rpc.local_addr());
        match self
            .rpc
            .call(self.server, request, self.request_timeout)
            .await?
        {
            Response::Zk(response) => {
                self.session.borrow_mut().last_heard = self.env.mono_now();
                Ok(response)
            }
            other => Err(StoreError::Unreachable(format!(
                "not a ZooKeeper server: answered {other:?}"
            ))),
        }
    }

    /// The session to use, opening one if there is none (first use, or after an expiry).
    async fn session_id(&self) -> Result<model::SessionId, StoreError> {
        if let Some(id) = self.session.borrow().id {
            return Ok(id);
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
                if self.session.borrow().id == Some(session) {
                    self.session.borrow_mut().id = None;
                    Self::set_state(&self.session, SessionState::Expired);
                }
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
            Ok((model::OpResult::Stat(stat), _)) => Ok(stat),
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
            Ok((model::OpResult::Children(c), _)) => Ok(c),
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
