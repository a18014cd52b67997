//! Redis commands and replies at the level of the protocol.
//!
//! A [`Command`] is what a lock algorithm asks of a Redis server; a [`Reply`] is the RESP value that
//! comes back. Both are plain data so that the simulated server (a state machine), the real client
//! (a thin mapping onto the `redis` crate) and `redis.call` inside a Lua script all speak the same
//! language: a script's `redis.call('SET', …)` is parsed by [`Command::parse`] into the very value
//! the algorithm code would have built.

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
}

impl Script {
    /// Wraps Lua source and computes its SHA1.
    pub fn new(source: &str) -> Self {
        Script {
            source: Arc::from(source),
            sha1: Arc::from(sha1_smol::Sha1::from(source).digest().to_string().as_str()),
        }
    }
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Script({})", &self.sha1[..12])
    }
}

/// Options of `SET`: the subset lock algorithms use.
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
    /// `SET key value [NX|XX] [PX ms] [GET]`.
    Set {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// NX / XX / PX / GET.
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
    /// `EXPIRE key seconds`: `PEXPIRE` in seconds (only the plain form; Redis 7's NX/XX/GT/LT are
    /// refused as unsupported).
    Expire {
        /// The key.
        key: String,
        /// Seconds from now (the server's wall clock).
        seconds: i64,
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
    /// refused as unsupported): the number of members that did not exist before.
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
    /// `ZRANGE key start stop [WITHSCORES]`, by rank only (BYSCORE/BYLEX/REV/LIMIT are refused as
    /// unsupported).
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
    /// `ZRANGEBYSCORE key min max [WITHSCORES]` (LIMIT is refused as unsupported).
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
    /// `PUBLISH channel message`: no subscribers are modelled, so always 0.
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
        )
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
            Command::Publish { channel, message } => {
                v.extend(["PUBLISH".into(), channel.clone(), message.clone()])
            }
            Command::Wait {
                replicas,
                timeout_ms,
            } => v.extend(["WAIT".into(), replicas.to_string(), timeout_ms.to_string()]),
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

    /// Parses an argument vector as Redis does (command names and options are case-insensitive).
    ///
    /// Errors carry Redis's own error text, so a script that misuses a command fails in the
    /// simulation with the message a real server would give.
    pub fn parse(argv: &[String]) -> Result<Command, String> {
        let name = argv
            .first()
            .ok_or_else(|| "ERR wrong number of arguments".to_string())?
            .to_ascii_uppercase();
        let arity_error = || {
            format!(
                "ERR wrong number of arguments for '{}' command",
                name.to_ascii_lowercase()
            )
        };
        let arity = |n: usize| -> Result<(), String> {
            if argv.len() == n {
                Ok(())
            } else {
                Err(arity_error())
            }
        };
        let at_least = |n: usize| -> Result<(), String> {
            if argv.len() >= n {
                Ok(())
            } else {
                Err(arity_error())
            }
        };
        let int = |s: &str| -> Result<i64, String> {
            parse_integer(s)
                .ok_or_else(|| "ERR value is not an integer or out of range".to_string())
        };
        let key = || argv[1].clone();
        match name.as_str() {
            "SET" => {
                if argv.len() < 3 {
                    return Err("ERR wrong number of arguments for 'set' command".into());
                }
                let mut options = SetOptions::default();
                let mut i = 3;
                while i < argv.len() {
                    match argv[i].to_ascii_uppercase().as_str() {
                        "NX" if !options.xx => options.nx = true,
                        "XX" if !options.nx => options.xx = true,
                        "GET" => options.get = true,
                        unit @ ("PX" | "EX") if options.px.is_none() && i + 1 < argv.len() => {
                            i += 1;
                            let n = int(&argv[i])?;
                            if n <= 0 {
                                return Err("ERR invalid expire time in 'set' command".into());
                            }
                            let n = n as u64;
                            options.px = Some(if unit == "EX" { n * 1000 } else { n });
                        }
                        _ => return Err("ERR syntax error".into()),
                    }
                    i += 1;
                }
                Ok(Command::Set {
                    key: argv[1].clone(),
                    value: argv[2].clone(),
                    options,
                })
            }
            "GET" => arity(2).map(|_| Command::Get {
                key: argv[1].clone(),
            }),
            "DEL" => {
                if argv.len() < 2 {
                    return Err("ERR wrong number of arguments for 'del' command".into());
                }
                Ok(Command::Del {
                    keys: argv[1..].to_vec(),
                })
            }
            "EXISTS" => arity(2).map(|_| Command::Exists {
                key: argv[1].clone(),
            }),
            "PEXPIRE" => {
                arity(3)?;
                Ok(Command::PExpire {
                    key: argv[1].clone(),
                    ms: int(&argv[2])?,
                })
            }
            "PTTL" => arity(2).map(|_| Command::PTtl {
                key: argv[1].clone(),
            }),
            "INCR" => arity(2).map(|_| Command::Incr {
                key: argv[1].clone(),
            }),
            "EXPIRE" => {
                at_least(3)?;
                if argv.len() > 3 {
                    return Err(unsupported("EXPIRE with NX|XX|GT|LT"));
                }
                Ok(Command::Expire {
                    key: key(),
                    seconds: int(&argv[2])?,
                })
            }
            "HSET" => {
                // Redis checks the pairing with the arity, so both give the arity error.
                if argv.len() < 4 || argv.len() % 2 == 1 {
                    return Err(arity_error());
                }
                Ok(Command::HSet {
                    key: key(),
                    fields: argv[2..]
                        .chunks_exact(2)
                        .map(|pair| (pair[0].clone(), pair[1].clone()))
                        .collect(),
                })
            }
            "HGET" => arity(3).map(|_| Command::HGet {
                key: key(),
                field: argv[2].clone(),
            }),
            "HINCRBY" => {
                arity(4)?;
                Ok(Command::HIncrBy {
                    key: key(),
                    field: argv[2].clone(),
                    increment: int(&argv[3])?,
                })
            }
            "HEXISTS" => arity(3).map(|_| Command::HExists {
                key: key(),
                field: argv[2].clone(),
            }),
            "HDEL" => at_least(3).map(|_| Command::HDel {
                key: key(),
                fields: argv[2..].to_vec(),
            }),
            "HLEN" => arity(2).map(|_| Command::HLen { key: key() }),
            "HGETALL" => arity(2).map(|_| Command::HGetAll { key: key() }),
            "LPUSH" => at_least(3).map(|_| Command::LPush {
                key: key(),
                values: argv[2..].to_vec(),
            }),
            "RPUSH" => at_least(3).map(|_| Command::RPush {
                key: key(),
                values: argv[2..].to_vec(),
            }),
            "LPOP" | "RPOP" => {
                at_least(2)?;
                if argv.len() > 3 {
                    return Err(arity_error());
                }
                // Redis's getPositiveLongFromObjectOrReply: 0 is allowed, negatives are not.
                let count = match argv.get(2) {
                    None => None,
                    Some(s) => match u64::try_from(int(s)?) {
                        Ok(n) => Some(n),
                        Err(_) => return Err("ERR value is out of range, must be positive".into()),
                    },
                };
                Ok(if name == "LPOP" {
                    Command::LPop { key: key(), count }
                } else {
                    Command::RPop { key: key(), count }
                })
            }
            "LINDEX" => {
                arity(3)?;
                Ok(Command::LIndex {
                    key: key(),
                    index: int(&argv[2])?,
                })
            }
            "LLEN" => arity(2).map(|_| Command::LLen { key: key() }),
            "LRANGE" => {
                arity(4)?;
                Ok(Command::LRange {
                    key: key(),
                    start: int(&argv[2])?,
                    stop: int(&argv[3])?,
                })
            }
            "LREM" => {
                arity(4)?;
                Ok(Command::LRem {
                    key: key(),
                    count: int(&argv[2])?,
                    value: argv[3].clone(),
                })
            }
            "ZADD" => {
                at_least(4)?;
                // The flags come before the first score; Redis reads any of these words as one.
                let flag = argv[2].to_ascii_uppercase();
                if ["NX", "XX", "GT", "LT", "CH", "INCR"].contains(&flag.as_str()) {
                    return Err(unsupported(&format!("ZADD {flag}")));
                }
                let pairs = &argv[2..];
                if pairs.len() % 2 == 1 {
                    return Err("ERR syntax error".into());
                }
                // Every score is checked before the key is touched, as in zaddGenericCommand.
                let members = pairs
                    .chunks_exact(2)
                    .map(|pair| {
                        let score = parse_score(&pair[0])
                            .ok_or_else(|| "ERR value is not a valid float".to_string())?;
                        Ok((score, pair[1].clone()))
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Ok(Command::ZAdd {
                    key: key(),
                    members,
                })
            }
            "ZSCORE" => arity(3).map(|_| Command::ZScore {
                key: key(),
                member: argv[2].clone(),
            }),
            "ZREM" => at_least(3).map(|_| Command::ZRem {
                key: key(),
                members: argv[2..].to_vec(),
            }),
            "ZCARD" => arity(2).map(|_| Command::ZCard { key: key() }),
            "ZRANGE" | "ZRANGEBYSCORE" => {
                at_least(4)?;
                // zrangeGenericCommand reads the options first, then the range.
                let mut with_scores = false;
                for option in &argv[4..] {
                    match option.to_ascii_uppercase().as_str() {
                        "WITHSCORES" => with_scores = true,
                        "LIMIT" => return Err(unsupported(&format!("{name} LIMIT"))),
                        word @ ("BYSCORE" | "BYLEX" | "REV") if name == "ZRANGE" => {
                            return Err(unsupported(&format!("ZRANGE {word}")));
                        }
                        _ => return Err("ERR syntax error".into()),
                    }
                }
                if name == "ZRANGE" {
                    Ok(Command::ZRange {
                        key: key(),
                        start: int(&argv[2])?,
                        stop: int(&argv[3])?,
                        with_scores,
                    })
                } else {
                    match (parse_score_bound(&argv[2]), parse_score_bound(&argv[3])) {
                        (Some(min), Some(max)) => Ok(Command::ZRangeByScore {
                            key: key(),
                            min,
                            max,
                            with_scores,
                        }),
                        _ => Err("ERR min or max is not a float".into()),
                    }
                }
            }
            "PUBLISH" => arity(3).map(|_| Command::Publish {
                channel: argv[1].clone(),
                message: argv[2].clone(),
            }),
            "EVAL" | "EVALSHA" | "WAIT" => {
                Err("ERR This Redis command is not allowed from script".into())
            }
            _ => Err(format!(
                "ERR unknown command '{}', with args beginning with: ",
                argv[0]
            )),
        }
    }
}

/// The error for a form of a command the simulated server does not model. It is not a Redis
/// error text on purpose: a script that needs the form should fail loudly in the simulation rather
/// than get an answer that only looks like Redis's.
fn unsupported(what: &str) -> String {
    format!("ERR unsupported by the simulated server: {what}")
}

/// Parses an integer as Redis's `string2ll` does, which is stricter than `str::parse`: no `+`, no
/// leading zeros, no `-0`, no whitespace, under 21 characters. A `PX +100` that a real server
/// rejects, or a counter stored as `"01"` that `INCR` refuses, must fail here too. Shared with the
/// simulated server so that commands and stored values are read alike.
pub fn parse_integer(s: &str) -> Option<i64> {
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

/// C's `isspace` in the "C" locale, which is what `strtod` skips.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r')
}

/// A score argument as Redis's `string2d` reads it (`ZADD`): all of the text must be a number for
/// `strtod`, without leading whitespace; `inf`/`-inf` are fine, NaN and a finite text that
/// overflows to infinity or underflows to zero are not.
///
/// Differs from C's `strtod` only in rejecting hexadecimal floats (`0x1p3`), which Rust does not
/// parse and no lock algorithm writes.
fn parse_score(s: &str) -> Option<Score> {
    if s.starts_with(is_c_space) {
        return None;
    }
    let value: f64 = s.parse().ok()?;
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let mantissa = unsigned.split(['e', 'E']).next().unwrap_or(unsigned);
    let inf_literal =
        unsigned.eq_ignore_ascii_case("inf") || unsigned.eq_ignore_ascii_case("infinity");
    // strtod's ERANGE: a finite text too large (±HUGE_VAL) or too small (0) for a double.
    let overflow = value.is_infinite() && !inf_literal;
    let underflow = value == 0.0 && mantissa.bytes().any(|b| matches!(b, b'1'..=b'9'));
    if overflow || underflow {
        return None;
    }
    Score::new(value)
}

/// A `ZRANGEBYSCORE` bound as Redis's `zslParseRange` reads it: an optional `(`, then plain
/// `strtod`, which is laxer than [`parse_score`]: leading whitespace is skipped, out-of-range
/// numbers saturate to infinity or zero, and an empty number is 0 (`(` alone is "above 0").
fn parse_score_bound(s: &str) -> Option<ScoreBound> {
    let (exclusive, number) = match s.strip_prefix('(') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let trimmed = number.trim_start_matches(is_c_space);
    let value = if trimmed.is_empty() {
        // strtod converts nothing and leaves its end pointer at the start: fine only if that is
        // already the end of the text.
        if !number.is_empty() {
            return None;
        }
        0.0
    } else {
        trimmed.parse().ok()?
    };
    Some(ScoreBound {
        score: Score::new(value)?,
        exclusive,
    })
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

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn set_round_trips_through_argv() {
        let cmd = Command::parse(&argv("set k v nx px 100")).unwrap();
        assert_eq!(
            cmd,
            Command::Set {
                key: "k".into(),
                value: "v".into(),
                options: SetOptions {
                    nx: true,
                    px: Some(100),
                    ..Default::default()
                }
            }
        );
        assert_eq!(Command::parse(&cmd.to_argv()).unwrap(), cmd);
    }

    #[test]
    fn set_rejects_what_redis_rejects() {
        assert!(Command::parse(&argv("SET k v NX XX")).is_err());
        assert!(Command::parse(&argv("SET k v PX 0")).is_err());
        assert!(Command::parse(&argv("SET k v PX abc")).is_err());
        assert!(Command::parse(&argv("SET k")).is_err());
        assert!(Command::parse(&argv("EVAL x 0")).is_err());
    }

    #[test]
    fn script_sha1_matches_redis() {
        // `redis-cli SCRIPT LOAD "return 1"` prints this digest.
        assert_eq!(
            &*Script::new("return 1").sha1,
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn new_commands_round_trip_through_argv() {
        for line in [
            "EXPIRE k 10",
            "HSET h a 1 b 2",
            "HGET h a",
            "HINCRBY h a -3",
            "HEXISTS h a",
            "HDEL h a b",
            "HLEN h",
            "HGETALL h",
            "LPUSH l a b",
            "RPUSH l a",
            "LPOP l",
            "LPOP l 0",
            "RPOP l 3",
            "LINDEX l -1",
            "LLEN l",
            "LRANGE l 0 -1",
            "LREM l -2 x",
            "ZADD z 1 a 2.5 b -inf c 1e+20 d 0.1 e",
            "ZSCORE z a",
            "ZREM z a b",
            "ZCARD z",
            "ZRANGE z 0 -1",
            "ZRANGE z 0 -1 WITHSCORES",
            "ZRANGEBYSCORE z -inf (2.5",
            "ZRANGEBYSCORE z (1 inf WITHSCORES",
            "PUBLISH c m",
        ] {
            let cmd = Command::parse(&argv(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(cmd.to_argv(), argv(line), "{line}");
            assert_eq!(Command::parse(&cmd.to_argv()).unwrap(), cmd, "{line}");
        }
        // Names and options are case-insensitive; argv is canonical.
        let cmd = Command::parse(&argv("zrangebyscore z 1 +inf withscores")).unwrap();
        assert_eq!(cmd.to_argv(), argv("ZRANGEBYSCORE z 1 inf WITHSCORES"));
        assert_eq!(
            Command::parse(&argv("hset h f v")).unwrap(),
            Command::HSet {
                key: "h".into(),
                fields: vec![("f".into(), "v".into())]
            }
        );
    }

    #[test]
    fn only_data_changing_commands_are_writes() {
        for line in [
            "HSET h a 1",
            "HINCRBY h a 1",
            "HDEL h a",
            "LPUSH l a",
            "RPUSH l a",
            "LPOP l",
            "RPOP l",
            "LREM l 0 a",
            "ZADD z 1 a",
            "ZREM z a",
            "EXPIRE k 1",
        ] {
            assert!(Command::parse(&argv(line)).unwrap().is_write(), "{line}");
        }
        for line in [
            "HGET h a",
            "HEXISTS h a",
            "HLEN h",
            "HGETALL h",
            "LINDEX l 0",
            "LLEN l",
            "LRANGE l 0 1",
            "ZSCORE z a",
            "ZCARD z",
            "ZRANGE z 0 1",
            "ZRANGEBYSCORE z 0 1",
            "PUBLISH c m",
        ] {
            assert!(!Command::parse(&argv(line)).unwrap().is_write(), "{line}");
        }
    }

    #[test]
    fn new_commands_reject_what_redis_rejects_with_its_text() {
        let err = |line: &str| Command::parse(&argv(line)).unwrap_err();
        let arity = |name: &str| format!("ERR wrong number of arguments for '{name}' command");
        assert_eq!(err("HSET h f"), arity("hset"));
        assert_eq!(err("HSET h f v g"), arity("hset"));
        assert_eq!(err("HGET h"), arity("hget"));
        assert_eq!(err("HDEL h"), arity("hdel"));
        assert_eq!(err("RPUSH l"), arity("rpush"));
        assert_eq!(err("LPOP"), arity("lpop"));
        assert_eq!(err("LPOP l 1 2"), arity("lpop"));
        assert_eq!(err("ZADD z 1"), arity("zadd"));
        assert_eq!(err("ZRANGE z 0"), arity("zrange"));
        assert_eq!(err("PUBLISH c"), arity("publish"));
        let not_int = "ERR value is not an integer or out of range";
        assert_eq!(err("HINCRBY h f 1.5"), not_int);
        assert_eq!(err("LINDEX l x"), not_int);
        assert_eq!(err("LRANGE l 0 x"), not_int);
        assert_eq!(err("LREM l x a"), not_int);
        assert_eq!(err("EXPIRE k 1s"), not_int);
        assert_eq!(err("ZRANGE z 0 x"), not_int);
        assert_eq!(
            err("LPOP l -1"),
            "ERR value is out of range, must be positive"
        );
        assert_eq!(err("ZADD z 1 a 2"), "ERR syntax error");
        assert_eq!(err("ZADD z x a"), "ERR value is not a valid float");
        assert_eq!(err("ZADD z nan a"), "ERR value is not a valid float");
        assert_eq!(err("ZRANGE z 0 1 FOO"), "ERR syntax error");
        // Redis reads the options before the range.
        assert_eq!(err("ZRANGE z x 1 FOO"), "ERR syntax error");
        assert_eq!(err("ZRANGEBYSCORE z 0 1 REV"), "ERR syntax error");
        assert_eq!(err("ZRANGEBYSCORE z x 1"), "ERR min or max is not a float");
        assert_eq!(
            err("ZRANGEBYSCORE z 0 nan"),
            "ERR min or max is not a float"
        );
        // Forms Redis accepts but the model does not are refused loudly, not misread.
        for line in [
            "ZADD z NX 1 a",
            "ZADD z incr 1 a",
            "ZRANGE z 0 1 REV",
            "ZRANGE z 0 1 BYSCORE",
            "ZRANGEBYSCORE z 0 1 LIMIT 0 1",
            "EXPIRE k 10 NX",
        ] {
            assert!(err(line).starts_with("ERR unsupported"), "{line}");
        }
    }

    #[test]
    fn integer_arguments_are_read_like_string2ll() {
        for good in [
            "0",
            "-1",
            "100",
            "-9223372036854775808",
            "9223372036854775807",
        ] {
            assert!(parse_integer(good).is_some(), "{good}");
        }
        for bad in [
            "+1",
            "01",
            "-0",
            " 1",
            "1 ",
            "",
            "-",
            "1.0",
            "9223372036854775808",
        ] {
            assert_eq!(parse_integer(bad), None, "{bad:?}");
        }
        assert!(Command::parse(&argv("SET k v PX +100")).is_err());
        assert!(Command::parse(&argv("PEXPIRE k 0100")).is_err());
    }

    #[test]
    fn scores_are_read_like_string2d() {
        let score = |s: &str| parse_score(s).map(Score::get);
        assert_eq!(score("1"), Some(1.0));
        assert_eq!(score("-2.5"), Some(-2.5));
        assert_eq!(score("+.5"), Some(0.5));
        assert_eq!(score("1e3"), Some(1000.0));
        assert_eq!(score("inf"), Some(f64::INFINITY));
        assert_eq!(score("+inf"), Some(f64::INFINITY));
        assert_eq!(score("-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(score("0e999"), Some(0.0));
        assert_eq!(score("1e-310"), Some(1e-310), "subnormals are kept");
        for bad in [
            "", " 1", "1 ", "nan", "NaN", "1e400", "-1e400", "1e-400", "abc", "1,5",
        ] {
            assert_eq!(score(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn score_bounds_are_read_like_zsl_parse_range() {
        let bound = |s: &str| parse_score_bound(s).map(|b| (b.score.get(), b.exclusive));
        assert_eq!(bound("1.5"), Some((1.5, false)));
        assert_eq!(bound("(1.5"), Some((1.5, true)));
        assert_eq!(bound("-inf"), Some((f64::NEG_INFINITY, false)));
        assert_eq!(bound("(+inf"), Some((f64::INFINITY, true)));
        // Plain strtod: leading space is skipped, overflow saturates, an empty number is 0.
        assert_eq!(bound(" 2"), Some((2.0, false)));
        assert_eq!(bound("1e400"), Some((f64::INFINITY, false)));
        assert_eq!(bound("("), Some((0.0, true)));
        assert_eq!(bound(""), Some((0.0, false)));
        for bad in ["  ", "2 ", "nan", "((1", "x"] {
            assert_eq!(bound(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn doubles_are_formatted_like_redis_d2string() {
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
            if !value.is_nan() {
                // What Redis prints must read back as the same score.
                assert_eq!(parse_score(text).map(Score::get), Some(value), "{text}");
            }
        }
    }
}
