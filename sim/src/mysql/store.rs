//! [`SqlStore`] for a simulated client: one connection to the simulated MariaDB server, opened on
//! first use and again after the server closed it.
//!
//! A client waits for a statement's reply as long as the server may make it wait for a row lock
//! (`innodb_lock_wait_timeout`) plus its own request timeout: a real client's read timeout is
//! longer than the server's lock wait, or every contended `SELECT … FOR UPDATE` would look like
//! a lost connection. A statement without a reply in that time is "maybe applied": the client
//! drops the connection (the server rolls back whatever it left open) and the next statement
//! opens a new one.

use super::model::ConnId;
use super::node::{MysqlRequest, MysqlResponse};
use crate::net::RpcClient;
use lockcheck_algorithms::mysql::{Reply, SqlStore, Statement};
use lockcheck_algorithms::StoreError;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// One client connection to the server at node `server`.
pub struct SimMysql {
    rpc: Rc<RpcClient>,
    server: usize,
    /// How long to wait for a reply that no lock holds up.
    request_timeout: Duration,
    /// How long the server may hold a statement up waiting for a row lock.
    lock_wait: Duration,
    conn: Cell<Option<ConnId>>,
    /// Connects sent so far (each connect's number).
    attempts: Cell<u64>,
}

impl SimMysql {
    /// A client of the server at node `server`; no connection is opened until the first
    /// statement.
    pub fn new(
        rpc: Rc<RpcClient>,
        server: usize,
        request_timeout: Duration,
        lock_wait: Duration,
    ) -> Self {
        SimMysql {
            rpc,
            server,
            request_timeout,
            lock_wait,
            conn: Cell::new(None),
            attempts: Cell::new(0),
        }
    }

    async fn call(
        &self,
        request: MysqlRequest,
        timeout: Duration,
    ) -> Result<MysqlResponse, StoreError> {
        self.rpc.call(self.server, request, timeout).await
    }

    /// The open connection, or a new one.
    async fn connection(&self) -> Result<ConnId, StoreError> {
        if let Some(conn) = self.conn.get() {
            return Ok(conn);
        }
        let attempt = self.attempts.get() + 1;
        self.attempts.set(attempt);
        let reply = self
            .call(MysqlRequest::Connect { attempt }, self.request_timeout)
            .await;
        if reply.is_err() {
            // The server may have opened it and answered too late: close that socket, as a
            // client that gives up on a connect does.
            self.send_and_forget(MysqlRequest::AbandonConnect { attempt });
        }
        match reply? {
            MysqlResponse::Connected(conn) => {
                self.conn.set(Some(conn));
                Ok(conn)
            }
            other => Err(StoreError::Unreachable(format!(
                "unexpected answer to a connect: {other:?}"
            ))),
        }
    }

    /// Forgets the connection and tells the server, without waiting: a client that gave up on a
    /// reply closes its socket. If the message is lost, the server holds the connection (and its
    /// transaction) until `wait_timeout`, as it would for a client whose FIN never came.
    fn abandon(&self, conn: ConnId) {
        self.conn.set(None);
        self.send_and_forget(MysqlRequest::Disconnect { conn });
    }

    /// Sends `request` without waiting for its answer.
    fn send_and_forget(&self, request: MysqlRequest) {
        let rpc = self.rpc.clone();
        let (server, timeout) = (self.server, self.request_timeout);
        madsim::task::spawn_local(async move {
            let _: Result<MysqlResponse, _> = rpc.call(server, request, timeout).await;
        });
    }
}

impl SqlStore for SimMysql {
    async fn execute(&self, statement: Statement) -> Result<Reply, StoreError> {
        let conn = self.connection().await?;
        let request = MysqlRequest::Execute { conn, statement };
        match self
            .call(request, self.request_timeout + self.lock_wait)
            .await
        {
            Ok(MysqlResponse::Reply(reply)) => {
                if reply.as_ref().is_err_and(|e| e.is_disconnect()) {
                    self.conn.set(None);
                }
                Ok(reply)
            }
            Ok(other) => Err(StoreError::Unreachable(format!(
                "unexpected answer to a statement: {other:?}"
            ))),
            Err(e) => {
                self.abandon(conn);
                Err(e)
            }
        }
    }
}
