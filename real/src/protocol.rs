//! The line protocol between lockcheck and a client process (`lockcheck real --client`): JSON
//! lines, one object a line, each with the protocol version `"v": 1`. A stable contract
//! (docs/check-your-lock.md): a field may be added, none removed or changed in meaning,
//! without a new version.
//!
//! The environment each client process is started with ([`crate::client_process`]):
//! - `LOCKCHECK_PROTOCOL`: `1`, this version.
//! - `LOCKCHECK_CLIENT_ID`: `client-0`, … or `probe`; `LOCKCHECK_CLIENT_INDEX`: its node index;
//!   `LOCKCHECK_INCARNATION`: 1, then one more per restart.
//! - `LOCKCHECK_BACKEND`: `redis`, `zookeeper`, `etcd` or `mysql`.
//! - `LOCKCHECK_SERVERS`: `HOST:PORT,…` in server order, this client's proxies (plaintext, even
//!   when lockcheck speaks TLS to the servers).
//! - `LOCKCHECK_KEY`: the lock's name. `LOCKCHECK_TTL_MS`: the lease lockcheck gives (the TTL,
//!   the session timeout, the lease TTL).
//! - Credentials, set from the run's login or removed, never inherited
//!   ([`crate::client_process::LOGIN_VARS`]): `LOCKCHECK_USER` (`--user`; MariaDB: `root` when
//!   none is given), `LOCKCHECK_PASSWORD` (only when lockcheck logs in with one); for MariaDB
//!   over TLS, which its client speaks itself, `LOCKCHECK_TLS` (`1`), `LOCKCHECK_TLS_CA`,
//!   `LOCKCHECK_TLS_CERT`, `LOCKCHECK_TLS_KEY` (absolute paths, each only when given) and
//!   `LOCKCHECK_TLS_SERVER_NAME`. Redis, ZooKeeper and etcd clients get no TLS variable: their
//!   proxies speak TLS to the servers. A credential is passed in the environment only, never on
//!   a command line; what lockcheck keeps of a client's lines has the password blanked out.
//!
//! lockcheck → client (stdin):
//! - `{"v":1,"op":"acquire","wait_ms":W,"hold_ms":H,"probe":false}`: take the lock, waiting at
//!   most `W` ms; once taken, do the critical section (below), working `H` ms inside it. With
//!   `"probe":true` (the liveness probe at the end of the run): release at once, without
//!   accessing.
//! - `{"v":1,"op":"access","accepted":true|false|null}`: the answer to an `access` line (`null`:
//!   no answer came, as when the network lost it).
//! - `{"v":1,"op":"stop"}`: nothing more to do; exit.
//!
//! client → lockcheck (stdout):
//! - `{"v":1,"op":"ready"}`: once, when connected and ready for the first `acquire`.
//! - answering `acquire`: `{"v":1,"op":"acquired"}`, optionally with `"token"` (a number is a
//!   fencing token, which the resource checks when the scenario fences; a string only names the
//!   holder) and `"valid_ms"` (what the library says is left of its lease);
//!   `{"v":1,"op":"not_acquired"}` (gave up after `wait_ms`); `{"v":1,"op":"error","reason":…}`.
//! - while holding: `{"v":1,"op":"access","phase":"enter"|"exit"}`, each answered as above.
//!   lockcheck performs the access when it *reads* the line: a client that stalls writes late.
//! - ending the section: `{"v":1,"op":"released"}`, `{"v":1,"op":"lost","reason":…}` (the
//!   library says the lock was no longer held), or `{"v":1,"op":"error","reason":…}`.

use lockcheck_core::history::Phase;
use serde_json::{json, Value};

/// The protocol version this lockcheck speaks.
pub const VERSION: u64 = 1;

/// A line lockcheck sends a client.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Take the lock (waiting at most `wait_ms`), then do a critical section of `hold_ms`; a
    /// `probe` releases at once without accessing.
    Acquire {
        /// How long to try, in ms.
        wait_ms: u64,
        /// How long to work inside the section, in ms.
        hold_ms: u64,
        /// The liveness probe: acquire and release, nothing else.
        probe: bool,
    },
    /// The answer to an access: accepted, rejected, or `None` when no answer came.
    Accessed(Option<bool>),
    /// Nothing more to do.
    Stop,
}

impl Command {
    /// The line for this command, without its newline.
    pub fn line(&self) -> String {
        let value = match self {
            Command::Acquire {
                wait_ms,
                hold_ms,
                probe,
            } => json!({"v": VERSION, "op": "acquire", "wait_ms": wait_ms, "hold_ms": hold_ms,
                        "probe": probe}),
            Command::Accessed(accepted) => {
                json!({"v": VERSION, "op": "access", "accepted": accepted})
            }
            Command::Stop => json!({"v": VERSION, "op": "stop"}),
        };
        value.to_string()
    }
}

/// A line a client sends lockcheck.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Connected and ready.
    Ready,
    /// Holds the lock.
    Acquired {
        /// What names this holding (a fencing token's decimal digits, when it is one).
        token: Option<String>,
        /// A fencing token, when the library gives one.
        fence: Option<u64>,
        /// What the library says is left of its lease, in ms.
        valid_ms: Option<u64>,
    },
    /// Gave up after `wait_ms`.
    NotAcquired {
        /// Why, if the client says.
        reason: Option<String>,
    },
    /// Asks lockcheck to touch the resource.
    Access(Phase),
    /// Released.
    Released,
    /// The library says the lock was no longer held.
    Lost {
        /// Why, if the client says.
        reason: Option<String>,
    },
    /// The library failed.
    Error {
        /// Why.
        reason: String,
    },
}

/// Why a line is not a protocol line: said to the user with the line itself.
pub type ParseError = String;

/// Reads one line a client printed.
pub fn parse(line: &str) -> Result<Reply, ParseError> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object ({e})"))?;
    let object = value
        .as_object()
        .ok_or_else(|| "not a JSON object".to_string())?;
    match object.get("v").and_then(Value::as_u64) {
        Some(VERSION) => {}
        Some(v) => {
            return Err(format!(
                "protocol version {v}; this lockcheck speaks version {VERSION}"
            ))
        }
        None => return Err(format!("no protocol version (\"v\": {VERSION})")),
    }
    let text = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let op = text("op").ok_or_else(|| "no \"op\"".to_string())?;
    Ok(match op.as_str() {
        "ready" => Reply::Ready,
        "acquired" => {
            let (token, fence) = match object.get("token") {
                None | Some(Value::Null) => (None, None),
                Some(Value::String(s)) => (Some(s.clone()), None),
                Some(Value::Number(n)) => {
                    let fence = n.as_u64().ok_or_else(|| {
                        format!("token {n}: a fencing token is a whole number ≥ 0")
                    })?;
                    (Some(fence.to_string()), Some(fence))
                }
                Some(other) => return Err(format!("token {other}: a number or a string")),
            };
            let valid_ms = match object.get("valid_ms") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .ok_or_else(|| format!("valid_ms {v}: a whole number of ms"))?,
                ),
            };
            Reply::Acquired {
                token,
                fence,
                valid_ms,
            }
        }
        "not_acquired" => Reply::NotAcquired {
            reason: text("reason"),
        },
        "access" => match text("phase").as_deref() {
            Some("enter") => Reply::Access(Phase::Enter),
            Some("exit") => Reply::Access(Phase::Exit),
            _ => return Err("an access needs \"phase\": \"enter\" or \"exit\"".into()),
        },
        "released" => Reply::Released,
        "lost" => Reply::Lost {
            reason: text("reason"),
        },
        "error" => Reply::Error {
            reason: text("reason").unwrap_or_else(|| "(no reason given)".into()),
        },
        other => {
            return Err(format!(
                "unknown op '{}'",
                lockcheck_core::input::clip(other)
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numeric_token_is_a_fencing_token() {
        assert_eq!(
            parse(r#"{"v":1,"op":"acquired","token":7,"valid_ms":900}"#),
            Ok(Reply::Acquired {
                token: Some("7".into()),
                fence: Some(7),
                valid_ms: Some(900)
            })
        );
        assert_eq!(
            parse(r#"{"v":1,"op":"acquired","token":"ab"}"#),
            Ok(Reply::Acquired {
                token: Some("ab".into()),
                fence: None,
                valid_ms: None
            })
        );
    }

    #[test]
    fn lines_without_the_version_or_of_another_are_refused() {
        assert!(parse(r#"{"op":"ready"}"#).unwrap_err().contains("version"));
        assert!(parse(r#"{"v":2,"op":"ready"}"#)
            .unwrap_err()
            .contains("version 2"));
        assert!(parse("hello").unwrap_err().contains("JSON"));
        assert!(parse(r#"{"v":1,"op":"dance"}"#)
            .unwrap_err()
            .contains("dance"));
        assert!(parse(r#"{"v":1,"op":"access","phase":"middle"}"#).is_err());
    }

    #[test]
    fn commands_carry_the_version() {
        let line = Command::Acquire {
            wait_ms: 5,
            hold_ms: 6,
            probe: false,
        }
        .line();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["v"], 1);
        assert_eq!(v["op"], "acquire");
        assert_eq!(v["wait_ms"], 5);
        let v: Value = serde_json::from_str(&Command::Accessed(None).line()).unwrap();
        assert_eq!(v, json!({"v": 1, "op": "access", "accepted": null}));
    }
}
