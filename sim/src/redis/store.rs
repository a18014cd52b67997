//! [`RedisStore`] for a simulated client: commands travel as messages to a simulated server.

use super::node::{RedisRequest, RedisResponse};
use crate::net::RpcClient;
use crate::world::World;
use lockcheck_algorithms::redis::{Command, RedisStore, Reply};
use lockcheck_algorithms::StoreError;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Where a connection sends its commands.
enum Target {
    /// Always this server (a Redlock master).
    Node(usize),
    /// Whichever server is the primary when the command is sent (as a client behind Sentinel).
    Primary(Arc<World>),
}

/// A connection from a simulated client to a simulated Redis server.
pub struct SimRedis {
    rpc: Rc<RpcClient>,
    target: Target,
    timeout: Duration,
}

impl SimRedis {
    /// Commands to node `server`, each waiting at most `timeout` (client clock) for its reply.
    pub fn new(rpc: Rc<RpcClient>, server: usize, timeout: Duration) -> SimRedis {
        SimRedis {
            rpc,
            target: Target::Node(server),
            timeout,
        }
    }

    /// Commands to the current primary of `world`.
    pub fn to_primary(rpc: Rc<RpcClient>, world: Arc<World>, timeout: Duration) -> SimRedis {
        SimRedis {
            rpc,
            target: Target::Primary(world),
            timeout,
        }
    }
}

impl RedisStore for SimRedis {
    async fn call(&self, command: Command) -> Result<Reply, StoreError> {
        let server = match &self.target {
            Target::Node(n) => *n,
            Target::Primary(world) => world.primary(),
        };
        let request = RedisRequest::Command(command);
        match self.rpc.call(server, request, self.timeout).await? {
            RedisResponse::Reply(reply) => Ok(reply),
            other => Err(StoreError::Unreachable(format!(
                "not a command's reply: {other:?}"
            ))),
        }
    }
}
