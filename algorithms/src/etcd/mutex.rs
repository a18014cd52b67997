//! `etcd-mutex`: etcd's `concurrency.Mutex`, as the Go client (`client/v3/concurrency`)
//! implements it.
//!
//! Every client has a session: a lease, kept alive by its store every third of the TTL. To lock,
//! it puts the key `<prefix>/<lease id in hex>` attached to that lease, in a transaction that
//! puts only if the key is absent (else reads it: the session already has its key) and reads the
//! key created first under the prefix. The key with the lowest create revision holds the lock. A
//! waiter waits for the deletion of the last key created before its own (a watch from the
//! revision it read at), and again until no earlier key is left; then (from the 3.5 client on) it
//! checks that its own key still exists (its session may have expired meanwhile). Unlocking
//! deletes the key. So the lock passes in create-revision order, and a release wakes only the
//! next waiter.
//!
//! Two versions of the client, as [`VARIANTS`]: the 3.4 client's `Lock` returns as soon as its
//! wait is over, without that check, so a waiter whose lease ran out while it waited (paused,
//! cut off) takes a lock its key no longer holds, beside the client that took it meanwhile.
//!
//! The lock lives as long as the session's lease: a holder whose keep-alives stop being answered
//! (paused, cut off) loses it when the server expires the lease, and learns it only through the
//! session's `Done()` — afterwards. Fencing token: the key's create revision, which grows with
//! every key the server creates.

use super::store::{Compare, EtcdStore, Op, OpResult, Range, Revision, Txn};
use crate::describe::{
    Backend, Description, Fencing, Lease, LibraryVariant, Order, Registered, Servers, Settings,
};
use crate::env::Env;
use crate::error::LockError;
use crate::guard::{Guard, UNBOUNDED_VALIDITY};
use crate::lock::Lock;
use crate::retry::{acquire_with_retries, Retry, Tried};
use crate::stores::Stores;
use futures_util::future::{select, Either};
use std::cell::RefCell;
use std::pin::pin;
use std::time::Duration;

/// The Go client's `ErrSessionExpired`.
const SESSION_EXPIRED: &str = "mutex: session is expired";

/// The versions of the Go client whose `Mutex.Lock` differs (`params.variant`), the current one
/// first.
pub const VARIANTS: &[LibraryVariant] = &[
    LibraryVariant {
        name: "etcd-3.5",
        versions: "the etcd Go client 3.5 and later (client/v3)",
        follows: "client/v3/concurrency/mutex.go (Lock, tryAcquire, Unlock), key.go (waitDeletes)",
        about: "after waiting for the keys created before its own, Lock reads its own key and \
                fails with ErrSessionExpired when it is gone",
        formerly: &[],
    },
    LibraryVariant {
        name: "etcd-3.4",
        versions: "the etcd Go client 3.4 (clientv3; read in Debian's 3.4.23 source)",
        follows: "clientv3/concurrency/mutex.go (Lock, Unlock), key.go (waitDeletes)",
        about: "Lock returns once the keys created before its own are gone, without checking \
                that its own key (its session's lease) still exists",
        formerly: &[],
    },
];

/// etcd's `concurrency.Mutex` over one session.
pub struct EtcdMutex<S> {
    store: S,
    /// `<prefix>/`: the keys of the lock's waiters live under it.
    prefix: String,
    /// Whether the guard carries the key's create revision as a fencing token.
    fencing: bool,
    /// How a failed `Lock` is tried again within the caller's wait.
    retry: Retry,
    /// Whether `Lock` checks that its own key still exists after its wait (the 3.5 client;
    /// [`VARIANTS`]).
    checks_own_key: bool,
    /// The key of our acquisition, while held.
    held: RefCell<Option<String>>,
}

impl<S: EtcdStore> EtcdMutex<S> {
    /// The mutex named `name` (its prefix is `/<name>/`), as the client of `VARIANTS[variant]`
    /// has it.
    pub fn new(store: S, name: &str, fencing: bool, retry: Retry, variant: usize) -> Self {
        EtcdMutex {
            store,
            prefix: format!("/{name}/"),
            fencing,
            retry,
            checks_own_key: variant == 0,
            held: RefCell::new(None),
        }
    }

    /// One `Lock(ctx)` whose context ends at `deadline`: `Ok(None)` when it ended while we
    /// waited (our key is then deleted, as the Go client does when its wait fails).
    async fn lock<E: Env>(&self, env: &E, deadline: Duration) -> Result<Option<Guard>, LockError> {
        let acquired_at = env.mono_now();
        let (key, rev, first) = self.try_acquire().await?;
        if first {
            return Ok(Some(self.guard(key, rev, acquired_at)));
        }
        // Wait for the deletion of every key created before ours.
        let waited = self.wait_deletes(env, rev - 1, deadline).await;
        if !matches!(waited, Ok(true)) {
            let _ = self.unlock(&key).await;
            return waited.map(|_| None);
        }
        if !self.checks_own_key {
            // The 3.4 client: the wait is over, the lock is ours, whatever became of our key.
            return Ok(Some(self.guard(key, rev, acquired_at)));
        }
        // Make sure the session is not expired, and our key still exists.
        let (kvs, _) = match self.store.range(Range::key(&key)).await {
            Ok(read) => read,
            Err(e) => {
                let _ = self.unlock(&key).await;
                return Err(e.into());
            }
        };
        if kvs.is_empty() {
            return Err(LockError::Server(SESSION_EXPIRED.into()));
        }
        Ok(Some(self.guard(key, rev, acquired_at)))
    }

    /// `tryAcquire`: puts our key if it is absent, and reads the first key: our key, its create
    /// revision, and whether it is the first.
    async fn try_acquire(&self) -> Result<(String, Revision, bool), LockError> {
        let lease = self.store.session().await?;
        let key = format!("{}{lease:x}", self.prefix);
        let txn = Txn {
            compare: vec![Compare::absent(&key)],
            success: vec![
                Op::Put {
                    key: key.clone(),
                    value: String::new(),
                    lease,
                },
                Op::Range(Range::first_created(&self.prefix)),
            ],
            // Reuse the key in case this session already has it.
            failure: vec![
                Op::Range(Range::key(&key)),
                Op::Range(Range::first_created(&self.prefix)),
            ],
        };
        let result = self
            .store
            .txn(txn)
            .await?
            .map_err(|e| LockError::Server(e.to_string()))?;
        let unexpected = || LockError::UnexpectedReply(format!("{result:?}"));
        let rev = if result.succeeded {
            result.revision
        } else {
            match result.results.first() {
                Some(OpResult::Range(kvs)) if !kvs.is_empty() => kvs[0].create_revision,
                _ => return Err(unexpected()),
            }
        };
        let Some(OpResult::Range(owner)) = result.results.get(1) else {
            return Err(unexpected());
        };
        let first = owner.first().is_none_or(|kv| kv.create_revision == rev);
        Ok((key, rev, first))
    }

    /// `waitDeletes`: waits until no key under the prefix was created at or before `max`;
    /// `false` when `deadline` came first.
    async fn wait_deletes<E: Env>(
        &self,
        env: &E,
        max: Revision,
        deadline: Duration,
    ) -> Result<bool, LockError> {
        loop {
            let range = Range::last_created_up_to(&self.prefix, max);
            let (kvs, revision) = self.store.range(range).await?;
            let Some(last) = kvs.first() else {
                return Ok(true);
            };
            let left = deadline.saturating_sub(env.mono_now());
            if left.is_zero() {
                return Ok(false);
            }
            let deleted = pin!(self.store.wait_deleted(&last.key, revision));
            if let Either::Right(_) = select(deleted, pin!(env.sleep(left))).await {
                return Ok(false);
            }
        }
    }

    /// Deletes our key, as `Unlock` does: `Ok(true)` when it was still there.
    async fn unlock(&self, key: &str) -> Result<bool, LockError> {
        Ok(self.store.delete(key).await? == 1)
    }

    fn guard(&self, key: String, rev: Revision, acquired_at: Duration) -> Guard {
        *self.held.borrow_mut() = Some(key.clone());
        Guard {
            token: key,
            acquired_at,
            valid_until: acquired_at.saturating_add(UNBOUNDED_VALIDITY),
            fence: self.fencing.then_some(rev as u64),
        }
    }
}

impl<S: EtcdStore> Lock for EtcdMutex<S> {
    /// `Lock(ctx)` with a context that ends after `wait`, called again as an application
    /// does when it fails (no answer, the session expired while waiting, its lease gone): with
    /// the lock's retry delay, backing off while nothing answers.
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        let deadline = env.mono_now().saturating_add(wait);
        acquire_with_retries(env, wait, self.retry, || async {
            match self.lock(env, deadline).await {
                Ok(Some(guard)) => Ok(Tried::Acquired(guard)),
                Ok(None) | Err(LockError::Server(_)) => Ok(Tried::Refused),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// `Unlock`: deletes our key. True when it was still there (the session had not expired).
    async fn release<E: Env>(&self, _env: &E, guard: &Guard) -> Result<bool, LockError> {
        let key = self.held.borrow_mut().take();
        match key {
            Some(key) if key == guard.token => self.unlock(&key).await,
            _ => Ok(false),
        }
    }

    /// Follows the session as a careful Go client watches `Session.Done()`: once it is done,
    /// the lock is taken for lost (its key may be gone, or will be when the lease runs out).
    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        self.store.session_ended().await;
        guard.borrow_mut().valid_until = env.mono_now();
    }
}

/// `etcd-mutex` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "etcd-mutex",
    summary: "etcd's concurrency.Mutex (Go client): a key per session lease under a prefix; the lowest create revision holds, each waiter watching the deletion of the key created just before its own.",
    backend: Backend::Etcd,
    servers: Servers::One,
    replicas: false,
    lease: Lease::Session,
    fencing: Fencing::Token,
    renews: false,
    reentrant: false,
    readers: false,
    order: Order::Sequence,
    scripted: false,
    variants: VARIANTS,
};

impl<S: Stores> Registered<S> for EtcdMutex<S::Etcd> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        EtcdMutex::new(
            stores.etcd(),
            &settings.key,
            settings.fencing,
            settings.retry,
            settings.variant_index(VARIANTS),
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
