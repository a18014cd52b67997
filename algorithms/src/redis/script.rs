//! `redis-script`: the user's own Redis lock, written as Lua scripts (issue 19, part 1).
//!
//! The acquire, release and optional extend are the user's scripts ([`UserScript`], embedded in
//! the scenario), sent with `EVAL` exactly as the built-in locks send theirs, so the simulated
//! Redis runs them in the same embedded Lua and sandbox, and a real Redis runs them unchanged.
//! Around the scripts the client behaves as `single-redis`'s does: it measures its validity
//! from when it sent the acquire, minus the drift allowance, retries with jitter, and its
//! watchdog (with `params.watchdog` and an extend script) renews every TTL/3. One difference:
//! an acquire that got no answer is not undone (the user's release might not be safe to send
//! blind); the key stays until its TTL, as with `redis-plain-del`.

use super::command::{Command, Reply, Script};
use super::script_spec::{acquire_name, Expect, Input, ScriptStep, UserScript};
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

/// `redis-script` in lockcheck's registry.
pub const DESCRIPTION: Description = Description {
    name: "redis-script",
    summary: "Your own Redis lock: acquire, release and extend are the Lua scripts of the file \
              given with --script (params.redis.script).",
    backend: Backend::Redis,
    servers: Servers::One,
    replicas: true,
    lease: Lease::Ttl { optional: false },
    fencing: Fencing::Token,
    renews: true,
    reentrant: false,
    readers: false,
    order: Order::None,
    scripted: true,
    variants: &[],
};

/// One of the user's scripts, ready to send.
struct Step {
    /// `acquire`, `acquire[2]`, `release`, `extend`: what errors call it.
    name: String,
    script: Script,
    keys: Vec<Input>,
    argv: Vec<Input>,
    success: Expect,
}

impl Step {
    fn new(name: String, step: &ScriptStep) -> Step {
        Step {
            name,
            script: Script::user(&step.script),
            keys: step.keys.clone(),
            argv: step.argv.clone(),
            success: step.success,
        }
    }
}

/// A lock whose steps are the user's scripts, on one Redis server.
pub struct RedisScript<S> {
    store: S,
    key: String,
    ttl: Duration,
    drift_factor: f64,
    retry: Retry,
    fencing: bool,
    acquire: Vec<Step>,
    release: Step,
    extend: Option<Step>,
}

impl<S: Stores> Registered<S> for RedisScript<S::Redis> {
    type Side = Self;

    fn build(stores: &S, settings: &Settings, _env: &impl Env) -> Self {
        let user = settings
            .script
            .as_ref()
            .expect("a redis-script scenario carries its scripts (checked by its validation)");
        RedisScript::new(stores.redis_primary(), settings, user)
    }

    fn side(&self, _shared: bool) -> &Self {
        self
    }
}

impl<S: RedisStore> RedisScript<S> {
    /// The lock of `user`'s scripts over `store`, with the TTL, retries and fencing of
    /// `settings`.
    pub fn new(store: S, settings: &Settings, user: &UserScript) -> Self {
        let count = user.acquire.len();
        RedisScript {
            store,
            key: settings.key.clone(),
            ttl: settings.ttl_or_default(),
            drift_factor: settings.drift_factor,
            retry: settings.retry,
            fencing: settings.fencing,
            acquire: (user.acquire.iter().enumerate())
                .map(|(i, s)| Step::new(acquire_name(i, count), s))
                .collect(),
            release: Step::new("release".into(), &user.release),
            extend: user.extend.as_ref().map(|s| Step::new("extend".into(), s)),
        }
    }

    /// What `input` is for this call.
    fn value<E: Env>(&self, env: &E, input: Input, token: &str) -> String {
        match input {
            Input::Key => self.key.clone(),
            Input::FenceKey => super::fence_key(&self.key),
            Input::Token => token.to_string(),
            Input::TtlMs => self.ttl.as_millis().to_string(),
            Input::NowMs => env.wall_now().as_millis().to_string(),
        }
    }

    /// Runs `step` with `token`: `Ok(Some(reply))` when the reply reads as success,
    /// `Ok(None)` when it does not, `Err` when the script failed or the server did not answer.
    async fn run<E: Env>(
        &self,
        env: &E,
        step: &Step,
        token: &str,
    ) -> Result<Option<Reply>, LockError> {
        let values = |inputs: &[Input]| -> Vec<String> {
            inputs.iter().map(|&i| self.value(env, i, token)).collect()
        };
        let reply = self
            .store
            .call(Command::Eval {
                script: step.script.clone(),
                keys: values(&step.keys),
                args: values(&step.argv),
            })
            .await?;
        if let Reply::Error(message) = reply {
            return Err(LockError::Script {
                script: step.name.clone(),
                message,
            });
        }
        Ok(succeeded(step.success, &reply).then_some(reply))
    }

    /// The acquire steps in order: the last one's reply when each read as acquired, `None` at
    /// the first that did not.
    async fn acquire_steps<E: Env>(
        &self,
        env: &E,
        token: &str,
    ) -> Result<Option<Reply>, LockError> {
        let mut last = None;
        for step in &self.acquire {
            match self.run(env, step, token).await? {
                Some(reply) => last = Some(reply),
                None => return Ok(None),
            }
        }
        Ok(last)
    }

    /// One attempt: the acquire steps, then the validity left.
    async fn attempt<E: Env>(&self, env: &E) -> Result<Tried, LockError> {
        let token = env.new_token();
        let started = env.mono_now();
        let steps = self.acquire_steps(env, &token).await;
        let acquired = matches!(steps, Ok(Some(_)));
        env.observe(LockEvent::Attempt {
            acquired,
            accepted: usize::from(acquired),
            of: 1,
        });
        let last = match steps {
            Ok(Some(reply)) => reply,
            Ok(None) => return Ok(Tried::Refused),
            // Not undone (see the module's notes): the key stays until its TTL, if any.
            Err(LockError::Store(e)) if e.maybe_applied() => return Ok(Tried::Unanswered),
            Err(e) => return Err(e),
        };
        let fence = match (self.fencing, &last) {
            (false, _) => None,
            (true, Reply::Int(n)) if *n > 0 => Some(*n as u64),
            (true, other) => {
                return Err(LockError::Script {
                    script: self.acquire[self.acquire.len() - 1].name.clone(),
                    message: format!(
                        "with fencing it must reply a positive integer, got {other:?}"
                    ),
                })
            }
        };
        let drift = self.ttl.mul_f64(self.drift_factor) + Duration::from_millis(2);
        let valid_until = started + self.ttl.saturating_sub(drift);
        if env.mono_now() >= valid_until {
            // Too late to use: given back with the user's release.
            let _ = self.run(env, &self.release, &token).await;
            return Ok(Tried::Refused);
        }
        Ok(Tried::Acquired(Guard {
            token,
            acquired_at: started,
            valid_until,
            fence,
        }))
    }

    /// Runs the extend script for `guard` and moves its validity on success. `Ok(false)`: the
    /// script said the lock was not extended.
    async fn extend<E: Env>(
        &self,
        env: &E,
        step: &Step,
        guard: &mut Guard,
    ) -> Result<bool, LockError> {
        let started = env.mono_now();
        let extended = self.run(env, step, &guard.token).await?.is_some();
        if extended {
            let drift = self.ttl.mul_f64(self.drift_factor) + Duration::from_millis(2);
            guard.valid_until = started + self.ttl.saturating_sub(drift);
        }
        Ok(extended)
    }
}

/// Whether `reply` (not an error) reads as success under `rule`.
fn succeeded(rule: Expect, reply: &Reply) -> bool {
    match rule {
        Expect::Ok => matches!(reply, Reply::Status(s) if s == "OK"),
        Expect::One => matches!(reply, Reply::Int(1)),
        Expect::Positive => matches!(reply, Reply::Int(n) if *n > 0),
        Expect::NotNil => !reply.is_nil(),
    }
}

impl<S: RedisStore> Lock for RedisScript<S> {
    async fn acquire<E: Env>(&self, env: &E, wait: Duration) -> Result<Option<Guard>, LockError> {
        acquire_with_retries(env, wait, self.retry, || self.attempt(env)).await
    }

    async fn release<E: Env>(&self, env: &E, guard: &Guard) -> Result<bool, LockError> {
        Ok(self.run(env, &self.release, &guard.token).await?.is_some())
    }

    /// The watchdog, as `single-redis`'s: the extend script every TTL/3 until it says the lock
    /// was not extended. Without an extend script there is nothing to run (validation refuses
    /// `params.watchdog` then).
    async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>) {
        let Some(step) = &self.extend else { return };
        loop {
            env.sleep(self.ttl / 3).await;
            let mut renewed = guard.borrow().clone();
            match self.extend(env, step, &mut renewed).await {
                Ok(true) => *guard.borrow_mut() = renewed,
                Ok(false) => return,
                // No answer: try again at the next tick while validity may remain. A script
                // error ends the watchdog, as a lost lock does: the history shows the failure.
                Err(LockError::Store(_)) => {}
                Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_reads_its_replies() {
        let ok = Reply::Status("OK".into());
        assert!(succeeded(Expect::Ok, &ok));
        assert!(!succeeded(Expect::Ok, &Reply::Nil));
        assert!(succeeded(Expect::One, &Reply::Int(1)));
        assert!(!succeeded(Expect::One, &Reply::Int(0)));
        assert!(succeeded(Expect::Positive, &Reply::Int(7)));
        assert!(!succeeded(Expect::Positive, &Reply::Int(0)));
        assert!(succeeded(Expect::NotNil, &Reply::Bulk("x".into())));
        assert!(succeeded(Expect::NotNil, &Reply::Int(0)));
        assert!(!succeeded(Expect::NotNil, &Reply::Nil));
    }
}
