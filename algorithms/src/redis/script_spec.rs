//! A user's Redis lock as data: the Lua scripts `redis-script` runs, what each receives in
//! `KEYS` and `ARGV`, and how each reply is read.
//!
//! The scripts are embedded in the scenario (`params.redis.script`) rather than named by a path,
//! so that a report replays byte for byte on a machine that has never seen the user's file. The
//! file the user writes (TOML or JSON, read by the CLI) holds the same fields, with `path`
//! allowed in place of `script`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The scripts of a user's lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserScript {
    /// The acquisition: one script, or several run one after another as separate `EVAL`s (a
    /// lock that sets its key and then its expiry in two commands). Each must read as
    /// acquired for the attempt to go on; the first that does not ends it, leaving what the
    /// ones before it did (as the naive client does).
    pub acquire: Vec<ScriptStep>,
    /// The release.
    pub release: ScriptStep,
    /// The renewal, run every TTL/3 while the lock is held when `params.watchdog` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend: Option<ScriptStep>,
}

impl UserScript {
    /// Every script with the name errors give it: `acquire` (`acquire[2]` when there are
    /// several), `release`, `extend`.
    pub fn named_steps(&self) -> Vec<(String, &ScriptStep)> {
        let mut steps = Vec::new();
        for (i, step) in self.acquire.iter().enumerate() {
            steps.push((acquire_name(i, self.acquire.len()), step));
        }
        steps.push(("release".to_string(), &self.release));
        if let Some(extend) = &self.extend {
            steps.push(("extend".to_string(), extend));
        }
        steps
    }

    /// What the scripts' shape gets wrong, whatever they say: no acquire step, a `KEYS` entry
    /// that is not a key. (Whether the Lua compiles is the simulator's to check.)
    pub fn check(&self) -> Result<(), String> {
        if self.acquire.is_empty() {
            return Err("acquire: at least one script is needed".into());
        }
        for (name, step) in self.named_steps() {
            if let Some(bad) = step.keys.iter().find(|i| !i.is_key()) {
                return Err(format!(
                    "{name}: keys: '{bad}' is not a key; KEYS may hold key and fence_key (give \
                     {bad} in argv)"
                ));
            }
            if step.script.trim().is_empty() {
                return Err(format!("{name}: the script is empty"));
            }
        }
        Ok(())
    }
}

/// The name error messages give acquire step `i` of `count`.
pub fn acquire_name(i: usize, count: usize) -> String {
    if count == 1 {
        "acquire".to_string()
    } else {
        format!("acquire[{}]", i + 1)
    }
}

/// One script and how it is called.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptStep {
    /// The Lua source, as `EVAL` receives it.
    pub script: String,
    /// What `KEYS[1]`, `KEYS[2]`, … hold.
    #[serde(default)]
    pub keys: Vec<Input>,
    /// What `ARGV[1]`, `ARGV[2]`, … hold.
    #[serde(default)]
    pub argv: Vec<Input>,
    /// Which reply means it worked (acquired, released, extended); any other reply but an
    /// error means it did not (busy, not the owner).
    pub success: Expect,
}

/// A value a script receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// The lock's key (`params.key`, default `lock`).
    Key,
    /// The key of a counter beside it (`KEY:fence`), for a fencing token.
    FenceKey,
    /// The caller's token: 32 random hex digits, new for each acquisition.
    Token,
    /// The lease in milliseconds (`params.ttl_ms`).
    TtlMs,
    /// The client's wall clock, in milliseconds since the Unix epoch.
    NowMs,
}

impl Input {
    /// Whether it names a key (what `KEYS` may hold).
    pub fn is_key(self) -> bool {
        matches!(self, Input::Key | Input::FenceKey)
    }

    fn name(self) -> &'static str {
        match self {
            Input::Key => "key",
            Input::FenceKey => "fence_key",
            Input::Token => "token",
            Input::TtlMs => "ttl_ms",
            Input::NowMs => "now_ms",
        }
    }
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a script's reply is read: the reply that means it worked. Written as a word in the
/// file: `ok`, `1`, `integer>0`, `not-nil`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Expect {
    /// `ok`: the status reply `OK` (what `SET … NX` returns; it returns nil when the key exists).
    Ok,
    /// `1`: the integer 1 (what a compare-and-delete's `DEL` or `PEXPIRE` returns).
    One,
    /// `integer>0`: any positive integer; with `fencing`, the acquire's is the fencing token.
    Positive,
    /// `not-nil`: any reply but nil (a Lua `false` or `nil`).
    NotNil,
}

impl Expect {
    /// The words, for messages.
    pub const WORDS: &'static str = "ok, 1, integer>0, not-nil";

    fn word(self) -> &'static str {
        match self {
            Expect::Ok => "ok",
            Expect::One => "1",
            Expect::Positive => "integer>0",
            Expect::NotNil => "not-nil",
        }
    }
}

impl TryFrom<String> for Expect {
    type Error = String;

    fn try_from(word: String) -> Result<Expect, String> {
        Ok(match word.as_str() {
            "ok" | "OK" => Expect::Ok,
            "1" => Expect::One,
            "integer>0" => Expect::Positive,
            "not-nil" => Expect::NotNil,
            _ => {
                return Err(format!(
                    "'{}' is not a reply rule; one of {}",
                    word.chars().take(40).collect::<String>(),
                    Expect::WORDS
                ))
            }
        })
    }
}

impl From<Expect> for String {
    fn from(e: Expect) -> String {
        e.word().to_string()
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}
