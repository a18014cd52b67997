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

use lockcheck_algorithms::redis::command::{format_double, Command, Reply, Score, SetOptions};

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use super::lua;
use super::parse::parse_integer;

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
    /// The key was written as a string: by `SET`, or by `INCR` (which keeps the key's deadline).
    Set {
        /// The key.
        key: String,
        /// The value now stored.
        value: String,
        /// The key's absolute deadline on the server's clock, if it has one.
        expires_at_ms: Option<u64>,
    },
    /// The key was removed by a command: `DEL`, `PEXPIRE`/`EXPIRE` with a deadline already past,
    /// or a command that removed the last field or element of a hash, list or sorted set.
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
    /// The key's deadline was set by `PEXPIRE` or `EXPIRE`.
    ExpiryChanged {
        /// The key.
        key: String,
        /// The new absolute deadline on the server's clock.
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
const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

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
            Value::ZSet(zset) => zset.scores.is_empty(),
        }
    }
}

/// A sorted set: members ordered by (score, member), with members compared bytewise, which is
/// Redis's order (`zslInsert` ties on score are broken by `sdscmp`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct SortedSet {
    /// Each member's score, for `ZSCORE` and to find a member's place in `ordered`.
    scores: BTreeMap<String, Score>,
    /// The members in rank order.
    ordered: BTreeMap<(Score, String), ()>,
}

impl SortedSet {
    fn len(&self) -> usize {
        self.scores.len()
    }

    /// Adds `member` or moves it to `score`; true if it is new. As in Redis's `zsetAdd`, a score
    /// equal to the current one (including `-0` against `0`) leaves the member untouched.
    fn insert(&mut self, score: Score, member: &str) -> bool {
        match self.scores.get(member).copied() {
            Some(old) => {
                if old != score {
                    self.ordered.remove(&(old, member.to_owned()));
                    self.ordered.insert((score, member.to_owned()), ());
                    self.scores.insert(member.to_owned(), score);
                }
                false
            }
            None => {
                self.scores.insert(member.to_owned(), score);
                self.ordered.insert((score, member.to_owned()), ());
                true
            }
        }
    }

    fn remove(&mut self, member: &str) -> bool {
        match self.scores.remove(member) {
            Some(score) => {
                self.ordered.remove(&(score, member.to_owned()));
                true
            }
            None => false,
        }
    }

    /// Members and scores in rank order.
    fn iter(&self) -> impl Iterator<Item = (&str, Score)> {
        self.ordered
            .keys()
            .map(|(score, member)| (member.as_str(), *score))
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

impl Entry {
    /// Redis's `keyIsExpired`: a key is still there at its deadline and gone one millisecond
    /// later. (`PEXPIRE` uses `<=` instead; see [`Keyspace::pexpire`].)
    fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|when| now_ms > when)
    }
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
            } => self.set(key, value, options, now_ms, effects),
            Command::Get { key } => self.get(key, now_ms, effects),
            Command::Del { keys } => self.del(keys, now_ms, effects),
            Command::Exists { key } => {
                Reply::Int(i64::from(self.live(key, now_ms, effects).is_some()))
            }
            Command::PExpire { key, ms } => self.pexpire(key, *ms, "pexpire", now_ms, effects),
            // Redis's expireGenericCommand rejects a seconds count whose milliseconds overflow.
            Command::Expire { key, seconds } => match seconds.checked_mul(1000) {
                Some(ms) => self.pexpire(key, ms, "expire", now_ms, effects),
                None => Reply::Error("ERR invalid expire time in 'expire' command".into()),
            },
            Command::PTtl { key } => self.pttl(key, now_ms, effects),
            Command::Incr { key } => self.incr(key, now_ms, effects),
            Command::HSet { key, fields } => self.hset(key, fields, now_ms, effects),
            Command::HGet { key, field } => self.hget(key, field, now_ms, effects),
            Command::HIncrBy {
                key,
                field,
                increment,
            } => self.hincrby(key, field, *increment, now_ms, effects),
            Command::HExists { key, field } => match self.hash(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(hash) => Reply::Int(i64::from(
                    hash.is_some_and(|hash| hash_get(hash, field).is_some()),
                )),
            },
            Command::HDel { key, fields } => self.hdel(key, fields, now_ms, effects),
            Command::HLen { key } => match self.hash(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(hash) => Reply::Int(count(hash.map_or(0, |hash| hash.len()))),
            },
            Command::HGetAll { key } => match self.hash(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(hash) => Reply::Array(
                    hash.into_iter()
                        .flatten()
                        .flat_map(|(field, value)| {
                            [Reply::Bulk(field.clone()), Reply::Bulk(value.clone())]
                        })
                        .collect(),
                ),
            },
            Command::LPush { key, values } => self.push(key, values, End::Head, now_ms, effects),
            Command::RPush { key, values } => self.push(key, values, End::Tail, now_ms, effects),
            Command::LPop { key, count } => self.pop(key, *count, End::Head, now_ms, effects),
            Command::RPop { key, count } => self.pop(key, *count, End::Tail, now_ms, effects),
            Command::LIndex { key, index } => match self.list(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(None) => Reply::Nil,
                Ok(Some(list)) => {
                    let len = count(list.len());
                    let index = if *index < 0 { len + index } else { *index };
                    usize::try_from(index)
                        .ok()
                        .and_then(|index| list.get(index))
                        .map_or(Reply::Nil, |item| Reply::Bulk(item.clone()))
                }
            },
            Command::LLen { key } => match self.list(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(list) => Reply::Int(count(list.map_or(0, |list| list.len()))),
            },
            Command::LRange { key, start, stop } => match self.list(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(list) => {
                    let list = list.map(|list| &*list);
                    let items = list.into_iter().flatten();
                    let len = list.map_or(0, VecDeque::len);
                    Reply::Array(match rank_range(*start, *stop, len) {
                        None => Vec::new(),
                        Some((first, last)) => items
                            .skip(first)
                            .take(last - first + 1)
                            .map(|item| Reply::Bulk(item.clone()))
                            .collect(),
                    })
                }
            },
            Command::LRem { key, count, value } => self.lrem(key, *count, value, now_ms, effects),
            Command::ZAdd { key, members } => self.zadd(key, members, now_ms, effects),
            Command::ZScore { key, member } => match self.zset(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(zset) => match zset.and_then(|zset| zset.scores.get(member)) {
                    None => Reply::Nil,
                    Some(score) => Reply::Bulk(format_double(score.get())),
                },
            },
            Command::ZRem { key, members } => self.zrem(key, members, now_ms, effects),
            Command::ZCard { key } => match self.zset(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(zset) => Reply::Int(count(zset.map_or(0, |zset| zset.len()))),
            },
            Command::ZRange {
                key,
                start,
                stop,
                with_scores,
            } => match self.zset(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(None) => Reply::Array(Vec::new()),
                Ok(Some(zset)) => match rank_range(*start, *stop, zset.len()) {
                    None => Reply::Array(Vec::new()),
                    Some((first, last)) => {
                        scored_members(zset.iter().skip(first).take(last - first + 1), *with_scores)
                    }
                },
            },
            Command::ZRangeByScore {
                key,
                min,
                max,
                with_scores,
            } => match self.zset(key, now_ms, effects) {
                Err(reply) => reply,
                Ok(None) => Reply::Array(Vec::new()),
                Ok(Some(zset)) => scored_members(
                    zset.iter()
                        .skip_while(|(_, score)| !min.admits_from_below(*score))
                        .take_while(|(_, score)| max.admits_from_above(*score)),
                    *with_scores,
                ),
            },
            // Nobody subscribes in the model, so nobody receives it.
            Command::Publish { .. } => Reply::Int(0),
            // Replication lives in the server's node glue, which answers WAIT before the model
            // sees it; the model alone has no replicas.
            Command::Wait { .. } => Reply::Int(0),
            Command::Eval { .. } => {
                Reply::Error("ERR This Redis command is not allowed from script".into())
            }
        }
    }

    /// The key's entry if it is live. Every access goes through here because Redis expires keys
    /// lazily on access: a key past its deadline is removed (and reported) the moment a command
    /// touches it, whatever the command.
    fn live(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Option<&mut Entry> {
        if self.data.get(key)?.is_expired(now_ms) {
            if let Some((key, entry)) = self.data.remove_entry(key) {
                effects.push(KeyEffect::Expired {
                    key,
                    value: entry.value.into_string(),
                });
            }
            return None;
        }
        self.data.get_mut(key)
    }

    /// `SET`, in the order of Redis's `setGenericCommand`: the expiry is validated first, then
    /// `GET` reads the old value (and fails on a non-string), then NX/XX decide. With `GET` the
    /// reply is the old value even when NX/XX stop the write.
    fn set(
        &mut self,
        key: &str,
        value: &str,
        options: &SetOptions,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        // Redis's parseExtendedStringArgumentsOrReply refuses NX with XX before anything else
        // (found by the conformance test against redis-server).
        if options.nx && options.xx {
            return Reply::Error("ERR syntax error".into());
        }
        let expires_at_ms = match options.px {
            None => None,
            Some(px) => match deadline_after(now_ms, px) {
                Some(when) => Some(when),
                None => return Reply::Error("ERR invalid expire time in 'set' command".into()),
            },
        };
        let old = self.live(key, now_ms, effects);
        let found = old.is_some();
        let get_reply = if options.get {
            match old {
                None => Some(Reply::Nil),
                Some(entry) => match entry.value.as_str() {
                    Some(s) => Some(Reply::Bulk(s.to_owned())),
                    None => return Reply::Error(WRONGTYPE.into()),
                },
            }
        } else {
            None
        };
        if (options.nx && found) || (options.xx && !found) {
            return get_reply.unwrap_or(Reply::Nil);
        }
        // A SET without PX drops any previous deadline: the new value is a new key as far as
        // expiry goes (Redis has KEEPTTL to opt out; lock algorithms never use it).
        self.data.insert(
            key.to_owned(),
            Entry {
                value: Value::Str(value.to_owned()),
                expires_at_ms,
            },
        );
        effects.push(KeyEffect::Set {
            key: key.to_owned(),
            value: value.to_owned(),
            expires_at_ms,
        });
        get_reply.unwrap_or_else(|| Reply::Status("OK".into()))
    }

    fn get(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.live(key, now_ms, effects) {
            None => Reply::Nil,
            Some(entry) => match entry.value.as_str() {
                Some(s) => Reply::Bulk(s.to_owned()),
                None => Reply::Error(WRONGTYPE.into()),
            },
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

    /// `PEXPIRE`, following Redis's `expireGenericCommand`: an overflowing deadline is an error
    /// even for a missing key; a deadline at or before now (`ms <= 0`) deletes the key at once and
    /// still replies 1 (Redis propagates it as a `DEL` and fires a `del` event, hence `Deleted`).
    fn pexpire(
        &mut self,
        key: &str,
        ms: i64,
        command: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let now = signed(now_ms);
        let Some(when) = now.checked_add(ms) else {
            return Reply::Error(format!("ERR invalid expire time in '{command}' command"));
        };
        let Some(entry) = self.live(key, now_ms, effects) else {
            return Reply::Int(0);
        };
        if when <= now {
            if let Some((key, entry)) = self.data.remove_entry(key) {
                effects.push(KeyEffect::Deleted {
                    key,
                    value: entry.value.into_string(),
                });
            }
        } else {
            let when = Some(when.unsigned_abs());
            entry.expires_at_ms = when;
            effects.push(KeyEffect::ExpiryChanged {
                key: key.to_owned(),
                expires_at_ms: when,
            });
        }
        Reply::Int(1)
    }

    fn pttl(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.live(key, now_ms, effects) {
            None => Reply::Int(-2),
            Some(Entry {
                expires_at_ms: None,
                ..
            }) => Reply::Int(-1),
            // A live key is at or before its deadline, so this is >= 0 (0 at the deadline itself).
            Some(Entry {
                expires_at_ms: Some(when),
                ..
            }) => Reply::Int(signed(*when).saturating_sub(signed(now_ms)).max(0)),
        }
    }

    /// `INCR`: a missing key counts as 0; the key keeps its deadline, because Redis replaces the
    /// value in place rather than re-creating the key.
    fn incr(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        let (current, expires_at_ms) = match self.live(key, now_ms, effects) {
            None => (0, None),
            Some(entry) => {
                let Some(s) = entry.value.as_str() else {
                    return Reply::Error(WRONGTYPE.into());
                };
                match parse_integer(s) {
                    Some(n) => (n, entry.expires_at_ms),
                    None => return Reply::Error(NOT_AN_INTEGER.into()),
                }
            }
        };
        let Some(next) = current.checked_add(1) else {
            return Reply::Error("ERR increment or decrement would overflow".into());
        };
        let value = next.to_string();
        self.data.insert(
            key.to_owned(),
            Entry {
                value: Value::Str(value.clone()),
                expires_at_ms,
            },
        );
        effects.push(KeyEffect::Set {
            key: key.to_owned(),
            value,
            expires_at_ms,
        });
        Reply::Int(next)
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

    fn hash(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Result<Option<&mut Vec<(String, String)>>, Reply> {
        self.typed(key, now_ms, effects, Value::hash_mut)
    }

    fn list(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Result<Option<&mut VecDeque<String>>, Reply> {
        self.typed(key, now_ms, effects, Value::list_mut)
    }

    fn zset(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Result<Option<&mut SortedSet>, Reply> {
        self.typed(key, now_ms, effects, Value::zset_mut)
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

    /// `HSET`: each pair is written in turn (so a field named twice counts once as new and ends
    /// with its last value) and reported; the key keeps its deadline.
    fn hset(
        &mut self,
        key: &str,
        fields: &[(String, String)],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        if fields.is_empty() {
            // Only a hand-built command gets here; parsing refuses it the same way.
            return Reply::Error("ERR wrong number of arguments for 'hset' command".into());
        }
        let hash = match self.typed_or_create(key, now_ms, effects, Value::hash_mut, empty_hash) {
            Ok(hash) => hash,
            Err(reply) => return reply,
        };
        let mut created = 0;
        for (field, value) in fields {
            if hash_set(hash, field, value) {
                created += 1;
            }
            effects.push(KeyEffect::HashField {
                key: key.to_owned(),
                field: field.clone(),
                value: Some(value.clone()),
            });
        }
        Reply::Int(created)
    }

    fn hget(&mut self, key: &str, field: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.hash(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(hash) => hash
                .and_then(|hash| hash_get(hash, field))
                .map_or(Reply::Nil, |value| Reply::Bulk(value.to_owned())),
        }
    }

    /// `HINCRBY`, in the order of Redis's `hincrbyCommand`: type check, then the stored value must
    /// read as an integer (`string2ll`), then the sum must not overflow. A missing key or field
    /// counts as 0, and a field that reaches 0 stays (only `HDEL` removes fields), which is why a
    /// reentrant lock's unlock script deletes the key itself when the count reaches 0.
    fn hincrby(
        &mut self,
        key: &str,
        field: &str,
        increment: i64,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let current = match self.hash(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(hash) => match hash.and_then(|hash| hash_get(hash, field)) {
                None => 0,
                Some(value) => match parse_integer(value) {
                    Some(n) => n,
                    None => return Reply::Error("ERR hash value is not an integer".into()),
                },
            },
        };
        let Some(next) = current.checked_add(increment) else {
            return Reply::Error("ERR increment or decrement would overflow".into());
        };
        let hash = match self.typed_or_create(key, now_ms, effects, Value::hash_mut, empty_hash) {
            Ok(hash) => hash,
            Err(reply) => return reply,
        };
        let value = next.to_string();
        hash_set(hash, field, &value);
        effects.push(KeyEffect::HashField {
            key: key.to_owned(),
            field: field.to_owned(),
            value: Some(value),
        });
        Reply::Int(next)
    }

    /// `HDEL`: each removed field is reported, then the key's deletion if no field is left.
    fn hdel(
        &mut self,
        key: &str,
        fields: &[String],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let hash = match self.hash(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Int(0),
            Ok(Some(hash)) => hash,
        };
        let mut removed = 0;
        for field in fields {
            if let Some(at) = hash.iter().position(|(f, _)| f == field) {
                hash.remove(at);
                removed += 1;
                effects.push(KeyEffect::HashField {
                    key: key.to_owned(),
                    field: field.clone(),
                    value: None,
                });
            }
        }
        self.delete_if_empty(key, effects);
        Reply::Int(removed)
    }

    /// `LPUSH`/`RPUSH`: the values are pushed one at a time, so `LPUSH k a b` leaves `b` first.
    fn push(
        &mut self,
        key: &str,
        values: &[String],
        end: End,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        if values.is_empty() {
            let name = if end == End::Head { "lpush" } else { "rpush" };
            return Reply::Error(format!(
                "ERR wrong number of arguments for '{name}' command"
            ));
        }
        let list = match self.typed_or_create(key, now_ms, effects, Value::list_mut, empty_list) {
            Ok(list) => list,
            Err(reply) => return reply,
        };
        for value in values {
            match end {
                End::Head => list.push_front(value.clone()),
                End::Tail => list.push_back(value.clone()),
            }
        }
        let len = count(list.len());
        effects.extend(values.iter().map(|value| KeyEffect::ListPushed {
            key: key.to_string(),
            value: value.clone(),
        }));
        Reply::Int(len)
    }

    /// `LPOP`/`RPOP`, as Redis 7's `popGenericCommand`: with a count the reply is an array (empty
    /// for a count of 0; nil, i.e. a null array, for a missing key).
    fn pop(
        &mut self,
        key: &str,
        how_many: Option<u64>,
        end: End,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let list = match self.list(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Nil,
            Ok(Some(list)) => list,
        };
        let mut pop_one = || match end {
            End::Head => list.pop_front(),
            End::Tail => list.pop_back(),
        };
        let mut popped = Vec::new();
        for _ in 0..how_many.unwrap_or(1) {
            match pop_one() {
                Some(item) => popped.push(item),
                None => break,
            }
        }
        effects.extend(popped.iter().map(|value| KeyEffect::ListRemoved {
            key: key.to_string(),
            value: value.clone(),
        }));
        let reply = match how_many {
            None => popped.pop().map_or(Reply::Nil, Reply::Bulk),
            Some(_) => Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
        };
        self.delete_if_empty(key, effects);
        reply
    }

    /// `LREM`: removes up to `|n|` elements equal to `value`, scanning from the head when `n > 0`
    /// and from the tail when `n < 0`; `n == 0` removes all of them.
    fn lrem(
        &mut self,
        key: &str,
        n: i64,
        value: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let list = match self.list(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Int(0),
            Ok(Some(list)) => list,
        };
        let limit = if n == 0 { u64::MAX } else { n.unsigned_abs() };
        let mut removed: u64 = 0;
        let mut kept = VecDeque::with_capacity(list.len());
        if n < 0 {
            while let Some(item) = list.pop_back() {
                if removed < limit && item == value {
                    removed += 1;
                } else {
                    kept.push_front(item);
                }
            }
        } else {
            while let Some(item) = list.pop_front() {
                if removed < limit && item == value {
                    removed += 1;
                } else {
                    kept.push_back(item);
                }
            }
        }
        *list = kept;
        effects.extend((0..removed).map(|_| KeyEffect::ListRemoved {
            key: key.to_string(),
            value: value.to_string(),
        }));
        self.delete_if_empty(key, effects);
        Reply::Int(i64::try_from(removed).unwrap_or(i64::MAX))
    }

    /// `ZADD` (plain form): pairs are applied in turn, so a member named twice ends with its last
    /// score and counts once as new.
    fn zadd(
        &mut self,
        key: &str,
        members: &[(Score, String)],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        if members.is_empty() {
            return Reply::Error("ERR wrong number of arguments for 'zadd' command".into());
        }
        let zset = match self.typed_or_create(key, now_ms, effects, Value::zset_mut, empty_zset) {
            Ok(zset) => zset,
            Err(reply) => return reply,
        };
        let mut added = 0;
        for (score, member) in members {
            if zset.insert(*score, member) {
                added += 1;
            }
        }
        Reply::Int(added)
    }

    fn zrem(
        &mut self,
        key: &str,
        members: &[String],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let zset = match self.zset(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Int(0),
            Ok(Some(zset)) => zset,
        };
        let removed = members.iter().filter(|member| zset.remove(member)).count();
        self.delete_if_empty(key, effects);
        Reply::Int(count(removed))
    }

    fn expire_due(&mut self, now_ms: u64, effects: &mut Vec<KeyEffect>) {
        // Key order, so the effects come out the same on every replay.
        let due: Vec<String> = self
            .data
            .iter()
            .filter(|(_, entry)| entry.is_expired(now_ms))
            .map(|(key, _)| key.clone())
            .collect();
        for key in due {
            if let Some((key, entry)) = self.data.remove_entry(key.as_str()) {
                effects.push(KeyEffect::Expired {
                    key,
                    value: entry.value.into_string(),
                });
            }
        }
    }
}

/// Which end of a list a push or pop works on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Head,
    Tail,
}

fn wrongtype() -> Reply {
    Reply::Error(WRONGTYPE.into())
}

fn empty_hash() -> Value {
    Value::Hash(Vec::new())
}

fn empty_list() -> Value {
    Value::List(VecDeque::new())
}

fn empty_zset() -> Value {
    Value::ZSet(SortedSet::default())
}

fn hash_get<'a>(hash: &'a [(String, String)], field: &str) -> Option<&'a str> {
    hash.iter()
        .find(|(f, _)| f == field)
        .map(|(_, value)| value.as_str())
}

/// Writes `field` in place (an existing field keeps its position, as in a listpack) or appends
/// it; true if it is new.
fn hash_set(hash: &mut Vec<(String, String)>, field: &str, value: &str) -> bool {
    match hash.iter_mut().find(|(f, _)| f == field) {
        Some((_, old)) => {
            value.clone_into(old);
            false
        }
        None => {
            hash.push((field.to_owned(), value.to_owned()));
            true
        }
    }
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

/// A sorted-set range reply: members, each followed by its score when `with_scores` (RESP2 sends
/// scores as bulk strings, formatted as Redis formats doubles).
fn scored_members<'a>(members: impl Iterator<Item = (&'a str, Score)>, with_scores: bool) -> Reply {
    let mut items = Vec::new();
    for (member, score) in members {
        items.push(Reply::Bulk(member.to_owned()));
        if with_scores {
            items.push(Reply::Bulk(format_double(score.get())));
        }
    }
    Reply::Array(items)
}

/// Redis keeps times as signed 64-bit milliseconds; a clock past that is not a real clock, so
/// saturating is only there to keep the arithmetic total.
fn signed(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The absolute deadline `px` ms after `now_ms`, or `None` where Redis answers "invalid expire
/// time": a non-positive `px` or a deadline past the signed 64-bit range.
fn deadline_after(now_ms: u64, px: u64) -> Option<u64> {
    let px = i64::try_from(px).ok().filter(|&px| px > 0)?;
    signed(now_ms).checked_add(px).map(i64::unsigned_abs)
}

/// A simulated Redis server.
///
/// `EVAL` runs on the thread's Lua engine (see `lua.rs`), which keeps every script compiled by its
/// SHA1 like Redis's script cache; no script can leave state in it for the next one, so the
/// model holds none of it.
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
            },
        }
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
        lua::eval(&mut self.keyspace, script, keys, args, now_ms, effects)
    }

    /// Active expiry: remove every key whose deadline has passed at `now_ms` (emit `Expired`
    /// effects). Redis does this by sampling in the background; when it runs is the harness's
    /// choice, which is what makes it deterministic here.
    pub fn expire_due(&mut self, now_ms: u64, effects: &mut Vec<KeyEffect>) {
        self.keyspace.expire_due(now_ms, effects);
    }

    /// The earliest deadline of any key (server ms), expired or not: the active expiry cycle has
    /// nothing to do before it.
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.keyspace
            .data
            .values()
            .filter_map(|entry| entry.expires_at_ms)
            .min()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::parse::parse_command;

    /// A command from a Redis command line (space-separated, no quoting).
    fn cmd(line: &str) -> Command {
        let argv: Vec<String> = line.split(' ').map(String::from).collect();
        parse_command(&argv).unwrap()
    }

    /// Runs `line` at `now`, returning the reply and the effects it produced.
    fn run(m: &mut RedisModel, line: &str, now: u64) -> (Reply, Vec<KeyEffect>) {
        let mut effects = Vec::new();
        let reply = m.apply(&cmd(line), now, &mut effects);
        (reply, effects)
    }

    fn reply(m: &mut RedisModel, line: &str, now: u64) -> Reply {
        run(m, line, now).0
    }

    fn ok() -> Reply {
        Reply::Status("OK".into())
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.into())
    }

    #[test]
    fn set_nx_fails_when_key_exists_and_succeeds_after_expiry() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "SET lock a NX PX 100", 1_000), ok());
        assert_eq!(reply(&mut m, "SET lock b NX PX 100", 1_050), Reply::Nil);
        // At the deadline itself the key is still there (Redis expires at now > when)...
        assert_eq!(reply(&mut m, "SET lock b NX PX 100", 1_100), Reply::Nil);
        assert_eq!(reply(&mut m, "GET lock", 1_100), bulk("a"));
        // ...and one millisecond later it is gone.
        let (r, effects) = run(&mut m, "SET lock b NX PX 100", 1_101);
        assert_eq!(r, ok());
        assert_eq!(
            effects,
            vec![
                KeyEffect::Expired {
                    key: "lock".into(),
                    value: Some("a".into())
                },
                KeyEffect::Set {
                    key: "lock".into(),
                    value: "b".into(),
                    expires_at_ms: Some(1_201)
                },
            ]
        );
        assert_eq!(reply(&mut m, "GET lock", 1_101), bulk("b"));
    }

    #[test]
    fn set_xx_only_overwrites_an_existing_key() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "SET k v XX", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "EXISTS k", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "SET k v", 0), ok());
        assert_eq!(reply(&mut m, "SET k w XX", 0), ok());
        assert_eq!(reply(&mut m, "GET k", 0), bulk("w"));
    }

    #[test]
    fn set_get_returns_the_old_value_even_when_nx_aborts() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "SET k a GET", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "SET k b GET", 0), bulk("a"));
        // Redis 7 replies with the old value, not nil, when NX stops the write.
        let (r, effects) = run(&mut m, "SET k c NX GET", 0);
        assert_eq!(r, bulk("b"));
        assert!(effects.is_empty());
        assert_eq!(reply(&mut m, "SET k d XX GET", 0), bulk("b"));
        assert_eq!(reply(&mut m, "SET other d XX GET", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "EXISTS other", 0), Reply::Int(0));
    }

    #[test]
    fn set_without_px_clears_a_previous_expiry() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k a PX 100", 0);
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(100));
        let (_, effects) = run(&mut m, "SET k b", 10);
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "k".into(),
                value: "b".into(),
                expires_at_ms: None
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 10), Reply::Int(-1));
        assert_eq!(reply(&mut m, "GET k", 1_000_000), bulk("b"));
    }

    #[test]
    fn set_rejects_an_invalid_expire_time_before_touching_the_key() {
        let mut m = RedisModel::new();
        let zero_px = Command::Set {
            key: "k".into(),
            value: "v".into(),
            options: SetOptions {
                px: Some(0),
                ..Default::default()
            },
        };
        let overflow = Command::Set {
            key: "k".into(),
            value: "v".into(),
            options: SetOptions {
                px: Some(i64::MAX as u64),
                ..Default::default()
            },
        };
        let mut effects = Vec::new();
        for bad in [zero_px, overflow] {
            assert_eq!(
                m.apply(&bad, 5, &mut effects),
                Reply::Error("ERR invalid expire time in 'set' command".into())
            );
        }
        assert!(effects.is_empty());
        assert!(m.is_empty());
    }

    #[test]
    fn get_returns_bulk_or_nil() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "GET k", 0), Reply::Nil);
        reply(&mut m, "SET k v", 0);
        assert_eq!(reply(&mut m, "GET k", 0), bulk("v"));
    }

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
    fn pexpire_on_a_missing_key_replies_zero() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "PEXPIRE k 100", 0);
        assert_eq!(r, Reply::Int(0));
        assert!(effects.is_empty());
    }

    #[test]
    fn pexpire_sets_an_absolute_deadline_and_emits_expiry_changed() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k v", 0);
        let (r, effects) = run(&mut m, "PEXPIRE k 100", 50);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "k".into(),
                expires_at_ms: Some(150)
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 100), Reply::Int(50));
        // Extending replaces the deadline (it may also shorten it).
        reply(&mut m, "PEXPIRE k 10", 100);
        assert_eq!(reply(&mut m, "PTTL k", 100), Reply::Int(10));
        assert_eq!(reply(&mut m, "GET k", 111), Reply::Nil);
    }

    #[test]
    fn pexpire_with_non_positive_ms_deletes_the_key_at_once() {
        for ms in ["0", "-5"] {
            let mut m = RedisModel::new();
            reply(&mut m, "SET k v PX 1000", 0);
            let (r, effects) = run(&mut m, &format!("PEXPIRE k {ms}"), 10);
            assert_eq!(r, Reply::Int(1), "PEXPIRE k {ms}");
            assert_eq!(
                effects,
                vec![KeyEffect::Deleted {
                    key: "k".into(),
                    value: Some("v".into())
                }]
            );
            assert!(m.is_empty());
        }
    }

    #[test]
    fn pexpire_rejects_a_deadline_that_overflows_even_for_a_missing_key() {
        let mut m = RedisModel::new();
        let big = format!("PEXPIRE k {}", i64::MAX);
        assert_eq!(
            reply(&mut m, &big, 1),
            Reply::Error("ERR invalid expire time in 'pexpire' command".into())
        );
        reply(&mut m, "SET k v", 1);
        assert!(matches!(reply(&mut m, &big, 1), Reply::Error(_)));
        assert_eq!(reply(&mut m, "PTTL k", 1), Reply::Int(-1));
    }

    #[test]
    fn pttl_reports_minus_two_minus_one_or_the_remaining_ms() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(-2));
        reply(&mut m, "SET k v", 0);
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(-1));
        reply(&mut m, "SET k v PX 100", 1_000);
        assert_eq!(reply(&mut m, "PTTL k", 1_030), Reply::Int(70));
        assert_eq!(reply(&mut m, "PTTL k", 1_100), Reply::Int(0));
        assert_eq!(reply(&mut m, "PTTL k", 1_101), Reply::Int(-2));
    }

    #[test]
    fn incr_starts_from_zero_and_keeps_the_expiry() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "INCR n", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "n".into(),
                value: "1".into(),
                expires_at_ms: None
            }]
        );
        reply(&mut m, "SET n 41 PX 100", 0);
        let (r, effects) = run(&mut m, "INCR n", 10);
        assert_eq!(r, Reply::Int(42));
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "n".into(),
                value: "42".into(),
                expires_at_ms: Some(100)
            }]
        );
        assert_eq!(reply(&mut m, "PTTL n", 10), Reply::Int(90));
        assert_eq!(reply(&mut m, "GET n", 10), bulk("42"));
        // After expiry the counter starts again from zero.
        assert_eq!(reply(&mut m, "INCR n", 101), Reply::Int(1));
        reply(&mut m, "SET neg -5", 0);
        assert_eq!(reply(&mut m, "INCR neg", 0), Reply::Int(-4));
    }

    #[test]
    fn incr_rejects_what_redis_does_not_read_as_an_integer() {
        let mut m = RedisModel::new();
        for bad in [
            "abc",
            "",
            "+1",
            "01",
            "-0",
            "-",
            " 1",
            "1 ",
            "1.0",
            "99999999999999999999",
        ] {
            m.apply(
                &Command::Set {
                    key: "n".into(),
                    value: bad.into(),
                    options: SetOptions::default(),
                },
                0,
                &mut Vec::new(),
            );
            let (r, effects) = run(&mut m, "INCR n", 0);
            assert_eq!(r, Reply::Error(NOT_AN_INTEGER.into()), "INCR on {bad:?}");
            assert!(effects.is_empty());
            assert_eq!(reply(&mut m, "GET n", 0), bulk(bad));
        }
        reply(&mut m, &format!("SET n {}", i64::MAX), 0);
        assert_eq!(
            reply(&mut m, "INCR n", 0),
            Reply::Error("ERR increment or decrement would overflow".into())
        );
        reply(&mut m, &format!("SET n {}", i64::MIN), 0);
        assert_eq!(reply(&mut m, "INCR n", 0), Reply::Int(i64::MIN + 1));
        reply(&mut m, "SET n 0", 0);
        assert_eq!(reply(&mut m, "INCR n", 0), Reply::Int(1));
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
    fn expire_due_removes_only_keys_past_their_deadline_in_key_order() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET b 2 PX 10", 0);
        reply(&mut m, "SET a 1 PX 5", 0);
        reply(&mut m, "SET c 3 PX 20", 0);
        reply(&mut m, "SET d 4", 0);
        let mut effects = Vec::new();
        m.expire_due(10, &mut effects);
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "a".into(),
                value: Some("1".into())
            }]
        );
        effects.clear();
        m.expire_due(100, &mut effects);
        assert_eq!(
            effects,
            vec![
                KeyEffect::Expired {
                    key: "b".into(),
                    value: Some("2".into())
                },
                KeyEffect::Expired {
                    key: "c".into(),
                    value: Some("3".into())
                },
            ]
        );
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn snapshot_restore_keeps_absolute_deadlines() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET lock owner PX 100", 1_000);
        reply(&mut m, "SET counter 7", 1_000);
        let snap = m.snapshot();
        assert_eq!(RedisModel::restore(snap.clone()).snapshot(), snap);

        // Restarted before the deadline: the remaining time is measured on the same clock.
        let mut early = RedisModel::restore(snap.clone());
        assert_eq!(reply(&mut early, "PTTL lock", 1_060), Reply::Int(40));

        // Restarted after the deadline: the key is still in the data set until it is touched.
        let mut late = RedisModel::restore(snap);
        assert_eq!(late.len(), 2);
        let (r, effects) = run(&mut late, "GET lock", 5_000);
        assert_eq!(r, Reply::Nil);
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "lock".into(),
                value: Some("owner".into())
            }]
        );
        assert_eq!(reply(&mut late, "GET counter", 5_000), bulk("7"));
    }

    #[test]
    fn lazy_expiry_reports_each_key_once() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k v PX 1", 0);
        assert_eq!(m.len(), 1, "nothing expires without an access");
        let (_, first) = run(&mut m, "GET k", 2);
        let (_, second) = run(&mut m, "GET k", 3);
        assert_eq!(first.len(), 1);
        assert!(second.is_empty());
        let mut effects = Vec::new();
        m.expire_due(10, &mut effects);
        assert!(effects.is_empty());
    }

    #[test]
    fn expiry_follows_the_servers_clock_even_when_it_jumps_back() {
        // A server clock that jumps back before anyone touched the key makes it live again, as it
        // would on a real server: deadlines are wall-clock instants.
        let mut m = RedisModel::new();
        reply(&mut m, "SET lock a PX 100", 1_000);
        let mut effects = Vec::new();
        m.expire_due(1_050, &mut effects);
        assert!(effects.is_empty());
        assert_eq!(reply(&mut m, "PTTL lock", 900), Reply::Int(200));
        // A forward jump expires it at once.
        assert_eq!(reply(&mut m, "SET lock b NX PX 100", 60_000), ok());
    }

    fn array(items: &[&str]) -> Reply {
        Reply::Array(items.iter().map(|s| bulk(s)).collect())
    }

    fn field(key: &str, field: &str, value: Option<&str>) -> KeyEffect {
        KeyEffect::HashField {
            key: key.into(),
            field: field.into(),
            value: value.map(String::from),
        }
    }

    fn deleted(key: &str) -> KeyEffect {
        KeyEffect::Deleted {
            key: key.into(),
            value: None,
        }
    }

    // ---- hashes ----

    #[test]
    fn hset_counts_only_new_fields_and_reports_every_field_write() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "HSET h a 1 b 2", 0);
        assert_eq!(r, Reply::Int(2));
        assert_eq!(
            effects,
            vec![field("h", "a", Some("1")), field("h", "b", Some("2"))]
        );
        // An update is reported but not counted; a field named twice counts once.
        let (r, effects) = run(&mut m, "HSET h a 9 c 3 c 4", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![
                field("h", "a", Some("9")),
                field("h", "c", Some("3")),
                field("h", "c", Some("4")),
            ]
        );
        assert_eq!(reply(&mut m, "HGET h a", 0), bulk("9"));
        assert_eq!(reply(&mut m, "HGET h c", 0), bulk("4"));
        assert_eq!(reply(&mut m, "HGET h nope", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "HGET missing a", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "HLEN h", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "HLEN missing", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "HEXISTS h b", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "HEXISTS h nope", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "HEXISTS missing b", 0), Reply::Int(0));
    }

    #[test]
    fn hgetall_lists_fields_in_insertion_order_with_updates_in_place() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "HGETALL h", 0), Reply::Array(Vec::new()));
        reply(&mut m, "HSET h z 1 a 2 m 3", 0);
        reply(&mut m, "HSET h a 20", 0);
        assert_eq!(
            reply(&mut m, "HGETALL h", 0),
            array(&["z", "1", "a", "20", "m", "3"])
        );
        // A deleted and re-added field goes to the end, as in a listpack.
        reply(&mut m, "HDEL h z", 0);
        reply(&mut m, "HSET h z 4", 0);
        assert_eq!(
            reply(&mut m, "HGETALL h", 0),
            array(&["a", "20", "m", "3", "z", "4"])
        );
    }

    #[test]
    fn hincrby_creates_the_hash_and_counts_up_and_down_to_zero_without_deleting() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "HINCRBY lock owner 1", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![field("lock", "owner", Some("1"))]);
        assert_eq!(reply(&mut m, "HINCRBY lock owner 1", 0), Reply::Int(2));
        assert_eq!(reply(&mut m, "HINCRBY lock owner -1", 0), Reply::Int(1));
        let (r, effects) = run(&mut m, "HINCRBY lock owner -1", 0);
        assert_eq!(r, Reply::Int(0));
        assert_eq!(effects, vec![field("lock", "owner", Some("0"))]);
        // HINCRBY never removes a field: the hash still holds owner=0.
        assert_eq!(reply(&mut m, "EXISTS lock", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "HGET lock owner", 0), bulk("0"));
        assert_eq!(reply(&mut m, "HINCRBY lock owner -1", 0), Reply::Int(-1));
    }

    #[test]
    fn hash_writes_keep_the_keys_deadline() {
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h f 1", 0);
        reply(&mut m, "PEXPIRE h 100", 0);
        reply(&mut m, "HSET h g 2", 10);
        reply(&mut m, "HINCRBY h f 5", 20);
        reply(&mut m, "HDEL h g", 30);
        assert_eq!(reply(&mut m, "PTTL h", 50), Reply::Int(50));
    }

    #[test]
    fn hincrby_rejects_a_non_integer_field_and_overflow() {
        let mut m = RedisModel::new();
        for bad in ["abc", "01", "+1", "1.5", ""] {
            m.apply(
                &Command::HSet {
                    key: "h".into(),
                    fields: vec![("f".into(), bad.into())],
                },
                0,
                &mut Vec::new(),
            );
            let (r, effects) = run(&mut m, "HINCRBY h f 1", 0);
            assert_eq!(
                r,
                Reply::Error("ERR hash value is not an integer".into()),
                "{bad:?}"
            );
            assert!(effects.is_empty());
        }
        reply(&mut m, &format!("HSET h f {}", i64::MAX), 0);
        assert_eq!(
            reply(&mut m, "HINCRBY h f 1", 0),
            Reply::Error("ERR increment or decrement would overflow".into())
        );
        assert_eq!(reply(&mut m, "HGET h f", 0), bulk(&i64::MAX.to_string()));
    }

    #[test]
    fn hdel_of_the_last_field_deletes_the_key() {
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h a 1 b 2", 0);
        let (r, effects) = run(&mut m, "HDEL h a nope a", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![field("h", "a", None)]);
        let (r, effects) = run(&mut m, "HDEL h b", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![field("h", "b", None), deleted("h")]);
        assert!(m.is_empty());
        assert_eq!(reply(&mut m, "HDEL h b", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "EXISTS h", 0), Reply::Int(0));
    }

    // ---- lists ----

    #[test]
    fn rpush_then_lpop_is_fifo_and_popping_the_last_element_deletes_the_key() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "RPUSH q a b", 0);
        assert_eq!(r, Reply::Int(2));
        let pushed = |v: &str| KeyEffect::ListPushed {
            key: "q".into(),
            value: v.into(),
        };
        assert_eq!(
            effects,
            vec![pushed("a"), pushed("b")],
            "queue order is reported"
        );
        assert_eq!(reply(&mut m, "RPUSH q c", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LLEN q", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LPOP q", 0), bulk("a"));
        assert_eq!(reply(&mut m, "LPOP q", 0), bulk("b"));
        let (r, effects) = run(&mut m, "LPOP q", 0);
        assert_eq!(r, bulk("c"));
        let popped = KeyEffect::ListRemoved {
            key: "q".into(),
            value: "c".into(),
        };
        assert_eq!(effects, vec![popped, deleted("q")]);
        assert!(m.is_empty());
        assert_eq!(reply(&mut m, "LPOP q", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "RPOP q", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "LLEN q", 0), Reply::Int(0));
    }

    #[test]
    fn lpush_pushes_each_value_to_the_head_in_turn_and_rpop_takes_the_tail() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "LPUSH l a b c", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["c", "b", "a"]));
        assert_eq!(reply(&mut m, "RPOP l", 0), bulk("a"));
    }

    #[test]
    fn pop_with_a_count_replies_with_an_array() {
        let mut m = RedisModel::new();
        // A missing key gives a null array, which is nil here (false in Lua, as with RESP2).
        assert_eq!(reply(&mut m, "LPOP l 2", 0), Reply::Nil);
        reply(&mut m, "RPUSH l a b c d", 0);
        assert_eq!(reply(&mut m, "LPOP l 0", 0), Reply::Array(Vec::new()));
        assert_eq!(reply(&mut m, "LPOP l 2", 0), array(&["a", "b"]));
        let (r, effects) = run(&mut m, "RPOP l 5", 0);
        assert_eq!(r, array(&["d", "c"]));
        let removed = |v: &str| KeyEffect::ListRemoved {
            key: "l".into(),
            value: v.into(),
        };
        assert_eq!(effects, vec![removed("d"), removed("c"), deleted("l")]);
    }

    #[test]
    fn lindex_counts_negative_indices_from_the_tail() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "LINDEX l 0", 0), Reply::Nil);
        reply(&mut m, "RPUSH l a b c", 0);
        assert_eq!(reply(&mut m, "LINDEX l 0", 0), bulk("a"));
        assert_eq!(reply(&mut m, "LINDEX l 2", 0), bulk("c"));
        assert_eq!(reply(&mut m, "LINDEX l 3", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "LINDEX l -1", 0), bulk("c"));
        assert_eq!(reply(&mut m, "LINDEX l -3", 0), bulk("a"));
        assert_eq!(reply(&mut m, "LINDEX l -4", 0), Reply::Nil);
        let min = format!("LINDEX l {}", i64::MIN);
        assert_eq!(reply(&mut m, &min, 0), Reply::Nil);
    }

    #[test]
    fn lrange_clamps_and_counts_from_the_tail_like_redis() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), Reply::Array(Vec::new()));
        reply(&mut m, "RPUSH l a b c d", 0);
        assert_eq!(reply(&mut m, "LRANGE l 1 2", 0), array(&["b", "c"]));
        assert_eq!(reply(&mut m, "LRANGE l -2 -1", 0), array(&["c", "d"]));
        assert_eq!(reply(&mut m, "LRANGE l -100 1", 0), array(&["a", "b"]));
        assert_eq!(reply(&mut m, "LRANGE l 2 100", 0), array(&["c", "d"]));
        assert_eq!(reply(&mut m, "LRANGE l 3 1", 0), Reply::Array(Vec::new()));
        assert_eq!(reply(&mut m, "LRANGE l 4 10", 0), Reply::Array(Vec::new()));
        assert_eq!(reply(&mut m, "LRANGE l 0 -5", 0), Reply::Array(Vec::new()));
    }

    #[test]
    fn lrem_removes_from_the_head_the_tail_or_everywhere() {
        let line = "RPUSH l x a x b x";
        let mut m = RedisModel::new();
        reply(&mut m, line, 0);
        assert_eq!(reply(&mut m, "LREM l 2 x", 0), Reply::Int(2));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["a", "b", "x"]));

        let mut m = RedisModel::new();
        reply(&mut m, line, 0);
        assert_eq!(reply(&mut m, "LREM l -2 x", 0), Reply::Int(2));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["x", "a", "b"]));

        let mut m = RedisModel::new();
        reply(&mut m, line, 0);
        assert_eq!(reply(&mut m, "LREM l 0 x", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["a", "b"]));
        assert_eq!(reply(&mut m, "LREM l 0 nope", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "LREM missing 0 x", 0), Reply::Int(0));

        // Removing every element deletes the key.
        let removed = |v: &str| KeyEffect::ListRemoved {
            key: "l".into(),
            value: v.into(),
        };
        let (r, effects) = run(&mut m, "LREM l 5 a", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![removed("a")]);
        let (r, effects) = run(&mut m, "LREM l -1 b", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![removed("b"), deleted("l")]);
        assert!(m.is_empty());
    }

    // ---- sorted sets ----

    #[test]
    fn zadd_counts_new_members_and_moves_existing_ones() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "ZADD z 1 a 2 b", 0);
        assert_eq!(r, Reply::Int(2));
        assert!(
            effects.is_empty(),
            "sorted sets report no per-member effects"
        );
        // An updated score is not counted; a member named twice ends with its last score.
        assert_eq!(reply(&mut m, "ZADD z 5 a 3 c 4 c", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "ZSCORE z a", 0), bulk("5"));
        assert_eq!(reply(&mut m, "ZSCORE z c", 0), bulk("4"));
        assert_eq!(reply(&mut m, "ZSCORE z nope", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "ZSCORE missing a", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "ZCARD z", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "ZCARD missing", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "ZRANGE z 0 -1", 0), array(&["b", "c", "a"]));
    }

    #[test]
    fn zrange_orders_by_score_then_member_bytes() {
        let mut m = RedisModel::new();
        reply(&mut m, "ZADD z 2 b 1 zz 2 a 2 B 1 y -inf low", 0);
        assert_eq!(
            reply(&mut m, "ZRANGE z 0 -1", 0),
            array(&["low", "y", "zz", "B", "a", "b"])
        );
        assert_eq!(reply(&mut m, "ZRANGE z 1 2", 0), array(&["y", "zz"]));
        assert_eq!(reply(&mut m, "ZRANGE z -2 -1", 0), array(&["a", "b"]));
        assert_eq!(reply(&mut m, "ZRANGE z 5 100", 0), array(&["b"]));
        assert_eq!(reply(&mut m, "ZRANGE z 3 1", 0), Reply::Array(Vec::new()));
        assert_eq!(
            reply(&mut m, "ZRANGE missing 0 -1", 0),
            Reply::Array(Vec::new())
        );
    }

    #[test]
    fn zrange_withscores_formats_scores_as_redis_does() {
        let mut m = RedisModel::new();
        reply(
            &mut m,
            "ZADD z 1.5 a 3 b 1e20 c -inf d 0.1 e 1700000000000 f",
            0,
        );
        assert_eq!(
            reply(&mut m, "ZRANGE z 0 -1 WITHSCORES", 0),
            array(&[
                "d",
                "-inf",
                "e",
                "0.1",
                "a",
                "1.5",
                "b",
                "3",
                "f",
                "1700000000000",
                "c",
                "1e+20"
            ])
        );
        assert_eq!(reply(&mut m, "ZSCORE z d", 0), bulk("-inf"));
    }

    #[test]
    fn zrangebyscore_bounds_are_inclusive_exclusive_or_infinite() {
        let mut m = RedisModel::new();
        assert_eq!(
            reply(&mut m, "ZRANGEBYSCORE z -inf +inf", 0),
            Reply::Array(Vec::new())
        );
        reply(&mut m, "ZADD z 1 a 2 b 2 c 3 d", 0);
        let range = |m: &mut RedisModel, min: &str, max: &str| {
            reply(m, &format!("ZRANGEBYSCORE z {min} {max}"), 0)
        };
        assert_eq!(range(&mut m, "-inf", "+inf"), array(&["a", "b", "c", "d"]));
        assert_eq!(range(&mut m, "2", "3"), array(&["b", "c", "d"]));
        assert_eq!(range(&mut m, "(2", "3"), array(&["d"]));
        assert_eq!(range(&mut m, "1", "(2"), array(&["a"]));
        assert_eq!(range(&mut m, "2", "2"), array(&["b", "c"]));
        assert_eq!(range(&mut m, "(2", "2"), Reply::Array(Vec::new()));
        assert_eq!(range(&mut m, "3", "1"), Reply::Array(Vec::new()));
        assert_eq!(range(&mut m, "1.5", "2.5"), array(&["b", "c"]));
        assert_eq!(range(&mut m, "-inf", "1"), array(&["a"]));
        assert_eq!(range(&mut m, "3", "inf"), array(&["d"]));
        assert_eq!(
            reply(&mut m, "ZRANGEBYSCORE z (1 2 WITHSCORES", 0),
            array(&["b", "2", "c", "2"])
        );
    }

    #[test]
    fn zrem_of_the_last_member_deletes_the_key() {
        let mut m = RedisModel::new();
        reply(&mut m, "ZADD z 1 a 2 b", 0);
        assert_eq!(reply(&mut m, "ZREM z a nope a", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "ZRANGE z 0 -1", 0), array(&["b"]));
        let (r, effects) = run(&mut m, "ZREM z b", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![deleted("z")]);
        assert!(m.is_empty());
        assert_eq!(reply(&mut m, "ZREM z b", 0), Reply::Int(0));
    }

    #[test]
    fn zadd_treats_minus_zero_as_the_same_score() {
        let mut m = RedisModel::new();
        reply(&mut m, "ZADD z -0 a", 0);
        assert_eq!(reply(&mut m, "ZADD z 0 a", 0), Reply::Int(0));
        // Redis's zsetAdd sees no change and keeps the stored -0.
        assert_eq!(reply(&mut m, "ZSCORE z a", 0), bulk("-0"));
    }

    // ---- across types ----

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
        ];
        let string_cmds = ["GET {}", "INCR {}", "SET {} x GET"];
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
    fn a_hash_expires_lazily_and_actively_after_pexpire() {
        let mut m = RedisModel::new();
        reply(&mut m, "HINCRBY lock owner 1", 1_000);
        let (r, effects) = run(&mut m, "PEXPIRE lock 100", 1_000);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "lock".into(),
                expires_at_ms: Some(1_100)
            }]
        );
        assert_eq!(reply(&mut m, "HGET lock owner", 1_100), bulk("1"));
        // Lazily: the next access after the deadline finds nothing, and reports the expiry.
        let (r, effects) = run(&mut m, "HEXISTS lock owner", 1_101);
        assert_eq!(r, Reply::Int(0));
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "lock".into(),
                value: None
            }]
        );
        // A new HINCRBY starts a fresh hash without a deadline.
        assert_eq!(reply(&mut m, "HINCRBY lock owner 1", 1_101), Reply::Int(1));
        assert_eq!(reply(&mut m, "PTTL lock", 1_101), Reply::Int(-1));

        // Actively, for every aggregate type.
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h f v", 0);
        reply(&mut m, "RPUSH l a", 0);
        reply(&mut m, "ZADD z 1 a", 0);
        for key in ["h", "l", "z"] {
            reply(&mut m, &format!("PEXPIRE {key} 10"), 0);
        }
        let mut effects = Vec::new();
        m.expire_due(11, &mut effects);
        let expired = |key: &str| KeyEffect::Expired {
            key: key.into(),
            value: None,
        };
        assert_eq!(effects, vec![expired("h"), expired("l"), expired("z")]);
        assert!(m.is_empty());
    }

    #[test]
    fn expire_takes_seconds_and_rejects_overflow() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "EXPIRE k 10", 0), Reply::Int(0));
        reply(&mut m, "RPUSH k a", 0);
        let (r, effects) = run(&mut m, "EXPIRE k 10", 500);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "k".into(),
                expires_at_ms: Some(10_500)
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 500), Reply::Int(10_000));
        let err = Reply::Error("ERR invalid expire time in 'expire' command".into());
        assert_eq!(
            reply(&mut m, &format!("EXPIRE k {}", i64::MAX / 1000 + 1), 0),
            err
        );
        // Fits in milliseconds, but not once the clock is added.
        assert_eq!(
            reply(&mut m, &format!("EXPIRE k {}", i64::MAX / 1000), 1_000),
            err
        );
        // Zero or negative deletes at once.
        let (r, effects) = run(&mut m, "EXPIRE k 0", 600);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![deleted("k")]);
    }

    #[test]
    fn publish_replies_zero_and_touches_nothing() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET chan v", 0);
        let (r, effects) = run(&mut m, "PUBLISH chan hello", 0);
        assert_eq!(r, Reply::Int(0));
        assert!(effects.is_empty());
        assert_eq!(reply(&mut m, "GET chan", 0), bulk("v"));
        assert!(!cmd("PUBLISH chan hello").is_write());
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
