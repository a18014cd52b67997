//! Redis's command parser, for the simulated server: an argument vector, as a script's
//! `redis.call` passes it, read into the [`Command`] the lock algorithms build as a value.
//!
//! It lives in the simulator, not beside [`Command`] in `lockcheck-algorithms`, because only the
//! simulator reads argument vectors: the algorithms build commands directly, and a real server
//! parses for itself.

use lockcheck_algorithms::redis::command::{
    Command, ExpireCommand, ExpireOptions, Score, ScoreBound, SetOptions,
};
use thiserror::Error;

/// The commands the simulated Redis models, in upper case: the only names [`parse_command`]
/// reads. Some forms of them are not modelled either (`ZADD`'s flags, `ZRANGE`'s `BYSCORE`,
/// `REV` and `LIMIT`, `EXISTS` of several keys); those are refused as [`ParseError::NotModelled`]
/// too.
pub const MODELLED_COMMANDS: &[&str] = &[
    "SET",
    "SETNX",
    "SETEX",
    "PSETEX",
    "GET",
    "GETSET",
    "GETDEL",
    "INCR",
    "INCRBY",
    "DECR",
    "DECRBY",
    "DEL",
    "UNLINK",
    "EXISTS",
    "EXPIRE",
    "PEXPIRE",
    "EXPIREAT",
    "PEXPIREAT",
    "PERSIST",
    "TTL",
    "PTTL",
    "HSET",
    "HGET",
    "HINCRBY",
    "HEXISTS",
    "HDEL",
    "HLEN",
    "HGETALL",
    "LPUSH",
    "RPUSH",
    "LPOP",
    "RPOP",
    "LINDEX",
    "LLEN",
    "LRANGE",
    "LREM",
    "ZADD",
    "ZSCORE",
    "ZREM",
    "ZCARD",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREMRANGEBYSCORE",
    "PUBLISH",
    "TIME",
];

/// Whether `name` (any case) is one of [`MODELLED_COMMANDS`], or one that Redis refuses inside a
/// script and the parser refuses with Redis's words (`EVAL`, `EVALSHA`, `WAIT`).
pub fn is_modelled(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    MODELLED_COMMANDS.contains(&name.as_str()) || REFUSED_IN_SCRIPTS.contains(&name.as_str())
}

/// Commands Redis refuses inside a script, which the parser answers with Redis's refusal.
const REFUSED_IN_SCRIPTS: &[&str] = &["EVAL", "EVALSHA", "WAIT"];

/// Why an argument vector is not a command the model runs.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ParseError {
    /// Redis's own error reply, word for word: a real server would answer the same, so a
    /// script may meet it (and catch it) in both worlds.
    #[error("{0}")]
    Redis(String),
    /// A command, or a form of one, that the simulated Redis does not model (its name and the
    /// form). Not a Redis error on purpose: answering it with one would let a script catch it
    /// with `pcall` and go on, checked against a server that is not Redis.
    #[error("not modelled by the simulated Redis: {0}")]
    NotModelled(String),
}

impl From<String> for ParseError {
    fn from(text: String) -> Self {
        ParseError::Redis(text)
    }
}

impl From<&str> for ParseError {
    fn from(text: &str) -> Self {
        ParseError::Redis(text.to_owned())
    }
}

/// Parses an argument vector as Redis does (command names and options are case-insensitive).
///
/// Errors carry Redis's own error text, so a script that misuses a command fails in the
/// simulation with the message a real server would give; a command the model does not have is
/// [`ParseError::NotModelled`].
pub fn parse_command(argv: &[String]) -> Result<Command, ParseError> {
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
    let arity = |n: usize| -> Result<(), ParseError> {
        if argv.len() == n {
            Ok(())
        } else {
            Err(arity_error().into())
        }
    };
    let at_least = |n: usize| -> Result<(), ParseError> {
        if argv.len() >= n {
            Ok(())
        } else {
            Err(arity_error().into())
        }
    };
    let int = |s: &str| -> Result<i64, String> {
        parse_integer(s).ok_or_else(|| "ERR value is not an integer or out of range".to_string())
    };
    // Redis's getExpireMillisecondsOrReply for SET, SETEX and PSETEX: positive, and in seconds
    // small enough to be counted in milliseconds (adding the clock is the model's part).
    let expire_ms = |text: &str, seconds: bool, command: &str| -> Result<u64, String> {
        let n = int(text)?;
        if n <= 0 || (seconds && n > i64::MAX / 1000) {
            return Err(format!("ERR invalid expire time in '{command}' command"));
        }
        Ok(n.unsigned_abs() * if seconds { 1000 } else { 1 })
    };
    let key = || argv[1].clone();
    match name.as_str() {
        "SET" => {
            at_least(3)?;
            // parseExtendedStringArgumentsOrReply: every option is read before the expiry's
            // number is; an expiry may be repeated in its own unit only, never with KEEPTTL.
            let mut options = SetOptions::default();
            let mut expire: Option<(String, &str)> = None;
            let mut i = 3;
            while i < argv.len() {
                let option = argv[i].to_ascii_uppercase();
                let unit = expire.as_ref().map(|(unit, _)| unit.as_str());
                let next = argv.get(i + 1);
                match option.as_str() {
                    "NX" if !options.xx => options.nx = true,
                    "XX" if !options.nx => options.xx = true,
                    "GET" => options.get = true,
                    "KEEPTTL" if expire.is_none() => options.keep_ttl = true,
                    "EX" | "PX" | "EXAT" | "PXAT"
                        if !options.keep_ttl
                            && unit.is_none_or(|unit| unit == option)
                            && next.is_some() =>
                    {
                        expire = next.map(|text| (option.clone(), text.as_str()));
                        i += 1;
                    }
                    _ => return Err("ERR syntax error".into()),
                }
                i += 1;
            }
            if let Some((unit, text)) = expire {
                let ms = expire_ms(text, unit.starts_with('E'), "set")?;
                if unit.ends_with("AT") {
                    options.pxat = Some(ms);
                } else {
                    options.px = Some(ms);
                }
            }
            Ok(Command::Set {
                key: argv[1].clone(),
                value: argv[2].clone(),
                options,
            })
        }
        "SETNX" => arity(3).map(|_| Command::SetNx {
            key: key(),
            value: argv[2].clone(),
        }),
        "SETEX" | "PSETEX" => {
            arity(4)?;
            let seconds = name == "SETEX";
            let n = expire_ms(&argv[2], seconds, &name.to_ascii_lowercase())?;
            Ok(if seconds {
                Command::SetEx {
                    key: key(),
                    seconds: n / 1000,
                    value: argv[3].clone(),
                }
            } else {
                Command::PSetEx {
                    key: key(),
                    ms: n,
                    value: argv[3].clone(),
                }
            })
        }
        "GET" => arity(2).map(|_| Command::Get {
            key: argv[1].clone(),
        }),
        "GETSET" => arity(3).map(|_| Command::GetSet {
            key: key(),
            value: argv[2].clone(),
        }),
        "GETDEL" => arity(2).map(|_| Command::GetDel { key: key() }),
        "DEL" | "UNLINK" => {
            at_least(2)?;
            let keys = argv[1..].to_vec();
            Ok(if name == "DEL" {
                Command::Del { keys }
            } else {
                Command::Unlink { keys }
            })
        }
        "EXISTS" => {
            at_least(2)?;
            if argv.len() > 2 {
                return Err(ParseError::NotModelled("EXISTS of several keys".into()));
            }
            Ok(Command::Exists {
                key: argv[1].clone(),
            })
        }
        "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" => {
            at_least(3)?;
            let command = match name.as_str() {
                "EXPIRE" => ExpireCommand::Expire,
                "PEXPIRE" => ExpireCommand::PExpire,
                "EXPIREAT" => ExpireCommand::ExpireAt,
                _ => ExpireCommand::PExpireAt,
            };
            // parseExtendedExpireArgumentsOrReply reads the options before the time.
            let mut options = ExpireOptions::default();
            for option in &argv[3..] {
                match option.to_ascii_uppercase().as_str() {
                    "NX" => options.nx = true,
                    "XX" => options.xx = true,
                    "GT" => options.gt = true,
                    "LT" => options.lt = true,
                    _ => return Err(format!("ERR Unsupported option {option}").into()),
                }
            }
            if options.nx && (options.xx || options.gt || options.lt) {
                return Err(
                    "ERR NX and XX, GT or LT options at the same time are not compatible".into(),
                );
            }
            if options.gt && options.lt {
                return Err("ERR GT and LT options at the same time are not compatible".into());
            }
            let time = int(&argv[2])?;
            Ok(match command {
                _ if options != ExpireOptions::default() => Command::Expiry {
                    command,
                    key: key(),
                    time,
                    options,
                },
                ExpireCommand::Expire => Command::Expire {
                    key: key(),
                    seconds: time,
                },
                ExpireCommand::PExpire => Command::PExpire {
                    key: key(),
                    ms: time,
                },
                _ => Command::Expiry {
                    command,
                    key: key(),
                    time,
                    options,
                },
            })
        }
        "PERSIST" => arity(2).map(|_| Command::Persist { key: key() }),
        "TTL" => arity(2).map(|_| Command::Ttl { key: key() }),
        "PTTL" => arity(2).map(|_| Command::PTtl {
            key: argv[1].clone(),
        }),
        "INCR" => arity(2).map(|_| Command::Incr {
            key: argv[1].clone(),
        }),
        "DECR" => arity(2).map(|_| Command::Decr { key: key() }),
        "INCRBY" => {
            arity(3)?;
            Ok(Command::IncrBy {
                key: key(),
                increment: int(&argv[2])?,
            })
        }
        "DECRBY" => {
            arity(3)?;
            let decrement = int(&argv[2])?;
            // decrbyCommand: negating LLONG_MIN would overflow.
            if decrement == i64::MIN {
                return Err("ERR decrement would overflow".into());
            }
            Ok(Command::DecrBy {
                key: key(),
                decrement,
            })
        }
        "HSET" => {
            // Redis checks the pairing with the arity, so both give the arity error.
            if argv.len() < 4 || argv.len() % 2 == 1 {
                return Err(arity_error().into());
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
                return Err(arity_error().into());
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
                return Err(ParseError::NotModelled(format!("ZADD {flag}")));
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
                    "LIMIT" => return Err(ParseError::NotModelled(format!("{name} LIMIT"))),
                    word @ ("BYSCORE" | "BYLEX" | "REV") if name == "ZRANGE" => {
                        return Err(ParseError::NotModelled(format!("ZRANGE {word}")));
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
        "ZREMRANGEBYSCORE" => {
            arity(4)?;
            match (parse_score_bound(&argv[2]), parse_score_bound(&argv[3])) {
                (Some(min), Some(max)) => Ok(Command::ZRemRangeByScore {
                    key: key(),
                    min,
                    max,
                }),
                _ => Err("ERR min or max is not a float".into()),
            }
        }
        "TIME" => arity(1).map(|_| Command::Time),
        "EVAL" | "EVALSHA" | "WAIT" => {
            Err("ERR This Redis command is not allowed from script".into())
        }
        // Whether Redis has the command or not: the model cannot answer for a server it is not.
        _ => Err(ParseError::NotModelled(name)),
    }
}

/// Parses an integer as Redis's `string2ll` does, which is stricter than `str::parse`: no `+`, no
/// leading zeros, no `-0`, no whitespace, under 21 characters. A `PX +100` that a real server
/// rejects, or a counter stored as `"01"` that `INCR` refuses, must fail here too. The model reads
/// stored values with it as well (`INCR`, `HINCRBY`), so that commands and stored values are read
/// alike.
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

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_algorithms::redis::command::format_double;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn set_round_trips_through_argv() {
        let cmd = parse_command(&argv("set k v nx px 100")).unwrap();
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
        assert_eq!(parse_command(&cmd.to_argv()).unwrap(), cmd);
    }

    #[test]
    fn set_rejects_what_redis_rejects() {
        assert!(parse_command(&argv("SET k v NX XX")).is_err());
        assert!(parse_command(&argv("SET k v PX 0")).is_err());
        assert!(parse_command(&argv("SET k v PX abc")).is_err());
        assert!(parse_command(&argv("SET k")).is_err());
        assert!(parse_command(&argv("EVAL x 0")).is_err());
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
            "ZREMRANGEBYSCORE z -inf (2.5",
            "PUBLISH c m",
            "SET k v XX PXAT 1700000000000 GET",
            "SET k v KEEPTTL",
            "SETNX k v",
            "SETEX k 10 v",
            "PSETEX k 100 v",
            "GETSET k v",
            "GETDEL k",
            "UNLINK a b",
            "TTL k",
            "PERSIST k",
            "PEXPIRE k 100",
            "EXPIRE k -1 XX GT",
            "PEXPIRE k 100 NX",
            "EXPIREAT k 1700000000",
            "PEXPIREAT k 1700000000000 LT",
            "INCRBY k -5",
            "DECR k",
            "DECRBY k 3",
            "TIME",
        ] {
            let cmd = parse_command(&argv(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(cmd.to_argv(), argv(line), "{line}");
            assert_eq!(parse_command(&cmd.to_argv()).unwrap(), cmd, "{line}");
        }
        // Names and options are case-insensitive; argv is canonical.
        let cmd = parse_command(&argv("zrangebyscore z 1 +inf withscores")).unwrap();
        assert_eq!(cmd.to_argv(), argv("ZRANGEBYSCORE z 1 inf WITHSCORES"));
        assert_eq!(
            parse_command(&argv("hset h f v")).unwrap(),
            Command::HSet {
                key: "h".into(),
                fields: vec![("f".into(), "v".into())]
            }
        );
    }

    #[test]
    fn set_options_are_read_as_redis_7_reads_them() {
        let set = |line: &str| match parse_command(&argv(line)) {
            Ok(Command::Set { options, .. }) => Ok(options),
            Ok(other) => panic!("{line}: {other:?}"),
            Err(e) => Err(e.to_string()),
        };
        let options = |px, pxat, keep_ttl| SetOptions {
            px,
            pxat,
            keep_ttl,
            ..SetOptions::default()
        };
        assert_eq!(set("SET k v EX 2"), Ok(options(Some(2000), None, false)));
        assert_eq!(set("SET k v exat 2"), Ok(options(None, Some(2000), false)));
        assert_eq!(set("SET k v PXAT 5"), Ok(options(None, Some(5), false)));
        assert_eq!(set("SET k v KEEPTTL"), Ok(options(None, None, true)));
        // The same unit twice: the last one counts (Redis checks only the other units).
        assert_eq!(set("SET k v PX 1 PX 7"), Ok(options(Some(7), None, false)));
        let syntax = Err("ERR syntax error".to_string());
        for bad in [
            "SET k v EX 1 PX 1",
            "SET k v PX 1 PXAT 1",
            "SET k v KEEPTTL PX 1",
            "SET k v PX 1 KEEPTTL",
            "SET k v PX",
            // Every option is read before the expiry's number.
            "SET k v PX abc FOO",
        ] {
            assert_eq!(set(bad), syntax, "{bad}");
        }
        let invalid = Err("ERR invalid expire time in 'set' command".to_string());
        assert_eq!(set("SET k v EXAT 0"), invalid);
        assert_eq!(set("SET k v PXAT -1"), invalid);
        assert_eq!(set(&format!("SET k v EX {}", i64::MAX / 1000 + 1)), invalid);
        assert_eq!(
            set("SET k v PX abc"),
            Err("ERR value is not an integer or out of range".into())
        );
    }

    #[test]
    fn expire_family_options_are_read_before_the_time() {
        let err = |line: &str| parse_command(&argv(line)).unwrap_err().to_string();
        assert_eq!(err("EXPIRE k abc FOO"), "ERR Unsupported option FOO");
        assert_eq!(
            err("PEXPIREAT k 1 NX GT"),
            "ERR NX and XX, GT or LT options at the same time are not compatible"
        );
        assert_eq!(
            err("EXPIRE k 1 GT LT"),
            "ERR GT and LT options at the same time are not compatible"
        );
        assert_eq!(
            err("EXPIRE k abc NX"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err("EXPIREAT k"),
            "ERR wrong number of arguments for 'expireat' command"
        );
        // Repeated and XX with GT are fine; the plain relative forms keep their own commands.
        assert!(parse_command(&argv("EXPIRE k 1 XX xx GT")).is_ok());
        assert_eq!(
            parse_command(&argv("EXPIRE k 1")),
            Ok(Command::Expire {
                key: "k".into(),
                seconds: 1
            })
        );
    }

    #[test]
    fn the_older_string_commands_check_their_arguments_as_redis_does() {
        let err = |line: &str| parse_command(&argv(line)).unwrap_err().to_string();
        assert_eq!(
            err("SETEX k 0 v"),
            "ERR invalid expire time in 'setex' command"
        );
        assert_eq!(
            err("PSETEX k -1 v"),
            "ERR invalid expire time in 'psetex' command"
        );
        assert_eq!(
            err("SETEX k x v"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err("SETNX k"),
            "ERR wrong number of arguments for 'setnx' command"
        );
        assert_eq!(
            err(&format!("DECRBY k {}", i64::MIN)),
            "ERR decrement would overflow"
        );
        assert_eq!(
            err("INCRBY k 1.5"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err("TIME x"),
            "ERR wrong number of arguments for 'time' command"
        );
        assert_eq!(
            err("UNLINK"),
            "ERR wrong number of arguments for 'unlink' command"
        );
        assert_eq!(
            err("ZREMRANGEBYSCORE z x 1"),
            "ERR min or max is not a float"
        );
    }

    #[test]
    fn a_command_the_model_lacks_is_refused_as_not_modelled_naming_it() {
        for line in [
            "OBJECT ENCODING k",
            "client setname x",
            "SCAN 0",
            "DELETE k",
        ] {
            let name = line.split(' ').next().unwrap().to_ascii_uppercase();
            assert!(!is_modelled(&name), "{name}");
            let refusal = parse_command(&argv(line)).unwrap_err();
            assert_eq!(refusal, ParseError::NotModelled(name.clone()));
            assert_eq!(
                refusal.to_string(),
                format!("not modelled by the simulated Redis: {name}")
            );
        }
        // Every modelled name is read (a call without arguments is Redis's arity error, or
        // TIME itself), never refused.
        for name in MODELLED_COMMANDS {
            assert!(is_modelled(&name.to_ascii_lowercase()), "{name}");
            match parse_command(&[name.to_string()]) {
                Ok(cmd) => assert_eq!(cmd, Command::Time),
                Err(ParseError::Redis(text)) => {
                    assert!(text.starts_with("ERR wrong number"), "{name}: {text}")
                }
                Err(other) => panic!("{name}: {other}"),
            }
        }
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
            assert!(parse_command(&argv(line)).unwrap().is_write(), "{line}");
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
            assert!(!parse_command(&argv(line)).unwrap().is_write(), "{line}");
        }
    }

    #[test]
    fn new_commands_reject_what_redis_rejects_with_its_text() {
        let err = |line: &str| parse_command(&argv(line)).unwrap_err().to_string();
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
        for (line, what) in [
            ("ZADD z NX 1 a", "ZADD NX"),
            ("ZADD z incr 1 a", "ZADD INCR"),
            ("ZRANGE z 0 1 REV", "ZRANGE REV"),
            ("ZRANGE z 0 1 BYSCORE", "ZRANGE BYSCORE"),
            ("ZRANGEBYSCORE z 0 1 LIMIT 0 1", "ZRANGEBYSCORE LIMIT"),
            ("EXISTS a b", "EXISTS of several keys"),
        ] {
            assert_eq!(
                parse_command(&argv(line)),
                Err(ParseError::NotModelled(what.into())),
                "{line}"
            );
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
        assert!(parse_command(&argv("SET k v PX +100")).is_err());
        assert!(parse_command(&argv("PEXPIRE k 0100")).is_err());
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
    fn redis_integer_parsing_matches_string2ll() {
        assert_eq!(parse_integer("0"), Some(0));
        assert_eq!(parse_integer("-1"), Some(-1));
        assert_eq!(parse_integer("123"), Some(123));
        assert_eq!(parse_integer("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_integer("9223372036854775808"), None);
        assert_eq!(parse_integer("00"), None);
    }

    #[test]
    fn doubles_formatted_like_redis_read_back_as_the_same_score() {
        // What Redis prints must read back as the same score (the texts themselves are tested
        // beside `format_double`).
        for value in [
            0.0,
            -0.0,
            3.0,
            -7.0,
            1.5,
            0.1,
            1.0 / 3.0,
            0.0001,
            0.000123,
            1.23e-5,
            1e-7,
            1234.5678901,
            1e17,
            4611686018427387904.0,
            1e19,
            1.2345678901234567e20,
            1e20,
            -2.5e-300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1700000000000.25,
        ] {
            let text = format_double(value);
            assert_eq!(parse_score(&text).map(Score::get), Some(value), "{text}");
        }
    }
}
