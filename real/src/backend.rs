//! Which real server each algorithm runs against.

use crate::error::RealError;
use crate::launcher::{Etcd, MariaDb, Redis, ServerKind, ZooKeeper};
use lockcheck_core::scenario::{Backend, Scenario, DEFAULT_TICK_TIME_MS};

/// The kind of server node `name` of `scenario` is, with the scenario's settings for it; an
/// error when the server cannot honour a setting (MariaDB's timeouts are whole seconds).
pub fn server_kind(scenario: &Scenario, name: &str) -> Result<Box<dyn ServerKind>, RealError> {
    let algorithm = scenario.algorithm;
    Ok(match algorithm.backend() {
        Backend::ZooKeeper => Box::new(ZooKeeper {
            session_timeout_ms: scenario.params.zookeeper.session_timeout_ms(),
            tick_time_ms: DEFAULT_TICK_TIME_MS,
        }),
        Backend::Mysql => Box::new(MariaDb::of(scenario, name)?),
        Backend::Redis => Box::new(Redis {
            persistence: scenario.params.persistence_of(algorithm, name),
        }),
        Backend::Etcd => Box::new(Etcd),
    })
}

/// Whether real mode starts servers of `backend`: every registered algorithm on such a backend
/// runs in real mode. (A backend simulated before its real servers are wired in says `false`
/// here, and [`server_kind`] refuses it.)
pub fn supports(backend: Backend) -> bool {
    match backend {
        Backend::Redis | Backend::ZooKeeper | Backend::Mysql | Backend::Etcd => true,
    }
}
