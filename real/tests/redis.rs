//! The algorithms against real `redis-server` processes, each test a story with the verdict it
//! must reach, which is also the simulation's verdict for the same scenario (every run is checked
//! against it). Only verdicts are asserted, never timings: the stories are timed from the TTL with
//! margins of hundreds of milliseconds, so the machine's speed does not decide them.
//!
//! Without `redis-server` on PATH these tests print one line saying how to install it and pass,
//! except under CI (`CI=true`), where they fail: CI must install it (`.ci/run` does).

use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{KeyChange, Op, Phase};
use lockcheck_core::scenario::{Algorithm, Fault, Persistence, Scenario, Workload};
use lockcheck_real::launcher::{Launcher, Redis, REDIS_SERVER};
use lockcheck_real::profile::{self, Profile, Shape};
use lockcheck_real::{run, RealError, RealRun};

mod common;

use common::{
    assert_safe, assert_two_holders_including, entered, kinds, one_at_a_time, sections,
    sim_scenario,
};

/// Whether redis-server is installed; see [`common::installed`].
fn servers_installed() -> bool {
    common::installed(&Redis {
        persistence: Persistence::None,
    })
}

/// Whether `pid` is a live redis-server.
fn redis_alive(pid: u32) -> bool {
    common::alive(pid, REDIS_SERVER)
}

/// [`common::run_real`] for redis-server.
fn run_real(scenario: &Scenario) -> RealRun {
    common::run_real(scenario, REDIS_SERVER)
}

fn shape(clients: u32, ttl_ms: u64) -> Shape {
    Shape {
        clients,
        ttl_ms,
        ..Shape::default()
    }
}

#[test]
fn three_clients_without_faults_never_share_single_redis() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::SingleRedis, Profile::None, &shape(3, 1_000)).unwrap();
    let real = run_real(&s);
    assert_safe(&real);
    assert_eq!(real.server_pids.len(), 1);
    assert_eq!(
        sections(&real),
        9,
        "every client did its 3 critical sections"
    );
}

#[test]
fn a_holder_paused_longer_than_the_ttl_breaks_single_redis_as_in_the_simulation() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::SingleRedis, Profile::Pause, &shape(3, 2_000)).unwrap();
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
}

/// The blog-post lock on a real redis-server: the paused holder wakes after its lease and its
/// plain `DEL` frees the lock of the client that took it meanwhile (seeds 000 and 001's
/// warning), as in the simulation (`sim/tests/redis_plain_del.rs`).
#[test]
fn a_paused_holders_plain_del_frees_the_next_holders_real_lock() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::RedisPlainDel, Profile::Pause, &shape(3, 2_000)).unwrap();
    let real = run_real(&s);
    // Which waiter takes the lock after client-0's lease is a race between the two (held back
    // equally); whichever it is, client-0's DEL frees its lock and lets the other in beside it.
    assert!(
        real.outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::MutualExclusion
                && v.clients.iter().any(|c| c == "client-1")
                && v.clients.iter().any(|c| c == "client-2")),
        "client-0's DEL let one waiter in beside the other: {:#?}",
        real.outcome.violations
    );
}

#[test]
fn fencing_turns_the_paused_holder_away_at_the_real_resource() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s =
        profile::scenario(Algorithm::SingleRedis, Profile::Pause, &shape(2, 2_000)).unwrap();
    s.params.fencing = true;
    let real = run_real(&s);
    assert_safe(&real);
    assert!(
        real.outcome
            .stale_accesses
            .iter()
            .any(|a| a.client == "client-0"),
        "the stale holder was rejected: {:?}",
        real.outcome.stale_accesses
    );
}

#[test]
fn redlock_on_three_real_masters_without_faults_is_safe() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let shape = Shape {
        nodes: Some(3),
        ..shape(3, 1_000)
    };
    let s = profile::scenario(Algorithm::Redlock, Profile::None, &shape).unwrap();
    let real = run_real(&s);
    assert_safe(&real);
    assert_eq!(real.server_pids.len(), 3);
    assert_eq!(sections(&real), 9);
}

/// Redisson's two locks (the hash lock with its owner count, and the fair queue) on a real
/// server, three clients, no fault: nobody shares the lock and every section is done.
#[test]
fn three_clients_without_faults_never_share_the_redisson_locks() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    for algorithm in [Algorithm::RedisReentrant, Algorithm::RedisFair] {
        let s = profile::scenario(algorithm, Profile::None, &shape(3, 1_000)).unwrap();
        let real = run_real(&s);
        assert_safe(&real);
        assert_eq!(sections(&real), 9, "{}", algorithm.name());
    }
}

/// client-0 takes the lock (client-1 is held back for 200 ms) and works for 1 s; at 400 ms
/// redis-0 is killed and restarted at once.
fn crash_while_held(persistence: Persistence) -> Scenario {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(2_000);
    s.params.persistence = Some(persistence);
    s.workload = Workload {
        acquisitions_per_client: 1,
        hold_ms: 1_000,
        think_ms: 100,
        ..Workload::default()
    };
    s.duration_ms = 20_000;
    let redis = || "redis-0".to_string();
    s.faults = vec![
        Fault::Pause {
            at_ms: 0,
            node: "client-1".into(),
            for_ms: 200,
        },
        Fault::Crash {
            at_ms: 400,
            node: redis(),
            scope: lockcheck_core::scenario::CrashScope::Process,
        },
        Fault::Restart {
            at_ms: 400,
            node: redis(),
        },
    ];
    s.validate().unwrap();
    s
}

#[test]
fn crash_and_immediate_restart_without_persistence_breaks_single_redis() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = crash_while_held(Persistence::None);
    let real = run_real(&s);
    assert_eq!(real.server_pids.len(), 2, "killed and started again");
    assert_eq!(
        kinds(&real.outcome.violations),
        vec![ViolationKind::MutualExclusion]
    );
}

#[test]
fn crash_and_immediate_restart_with_appendfsync_always_is_safe() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let real = run_real(&crash_while_held(Persistence::Always));
    assert_eq!(real.server_pids.len(), 2, "killed and started again");
    assert_safe(&real);
    assert_eq!(sections(&real), 2);
}

/// `appendfsync everysec` under kill -9: every write reached the operating system before its
/// reply, so the restarted server reads the lock back from its AOF and client-1 waits its turn.
/// The simulation's process crash keeps what was written (only a machine crash loses the last
/// second), so both worlds find nothing (`run_real` compares them).
#[test]
fn a_killed_server_with_appendfsync_everysec_loses_nothing_in_both_worlds() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let real = run_real(&crash_while_held(Persistence::Everysec));
    assert_eq!(real.server_pids.len(), 2, "killed and started again");
    assert_safe(&real);
    assert_eq!(sections(&real), 2);
}

#[test]
fn a_stopped_server_delays_single_redis_but_never_breaks_it() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = crash_while_held(Persistence::None);
    s.faults.truncate(1);
    s.faults.push(Fault::Pause {
        at_ms: 300,
        node: "redis-0".into(),
        for_ms: 500,
    });
    let real = run_real(&s);
    assert_safe(&real);
    assert_eq!(sections(&real), 2);
}

#[test]
fn unsupported_faults_are_refused_before_anything_starts() {
    // With replicas, a partition between two servers (their replication links) is the
    // simulator's alone so far (real/tests/redis_sentinel.rs runs replicas and failovers).
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.redis.replicas = 1;
    s.faults = vec![Fault::Partition {
        at_ms: 10,
        isolate: vec!["redis-0".into()],
        for_ms: 100,
        hold: false,
        from: None,
    }];
    match run(&s) {
        Err(RealError::Unsupported(why)) => {
            assert!(why.contains("between two Redis servers"), "{why}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The masters on which `token` was written, per the simulation's history of the same scenario
/// (real mode does not observe the servers' keys).
fn simulated_quorum(s: &Scenario, holder: &str) -> Vec<String> {
    let outcome = lockcheck_sim::run(s);
    let acquired = outcome.history.entries.iter().find_map(|e| match &e.op {
        Op::Acquire {
            token: Some(token), ..
        } if e.node == holder => Some(token.clone()),
        _ => None,
    });
    let token = acquired.expect("the holder acquired in the simulation");
    outcome
        .history
        .entries
        .iter()
        .filter(|e| {
            matches!(&e.op, Op::Key { change: KeyChange::Set, value: Some(v), .. } if *v == token)
        })
        .map(|e| e.node.clone())
        .collect()
}

fn redlock_story(profile: Profile) -> Scenario {
    profile::scenario(Algorithm::Redlock, profile, &shape(3, 2_000)).unwrap()
}

#[test]
fn a_forward_clock_jump_on_a_real_master_of_the_holders_quorum_breaks_redlock() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = redlock_story(Profile::ClockJump);
    let Some(Fault::ClockJump { node, by_ms, .. }) = s.faults.last() else {
        panic!("the story ends with a clock jump: {:?}", s.faults);
    };
    assert!(*by_ms > 0);
    assert!(
        simulated_quorum(&s, "client-0").contains(node),
        "{node} is in client-0's quorum"
    );
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
}

#[test]
fn the_same_jump_backwards_leaves_redlock_safe() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = redlock_story(Profile::ClockJump);
    if let Some(Fault::ClockJump { by_ms, .. }) = s.faults.last_mut() {
        *by_ms = -*by_ms;
    }
    let real = run_real(&s);
    assert_safe(&real);
    assert_eq!(sections(&real), 3, "every client had its section");
}

#[test]
fn seed_002s_immediate_restart_without_persistence_breaks_real_redlock() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = redlock_story(Profile::Restart);
    let real = run_real(&s);
    assert_eq!(
        real.server_pids.len(),
        5,
        "3 masters, 2 of them started again"
    );
    assert_eq!(
        kinds(&real.outcome.violations),
        vec![ViolationKind::MutualExclusion]
    );
}

#[test]
fn seed_002s_own_scenario_file_is_safe_for_real_because_tcp_delivers_across_the_partition() {
    // The simulator's seed-002 file cuts redis-0 off for the first second with a partition that
    // loses messages; a real partition (the proxies' blackhole) holds them, and TCP delivers
    // them after the heal. So the first holder's SET reaches redis-0 late, its quorum grows to
    // all three masters, and the restart of redis-1 leaves it two: nobody else gets a majority.
    // Unsafe in the simulation, safe for real: the difference is the network model (docs/real-mode.md).
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = sim_scenario("redlock-seed-002-restart.json");
    let simulated = lockcheck_sim::run(&s);
    assert_eq!(
        kinds(&simulated.violations),
        vec![ViolationKind::MutualExclusion]
    );
    let real = run(&s).unwrap_or_else(|e| panic!("the real run failed: {e}"));
    assert!(!real.server_pids.iter().any(|&pid| redis_alive(pid)));
    assert_safe(&real);
    assert_eq!(sections(&real), 2, "both clients had their section");
}

/// `client-0` takes the lock first (client-1 is held back 200 ms) and works for 1 s; from
/// 500 ms every message of its is delayed by 2.5 s, so its exit write, sent at ~1 s, reaches the
/// resource at ~3.5 s: after its 2 s lease, inside client-1's section. (Two sections each, so
/// that client-0 is still running when its delayed write lands.)
fn delayed_write() -> Scenario {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(2_000);
    s.clients = 2;
    s.duration_ms = 15_000;
    s.workload = Workload {
        acquisitions_per_client: 2,
        hold_ms: 1_000,
        think_ms: 100,
        ..Workload::default()
    };
    s.faults = vec![
        Fault::Pause {
            at_ms: 0,
            node: "client-1".into(),
            for_ms: 200,
        },
        Fault::Delay {
            at_ms: 500,
            node: "client-0".into(),
            extra_ms: 2_500,
            for_ms: 5_000,
        },
    ];
    s
}

#[test]
fn a_write_delayed_past_the_lease_lands_inside_the_next_holders_section() {
    // Kleppmann's delayed packet, through the real proxies and the real resource path.
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let real = run_real(&delayed_write());
    assert_two_holders_including(&real, "client-0");
}

/// The `partition` story of a TTL lock: the network holds `client-0`'s exit write (sent inside
/// its lease) until the heal at 1.25 × TTL, inside the next holder's section. The real resource
/// path holds it as the simulated network does (a partition with `"hold": true`).
#[test]
fn a_write_a_partition_held_past_the_lease_breaks_single_redis_and_fencing_turns_it_away() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s =
        profile::scenario(Algorithm::SingleRedis, Profile::Partition, &shape(3, 2_000)).unwrap();
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
    s.params.fencing = true;
    let real = run_real(&s);
    assert_safe(&real);
    assert!(
        real.outcome
            .stale_accesses
            .iter()
            .any(|a| a.client == "client-0"),
        "the held write was turned away: {:?}",
        real.outcome.stale_accesses
    );
}

#[test]
fn message_loss_on_the_server_stalls_single_redis_but_never_breaks_it() {
    // 30 % of the transmissions to and from redis-0 are lost for 5 s: TCP retransmits each after
    // 200 ms or more, past the client's 100 ms request timeout; the clients time out and retry.
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(2_000);
    s.clients = 3;
    s.duration_ms = 20_000;
    s.workload = Workload {
        acquisitions_per_client: 3,
        hold_ms: 300,
        think_ms: 100,
        ..Workload::default()
    };
    s.faults = vec![Fault::Loss {
        at_ms: 0,
        node: "redis-0".into(),
        rate: 0.3,
        for_ms: 5_000,
    }];
    let real = run_real(&s);
    assert_safe(&real);
    assert_eq!(
        sections(&real),
        9,
        "every client did its 3 critical sections"
    );
}

#[test]
fn seed_002s_restart_with_appendfsync_always_is_safe_for_real() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = redlock_story(Profile::Restart);
    s.params.persistence = Some(Persistence::Always);
    let real = run_real(&s);
    assert_safe(&real);
}

#[test]
fn a_holder_killed_inside_its_section_leaves_the_lock_to_expire_and_comes_back_as_a_new_process() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    // client-0 holds the lock from ~0 ms for 1 s; it is killed at 400 ms (its key stays until
    // the 2 s lease ends) and restarted at 600 ms. Two sections each: the one client-0 was in
    // when it died counts as done (as in the simulation), so it comes back for its second.
    let mut s = crash_while_held(Persistence::None);
    s.workload.acquisitions_per_client = 2;
    s.faults.truncate(1);
    s.faults.push(Fault::Crash {
        at_ms: 400,
        node: "client-0".into(),
        scope: lockcheck_core::scenario::CrashScope::Process,
    });
    s.faults.push(Fault::Restart {
        at_ms: 600,
        node: "client-0".into(),
    });
    let real = run_real(&s);
    assert_safe(&real);
    let entries = &real.outcome.history.entries;
    let entered: Vec<(&str, &str, u64)> = entries
        .iter()
        .filter_map(|e| match &e.op {
            Op::Resource {
                client,
                phase: Phase::Enter,
                accepted: true,
                token,
                ..
            } => Some((client.as_str(), token.as_str(), e.true_ns)),
            _ => None,
        })
        .collect();
    let by = |who: &str| entered.iter().filter(|(c, ..)| *c == who).count();
    assert_eq!((by("client-0"), by("client-1")), (2, 2), "{entered:?}");
    // Nobody entered between the kill and the end of the dead holder's 2 s lease.
    assert!(
        entered[1].2 >= 2_000_000_000,
        "the next holder entered at {} ns, inside the dead holder's lease",
        entered[1].2
    );
    // The restarted client is a new process with a new token, not mistaken for its former self.
    let tokens: Vec<&str> = entered
        .iter()
        .filter(|(c, ..)| *c == "client-0")
        .map(|(_, t, _)| *t)
        .collect();
    assert_ne!(tokens[0], tokens[1]);
}

#[test]
fn a_dropped_launcher_leaves_no_server_running() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut launcher = Launcher::new().unwrap();
    launcher.add_redis("redis-0", Persistence::None).unwrap();
    launcher.add_redis("redis-1", Persistence::Always).unwrap();
    let pids = launcher.started_pids();
    assert_eq!(pids.len(), 2);
    drop(launcher);
    assert!(pids.iter().all(|&pid| !redis_alive(pid)), "{pids:?}");
}

/// Story (issue 14, item 4): Redisson's fair lock keeps a waiter's place until a deadline taken
/// from the waiter's own wall clock. client-1 holds; client-0, whose clock runs 30 s ahead,
/// queues first and client-2 behind it (the pauses set that order); client-0 is killed while
/// queued. From client-1's release the lock is free, but only the head of the queue may take
/// it, and the dead head's place lasts 30 s longer than its 5 s queue timeout: client-2 is
/// STUCK (the bound is twice the 5 s queue timeout), in both worlds, and the lock is still not free for
/// the probe after the run.
#[test]
fn a_dead_waiter_whose_clock_ran_ahead_blocks_the_fair_queue_in_both_worlds() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = sim_scenario("redis-fair-dead-waiter-clock-ahead.json");
    let real = run_real(&s);
    let stuck: Vec<&str> = real
        .outcome
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::Stuck)
        .map(|v| v.clients[0].as_str())
        .collect();
    assert_eq!(stuck, vec!["client-2"], "{:#?}", real.outcome.violations);
}

/// Story (ORDER): Redisson's fair lock judges a waiter's place by the clock of whichever client
/// runs the script. client-0 holds for 2 s; client-1 queues at once and polls; client-2, whose
/// wall clock runs 3 s ahead, asks at 1.5 s, drops client-1 from the queue (its place is kept
/// 1 s from its last poll) and is granted first.
/// The real server runs the same script text: the order of entry is the simulation's, and with
/// a right clock client-1 goes first in both worlds. (Real mode does not see the server's
/// queue, so it cannot judge ORDER itself: the verdicts are not compared, the order of entry
/// is; `sim/tests/redis_fair.rs` pins the simulation's ORDER.)
#[test]
fn a_client_whose_clock_runs_ahead_jumps_the_fair_queue_in_both_worlds() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let story = sim_scenario("redis-fair-clock-ahead-jumps-the-queue.json");
    let mut right_clock = story.clone();
    right_clock.faults.remove(0);
    for (s, order) in [
        (story, ["client-0", "client-2", "client-1"]),
        (right_clock, ["client-0", "client-1", "client-2"]),
    ] {
        let real = run(&s).unwrap_or_else(|e| panic!("the real run failed: {e}"));
        assert!(real.server_pids.iter().all(|&pid| !redis_alive(pid)));
        assert_eq!(entered(&real), order, "{:#?}", real.outcome.history.entries);
        assert!(!real.outcome.violated(), "{:#?}", real.outcome.violations);
    }
}
