//! Failure reports: what a person (or CI) needs to understand a run and replay it byte for byte.

use crate::checker::{Availability, StaleAccess, Violation};
use crate::history::History;
use crate::outcome::Outcome;
use crate::profile::FaultProfile;
use crate::scenario::{Scenario, ScenarioError};
use crate::verdict::VerdictKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A report that cannot be read or written.
#[derive(Debug, Error)]
pub enum ReportError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a lockcheck report.
    #[error("{path}: not a lockcheck report: at {at}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where in the document.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// The scenario inside the report is not runnable.
    #[error("{path}: the embedded scenario is invalid: {source}")]
    Scenario {
        /// The file.
        path: PathBuf,
        /// Why.
        source: ScenarioError,
    },
}

/// How an exploration found the reported case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Search {
    /// The fault profiles searched.
    pub profiles: Vec<FaultProfile>,
    /// Seed of the search (`explore --seed`).
    pub seed: u64,
    /// Cases run up to and including the first failure.
    pub cases: u32,
    /// Runs spent shrinking it.
    pub shrink_runs: u32,
    /// The first failing case, before shrinking.
    pub original: Scenario,
}

/// The client processes of a real run of the user's lock library (`lockcheck real --client`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRun {
    /// The command each client ran (as `sh -c COMMAND`).
    pub command: String,
    /// Per process, in the order they started: the end of its stderr (what the library logged).
    pub stderr: Vec<ClientStderr>,
    /// The names the library writes beside the lock, as declared (`--client-keys`: patterns,
    /// `{key}` standing for the lock's name, a trailing `*` a prefix): checked free before a run
    /// on the user's servers and removed after it. Empty: none declared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// The lease the library declares it really uses (`--client-lease-ms`), which the liveness
    /// checks judged by instead of the one lockcheck gave it. None: none declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

impl ClientRun {
    /// The flags that run this client again: ` --client COMMAND`, and its declarations.
    pub fn flags(&self) -> String {
        let mut flags = format!(" --client {}", shell_quote(&self.command));
        if !self.keys.is_empty() {
            flags += &format!(" --client-keys {}", shell_quote(&self.keys.join(",")));
        }
        if let Some(ms) = self.lease_ms {
            flags += &format!(" --client-lease-ms {ms}");
        }
        flags
    }
}

/// The end of one client process's stderr.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientStderr {
    /// Its node (`client-0`, …, `probe`).
    pub client: String,
    /// Which of that node's processes (1, then one more per restart).
    pub incarnation: u64,
    /// Its last lines on stderr (a bounded number, each clipped), oldest first.
    pub lines: Vec<String>,
}

/// `text` as one word for a POSIX shell: as is when it holds only characters no shell treats
/// specially, otherwise in single quotes (a quote inside written `'\''`).
pub fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// Where the reported run happened, which decides what replaying it means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunWorld {
    /// The simulator: the report replays byte for byte (`lockcheck replay`).
    #[default]
    Simulation,
    /// Real servers (`lockcheck real`): the machine decided the interleaving, so the history is
    /// not byte-replayable; the scenario is, in both worlds.
    Real,
}

impl RunWorld {
    fn is_simulation(&self) -> bool {
        *self == RunWorld::Simulation
    }
}

/// A report. Written as JSON; `scenario` is runnable as is (`lockcheck run`), and
/// `lockcheck replay` checks that it still yields `history_hash`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Version of lockcheck that wrote it.
    pub lockcheck: String,
    /// The verdict.
    pub verdict: VerdictKind,
    /// The verdict in one sentence.
    pub summary: String,
    /// The command that replays this report (for a real run: that reruns its scenario).
    pub replay_command: String,
    /// Where the run happened; absent for the simulation.
    #[serde(default, skip_serializing_if = "RunWorld::is_simulation")]
    pub world: RunWorld,
    /// The simulator seed.
    pub seed: u64,
    /// The (minimal) fault schedule, for people.
    pub schedule: Vec<String>,
    /// What was found.
    pub violations: Vec<Violation>,
    /// Accesses a fencing resource rejected (the fence working, not violations).
    pub stale_accesses: Vec<StaleAccess>,
    /// Acquisition attempts by how many servers the client could reach.
    pub availability: Availability,
    /// How the case was found, when it came from `explore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Search>,
    /// A real run whose clients were processes of the user's command (`lockcheck real
    /// --client`): the command, and what each process wrote last to its stderr. Absent for
    /// lockcheck's own clients (and in reports written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientRun>,
    /// The whole truth of the run.
    pub scenario: Scenario,
    /// Digest of `history`.
    pub history_hash: String,
    /// Everything that happened.
    pub history: History,
}

impl Report {
    /// A report of one run.
    pub fn of_run(scenario: &Scenario, outcome: &Outcome) -> Report {
        Report::of_run_in(scenario, outcome, RunWorld::Simulation)
    }

    /// A report of one run in `world`.
    fn of_run_in(scenario: &Scenario, outcome: &Outcome, world: RunWorld) -> Report {
        // The headline tells the worst finding (the first of those, in time).
        let worst = outcome.violations.iter().min_by_key(|v| v.kind.severity());
        let summary = match worst {
            // A liveness headline still gives the safety answer (a deadlock must not hide
            // whether two clients held the lock).
            Some(v) if !v.kind.is_safety() => format!(
                "{} violated ({} found): {}; {}",
                scenario.algorithm.name(),
                outcome.violations.len(),
                v.story,
                crate::checker::safety_answer(&outcome.violations, world.is_simulation())
            ),
            Some(v) => format!(
                "{} violated ({} found): {}",
                scenario.algorithm.name(),
                outcome.violations.len(),
                v.story
            ),
            None if !outcome.stale_accesses.is_empty() => format!(
                "{}: no violation; the fencing resource rejected {} stale access(es)",
                scenario.algorithm.name(),
                outcome.stale_accesses.len()
            ),
            None => format!("{}: no violation in this run", scenario.algorithm.name()),
        };
        Report {
            lockcheck: env!("CARGO_PKG_VERSION").to_string(),
            verdict: if outcome.violated() {
                VerdictKind::Found
            } else {
                VerdictKind::NotFound
            },
            summary,
            replay_command: String::new(),
            world,
            seed: scenario.seed,
            schedule: scenario.faults.iter().map(|f| f.describe()).collect(),
            violations: outcome.violations.clone(),
            stale_accesses: outcome.stale_accesses.clone(),
            availability: outcome.availability,
            search: None,
            client: None,
            scenario: scenario.clone(),
            history_hash: outcome.digest(),
            history: outcome.history.clone(),
        }
    }

    /// A report of a search's finding: `search` says how it was found.
    pub fn of_search(scenario: &Scenario, outcome: &Outcome, search: Search) -> Report {
        Report {
            search: Some(search),
            ..Report::of_run(scenario, outcome)
        }
    }

    /// A report of one run against real servers: not byte-replayable, its scenario is.
    pub fn of_real_run(scenario: &Scenario, outcome: &Outcome) -> Report {
        Report::of_run_in(scenario, outcome, RunWorld::Real)
    }

    /// Reads and validates a report.
    pub fn read(path: &Path) -> Result<Report, ReportError> {
        let text =
            crate::input::read_text(path, crate::input::MAX_REPORT_BYTES).map_err(|source| {
                ReportError::Io {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        let mut report: Report =
            crate::input::parse_json(&text).map_err(|e| ReportError::Malformed {
                path: path.to_path_buf(),
                at: e.path,
                message: e.message,
            })?;
        // A report written before scenarios said where their randomness came from drew it from
        // the simulation's one shared generator: it replays with that.
        // Which fields the scenarios hold is read apart, skipping the rest (the history): the
        // whole report as a JSON value would take several times the file's size.
        let written: Written = serde_json::from_str(&text).unwrap_or_default();
        if !written.scenario.randomness {
            report.scenario.randomness = crate::scenario::Randomness::Shared;
        }
        if let Some(search) = &mut report.search {
            if !written
                .search
                .as_ref()
                .is_some_and(|s| s.original.randomness)
            {
                search.original.randomness = crate::scenario::Randomness::Shared;
            }
        }
        // A report written before servers' clocks had origins of their own ran every server's
        // clock from 0: it replays with that.
        if !written.scenario.server_clocks {
            report.scenario.server_clocks = crate::scenario::ServerClocks::Zero;
        }
        if let Some(search) = &mut report.search {
            if !written
                .search
                .as_ref()
                .is_some_and(|s| s.original.server_clocks)
            {
                search.original.server_clocks = crate::scenario::ServerClocks::Zero;
            }
        }
        let scenario = |source| ReportError::Scenario {
            path: path.to_path_buf(),
            source,
        };
        report.scenario.validate().map_err(scenario)?;
        if let Some(search) = &report.search {
            search.original.validate().map_err(scenario)?;
        }
        Ok(report)
    }
}

/// Which of the fields added to scenarios since the first reports a report's scenarios hold (as
/// written: a missing one means the behaviour of before it), read without the rest.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Written {
    scenario: WrittenScenario,
    search: Option<WrittenSearch>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct WrittenSearch {
    original: WrittenScenario,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct WrittenScenario {
    #[serde(deserialize_with = "present")]
    randomness: bool,
    #[serde(deserialize_with = "present")]
    server_clocks: bool,
}

/// `true` for a field that is there, whatever its value (a missing one is `false`, the default).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

/// A recorded field of a report that its replay does not reproduce (or that contradicts the rest
/// of the report).
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The report's field: `verdict`, `violations`, `seed`, `history_hash`, …
    pub field: &'static str,
    /// What the report says.
    pub report: String,
    /// What the replay (or, for `seed` and `schedule`, the report's own scenario) gives.
    pub replay: String,
}

/// The result of replaying a report.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The new run.
    pub outcome: Outcome,
    /// Index of the first history entry that differs from the report's, if any.
    pub first_difference: Option<usize>,
    /// Every other recorded field the replay does not reproduce, in the report's order.
    pub differences: Vec<Difference>,
}

impl Replay {
    /// Whether the replay reproduced the report exactly: its history entry by entry, the hash,
    /// the verdict and everything the report says was found.
    pub fn identical(&self) -> bool {
        self.first_difference.is_none() && self.differences.is_empty()
    }
}

impl Replay {
    /// Compares what `report` records with `outcome`, a rerun of its scenario: the history entry
    /// by entry, and each field a person or CI reads (verdict, summary, violations, rejected
    /// accesses, availability, hash), plus the fields that only restate the scenario (seed,
    /// schedule). An edited report does not replay as identical. (The simulator's
    /// `lockcheck_sim::replay` reruns the scenario and calls this.)
    pub fn compare(report: &Report, outcome: Outcome) -> Replay {
        let first_difference = outcome.history.first_difference(&report.history);
        let fresh = Report::of_run(&report.scenario, &outcome);
        let mut differences = Vec::new();
        let mut compare =
            |field: &'static str, recorded: serde_json::Value, replayed: serde_json::Value| {
                if recorded != replayed {
                    differences.push(Difference {
                        field,
                        report: crate::input::clip(&recorded.to_string()),
                        replay: crate::input::clip(&replayed.to_string()),
                    });
                }
            };
        compare("verdict", json(&report.verdict), json(&fresh.verdict));
        compare("summary", json(&report.summary), json(&fresh.summary));
        compare("seed", json(&report.seed), json(&fresh.seed));
        compare("schedule", json(&report.schedule), json(&fresh.schedule));
        compare(
            "violations",
            json(&report.violations),
            json(&fresh.violations),
        );
        compare(
            "stale_accesses",
            json(&report.stale_accesses),
            json(&fresh.stale_accesses),
        );
        compare(
            "availability",
            json(&report.availability),
            json(&fresh.availability),
        );
        // The hash is compared with the replay's, and with the history the report holds: a hash
        // edited to match a replay that diverged, or a history edited under its hash, both show.
        compare(
            "history_hash",
            json(&report.history_hash),
            json(&fresh.history_hash),
        );
        Replay {
            outcome,
            first_difference,
            differences,
        }
    }
}

/// A field as it is written in the file, so that every field compares the way a reader sees it.
fn json<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("report fields serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("reports/a-1.json"), "reports/a-1.json");
        assert_eq!(
            shell_quote("/usr/bin/python3 clients/x.py"),
            "'/usr/bin/python3 clients/x.py'"
        );
        assert_eq!(shell_quote("it's $HOME"), r#"'it'\''s $HOME'"#);
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn a_client_runs_rerun_command_reruns_the_client_and_the_field_is_optional() {
        let scenario = Scenario::new(crate::Algorithm::SingleRedis);
        let outcome = Outcome::of(History::default(), &scenario);
        let mut report = Report::of_real_run(&scenario, &outcome);
        report.client = Some(ClientRun {
            command: "node clients/node-redlock/redlock_client.js 'a b'".into(),
            stderr: vec![ClientStderr {
                client: "client-0".into(),
                incarnation: 1,
                lines: vec!["connected".into()],
            }],
            keys: vec!["lock:{key}".into(), "lock-signal:{key}*".into()],
            lease_ms: Some(60_000),
        });
        let dir = std::env::temp_dir().join(format!("lockcheck-report-{}", std::process::id()));
        let path = report.write(&dir, "real-single-redis").unwrap();
        assert!(
            report.replay_command.contains(concat!(
                r#" --client 'node clients/node-redlock/redlock_client.js '\''a b'\'''"#,
                " --client-keys 'lock:{key},lock-signal:{key}*' --client-lease-ms 60000"
            )),
            "{}",
            report.replay_command
        );
        let read = Report::read(&path).unwrap();
        assert_eq!(read.client, report.client);
        // A client run without the declarations (reports written before them) still reads.
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let client = value["client"].as_object_mut().unwrap();
        client.remove("keys");
        client.remove("lease_ms");
        std::fs::write(&path, value.to_string()).unwrap();
        let read = Report::read(&path).unwrap().client.unwrap();
        assert_eq!((read.keys.len(), read.lease_ms), (0, None));
        // A report without the field (every report written before it) still reads.
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        value.as_object_mut().unwrap().remove("client");
        std::fs::write(&path, value.to_string()).unwrap();
        assert_eq!(Report::read(&path).unwrap().client, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
