//! A simulated Redis server: the keyspace and the semantics of the commands lock algorithms use,
//! as a pure state machine.
//!
//! Nothing here does I/O, reads a clock or draws a random number: the caller passes the server's
//! wall clock into every call, so the same inputs always give the same replies and effects, which
//! is what lets a failing simulation be replayed. The semantics follow Redis 7's own code
//! (`t_string.c`, `expire.c`, `db.c`), because the point of the model is that a lock algorithm
//! that is wrong against a real server is wrong here too, and one that is right here is not right
//! only because the model is kinder than Redis.
//!
//! Iteration order matters for replay, so every collection is a `BTreeMap`.

use lockcheck_algorithms::redis::command::{Command, Reply, SetOptions};

use std::collections::BTreeMap;
use std::fmt;

use super::lua;

/// Something the server did to a key. The harness logs these so the checker can see, e.g., which
/// client's request deleted a lock key and when a key expired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyEffect {
    /// The key was written: by `SET`, or by `INCR` (which keeps the key's deadline).
    Set {
        /// The key.
        key: String,
        /// The value now stored.
        value: String,
        /// The key's absolute deadline on the server's clock, if it has one.
        expires_at_ms: Option<u64>,
    },
    /// The key was removed by a command: `DEL`, or `PEXPIRE` with a deadline already past.
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
    /// The key's deadline was set by `PEXPIRE`.
    ExpiryChanged {
        /// The key.
        key: String,
        /// The new absolute deadline on the server's clock.
        expires_at_ms: Option<u64>,
    },
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

/// A stored value. An enum although only strings exist yet, so that hashes, lists and sorted sets
/// can be added without touching every command, and so that each command already checks the type
/// the way Redis does.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Str(String),
    /// Stands in for a hash/list/set in tests, so the `WRONGTYPE` paths are exercised before those
    /// types exist.
    #[cfg(test)]
    Opaque,
}

impl Value {
    fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            #[cfg(test)]
            Value::Opaque => None,
        }
    }

    fn into_string(self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s),
            #[cfg(test)]
            Value::Opaque => None,
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
            Command::PExpire { key, ms } => self.pexpire(key, *ms, now_ms, effects),
            Command::PTtl { key } => self.pttl(key, now_ms, effects),
            Command::Incr { key } => self.incr(key, now_ms, effects),
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
    fn pexpire(&mut self, key: &str, ms: i64, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        let now = signed(now_ms);
        let Some(when) = now.checked_add(ms) else {
            return Reply::Error("ERR invalid expire time in 'pexpire' command".into());
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
                match parse_redis_integer(s) {
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

/// Parses an integer the way Redis's `string2ll` does, which is stricter than `str::parse`: no
/// sign but `-`, no leading zeros, no `-0`, no whitespace, at most 20 characters. A lock's fencing
/// counter stored as `"+1"` or `"01"` must fail `INCR` here exactly as it would on a server.
fn parse_redis_integer(s: &str) -> Option<i64> {
    // LONG_STR_SIZE is 21 in Redis, and strings that long are rejected before parsing.
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == "0" {
        return Some(0);
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    if !matches!(digits.as_bytes().first(), Some(b'1'..=b'9'))
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

/// A simulated Redis server.
///
/// The Lua engine that runs `EVAL` is created on the first script and keeps each script compiled
/// by its SHA1, like Redis's script cache. It makes the model `!Send`: keep a model on the thread
/// (or single-threaded executor) that drives it.
#[derive(Default)]
pub struct RedisModel {
    keyspace: Keyspace,
    lua: Option<lua::Engine>,
}

impl RedisModel {
    /// An empty server, as after a start without persistence.
    pub fn new() -> Self {
        Self::default()
    }

    /// A server restarted from persisted data. The deadlines are absolute, so a key whose
    /// deadline passed while the server was down is expired on its first access, as in Redis.
    /// The script cache starts empty, as it does after a real restart.
    pub fn restore(snapshot: Snapshot) -> Self {
        RedisModel {
            keyspace: Keyspace {
                data: snapshot.data,
            },
            lua: None,
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
        let engine = match &mut self.lua {
            Some(engine) => engine,
            None => match lua::Engine::new() {
                Ok(engine) => self.lua.insert(engine),
                Err(err) => {
                    return Reply::Error(format!("ERR cannot start the Lua engine: {err}"));
                }
            },
        };
        engine.eval(&mut self.keyspace, script, keys, args, now_ms, effects)
    }

    /// Active expiry: remove every key whose deadline has passed at `now_ms` (emit `Expired`
    /// effects). Redis does this by sampling in the background; when it runs is the harness's
    /// choice, which is what makes it deterministic here.
    pub fn expire_due(&mut self, now_ms: u64, effects: &mut Vec<KeyEffect>) {
        self.keyspace.expire_due(now_ms, effects);
    }

    /// The number of keys held, counting keys past their deadline that have not been removed yet
    /// (as Redis's `DBSIZE` does).
    pub fn len(&self) -> usize {
        self.keyspace.data.len()
    }

    /// Whether no key is held (see [`RedisModel::len`]).
    pub fn is_empty(&self) -> bool {
        self.keyspace.data.is_empty()
    }

    /// Makes `key` hold a value of a type no command here reads as a string.
    #[cfg(test)]
    pub(crate) fn plant_non_string(&mut self, key: &str) {
        self.keyspace.data.insert(
            key.to_owned(),
            Entry {
                value: Value::Opaque,
                expires_at_ms: None,
            },
        );
    }

    /// How many scripts the Lua engine holds compiled.
    #[cfg(test)]
    pub(crate) fn cached_scripts(&self) -> usize {
        self.lua.as_ref().map_or(0, lua::Engine::cached_scripts)
    }
}

impl fmt::Debug for RedisModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisModel")
            .field("data", &self.keyspace.data)
            .field("lua_started", &self.lua.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command from a Redis command line (space-separated, no quoting).
    fn cmd(line: &str) -> Command {
        let argv: Vec<String> = line.split(' ').map(String::from).collect();
        Command::parse(&argv).unwrap()
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
        m.plant_non_string("h");
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
        m.plant_non_string("h");
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

    #[test]
    fn redis_integer_parsing_matches_string2ll() {
        assert_eq!(parse_redis_integer("0"), Some(0));
        assert_eq!(parse_redis_integer("-1"), Some(-1));
        assert_eq!(parse_redis_integer("123"), Some(123));
        assert_eq!(parse_redis_integer("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_redis_integer("9223372036854775808"), None);
        assert_eq!(parse_redis_integer("00"), None);
    }
}
