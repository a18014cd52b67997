//! A search's cases one at a time, for a world that runs them itself.
//!
//! [`explore`](crate::explore::explore) runs its cases on many threads and shrinks the first
//! failure: right for a world where a run costs milliseconds. A world where a run costs seconds
//! and holds a machine's servers and ports (real mode, `lockcheck real --cases`) runs the same
//! cases in order, one at a time, and shrinks nothing; it needs only the draw and the judgement,
//! and [`Cases`] gives it those as `explore` makes them, so case `k` of seed `s` is the same
//! schedule in both worlds.

use crate::explore::{check_options, draw, fails, scenarios_where, ExploreError, ExploreOptions};
use lockcheck_core::outcome::Outcome;
use lockcheck_core::scenario::Scenario;
use proptest::strategy::BoxedStrategy;

/// The cases of one search, restricted to what a world can carry out.
pub struct Cases {
    options: ExploreOptions,
    strategy: BoxedStrategy<Scenario>,
}

impl Cases {
    /// The cases `options` searches that `keep` accepts (a draw `keep` refuses is drawn again
    /// from the same case's generator, [`scenarios_where`]), once [`check_options`] accepts the
    /// options: a search refused is refused before any world is started.
    pub fn new(
        options: ExploreOptions,
        keep: impl Fn(&Scenario) -> bool + 'static,
    ) -> Result<Cases, ExploreError> {
        check_options(&options)?;
        let strategy = scenarios_where(&options, keep);
        Ok(Cases { options, strategy })
    }

    /// The options searched.
    pub fn options(&self) -> &ExploreOptions {
        &self.options
    }

    /// Case `case` ([`draw`]): `explore`'s own draw of that case when `keep` accepts it.
    pub fn draw(&self, case: u64) -> Result<Scenario, ExploreError> {
        draw(&self.strategy, self.options.seed, case)
    }

    /// Whether `outcome` fails the search, as it would fail `explore` ([`fails`]).
    pub fn fails(&self, outcome: &Outcome) -> bool {
        fails(&self.options, outcome)
    }
}
