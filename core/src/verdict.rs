//! One vocabulary for what lockcheck concludes, from one run up to a matrix cell and an
//! expectation.
//!
//! Every level says the same thing in the same words: a violation was **found** (with the
//! evidence that level keeps: a run's violations, a search's shrunk case, a cell's written
//! report), or **nothing was found** within a budget ([`Coverage`]: how much was searched),
//! which is never a proof of safety. [`Verdict`] carries the evidence, [`VerdictKind`] is the
//! word alone (what an expectation asks for, what a report's header says). How a finding reads
//! for people (UNSAFE, DEADLOCK, STUCK, ORDER) is its worst violation's
//! [`Severity`](crate::checker::Severity).

use serde::{Deserialize, Serialize};

/// What was searched when nothing was found: not a proof of safety, a measure of the search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Cases run.
    pub cases: u32,
    /// Simulated time they covered, in ns.
    pub simulated_ns: u64,
}

/// A conclusion with its evidence `F`.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict<F> {
    /// A violation, and what shows it.
    Found(F),
    /// Nothing within the budget.
    NotFound(Coverage),
}

impl<F> Verdict<F> {
    /// The word alone.
    pub fn kind(&self) -> VerdictKind {
        match self {
            Verdict::Found(_) => VerdictKind::Found,
            Verdict::NotFound(_) => VerdictKind::NotFound,
        }
    }
}

/// The conclusion without its evidence. Written in a report as `violation` / `no_violation`
/// (a report is one run); an expectation (`lockcheck check`) writes `unsafe` / `not-found`, and
/// a matrix cell `unsafe` / `not_found`, each in its own file's words for the same two things.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VerdictKind {
    /// A violation was found.
    #[serde(rename = "violation")]
    Found,
    /// Nothing was found.
    #[serde(rename = "no_violation")]
    NotFound,
}
