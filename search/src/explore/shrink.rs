//! Shrinking a failing case to a minimal one.

use super::{case_tree, scenarios, worst_counted, ExploreError, ExploreOptions};
use crate::world::World;
use lockcheck_core::outcome::Outcome;
use lockcheck_core::scenario::Scenario;

/// Shrinks failing case `case` as proptest does (simplify while it fails, complicate when it
/// passes, at most `MAX_SHRINK_RUNS` runs): the case as drawn, the smallest failing case found
/// with its outcome, and the runs spent.
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
            // A candidate cut short at the history's cap is not judged: it does not count.
            let worst = match tried.cut_short() {
                Some(_) => None,
                None => worst_counted(options, &tried.violations),
            };
            if worst.is_some() && worst <= bar {
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
    Ok((original, smallest, outcome, runs))
}

/// The most runs spent shrinking one failure.
const MAX_SHRINK_RUNS: u32 = 2_048;
