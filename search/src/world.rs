//! The world a search runs its cases in: the one seam between the search and a simulator.
//!
//! The search only ever asks a world to run a scenario and judge its history; everything it
//! decides (which case to draw, whether it fails, how to shrink it) is a function of the
//! scenario and that [`Outcome`]. Keeping the seam this narrow is what lets another world (a
//! model of another server, a checker of a recorded history) be searched without the search
//! knowing, as FoundationDB's code under test does not know it is simulated.

use lockcheck_core::outcome::Outcome;
use lockcheck_core::scenario::Scenario;

/// What runs the cases of a search.
///
/// `run` must be a function of the scenario alone (the same scenario, the same outcome): a
/// search's verdict, its shrunk case and every persisted failure are reproduced from a seed on
/// that promise. A search runs cases on several threads at once (`jobs`), hence `Sync`.
pub trait World: Sync {
    /// Runs `scenario` and judges its history.
    fn run(&self, scenario: &Scenario) -> Outcome;
}

/// The deterministic simulation of `lockcheck-sim`: where `explore`, the cells, the matrix and
/// the expectations search.
#[derive(Clone, Copy, Debug, Default)]
pub struct Simulation;

impl World for Simulation {
    fn run(&self, scenario: &Scenario) -> Outcome {
        lockcheck_sim::run(scenario)
    }
}
