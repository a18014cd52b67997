//! `zk-sequential` and `zk-rwlock`: Curator's `InterProcessMutex` and the two sides of its
//! `InterProcessReadWriteLock`, on one ZooKeeper session.
//!
//! Each acquisition creates an ephemeral sequential node under the lock's path, and the nodes
//! form a queue ordered by sequence number. What a node needs in order to hold is its
//! [`QueueRole`]: a mutex or a writer holds when its node is first; a reader holds when no write
//! node is before it. A node that cannot hold yet watches the one node whose deletion can change
//! that (its predecessor, or for a reader the first write node before it), so a release wakes
//! only the waiters it lets in (no herd), and the lock passes in creation order. The node is
//! ephemeral, so the lock dies with the holder's session: there is no lease, and nothing the
//! client can measure tells it when the server has given up on its session. A holder that pauses
//! past the session timeout keeps believing it holds a lock that another client now holds; only
//! fencing (the node's `czxid`, which grows with every acquisition) makes that safe.
//!
//! As in Curator, node names carry a "protection" prefix `_c_<guid>-` so that a client whose
//! create reply was lost can find the node it may have made, instead of leaving an orphan that
//! would block everyone behind it for as long as its session lives; and the lock is reentrant per
//! client (per lock instance here): acquiring it again while held only counts.

use super::config::ZkLockConfig;
use super::paths::create_ancestors;
use super::session::{await_change, session_watch};
use super::store::{CreateMode, SessionId, Stat, ZkError, ZkStore};
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::{Env, LockEvent};
use crate::error::{LockError, StoreError};
use crate::guard::Guard;
use crate::guard::UNBOUNDED_VALIDITY;
use crate::lock::Lock;
use crate::retry::CLEANUP_ATTEMPTS;
use crate::stores::Stores;
use std::cell::RefCell;
use std::time::Duration;

/// A mutex node's lock name (what follows the protection prefix; Curator's `lockName`).
const MUTEX_NAME: &str = "lock-";
/// A read node's lock name (Curator's `READ_LOCK_NAME`).
const READ_NAME: &str = "__READ__";
/// A write node's lock name (Curator's `WRITE_LOCK_NAME`).
const WRITE_NAME: &str = "__WRIT__";
/// The server appends the parent's count of child creations as ten zero-padded digits: this suffix alone orders
/// the nodes, whatever their prefixes.
const SEQUENCE_DIGITS: usize = 10;

/// Whether the node at `path` is the write side's node of a read/write lock (the nodes a reader
/// must not pass).
pub fn is_write_node(path: &str) -> bool {
    path.contains(WRITE_NAME)
}

/// What a client's node stands for in the queue, and so when it holds (Curator's lock drivers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueRole {
    /// `InterProcessMutex`: holds when first; watches the node just before its own.
    Mutex,
    /// The read lock of a read/write lock: holds when no write node is before its own, so readers
    /// share; watches the first write node before its own.
    Read,
    /// The write lock of a read/write lock: holds when first (readers and writers alike queue in
    /// one line); watches the node just before its own.
    Write,
}

impl QueueRole {
    /// The lock name this role's nodes carry.
    pub fn lock_name(self) -> &'static str {
        match self {
            QueueRole::Mutex => MUTEX_NAME,
            QueueRole::Read => READ_NAME,
            QueueRole::Write => WRITE_NAME,
        }
    }

    /// Whether a child of the lock's node is in this role's queue.
    fn queues(self, child: &str) -> bool {
        match self {
            QueueRole::Mutex => child.contains(MUTEX_NAME),
            QueueRole::Read | QueueRole::Write => {
                child.contains(READ_NAME) || child.contains(WRITE_NAME)
            }
        }
    }

    /// The node (its index in `sorted`) that keeps ours at `ours` from holding; `None`: ours holds.
    fn blocker(self, sorted: &[String], ours: usize) -> Option<usize> {
        match self {
            QueueRole::Mutex | QueueRole::Write => ours.checked_sub(1),
            QueueRole::Read => sorted[..ours].iter().position(|node| is_write_node(node)),
        }
    }
}

/// The lock as this client holds it.
struct Held {
    /// Our node's full path.
    node: String,
    guard: Guard,
    /// Acquisitions not yet released.
    count: u32,
}

/// How one node's life ended.
enum Outcome {
    /// Ours is the lowest node: the lock is held.
    Held(String, Guard),
    /// The wait or the retries ran out; our node, if any, was deleted (best effort).
    GaveUp,
    /// Our node is gone (its session expired): start over with a new one.
    Lost,
}

/// A ZooKeeper lock granted in arrival order: one holder at a time as a [`QueueRole::Mutex`], or
/// one side of a read/write lock.
pub struct ZkSequential<S> {
    store: S,
    config: ZkLockConfig,
    role: QueueRole,
    held: RefCell<Option<Held>>,
}

impl<S: ZkStore> ZkSequential<S> {
    /// A mutex (`zk-sequential`) for the client whose session is `store`.
    pub fn new(store: S, config: ZkLockConfig) -> Self {
        Self::with_role(store, config, QueueRole::Mutex)
    }

    /// A lock whose nodes play `role` (see [`super::rwlock`] for the read/write pair).
    pub fn with_role(store: S, config: ZkLockConfig, role: QueueRole) -> Self {
        ZkSequential {
            store,
            config,
            role,
            held: RefCell::new(None),
        }
    }

    /// The client's session.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// How many acquisitions this client holds and has not released.
    pub fn depth(&self) -> u32 {
        self.held.borrow().as_ref().map_or(0, |held| held.count)
    }

    /// Acquires with a new node per session until held, or the wait or the retries run out.
    async fn acquire_fresh<E: Env>(
        &self,
        env: &E,
        deadline: Duration,
    ) -> Result<Option<(String, Guard)>, LockError> {
        let mut failures = 0u32;
        loop {
            match self.one_node(env, deadline, &mut failures).await? {
                Outcome::Held(node, guard) => return Ok(Some((node, guard))),
                Outcome::GaveUp => return Ok(None),
                Outcome::Lost => {
                    // Nothing to clean up: the node went with its session. Starting over at
                    // once is what Curator does; only a spent wait or retry budget stops it.
                    failures += 1;
                    if env.mono_now() >= deadline
                        || self.config.retry_count.is_some_and(|n| failures > n)
                    {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// One node's life: create it, then wait until it is the lowest, it is lost, or we give up.
    async fn one_node<E: Env>(
        &self,
        env: &E,
        deadline: Duration,
        failures: &mut u32,
    ) -> Result<Outcome, LockError> {
        let guid = env.new_token();
        let Some((node, stat)) = self.create_node(env, deadline, failures, &guid).await? else {
            return Ok(Outcome::GaveUp);
        };
        let name = node.rsplit('/').next().unwrap_or(&node).to_owned();
        loop {
            // The lock is ours from the request that shows our node lowest.
            let asked = env.mono_now();
            let children = match self.store.get_children(&self.config.path, false).await {
                Ok(Ok(children)) => children,
                // The parent can only be gone if our node is.
                Ok(Err(ZkError::NoNode | ZkError::SessionExpired)) => return Ok(Outcome::Lost),
                Ok(Err(e)) => return Err(LockError::Server(e.to_string())),
                Err(_) => {
                    if !self.config.back_off(env, deadline, failures).await {
                        self.delete_node(env, &node).await.ok();
                        return Ok(Outcome::GaveUp);
                    }
                    continue;
                }
            };
            let sorted = sorted_lock_nodes(children, self.role);
            let Some(position) = sorted.iter().position(|child| *child == name) else {
                env.observe(LockEvent::Attempt {
                    acquired: false,
                    accepted: 0,
                    of: 1,
                });
                return Ok(Outcome::Lost);
            };
            let blocker = self.role.blocker(&sorted, position);
            let acquired = blocker.is_none();
            env.observe(LockEvent::Attempt {
                acquired,
                accepted: usize::from(acquired),
                of: 1,
            });
            let Some(blocker) = blocker else {
                let guard = Guard {
                    token: node.clone(),
                    acquired_at: asked,
                    valid_until: asked.saturating_add(UNBOUNDED_VALIDITY),
                    fence: u64::try_from(stat.czxid).ok(),
                };
                return Ok(Outcome::Held(node, guard));
            };
            if env.mono_now() >= deadline {
                self.delete_node(env, &node).await.ok();
                return Ok(Outcome::GaveUp);
            }
            let predecessor = format!("{}/{}", self.config.path, sorted[blocker]);
            match self.store.exists(&predecessor, true).await {
                Ok(Ok(Some(_))) => {}
                // Released between our listing and our watch: look again at once.
                Ok(Ok(None)) => continue,
                Ok(Err(ZkError::SessionExpired)) => return Ok(Outcome::Lost),
                Ok(Err(e)) => return Err(LockError::Server(e.to_string())),
                Err(_) => {
                    if !self.config.back_off(env, deadline, failures).await {
                        self.delete_node(env, &node).await.ok();
                        return Ok(Outcome::GaveUp);
                    }
                    continue;
                }
            }
            if !await_change(&self.store, env, deadline, &predecessor).await {
                self.delete_node(env, &node).await.ok();
                return Ok(Outcome::GaveUp);
            }
        }
    }

    /// Creates our node as Curator's protected mode does (`CreateBuilderImpl.pathInForeground`
    /// run by `RetryLoop.callWithRetry`, then `protectedPathInForeground`; Curator 2.x to 5.x):
    /// the first attempt creates; every later one comes after the retry policy's sleep and first
    /// looks for a node carrying our GUID, creating only when there is none. `None` when the
    /// wait or the retries ran out.
    ///
    /// The order is Curator's, and it matters: a create delayed in flight may land while we
    /// sleep, and the look after the sleep finds it. (Looking at once, before the sleep, would
    /// miss it and make a second node behind our own first one, which would then block us.) A
    /// create that lands after the look is missed by Curator too: we then wait behind a node of
    /// our own until we give up — a liveness hole of the library, which lockcheck can find
    /// under late delivery. A node found after our session changed is not ours to hold
    /// (`ProtectedMode.validateFoundNode`): it is deleted in the background and a new one is
    /// created. Giving up after a request that got no answer schedules a background
    /// find-and-delete of whatever a lost create made (`FindAndDeleteProtectedNodeInBackground`).
    async fn create_node<E: Env>(
        &self,
        env: &E,
        deadline: Duration,
        failures: &mut u32,
        guid: &str,
    ) -> Result<Option<(String, Stat)>, LockError> {
        let parent = &self.config.path;
        let mark = format!("_c_{guid}-");
        let path = format!("{parent}/{mark}{}", self.role.lock_name());
        // The session the first attempt ran in (`ProtectedMode.checkSetSessionId`).
        let mut session = None;
        let mut first = true;
        loop {
            session = session.or(self.store.session_id());
            let unanswered = match self.create_attempt(&path, guid, first, &mut session).await {
                Attempt::Made(made) => return Ok(Some(made)),
                Attempt::Failed { unanswered } => unanswered,
                Attempt::Refused(e) => return Err(e),
            };
            first = false;
            if !self.config.back_off(env, deadline, failures).await {
                if unanswered {
                    self.store.find_and_delete_in_background(parent, &mark);
                }
                return Ok(None);
            }
        }
    }

    /// One attempt of [`Self::create_node`]: after the first, look for our node, then create.
    async fn create_attempt(
        &self,
        path: &str,
        guid: &str,
        first: bool,
        session: &mut Option<SessionId>,
    ) -> Attempt {
        if !first {
            let found = match self.find_own(guid).await {
                Ok(found) => found,
                Err(_) => return Attempt::Failed { unanswered: true },
            };
            let now = self.store.session_id();
            match found {
                Some(made) if now == *session => return Attempt::Made(made),
                Some((node, _)) => self.store.delete_in_background(&node),
                None => {}
            }
            *session = now;
        }
        let mut created = self
            .store
            .create(path, Vec::new(), CreateMode::EphemeralSequential)
            .await;
        // Curator creates the parents only when the create says they are missing, which
        // spares a write per acquisition, and creates again within the same attempt.
        if matches!(created, Ok(Err(ZkError::NoNode))) {
            self.create_parents().await;
            created = self
                .store
                .create(path, Vec::new(), CreateMode::EphemeralSequential)
                .await;
        }
        match created {
            Ok(Ok(made)) => Attempt::Made(made),
            Ok(Err(ZkError::NoNode | ZkError::SessionExpired)) => {
                Attempt::Failed { unanswered: false }
            }
            Ok(Err(e)) => Attempt::Refused(LockError::Server(e.to_string())),
            // Curator's ConnectionLoss, whether or not the request went out.
            Err(_) => Attempt::Failed { unanswered: true },
        }
    }

    /// Our node (full path and stat) if a child of the lock carries our GUID.
    async fn find_own(&self, guid: &str) -> Result<Option<(String, Stat)>, StoreError> {
        let mark = format!("_c_{guid}-");
        let children = match self.store.get_children(&self.config.path, false).await? {
            Ok(children) => children,
            Err(_) => return Ok(None),
        };
        let Some(name) = children.into_iter().find(|child| child.contains(&mark)) else {
            return Ok(None);
        };
        let node = format!("{}/{name}", self.config.path);
        Ok(match self.store.exists(&node, false).await? {
            Ok(Some(stat)) => Some((node, stat)),
            _ => None,
        })
    }

    /// Creates the lock's path and its ancestors as persistent nodes; whoever made one first
    /// wins, and a failure shows in the create that follows.
    async fn create_parents(&self) {
        let path = &self.config.path;
        create_ancestors(&self.store, path).await;
        let _ = self
            .store
            .create(path, Vec::new(), CreateMode::Persistent)
            .await;
    }

    /// Deletes our node, retrying requests without a reply; `Ok(true)` when it was still there
    /// (we held it until now), `Ok(false)` when it was gone with its session. When every
    /// attempt went unanswered the session goes on trying in the background (Curator deletes
    /// its lock nodes with `guaranteed()`), so a lost release does not leave the node behind for
    /// as long as this client lives.
    async fn delete_node<E: Env>(&self, env: &E, node: &str) -> Result<bool, LockError> {
        let attempts = self.config.retry_count.unwrap_or(CLEANUP_ATTEMPTS).max(1);
        let mut tried = 0u32;
        let mut unsure = false;
        loop {
            match self.store.delete(node, -1).await {
                Ok(Ok(())) => return Ok(true),
                // After a lost reply, our own delete is the likely reason.
                Ok(Err(ZkError::NoNode)) => return Ok(unsure),
                Ok(Err(ZkError::SessionExpired)) => return Ok(false),
                Ok(Err(e)) => return Err(LockError::Server(e.to_string())),
                Err(e) => {
                    unsure |= e.maybe_applied();
                    tried += 1;
                    if tried >= attempts {
                        self.store.delete_in_background(node);
                        return Err(e.into());
                    }
                    let delay = self.config.retry_delay;
                    env.sleep(env.random_between(delay / 2, delay)).await;
                }
            }
        }
    }
}

/// How one attempt to create our node went.
enum Attempt {
    /// Our node: made now, or found from an earlier attempt.
    Made((String, Stat)),
    /// Not made; `unanswered` when a request got no answer (a create may have been applied).
    Failed {
        /// Whether a request got no answer.
        unanswered: bool,
    },
    /// Refused by the server for a reason retrying cannot mend.
    Refused(LockError),
}

/// The nodes of `role`'s queue among `children`, by sequence number (the last
/// [`SEQUENCE_DIGITS`] characters, zero-padded by the server, so text order is number order).
fn sorted_lock_nodes(children: Vec<String>, role: QueueRole) -> Vec<String> {
    let sequence = |child: &String| {
        let at = child.len().saturating_sub(SEQUENCE_DIGITS);
        child.get(at..).unwrap_or(child).to_owned()
    };
    let mut nodes: Vec<String> = children
        .into_iter()
        .filter(|child| role.queues(child))
        .collect();
    nodes.sort_by_cached_key(sequence);
    nodes
}

impl<S: ZkStore> Lock for ZkSequential<S> {
    /// As Curator's `acquire(time, unit)`: a first turn always runs, so a zero wait still takes
    /// a free lock. Acquiring again while held only counts (the same guard is returned).
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        if let Some(held) = self.held.borrow_mut().as_mut() {
            held.count += 1;
            return Ok(Some(held.guard.clone()));
        }
        let deadline = env.mono_now().saturating_add(wait);
        let Some((node, guard)) = self.acquire_fresh(env, deadline).await? else {
            return Ok(None);
        };
        *self.held.borrow_mut() = Some(Held {
            node,
            guard: guard.clone(),
            count: 1,
        });
        Ok(Some(guard))
    }

    /// Releases one level; the node is deleted when the last level goes. True when the client
    /// still held the lock (its node was still there, or a level remains).
    async fn release<E: Env>(&self, env: &E, guard: &Guard) -> Result<bool, LockError> {
        let node = {
            let mut held = self.held.borrow_mut();
            match held.as_mut() {
                Some(h) if h.guard.token == guard.token => {
                    h.count -= 1;
                    if h.count > 0 {
                        return Ok(true);
                    }
                    h.node.clone()
                }
                _ => return Ok(false),
            }
        };
        *self.held.borrow_mut() = None;
        self.delete_node(env, &node).await
    }

    /// The store's pings keep the session, and so the lock, alive; this follows the session as
    /// Curator's `ConnectionStateListener` advice says: while disconnected the lock is SUSPENDED
    /// (the guard's validity is ended until a reconnection finds our node still there), or lost
    /// at once with `suspended_is_lost`; once the session expired it is LOST for good.
    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        let node = guard.borrow().token.clone();
        session_watch(&self.store, &self.config, env, guard, &node).await
    }
}

/// `zk-sequential` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "zk-sequential",
    summary: "Curator's InterProcessMutex: ephemeral sequential nodes, each waiter watching the one before it.",
    backend: Backend::ZooKeeper,
    servers: Servers::One,
    replicas: false,
    lease: Lease::Session,
    fencing: Fencing::Token,
    renews: false,
    reentrant: false,
    readers: false,
    order: Order::Sequence,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for ZkSequential<S::Zk> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        ZkSequential::new(stores.zookeeper(), ZkLockConfig::of(settings))
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
