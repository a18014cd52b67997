//! What a run produced, judged: its history and the checkers' findings, the same for a simulated
//! run and a real one.

use crate::checker::{self, Availability, Liveness, StaleAccess, Violation, Wakeups};
use crate::history::History;
use crate::scenario::{Fault, Scenario};

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
        Outcome::judged(history, scenario, &Liveness::of(scenario))
    }

    /// [`Outcome::of`], with the liveness checks judging by `lease_ms` rather than the lease the
    /// scenario gives: the lease a client library declares it really uses (`lockcheck real
    /// --client-lease-ms`), when it is not the one lockcheck told it ([`Liveness::with_lease`]);
    /// a stuck waiter's finding says which lease it was judged by.
    pub fn of_with_lease(history: History, scenario: &Scenario, lease_ms: u64) -> Outcome {
        let liveness = Liveness::of(scenario).with_lease(lease_ms.saturating_mul(1_000_000));
        let mut outcome = Outcome::judged(history, scenario, &liveness);
        let given = scenario.algorithm.lease_ms(&scenario.params);
        for v in &mut outcome.violations {
            if v.kind == checker::ViolationKind::Stuck {
                v.story.push_str(&format!(
                    " (judged by the client's declared lease, {lease_ms} ms, not the {given} ms \
                     lockcheck gave it)"
                ));
            }
        }
        outcome
    }

    /// The checkers' verdict on `history`, the liveness checks bounded by `liveness`.
    fn judged(history: History, scenario: &Scenario, liveness: &Liveness) -> Outcome {
        Outcome {
            violations: checker::check(
                &history.entries,
                liveness,
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

    /// Why the run was cut short, if it was: its history reached the most a run keeps
    /// ([`History::full`]'s note). Such a run is refused (exit 2), not judged.
    pub fn cut_short(&self) -> Option<&str> {
        self.history.full()
    }

    /// A run cut short, refused (exit 2): what its note says (when, and what grew), and the
    /// parameters that make the run long, each with its value: `duration_ms`, the longest
    /// fault span, the lease a waiter may wait out.
    pub fn refusal(&self, scenario: &Scenario) -> Option<String> {
        let note = self.cut_short()?;
        let mut long = vec![(scenario.duration_ms, "duration_ms".to_string())];
        let longest = scenario
            .faults
            .iter()
            .enumerate()
            .filter_map(|(i, f)| match f {
                Fault::Pause { for_ms, .. }
                | Fault::Partition { for_ms, .. }
                | Fault::Loss { for_ms, .. }
                | Fault::Delay { for_ms, .. } => Some((*for_ms, format!("faults[{i}].for_ms"))),
                _ => None,
            })
            .max_by_key(|(ms, _)| *ms);
        long.extend(longest);
        if let Some(ttl) = scenario.params.ttl_ms_for(scenario.algorithm) {
            long.push((ttl, "params.ttl_ms".to_string()));
        }
        long.sort_by_key(|&(ms, _)| std::cmp::Reverse(ms));
        let named: Vec<String> = long
            .iter()
            .map(|(ms, field)| format!("{field} ({ms} ms)"))
            .collect();
        Some(format!(
            "{note}. A run keeps at most {} history entries, and this one records more: what it \
             records grows with simulated time in a way that cannot be folded (see \
             docs/scenarios.md, \"Bounds\"). Shorten {}, or lower clients",
            crate::limits::MAX_HISTORY_ENTRIES,
            named.join(", ")
        ))
    }

    /// Whether any violation was found.
    pub fn violated(&self) -> bool {
        !self.violations.is_empty()
    }
}
