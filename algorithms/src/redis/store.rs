//! What a Redis backend can do, as seen by an algorithm.

use super::command::{Command, Reply};
use crate::error::StoreError;
use std::future::Future;
use std::time::Duration;

/// One connection to one Redis server, and a subscription connection beside it.
///
/// A single method at the level of the protocol keeps the real client a thin mapping and lets the
/// simulated server be compared reply for reply with a real one. Every call is bounded by the
/// store's own request timeout; error replies are `Ok(Reply::Error(…))`, not `Err`.
///
/// Pub/sub is what Redisson's waiters wait on: a message published to a channel reaches the
/// connections subscribed to it *at that moment*. Redis keeps no message for a connection that
/// is not subscribed, so a message published while the subscriber's connection is broken (the
/// server restarted, the client reconnecting) is lost, and so is the wake-up it carried. A store
/// re-subscribes its channels when it reconnects, as client libraries do (Redisson's
/// `reattachPubSub`), but what was published in between does not come back.
pub trait RedisStore {
    /// Sends one command and waits for its reply.
    fn call(&self, command: Command) -> impl Future<Output = Result<Reply, StoreError>>;

    /// Sends a command the server holds for up to `blocks` before it replies (`WAIT replicas
    /// timeout`), waiting that much longer than the request timeout for its reply: as Redisson
    /// times a batch that ends with `WAIT`, its `timeout` plus the `WAIT`'s own.
    ///
    /// The default waits no longer than [`RedisStore::call`] (a store that does not know better:
    /// a `WAIT` longer than its request timeout then gets no reply).
    fn call_blocking(
        &self,
        command: Command,
        blocks: Duration,
    ) -> impl Future<Output = Result<Reply, StoreError>> {
        let _ = blocks;
        self.call(command)
    }

    /// `SUBSCRIBE channel` on the store's subscription connection (opened if needed): `Ok` once
    /// the server confirmed it, from when on [`RedisStore::next_message`] hands out what is
    /// published to `channel`. Bounded by the request timeout.
    ///
    /// The default refuses: a store without pub/sub (a test double) cannot wake a waiter.
    fn subscribe(&self, channel: &str) -> impl Future<Output = Result<(), StoreError>> {
        let refused = StoreError::Unreachable(format!("no pub/sub here to subscribe to {channel}"));
        std::future::ready(Err(refused))
    }

    /// Stops handing out `channel`'s messages, and forgets those received and not taken yet.
    /// Local: Redisson sends its `UNSUBSCRIBE` without waiting for it, and a subscription the
    /// server keeps a while longer changes only the receiver count `PUBLISH` replies, which no
    /// lock reads.
    fn unsubscribe(&self, channel: &str) {
        let _ = channel;
    }

    /// The next message published to `channel` since it was subscribed and not taken yet: its
    /// text. Messages that came while nobody waited are kept (Redisson counts them on a
    /// semaphore, so a wake-up that comes between two waits is not lost). Waits for ever when
    /// none comes; callers bound it with their own timer.
    ///
    /// The default never returns (see [`RedisStore::subscribe`]).
    fn next_message(&self, channel: &str) -> impl Future<Output = String> {
        let _ = channel;
        std::future::pending()
    }
}
