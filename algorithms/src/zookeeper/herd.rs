//! `zk-herd` (seed 001): the naive ZooKeeper lock. The lock IS one ephemeral node: whoever
//! creates it holds the lock; everyone else watches the node and, when it is deleted, all of them
//! wake and race to create it again.
//!
//! It is as safe as the sequential lock (the node dies with the holder's session, so a holder
//! paused past its session timeout is just as unsafe without fencing, and the node's `czxid` is
//! just as good a fencing token) but every release wakes every waiter: the herd effect seed 001
//! warns about, which lockcheck measures as wake-ups per release. It is not fair (the fastest
//! racer wins, not the oldest waiter) and not reentrant.

use super::config::ZkLockConfig;
use super::paths::create_ancestors;
use super::session::{await_change, session_watch, still_ours};
use super::store::{CreateMode, Stat, ZkError, ZkStore};
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::{Env, LockEvent};
use crate::error::LockError;
use crate::guard::Guard;
use crate::guard::UNBOUNDED_VALIDITY;
use crate::lock::Lock;
use crate::retry::CLEANUP_ATTEMPTS;
use crate::stores::Stores;
use std::cell::RefCell;
use std::time::Duration;

/// What one create attempt came to.
enum Attempt {
    /// The node is ours.
    Held(Stat),
    /// Another client's node is there and we watch it.
    Watching,
    /// Try again at once (the node vanished between our create and our watch, or the parents
    /// were just made).
    Again,
    /// No answer, or the session went: back off, then try again.
    Failed,
}

/// The herd lock for one client session.
pub struct ZkHerd<S> {
    store: S,
    config: ZkLockConfig,
}

impl<S: ZkStore> ZkHerd<S> {
    /// The lock at `config.path` for the client whose session is `store`.
    pub fn new(store: S, config: ZkLockConfig) -> Self {
        ZkHerd { store, config }
    }

    /// The client's session.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// One create, and what it tells.
    async fn attempt(&self, made_parents: &mut bool) -> Result<Attempt, LockError> {
        let path = &self.config.path;
        match self
            .store
            .create(path, Vec::new(), CreateMode::Ephemeral)
            .await
        {
            Ok(Ok((_, stat))) => Ok(Attempt::Held(stat)),
            Ok(Err(ZkError::NodeExists)) => match self.store.exists(path, true).await {
                // Ours, made by an earlier create whose reply was lost.
                Ok(Ok(Some(stat))) if Some(stat.ephemeral_owner) == self.store.session_id() => {
                    Ok(Attempt::Held(stat))
                }
                Ok(Ok(Some(_))) => Ok(Attempt::Watching),
                Ok(Ok(None)) => Ok(Attempt::Again),
                Ok(Err(ZkError::SessionExpired)) | Err(_) => Ok(Attempt::Failed),
                Ok(Err(e)) => Err(LockError::Server(e.to_string())),
            },
            Ok(Err(ZkError::NoNode)) if !*made_parents => {
                create_ancestors(&self.store, path).await;
                *made_parents = true;
                Ok(Attempt::Again)
            }
            Ok(Err(ZkError::NoNode | ZkError::SessionExpired)) => {
                *made_parents = false;
                Ok(Attempt::Failed)
            }
            Ok(Err(e)) => Err(LockError::Server(e.to_string())),
            // The create may have been applied: if the node is ours, we hold the lock.
            Err(e) if e.maybe_applied() => match self.store.exists(path, false).await {
                Ok(Ok(Some(stat))) if Some(stat.ephemeral_owner) == self.store.session_id() => {
                    Ok(Attempt::Held(stat))
                }
                _ => Ok(Attempt::Failed),
            },
            Err(_) => Ok(Attempt::Failed),
        }
    }

    /// Deletes our node if it is still ours (after our session expired, the node at the path
    /// may be another client's); `Ok(true)` when we held it until now.
    async fn delete_own<E: Env>(&self, env: &E) -> Result<bool, LockError> {
        let attempts = self.config.retry_count.unwrap_or(CLEANUP_ATTEMPTS).max(1);
        let mut tried = 0u32;
        // A delete whose reply was lost may have happened: if the node is then gone (or someone
        // else's), our own delete is the likely reason, and we held the lock until it, as
        // `ZkSequential::delete_node` reasons too.
        let mut unsure = false;
        loop {
            let error = match still_ours(&self.store, &self.config.path).await {
                Ok(false) => return Ok(unsure),
                // Deleting in our own session: if it has expired meanwhile, the server refuses,
                // so this can never delete a node another client made.
                Ok(true) => match self.store.delete(&self.config.path, -1).await {
                    Ok(Ok(())) => return Ok(true),
                    Ok(Err(ZkError::NoNode)) => return Ok(unsure),
                    Ok(Err(ZkError::SessionExpired)) => return Ok(false),
                    Ok(Err(e)) => return Err(LockError::Server(e.to_string())),
                    Err(e) => {
                        unsure |= e.maybe_applied();
                        e
                    }
                },
                Err(e) => e,
            };
            tried += 1;
            if tried >= attempts {
                return Err(error.into());
            }
            let delay = self.config.retry_delay;
            env.sleep(env.random_between(delay / 2, delay)).await;
        }
    }
}

impl<S: ZkStore> Lock for ZkHerd<S> {
    /// Creates the node, or watches it and tries again each time it goes, until the wait or the
    /// retries run out. A first attempt always runs, so a zero wait still takes a free lock.
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        let deadline = env.mono_now().saturating_add(wait);
        let mut failures = 0u32;
        let mut made_parents = false;
        loop {
            let asked = env.mono_now();
            let attempt = self.attempt(&mut made_parents).await?;
            let acquired = matches!(attempt, Attempt::Held(_));
            env.observe(LockEvent::Attempt {
                acquired,
                accepted: usize::from(acquired),
                of: 1,
            });
            match attempt {
                Attempt::Held(stat) => {
                    return Ok(Some(Guard {
                        // The path is every holder's; its czxid tells this holding apart.
                        token: format!("{}@{}", self.config.path, stat.czxid),
                        acquired_at: asked,
                        valid_until: asked.saturating_add(UNBOUNDED_VALIDITY),
                        fence: u64::try_from(stat.czxid).ok(),
                    }));
                }
                Attempt::Again => {}
                Attempt::Watching => {
                    if !await_change(&self.store, env, deadline, &self.config.path).await {
                        return Ok(None);
                    }
                }
                Attempt::Failed => {
                    if !self.config.back_off(env, deadline, &mut failures).await {
                        // A create without a reply may have made our node: do not leave it
                        // blocking everyone until our session ends.
                        self.delete_own(env).await.ok();
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Deletes the node if it is still ours; false when our session (and with it the lock) had
    /// already gone.
    async fn release<E: Env>(&self, env: &E, _guard: &Guard) -> Result<bool, LockError> {
        self.delete_own(env).await
    }

    /// Follows the session: suspended while disconnected, lost once the node is no longer ours.
    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        session_watch(&self.store, &self.config, env, guard, &self.config.path).await
    }
}

/// `zk-herd` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "zk-herd",
    summary: "One ephemeral node that every waiter watches (seed 001's herd-effect lock).",
    backend: Backend::ZooKeeper,
    servers: Servers::One,
    replicas: false,
    lease: Lease::Session,
    fencing: Fencing::Token,
    renews: false,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for ZkHerd<S::Zk> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        ZkHerd::new(stores.zookeeper(), ZkLockConfig::of(settings))
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
