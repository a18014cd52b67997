//! [`RedisStore`] for a simulated client: commands travel as messages to a simulated server.

use super::node::{Published, RedisRequest, RedisResponse};
use crate::net::{is_reset, Payload, RpcClient};
use crate::world::World;
use futures_util::FutureExt;
use lockcheck_algorithms::redis::{Command, RedisStore, Reply};
use lockcheck_algorithms::StoreError;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
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
///
/// Its subscriptions ride on the client's connection to the server (a real client opens one of
/// its own for them; both break together when the server's process dies, which is what loses
/// messages). Pushes come on the client's one push mailbox, so one store per client may
/// subscribe: the single-server locks are the ones that do.
pub struct SimRedis {
    rpc: Rc<RpcClient>,
    target: Target,
    timeout: Duration,
    /// The channels subscribed, each with the messages received and not taken yet.
    channels: RefCell<BTreeMap<String, VecDeque<String>>>,
    /// The server the subscriptions were last made on, while they are there as far as the
    /// client knows: `None` after its connection was reset (the server's process died) until
    /// they are made again.
    subscribed_on: Cell<Option<usize>>,
}

impl SimRedis {
    /// Commands to node `server`, each waiting at most `timeout` (client clock) for its reply.
    pub fn new(rpc: Rc<RpcClient>, server: usize, timeout: Duration) -> SimRedis {
        SimRedis::with_target(rpc, Target::Node(server), timeout)
    }

    /// Commands to the current primary of `world`.
    pub fn to_primary(rpc: Rc<RpcClient>, world: Arc<World>, timeout: Duration) -> SimRedis {
        SimRedis::with_target(rpc, Target::Primary(world), timeout)
    }

    fn with_target(rpc: Rc<RpcClient>, target: Target, timeout: Duration) -> SimRedis {
        SimRedis {
            rpc,
            target,
            timeout,
            channels: RefCell::new(BTreeMap::new()),
            subscribed_on: Cell::new(None),
        }
    }

    /// The server a command goes to now.
    fn server(&self) -> usize {
        match &self.target {
            Target::Node(n) => *n,
            Target::Primary(world) => world.primary(),
        }
    }

    /// Makes every subscription on the server commands go to now, once: `Ok` when all are
    /// confirmed.
    async fn subscribe_all(&self) -> Result<(), StoreError> {
        let server = self.server();
        let channels: Vec<String> = self.channels.borrow().keys().cloned().collect();
        for channel in channels {
            let request = RedisRequest::Subscribe { channel };
            match self.rpc.call(server, request, self.timeout).await? {
                RedisResponse::Subscribed => {}
                other => {
                    return Err(StoreError::Unreachable(format!(
                        "not a subscription's confirmation: {other:?}"
                    )))
                }
            }
        }
        self.subscribed_on.set(Some(server));
        Ok(())
    }

    /// Takes in the pushes that have arrived, without waiting for more.
    fn drain_pushes(&self) {
        while let Some(push) = self.rpc.next_push().now_or_never() {
            self.take_push(push);
        }
    }

    /// A push that arrived: a message for a channel subscribed to is kept for its waiter.
    fn take_push(&self, push: Payload) {
        if is_reset(&push) {
            // The server's process died, and the subscriptions with it.
            self.subscribed_on.set(None);
        } else if let Some(published) = push.downcast_ref::<Published>() {
            if let Some(queue) = self.channels.borrow_mut().get_mut(&published.channel) {
                queue.push_back(published.message.clone());
            }
        }
    }
}

impl RedisStore for SimRedis {
    async fn call(&self, command: Command) -> Result<Reply, StoreError> {
        let request = RedisRequest::Command(command);
        match self.rpc.call(self.server(), request, self.timeout).await? {
            RedisResponse::Reply(reply) => Ok(reply),
            other => Err(StoreError::Unreachable(format!(
                "not a command's reply: {other:?}"
            ))),
        }
    }

    /// `WAIT`: the server holds it up to `blocks` before it replies, so its reply is waited for
    /// that much longer than any other's.
    async fn call_blocking(&self, command: Command, blocks: Duration) -> Result<Reply, StoreError> {
        let request = RedisRequest::Command(command);
        match self
            .rpc
            .call(self.server(), request, self.timeout + blocks)
            .await?
        {
            RedisResponse::Reply(reply) => Ok(reply),
            other => Err(StoreError::Unreachable(format!(
                "not a command's reply: {other:?}"
            ))),
        }
    }

    /// Subscribes every channel kept, this one included: after a reset or a failover the others
    /// were lost too.
    async fn subscribe(&self, channel: &str) -> Result<(), StoreError> {
        // A subscription starts counting afresh: what came before it (the server keeps a
        // subscription the client gave up locally) wakes nobody.
        self.drain_pushes();
        self.channels
            .borrow_mut()
            .insert(channel.to_owned(), VecDeque::new());
        let subscribed = self.subscribe_all().await;
        if subscribed.is_err() {
            self.channels.borrow_mut().remove(channel);
        }
        subscribed
    }

    fn unsubscribe(&self, channel: &str) {
        self.channels.borrow_mut().remove(channel);
    }

    async fn next_message(&self, channel: &str) -> String {
        // Re-subscriptions that failed in a row.
        let mut failed = 0u32;
        loop {
            let taken = self
                .channels
                .borrow_mut()
                .get_mut(channel)
                .and_then(VecDeque::pop_front);
            if let Some(message) = taken {
                return message;
            }
            if self.subscribed_on.get() != Some(self.server()) {
                // Subscribe again, as a client library does when it reconnects (what was
                // published in between is lost), backing off as Redisson's reconnection does.
                if self.subscribe_all().await.is_err() {
                    let backoff = Duration::from_millis(2 << failed.min(12)).min(self.timeout);
                    failed += 1;
                    madsim::time::sleep(backoff).await;
                }
                continue;
            }
            let push = self.rpc.next_push().await;
            self.take_push(push);
        }
    }
}
