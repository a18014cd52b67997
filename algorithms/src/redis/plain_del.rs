//! `redis-plain-del`: the lock of countless blog posts. `SET key token NX PX ttl` to acquire, and
//! a plain `DEL key` to release.
//!
//! Seeds 000 and 001 warn against exactly this: the release does not look at whose lock it
//! deletes. A holder whose lease ran out while it worked (a GC pause, a slow request) and whose
//! lock another client took meanwhile deletes that client's lock, and a third client walks in
//! beside it. `single-redis` is the same lock released by a compare-and-delete; the matrix shows
//! the two side by side.

use super::command::{Command, Reply, SetOptions};
use super::store::RedisStore;
use crate::describe::{Backend, Description, Fencing, Lease, Order, Registered, Servers, Settings};
use crate::env::{Env, LockEvent};
use crate::error::LockError;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::retry::{acquire_with_retries, Retry, Tried};
use crate::stores::Stores;
use std::cell::RefCell;
use std::time::Duration;

/// `redis-plain-del` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "redis-plain-del",
    summary: "One Redis server: SET NX PX, released by a plain DEL of whatever holds the key \
              (the blog-post lock seeds 000 and 001 warn against).",
    backend: Backend::Redis,
    servers: Servers::One,
    replicas: false,
    lease: Lease::Ttl { optional: false },
    fencing: Fencing::Unavailable("it draws no token (single-redis does, with params.fencing)"),
    renews: false,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: &[],
};

/// A lock on one Redis server, released by a plain `DEL`.
pub struct RedisPlainDel<S> {
    store: S,
    key: String,
    ttl: Duration,
    drift_factor: f64,
    retry: Retry,
}

impl<S: Stores> Registered<S> for RedisPlainDel<S::Redis> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        RedisPlainDel {
            store: stores.redis_primary(),
            key: settings.key.clone(),
            ttl: settings.ttl_or_default(),
            drift_factor: settings.drift_factor,
            retry: settings.retry,
        }
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}

impl<S: RedisStore> RedisPlainDel<S> {
    /// One `SET NX PX`. A request without a reply is not undone: the naive client does not know
    /// it may hold the lock, and the key stays until its TTL.
    async fn attempt<E: Env>(&self, env: &E) -> Result<Tried, LockError> {
        let token = env.new_token();
        let started = env.mono_now();
        let reply = self
            .store
            .call(Command::Set {
                key: self.key.clone(),
                value: token.clone(),
                options: SetOptions {
                    nx: true,
                    px: Some(self.ttl.as_millis() as u64),
                    ..SetOptions::default()
                },
            })
            .await;
        let acquired = matches!(&reply, Ok(Reply::Status(s)) if s == "OK");
        env.observe(LockEvent::Attempt {
            acquired,
            accepted: usize::from(acquired),
            of: 1,
        });
        match reply? {
            Reply::Status(s) if s == "OK" => {}
            Reply::Nil => return Ok(Tried::Refused),
            Reply::Error(e) => return Err(LockError::Server(e)),
            other => return Err(LockError::UnexpectedReply(format!("{other:?}"))),
        }
        let drift = self.ttl.mul_f64(self.drift_factor) + Duration::from_millis(2);
        let valid_until = started + self.ttl.saturating_sub(drift);
        if env.mono_now() >= valid_until {
            // Too late to use: given back, the naive way.
            let _ = self.del().await;
            return Ok(Tried::Refused);
        }
        Ok(Tried::Acquired(Guard {
            token,
            acquired_at: started,
            valid_until,
            fence: None,
        }))
    }

    /// Deletes the key, whoever holds it: the flaw.
    async fn del(&self) -> Result<bool, LockError> {
        match self
            .store
            .call(Command::Del {
                keys: vec![self.key.clone()],
            })
            .await?
        {
            Reply::Int(n) => Ok(n == 1),
            Reply::Error(e) => Err(LockError::Server(e)),
            other => Err(LockError::UnexpectedReply(format!("{other:?}"))),
        }
    }
}

impl<S: RedisStore> Lock for RedisPlainDel<S> {
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        acquire_with_retries(env, wait, self.retry, || self.attempt(env)).await
    }

    async fn release<E: Env>(&self, _env: &E, _guard: &Guard) -> Result<bool, LockError> {
        self.del().await
    }

    /// No watchdog (`renews: false`): nothing keeps the lease alive.
    async fn keep_alive<E: Env>(&self, _env: &E, _guard: &RefCell<Guard>) {}
}
