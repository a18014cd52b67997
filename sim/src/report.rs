//! Failure reports: what a person (or CI) needs to understand a run and replay it byte for byte.

use crate::checker::{Availability, StaleAccess, Violation};
use crate::explore::{FaultProfile, Finding};
use crate::history::History;
use crate::runner::{run, Outcome};
use crate::scenario::{Scenario, ScenarioError};
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

/// The verdict of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At least one violation.
    Violation,
    /// Nothing found in this run.
    NoViolation,
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
    pub verdict: Verdict,
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
        // The headline tells the worst finding (the first of those, in time).
        let worst = outcome.violations.iter().min_by_key(|v| v.kind.severity());
        let summary = match worst {
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
                Verdict::Violation
            } else {
                Verdict::NoViolation
            },
            summary,
            replay_command: String::new(),
            world: RunWorld::Simulation,
            seed: scenario.seed,
            schedule: scenario.faults.iter().map(|f| f.describe()).collect(),
            violations: outcome.violations.clone(),
            stale_accesses: outcome.stale_accesses.clone(),
            availability: outcome.availability,
            search: None,
            scenario: scenario.clone(),
            history_hash: outcome.digest(),
            history: outcome.history.clone(),
        }
    }

    /// A report of an exploration's finding.
    pub fn of_finding(finding: &Finding, profiles: &[FaultProfile], seed: u64) -> Report {
        let mut report = Report::of_run(&finding.scenario, &finding.outcome);
        report.search = Some(Search {
            profiles: profiles.to_vec(),
            seed,
            cases: finding.cases,
            shrink_runs: finding.shrink_runs,
            original: finding.original.clone(),
        });
        report
    }

    /// A report of one run against real servers: not byte-replayable, its scenario is.
    pub fn of_real_run(scenario: &Scenario, outcome: &Outcome) -> Report {
        Report {
            world: RunWorld::Real,
            ..Report::of_run(scenario, outcome)
        }
    }

    /// Writes the report as `DIR/NAME-HASH.json` and returns the path; sets `replay_command`.
    /// Its HTML timeline is written beside it ([`Report::timeline_path`]). A real run's scenario
    /// is written beside it too (`DIR/NAME-HASH.scenario.json`), and its command reruns that
    /// scenario against real servers.
    pub fn write(&mut self, dir: &Path, name: &str) -> Result<PathBuf, ReportError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ReportError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let stem = format!("{name}-{}", &self.history_hash[..8]);
        let path = dir.join(format!("{stem}.json"));
        self.replay_command = match self.world {
            RunWorld::Simulation => format!("lockcheck replay {}", path.display()),
            RunWorld::Real => {
                let scenario = dir.join(format!("{stem}.scenario.json"));
                let json =
                    serde_json::to_string_pretty(&self.scenario).expect("a scenario serializes");
                crate::output::write_atomically(&scenario, (json + "\n").as_bytes())
                    .map_err(io(&scenario))?;
                format!(
                    "lockcheck real --scenario {} (a real run is not byte-replayable: this reruns \
                     its scenario; `lockcheck run` simulates it)",
                    scenario.display()
                )
            }
        };
        let json = serde_json::to_string_pretty(self).expect("a report always serializes");
        crate::output::write_atomically(&path, (json + "\n").as_bytes()).map_err(io(&path))?;
        self.write_timeline(&path)?;
        Ok(path)
    }

    /// Where the HTML timeline of the report at `json` goes: beside it, the same stem with
    /// `.html` (`DIR/NAME-HASH.html`), so that a report and its picture are found together.
    pub fn timeline_path(json: &Path) -> PathBuf {
        json.with_extension("html")
    }

    /// Writes the report's HTML timeline ([`crate::timeline::render`]) beside the report file
    /// at `json` and returns its path. `lockcheck timeline` uses it to draw reports written
    /// before the timeline existed, or drawn by an older lockcheck.
    pub fn write_timeline(&self, json: &Path) -> Result<PathBuf, ReportError> {
        let path = Report::timeline_path(json);
        crate::output::write_atomically(&path, crate::timeline::render(self).as_bytes()).map_err(
            |source| ReportError::Io {
                path: path.clone(),
                source,
            },
        )?;
        Ok(path)
    }

    /// Reads and validates a report.
    pub fn read(path: &Path) -> Result<Report, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        let report: Report =
            serde_path_to_error::deserialize(de).map_err(|e| ReportError::Malformed {
                path: path.to_path_buf(),
                at: e.path().to_string(),
                message: e.into_inner().to_string(),
            })?;
        report
            .scenario
            .validate()
            .map_err(|source| ReportError::Scenario {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(report)
    }
}

/// The result of replaying a report.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The new run.
    pub outcome: Outcome,
    /// Index of the first history entry that differs from the report's, if any.
    pub first_difference: Option<usize>,
}

impl Replay {
    /// Whether the replay reproduced the report's history exactly.
    pub fn identical(&self) -> bool {
        self.first_difference.is_none()
    }
}

/// Reruns the report's scenario and compares the histories entry by entry.
pub fn replay(report: &Report) -> Replay {
    let outcome = run(&report.scenario);
    let first_difference = if outcome.digest() == report.history_hash {
        outcome.history.first_difference(&report.history)
    } else {
        Some(
            outcome
                .history
                .first_difference(&report.history)
                .unwrap_or(0),
        )
    };
    Replay {
        outcome,
        first_difference,
    }
}
