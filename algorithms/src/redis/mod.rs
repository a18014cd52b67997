//! The Redis family: commands, the store trait, and the locks built on them.

pub mod command;
pub mod fair;
mod owner_hash;
pub mod plain_del;
pub mod redisson_wait;
pub mod redlock;
pub mod reentrant;
pub mod resend;
pub mod script;
pub mod script_spec;
pub mod single;
pub mod store;

pub use command::{Command, ExpireCommand, ExpireOptions, Reply, Script, SetOptions};
pub use store::RedisStore;

/// The key of the fencing counter of the lock named `key`.
pub fn fence_key(key: &str) -> String {
    format!("{key}:fence")
}

/// The key of the fair lock's wait queue (a list of owners), as Redisson names it.
pub fn queue_key(key: &str) -> String {
    format!("redisson_lock_queue:{{{key}}}")
}

/// The key of the fair lock's waiters' deadlines (a sorted set of owners), as Redisson names it.
pub fn timeout_key(key: &str) -> String {
    format!("redisson_lock_timeout:{{{key}}}")
}

/// The prefix of the unlock latches of Redisson's reentrant lock named `key` (3.24 and later):
/// each unlock writes `PREFIX` + its request id, kept for the unlock's re-sends and deleted once
/// it is answered. They are not in [`keys_of`] (a name per unlock cannot be listed); one whose
/// `DEL` was lost expires by itself within `(timeout + retryInterval) × retryAttempts` (13.5 s
/// with Redisson's defaults, [`resend::Resend::latch_ms`]).
pub fn unlock_latch_prefix(key: &str) -> String {
    format!("redisson_unlock_latch:{{{key}}}:")
}

/// Every key a Redis lock named `key` may write, whichever Redis algorithm runs it: the lock's
/// own key and the ones above. Real mode checks that none of them exists on a server the user
/// runs before it starts, and deletes them after, so this list must be complete (a test runs
/// every Redis lock and compares the keys its history shows).
pub fn keys_of(key: &str) -> Vec<String> {
    vec![
        key.to_string(),
        fence_key(key),
        queue_key(key),
        timeout_key(key),
    ]
}
