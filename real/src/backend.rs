//! Which real server each algorithm runs against.

use crate::launcher::{Redis, ServerKind, ZooKeeper};
use lockcheck_sim::scenario::Scenario;

/// The kind of server node `name` of `scenario` is, with the scenario's settings for it.
pub fn server_kind(scenario: &Scenario, name: &str) -> Box<dyn ServerKind> {
    let algorithm = scenario.algorithm;
    if algorithm.is_zookeeper() {
        return Box::new(ZooKeeper {
            session_timeout_ms: scenario.params.session_timeout_ms,
        });
    }
    Box::new(Redis {
        persistence: scenario.params.persistence_of(algorithm, name),
    })
}
