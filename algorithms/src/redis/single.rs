//! `single-redis`: one Redis server, `SET key token NX PX ttl`, released by a Lua
//! compare-and-delete (seeds 001 and 002; the Redis distributed-locks documentation).
//!
//! The lock is a lease: it ends when the server's clock says the TTL has passed, whatever the
//! holder is doing. The client therefore computes how long it may trust the lock from its own
//! monotonic clock, measured from the moment it SENT the request, minus an allowance for clock
//! drift. Nothing in the protocol stops a holder that keeps working past that point (a GC pause,
//! a slow disk): that is why the optional fencing token exists.

use super::command::{Command, Reply, Script, SetOptions};
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

/// Deletes the key only if it still holds the caller's token. A plain `DEL` would delete the
/// lock of whoever acquired it after the caller's lease expired.
pub const RELEASE_LUA: &str = r#"if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
else
  return 0
end"#;

/// Extends the key's TTL only if it still holds the caller's token.
pub const EXTEND_LUA: &str = r#"if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
else
  return 0
end"#;

/// Acquires and draws a fencing token in one atomic step: the token comes from a counter that
/// only ever grows (as long as the server keeps it), so a resource can reject a stale holder.
pub const ACQUIRE_FENCED_LUA: &str = r#"if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return redis.call("INCR", KEYS[2])
else
  return false
end"#;

/// Settings of a [`SingleRedis`] lock.
#[derive(Clone, Debug, PartialEq)]
pub struct SingleRedisConfig {
    /// The lock's key.
    pub key: String,
    /// Lease length sent as `PX`.
    pub ttl: Duration,
    /// Clock drift allowance as a fraction of the TTL (Redlock's `CLOCK_DRIFT_FACTOR`); the client
    /// subtracts `ttl × drift_factor + 2 ms` from its validity.
    pub drift_factor: f64,
    /// Base delay between attempts of a blocking acquire; each wait is random in
    /// `[retry_delay / 2, retry_delay]` so contending clients do not retry in lock step.
    pub retry_delay: Duration,
    /// Attempts per blocking acquire; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// The longest delay that attempts without an answer back off to ([`crate::retry`]);
    /// at least `retry_delay`.
    pub max_retry_delay: Duration,
    /// Draw a fencing token from a counter on acquisition.
    pub fencing: bool,
    /// After acquiring, `WAIT` for this many replicas within this long (Redisson's answer to
    /// asynchronous replication); fewer, and the lock is given back. It narrows the window in
    /// which a failover loses the lock; it does not close it.
    pub wait_replicas: Option<(u32, Duration)>,
}

impl SingleRedisConfig {
    /// The key of the fencing counter.
    pub fn fence_key(&self) -> String {
        super::fence_key(&self.key)
    }

    /// The validity deducted for clock drift between client and server.
    pub fn drift_allowance(&self) -> Duration {
        self.ttl.mul_f64(self.drift_factor) + Duration::from_millis(2)
    }
}

/// The result of one acquisition attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is ours.
    Acquired(Guard),
    /// Someone else holds it.
    Busy,
    /// The request timed out: it may have been applied. The client has tried to undo it with a
    /// compare-and-delete of the token it sent, and does not consider itself the holder.
    Unknown,
    /// The reply came too late to leave any validity; the client released the lock.
    Expired,
    /// Too few replicas acknowledged the lock in time; the client released it.
    NotReplicated,
}

/// A lock on one Redis server.
pub struct SingleRedis<S> {
    store: S,
    config: SingleRedisConfig,
    release: Script,
    extend: Script,
    acquire_fenced: Script,
}

impl<S: RedisStore> SingleRedis<S> {
    /// A lock on the server behind `store`.
    pub fn new(store: S, config: SingleRedisConfig) -> Self {
        SingleRedis {
            store,
            config,
            release: Script::new(RELEASE_LUA),
            extend: Script::new(EXTEND_LUA),
            acquire_fenced: Script::new(ACQUIRE_FENCED_LUA),
        }
    }

    /// One attempt, never waiting for the lock.
    pub async fn try_acquire<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let attempt = self.attempt(env).await;
        let acquired = matches!(attempt, Ok(Attempt::Acquired(_)));
        env.observe(LockEvent::Attempt {
            acquired,
            accepted: usize::from(
                acquired || matches!(attempt, Ok(Attempt::Expired | Attempt::NotReplicated)),
            ),
            of: 1,
        });
        attempt
    }

    async fn attempt<E: Env>(&self, env: &E) -> Result<Attempt, LockError> {
        let token = env.new_token();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let started = env.mono_now();
        let command = if self.config.fencing {
            Command::Eval {
                script: self.acquire_fenced.clone(),
                keys: vec![self.config.key.clone(), self.config.fence_key()],
                args: vec![token.clone(), ttl_ms.to_string()],
            }
        } else {
            Command::Set {
                key: self.config.key.clone(),
                value: token.clone(),
                options: SetOptions {
                    nx: true,
                    px: Some(ttl_ms),
                    ..SetOptions::default()
                },
            }
        };
        let reply = match self.store.call(command).await {
            Ok(reply) => reply,
            Err(e) if e.maybe_applied() => {
                // A real server applies a SET whose reply was lost; undo it so the lock does not
                // stay taken by a client that does not know it holds it.
                let _ = self.release_token(&token).await;
                return Ok(Attempt::Unknown);
            }
            Err(e) => return Err(e.into()),
        };
        let fence = match (&reply, self.config.fencing) {
            (Reply::Nil, _) => return Ok(Attempt::Busy),
            (Reply::Status(s), false) if s == "OK" => None,
            (Reply::Int(n), true) if *n > 0 => Some(*n as u64),
            (Reply::Error(e), _) => return Err(LockError::Server(e.clone())),
            (other, _) => return Err(LockError::UnexpectedReply(format!("{other:?}"))),
        };
        if let Some((replicas, timeout)) = self.config.wait_replicas {
            let acked = self
                .store
                .call(Command::Wait {
                    replicas,
                    timeout_ms: timeout.as_millis() as u64,
                })
                .await;
            if !matches!(acked, Ok(Reply::Int(n)) if n >= i64::from(replicas)) {
                let _ = self.release_token(&token).await;
                return Ok(Attempt::NotReplicated);
            }
        }
        let valid_until = started
            + self
                .config
                .ttl
                .saturating_sub(self.config.drift_allowance());
        if env.mono_now() >= valid_until {
            let _ = self.release_token(&token).await;
            return Ok(Attempt::Expired);
        }
        Ok(Attempt::Acquired(Guard {
            token,
            acquired_at: started,
            valid_until,
            fence,
        }))
    }

    /// Tries until the lock is acquired, `wait` (client monotonic time) has passed, or
    /// `retry_count` attempts failed; `Ok(None)` in the last two cases.
    pub async fn acquire<E: Env>(
        &self,
        env: &E,
        wait: Duration,
    ) -> Result<Option<Guard>, LockError> {
        let retry = Retry {
            delay: self.config.retry_delay,
            count: self.config.retry_count,
            max_delay: self.config.max_retry_delay,
        };
        acquire_with_retries(env, wait, retry, || async {
            Ok(match self.try_acquire(env).await? {
                Attempt::Acquired(guard) => Tried::Acquired(guard),
                Attempt::Unknown => Tried::Unanswered,
                Attempt::Busy | Attempt::Expired | Attempt::NotReplicated => Tried::Refused,
            })
        })
        .await
    }

    /// Releases the lock if it still holds `guard`'s token. `Ok(false)`: it did not (the lease had
    /// expired, and maybe someone else holds the lock now, which this call leaves alone).
    pub async fn release(&self, guard: &Guard) -> Result<bool, LockError> {
        self.release_token(&guard.token).await
    }

    async fn release_token(&self, token: &str) -> Result<bool, LockError> {
        let reply = self
            .store
            .call(Command::Eval {
                script: self.release.clone(),
                keys: vec![self.config.key.clone()],
                args: vec![token.to_string()],
            })
            .await?;
        int_flag(reply)
    }

    /// Extends the lease to a full TTL from now if the lock still holds `guard`'s token, and
    /// moves `guard.valid_until` accordingly. `Ok(false)`: the lock was lost.
    pub async fn extend<E: Env>(&self, env: &E, guard: &mut Guard) -> Result<bool, LockError> {
        let started = env.mono_now();
        let reply = self
            .store
            .call(Command::Eval {
                script: self.extend.clone(),
                keys: vec![self.config.key.clone()],
                args: vec![
                    guard.token.clone(),
                    (self.config.ttl.as_millis() as u64).to_string(),
                ],
            })
            .await?;
        let extended = int_flag(reply)?;
        if extended {
            guard.valid_until = started
                + self
                    .config
                    .ttl
                    .saturating_sub(self.config.drift_allowance());
        }
        Ok(extended)
    }

    /// The watchdog (Redisson's, seed 003): renews the lease every third of the TTL for as long as
    /// this future is polled, i.e. for as long as the holder's process runs. Returns when the lock
    /// is lost. A paused process pauses its watchdog too, which is exactly how a GC pause defeats
    /// it; the guard is shared with the holder so its validity stays current.
    pub async fn watchdog<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        loop {
            env.sleep(self.config.ttl / 3).await;
            let mut renewed = guard.borrow().clone();
            match self.extend(env, &mut renewed).await {
                Ok(true) => *guard.borrow_mut() = renewed,
                Ok(false) => return,
                // Unknown outcome: try again at the next tick while validity may remain.
                Err(_) => {}
            }
        }
    }
}

fn int_flag(reply: Reply) -> Result<bool, LockError> {
    match reply {
        Reply::Int(n) => Ok(n == 1),
        Reply::Error(e) => Err(LockError::Server(e)),
        other => Err(LockError::UnexpectedReply(format!("{other:?}"))),
    }
}

impl<S: RedisStore> Lock for SingleRedis<S> {
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        SingleRedis::acquire(self, env, wait).await
    }

    async fn release<E: Env>(&self, _env: &E, guard: &Guard) -> Result<bool, LockError> {
        SingleRedis::release(self, guard).await
    }

    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        self.watchdog(env, guard).await
    }
}

/// `single-redis` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "single-redis",
    summary: "One Redis server: SET NX PX, released by a Lua compare-and-delete (seeds 001, 002; the Redis docs).",
    backend: Backend::Redis,
    servers: Servers::One,
    replicas: true,
    lease: Lease::Ttl { optional: false },
    fencing: Fencing::Token,
    renews: true,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: false,
    variants: &[],
};

impl<S: Stores> Registered<S> for SingleRedis<S::Redis> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        SingleRedis::new(
            stores.redis_primary(),
            SingleRedisConfig {
                key: settings.key.clone(),
                ttl: settings.ttl_or_default(),
                drift_factor: settings.drift_factor,
                retry_delay: settings.retry.delay,
                retry_count: settings.retry.count,
                max_retry_delay: settings.retry.max_delay,
                fencing: settings.fencing,
                wait_replicas: settings.wait_replicas,
            },
        )
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}
