//! [`RedisStore`] for a simulated client: commands travel as messages to a simulated server.

use crate::net::{Request, Response, RpcClient};
use lockcheck_algorithms::redis::{Command, RedisStore, Reply};
use lockcheck_algorithms::StoreError;
use std::rc::Rc;
use std::time::Duration;

/// A connection from a simulated client to one simulated Redis server.
pub struct SimRedis {
    rpc: Rc<RpcClient>,
    server: usize,
    timeout: Duration,
}

impl SimRedis {
    /// Commands to node `server`, each waiting at most `timeout` (client clock) for its reply.
    pub fn new(rpc: Rc<RpcClient>, server: usize, timeout: Duration) -> SimRedis {
        SimRedis {
            rpc,
            server,
            timeout,
        }
    }
}

impl RedisStore for SimRedis {
    async fn call(&self, command: Command) -> Result<Reply, StoreError> {
        match self
            .rpc
            .call(self.server, Request::Redis(command), self.timeout)
            .await?
        {
            Response::Redis(reply) => Ok(reply),
            other => Err(StoreError::Unreachable(format!(
                "not a Redis server: answered {other:?}"
            ))),
        }
    }
}
