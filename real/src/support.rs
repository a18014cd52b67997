//! What real mode can run so far. Checked before anything starts, so an unsupported scenario is
//! refused with the reason, never half run.

use crate::error::RealError;
use lockcheck_core::backend::BackendExt;
use lockcheck_core::scenario::{Algorithm, Fault, Scenario};
use lockcheck_core::topology::Role;

/// The faults real mode carries out so far, for messages and help.
pub const FAULTS: &str = "pause, crash and restart (of a client or a server), \
                          clock_jump and clock_drift (of a client or a server), partition, \
                          loss and delay (of any node), failover (to a Redis replica, by Sentinel)";

/// Checks that real mode runs `algorithm`: that it starts servers of its backend.
pub fn check_algorithm(algorithm: Algorithm) -> Result<(), RealError> {
    if crate::backend::supports(algorithm.backend()) {
        return Ok(());
    }
    let names: Vec<&str> = Algorithm::ALL
        .iter()
        .filter(|a| crate::backend::supports(a.backend()))
        .map(|a| a.name())
        .collect();
    Err(RealError::Unsupported(format!(
        "algorithm {}: real mode has no {} servers yet; it runs {}",
        algorithm.name(),
        algorithm.backend().name(),
        names.join(", ")
    )))
}

/// Validates `scenario` and checks that real mode can carry out all of it.
pub fn check(scenario: &Scenario) -> Result<(), RealError> {
    // The algorithm first: a scenario for an algorithm real mode does not run is refused as
    // such, whatever else is wrong with it.
    check_algorithm(scenario.algorithm)?;
    scenario.validate()?;
    // An etcd cluster (`params.nodes` > 1) is real: `etcd_cluster` starts it, its members'
    // crashes, restarts and pauses act on their processes, and partitions and message faults
    // between members act on the links behind the members' front doors (see `nemesis`).
    // Replicas (`params.redis.replicas`) are real: `replication` starts them under a Sentinel,
    // and `Scenario::validate` has checked that the algorithm has them.
    let replicated = scenario.params.redis.replicas > 0;
    let topology = scenario.topology();
    for (i, fault) in scenario.faults.iter().enumerate() {
        let roles: Vec<Role> = fault
            .nodes()
            .iter()
            .filter_map(|n| topology.index_of(n))
            .map(|n| topology.role(n))
            .collect();
        let supported = match fault {
            // The resource lives in lockcheck's own process: it cannot be paused, killed or
            // given a clock of its own. A server's clock is moved by the time-shift library.
            Fault::Pause { .. }
            | Fault::Crash { .. }
            | Fault::Restart { .. }
            | Fault::ClockJump { .. }
            | Fault::ClockDrift { .. } => roles
                .iter()
                .all(|r| matches!(r, Role::Client | Role::Server)),
            // Through the clients' proxies and their way to the resource (see `nemesis`).
            Fault::Partition { .. } | Fault::Loss { .. } | Fault::Delay { .. } => true,
            // By Sentinel (see `replication`); `Scenario::validate` has checked that there
            // are replicas and that the node is one.
            Fault::Failover { .. } => true,
        };
        let on_server = roles.contains(&Role::Server);
        if replicated {
            // The replication links run through one proxy per server, the one every server
            // that replicates from it shares: a fault on one link between two servers cannot be
            // told apart from a fault on all of that server's links.
            let servers_apart = match fault {
                Fault::Partition { isolate, from, .. } => {
                    let server = |n: &String| {
                        topology
                            .index_of(n)
                            .is_some_and(|i| topology.role(i) == Role::Server)
                    };
                    let inside = isolate.iter().any(server);
                    let outside = match from {
                        Some(from) => from.iter().any(server),
                        None => topology
                            .with_role(Role::Server)
                            .iter()
                            .any(|&s| !isolate.iter().any(|n| n == topology.name(s))),
                    };
                    inside && outside
                }
                Fault::Loss { .. } | Fault::Delay { .. } => on_server,
                _ => false,
            };
            if servers_apart {
                return Err(RealError::Unsupported(format!(
                    "faults[{i}] ({}): with replicas, real mode does not yet cut, delay or lose \
                     the messages between two Redis servers (their replication links); faults \
                     between clients and servers are real, and the simulation runs this one",
                    fault.describe()
                )));
            }
        }
        if on_server
            && scenario.algorithm.backend() == lockcheck_core::scenario::Backend::Etcd
            && matches!(fault, Fault::ClockJump { .. } | Fault::ClockDrift { .. })
        {
            return Err(RealError::Unsupported(format!(
                "faults[{i}] ({}): etcd is a Go program, which reads its clocks through the \
                 kernel's vDSO and not through libc, so the time-shift library real mode moves \
                 a server's clock with does not reach it; the simulation runs this fault",
                fault.describe()
            )));
        }
        if on_server
            && scenario.is_zookeeper_ensemble()
            && matches!(fault, Fault::ClockJump { .. } | Fault::ClockDrift { .. })
        {
            return Err(RealError::Unsupported(format!(
                "faults[{i}] ({}): real mode moves the clock of a standalone ZooKeeper server, \
                 not yet of an ensemble member; the simulation runs this fault",
                fault.describe()
            )));
        }
        if let Fault::Crash {
            scope: lockcheck_core::scenario::CrashScope::Machine,
            ..
        } = fault
        {
            return Err(RealError::Unsupported(format!(
                "faults[{i}] ({}): a machine crash (power loss: what was not fsynced is lost, and \
                 peers are not told) cannot be made on one loopback machine; real mode kills the \
                 process: write \"scope\": \"process\"",
                fault.describe()
            )));
        }
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

/// Checks that `scenario` can run against `endpoints` servers the user runs: one per server
/// node, and no fault that needs the server's process (crash, restart, pause, clock), which
/// lockcheck does not control there. Client faults stay real.
pub fn check_endpoints(scenario: &Scenario, endpoints: usize) -> Result<(), RealError> {
    if scenario.params.redis.replicas > 0 {
        return Err(RealError::Endpoints(
            "params.redis.replicas: replicas are started by lockcheck, with their Sentinel; \
             it does not reconfigure servers it did not start"
                .into(),
        ));
    }
    let topology = scenario.topology();
    let servers = topology.with_role(Role::Server);
    if endpoints != servers.len() {
        let names: Vec<&str> = servers.iter().map(|&n| topology.name(n)).collect();
        return Err(RealError::Endpoints(format!(
            "{endpoints} endpoint(s) given; {} runs on {} server(s): {}",
            scenario.algorithm.name(),
            servers.len(),
            names.join(", ")
        )));
    }
    let members_apart = scenario.is_etcd_cluster() || scenario.is_zookeeper_ensemble();
    for (i, fault) in scenario.faults.iter().enumerate() {
        if members_apart && between_servers(scenario, fault) {
            return Err(RealError::Endpoints(format!(
                "faults[{i}] ({}: {}) acts between two members of the cluster, whose links \
                 lockcheck relays only for members it starts; drop the fault or let lockcheck \
                 start the servers",
                fault.kind(),
                fault.describe()
            )));
        }
        let on_server = fault
            .nodes()
            .iter()
            .filter_map(|n| topology.index_of(n))
            .any(|n| topology.role(n) == Role::Server);
        let needs_process = matches!(
            fault,
            Fault::Crash { .. }
                | Fault::Restart { .. }
                | Fault::Pause { .. }
                | Fault::ClockJump { .. }
                | Fault::ClockDrift { .. }
        );
        if on_server && needs_process {
            return Err(RealError::Endpoints(format!(
                "faults[{i}] ({}: {}) needs the server's process, and lockcheck only connects to \
                 servers given with --endpoints; drop the fault or let lockcheck start the servers",
                fault.kind(),
                fault.describe()
            )));
        }
    }
    Ok(())
}

/// Whether `fault` acts on a link between two servers: a partition with servers on both sides,
/// or loss or delay on a server (which reaches its links to the other servers too).
fn between_servers(scenario: &Scenario, fault: &Fault) -> bool {
    let topology = scenario.topology();
    let server = |n: &String| {
        topology
            .index_of(n)
            .is_some_and(|i| topology.role(i) == Role::Server)
    };
    match fault {
        Fault::Partition { isolate, from, .. } => {
            let inside = isolate.iter().any(server);
            let outside = match from {
                Some(from) => from.iter().any(server),
                None => topology
                    .with_role(Role::Server)
                    .iter()
                    .any(|&s| !isolate.iter().any(|n| n == topology.name(s))),
            };
            inside && outside
        }
        Fault::Loss { node, .. } | Fault::Delay { node, .. } => server(node),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_etcd_cluster_runs_with_faults_between_members_and_no_clock_fault_on_one() {
        let mut s = Scenario::new(Algorithm::EtcdMutex);
        assert!(check(&s).is_ok());
        s.params.nodes = Some(3);
        check(&s).expect("a cluster without faults");
        for fault in [
            Fault::Partition {
                at_ms: 3_000,
                isolate: vec!["etcd-2".into()],
                for_ms: 8_000,
                hold: false,
                from: Some(vec!["etcd-0".into(), "etcd-1".into()]),
            },
            Fault::Pause {
                at_ms: 0,
                node: "etcd-0".into(),
                for_ms: 9_721,
            },
            Fault::Crash {
                at_ms: 10,
                node: "etcd-2".into(),
                scope: lockcheck_core::scenario::CrashScope::Process,
            },
            Fault::Delay {
                at_ms: 10,
                node: "etcd-1".into(),
                extra_ms: 50,
                for_ms: 100,
            },
        ] {
            s.faults = vec![fault.clone()];
            check(&s).unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        }
        // Against servers the user runs, lockcheck relays no link between members.
        s.faults = vec![Fault::Partition {
            at_ms: 3_000,
            isolate: vec!["etcd-2".into()],
            for_ms: 8_000,
            hold: false,
            from: None,
        }];
        let e = check_endpoints(&s, 3).unwrap_err().to_string();
        assert!(e.contains("between two members"), "{e}");
        s.faults = vec![Fault::Partition {
            at_ms: 3_000,
            isolate: vec!["client-0".into()],
            for_ms: 8_000,
            hold: false,
            from: None,
        }];
        check_endpoints(&s, 3).expect("a client cut off from the members");
        s.faults = vec![Fault::ClockJump {
            at_ms: 10,
            node: "etcd-1".into(),
            by_ms: 5_000,
        }];
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("vDSO"), "{e}");
    }

    #[test]
    fn every_fault_is_real_and_replicas_too() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        for fault in [
            Fault::ClockJump {
                at_ms: 10,
                node: "redis-0".into(),
                by_ms: 5_000,
            },
            Fault::Crash {
                at_ms: 10,
                node: "client-0".into(),
                scope: lockcheck_core::scenario::CrashScope::Process,
            },
            Fault::Pause {
                at_ms: 10,
                node: "redis-0".into(),
                for_ms: 100,
            },
            Fault::Delay {
                at_ms: 10,
                node: "client-0".into(),
                extra_ms: 50,
                for_ms: 100,
            },
            Fault::Loss {
                at_ms: 10,
                node: "redis-0".into(),
                rate: 0.5,
                for_ms: 100,
            },
        ] {
            s.faults = vec![fault.clone()];
            check(&s).unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        }
        s.params.redis.replicas = 1;
        s.faults = vec![Fault::Failover {
            at_ms: 10,
            node: "redis-1".into(),
        }];
        check(&s).expect("a failover by Sentinel");
        s.faults = vec![Fault::Partition {
            at_ms: 10,
            isolate: vec!["redis-0".into()],
            for_ms: 100,
            hold: false,
            from: None,
        }];
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("between two Redis servers"), "{e}");
        s.faults = vec![Fault::Partition {
            at_ms: 10,
            isolate: vec!["client-0".into()],
            for_ms: 100,
            hold: false,
            from: None,
        }];
        check(&s).expect("a client cut off from the servers");
        let e = check_endpoints(&s, 2).unwrap_err().to_string();
        assert!(e.contains("replicas"), "{e}");
    }

    #[test]
    fn endpoints_take_one_address_per_server_and_no_server_process_fault() {
        let mut s = Scenario::new(Algorithm::Redlock);
        s.params.nodes = Some(3);
        let e = check_endpoints(&s, 1).unwrap_err().to_string();
        assert!(e.contains("3 server(s): redis-0, redis-1, redis-2"), "{e}");
        check_endpoints(&s, 3).expect("no faults");
        s.faults = vec![Fault::Pause {
            at_ms: 10,
            node: "client-0".into(),
            for_ms: 100,
        }];
        check_endpoints(&s, 3).expect("a client pause is the client's");
        s.faults.push(Fault::Crash {
            at_ms: 10,
            node: "redis-1".into(),
            scope: lockcheck_core::scenario::CrashScope::Process,
        });
        let e = check_endpoints(&s, 3).unwrap_err().to_string();
        assert!(
            e.contains("faults[1] (crash") && e.contains("--endpoints"),
            "{e}"
        );
    }

    #[test]
    fn every_algorithm_and_partitions_are_real() {
        let mut s = Scenario::new(Algorithm::ZkSequential);
        s.faults = vec![Fault::Partition {
            at_ms: 10,
            isolate: vec!["client-0".into()],
            for_ms: 100,
            hold: false,
            from: None,
        }];
        check(&s).expect("zk-sequential with a partition");
        // (redis-script needs the user's scripts; tests/script_cli.rs runs it for real.)
        for algorithm in Algorithm::built_in() {
            let checked = check(&Scenario::new(algorithm));
            if crate::backend::supports(algorithm.backend()) {
                checked.unwrap_or_else(|e| panic!("{}: {e}", algorithm.name()));
            } else {
                // A backend simulated before real mode has it is refused, saying so.
                let e = checked.expect_err(algorithm.name()).to_string();
                assert!(e.contains("real mode has no"), "{e}");
            }
        }
    }

    #[test]
    fn a_clock_fault_on_an_ensemble_member_is_refused_and_pauses_are_not() {
        let mut s = Scenario::new(Algorithm::ZkSequential);
        s.params.nodes = Some(3);
        s.faults = vec![Fault::Pause {
            at_ms: 10,
            node: "zk-2".into(),
            for_ms: 100,
        }];
        check(&s).expect("a member's pause is real");
        s.faults = vec![Fault::ClockJump {
            at_ms: 10,
            node: "zk-1".into(),
            by_ms: 5_000,
        }];
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("ensemble member"), "{e}");
    }
}
