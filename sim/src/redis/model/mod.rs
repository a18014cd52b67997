//! A simulated Redis server: the keyspace and the semantics of the commands lock algorithms use,
//! as a pure state machine.
//!
//! Nothing here does I/O, reads a clock or draws a random number: the caller passes the server's
//! wall clock into every call, so the same inputs always give the same replies and effects, which
//! is what lets a failing simulation be replayed. The semantics follow Redis 7's own code
//! (`t_string.c`, `t_hash.c`, `t_list.c`, `t_zset.c`, `expire.c`, `db.c`), because the point of
//! the model is that a lock algorithm that is wrong against a real server is wrong here too, and
//! one that is right here is not right only because the model is kinder than Redis.
//!
//! Iteration order matters for replay, so every collection is a `BTreeMap`, a `Vec` or a
//! `VecDeque`, never a hashed one.
//!
//! The commands are split by data type as Redis splits its source, so that each file can be read
//! beside its counterpart: `strings.rs` (`t_string.c`), `hashes.rs` (`t_hash.c`), `lists.rs`
//! (`t_list.c`), `sorted_sets.rs` (`t_zset.c`), `expiry.rs` (`expire.c`, with lazy and active
//! expiry) and `scripting.rs` (`eval.c`). What every type shares stays here, as in `db.c`: the
//! keyspace and its typed lookups, `DEL` and `EXISTS`, the dispatch of a command, and the
//! snapshot persistence writes.

mod expiry;
mod hashes;
mod lists;
mod scripting;
mod sorted_sets;
mod strings;

use lockcheck_algorithms::redis::command::{
    Command, ExpireCommand, ExpireOptions, Reply, SetOptions,
};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::net::SocketAddr;

use lists::End;
use sorted_sets::SortedSet;

/// Something the server did to a key. The harness logs these so the checker can see, e.g., which
/// client's request deleted a lock key and when a key expired.
///
/// Hash fields are reported one by one ([`KeyEffect::HashField`]) because reentrant locks (Redisson's
/// `RLock` and its kin) keep the owner as a field of the lock's hash, with the hold count as its
/// value: who wrote or removed that field is who took or gave up the lock, which the checker must
/// see. Lists and sorted sets (fair-lock queues) report no per-element effects; like every other
/// key, their removal (`DEL`, expiry, popping or removing the last element) is a
/// [`KeyEffect::Deleted`] or [`KeyEffect::Expired`], which implies that all their contents went.
/// Redis never keeps an empty hash, list or sorted set, so there is no "now empty" state to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyEffect {
    /// The key was written as a string: by `SET` and its older forms (`SETNX`, `SETEX`,
    /// `PSETEX`, `GETSET`), or by a counter (`INCR`, `INCRBY`, `DECR`, `DECRBY`, which keep the
    /// key's deadline). A `SET … PXAT` with an instant already past is followed at once by the
    /// key's [`KeyEffect::Expired`].
    Set {
        /// The key.
        key: String,
        /// The value now stored.
        value: String,
        /// The key's absolute deadline on the server's clock, if it has one.
        expires_at_ms: Option<u64>,
    },
    /// The key was removed by a command: `DEL`, `UNLINK`, `GETDEL`, the `EXPIRE` family with a
    /// deadline not in the future, or a command that removed the last field or element of a
    /// hash, list or sorted set (`ZREMRANGEBYSCORE` among them).
    Deleted {
        /// The key.
        key: String,
        /// The string it held (`None` if it held another type).
        value: Option<String>,
    },
    /// The key was removed because its deadline had passed: lazily, when a command touched it, or
    /// by [`RedisModel::expire_due`].
    Expired {
        /// The key.
        key: String,
        /// The string it held (`None` if it held another type).
        value: Option<String>,
    },
    /// The key's deadline was set by the `EXPIRE` family (`EXPIRE`, `PEXPIRE`, `EXPIREAT`,
    /// `PEXPIREAT`), or removed by `PERSIST` (`None`).
    ExpiryChanged {
        /// The key.
        key: String,
        /// The new absolute deadline on the server's clock; `None`: none any more.
        expires_at_ms: Option<u64>,
    },
    /// A field of the hash at `key` was written (`HSET`, `HINCRBY`: `Some` new value) or removed
    /// (`HDEL`: `None`). A write that creates the hash creates the key; the key's deadline is
    /// unchanged by either.
    HashField {
        /// The key.
        key: String,
        /// The field.
        field: String,
        /// The value now stored, or `None` if the field was removed.
        value: Option<String>,
    },
    /// An element was pushed onto the list at `key` (`LPUSH`/`RPUSH`). Fair locks keep their
    /// waiters in a list, and the FIFO check needs the order in which the server queued them.
    ListPushed {
        /// The key.
        key: String,
        /// The element.
        value: String,
    },
    /// An element was taken off the list at `key` (`LPOP`/`RPOP`/`LREM`).
    ListRemoved {
        /// The key.
        key: String,
        /// The element.
        value: String,
    },
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A stored value: the Redis types lock algorithms use, so that each command checks the type the
/// way Redis does (`WRONGTYPE`). A hash, list or sorted set is never empty: the command that
/// removes its last member deletes the key, as Redis does.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Str(String),
    /// Field/value pairs in insertion order, which is `HGETALL`'s order in Redis for the small
    /// hashes locks use (listpack encoding, up to 128 fields of at most 64 bytes): an updated field
    /// keeps its place, a new one goes to the end. Bigger hashes are hash tables in Redis, whose
    /// order the model cannot reproduce; keeping insertion order there too is at least stable.
    Hash(Vec<(String, String)>),
    List(VecDeque<String>),
    ZSet(SortedSet),
}

impl Value {
    fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    fn into_string(self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    fn hash_mut(&mut self) -> Option<&mut Vec<(String, String)>> {
        match self {
            Value::Hash(hash) => Some(hash),
            _ => None,
        }
    }

    fn list_mut(&mut self) -> Option<&mut VecDeque<String>> {
        match self {
            Value::List(list) => Some(list),
            _ => None,
        }
    }

    fn zset_mut(&mut self) -> Option<&mut SortedSet> {
        match self {
            Value::ZSet(zset) => Some(zset),
            _ => None,
        }
    }

    fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(hash) => hash.is_empty(),
            Value::List(list) => list.is_empty(),
            Value::ZSet(zset) => zset.is_empty(),
        }
    }
}

/// A key's value and deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    value: Value,
    /// Absolute, on the server's clock, so it survives a restart unchanged (as in an RDB file) and
    /// a clock jump moves every key's remaining lifetime at once (as in real Redis).
    expires_at_ms: Option<u64>,
}

/// The data set as persistence writes it: keys, values and absolute deadlines, no script cache
/// (Redis does not persist `EVAL` scripts either).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    data: BTreeMap<String, Entry>,
}

/// The keyspace and every command except `EVAL`. Split from [`RedisModel`] so that a script's
/// `redis.call` can borrow the data mutably while the Lua engine that runs the script is borrowed
/// too.
#[derive(Default)]
pub(crate) struct Keyspace {
    data: BTreeMap<String, Entry>,
    /// Per channel, the connections subscribed to it, by their client address (a restarted
    /// client process has a new one); channels without any are absent. Connection state: no
    /// snapshot carries it.
    subscriptions: BTreeMap<String, BTreeSet<SocketAddr>>,
    /// `(channel, message)` published since the node last took them, in order.
    published: Vec<(String, String)>,
}

impl Keyspace {
    /// Runs one command. `EVAL` is answered with Redis's refusal because the only way here with it
    /// is `redis.call` inside a script; [`RedisModel::apply`] sends top-level `EVAL`s to Lua.
    pub(crate) fn exec(
        &mut self,
        cmd: &Command,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match cmd {
            Command::Set {
                key,
                value,
                options,
            } => self.set(key, value, options, "set", now_ms, effects),
            Command::SetNx { key, value } => self.setnx(key, value, now_ms, effects),
            Command::SetEx {
                key,
                seconds,
                value,
            } => {
                let options = SetOptions {
                    px: Some(seconds.saturating_mul(1000)),
                    ..SetOptions::default()
                };
                self.set(key, value, &options, "setex", now_ms, effects)
            }
            Command::PSetEx { key, ms, value } => {
                let options = SetOptions {
                    px: Some(*ms),
                    ..SetOptions::default()
                };
                self.set(key, value, &options, "psetex", now_ms, effects)
            }
            // `getsetCommand` is `SET … GET` without options: the old deadline goes.
            Command::GetSet { key, value } => {
                let options = SetOptions {
                    get: true,
                    ..SetOptions::default()
                };
                self.set(key, value, &options, "getset", now_ms, effects)
            }
            Command::Get { key } => self.get(key, now_ms, effects),
            Command::GetDel { key } => self.getdel(key, now_ms, effects),
            // UNLINK frees the memory in the background; the key is gone at once all the same.
            Command::Del { keys } | Command::Unlink { keys } => self.del(keys, now_ms, effects),
            Command::Exists { key } => {
                Reply::Int(i64::from(self.live(key, now_ms, effects).is_some()))
            }
            Command::PExpire { key, ms } => {
                let (command, options) = (ExpireCommand::PExpire, ExpireOptions::default());
                self.expire_generic(key, command, *ms, options, now_ms, effects)
            }
            Command::Expire { key, seconds } => {
                let (command, options) = (ExpireCommand::Expire, ExpireOptions::default());
                self.expire_generic(key, command, *seconds, options, now_ms, effects)
            }
            Command::Expiry {
                command,
                key,
                time,
                options,
            } => self.expire_generic(key, *command, *time, *options, now_ms, effects),
            Command::Persist { key } => self.persist(key, now_ms, effects),
            Command::PTtl { key } => self.pttl(key, now_ms, effects),
            Command::Ttl { key } => self.ttl(key, now_ms, effects),
            Command::Incr { key } => self.incr_by(key, Some(1), now_ms, effects),
            Command::IncrBy { key, increment } => {
                self.incr_by(key, Some(*increment), now_ms, effects)
            }
            Command::Decr { key } => self.incr_by(key, Some(-1), now_ms, effects),
            Command::DecrBy { key, decrement } => {
                self.incr_by(key, decrement.checked_neg(), now_ms, effects)
            }
            Command::HSet { key, fields } => self.hset(key, fields, now_ms, effects),
            Command::HGet { key, field } => self.hget(key, field, now_ms, effects),
            Command::HIncrBy {
                key,
                field,
                increment,
            } => self.hincrby(key, field, *increment, now_ms, effects),
            Command::HExists { key, field } => self.hexists(key, field, now_ms, effects),
            Command::HDel { key, fields } => self.hdel(key, fields, now_ms, effects),
            Command::HLen { key } => self.hlen(key, now_ms, effects),
            Command::HGetAll { key } => self.hgetall(key, now_ms, effects),
            Command::LPush { key, values } => self.push(key, values, End::Head, now_ms, effects),
            Command::RPush { key, values } => self.push(key, values, End::Tail, now_ms, effects),
            Command::LPop { key, count } => self.pop(key, *count, End::Head, now_ms, effects),
            Command::RPop { key, count } => self.pop(key, *count, End::Tail, now_ms, effects),
            Command::LIndex { key, index } => self.lindex(key, *index, now_ms, effects),
            Command::LLen { key } => self.llen(key, now_ms, effects),
            Command::LRange { key, start, stop } => {
                self.lrange(key, *start, *stop, now_ms, effects)
            }
            Command::LRem { key, count, value } => self.lrem(key, *count, value, now_ms, effects),
            Command::ZAdd { key, members } => self.zadd(key, members, now_ms, effects),
            Command::ZScore { key, member } => self.zscore(key, member, now_ms, effects),
            Command::ZRem { key, members } => self.zrem(key, members, now_ms, effects),
            Command::ZCard { key } => self.zcard(key, now_ms, effects),
            Command::ZRange {
                key,
                start,
                stop,
                with_scores,
            } => self.zrange(key, *start, *stop, *with_scores, now_ms, effects),
            Command::ZRangeByScore {
                key,
                min,
                max,
                with_scores,
            } => self.zrangebyscore(key, *min, *max, *with_scores, now_ms, effects),
            Command::ZRemRangeByScore { key, min, max } => {
                self.zremrangebyscore(key, *min, *max, now_ms, effects)
            }
            // `timeCommand`: the server's wall clock, seconds and microseconds. Inside a script
            // it is the script's frozen clock, as every other command sees it here (a real
            // server reads its clock again; a script takes no simulated time).
            Command::Time => Reply::Array(vec![
                Reply::Bulk((now_ms / 1000).to_string()),
                Reply::Bulk((now_ms % 1000 * 1000).to_string()),
            ]),
            Command::Publish { channel, message } => {
                self.published.push((channel.clone(), message.clone()));
                Reply::Int(
                    self.subscriptions
                        .get(channel)
                        .map_or(0, |s| s.len() as i64),
                )
            }
            // Replication lives in the server's node glue, which answers WAIT and INFO before
            // the model sees them; the model alone has no replicas.
            Command::Wait { .. } => Reply::Int(0),
            Command::Info { .. } => Reply::Bulk("# Replication\r\nrole:master\r\n".into()),
            Command::Eval { .. } => {
                Reply::Error("ERR This Redis command is not allowed from script".into())
            }
        }
    }

    /// `DEL`: a key already past its deadline is expired (reported as such) and not counted, and a
    /// key named twice counts once, as in Redis's `delGenericCommand`.
    fn del(&mut self, keys: &[String], now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        let mut removed = 0;
        for key in keys {
            if self.live(key, now_ms, effects).is_none() {
                continue;
            }
            if let Some((key, entry)) = self.data.remove_entry(key.as_str()) {
                effects.push(KeyEffect::Deleted {
                    key,
                    value: entry.value.into_string(),
                });
                removed += 1;
            }
        }
        Reply::Int(removed)
    }

    /// The live value at `key` seen through `view`: `Ok(None)` when the key is missing, and Redis's
    /// `WRONGTYPE` error when it holds another type (after lazy expiry, as every lookup).
    fn typed<T>(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
        view: fn(&mut Value) -> Option<&mut T>,
    ) -> Result<Option<&mut T>, Reply> {
        match self.live(key, now_ms, effects) {
            None => Ok(None),
            Some(entry) => view(&mut entry.value).map(Some).ok_or_else(wrongtype),
        }
    }

    /// As [`Keyspace::typed`], creating the key (without a deadline) when it is missing. Callers
    /// must put something in it before they return, since an empty aggregate must not exist.
    fn typed_or_create<T>(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
        view: fn(&mut Value) -> Option<&mut T>,
        empty: fn() -> Value,
    ) -> Result<&mut T, Reply> {
        if self.typed(key, now_ms, effects, view)?.is_none() {
            self.data.insert(
                key.to_owned(),
                Entry {
                    value: empty(),
                    expires_at_ms: None,
                },
            );
        }
        self.data
            .get_mut(key)
            .and_then(|entry| view(&mut entry.value))
            .ok_or_else(wrongtype)
    }

    /// Deletes `key` if the command just emptied its hash, list or sorted set, as Redis does right
    /// after the removal (and reports it as a deletion: Redis fires a `del` event).
    fn delete_if_empty(&mut self, key: &str, effects: &mut Vec<KeyEffect>) {
        if !self
            .data
            .get(key)
            .is_some_and(|entry| entry.value.is_empty_aggregate())
        {
            return;
        }
        if let Some((key, _)) = self.data.remove_entry(key) {
            effects.push(KeyEffect::Deleted { key, value: None });
        }
    }
}

fn wrongtype() -> Reply {
    Reply::Error(WRONGTYPE.into())
}

/// A length as an integer reply (a collection never holds `i64::MAX` items).
fn count(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

/// The positions `[first, last]` that `start`/`stop` select in a sequence of `len` items, by the
/// rule `LRANGE` and `ZRANGE` share: negative indices count from the end, the start is clamped to
/// 0 and the stop to the last item, and the range is empty when start > stop or start >= len.
fn rank_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = count(len);
    let start = if start < 0 { len + start } else { start }.max(0);
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    let stop = stop.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

/// A simulated Redis server.
///
/// `EVAL` runs on the thread's Lua engine (see `lua.rs`), which keeps every script compiled by its
/// SHA1 like Redis's script cache; no script can leave state in it for the next one, so the
/// model holds none of it.
///
/// Pub/sub: connections subscribe ([`RedisModel::subscribe`]) and take their subscriptions
/// with them when they close ([`RedisModel::connection_closed`]); `PUBLISH` (also from a script)
/// replies how many connections subscribe to its channel and leaves the message in an outbox
/// ([`RedisModel::take_published`]) for the server's node to push to them
/// ([`RedisModel::subscribers`]). Neither persistence nor a restart keeps a subscription.
#[derive(Default)]
pub struct RedisModel {
    keyspace: Keyspace,
}

impl RedisModel {
    /// An empty server, as after a start without persistence.
    pub fn new() -> Self {
        Self::default()
    }

    /// A server restarted from persisted data. The deadlines are absolute, so a key whose
    /// deadline passed while the server was down is expired on its first access, as in Redis.
    /// (Redis's script cache starts empty after a restart; the model compiles scripts once per
    /// thread, which only `EVALSHA`, not modelled, could tell apart.)
    pub fn restore(snapshot: Snapshot) -> Self {
        RedisModel {
            keyspace: Keyspace {
                data: snapshot.data,
                ..Keyspace::default()
            },
        }
    }

    /// `SUBSCRIBE channel` on the connection of client address `conn`.
    pub fn subscribe(&mut self, channel: &str, conn: SocketAddr) {
        let subscriptions = &mut self.keyspace.subscriptions;
        subscriptions
            .entry(channel.to_owned())
            .or_default()
            .insert(conn);
    }

    /// The connection of client address `conn` closed: its subscriptions go with it.
    pub fn connection_closed(&mut self, conn: SocketAddr) {
        self.keyspace.subscriptions.retain(|_, subscribers| {
            subscribers.remove(&conn);
            !subscribers.is_empty()
        });
    }

    /// The connections subscribed to `channel` now.
    pub fn subscribers(&self, channel: &str) -> impl Iterator<Item = SocketAddr> + '_ {
        self.keyspace
            .subscriptions
            .get(channel)
            .into_iter()
            .flatten()
            .copied()
    }

    /// The messages published since the last call, `(channel, message)` in order.
    pub fn take_published(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.keyspace.published)
    }

    /// The data set as persistence would write it now. Keys past their deadline that no access
    /// has removed yet are included, as Redis includes them until they are expired.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            data: self.keyspace.data.clone(),
        }
    }

    /// Executes one command.
    ///
    /// `now_ms` is the SERVER's own wall clock in ms (it may drift or jump; expiry follows it, as
    /// in real Redis). Everything the command did to keys is appended to `effects`, in order.
    pub fn apply(&mut self, cmd: &Command, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        let Command::Eval { script, keys, args } = cmd else {
            return self.keyspace.exec(cmd, now_ms, effects);
        };
        self.eval(script, keys, args, now_ms, effects)
    }

    /// The number of keys held, counting keys past their deadline that have not been removed yet
    /// (as Redis's `DBSIZE` does).
    pub fn len(&self) -> usize {
        self.keyspace.data.len()
    }

    /// Whether `key` is held (past its deadline or not) and, for a string, its value: what a
    /// restarted server compares with what it held before the crash. No side effect.
    pub fn peek(&self, key: &str) -> Option<Option<&str>> {
        self.keyspace
            .data
            .get(key)
            .map(|entry| entry.value.as_str())
    }

    /// Whether no key is held (see [`RedisModel::len`]).
    pub fn is_empty(&self) -> bool {
        self.keyspace.data.is_empty()
    }
}

impl fmt::Debug for RedisModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisModel")
            .field("data", &self.keyspace.data)
            .finish()
    }
}

/// What the tests of every data type drive the model with.
#[cfg(test)]
mod testing {
    use lockcheck_algorithms::redis::command::{Command, Reply};

    use super::{KeyEffect, RedisModel};
    use crate::redis::parse::parse_command;

    /// A command from a Redis command line (space-separated, no quoting).
    pub(super) fn cmd(line: &str) -> Command {
        let argv: Vec<String> = line.split(' ').map(String::from).collect();
        parse_command(&argv).unwrap()
    }

    /// Runs `line` at `now`, returning the reply and the effects it produced.
    pub(super) fn run(m: &mut RedisModel, line: &str, now: u64) -> (Reply, Vec<KeyEffect>) {
        let mut effects = Vec::new();
        let reply = m.apply(&cmd(line), now, &mut effects);
        (reply, effects)
    }

    pub(super) fn reply(m: &mut RedisModel, line: &str, now: u64) -> Reply {
        run(m, line, now).0
    }

    pub(super) fn ok() -> Reply {
        Reply::Status("OK".into())
    }

    pub(super) fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.into())
    }

    pub(super) fn array(items: &[&str]) -> Reply {
        Reply::Array(items.iter().map(|s| bulk(s)).collect())
    }

    pub(super) fn field(key: &str, field: &str, value: Option<&str>) -> KeyEffect {
        KeyEffect::HashField {
            key: key.into(),
            field: field.into(),
            value: value.map(String::from),
        }
    }

    pub(super) fn deleted(key: &str) -> KeyEffect {
        KeyEffect::Deleted {
            key: key.into(),
            value: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::model::testing::{array, bulk, cmd, deleted, ok, reply, run};

    #[test]
    fn del_counts_only_live_keys_and_emits_deleted() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET a 1", 0);
        reply(&mut m, "SET b 2 PX 10", 0);
        reply(&mut m, "SET c 3", 0);
        // `b` is past its deadline: DEL expires it rather than deleting it, and does not count it.
        // `a` named twice counts once.
        let (r, effects) = run(&mut m, "DEL a b a missing c", 11);
        assert_eq!(r, Reply::Int(2));
        assert_eq!(
            effects,
            vec![
                KeyEffect::Deleted {
                    key: "a".into(),
                    value: Some("1".into())
                },
                KeyEffect::Expired {
                    key: "b".into(),
                    value: Some("2".into())
                },
                KeyEffect::Deleted {
                    key: "c".into(),
                    value: Some("3".into())
                },
            ]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn exists_reports_live_keys_only() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "EXISTS k", 0), Reply::Int(0));
        reply(&mut m, "SET k v PX 5", 0);
        assert_eq!(reply(&mut m, "EXISTS k", 5), Reply::Int(1));
        let (r, effects) = run(&mut m, "EXISTS k", 6);
        assert_eq!(r, Reply::Int(0));
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "k".into(),
                value: Some("v".into())
            }]
        );
    }

    #[test]
    fn wrong_type_errors_leave_the_model_usable() {
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h f v", 0);
        let wrongtype = Reply::Error(WRONGTYPE.into());
        for line in ["GET h", "INCR h", "SET h v GET"] {
            let (r, effects) = run(&mut m, line, 0);
            assert_eq!(r, wrongtype, "{line}");
            assert!(effects.is_empty(), "{line}");
        }
        // Type-agnostic commands work on it, as in Redis; plain SET overwrites any type.
        assert_eq!(reply(&mut m, "EXISTS h", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "PTTL h", 0), Reply::Int(-1));
        assert_eq!(reply(&mut m, "PEXPIRE h 10", 0), Reply::Int(1));
        let (r, effects) = run(&mut m, "DEL h", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::Deleted {
                key: "h".into(),
                value: None
            }]
        );
        reply(&mut m, "HSET h f v", 0);
        assert_eq!(reply(&mut m, "SET h v", 0), ok());
        assert_eq!(reply(&mut m, "GET h", 0), bulk("v"));
    }

    #[test]
    fn every_type_mismatch_is_wrongtype_and_changes_nothing() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET s v", 0);
        reply(&mut m, "HSET h f v", 0);
        reply(&mut m, "RPUSH l a", 0);
        reply(&mut m, "ZADD z 1 a", 0);
        let before = m.snapshot();
        let hash_cmds = [
            "HSET {} f v",
            "HGET {} f",
            "HINCRBY {} f 1",
            "HEXISTS {} f",
            "HDEL {} f",
            "HLEN {}",
            "HGETALL {}",
        ];
        let list_cmds = [
            "RPUSH {} x",
            "LPUSH {} x",
            "LPOP {}",
            "RPOP {}",
            "LPOP {} 1",
            "LINDEX {} 0",
            "LLEN {}",
            "LRANGE {} 0 -1",
            "LREM {} 0 a",
        ];
        let zset_cmds = [
            "ZADD {} 1 x",
            "ZSCORE {} a",
            "ZREM {} a",
            "ZCARD {}",
            "ZRANGE {} 0 -1",
            "ZRANGEBYSCORE {} -inf +inf",
            "ZREMRANGEBYSCORE {} -inf +inf",
        ];
        let string_cmds = [
            "GET {}",
            "INCR {}",
            "SET {} x GET",
            "GETSET {} x",
            "GETDEL {}",
            "INCRBY {} 2",
            "DECR {}",
            "DECRBY {} 2",
        ];
        let families: [(&str, &[&str]); 4] = [
            ("s", &string_cmds),
            ("h", &hash_cmds),
            ("l", &list_cmds),
            ("z", &zset_cmds),
        ];
        for (own_key, _) in families {
            for (other_key, cmds) in families {
                if own_key == other_key {
                    continue;
                }
                for template in cmds {
                    let line = template.replace("{}", own_key);
                    let (r, effects) = run(&mut m, &line, 0);
                    assert_eq!(r, Reply::Error(WRONGTYPE.into()), "{line}");
                    assert!(effects.is_empty(), "{line}");
                }
            }
        }
        assert_eq!(m.snapshot(), before);
    }

    #[test]
    fn del_exists_and_pttl_work_on_every_type() {
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h f v", 0);
        reply(&mut m, "RPUSH l a", 0);
        reply(&mut m, "ZADD z 1 a", 0);
        for key in ["h", "l", "z"] {
            assert_eq!(reply(&mut m, &format!("EXISTS {key}"), 0), Reply::Int(1));
            assert_eq!(reply(&mut m, &format!("PTTL {key}"), 0), Reply::Int(-1));
        }
        let (r, effects) = run(&mut m, "DEL h l z", 0);
        assert_eq!(r, Reply::Int(3));
        assert_eq!(effects, vec![deleted("h"), deleted("l"), deleted("z")]);
        assert!(m.is_empty());
    }

    #[test]
    fn publish_counts_the_subscribers_touches_no_key_and_leaves_the_message_out() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET chan v", 0);
        let (r, effects) = run(&mut m, "PUBLISH chan hello", 0);
        assert_eq!(r, Reply::Int(0));
        assert!(effects.is_empty());
        assert_eq!(reply(&mut m, "GET chan", 0), bulk("v"));
        assert!(!cmd("PUBLISH chan hello").is_write());
        let (a, b) = (
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:40000".parse().unwrap(),
        );
        m.subscribe("chan", a);
        m.subscribe("chan", b);
        m.subscribe("chan", a);
        assert_eq!(reply(&mut m, "PUBLISH chan again", 0), Reply::Int(2));
        assert_eq!(m.subscribers("chan").collect::<Vec<_>>(), [a, b]);
        assert_eq!(reply(&mut m, "PUBLISH other x", 0), Reply::Int(0));
        m.connection_closed(a);
        m.connection_closed(b);
        assert_eq!(reply(&mut m, "PUBLISH chan gone", 0), Reply::Int(0));
        assert_eq!(m.subscribers("chan").count(), 0);
        let out = |c: &str, t: &str| (c.to_owned(), t.to_owned());
        assert_eq!(
            m.take_published(),
            vec![
                out("chan", "hello"),
                out("chan", "again"),
                out("other", "x"),
                out("chan", "gone")
            ]
        );
        assert_eq!(m.take_published(), vec![]);
    }

    #[test]
    fn snapshot_round_trip_carries_every_type() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET s v PX 100", 0);
        reply(&mut m, "HSET h b 2 a 1", 0);
        reply(&mut m, "PEXPIRE h 50", 0);
        reply(&mut m, "RPUSH l x y z", 0);
        reply(&mut m, "ZADD z 2 b 1 a 1.5 c", 0);
        let snap = m.snapshot();
        let mut restored = RedisModel::restore(snap.clone());
        assert_eq!(restored.snapshot(), snap);
        assert_eq!(restored.len(), 4);
        assert_eq!(reply(&mut restored, "GET s", 10), bulk("v"));
        assert_eq!(
            reply(&mut restored, "HGETALL h", 10),
            array(&["b", "2", "a", "1"])
        );
        assert_eq!(reply(&mut restored, "PTTL h", 10), Reply::Int(40));
        assert_eq!(
            reply(&mut restored, "LRANGE l 0 -1", 10),
            array(&["x", "y", "z"])
        );
        assert_eq!(
            reply(&mut restored, "ZRANGE z 0 -1 WITHSCORES", 10),
            array(&["a", "1", "c", "1.5", "b", "2"])
        );
        // The restored copy is independent of the original.
        reply(&mut restored, "LPOP l", 10);
        assert_eq!(reply(&mut m, "LLEN l", 10), Reply::Int(3));
        // And a hash past its deadline at restart expires on first access.
        let mut late = RedisModel::restore(snap);
        let (r, effects) = run(&mut late, "HLEN h", 51);
        assert_eq!(r, Reply::Int(0));
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "h".into(),
                value: None
            }]
        );
    }

    #[test]
    fn time_answers_from_the_clock_it_is_given() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "TIME", 1_700_000_000_123);
        assert_eq!(r, array(&["1700000000", "123000"]));
        assert!(effects.is_empty());
        assert!(!cmd("TIME").is_write());
        assert!(cmd("TIME").keys().is_empty());
    }

    #[test]
    fn unlink_deletes_as_del_does() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET a 1", 0);
        reply(&mut m, "RPUSH l x", 0);
        let (r, effects) = run(&mut m, "UNLINK a l a missing", 0);
        assert_eq!(r, Reply::Int(2));
        assert_eq!(
            effects,
            vec![
                KeyEffect::Deleted {
                    key: "a".into(),
                    value: Some("1".into())
                },
                deleted("l")
            ]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn hand_built_commands_cannot_create_empty_aggregates() {
        let mut m = RedisModel::new();
        let empties = [
            Command::HSet {
                key: "h".into(),
                fields: Vec::new(),
            },
            Command::RPush {
                key: "l".into(),
                values: Vec::new(),
            },
            Command::LPush {
                key: "l".into(),
                values: Vec::new(),
            },
            Command::ZAdd {
                key: "z".into(),
                members: Vec::new(),
            },
        ];
        for empty in empties {
            assert!(matches!(
                m.apply(&empty, 0, &mut Vec::new()),
                Reply::Error(_)
            ));
        }
        assert!(m.is_empty());
    }
}
