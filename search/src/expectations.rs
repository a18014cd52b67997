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
//! `max_partition_ms`, `safety_only` (default true: only two holders, or a lock freed or
//! extended by a client that did not hold it, count, not deadlocks or order), `violation` (count
//! only this kind, e.g. `"mutual_exclusion"`, the sense of "unsafe" in the known-results table,
//! or `"foreign_extend"`, which separates a watchdog that checks its owner from one that does
//! not), `careful` (`"always"`: every client checks its lock before each access, the client a
//! team writes to stay safe; `"half"`: half the cases draw such clients; `"never"`, the
//! default: the classic client; as `lockcheck explore --careful`).
//!
//! A **story** entry pins one scenario file (`lockcheck run`'s format, relative to the
//! expectations file) instead of a search: a story that separates two versions of a library, or
//! a fault just short of a threshold, which a search draws too rarely to pin. A run is
//! deterministic, so its verdict is `unsafe` or `safe` (a violation of the kind counted, or
//! none); `variant` runs the file as that library variant (as `lockcheck run --variant`):
//!
//! ```toml
//! [[expect]]
//! name = "etcd-3-4-waiter-whose-lease-ran-out"
//! scenario = "stories/etcd-waiter-whose-lease-ran-out.json"
//! variant = "etcd-3.4"
//! expect = "unsafe"                    # or "safe"
//! ```
//!
//! A story counts safety violations unless `safety_only = false` (then every kind, or the one
//! `violation` names: a liveness story pins `violation = "deadlock"`).

use crate::cell::CellVerdict;
use crate::explore::{check_options, Careful, ExploreOptions};
use lockcheck_core::checker::{Violation, ViolationKind};
use lockcheck_core::profile::{FaultProfile, DEFAULT_MAX_DRIFT};
use lockcheck_core::scenario::{Algorithm, Params, Scenario};
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
/// within the budget, or the story has one) or `not-found` (the search finds nothing, which is all
/// a search can say) or, for a story only, `safe` (its one deterministic run has no violation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Expect {
    Unsafe,
    NotFound,
    Safe,
}

impl From<Expect> for VerdictKind {
    fn from(expect: Expect) -> VerdictKind {
        match expect {
            Expect::Unsafe => VerdictKind::Found,
            Expect::NotFound | Expect::Safe => VerdictKind::NotFound,
        }
    }
}

/// What an entry runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// A search (with one thread and the whole case space).
    Search(ExploreOptions),
    /// One scenario, run once.
    Story(Story),
}

/// A story entry's scenario and what counts as a violation in its run.
#[derive(Clone, Debug, PartialEq)]
pub struct Story {
    /// The scenario file, as the entry names it (joined to the expectations file's folder).
    pub file: PathBuf,
    /// The scenario, with the entry's `variant` applied and validated.
    pub scenario: Scenario,
    /// Count only safety violations (`safety_only`, the default).
    pub safety_only: bool,
    /// Count only this kind (`violation`).
    pub only: Option<ViolationKind>,
}

impl Story {
    /// The violations of a run of the story that count.
    pub fn counted<'a>(&self, violations: &'a [Violation]) -> Vec<&'a Violation> {
        violations
            .iter()
            .filter(|v| !self.safety_only || v.kind.is_safety())
            .filter(|v| self.only.is_none_or(|k| v.kind == k))
            .collect()
    }
}

/// One entry: a search or a story, and the verdict it must reach.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// Its name: lowercase letters, digits and `-`; unique in the file.
    pub name: String,
    /// What the entry stands for, for people.
    pub about: Option<String>,
    /// What it runs.
    pub check: Check,
    /// The expected verdict: `Found` (unsafe), `NotFound` (a search's "not found", a story's
    /// "safe").
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
    #[serde(default)]
    scenario: Option<PathBuf>,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    algorithm: Option<Algorithm>,
    #[serde(default)]
    faults: Option<Vec<FaultProfile>>,
    #[serde(default)]
    params: Option<Params>,
    #[serde(default)]
    script: Option<PathBuf>,
    #[serde(default)]
    cases: Option<u32>,
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
    #[serde(default)]
    careful: Option<Careful>,
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
    // The file as written, for what serde cannot tell: a list where a table belongs (`params =
    // [10000]`) is read as the table's fields in order, and is refused below.
    let written = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_default();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, spanned) in file.expect.into_iter().enumerate() {
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
        if let Some(params) = &entry.params {
            let as_written = &written["expect"][i]["params"];
            if let Err(e) = lockcheck_core::input::objects_where_written(as_written, params) {
                let at = match e.path.as_str() {
                    "." => "params".to_string(),
                    path => format!("params.{path}"),
                };
                return bad(format!(
                    "{at}: {}",
                    e.message.replace(
                        "an object with named fields (`{...}`)",
                        "a table (named fields)"
                    )
                ));
            }
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
        let folder = path.parent().unwrap_or(Path::new(""));
        if let Some(file) = &entry.scenario {
            let search_only = [
                ("algorithm", entry.algorithm.is_some()),
                ("faults", entry.faults.is_some()),
                ("params", entry.params.is_some()),
                ("script", entry.script.is_some()),
                ("cases", entry.cases.is_some()),
                ("seed", entry.seed.is_some()),
                ("max_drift", entry.max_drift.is_some()),
                ("max_partition_ms", entry.max_partition_ms.is_some()),
                ("careful", entry.careful.is_some()),
            ];
            if let Some((key, _)) = search_only.iter().find(|(_, given)| *given) {
                return bad(format!(
                    "{key} belongs to a search; a story entry (scenario) runs its file as written \
                     (give it a variant, or write another file)"
                ));
            }
            if entry.expect == Expect::NotFound {
                return bad(
                    "a story runs once and has a verdict: expect \"unsafe\" or \"safe\", not \
                     \"not-found\""
                        .into(),
                );
            }
            let scenario = match read_story(&folder.join(file), entry.variant.as_deref()) {
                Ok(scenario) => scenario,
                Err(e) => return bad(format!("scenario {}: {e}", file.display())),
            };
            out.push(Expectation {
                name: entry.name,
                about: entry.about,
                check: Check::Story(Story {
                    file: folder.join(file),
                    scenario,
                    safety_only: entry.safety_only,
                    only: entry.violation,
                }),
                expect: entry.expect.into(),
                line,
            });
            continue;
        }
        if entry.variant.is_some() {
            return bad(
                "variant belongs to a story entry (scenario); a search takes it in params".into(),
            );
        }
        if entry.expect == Expect::Safe {
            return bad(
                "a search can only say \"not-found\" (within its budget), never \"safe\"".into(),
            );
        }
        let (Some(algorithm), Some(faults), Some(cases)) =
            (entry.algorithm, entry.faults.clone(), entry.cases)
        else {
            return bad(
                "an entry is a search (algorithm, faults, cases) or a story (scenario)".into(),
            );
        };
        if faults.is_empty() {
            return bad("faults must name at least one profile (\"none\" for none)".into());
        }
        let mut params = entry.params.clone().unwrap_or_default();
        if let Some(file) = &entry.script {
            // Relative to the expectations file, as a team keeps both in its repository.
            let file = folder.join(file);
            match lockcheck_sim::script_file::load(&file) {
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
            careful: entry.careful.unwrap_or_default(),
            ..ExploreOptions::new(algorithm, faults, cases, entry.seed.unwrap_or(file.seed))
        };
        if let Err(e) = check_options(&options) {
            return bad(e.to_string());
        }
        if let Err(e) = lockcheck_sim::script_file::rehearse(options.algorithm, &options.params) {
            return bad(e);
        }
        out.push(Expectation {
            name: entry.name,
            about: entry.about,
            check: Check::Search(options),
            expect: entry.expect.into(),
            line,
        });
    }
    Ok(out)
}

/// Reads a story's scenario file, run as library variant `variant` when one is named.
fn read_story(file: &Path, variant: Option<&str>) -> Result<Scenario, String> {
    let text = lockcheck_core::input::read_text(file, lockcheck_core::input::MAX_SCENARIO_BYTES)
        .map_err(|e| e.to_string())?;
    let mut scenario = Scenario::from_json(&text).map_err(|e| e.to_string())?;
    if let Some(variant) = variant {
        scenario.params.variant = Some(variant.to_string());
        scenario.validate().map_err(|e| e.to_string())?;
    }
    lockcheck_sim::script_file::rehearse(scenario.algorithm, &scenario.params)?;
    Ok(scenario)
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

    fn search(e: &Expectation) -> &ExploreOptions {
        match &e.check {
            Check::Search(options) => options,
            Check::Story(_) => panic!("{} is a story", e.name),
        }
    }

    #[test]
    fn a_good_file_reads_with_defaults_and_lines() {
        let e = parse_text(GOOD).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].line, 4);
        assert_eq!(search(&e[0]).seed, 3);
        assert!(search(&e[0]).safety_only);
        assert_eq!(search(&e[0]).only, Some(ViolationKind::MutualExclusion));
        assert_eq!(search(&e[1]).only, None);
        assert_eq!(search(&e[1]).seed, 9);
        assert!(search(&e[1]).params.fencing);
        assert_eq!(search(&e[1]).params.ttl_ms, Some(5000));
        assert_eq!(
            search(&e[1]).profiles,
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
                 cases = 1\nexpect = \"maybe\"\n",
                6,
                "maybe",
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

    /// A scenario file beside a fresh expectations file, in a folder of its own.
    fn story_dir(tag: &str, scenario: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "lockcheck-expectations-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(dir.join("stories")).unwrap();
        std::fs::write(dir.join("stories/s.json"), scenario).unwrap();
        dir
    }

    const STORY: &str = r#"{"algorithm": "etcd-mutex", "clients": 2, "duration_ms": 5000}"#;

    #[test]
    fn a_story_entry_reads_its_file_relative_to_the_expectations_and_takes_a_variant() {
        let dir = story_dir("good", STORY);
        let text = "[[expect]]\nname = \"s\"\nscenario = \"stories/s.json\"\n\
                    variant = \"etcd-3.4\"\nexpect = \"safe\"\n";
        let e = parse(text, &dir.join("e.toml")).unwrap();
        let Check::Story(story) = &e[0].check else {
            panic!("not a story");
        };
        assert_eq!(story.scenario.params.variant.as_deref(), Some("etcd-3.4"));
        assert_eq!(story.file, dir.join("stories/s.json"));
        assert!(story.safety_only);
        assert_eq!(e[0].expect, VerdictKind::NotFound);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_story_entry_refuses_what_belongs_to_a_search_and_a_verdict_it_cannot_have() {
        let dir = story_dir("bad", STORY);
        let head = "[[expect]]\nname = \"s\"\nscenario = \"stories/s.json\"\n";
        for (rest, needle) in [
            (
                "cases = 3\nexpect = \"safe\"\n",
                "cases belongs to a search",
            ),
            (
                "faults = [\"pause\"]\nexpect = \"safe\"\n",
                "faults belongs",
            ),
            ("expect = \"not-found\"\n", "runs once"),
            ("variant = \"etcd-9\"\nexpect = \"safe\"\n", "etcd-9"),
        ] {
            let e = parse(&format!("{head}{rest}"), &dir.join("e.toml")).expect_err(rest);
            assert!(e.to_string().contains(needle), "{rest}: {e}");
        }
        let missing = "[[expect]]\nname = \"s\"\nscenario = \"stories/none.json\"\n\
                       expect = \"unsafe\"\n";
        let e = parse(missing, &dir.join("e.toml")).unwrap_err();
        assert!(e.to_string().contains("none.json"), "{e}");
        // A search cannot say "safe", nor be half a search.
        for (text, needle) in [
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nfaults = [\"pause\"]\n\
                 cases = 1\nexpect = \"safe\"\n",
                "never \"safe\"",
            ),
            (
                "[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nexpect = \"unsafe\"\n",
                "a search (algorithm, faults, cases) or a story",
            ),
        ] {
            let e = parse_text(text).expect_err(text);
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
