//! What a run produced, judged: its history and the checkers' findings, the same for a simulated
//! run and a real one.

use crate::checker::{self, Availability, Liveness, StaleAccess, Violation, Wakeups};
use crate::history::History;
use crate::scenario::Scenario;

/// What a run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Everything that happened.
    pub history: History,
    /// What must not have happened, and did.
    pub violations: Vec<Violation>,
    /// Accesses a fencing resource rejected (not violations).
    pub stale_accesses: Vec<StaleAccess>,
    /// Acquisition attempts by how many servers were reachable.
    pub availability: Availability,
    /// How many waiters each release woke (ZooKeeper locks; empty for the others).
    pub wakeups: Wakeups,
}

impl Outcome {
    /// The checker's verdict on `history` of a run of `scenario`, whichever world it came from.
    pub fn of(history: History, scenario: &Scenario) -> Outcome {
        Outcome {
            violations: checker::check(
                &history.entries,
                &Liveness::of(scenario),
                scenario.algorithm.description().order,
            ),
            stale_accesses: checker::stale_accesses(&history.entries),
            availability: checker::availability(&history.entries),
            wakeups: checker::wakeups(&history.entries),
            history,
        }
    }

    /// [`History::digest`] of the history: what a replay must reproduce. Computed on demand,
    /// because a search runs thousands of cases and reports only one.
    pub fn digest(&self) -> String {
        self.history.digest()
    }

    /// Whether any violation was found.
    pub fn violated(&self) -> bool {
        !self.violations.is_empty()
    }
}
