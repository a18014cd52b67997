//! Redis commands and replies at the level of the protocol.
//!
//! A [`Command`] is what a lock algorithm asks of a Redis server; a [`Reply`] is the RESP value that
//! comes back. Both are plain data so that the simulated server (a state machine), the real client
//! (a thin mapping onto the `redis` crate) and `redis.call` inside a Lua script all speak the same
//! language: a script's `redis.call('SET', …)` is parsed (by the simulator, which is the only
//! reader of argument vectors: `lockcheck_sim::redis::parse`) into the very value the algorithm
//! code would have built.

use std::fmt;
use std::sync::Arc;

/// A Lua script, kept as its text and its SHA1 (what `EVALSHA` names it by).
///
/// The text is written once, in the algorithm, and run unchanged by both the simulated server and a
/// real `redis-server`, so the two worlds cannot disagree about what a script does.
#[derive(Clone, PartialEq, Eq)]
pub struct Script {
    /// The Lua source.
    pub source: Arc<str>,
    /// Lower-case hex SHA1 of `source`, as Redis computes it.
    pub sha1: Arc<str>,
    /// A user's script (`redis-script`): the simulated server refuses its commands on keys not
    /// passed in `KEYS`, as Redis Cluster would. lockcheck's own scripts are Redis's and
    /// Redisson's, run as a standalone Redis runs them.
    pub keys_declared: bool,
}

impl Script {
    /// Wraps Lua source and computes its SHA1.
    pub fn new(source: &str) -> Self {
        Script {
            source: Arc::from(source),
            sha1: Arc::from(sha1_smol::Sha1::from(source).digest().to_string().as_str()),
            keys_declared: false,
        }
    }

    /// A user's script: as [`Script::new`], held to touching only the keys in its `KEYS`.
    pub fn user(source: &str) -> Self {
        Script {
            keys_declared: true,
            ..Script::new(source)
        }
    }
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Script({})", &self.sha1[..12])
    }
}

/// Options of `SET` (Redis 7's, but for none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetOptions {
    /// `NX`: only set if the key does not exist.
    pub nx: bool,
    /// `XX`: only set if the key exists.
    pub xx: bool,
    /// `PX ms`: expire after this many milliseconds (`EX s` is parsed into this too).
    pub px: Option<u64>,
    /// `GET`: reply with the old value instead of `OK`.
    pub get: bool,
    /// `PXAT unix-ms`: expire at this instant of the server's wall clock (`EXAT s` is parsed
    /// into this too). At most one of `px` and `pxat`.
    pub pxat: Option<u64>,
    /// `KEEPTTL`: keep the deadline the key already has (never with `px` or `pxat`).
    pub keep_ttl: bool,
}

/// Which command of the `EXPIRE` family a [`Command::Expiry`] is: they differ in the unit of
/// their time argument and in whether it is counted from now or from the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireCommand {
    /// `EXPIRE key seconds`.
    Expire,
    /// `PEXPIRE key ms`.
    PExpire,
    /// `EXPIREAT key unix-seconds`.
    ExpireAt,
    /// `PEXPIREAT key unix-ms`.
    PExpireAt,
}

impl ExpireCommand {
    /// The command's name, as Redis spells it in `to_argv` (upper case).
    pub fn name(self) -> &'static str {
        match self {
            ExpireCommand::Expire => "EXPIRE",
            ExpireCommand::PExpire => "PEXPIRE",
            ExpireCommand::ExpireAt => "EXPIREAT",
            ExpireCommand::PExpireAt => "PEXPIREAT",
        }
    }

    /// Whether its time argument is in seconds (else milliseconds).
    pub fn in_seconds(self) -> bool {
        matches!(self, ExpireCommand::Expire | ExpireCommand::ExpireAt)
    }

    /// Whether its time argument is an instant (else a span from now).
    pub fn absolute(self) -> bool {
        matches!(self, ExpireCommand::ExpireAt | ExpireCommand::PExpireAt)
    }
}

/// The conditions Redis 7 added to the `EXPIRE` family. Redis accepts each once or more, and
/// `XX` with `GT` or `LT`; `NX` with any other, and `GT` with `LT`, are errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireOptions {
    /// `NX`: only if the key has no deadline.
    pub nx: bool,
    /// `XX`: only if the key has a deadline.
    pub xx: bool,
    /// `GT`: only if the new deadline is later than the key's (a key without one never is).
    pub gt: bool,
    /// `LT`: only if the new deadline is earlier than the key's (a key without one always is).
    pub lt: bool,
}

/// A sorted-set score: an `f64` that is never NaN, because Redis refuses NaN scores. That is what
/// lets it be `Eq` and `Ord` (so commands stay comparable and sorted sets can be ordered maps).
/// Equality is numeric, as Redis compares scores: `-0` equals `0`.
#[derive(Clone, Copy, Debug)]
pub struct Score(f64);

impl Score {
    /// The score, or `None` for NaN.
    pub fn new(value: f64) -> Option<Score> {
        (!value.is_nan()).then_some(Score(value))
    }

    /// The number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Never NaN, so `partial_cmp` always answers.
        self.0
            .partial_cmp(&other.0)
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}

/// One end of a `ZRANGEBYSCORE` interval: `1.5` includes the score, `(1.5` excludes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScoreBound {
    /// The score (may be infinite: `-inf`, `+inf`).
    pub score: Score,
    /// Written with a leading `(`.
    pub exclusive: bool,
}

impl ScoreBound {
    /// Whether `score` is on the inner side of this bound taken as a minimum.
    pub fn admits_from_below(self, score: Score) -> bool {
        if self.exclusive {
            score > self.score
        } else {
            score >= self.score
        }
    }

    /// Whether `score` is on the inner side of this bound taken as a maximum.
    pub fn admits_from_above(self, score: Score) -> bool {
        if self.exclusive {
            score < self.score
        } else {
            score <= self.score
        }
    }

    fn to_arg(self) -> String {
        let number = format_double(self.score.get());
        if self.exclusive {
            format!("({number}")
        } else {
            number
        }
    }
}

/// A Redis command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
    Set {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// NX / XX / GET / PX / PXAT / KEEPTTL.
        options: SetOptions,
    },
    /// `GET key`.
    Get {
        /// The key.
        key: String,
    },
    /// `DEL key [key …]`: the number of keys removed.
    Del {
        /// The keys.
        keys: Vec<String>,
    },
    /// `EXISTS key`.
    Exists {
        /// The key.
        key: String,
    },
    /// `PEXPIRE key ms`: 1 if the timeout was set, 0 if the key does not exist.
    PExpire {
        /// The key.
        key: String,
        /// Milliseconds from now (the server's wall clock).
        ms: i64,
    },
    /// `PTTL key`: remaining milliseconds, -1 without expiry, -2 when absent.
    PTtl {
        /// The key.
        key: String,
    },
    /// `INCR key`.
    Incr {
        /// The key.
        key: String,
    },
    /// `EXPIRE key seconds`: `PEXPIRE` in seconds (the plain form; with conditions it is a
    /// [`Command::Expiry`]).
    Expire {
        /// The key.
        key: String,
        /// Seconds from now (the server's wall clock).
        seconds: i64,
    },
    /// `EXPIRE`, `PEXPIRE`, `EXPIREAT` or `PEXPIREAT` with Redis 7's conditions, and the
    /// absolute forms without: 1 if the deadline was set (or the key deleted, for a deadline
    /// not in the future), 0 if the key does not exist or a condition failed.
    Expiry {
        /// Which of the four.
        command: ExpireCommand,
        /// The key.
        key: String,
        /// Seconds or milliseconds, from now or from the Unix epoch, as `command` says.
        time: i64,
        /// NX / XX / GT / LT.
        options: ExpireOptions,
    },
    /// `PERSIST key`: 1 if the key's deadline was removed, 0 if it had none or does not exist.
    Persist {
        /// The key.
        key: String,
    },
    /// `TTL key`: remaining seconds, rounded to the nearest, -1 without expiry, -2 when absent.
    Ttl {
        /// The key.
        key: String,
    },
    /// `SETNX key value`: `SET key value NX` replying 1 (set) or 0 (not).
    SetNx {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// `SETEX key seconds value`: `SET key value EX seconds`.
    SetEx {
        /// The key.
        key: String,
        /// Seconds from now, > 0.
        seconds: u64,
        /// The value.
        value: String,
    },
    /// `PSETEX key ms value`: `SET key value PX ms`.
    PSetEx {
        /// The key.
        key: String,
        /// Milliseconds from now, > 0.
        ms: u64,
        /// The value.
        value: String,
    },
    /// `GETSET key value`: sets the value (dropping any deadline), replies the old string or nil.
    GetSet {
        /// The key.
        key: String,
        /// The new value.
        value: String,
    },
    /// `GETDEL key`: the string, deleted; nil when absent.
    GetDel {
        /// The key.
        key: String,
    },
    /// `UNLINK key [key …]`: `DEL` (the memory is freed in the background, which no reply
    /// shows).
    Unlink {
        /// The keys.
        keys: Vec<String>,
    },
    /// `INCRBY key increment`.
    IncrBy {
        /// The key.
        key: String,
        /// Added to the counter (may be negative).
        increment: i64,
    },
    /// `DECR key`.
    Decr {
        /// The key.
        key: String,
    },
    /// `DECRBY key decrement`.
    DecrBy {
        /// The key.
        key: String,
        /// Subtracted from the counter.
        decrement: i64,
    },
    /// `HSET key field value [field value …]`: the number of fields that did not exist before.
    HSet {
        /// The key.
        key: String,
        /// The field/value pairs, written in this order (a field named twice ends with its last
        /// value).
        fields: Vec<(String, String)>,
    },
    /// `HGET key field`.
    HGet {
        /// The key.
        key: String,
        /// The field.
        field: String,
    },
    /// `HINCRBY key field increment`: the new value; a missing key or field counts as 0.
    HIncrBy {
        /// The key.
        key: String,
        /// The field.
        field: String,
        /// Added to the field (may be negative).
        increment: i64,
    },
    /// `HEXISTS key field`: 1 or 0.
    HExists {
        /// The key.
        key: String,
        /// The field.
        field: String,
    },
    /// `HDEL key field [field …]`: the number of fields removed.
    HDel {
        /// The key.
        key: String,
        /// The fields.
        fields: Vec<String>,
    },
    /// `HLEN key`.
    HLen {
        /// The key.
        key: String,
    },
    /// `HGETALL key`: field, value, field, value, …
    HGetAll {
        /// The key.
        key: String,
    },
    /// `LPUSH key value [value …]`: each value goes to the head in turn; the new length.
    LPush {
        /// The key.
        key: String,
        /// The values.
        values: Vec<String>,
    },
    /// `RPUSH key value [value …]`: the values go to the tail in order; the new length.
    RPush {
        /// The key.
        key: String,
        /// The values.
        values: Vec<String>,
    },
    /// `LPOP key [count]`: without a count, the head element or nil; with one, an array of up to
    /// `count` elements (nil when the key is missing).
    LPop {
        /// The key.
        key: String,
        /// The optional count.
        count: Option<u64>,
    },
    /// `RPOP key [count]`: as `LPOP`, from the tail.
    RPop {
        /// The key.
        key: String,
        /// The optional count.
        count: Option<u64>,
    },
    /// `LINDEX key index` (negative counts from the tail).
    ///
    /// Redis looks the key up before it parses the index, so `LINDEX missing x` is nil there and an
    /// integer error here (the index is parsed with the command); no script sends a malformed index.
    LIndex {
        /// The key.
        key: String,
        /// The index.
        index: i64,
    },
    /// `LLEN key`.
    LLen {
        /// The key.
        key: String,
    },
    /// `LRANGE key start stop` (inclusive, negative counts from the tail).
    LRange {
        /// The key.
        key: String,
        /// First index.
        start: i64,
        /// Last index.
        stop: i64,
    },
    /// `LREM key count value`: removes `count` matches from the head (`count > 0`), `-count` from
    /// the tail (`count < 0`) or all (`0`); the number removed.
    LRem {
        /// The key.
        key: String,
        /// How many, and from which end.
        count: i64,
        /// The element to remove.
        value: String,
    },
    /// `ZADD key score member [score member …]`, the plain form only (NX/XX/GT/LT/CH/INCR are
    /// refused by the simulated server as not modelled): the number of members that did not exist before.
    ZAdd {
        /// The key.
        key: String,
        /// The score/member pairs, applied in this order.
        members: Vec<(Score, String)>,
    },
    /// `ZSCORE key member`: the score as a bulk string, or nil.
    ZScore {
        /// The key.
        key: String,
        /// The member.
        member: String,
    },
    /// `ZREM key member [member …]`: the number removed.
    ZRem {
        /// The key.
        key: String,
        /// The members.
        members: Vec<String>,
    },
    /// `ZCARD key`.
    ZCard {
        /// The key.
        key: String,
    },
    /// `ZRANGE key start stop [WITHSCORES]`, by rank only (BYSCORE/BYLEX/REV/LIMIT are refused by the
    /// simulated server as not modelled).
    ZRange {
        /// The key.
        key: String,
        /// First rank.
        start: i64,
        /// Last rank (inclusive).
        stop: i64,
        /// Interleave each member's score.
        with_scores: bool,
    },
    /// `ZRANGEBYSCORE key min max [WITHSCORES]` (LIMIT is refused by the simulated server as not modelled).
    ZRangeByScore {
        /// The key.
        key: String,
        /// Lower bound.
        min: ScoreBound,
        /// Upper bound.
        max: ScoreBound,
        /// Interleave each member's score.
        with_scores: bool,
    },
    /// `ZREMRANGEBYSCORE key min max`: the number of members removed.
    ZRemRangeByScore {
        /// The key.
        key: String,
        /// Lower bound.
        min: ScoreBound,
        /// Upper bound.
        max: ScoreBound,
    },
    /// `TIME`: the server's wall clock, as seconds and microseconds (two bulk strings).
    Time,
    /// `PUBLISH channel message`: how many connections subscribe to the channel.
    Publish {
        /// The channel.
        channel: String,
        /// The message.
        message: String,
    },
    /// `WAIT numreplicas timeout`: blocks the caller until that many replicas acknowledged the
    /// writes it made so far, or the timeout passes; replies how many did. Not allowed in scripts.
    Wait {
        /// Replicas to wait for.
        replicas: u32,
        /// Milliseconds to wait at most (0: forever, as in Redis).
        timeout_ms: u64,
    },
    /// `INFO section`: the server's state as `field:value` lines (a bulk string). Redisson reads
    /// `INFO replication`'s `connected_slaves` to know how many replicas its `WAIT` should count.
    Info {
        /// The section (`replication`).
        section: String,
    },
    /// `EVAL script numkeys key… arg…` (the real client sends `EVALSHA` first).
    Eval {
        /// The script.
        script: Script,
        /// `KEYS`.
        keys: Vec<String>,
        /// `ARGV`.
        args: Vec<String>,
    },
}

impl Command {
    /// Whether the command may change the data set (used for persistence and replication).
    pub fn is_write(&self) -> bool {
        // PUBLISH changes no data, so there is nothing for persistence to write.
        !matches!(
            self,
            Command::Get { .. }
                | Command::Exists { .. }
                | Command::PTtl { .. }
                | Command::Ttl { .. }
                | Command::Time
                | Command::HGet { .. }
                | Command::HExists { .. }
                | Command::HLen { .. }
                | Command::HGetAll { .. }
                | Command::LIndex { .. }
                | Command::LLen { .. }
                | Command::LRange { .. }
                | Command::ZScore { .. }
                | Command::ZCard { .. }
                | Command::ZRange { .. }
                | Command::ZRangeByScore { .. }
                | Command::Publish { .. }
                | Command::Wait { .. }
                | Command::Info { .. }
        )
    }

    /// The keys it names, as Redis Cluster reads them to route it (none for `PUBLISH`, `WAIT`,
    /// `TIME`, `INFO`; an `EVAL`'s are its `KEYS`).
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Command::Set { key, .. }
            | Command::Get { key }
            | Command::Exists { key }
            | Command::PExpire { key, .. }
            | Command::PTtl { key }
            | Command::Incr { key }
            | Command::Expire { key, .. }
            | Command::Expiry { key, .. }
            | Command::Persist { key }
            | Command::Ttl { key }
            | Command::SetNx { key, .. }
            | Command::SetEx { key, .. }
            | Command::PSetEx { key, .. }
            | Command::GetSet { key, .. }
            | Command::GetDel { key }
            | Command::IncrBy { key, .. }
            | Command::Decr { key }
            | Command::DecrBy { key, .. }
            | Command::ZRemRangeByScore { key, .. }
            | Command::HSet { key, .. }
            | Command::HGet { key, .. }
            | Command::HIncrBy { key, .. }
            | Command::HExists { key, .. }
            | Command::HDel { key, .. }
            | Command::HLen { key }
            | Command::HGetAll { key }
            | Command::LPush { key, .. }
            | Command::RPush { key, .. }
            | Command::LPop { key, .. }
            | Command::RPop { key, .. }
            | Command::LIndex { key, .. }
            | Command::LLen { key }
            | Command::LRange { key, .. }
            | Command::LRem { key, .. }
            | Command::ZAdd { key, .. }
            | Command::ZScore { key, .. }
            | Command::ZRem { key, .. }
            | Command::ZCard { key }
            | Command::ZRange { key, .. }
            | Command::ZRangeByScore { key, .. } => vec![key.as_str()],
            Command::Del { keys } | Command::Unlink { keys } | Command::Eval { keys, .. } => {
                keys.iter().map(String::as_str).collect()
            }
            Command::Publish { .. }
            | Command::Wait { .. }
            | Command::Time
            | Command::Info { .. } => Vec::new(),
        }
    }

    /// The command as the argument vector Redis would receive (`EVAL` carries the source).
    pub fn to_argv(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        match self {
            Command::Set {
                key,
                value,
                options,
            } => {
                v.extend(["SET".into(), key.clone(), value.clone()]);
                if options.nx {
                    v.push("NX".into());
                }
                if options.xx {
                    v.push("XX".into());
                }
                if let Some(ms) = options.px {
                    v.extend(["PX".into(), ms.to_string()]);
                }
                if let Some(at) = options.pxat {
                    v.extend(["PXAT".into(), at.to_string()]);
                }
                if options.keep_ttl {
                    v.push("KEEPTTL".into());
                }
                if options.get {
                    v.push("GET".into());
                }
            }
            Command::Get { key } => v.extend(["GET".into(), key.clone()]),
            Command::Del { keys } => {
                v.push("DEL".into());
                v.extend(keys.iter().cloned());
            }
            Command::Exists { key } => v.extend(["EXISTS".into(), key.clone()]),
            Command::PExpire { key, ms } => {
                v.extend(["PEXPIRE".into(), key.clone(), ms.to_string()])
            }
            Command::PTtl { key } => v.extend(["PTTL".into(), key.clone()]),
            Command::Incr { key } => v.extend(["INCR".into(), key.clone()]),
            Command::Expire { key, seconds } => {
                v.extend(["EXPIRE".into(), key.clone(), seconds.to_string()])
            }
            Command::Expiry {
                command,
                key,
                time,
                options,
            } => {
                v.extend([command.name().into(), key.clone(), time.to_string()]);
                for (on, word) in [
                    (options.nx, "NX"),
                    (options.xx, "XX"),
                    (options.gt, "GT"),
                    (options.lt, "LT"),
                ] {
                    if on {
                        v.push(word.into());
                    }
                }
            }
            Command::Persist { key } => v.extend(["PERSIST".into(), key.clone()]),
            Command::Ttl { key } => v.extend(["TTL".into(), key.clone()]),
            Command::SetNx { key, value } => v.extend(["SETNX".into(), key.clone(), value.clone()]),
            Command::SetEx {
                key,
                seconds,
                value,
            } => v.extend([
                "SETEX".into(),
                key.clone(),
                seconds.to_string(),
                value.clone(),
            ]),
            Command::PSetEx { key, ms, value } => {
                v.extend(["PSETEX".into(), key.clone(), ms.to_string(), value.clone()])
            }
            Command::GetSet { key, value } => {
                v.extend(["GETSET".into(), key.clone(), value.clone()])
            }
            Command::GetDel { key } => v.extend(["GETDEL".into(), key.clone()]),
            Command::Unlink { keys } => {
                v.push("UNLINK".into());
                v.extend(keys.iter().cloned());
            }
            Command::IncrBy { key, increment } => {
                v.extend(["INCRBY".into(), key.clone(), increment.to_string()])
            }
            Command::Decr { key } => v.extend(["DECR".into(), key.clone()]),
            Command::DecrBy { key, decrement } => {
                v.extend(["DECRBY".into(), key.clone(), decrement.to_string()])
            }
            Command::HSet { key, fields } => {
                v.extend(["HSET".into(), key.clone()]);
                for (field, value) in fields {
                    v.extend([field.clone(), value.clone()]);
                }
            }
            Command::HGet { key, field } => v.extend(["HGET".into(), key.clone(), field.clone()]),
            Command::HIncrBy {
                key,
                field,
                increment,
            } => v.extend([
                "HINCRBY".into(),
                key.clone(),
                field.clone(),
                increment.to_string(),
            ]),
            Command::HExists { key, field } => {
                v.extend(["HEXISTS".into(), key.clone(), field.clone()])
            }
            Command::HDel { key, fields } => {
                v.extend(["HDEL".into(), key.clone()]);
                v.extend(fields.iter().cloned());
            }
            Command::HLen { key } => v.extend(["HLEN".into(), key.clone()]),
            Command::HGetAll { key } => v.extend(["HGETALL".into(), key.clone()]),
            Command::LPush { key, values } => {
                v.extend(["LPUSH".into(), key.clone()]);
                v.extend(values.iter().cloned());
            }
            Command::RPush { key, values } => {
                v.extend(["RPUSH".into(), key.clone()]);
                v.extend(values.iter().cloned());
            }
            Command::LPop { key, count } => {
                v.extend(["LPOP".into(), key.clone()]);
                v.extend(count.map(|n| n.to_string()));
            }
            Command::RPop { key, count } => {
                v.extend(["RPOP".into(), key.clone()]);
                v.extend(count.map(|n| n.to_string()));
            }
            Command::LIndex { key, index } => {
                v.extend(["LINDEX".into(), key.clone(), index.to_string()])
            }
            Command::LLen { key } => v.extend(["LLEN".into(), key.clone()]),
            Command::LRange { key, start, stop } => v.extend([
                "LRANGE".into(),
                key.clone(),
                start.to_string(),
                stop.to_string(),
            ]),
            Command::LRem { key, count, value } => {
                v.extend(["LREM".into(), key.clone(), count.to_string(), value.clone()])
            }
            Command::ZAdd { key, members } => {
                v.extend(["ZADD".into(), key.clone()]);
                for (score, member) in members {
                    v.extend([format_double(score.get()), member.clone()]);
                }
            }
            Command::ZScore { key, member } => {
                v.extend(["ZSCORE".into(), key.clone(), member.clone()])
            }
            Command::ZRem { key, members } => {
                v.extend(["ZREM".into(), key.clone()]);
                v.extend(members.iter().cloned());
            }
            Command::ZCard { key } => v.extend(["ZCARD".into(), key.clone()]),
            Command::ZRange {
                key,
                start,
                stop,
                with_scores,
            } => {
                v.extend([
                    "ZRANGE".into(),
                    key.clone(),
                    start.to_string(),
                    stop.to_string(),
                ]);
                if *with_scores {
                    v.push("WITHSCORES".into());
                }
            }
            Command::ZRangeByScore {
                key,
                min,
                max,
                with_scores,
            } => {
                v.extend([
                    "ZRANGEBYSCORE".into(),
                    key.clone(),
                    min.to_arg(),
                    max.to_arg(),
                ]);
                if *with_scores {
                    v.push("WITHSCORES".into());
                }
            }
            Command::ZRemRangeByScore { key, min, max } => v.extend([
                "ZREMRANGEBYSCORE".into(),
                key.clone(),
                min.to_arg(),
                max.to_arg(),
            ]),
            Command::Time => v.push("TIME".into()),
            Command::Publish { channel, message } => {
                v.extend(["PUBLISH".into(), channel.clone(), message.clone()])
            }
            Command::Wait {
                replicas,
                timeout_ms,
            } => v.extend(["WAIT".into(), replicas.to_string(), timeout_ms.to_string()]),
            Command::Info { section } => v.extend(["INFO".into(), section.clone()]),
            Command::Eval { script, keys, args } => {
                v.extend([
                    "EVAL".into(),
                    script.source.to_string(),
                    keys.len().to_string(),
                ]);
                v.extend(keys.iter().cloned());
                v.extend(args.iter().cloned());
            }
        }
        v
    }
}

/// Formats a double as Redis 7.2+ replies with it (`d2string` in `util.c`): `inf`/`-inf`/`nan`,
/// `0`/`-0`, integral values within ±2^62 as integers, anything else as `fpconv_dtoa` writes it
/// (see [`fpconv_dtoa`]). `ZSCORE` and `ZRANGE … WITHSCORES` reply with this text, and scripts
/// compare it as a string, so it has to be Redis's and not Rust's.
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        return "nan".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    match double_to_integer(value) {
        Some(n) => n.to_string(),
        None => fpconv_dtoa(value),
    }
}

/// Redis's `double2ll`: the value as an integer if it is integral and within ±2^62, where the
/// conversion is known to be exact.
pub fn double_to_integer(value: f64) -> Option<i64> {
    let limit = (i64::MAX / 2) as f64;
    // `as` saturates and maps NaN to 0, so the comparison below rejects what C would not convert.
    (value >= -limit && value <= limit && value.fract() == 0.0).then_some(value as i64)
}

/// Redis's `fpconv_dtoa` (Grisu2 digits, then `emit_digits`'s layout): the shortest digits that
/// read back as the same double, written as an integer with trailing zeros when the exponent is
/// small, as a plain decimal for exponents from -6 (more when there are digits before the point),
/// and otherwise as `d.ddde±x` with no zero padding in the exponent (`1.5e-7`, `1e+20`).
///
/// Rust's shortest-digits formatting stands in for Grisu2; the two agree except for the rare
/// doubles where Grisu2 gives up on the shortest form and prints a longer one.
pub fn fpconv_dtoa(value: f64) -> String {
    let mut out = String::new();
    if value.is_sign_negative() {
        out.push('-');
    }
    let magnitude = value.abs();
    if magnitude == 0.0 {
        out.push('0');
        return out;
    }
    if magnitude.is_nan() {
        out.push_str("nan");
        return out;
    }
    if magnitude.is_infinite() {
        out.push_str("inf");
        return out;
    }
    let scientific = format!("{magnitude:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let ndigits = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    // `value = digits × 10^k`, as in fpconv.
    let k = exponent - (ndigits - 1);
    let abs_exponent = exponent.abs();
    if k >= 0 && abs_exponent < ndigits + 7 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', k.unsigned_abs() as usize));
    } else if k < 0 && (k > -7 || abs_exponent < 4) {
        let offset = ndigits + k;
        if offset <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', offset.unsigned_abs() as usize));
            out.push_str(&digits);
        } else {
            let (int_part, frac_part) = digits.split_at(offset.unsigned_abs() as usize);
            out.push_str(int_part);
            out.push('.');
            out.push_str(frac_part);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&abs_exponent.to_string());
    }
    out
}

/// A RESP reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The null bulk reply (`nil`; a Lua `false` from a script).
    Nil,
    /// A status reply such as `OK`.
    Status(String),
    /// An integer reply.
    Int(i64),
    /// A bulk string.
    Bulk(String),
    /// An array reply.
    Array(Vec<Reply>),
    /// An error reply, with Redis's text (`ERR …`, `WRONGTYPE …`).
    Error(String),
}

impl Reply {
    /// The integer in an integer reply.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// Whether this is the nil reply.
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_sha1_matches_redis() {
        // `redis-cli SCRIPT LOAD "return 1"` prints this digest.
        assert_eq!(
            &*Script::new("return 1").sha1,
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn doubles_are_formatted_like_redis_d2string() {
        // Reading each text back as the same score is tested beside the parser, in the simulator
        // (`lockcheck_sim::redis::parse`).
        let cases = [
            (0.0, "0"),
            (-0.0, "-0"),
            (3.0, "3"),
            (-7.0, "-7"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.3333333333333333"),
            (0.0001, "0.0001"),
            (0.000123, "0.000123"),
            (1.23e-5, "1.23e-5"),
            (1e-7, "1e-7"),
            (1234.5678901, "1234.5678901"),
            (1e17, "100000000000000000"),
            (4611686018427387904.0, "4611686018427387904"),
            (1e19, "1e+19"),
            (1.2345678901234567e20, "123456789012345670000"),
            (1e20, "1e+20"),
            (-2.5e-300, "-2.5e-300"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (1700000000000.25, "1700000000000.25"),
        ];
        for (value, text) in cases {
            assert_eq!(format_double(value), text, "{value:e}");
        }
    }
}
