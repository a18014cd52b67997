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
        !matches!(
            self,
            Command::Get { .. } | Command::Exists { .. } | Command::PTtl { .. }
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
        let arity = |n: usize| -> Result<(), String> {
            if argv.len() == n {
                Ok(())
            } else {
                Err(format!(
                    "ERR wrong number of arguments for '{}' command",
                    name.to_ascii_lowercase()
                ))
            }
        };
        let int = |s: &str| -> Result<i64, String> {
            s.parse::<i64>()
                .map_err(|_| "ERR value is not an integer or out of range".to_string())
        };
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
            "EVAL" | "EVALSHA" => Err("ERR This Redis command is not allowed from script".into()),
            _ => Err(format!(
                "ERR unknown command '{}', with args beginning with: ",
                argv[0]
            )),
        }
    }
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
}
