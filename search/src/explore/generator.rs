//! The search's generator: the scenarios a search draws (workloads, fault schedules from the
//! profiles, spans measured against the lease), and case `k` of seed `s` drawn from it alone.

use super::{Careful, ExploreError, ExploreOptions};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Algorithm, CrashScope, Fault, Params, Scenario, Workload};
use lockcheck_core::topology::Role;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// How long a generated run lasts: a few leases, so a fault can outlast one and its aftermath
/// still be seen.
fn run_length_ms(algorithm: Algorithm, params: &Params) -> u64 {
    (4 * algorithm.lease_ms(params)).clamp(10_000, lockcheck_core::limits::MAX_MS)
}

/// The nodes a search's faults may name: the clients every case has, and the servers.
struct Cast {
    clients: Vec<String>,
    servers: Vec<String>,
    /// The servers are members of one replicated service that talk to each other (a ZooKeeper
    /// ensemble), not independent masters.
    ensemble: bool,
}

/// One fault of a concrete profile, as a unit that stays valid when shrinking drops other units
/// (a crash and its restart form one unit).
fn unit_of(
    profile: FaultProfile,
    cast: &Cast,
    options: &ExploreOptions,
    duration: u64,
) -> BoxedStrategy<Vec<Fault>> {
    let (clients, servers) = (&cast.clients, &cast.servers);
    let nodes: Vec<String> = clients.iter().chain(servers).cloned().collect();
    // Spans of a few leases, but never so long that three of them (overlapping delays add up)
    // leave the documented ranges: an eighth of the longest duration is 45 days.
    let ttl = options
        .algorithm
        .lease_ms(&options.params)
        .min(lockcheck_core::limits::MAX_MS / 8);
    let at = 0..duration / 2;
    let span = 1..=2 * ttl;
    let node = prop::sample::select(nodes.clone());
    match profile {
        FaultProfile::None | FaultProfile::All => unreachable!("not a concrete profile"),
        FaultProfile::Pause => (at, node, span)
            .prop_map(|(at_ms, node, for_ms)| {
                vec![Fault::Pause {
                    at_ms,
                    node,
                    for_ms,
                }]
            })
            .boxed(),
        FaultProfile::ClockJump => {
            let t = ttl as i64;
            (at, node, prop_oneof![1..=2 * t, -2 * t..=-1])
                .prop_map(|(at_ms, node, by_ms)| vec![Fault::ClockJump { at_ms, node, by_ms }])
                .boxed()
        }
        FaultProfile::ClockDrift => {
            // Rates in parts per million, so shrinking moves toward the slowest allowed clock in
            // whole steps and the scenario prints exactly.
            let ppm = (options.max_drift * 1e6).round() as u32;
            (at, node, 1_000_000 - ppm..=1_000_000 + ppm)
                .prop_map(|(at_ms, node, rate_ppm)| {
                    vec![Fault::ClockDrift {
                        at_ms,
                        node,
                        rate: f64::from(rate_ppm) / 1e6,
                    }]
                })
                .boxed()
        }
        FaultProfile::CrashRestart | FaultProfile::CrashDelayedRestart => {
            // A server or a client (a holder dying mid-section: the others must get the lock
            // after its lease, session or socket), its machine or only its process (kill -9:
            // what was written to the OS survives, and its sockets close at once). Servers
            // and machines first, so shrinking goes toward the classic story.
            let crashable: Vec<String> = servers.iter().chain(clients).cloned().collect();
            let scope = prop_oneof![Just(CrashScope::Machine), Just(CrashScope::Process)];
            (at, prop::sample::select(crashable), scope)
                .prop_map(|(at_ms, node, scope)| {
                    vec![
                        Fault::Crash {
                            at_ms,
                            node: node.clone(),
                            scope,
                        },
                        Fault::Restart { at_ms, node },
                    ]
                })
                .boxed()
        }
        FaultProfile::Failover => (
            at,
            0u64..=1_000,
            prop::sample::select(servers[1..].to_vec()),
        )
            .prop_map(|(at_ms, after_ms, node)| {
                vec![
                    Fault::Crash {
                        at_ms,
                        node: "redis-0".into(),
                        scope: CrashScope::Machine,
                    },
                    Fault::Failover {
                        at_ms: at_ms + after_ms,
                        node,
                    },
                ]
            })
            .boxed(),
        FaultProfile::Partition => {
            let for_ms = 1..=options.max_partition_ms.unwrap_or(2 * ttl);
            // A group against everyone else, or some clients against the lock service alone:
            // the outage that leaves a holder cut off from its lock but not from the resource.
            let mut everyone = nodes;
            everyone.push(lockcheck_core::topology::Topology::RESOURCE.to_string());
            let against_the_rest = (
                prop::sample::subsequence(everyone.clone(), 1..everyone.len()),
                Just(None),
            );
            let against_the_service = (
                prop::sample::subsequence(clients.clone(), 1..=clients.len()),
                Just(Some(servers.to_vec())),
            );
            // Members of an ensemble also talk to each other: a member cut off from the others
            // while its clients still reach it is the story where an ensemble's followers,
            // leader and quorum decide (drawn only where the servers form one service, so other
            // searches draw as they always did).
            let sides = if cast.ensemble {
                let members = servers.clone();
                let apart = prop::sample::subsequence(servers.clone(), 1..servers.len()).prop_map(
                    move |isolate| {
                        let rest: Vec<String> = members
                            .iter()
                            .filter(|s| !isolate.contains(s))
                            .cloned()
                            .collect();
                        (isolate, Some(rest))
                    },
                );
                prop_oneof![against_the_rest, against_the_service, apart].boxed()
            } else {
                prop_oneof![against_the_rest, against_the_service].boxed()
            };
            // Shrinking goes toward a losing cut: the harsher of the two, and the simpler story.
            (at, sides, for_ms, any::<bool>())
                .prop_map(|(at_ms, (isolate, from), for_ms, hold)| {
                    vec![Fault::Partition {
                        at_ms,
                        isolate,
                        from,
                        for_ms,
                        hold,
                    }]
                })
                .boxed()
        }
        FaultProfile::Delay => (at, node, 1..=2 * ttl, 1..=2 * ttl)
            .prop_map(|(at_ms, node, extra_ms, for_ms)| {
                vec![Fault::Delay {
                    at_ms,
                    node,
                    extra_ms,
                    for_ms,
                }]
            })
            .boxed(),
    }
}

/// The concrete profiles a list names (`all` expands, `none` adds nothing).
fn concrete(profiles: &[FaultProfile], with_replicas: bool) -> Vec<FaultProfile> {
    let mut out: Vec<FaultProfile> = Vec::new();
    for &p in profiles {
        let expanded = match p {
            FaultProfile::None => Vec::new(),
            FaultProfile::All => FaultProfile::ALL
                .iter()
                .copied()
                .filter(|q| !matches!(q, FaultProfile::None | FaultProfile::All))
                .filter(|q| *q != FaultProfile::Failover || with_replicas)
                .collect(),
            other => vec![other],
        };
        for q in expanded {
            if !out.contains(&q) {
                out.push(q);
            }
        }
    }
    out
}

/// The scenarios `options` searches: workload shape, seed and faults vary; parameters do not.
pub fn scenarios(options: &ExploreOptions) -> BoxedStrategy<Scenario> {
    let mut params = options.params.clone();
    if options
        .profiles
        .contains(&FaultProfile::CrashDelayedRestart)
    {
        params.restart_delay_ms = params
            .restart_delay_ms
            .max(options.algorithm.lease_ms(&params));
    }
    let algorithm = options.algorithm;
    let ttl = algorithm.lease_ms(&params);
    let duration = run_length_ms(algorithm, &params);
    let template = {
        let mut s = Scenario::new(algorithm);
        s.params = params.clone();
        s.clients = 3;
        s
    };
    let topology = template.topology();
    let named = |role: Role| -> Vec<String> {
        topology
            .with_role(role)
            .into_iter()
            .map(|i| topology.name(i).to_string())
            .collect()
    };
    let mut clients = named(Role::Client);
    clients.truncate(2); // client-2 exists only when three clients are drawn
    let cast = Cast {
        clients,
        servers: named(Role::Server),
        ensemble: template.is_zookeeper_ensemble() || template.is_etcd_cluster(),
    };
    let units: Vec<BoxedStrategy<Vec<Fault>>> =
        concrete(&options.profiles, params.redis.replicas > 0)
            .into_iter()
            .map(|p| unit_of(p, &cast, options, duration))
            .collect();
    let faults: BoxedStrategy<Vec<Vec<Fault>>> = if units.is_empty() {
        Just(Vec::new()).boxed()
    } else {
        prop::collection::vec(prop::strategy::Union::new(units), 1..=3).boxed()
    };
    // A holder of a lock that expires works within its lease (or its server's idle timeout); a
    // lock that does not expire (a ZooKeeper session, a MySQL row without a TTL) may rightly be
    // held for longer, and so may a lock whose watchdog renews it (working past the lease is
    // what a watchdog is for: a search that never did would never test it). Only a lock that
    // reports a validity can be held "until the validity".
    let longest_hold = if params.watchdog {
        3 * ttl
    } else if algorithm.expires(&params) {
        ttl * 8 / 10
    } else {
        2 * ttl
    };
    let until_validity = if algorithm.reports_validity(&params) {
        0.3
    } else {
        0.0
    };
    let workload = (
        1u32..=3,
        0..=longest_hold,
        prop::bool::weighted(until_validity),
        0u64..=500,
        1u32..=if algorithm.reentrant() { 3 } else { 1 },
    )
        .prop_map(
            |(acquisitions, hold_ms, until_validity, think_ms, depth)| Workload {
                acquisitions_per_client: acquisitions,
                hold_ms,
                hold_until_validity: until_validity,
                think_ms,
                check_before_access: false,
                reentrant_depth: depth,
                read_fraction: None,
            },
        );
    // A careful client is drawn only when asked for, so that other searches draw as before.
    let workload: BoxedStrategy<Workload> = match options.careful {
        Careful::Never => workload.boxed(),
        Careful::Half => (workload, any::<bool>())
            .prop_map(|(mut w, careful)| {
                w.check_before_access = careful;
                w
            })
            .boxed(),
        Careful::Always => workload
            .prop_map(|mut w| {
                w.check_before_access = true;
                w
            })
            .boxed(),
    };
    (2u32..=3, workload, any::<u64>().no_shrink(), faults)
        .prop_map(move |(clients, workload, seed, faults)| Scenario {
            algorithm,
            params: params.clone(),
            clients,
            workload,
            duration_ms: duration,
            seed,
            faults: faults.into_iter().flatten().collect(),
            randomness: Default::default(),
            // Each case's servers start their clocks where its seed says: a search covers the
            // phases of their timers as it covers latencies.
            server_clocks: Default::default(),
        })
        .prop_filter("a valid scenario", |s| s.validate().is_ok())
        .boxed()
}

/// A proptest configuration that depends on nothing but its arguments.
fn config(cases: u32) -> Config {
    Config {
        cases,
        max_local_rejects: 65_536,
        max_global_rejects: 1_024,
        max_flat_map_regens: 1_000_000,
        failure_persistence: None,
        source_file: None,
        test_name: None,
        max_shrink_time: 0,
        max_shrink_iters: 2_048,
        verbose: 0,
        rng_algorithm: RngAlgorithm::ChaCha,
        ..Config::default()
    }
}

/// The scenarios `options` searches that `keep` accepts: for another world that can carry out
/// only some of them (`lockcheck real --cases` keeps what real mode can do). A case whose draw
/// `keep` refuses is drawn again, from the same case's generator.
pub fn scenarios_where(
    options: &ExploreOptions,
    keep: impl Fn(&Scenario) -> bool + 'static,
) -> BoxedStrategy<Scenario> {
    scenarios(options)
        .prop_filter("a scenario the world carries out", keep)
        .boxed()
}

/// The scenario of case `case` of a search seeded `seed` over `strategy` ([`scenarios`] or
/// [`scenarios_where`]): the very draw [`explore`](super::explore) makes for that case, so another world runs
/// the cases a simulated search runs.
pub fn draw(
    strategy: &BoxedStrategy<Scenario>,
    seed: u64,
    case: u64,
) -> Result<Scenario, ExploreError> {
    case_tree(strategy, seed, case)
        .map(|tree| tree.current())
        .map_err(ExploreError::Aborted)
}

/// Case `case` of the search seeded `seed`: its value tree, drawn from a generator seeded with
/// the two alone.
pub(super) fn case_tree(
    strategy: &BoxedStrategy<Scenario>,
    seed: u64,
    case: u64,
) -> Result<Box<dyn ValueTree<Value = Scenario>>, String> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&case.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(config(1), rng);
    strategy.new_tree(&mut runner).map_err(|r| r.to_string())
}
