//! The ZooKeeper locks in simulation (`zk-sequential`, `zk-rwlock`, `zk-herd`): what ZooKeeper
//! buys (no lease to misjudge, sessions judged on the server's monotonic clock, a monotonic
//! fencing token for free) and what it does not (a holder that goes silent for its session
//! timeout, paused or cut off, still outlives its lock).

mod common;

use common::search::{nothing_found, options};
use lockcheck_core::checker::{self, ViolationKind};
use lockcheck_core::history::{Entry, KeyChange, Kind, Op, Phase};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Fault, Params};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::{explore, Exploration, ExploreOptions};
use lockcheck_sim::run;

const ZOOKEEPER: [Algorithm; 3] = [
    Algorithm::ZkSequential,
    Algorithm::ZkRwLock,
    Algorithm::ZkHerd,
];

/// True times (ms) at which the server expired a session's lock node.
fn expiries(history: &[Entry]) -> Vec<f64> {
    history
        .iter()
        .filter(|e| {
            matches!(
                &e.op,
                Op::Key {
                    change: KeyChange::Expired,
                    ..
                }
            )
        })
        .map(|e| e.true_ns as f64 / 1e6)
        .collect()
}

/// Accepted accesses of `client` in `phase`.
fn accepted(history: &[Entry], client: &str, phase: Phase) -> usize {
    history
        .iter()
        .filter(|e| {
            matches!(&e.op, Op::Resource { client: c, phase: p, accepted: true, .. }
                if c == client && *p == phase)
        })
        .count()
}

#[test]
fn a_holder_paused_past_its_session_breaks_every_zookeeper_lock() {
    let params = Params::default();
    let timeout = params.zookeeper.session_timeout_ms();
    for algorithm in ZOOKEEPER {
        let Exploration::Found(f) = explore(
            &options(algorithm, &[FaultProfile::Pause], params.clone(), 500),
            &|_| {},
        )
        .unwrap() else {
            panic!("{}: the pause violation was not found", algorithm.name());
        };
        let violation = &f.outcome.violations[0];
        assert_eq!(violation.kind, ViolationKind::MutualExclusion);
        // Shrunk to pauses only, one of them the stale holder's (another client's pause may
        // remain when it is what lets the holder in first).
        assert!(f.scenario.faults.len() <= 2, "{:?}", f.scenario.faults);
        let Some((at_ms, for_ms)) = f.scenario.faults.iter().find_map(|fault| match fault {
            Fault::Pause {
                at_ms,
                node,
                for_ms,
            } if node == &violation.clients[0] => Some((at_ms, for_ms)),
            _ => None,
        }) else {
            panic!("the stale holder was not paused: {:?}", f.scenario.faults);
        };
        // The session timeout counts from the client's last ping, up to a third of the timeout
        // before the pause: the shrunk pause is at least the other two thirds.
        assert!(*for_ms >= timeout * 2 / 3, "{for_ms} ms");
        // The server expired the paused holder's session while it slept: that is how the lock
        // passed.
        let (from, to) = (*at_ms as f64, (at_ms + for_ms) as f64 + 50.0);
        assert!(
            expiries(&f.outcome.history.entries)
                .iter()
                .any(|&t| from <= t && t <= to),
            "{}: no expiry within the pause",
            algorithm.name()
        );
    }
}

#[test]
fn fencing_with_the_czxid_makes_pauses_safe() {
    let params = Params {
        fencing: true,
        ..Params::default()
    };
    for algorithm in ZOOKEEPER {
        nothing_found(&options(
            algorithm,
            &[FaultProfile::Pause],
            params.clone(),
            300,
        ));
    }
}

/// Server crashes with immediate or delayed restarts, drift, and partitions of at most half the
/// session timeout: the faults a ZooKeeper session rides out. With the fencing token: a write
/// that a partition held (TCP) past a release lands late whatever the lock, and the resource
/// must turn it away (`a_write_held_by_a_partition_breaks_zookeeper_without_fencing`).
fn survivable(algorithm: Algorithm, cases: u32) -> ExploreOptions {
    let params = Params {
        fencing: true,
        ..Params::default()
    };
    ExploreOptions {
        max_partition_ms: Some(params.zookeeper.session_timeout_ms() / 2),
        ..options(
            algorithm,
            &[
                FaultProfile::CrashRestart,
                FaultProfile::CrashDelayedRestart,
                FaultProfile::Partition,
                FaultProfile::ClockDrift,
            ],
            params,
            cases,
        )
    }
}

#[test]
fn without_pauses_zk_sequential_is_never_found_unsafe_in_two_thousand_cases() {
    nothing_found(&survivable(Algorithm::ZkSequential, 2_000));
}

/// Without crashes or pauses, but without fencing either: a partition that holds the holder's
/// write (TCP) and delivers it after the lock moved on is found (Kleppmann's delayed packet),
/// as is a holder cut off from ZooKeeper alone past its session while it still writes.
#[test]
fn a_write_held_by_a_partition_breaks_zookeeper_without_fencing() {
    let found = common::search::find(&options(
        Algorithm::ZkSequential,
        &[FaultProfile::Partition],
        Params::default(),
        500,
    ));
    assert!(
        matches!(found.scenario.faults[..], [Fault::Partition { .. }]),
        "{}",
        found.scenario.to_json()
    );
}

#[test]
fn without_pauses_the_herd_and_the_read_write_lock_hold_too() {
    nothing_found(&survivable(Algorithm::ZkRwLock, 500));
    nothing_found(&survivable(Algorithm::ZkHerd, 500));
    for algorithm in ZOOKEEPER {
        nothing_found(&options(
            algorithm,
            &[FaultProfile::ClockJump],
            Params::default(),
            200,
        ));
        nothing_found(&options(
            algorithm,
            &[FaultProfile::None],
            Params::default(),
            200,
        ));
    }
}

/// Two clients; client-0 takes the lock first and works for `hold_ms`; the server is cut off
/// from everyone from 1.4 s for `for_ms`.
fn server_cut_off(for_ms: u64, hold_ms: u64) -> Scenario {
    let mut s = Scenario::new(Algorithm::ZkSequential);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = hold_ms;
    s.duration_ms = 40_000;
    s.faults = vec![Fault::Partition {
        at_ms: 1_400,
        isolate: vec!["zk-0".into()],
        for_ms,
        hold: false,
        from: None,
    }];
    // The stories cut off the holder's server: client-0 must be the holder.
    s.seed = common::seed_where_first_holder_is(&s, "client-0");
    s
}

#[test]
fn a_partition_shorter_than_the_session_timeout_can_still_expire_it() {
    // The timeout runs from the holder's last ping (about 1 s in), not from the cut; the client
    // gives its connection up 6.7 s after that ping, pauses (a random time below a second, as
    // the Java client does), and its connection attempt's SYN, lost in the cut, is sent again
    // 1, 2, 4 s later: it reconnects at the first retransmission after the heal. After 9 s of
    // partition that comes around the 10 s timeout's deadline (between 11 and 13 s, where the
    // server's tick puts it): whether the session has ended by then depends on the pause and on
    // the tick's phase, so some of them expire it (21 of these 32; an expiry lets client-1 in
    // beside the holder) and some do not. (9.7 s expires it at every one.)
    use lockcheck_core::scenario::ServerClocks;
    // Seeds (the clients' pauses) in which client-0 holds first, as the story needs.
    let seeds: Vec<u64> = (0..60)
        .filter(|&seed| {
            let mut s = server_cut_off(5_000, 20_000);
            s.seed = seed;
            common::first_holder(&run(&s).history.entries) == Some("client-0")
        })
        .take(4)
        .collect();
    assert_eq!(seeds.len(), 4, "{seeds:?}");
    let expired_at = |for_ms: u64| -> Vec<bool> {
        let mut all = Vec::new();
        for &seed in &seeds {
            for k in 0..8 {
                let mut s = server_cut_off(for_ms, 20_000);
                s.seed = seed;
                s.server_clocks = ServerClocks::Pinned([("zk-0".to_string(), k * 250)].into());
                let outcome = run(&s);
                let expired = !expiries(&outcome.history.entries).is_empty();
                // Only an expiry lets client-1 in beside the holder.
                assert!(expired || !outcome.violated(), "{:?}", outcome.violations);
                if let Some(v) = outcome.violations.first() {
                    assert_eq!(v.kind, ViolationKind::MutualExclusion);
                }
                all.push(expired);
            }
        }
        all
    };
    let long = expired_at(9_000);
    // Expired for some pauses and phases, kept for others: the reconnection at a SYN
    // retransmission after the heal comes before some deadlines. (Had the connection attempt
    // waited out the whole connect timeout across the cut, it would come after every one.)
    assert!(
        long.iter().any(|&e| e) && long.iter().any(|&e| !e),
        "the session should expire for some pauses and phases only: {long:?}"
    );
    // Half the timeout is ridden out whatever the pause and phase: the client reconnects in time.
    let short = expired_at(5_000);
    assert!(short.iter().all(|&e| !e), "{short:?}");
}

#[test]
fn a_careful_client_stops_using_a_suspended_lock_and_resumes_when_the_session_survives() {
    // client-0 holds for 14 s and checks its lock before each access; the server is cut off for
    // 7 s: long enough for the client to call its session disconnected, short enough for the
    // session to survive.
    let mut s = server_cut_off(7_000, 14_000);
    s.faults = vec![Fault::Partition {
        at_ms: 4_400,
        isolate: vec!["zk-0".into()],
        for_ms: 7_000,
        hold: false,
        from: None,
    }];
    s.workload.check_before_access = true;
    s.seed = common::seed_where_first_holder_is(&s, "client-0");
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    assert!(expiries(&outcome.history.entries).is_empty());
    let h = &outcome.history.entries;
    assert_eq!(accepted(h, "client-0", Phase::Exit), 1, "resumed");

    // With suspended_is_lost, the disconnection alone makes it give the lock up unused.
    s.params.zookeeper.suspended_is_lost = true;
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let h = &outcome.history.entries;
    assert_eq!(accepted(h, "client-0", Phase::Enter), 1);
    assert_eq!(accepted(h, "client-0", Phase::Exit), 0, "gave up");
}

#[test]
fn a_careful_client_survives_a_partition_that_expires_its_session_a_classic_one_does_not() {
    let classic = server_cut_off(12_000, 20_000);
    let outcome = run(&classic);
    assert!(
        outcome.violated(),
        "the classic client works on past its session"
    );

    let mut careful = classic.clone();
    careful.workload.check_before_access = true;
    let outcome = run(&careful);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    assert!(!expiries(&outcome.history.entries).is_empty());
    assert_eq!(
        accepted(&outcome.history.entries, "client-0", Phase::Exit),
        0
    );
}

#[test]
fn a_wall_clock_jump_on_the_server_alone_never_expires_a_session() {
    // client-0 holds the lock for 25 s; the server's wall clock leaps a minute ahead, then back.
    let mut s = Scenario::new(Algorithm::ZkSequential);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 25_000;
    s.faults = vec![
        Fault::ClockJump {
            at_ms: 1_000,
            node: "zk-0".into(),
            by_ms: 60_000,
        },
        Fault::ClockJump {
            at_ms: 5_000,
            node: "zk-0".into(),
            by_ms: -120_000,
        },
    ];
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    assert!(
        expiries(&outcome.history.entries).is_empty(),
        "no session expired"
    );
}

#[test]
fn zookeeper_locks_reject_settings_they_cannot_honour() {
    let mut s = Scenario::new(Algorithm::ZkSequential);
    s.params.zookeeper.session_timeout_ms = Some(1_000);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("session_timeout_ms"), "{e}");
    s.params.zookeeper.session_timeout_ms = Some(10_000);
    s.params.nodes = Some(4);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("params.nodes") && e.contains("odd"), "{e}");
    s.params.nodes = None;
    s.workload.hold_until_validity = true;
    let e = s.validate().unwrap_err().to_string();
    assert!(
        e.contains("hold_until_validity") && e.contains("no lease"),
        "{e}"
    );
    s.workload.hold_until_validity = false;
    s.workload.read_fraction = Some(0.5);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("read_fraction"), "{e}");
    let mut rw = Scenario::new(Algorithm::ZkRwLock);
    rw.workload.read_fraction = Some(1.5);
    let e = rw.validate().unwrap_err().to_string();
    assert!(e.contains("read_fraction") && e.contains("1.5"), "{e}");
    let mut redis = Scenario::new(Algorithm::SingleRedis);
    redis.params.zookeeper.suspended_is_lost = true;
    let e = redis.validate().unwrap_err().to_string();
    assert!(e.contains("suspended_is_lost"), "{e}");
}

#[test]
fn the_lock_passes_in_the_order_the_server_created_the_nodes() {
    let path = format!(
        "{}/tests/scenarios/zk-sequential-contention.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let s = Scenario::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let grants = outcome
        .history
        .entries
        .iter()
        .filter(|e| {
            e.kind == Kind::Ok
                && e.node != "probe"
                && matches!(&e.op, Op::Acquire { token: Some(t), .. } if t.starts_with("/lock/"))
        })
        .count();
    assert_eq!(
        grants, 6,
        "three clients, two sections each, all judged by sequence_order"
    );
    assert!(checker::sequence_order(&outcome.history.entries).is_empty());
}

/// Pairs of accepted reader sections of different clients that overlapped in true time.
fn overlapping_readers(history: &[Entry]) -> usize {
    let mut open: Vec<&str> = Vec::new();
    let mut overlaps = 0;
    for e in history {
        if let Op::Resource {
            client,
            phase,
            accepted: true,
            shared: true,
            ..
        } = &e.op
        {
            match phase {
                Phase::Enter => {
                    overlaps += open.iter().filter(|c| **c != client).count();
                    open.push(client);
                }
                Phase::Exit => open.retain(|c| *c != client),
            }
        }
    }
    overlaps
}

#[test]
fn readers_share_the_rwlock_and_writers_keep_it_to_themselves() {
    let mut readers = Scenario::new(Algorithm::ZkRwLock);
    readers.clients = 3;
    readers.workload.read_fraction = Some(1.0);
    readers.workload.hold_ms = 2_000;
    readers.duration_ms = 30_000;
    let outcome = run(&readers);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    assert!(
        overlapping_readers(&outcome.history.entries) >= 3,
        "readers held together"
    );

    let mut writers = readers.clone();
    writers.workload.read_fraction = Some(0.0);
    let outcome = run(&writers);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let h = &outcome.history.entries;
    assert_eq!(
        (0..3)
            .map(|c| accepted(h, &format!("client-{c}"), Phase::Exit))
            .sum::<usize>(),
        9,
        "every section ran, one at a time"
    );

    // Mixed: the checker holds writers to themselves against readers too, and both kinds ran.
    let mut mixed = readers.clone();
    mixed.workload.read_fraction = Some(0.5);
    mixed.workload.acquisitions_per_client = 4;
    let outcome = run(&mixed);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let shared: Vec<bool> = outcome
        .history
        .entries
        .iter()
        .filter_map(|e| match e.op {
            Op::Resource {
                phase: Phase::Enter,
                accepted: true,
                shared,
                ..
            } => Some(shared),
            _ => None,
        })
        .collect();
    assert_eq!(shared.len(), 12);
    assert!(
        shared.contains(&true) && shared.contains(&false),
        "{shared:?}"
    );
}

/// The wake-ups per release of `algorithm` with `clients` contending for 2 sections each.
fn wakeups(algorithm: Algorithm, clients: u32) -> checker::Wakeups {
    let mut s = Scenario::new(algorithm);
    s.clients = clients;
    s.workload.acquisitions_per_client = 2;
    s.workload.hold_ms = 300;
    s.workload.think_ms = 0;
    s.duration_ms = 30_000;
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    outcome.wakeups
}

#[test]
fn herd_wakeups_grow_with_the_waiters_sequential_ones_stay_at_one() {
    let herd: Vec<_> = [2, 4, 8]
        .iter()
        .map(|&n| wakeups(Algorithm::ZkHerd, n))
        .collect();
    assert!(
        herd[0].mean() < herd[1].mean() && herd[1].mean() < herd[2].mean(),
        "{herd:?}"
    );
    assert!(herd[2].max_per_release >= 6, "{herd:?}");
    for n in [2, 4, 8] {
        let sequential = wakeups(Algorithm::ZkSequential, n);
        assert_eq!(sequential.max_per_release, 1, "{n} clients: {sequential:?}");
        assert!(sequential.wakeups > 0);
    }
}

/// The story file the real ensemble test runs too.
fn story(name: &str) -> Scenario {
    let path = format!("{}/tests/scenarios/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Scenario::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Whether `client`'s release found its lock node gone (its session expired meanwhile).
fn release_found_it_gone(history: &[Entry], client: &str) -> bool {
    history.iter().any(|e| {
        e.node == client
            && e.kind == Kind::Fail
            && matches!(&e.op, Op::Release { error: Some(error), .. }
                if error == lockcheck_core::workload::NO_LONGER_HELD)
    })
}

/// The leader decides session expiry on its own clock: client-0 holds the lock through zk-0, a
/// follower that keeps answering its pings, while the leader (zk-2) is paused for longer than the
/// session timeout but less than the followers' `syncLimit`. When the leader comes back, its
/// expirer runs before zk-0's report of the pings can reach it: client-0's session ends, and
/// client-1 takes the lock while client-0 still works. (`real/tests/zookeeper_servers.rs` tells
/// the same file on a real ensemble.)
#[test]
fn a_leader_paused_past_the_session_timeout_expires_a_follower_clients_session() {
    let s = story("zk-ensemble-leader-pause.json");
    let outcome = run(&s);
    let history = &outcome.history.entries;
    assert!(
        outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::MutualExclusion),
        "{:#?}",
        outcome.violations
    );
    assert!(release_found_it_gone(history, "client-0"));
    // Expired by the leader once it resumed (8 s), not before.
    let expired = expiries(history);
    assert!(
        !expired.is_empty() && expired.iter().all(|&ms| ms >= 8_000.0),
        "{expired:?}"
    );
    assert!(history
        .iter()
        .filter(|e| matches!(
            &e.op,
            Op::Key {
                change: KeyChange::Expired,
                ..
            }
        ))
        .all(|e| e.node == "zk-2"));
}

/// The same pause, shorter than the session timeout: the leader comes back in time to hear
/// zk-0's report, and the session survives: nobody shares the lock.
#[test]
fn a_leader_paused_for_less_than_the_session_timeout_expires_nothing() {
    let mut s = story("zk-ensemble-leader-pause.json");
    for fault in &mut s.faults {
        if let Fault::Pause { node, for_ms, .. } = fault {
            if node == "zk-2" {
                *for_ms = 1_500;
            }
        }
    }
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    assert!(expiries(&outcome.history.entries).is_empty());
}

/// A member cut off from the others stops serving once it has not heard its leader for
/// `syncLimit` ticks (10 s): it closes its clients' connections, they move to another member
/// with their sessions, and with a session timeout longer than that (20 s) the holder's session
/// survives and the lock is never shared. (Meanwhile the cut-off member answered its pings, but
/// its reports never reached the leader: a shorter session would have expired.)
#[test]
fn a_member_cut_off_from_the_quorum_stops_serving_and_its_clients_move() {
    let mut s = story("zk-ensemble-leader-pause.json");
    s.params.zookeeper.session_timeout_ms = Some(20_000);
    s.duration_ms = 40_000;
    s.faults = vec![
        Fault::Pause {
            at_ms: 0,
            node: "client-1".into(),
            for_ms: 400,
        },
        Fault::Partition {
            at_ms: 1_000,
            isolate: vec!["zk-0".into()],
            from: Some(vec!["zk-1".into(), "zk-2".into()]),
            for_ms: 14_000,
            hold: false,
        },
    ];
    s.validate().unwrap();
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    assert!(!release_found_it_gone(&outcome.history.entries, "client-0"));
    assert!(expiries(&outcome.history.entries).is_empty());
    assert!(noted(&outcome.history.entries, "zk-0", "stopped serving"));
}

/// A member cut off past `syncLimit` serves again the moment the cut heals, as on real
/// ZooKeeper (14–24 ms after the heal, FIDELITY.md; `real/tests/zookeeper_servers.rs` pins it
/// within a tick): its election notifications, held across the cut, are answered at once with
/// the current leader. Not at its next half-tick look, up to a second later.
#[test]
fn a_member_cut_off_past_sync_limit_follows_again_at_the_heal() {
    let mut s = story("zk-ensemble-leader-pause.json");
    s.duration_ms = 30_000;
    s.faults = vec![Fault::Partition {
        at_ms: 1_000,
        isolate: vec!["zk-0".into()],
        from: Some(vec!["zk-1".into(), "zk-2".into()]),
        for_ms: 13_333,
        hold: false,
    }];
    s.validate().unwrap();
    for seed in 0..5 {
        s.seed = seed;
        let history = run(&s).history.entries;
        let stopped = noted_at(&history, "zk-0", "stopped serving").expect("zk-0 gives up");
        assert!(
            (10_000..=12_000).contains(&stopped),
            "seed {seed}: {stopped} ms"
        );
        let back = noted_at(&history, "zk-0", "follows zk-2 again").expect("zk-0 follows again");
        // Within the simulated timer's resolution (a millisecond) of the heal.
        assert!(
            (14_333..=14_334).contains(&back),
            "seed {seed}: back at {back} ms; the cut healed at 14,333 ms"
        );
    }
}

/// Whether `node` noted `text` in the history (an ensemble member's role changes).
fn noted(history: &[Entry], node: &str, text: &str) -> bool {
    noted_at(history, node, text).is_some()
}

/// When (true ms) `node` first noted something containing `text`.
fn noted_at(history: &[Entry], node: &str, text: &str) -> Option<u64> {
    history
        .iter()
        .find(|e| e.node == node && matches!(&e.op, Op::Note { text: t } if t.contains(text)))
        .map(|e| e.true_ns / 1_000_000)
}

/// The leader crashes: the followers elect the highest of them, which gives every session a
/// full timeout, so the holder, which moves to a live member, keeps its lock.
#[test]
fn a_crashed_leader_is_replaced_and_sessions_survive_the_election() {
    let mut s = story("zk-ensemble-leader-pause.json");
    s.faults = vec![
        Fault::Pause {
            at_ms: 0,
            node: "client-1".into(),
            for_ms: 400,
        },
        Fault::Crash {
            at_ms: 1_000,
            node: "zk-2".into(),
            scope: lockcheck_core::scenario::CrashScope::Process,
        },
    ];
    s.validate().unwrap();
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    assert!(expiries(&outcome.history.entries).is_empty());
    assert!(noted(&outcome.history.entries, "zk-1", "elected leader"));
}

/// The server's tick has a phase of its own (`core::server_clock`): a session is ended in
/// buckets one tick wide counted on the server's monotonic clock, whose origin is the server's
/// start, not the run's. A holder cut off from its server for 5.2 s, with a 5 s session timeout
/// (not a multiple of the 2 s tick), keeps its session at some phases (the ping TCP held across
/// the cut reaches the server at the heal, before the bucket ends) and loses it at others. With
/// every server's clock at 0, as lockcheck once had it, only one of the two could ever be seen;
/// drawn from the seed, a search sees both. (A cut that drops packets is unsafe at every phase:
/// the client gives its connection up during the cut, and its connection attempt across the cut
/// waits out the Java client's `connectTimeout`, a whole session timeout with one server, so it
/// comes back after any bucket.)
#[test]
fn a_cut_just_past_a_session_timeout_is_unsafe_at_some_tick_phases_and_not_at_others() {
    use lockcheck_core::scenario::ServerClocks;
    let story = story("zk-cut-just-past-the-session-timeout.json");
    let unsafe_at: Vec<(u64, bool)> = (0..8)
        .map(|k| {
            let phase = k * 250;
            let mut s = story.clone();
            s.server_clocks = ServerClocks::Pinned([("zk-0".to_string(), phase)].into());
            let violated = run(&s)
                .violations
                .iter()
                .any(|v| v.kind == ViolationKind::MutualExclusion);
            (phase, violated)
        })
        .collect();
    assert!(
        unsafe_at.iter().any(|&(_, u)| u) && unsafe_at.iter().any(|&(_, u)| !u),
        "the verdict should turn on the phase: {unsafe_at:?}"
    );
    // Drawn from the seed, the phase differs from seed to seed, and so does the verdict.
    let verdicts: std::collections::BTreeSet<bool> = (0..40)
        .map(|seed| {
            let mut s = story.clone();
            s.seed = seed;
            run(&s)
                .violations
                .iter()
                .any(|v| v.kind == ViolationKind::MutualExclusion)
        })
        .collect();
    assert_eq!(verdicts.len(), 2, "40 seeds gave one verdict: {verdicts:?}");
}

/// A follower cut off from its leader, not from its clients, answers their pings from its own
/// replica, which never gets the leader's close of the holder's session: a careful client (it
/// checks its session before each access) hears nothing wrong and works on beside the next
/// holder until its follower gives up (`syncLimit`). With the cut over before the session
/// timeout, nothing expires and the careful client is safe.
#[test]
fn a_careful_client_on_a_follower_cut_off_from_its_leader_is_not_safe() {
    let s = story("zk-ensemble-follower-cut-careful.json");
    assert!(s.workload.check_before_access);
    let outcome = run(&s);
    let v = outcome
        .violations
        .first()
        .unwrap_or_else(|| panic!("no violation: {:#?}", outcome.history.entries));
    assert_eq!(v.kind, ViolationKind::MutualExclusion);
    assert_eq!(v.clients, vec!["client-0", "client-1"]);
    assert_eq!(expiries(&outcome.history.entries).len(), 1);

    let mut short = s.clone();
    if let Fault::Partition { for_ms, .. } = &mut short.faults[1] {
        *for_ms = 2_000;
    }
    let outcome = run(&short);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    assert!(expiries(&outcome.history.entries).is_empty());
}

/// The same cut held past `syncLimit` (`zk-ensemble-deposed-leader.json`, to 39 s): the followers
/// give zk-2 up at 10 s and elect zk-1 0.2 s later; zk-2, which counts `syncLimit` in whole ticks
/// of its own, serves on until 12 s. client-1, whose member zk-1 dropped it at the election, moves
/// to zk-2 meanwhile, and zk-2, holding its session closing, says it expired (the new leader keeps
/// it). client-1 opens a new session, finds its old node still listed, takes it as its own and
/// enters; the new leader expires the old session a timeout after its election, the node goes, and
/// client-2 enters beside client-1. Real ensembles did the same in 2 of 5 runs (FIDELITY, "a
/// deposed leader tells a moving client its session expired"); here 3 of the first 10 seeds, this
/// file's among them.
#[test]
fn a_deposed_leader_tells_a_moving_client_its_session_expired_and_two_hold() {
    let s = story("zk-ensemble-deposed-leader.json");
    let outcome = run(&s);
    let history = &outcome.history.entries;
    let v = outcome.violations.first().expect("two holders");
    assert_eq!(v.kind, ViolationKind::MutualExclusion);
    assert_eq!(v.clients, ["client-1", "client-2"], "{v:?}");
    let at = |member: &str, text: &str| noted_at(history, member, text);
    let (given_up, elected, deposed_stopped) = (
        at("zk-1", "stopped serving"),
        at("zk-1", "elected leader"),
        at("zk-2", "stopped serving"),
    );
    // The followers' read timeout ends 10 s after zk-2's last ping (at 0 s, the cut falling
    // on its next at 1 s), and their election takes 0.2–0.4 s.
    assert_eq!(given_up, Some(10_001), "{history:#?}");
    let elected = elected.expect("the followers elect zk-1");
    assert!(
        (10_201..=10_401).contains(&elected),
        "elected at {elected} ms"
    );
    // The deposed leader steps down at its own whole-tick check, a tick later.
    assert_eq!(deposed_stopped, Some(12_000));
    // Only the old session's expiry (at the new leader) let client-2 in.
    assert!(!expiries(history).is_empty());
}

/// A leader paused past `syncLimit` is deposed as one cut off is: its followers elect another
/// while it sleeps. But once it runs again it reaches them, and they have closed their
/// connections to it: it steps down at its next whole-tick check (at most a tick after it
/// resumes), where one behind a cut serves on until its followers' deadlines pass.
#[test]
fn a_leader_paused_past_sync_limit_steps_down_within_a_tick_of_resuming() {
    let mut s = story("zk-ensemble-deposed-leader.json");
    s.faults = vec![Fault::Pause {
        at_ms: 1_000,
        node: "zk-2".into(),
        for_ms: 14_000,
    }];
    let outcome = run(&s);
    let history = &outcome.history.entries;
    let at = |member: &str, text: &str| noted_at(history, member, text);
    let elected = at("zk-1", "elected leader").expect("the followers elect zk-1");
    assert!(
        elected < 15_000,
        "elected at {elected} ms, while zk-2 sleeps"
    );
    let stopped = at("zk-2", "stopped serving").expect("zk-2 steps down");
    assert!(
        (15_000..=17_000).contains(&stopped),
        "zk-2 resumed at 15 s and stepped down at {stopped} ms"
    );
}

/// A leader cut off from both followers cannot commit: the holder's session, past its deadline
/// on the leader's clock, is closing but not closed, so no client enters beside the holder while
/// the cut lasts (to the end of the run, 1 s before the followers would give the leader up).
/// Healed before `syncLimit` with the holder still inside, the leader still leads and its held
/// close commits with the quorum back: the session ends then, and the next waiter enters beside
/// the holder.
///
/// The story stops before `syncLimit`: past it, the followers elect another leader, and the
/// story is the next test's.
#[test]
fn a_leader_left_in_a_minority_closes_no_session_until_its_quorum_is_back() {
    let s = story("zk-ensemble-leader-in-a-minority.json");
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    let history = &outcome.history.entries;
    let at = expiries(history);
    assert!(
        at.iter().all(|&t| t >= 10_000.0),
        "nothing closes before the heal at the run's end (10 s): {at:?}"
    );
    assert!(!noted(history, "zk-2", "stopped serving"));
    assert_eq!(accepted(history, "client-0", Phase::Enter), 1);
    for client in ["client-1", "client-2"] {
        assert_eq!(accepted(history, client, Phase::Enter), 0, "{client}");
    }

    let mut healed_early = s.clone();
    healed_early.duration_ms = 40_000;
    healed_early.workload.hold_ms = 12_000; // the holder still inside at the heal (10 s)
    let outcome = run(&healed_early);
    let history = &outcome.history.entries;
    let at = expiries(history);
    assert!(
        at.len() == 2 && at.iter().all(|&t| (10_000.0..10_001.0).contains(&t)),
        "the closes commit at the heal (10 s): {at:?}"
    );
    assert!(!noted(history, "zk-2", "stopped serving"));
    let v = outcome.violations.first().expect("two holders");
    assert_eq!(v.kind, ViolationKind::MutualExclusion);
    assert!(v.clients.contains(&"client-0".to_string()));
}

/// A session ends at the first tick after its deadline, never earlier: the server rounds each
/// renewal's deadline (last touch + timeout) up to the next tick on its own clock
/// (`SessionTrackerImpl`'s expiry buckets). With the server's clock at 0 (pinned), the holder's
/// last renewal before the server stops is at 1 s, so the session is due at 5 s and ends at the
/// 6 s tick. A server (standalone, or an ensemble's leader) paused from 1 s to 5.5 s, past the
/// timeout but before the tick, expires nothing when it resumes; paused to 6 s, it expires the
/// session at once, and the waiter enters beside the holder. (Mutation check: expiring a tick
/// early, or not rounding at all, fails the first half.)
#[test]
fn a_session_expires_at_the_first_tick_after_its_deadline_never_earlier() {
    use lockcheck_core::scenario::ServerClocks;
    for ensemble in [false, true] {
        let mut s = story("zk-ensemble-leader-pause.json");
        let server = if ensemble { "zk-2" } else { "zk-0" };
        if !ensemble {
            s.params.nodes = None;
        }
        s.server_clocks = ServerClocks::Pinned([("zk-0".to_string(), 0)].into());
        for (resume_ms, expires) in [(5_500, false), (6_000, true)] {
            s.faults[1] = Fault::Pause {
                at_ms: 1_000,
                node: server.into(),
                for_ms: resume_ms - 1_000,
            };
            s.validate().unwrap();
            let outcome = run(&s);
            let at = expiries(&outcome.history.entries);
            if expires {
                assert!(
                    at.first()
                        .is_some_and(|&t| (resume_ms as f64..resume_ms as f64 + 1.0).contains(&t)),
                    "{server} resumed at {resume_ms} ms: the session ends then: {at:?}"
                );
                assert!(!outcome.violations.is_empty());
            } else {
                assert!(
                    at.is_empty(),
                    "{server} resumed at {resume_ms} ms, past the timeout, before the tick: {at:?}"
                );
                assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
            }
        }
    }
}

/// Whether `client`'s release was answered: its lock node deleted by its own request.
fn released(history: &[Entry], client: &str) -> bool {
    history
        .iter()
        .any(|e| e.node == client && e.kind == Kind::Ok && matches!(&e.op, Op::Release { .. }))
}

/// The ZooKeeper client has no per-request timeout (the Java client's `ClientCnxn` waits for an
/// answer while its connection lives): a server 300 ms away, three times `request_timeout_ms`,
/// serves its locks as any other. (A client that gave up on every answer later than 100 ms, as
/// lockcheck's once did, never took the lock in 20 s.) `real/tests/zookeeper_servers.rs` runs
/// the same file against a real server behind a delaying proxy.
#[test]
fn a_server_slower_than_the_request_timeout_still_serves_its_locks() {
    let s = story("zk-server-300-ms-away.json");
    assert!(s.params.request_timeout_ms < 300);
    let outcome = run(&s);
    let history = &outcome.history.entries;
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    for client in ["client-0", "client-1"] {
        assert_eq!(accepted(history, client, Phase::Exit), 2, "{client}");
    }
    assert!(
        !history
            .iter()
            .any(|e| e.kind == Kind::Fail && matches!(e.op, Op::Acquire { .. })),
        "no acquisition gave up"
    );
}

/// A member answers a connection's requests in order, a ping behind a pending write too (the
/// real `CommitProcessor` queues every request of a session that has one pending). client-0's
/// release (a delete) reaches zk-0 after zk-0 was cut off from the other members: it waits
/// there for a leader, and so do the pings behind it, so client-0 hears nothing, gives its
/// connection up at two thirds of its 6 s session timeout, and takes its session to another
/// member, where its release is answered — long before zk-0 stops serving (`syncLimit`, 11 s)
/// and before the leader's deadline for the session, which does not expire. (Had zk-0 answered
/// the pings, client-0 would have stayed with it, its release unanswered, until the leader
/// expired the session: what lockcheck's model did before.)
#[test]
fn a_client_whose_write_waits_on_a_cut_off_follower_hears_nothing_and_moves_in_time() {
    let s = story("zk-ensemble-write-on-a-cut-off-follower.json");
    let outcome = run(&s);
    let history = &outcome.history.entries;
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    assert!(expiries(history).is_empty(), "{:?}", expiries(history));
    assert!(released(history, "client-0"));
    let released_at = history
        .iter()
        .position(|e| {
            e.node == "client-0" && e.kind == Kind::Ok && matches!(e.op, Op::Release { .. })
        })
        .unwrap();
    let stopped_at = history
        .iter()
        .position(|e| {
            e.node == "zk-0"
                && matches!(&e.op, Op::Note { text } if text.contains("stopped serving"))
        })
        .expect("zk-0 gives its leader up");
    assert!(released_at < stopped_at);
    assert_eq!(accepted(history, "client-1", Phase::Exit), 1);
}

/// Every `node_deleted` a member pushes is of a node whose deletion (or expiry) was recorded
/// before it: a watch fires for a committed change, never for one a member only imagined.
fn deletions_told_were_committed(history: &[Entry]) -> Result<(), String> {
    let mut gone = std::collections::BTreeSet::new();
    for e in history {
        match &e.op {
            Op::Key {
                key,
                change: KeyChange::Deleted | KeyChange::Expired,
                ..
            } => {
                gone.insert(key.clone());
            }
            Op::Key {
                key,
                change: KeyChange::Set,
                ..
            } => {
                gone.remove(key);
            }
            Op::Watch { path, event, to } if event == "node_deleted" && !gone.contains(path) => {
                return Err(format!(
                    "{} told {to} at {} ms that {path} was deleted, which no commit did",
                    e.node,
                    e.true_ns / 1_000_000
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// While the followers elect a new leader (0.2–0.4 s after they gave the old one up), the old
/// leader, cut off from them, still leads as far as it knows. A client that reconnects to it
/// meanwhile, or reads there, must not end the sessions past their deadline on the way (a
/// session's close is a proposal that needs a quorum): it once did, firing `node_deleted` for a
/// holder's node that was never deleted, and a waiter entered out of turn. Over ten seeds of the
/// deposed-leader story, every deletion a watch tells of was committed.
#[test]
fn a_leader_without_a_quorum_ends_no_session_on_a_reconnection_or_a_read() {
    let base = story("zk-ensemble-deposed-leader.json");
    for seed in 0..10 {
        let s = Scenario {
            seed,
            ..base.clone()
        };
        let outcome = run(&s);
        let history = &outcome.history.entries;
        if let Err(e) = deletions_told_were_committed(history) {
            panic!("seed {seed}: {e}");
        }
        let order = outcome
            .violations
            .iter()
            .find(|v| v.kind == ViolationKind::FifoOrder);
        assert!(order.is_none(), "seed {seed}: {order:?}");
    }
}

/// A follower cut off from its leader for less than `syncLimit` keeps serving, and lags: the
/// waiter connected to it (client-0 on zk-0, its watch on the holder's node) hears nothing of
/// the holder's release (client-2, at 2.5 s), which commits on the others. When the cut heals
/// (7 s) the follower catches up and applies the delete, and the watch fires from it then, as
/// a real follower's does: client-0 enters within a tick of the heal. (Before followers kept
/// their own lagging tree, the event was dropped at the commit and the waiter never entered.)
/// While it lags, the follower answers reads from the tree it has.
#[test]
fn a_waiter_on_a_lagging_follower_hears_of_the_release_when_its_follower_catches_up() {
    let s = story("zk-ensemble-follower-catches-up.json");
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    let history = &outcome.history.entries;
    let entered = |client: &str| {
        history.iter().find_map(|e| match &e.op {
            Op::Resource {
                client: c,
                phase: Phase::Enter,
                accepted: true,
                ..
            } if c == client => Some(e.true_ns / 1_000_000),
            _ => None,
        })
    };
    let holder = entered("client-2").expect("client-2 enters first");
    assert!(holder < 1_000, "client-2 entered at {holder} ms");
    let told = history.iter().find_map(|e| match &e.op {
        Op::Watch { event, to, .. }
            if e.node == "zk-0" && to == "client-0" && event == "node_deleted" =>
        {
            Some(e.true_ns / 1_000_000)
        }
        _ => None,
    });
    let told = told.expect("zk-0 tells client-0 of the deletion");
    assert!(
        (7_000..=9_000).contains(&told),
        "told at {told} ms; the cut heals at 7 s"
    );
    let waiter = entered("client-0").expect("client-0 enters");
    assert!((7_000..=9_100).contains(&waiter), "entered at {waiter} ms");
}

/// A write held on a session's old connection is never applied once the session has moved:
/// client-0's second create goes to zk-0 while a cut holds its link there (1 s to 9 s); client-0
/// hears nothing, moves its session to zk-1 and creates its node again, takes the lock and
/// releases it. At the heal the held create reaches zk-0 on the connection the session left; the
/// leader refuses it (`SessionMovedException`), so no ghost node of client-0's blocks the next
/// waiter (client-1, from 8 s). Pinned in the history: every node a client creates is created
/// while that client is acquiring. The real servers' side, standalone and ensemble, is pinned by
/// `real/tests/zookeeper_servers.rs` (`a_create_held_on_…`).
#[test]
fn a_create_held_on_a_moved_sessions_old_connection_is_never_applied() {
    let s = story("zk-ensemble-held-create-after-a-move.json");
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    let history = &outcome.history.entries;
    let mut acquiring = std::collections::BTreeSet::new();
    for e in history {
        match (&e.kind, &e.op) {
            (Kind::Invoke, Op::Acquire { .. }) => {
                acquiring.insert(e.node.clone());
            }
            (Kind::Ok | Kind::Fail | Kind::Info, Op::Acquire { .. }) => {
                acquiring.remove(&e.node);
            }
            (
                _,
                Op::Key {
                    key,
                    change: KeyChange::Set,
                    by: Some(by),
                    ..
                },
            ) if key.starts_with("/lock/") => {
                assert!(
                    acquiring.contains(by),
                    "{key} created for {by} at {} ms, while {by} was not acquiring",
                    e.true_ns / 1_000_000
                );
            }
            _ => {}
        }
    }
    // client-0's second acquisition went through zk-1 during the cut.
    assert_eq!(accepted(history, "client-0", Phase::Enter), 2);
    assert_eq!(accepted(history, "client-1", Phase::Enter), 2);
}
