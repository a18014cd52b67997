//! Shrinking a failing case to a minimal one.

use super::{case_tree, counts, scenarios, worst_counted, ExploreError, ExploreOptions};
use crate::world::World;
use lockcheck_core::checker::Severity;
use lockcheck_core::outcome::Outcome;
use lockcheck_core::scenario::Scenario;

/// Shrinks failing case `case` as proptest does (simplify while it fails, complicate when it
/// passes, at most `MAX_SHRINK_RUNS` runs), then [`tidy`]s what is left: the case as drawn, the
/// smallest failing case found with its outcome, and the runs spent.
pub(super) fn shrink(
    world: &dyn World,
    options: &ExploreOptions,
    case: u64,
    first: Outcome,
) -> Result<(Scenario, Scenario, Outcome, u32), ExploreError> {
    let strategy = scenarios(options);
    let mut tree = case_tree(&strategy, options.seed, case).map_err(ExploreError::Aborted)?;
    let original = tree.current();
    let mut smallest = original.clone();
    // A smaller case counts only if it fails as badly: shrinking a case with two holders and
    // a deadlock must not end on a case with the deadlock alone, hiding the safety violation.
    let bar = worst_counted(options, &first.violations);
    let mut outcome = first;
    let mut runs = 0;
    if tree.simplify() {
        while runs < MAX_SHRINK_RUNS {
            runs += 1;
            let candidate = tree.current();
            let tried = world.run(&candidate);
            if fails_as_badly(options, bar, &tried) {
                smallest = candidate;
                outcome = tried;
                if !tree.simplify() {
                    break;
                }
            } else if !tree.complicate() {
                break;
            }
        }
    }
    let (smallest, outcome, tidy_runs) = tidy(world, options, bar, smallest, outcome);
    Ok((original, smallest, outcome, runs + tidy_runs))
}

/// The most runs spent shrinking one failure.
const MAX_SHRINK_RUNS: u32 = 2_048;

/// The most runs [`tidy`] spends.
const MAX_TIDY_RUNS: u32 = 64;

/// Whether `tried` fails at least as badly as the case being shrunk (`bar`). A run cut short at
/// the history's cap is not judged, so it does not count.
fn fails_as_badly(options: &ExploreOptions, bar: Option<Severity>, tried: &Outcome) -> bool {
    let worst = match tried.cut_short() {
        Some(_) => None,
        None => worst_counted(options, &tried.violations),
    };
    worst.is_some() && worst <= bar
}

/// What proptest's shrinking does not promise of a schedule, done after it: no fault that
/// begins after the violation it shows, no fault the violation can do without, and the faults
/// in the order they strike (the order a reader reads the "minimal schedule" in). proptest
/// shrinks a list by the draws behind it, so a fault can survive that the failure does not
/// need, and the list keeps the order it was drawn in. Each step is a candidate like any other:
/// kept only if the case still fails as badly (and is a valid scenario), one run each, at most
/// [`MAX_TIDY_RUNS`] in all. Returns the case, its outcome and the runs spent.
fn tidy(
    world: &dyn World,
    options: &ExploreOptions,
    bar: Option<Severity>,
    mut smallest: Scenario,
    mut outcome: Outcome,
) -> (Scenario, Outcome, u32) {
    let mut runs = 0;
    let mut attempt = |candidate: Scenario, smallest: &mut Scenario, outcome: &mut Outcome| {
        if runs >= MAX_TIDY_RUNS || candidate.validate().is_err() {
            return false;
        }
        runs += 1;
        let tried = world.run(&candidate);
        let kept = fails_as_badly(options, bar, &tried);
        if kept {
            *smallest = candidate;
            *outcome = tried;
        }
        kept
    };
    // Faults that begin after the violation was certain cannot have caused it.
    let certain_ns = outcome
        .violations
        .iter()
        .filter(|v| counts(options, v.kind))
        .map(|v| v.at_ns)
        .min();
    if let Some(certain_ns) = certain_ns {
        let mut candidate = smallest.clone();
        candidate
            .faults
            .retain(|f| f.at_ms().saturating_mul(1_000_000) <= certain_ns);
        if candidate.faults.len() < smallest.faults.len() {
            attempt(candidate, &mut smallest, &mut outcome);
        }
    }
    // Each fault the failure does without, from the last; again until none can go.
    loop {
        let mut removed = false;
        // From the last, so that a removal leaves the indices still to try in place.
        for i in (0..smallest.faults.len()).rev() {
            let mut candidate = smallest.clone();
            candidate.faults.remove(i);
            removed |= attempt(candidate, &mut smallest, &mut outcome);
        }
        if !removed {
            break;
        }
    }
    // In the order they strike. Equal times keep their order, which is the order the nemesis
    // applies them in.
    if !smallest.faults.is_sorted_by_key(|f| f.at_ms()) {
        let mut candidate = smallest.clone();
        candidate.faults.sort_by_key(|f| f.at_ms());
        attempt(candidate, &mut smallest, &mut outcome);
    }
    (smallest, outcome, runs)
}
