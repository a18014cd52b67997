//! What real mode can run so far. Checked before anything starts, so an unsupported scenario is
//! refused with the reason, never half run.

use crate::error::RealError;
use lockcheck_sim::scenario::{Algorithm, Fault, Scenario};
use lockcheck_sim::topology::Role;

/// The algorithms real mode runs so far.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm::SingleRedis,
    Algorithm::Redlock,
    Algorithm::RedisReentrant,
    Algorithm::RedisFair,
    Algorithm::MysqlRow,
    Algorithm::MysqlUnique,
    Algorithm::MysqlForUpdateHeld,
];

/// The faults real mode carries out so far, for messages and help.
pub const FAULTS: &str = "pause (of a client or a server), crash and restart (of a server)";

/// Checks that real mode runs `algorithm`.
pub fn check_algorithm(algorithm: Algorithm) -> Result<(), RealError> {
    if ALGORITHMS.contains(&algorithm) {
        return Ok(());
    }
    let names: Vec<&str> = ALGORITHMS.iter().map(|a| a.name()).collect();
    Err(RealError::Unsupported(format!(
        "algorithm {}: real mode runs {} so far",
        algorithm.name(),
        names.join(", ")
    )))
}

/// Validates `scenario` and checks that real mode can carry out all of it.
pub fn check(scenario: &Scenario) -> Result<(), RealError> {
    // The algorithm first: a scenario for an algorithm real mode does not run is refused as
    // such, whatever else is wrong with it.
    check_algorithm(scenario.algorithm)?;
    scenario.validate()?;
    let p = &scenario.params;
    if p.replicas > 0 || p.wait_replicas > 0 {
        return Err(RealError::Unsupported(
            "params.replicas: real Redis replication and failover".into(),
        ));
    }
    let topology = scenario.topology();
    for (i, fault) in scenario.faults.iter().enumerate() {
        let roles: Vec<Role> = fault
            .nodes()
            .iter()
            .filter_map(|n| topology.index_of(n))
            .map(|n| topology.role(n))
            .collect();
        let supported = match fault {
            Fault::Pause { .. } => roles
                .iter()
                .all(|r| matches!(r, Role::Client | Role::Server)),
            Fault::Crash { .. } | Fault::Restart { .. } => roles.iter().all(|r| *r == Role::Server),
            _ => false,
        };
        if !supported {
            return Err(RealError::Unsupported(format!(
                "faults[{i}] ({}: {}); real mode carries out {FAULTS} so far",
                fault.kind(),
                fault.describe()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_jumps_and_client_crashes_are_refused_with_the_fault_named() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.faults = vec![Fault::ClockJump {
            at_ms: 10,
            node: "redis-0".into(),
            by_ms: 5_000,
        }];
        let e = check(&s).unwrap_err().to_string();
        assert!(
            e.contains("not supported in real mode yet") && e.contains("clock_jump"),
            "{e}"
        );
        s.faults = vec![Fault::Crash {
            at_ms: 10,
            node: "client-0".into(),
        }];
        assert!(check(&s).is_err());
        s.faults = vec![Fault::Pause {
            at_ms: 10,
            node: "redis-0".into(),
            for_ms: 100,
        }];
        check(&s).expect("a server pause is real");
    }

    #[test]
    fn zookeeper_is_not_real_yet() {
        let e = check(&Scenario::new(Algorithm::ZkSequential))
            .unwrap_err()
            .to_string();
        assert!(e.contains("zk-sequential"), "{e}");
    }
}
