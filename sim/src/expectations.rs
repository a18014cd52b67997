//! Expected verdicts (`lockcheck check FILE`): a TOML file of searches, each with the verdict it
//! must reach within its budget. It pins what lockcheck is for — the known results of the
//! literature (`expectations/known-results.toml`) — so that a change to an algorithm, the
//! simulator or the search that loses a known violation, or finds one where none should be,
//! fails CI.
//!
//! ```toml
//! [[expect]]
//! name = "single-redis-pause"          # names the entry's report and regression file
//! about = "holder pause longer than the TTL"
//! algorithm = "single-redis"
//! faults = ["pause"]
//! params = { ttl_ms = 10000 }          # the scenario file's `params`, same names and defaults
//! cases = 300                          # the budget
//! expect = "unsafe"                    # or "not-found"
//! ```
//!
//! Your own lock (an algorithm that runs your scripts) takes the file of its scripts, relative
//! to the expectations file, so that a team's CI pins its lock's verdicts:
//!
//! ```toml
//! [[expect]]
//! name = "our-lock-pause"
//! algorithm = "redis-script"
//! script = "locks/our-lock.toml"       # as `lockcheck explore --script`
//! faults = ["pause"]
//! cases = 300
//! expect = "not-found"
//! ```
//!
//! Optional per entry: `seed` (default: the file's top-level `seed`, else 0), `max_drift`,
//! `max_partition_ms`, `safety_only` (default true: only two holders or a lock freed under its
//! holder count, not deadlocks or order), `violation` (count only this kind, e.g.
//! `"mutual_exclusion"`, the sense of "unsafe" in the known-results table).

use crate::cell::CellVerdict;
use crate::explore::{check_options, ExploreOptions};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::profile::{FaultProfile, DEFAULT_MAX_DRIFT};
use lockcheck_core::scenario::{Algorithm, Params};
use lockcheck_core::verdict::VerdictKind;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A file that cannot be used, with the line at fault.
#[derive(Debug, Error)]
pub enum ExpectationsError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not valid TOML, not of the expected shape, or an entry that cannot be searched.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line at fault, from 1.
        line: usize,
        /// What is wrong there.
        message: String,
    },
}

/// The verdict an entry expects, in the file's words: `unsafe` (the search finds a violation
/// within the budget) or `not-found` (it finds nothing, which is all a search can say: there is
/// no "safe").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Expect {
    Unsafe,
    NotFound,
}

impl From<Expect> for VerdictKind {
    fn from(expect: Expect) -> VerdictKind {
        match expect {
            Expect::Unsafe => VerdictKind::Found,
            Expect::NotFound => VerdictKind::NotFound,
        }
    }
}

/// One entry: a search and the verdict it must reach.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// Its name: lowercase letters, digits and `-`; unique in the file.
    pub name: String,
    /// What the entry stands for, for people.
    pub about: Option<String>,
    /// The search (with one thread and the whole case space).
    pub options: ExploreOptions,
    /// The expected verdict.
    pub expect: VerdictKind,
    /// Where the entry starts in the file, from 1.
    pub line: usize,
}

impl Expectation {
    /// Whether `verdict` is the expected one.
    pub fn met_by(&self, verdict: &CellVerdict) -> bool {
        self.expect == verdict.kind()
    }
}

/// The file's shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Seed of entries that give none.
    #[serde(default)]
    seed: u64,
    /// The entries.
    #[serde(default)]
    expect: Vec<toml::Spanned<Entry>>,
}

/// One entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default)]
    about: Option<String>,
    algorithm: Algorithm,
    faults: Vec<FaultProfile>,
    #[serde(default)]
    params: Params,
    #[serde(default)]
    script: Option<PathBuf>,
    cases: u32,
    expect: Expect,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    max_drift: Option<f64>,
    #[serde(default)]
    max_partition_ms: Option<u64>,
    #[serde(default = "yes")]
    safety_only: bool,
    #[serde(default)]
    violation: Option<ViolationKind>,
}

fn yes() -> bool {
    true
}

/// The line (from 1) of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at).unwrap_or(text).matches('\n').count() + 1
}

/// Reads and checks an expectations file.
pub fn read(path: &Path) -> Result<Vec<Expectation>, ExpectationsError> {
    let text = lockcheck_core::input::read_text(path, lockcheck_core::input::MAX_SCENARIO_BYTES)
        .map_err(|source| ExpectationsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    parse(&text, path)
}

/// Parses and checks the text of an expectations file (`path` names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<Vec<Expectation>, ExpectationsError> {
    let invalid = |line: usize, message: String| ExpectationsError::Invalid {
        path: path.to_path_buf(),
        line,
        message,
    };
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        invalid(line, lockcheck_core::input::clip_quotes(e.message().trim()))
    })?;
    if file.expect.is_empty() {
        return Err(invalid(
            1,
            "no [[expect]] entry: the file checks nothing".into(),
        ));
    }
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for spanned in file.expect {
        let line = line_of(text, spanned.span().start);
        let entry = spanned.into_inner();
        let bad = |m: String| {
            Err(invalid(
                line,
                format!(
                    "[[expect]] '{}': {m}",
                    lockcheck_core::input::clip(&entry.name)
                ),
            ))
        };
        let well_named = !entry.name.is_empty()
            && entry
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !well_named {
            return bad(
                "name must be lowercase letters, digits and '-' (it names the report and the \
                 regression file)"
                    .into(),
            );
        }
        if let Some(first) = names.insert(entry.name.clone(), line) {
            return bad(format!("name already used by the entry at line {first}"));
        }
        if entry.faults.is_empty() {
            return bad("faults must name at least one profile (\"none\" for none)".into());
        }
        if let Some(kind) = entry.violation {
            // A search that counts only safety violations never counts any other kind: such an
            // entry could never be found unsafe, and an expected "not-found" could never fail.
            if entry.safety_only && !kind.is_safety() {
                return bad(format!(
                    "violation {kind:?} is not a safety violation, and the search counts only \
                     those (safety_only = true): set safety_only = false to count it"
                ));
            }
        }
        let mut params = entry.params.clone();
        if let Some(file) = &entry.script {
            // Relative to the expectations file, as a team keeps both in its repository.
            let file = path.parent().unwrap_or(Path::new("")).join(file);
            match crate::script_file::load(&file) {
                Ok(read) => read.apply_to(&mut params),
                Err(e) => return bad(format!("script: {e}")),
            }
        }
        let options = ExploreOptions {
            params,
            max_drift: entry.max_drift.unwrap_or(DEFAULT_MAX_DRIFT),
            max_partition_ms: entry.max_partition_ms,
            safety_only: entry.safety_only,
            only: entry.violation,
            ..ExploreOptions::new(
                entry.algorithm,
                entry.faults.clone(),
                entry.cases,
                entry.seed.unwrap_or(file.seed),
            )
        };
        if let Err(e) = check_options(&options) {
            return bad(e.to_string());
        }
        if let Err(e) = crate::script_file::rehearse(options.algorithm, &options.params) {
            return bad(e);
        }
        out.push(Expectation {
            name: entry.name,
            about: entry.about,
            options,
            expect: entry.expect.into(),
            line,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Vec<Expectation>, ExpectationsError> {
        parse(text, Path::new("e.toml"))
    }

    const GOOD: &str = r#"
seed = 3

[[expect]]
name = "single-redis-pause"
algorithm = "single-redis"
faults = ["pause"]
cases = 100
violation = "mutual_exclusion"
expect = "unsafe"

[[expect]]
name = "single-redis-fencing-pause"
algorithm = "single-redis"
params = { fencing = true, ttl_ms = 5000 }
faults = ["pause", "clock-jump"]
cases = 50
seed = 9
expect = "not-found"
"#;

    #[test]
    fn a_good_file_reads_with_defaults_and_lines() {
        let e = parse_text(GOOD).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].line, 4);
        assert_eq!(e[0].options.seed, 3);
        assert!(e[0].options.safety_only);
        assert_eq!(e[0].options.only, Some(ViolationKind::MutualExclusion));
        assert_eq!(e[1].options.only, None);
        assert_eq!(e[1].options.seed, 9);
        assert!(e[1].options.params.fencing);
        assert_eq!(e[1].options.params.ttl_ms, Some(5000));
        assert_eq!(
            e[1].options.profiles,
            vec![FaultProfile::Pause, FaultProfile::ClockJump]
        );
        assert_eq!(e[1].expect, VerdictKind::NotFound);
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line, needle) in [
            (
                "[[expect]]\nname = \"x\"\nalgorithm = \"paxos\"\n",
                3,
                "paxos",
            ),
            ("[[expect]\n", 1, ""),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nfaults = [\"pause\"]\n\
                 cases = 1\nexpect = \"safe\"\n",
                6,
                "safe",
            ),
            (
                "\n\n[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nfaults = [\"pause\"]\n\
                 params = { fencing = true }\ncases = 1\nexpect = \"unsafe\"\n",
                3,
                "fencing",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"redis-fair\"\nfaults = [\"none\"]\n\
                 cases = 1\nviolation = \"fifo_order\"\nexpect = \"not-found\"\n",
                1,
                "safety_only = false",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nfaults = [\"meteor\"]\n\
                 cases = 1\nexpect = \"unsafe\"\n",
                4,
                "meteor",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"single-redis\"\nfaults = [\"failover\"]\n\
                 cases = 1\nexpect = \"unsafe\"\n",
                1,
                "replica",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"single-redis\"\nfaults = [\"none\"]\n\
                 cases = 0\nexpect = \"unsafe\"\n",
                1,
                "cases",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"single-redis\"\nfaults = [\"none\"]\n\
                 cases = 1\nexpect = \"unsafe\"\n[[expect]]\nname = \"a\"\n\
                 algorithm = \"single-redis\"\nfaults = [\"none\"]\ncases = 1\n\
                 expect = \"unsafe\"\n",
                7,
                "line 1",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"single-redis\"\nfaults = [\"none\"]\n\
                 cases = 1\nexpect = \"unsafe\"\nparams = { tll_ms = 3 }\n",
                7,
                "tll_ms",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"single-redis\"\nfaults = [\"none\"]\n\
                 cases = 1\nmax_drift = 1.5\nexpect = \"unsafe\"\n",
                1,
                "max_drift",
            ),
            ("seed = 1\n", 1, "no [[expect]]"),
        ] {
            let e = parse_text(text).expect_err(text);
            let ExpectationsError::Invalid {
                line: got, message, ..
            } = &e
            else {
                panic!("{text}: {e}");
            };
            assert_eq!(*got, line, "{text}: {e}");
            assert!(message.contains(needle), "{text}: {e}");
            assert!(
                e.to_string().starts_with(&format!("e.toml:{line}: ")),
                "{e}"
            );
        }
    }
}
