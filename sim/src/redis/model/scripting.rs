//! `EVAL` (Redis's `eval.c`): a top-level script runs on the thread's Lua engine (`lua.rs`) with
//! the keyspace lent to it, and each of its `redis.call`s comes back through `Keyspace::exec`.
//! Everything about Lua itself (the `KEYS`/`ARGV` globals, the conversions between Lua values and
//! replies, the error texts, the read-only sandbox) is in `lua.rs`; the model keeps no script state.

use lockcheck_algorithms::redis::command::{Reply, Script};

use super::{KeyEffect, RedisModel};
use crate::redis::lua;

impl RedisModel {
    /// Only the keyspace is lent to Lua, not the whole model (see [`Keyspace`](super::Keyspace) for why).
    pub(super) fn eval(
        &mut self,
        script: &Script,
        keys: &[String],
        args: &[String],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        lua::eval(&mut self.keyspace, script, keys, args, now_ms, effects)
    }
}
