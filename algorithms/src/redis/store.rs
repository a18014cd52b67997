//! What a Redis backend can do, as seen by an algorithm.

use super::command::{Command, Reply};
use crate::error::StoreError;
use std::future::Future;

/// One connection to one Redis server.
///
/// A single method at the level of the protocol keeps the real client a thin mapping and lets the
/// simulated server be compared reply for reply with a real one. Every call is bounded by the
/// store's own request timeout; error replies are `Ok(Reply::Error(…))`, not `Err`.
pub trait RedisStore {
    /// Sends one command and waits for its reply.
    fn call(&self, command: Command) -> impl Future<Output = Result<Reply, StoreError>>;
}
