//! The file in which a user describes their Redis Lua lock for `redis-script` (`--script FILE`),
//! read into the [`UserScript`] a scenario embeds.
//!
//! TOML (or JSON, for a `.json` file), one section per step:
//!
//! ```toml
//! fencing = false            # true: the last acquire script's integer reply is a fencing token
//! [acquire]                  # or [[acquire]] twice: two scripts run one after the other
//! script = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])"
//! keys = ["key"]             # KEYS: key, fence_key
//! argv = ["token", "ttl_ms"] # ARGV: key, fence_key, token, ttl_ms, now_ms
//! acquired = "ok"            # the reply that means acquired: ok, 1, integer>0, not-nil
//! [release]
//! path = "release.lua"       # relative to the file
//! keys = ["key"]
//! argv = ["token"]
//! released = "1"
//! [extend]                   # optional; renews every TTL/3 (params.watchdog)
//! ...
//! extended = "1"
//! ```
//!
//! Each script is compiled here, before any run, so that a syntax error is a usage error naming
//! the script and its line rather than a failure in the middle of a search. This lives in the
//! simulator because the Lua that compiles it is the simulator's.

use lockcheck_algorithms::redis::script_spec::{
    acquire_name, Expect, Input, ScriptStep, UserScript,
};
use lockcheck_core::input;
use lockcheck_core::scenario::{Algorithm, Params};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The largest script file (or script) read.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// A user's lock, as its file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptFile {
    /// The scripts, with their texts read in.
    pub script: UserScript,
    /// Whether the last acquire script's integer reply is a fencing token (`params.fencing`).
    pub fencing: bool,
}

impl ScriptFile {
    /// Sets in `params` what the file decides: its scripts (`params.redis.script`, embedded
    /// whole so that a report replays without the file), its `fencing`, and the watchdog when it
    /// has an extend script (renewing is what an extend script is for).
    pub fn apply_to(&self, params: &mut Params) {
        params.fencing |= self.fencing;
        params.watchdog |= self.script.extend.is_some();
        params.redis.script = Some(self.script.clone());
    }
}

/// Runs `algorithm` once with `params` and no faults: `Err` with the first failure of a user's
/// script in it ([`first_failure`]), naming the script and line. Every entry point that takes a
/// user's scripts (`explore`, `matrix`, `check`) runs this before searching: a script that
/// errors every time (a typo in a command's name, a wrong type) would otherwise pass for a lock
/// that is never free, and a search would report a deadlock, or nothing, about a lock that
/// cannot work at all.
///
/// Then every command a script names by a literal in `redis.call`/`redis.pcall` must be one the
/// simulated Redis models ([`unmodelled_command`]): one in a branch the rehearsal does not reach
/// (under contention, after a fault) would otherwise be refused only in the middle of the
/// search. (The run comes first because a command it reaches is refused there with the
/// script's own failure, line and all.) A command named otherwise is refused when a run calls
/// it.
pub fn rehearse(algorithm: Algorithm, params: &Params) -> Result<(), String> {
    let Some(script) = &params.redis.script else {
        return Ok(());
    };
    let mut scenario = lockcheck_core::Scenario::new(algorithm);
    scenario.params = params.clone();
    let outcome = crate::run(&scenario);
    if let Some(failure) = first_failure(&outcome.history) {
        return Err(format!(
            "{failure} (in a run without faults, before the search)"
        ));
    }
    for (name, step) in script.named_steps() {
        if let Some((command, line)) = unmodelled_command(&step.script) {
            return Err(format!(
                "the {name} script calls {command} (user_script:{line}): {}; lockcheck checks a \
                 script against the commands its simulated Redis models",
                crate::redis::parse::ParseError::NotModelled(command.clone())
            ));
        }
    }
    Ok(())
}

/// The first command that `source` names by a string literal in `redis.call(…)` or
/// `redis.pcall(…)` (or `pcall(redis.call, …)`) and the simulated Redis does not model,
/// upper-cased, with its line. Only literals are read: a name built at run time is refused when
/// it is called.
pub fn unmodelled_command(source: &str) -> Option<(String, usize)> {
    let mut rest = source;
    while let Some(at) = rest.find("redis.") {
        let line = 1 + source[..source.len() - rest.len() + at]
            .matches('\n')
            .count();
        let after = &rest[at + "redis.".len()..];
        rest = after;
        let Some(after) = after
            .strip_prefix("pcall")
            .or_else(|| after.strip_prefix("call"))
        else {
            continue;
        };
        // `redis.call('NAME', …)`, or `pcall(redis.call, 'NAME', …)`.
        let after = after.trim_start();
        let after = after.strip_prefix(['(', ',']).unwrap_or(after).trim_start();
        let Some(quote) = after.chars().next().filter(|c| *c == '\'' || *c == '"') else {
            continue;
        };
        let Some((name, _)) = after[1..].split_once(quote) else {
            continue;
        };
        if !crate::redis::parse::is_modelled(name) {
            return Some((name.to_ascii_uppercase(), line));
        }
    }
    None
}

/// A script file that cannot be used, naming the file and what is wrong.
#[derive(Debug, Error)]
pub enum ScriptFileError {
    /// The file (or a script it names) cannot be read.
    #[error("{path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Not of the file's shape.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Where and what.
        message: String,
    },
    /// A script does not compile.
    #[error("{path}: the {script} script does not compile: {message}")]
    Compile {
        /// The file.
        path: PathBuf,
        /// Which script.
        script: String,
        /// Lua's message, with the line (`user_script:3: …`).
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    acquire: Vec<FileStep>,
    release: FileStep,
    #[serde(default)]
    extend: Option<FileStep>,
    #[serde(default)]
    fencing: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStep {
    #[serde(default)]
    script: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    keys: Vec<Input>,
    #[serde(default)]
    argv: Vec<Input>,
    #[serde(default)]
    acquired: Option<Expect>,
    #[serde(default)]
    released: Option<Expect>,
    #[serde(default)]
    extended: Option<Expect>,
}

/// Reads the script file at `path`, and the script files it names, and compiles every script.
pub fn load(path: &Path) -> Result<ScriptFile, ScriptFileError> {
    let read = |p: &Path| {
        input::read_text(p, MAX_SCRIPT_BYTES).map_err(|e| ScriptFileError::Read {
            path: p.to_path_buf(),
            message: e.to_string(),
        })
    };
    let format = |message: String| ScriptFileError::Format {
        path: path.to_path_buf(),
        message,
    };
    let text = read(path)?;
    let json = path.extension().is_some_and(|e| e == "json");
    let mut value: serde_json::Value = if json {
        serde_json::from_str(&text).map_err(|e| format(e.to_string()))?
    } else {
        toml::from_str(&text).map_err(|e| format(e.to_string().trim_end().replace('\n', " ")))?
    };
    // `[acquire]` is one step, `[[acquire]]` several: read both as a list.
    if let Some(one @ serde_json::Value::Object(_)) = value.get_mut("acquire") {
        *one = serde_json::Value::Array(vec![one.take()]);
    }
    // serde would read a step written as a list (`release = ["return 1"]`) as its fields in
    // order: a step is a table, or refused.
    let by_position = |at: &str| {
        format(format!(
            "{at}: expected a table (named fields), got a list: lockcheck does not read fields \
             by position"
        ))
    };
    if value.is_array() {
        return Err(by_position("."));
    }
    for step in ["release", "extend"] {
        if value.get(step).is_some_and(serde_json::Value::is_array) {
            return Err(by_position(step));
        }
    }
    if let Some(steps) = value.get("acquire").and_then(serde_json::Value::as_array) {
        if let Some(i) = steps.iter().position(serde_json::Value::is_array) {
            return Err(by_position(&format!("acquire[{i}]")));
        }
    }
    let file: File = serde_path_to_error::deserialize(value)
        .map_err(|e| format(format!("{}: {}", e.path(), e.inner())))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let count = file.acquire.len();
    let mut acquire = Vec::new();
    for (i, step) in file.acquire.into_iter().enumerate() {
        acquire.push(step.resolve(&acquire_name(i, count), "acquired", dir, &read, &format)?);
    }
    let script = UserScript {
        acquire,
        release: file
            .release
            .resolve("release", "released", dir, &read, &format)?,
        extend: file
            .extend
            .map(|s| s.resolve("extend", "extended", dir, &read, &format))
            .transpose()?,
    };
    script.check().map_err(format)?;
    compile(&script).map_err(|(script, message)| ScriptFileError::Compile {
        path: path.to_path_buf(),
        script,
        message,
    })?;
    Ok(ScriptFile {
        script,
        fencing: file.fencing,
    })
}

impl FileStep {
    /// The step with its text read, its reply rule taken from the one word its section uses.
    fn resolve(
        self,
        name: &str,
        word: &str,
        dir: &Path,
        read: &impl Fn(&Path) -> Result<String, ScriptFileError>,
        format: &impl Fn(String) -> ScriptFileError,
    ) -> Result<ScriptStep, ScriptFileError> {
        let words = [
            ("acquired", self.acquired),
            ("released", self.released),
            ("extended", self.extended),
        ];
        if let Some((other, _)) = words.iter().find(|(w, e)| *w != word && e.is_some()) {
            return Err(format(format!(
                "{name}: '{other}' belongs to another section; here the reply is read with \
                 '{word}'"
            )));
        }
        let Some(success) = words.iter().find(|(w, _)| *w == word).and_then(|(_, e)| *e) else {
            return Err(format(format!(
                "{name}: give '{word}', the reply that means it worked ({})",
                Expect::WORDS
            )));
        };
        let script = match (self.script, self.path) {
            (Some(text), None) => text,
            (None, Some(p)) => read(&dir.join(p))?,
            _ => {
                return Err(format(format!(
                    "{name}: give the script's text ('script') or its file ('path'), one of them"
                )))
            }
        };
        Ok(ScriptStep {
            script,
            keys: self.keys,
            argv: self.argv,
            success,
        })
    }
}

/// The first failure of a user's script in `history` (as [`LockError::Script`] words it: `the
/// release script failed: ERR … on @user_script:2.`), if any. A script that fails at run time
/// is a broken lock, not a busy one: the CLI shows it rather than let a search report nothing.
///
/// [`LockError::Script`]: lockcheck_algorithms::LockError::Script
pub fn first_failure(history: &lockcheck_core::History) -> Option<&str> {
    use lockcheck_core::history::Op;
    history.entries.iter().find_map(|e| match &e.op {
        Op::Acquire {
            error: Some(text), ..
        }
        | Op::Release {
            error: Some(text), ..
        } if text.contains(" script failed: ") => Some(text.as_str()),
        _ => None,
    })
}

/// Compiles every script of `script` as Redis does (the body of a function named
/// `user_script`): `Err((which script, Lua's message with the line))` for the first that does
/// not compile.
pub fn compile(script: &UserScript) -> Result<(), (String, String)> {
    for (name, step) in script.named_steps() {
        crate::redis::compile_script(&step.script).map_err(|message| (name, message))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::unmodelled_command;

    #[test]
    fn literal_command_names_the_model_lacks_are_found_with_their_line() {
        assert_eq!(
            unmodelled_command("return redis.call('SET', KEYS[1], 1)"),
            None
        );
        assert_eq!(
            unmodelled_command("local x = 1\nreturn redis.call( \"object\", 'ENCODING', KEYS[1])"),
            Some(("OBJECT".into(), 2))
        );
        assert_eq!(
            unmodelled_command(
                "if redis.pcall('GET', KEYS[1]) then\n  redis.pcall('CLIENT', 'ID')\nend"
            ),
            Some(("CLIENT".into(), 2))
        );
        assert_eq!(
            unmodelled_command("local ok = pcall(redis.call, 'Client', 'ID')"),
            Some(("CLIENT".into(), 1))
        );
        // Names built at run time are left to the run.
        assert_eq!(
            unmodelled_command("return redis.call(ARGV[1], KEYS[1])"),
            None
        );
        assert_eq!(unmodelled_command("return redis.status_reply('OK')"), None);
        // Refused in scripts by Redis itself, with Redis's words: not this check's business.
        assert_eq!(
            unmodelled_command("return redis.call('EVAL', 'return 1', 0)"),
            None
        );
    }
}
