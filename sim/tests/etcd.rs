//! `etcd-mutex` in simulation: the Go client's `concurrency.Mutex` on one etcd member. What etcd
//! buys (leases on the member's monotonic clock, nothing acknowledged lost on a restart, a
//! monotonic fencing token for free: the key's create revision, a release that wakes only the
//! next waiter) and what it does not (a holder silent for its lease's TTL, paused or cut off,
//! outlives its lock — Jepsen's etcd 3.4.3 finding).

mod common;

use common::search::{find, nothing_found, options};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Entry, KeyChange, Kind, Op};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Fault, Params};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::ExploreOptions;
use lockcheck_sim::run;

/// True times (ms) at which the member expired a lease's key.
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

fn fenced() -> Params {
    Params {
        fencing: true,
        ..Params::default()
    }
}

#[test]
fn a_holder_paused_past_its_lease_ttl_breaks_etcd_mutex() {
    let ttl_ms = Params::default().etcd.lease_ttl_s() * 1_000;
    let f = find(&options(
        Algorithm::EtcdMutex,
        &[FaultProfile::Pause],
        Params::default(),
        500,
    ));
    let violation = &f.outcome.violations[0];
    assert_eq!(violation.kind, ViolationKind::MutualExclusion);
    // A pause long enough for the lease to run out: of the stale holder, or of the member
    // itself (whose lessor, once resumed, finds every lease past its deadline, as a SIGSTOPped
    // etcd does). A holder paused with a keep-alive answer on its way reads that answer only
    // when it wakes, and (as the Go client does) sends its next keep-alive a third of the TTL
    // after that: past the member's deadline once the pause was about two thirds of the TTL,
    // and a keep-alive past the TTL renews nothing (`lessor.Renew`), so a pause a little under
    // two thirds is enough.
    let longest = f
        .scenario
        .faults
        .iter()
        .filter_map(|fault| match fault {
            Fault::Pause { for_ms, .. } => Some(*for_ms),
            _ => None,
        })
        .max()
        .expect("shrunk to pauses");
    assert!(
        longest >= ttl_ms / 2,
        "{longest} ms: {:?}",
        f.scenario.faults
    );
    assert!(
        !expiries(&f.outcome.history.entries).is_empty(),
        "a lease expired"
    );
}

#[test]
fn fencing_with_the_create_revision_makes_pauses_and_partitions_safe() {
    nothing_found(&options(
        Algorithm::EtcdMutex,
        &[FaultProfile::Pause, FaultProfile::Partition],
        fenced(),
        300,
    ));
}

#[test]
fn a_holder_cut_off_longer_than_its_lease_breaks_etcd_mutex_without_fencing() {
    let f = find(&options(
        Algorithm::EtcdMutex,
        &[FaultProfile::Partition],
        Params::default(),
        500,
    ));
    assert_eq!(f.outcome.violations[0].kind, ViolationKind::MutualExclusion);
}

/// Crashes of the member with immediate restarts, and its clock jumping or drifting: etcd keeps
/// what it acknowledged, renews every lease on a restart, and runs leases on its monotonic
/// clock.
fn survivable(cases: u32) -> ExploreOptions {
    options(
        Algorithm::EtcdMutex,
        &[
            FaultProfile::CrashRestart,
            FaultProfile::ClockJump,
            FaultProfile::ClockDrift,
        ],
        Params::default(),
        cases,
    )
}

#[test]
fn crashes_with_immediate_restarts_and_clock_faults_never_break_etcd_mutex() {
    nothing_found(&survivable(400));
}

#[test]
fn a_member_down_for_the_lease_ttl_ends_the_sessions_and_only_fencing_saves_the_holder() {
    // The delayed restart keeps the member down for 10 s, the lease's TTL: no keep-alive is
    // answered for that long, so the holder's session is done (the Go client's deadline); the
    // restarted member renews the lease for a full TTL, nobody keeps it alive any more, and it
    // expires under a holder that works on.
    let f = find(&options(
        Algorithm::EtcdMutex,
        &[FaultProfile::CrashDelayedRestart],
        Params::default(),
        500,
    ));
    assert_eq!(f.outcome.violations[0].kind, ViolationKind::MutualExclusion);
    assert!(
        !expiries(&f.outcome.history.entries).is_empty(),
        "a lease expired"
    );
    nothing_found(&options(
        Algorithm::EtcdMutex,
        &[FaultProfile::CrashDelayedRestart],
        fenced(),
        300,
    ));
}

#[test]
fn a_wall_clock_jump_on_the_member_alone_never_expires_a_lease() {
    // client-0 holds the lock for 25 s; the member's wall clock leaps a minute ahead, then back.
    let mut s = Scenario::new(Algorithm::EtcdMutex);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 25_000;
    s.faults = vec![
        Fault::ClockJump {
            at_ms: 1_000,
            node: "etcd-0".into(),
            by_ms: 60_000,
        },
        Fault::ClockJump {
            at_ms: 5_000,
            node: "etcd-0".into(),
            by_ms: -120_000,
        },
    ];
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    assert!(
        expiries(&outcome.history.entries).is_empty(),
        "no lease expired"
    );
}

#[test]
fn a_restart_of_the_member_keeps_the_holders_key_and_renews_its_lease() {
    // client-0 holds for 25 s; the member crashes (the machine: only what was fsynced survives)
    // and comes back at once, twice.
    let mut s = Scenario::new(Algorithm::EtcdMutex);
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 25_000;
    for at_ms in [3_000, 12_000] {
        s.faults.push(Fault::Crash {
            at_ms,
            node: "etcd-0".into(),
            scope: Default::default(),
        });
        s.faults.push(Fault::Restart {
            at_ms,
            node: "etcd-0".into(),
        });
    }
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let history = &outcome.history.entries;
    assert!(expiries(history).is_empty(), "no lease expired");
    assert!(
        !history.iter().any(|e| matches!(
            &e.op,
            Op::Key {
                change: KeyChange::Lost,
                ..
            }
        )),
        "nothing acknowledged was lost"
    );
}

#[test]
fn waiters_are_granted_in_create_revision_order_and_a_release_wakes_one() {
    for clients in [2, 4, 8] {
        let mut s = Scenario::new(Algorithm::EtcdMutex);
        s.clients = clients;
        s.workload.acquisitions_per_client = 2;
        s.workload.hold_ms = 300;
        s.workload.think_ms = 0;
        s.duration_ms = 30_000;
        let outcome = run(&s);
        // The sequence check applies (the registry says so): no waiter was passed over.
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
        assert_eq!(grants, 2 * clients as usize);
        assert_eq!(
            outcome.wakeups.max_per_release, 1,
            "{clients}: {:?}",
            outcome.wakeups
        );
        assert!(
            outcome.wakeups.wakeups > 0,
            "{clients}: {:?}",
            outcome.wakeups
        );
    }
}

#[test]
fn etcd_mutex_refuses_settings_it_cannot_honour() {
    let mut s = Scenario::new(Algorithm::EtcdMutex);
    s.params.etcd.lease_ttl_s = Some(1);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("lease_ttl_s") && e.contains("at least 2"), "{e}");
    s.params.etcd.lease_ttl_s = None;
    // One member or an odd cluster (the cluster: sim/tests/etcd_cluster.rs).
    s.params.nodes = Some(2);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("a cluster of 2 etcd members"), "{e}");
    s.params.nodes = None;
    s.params.persistence = Some(lockcheck_core::scenario::Persistence::None);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("write-ahead log"), "{e}");
    s.params.persistence = None;
    // Per server too (it was not checked for the servers that log first: ZooKeeper's neither).
    for (algorithm, server) in [
        (Algorithm::EtcdMutex, "etcd-0"),
        (Algorithm::ZkSequential, "zk-0"),
    ] {
        let mut one = Scenario::new(algorithm);
        one.params.per_node =
            serde_json::from_str(&format!(r#"{{"{server}": {{"persistence": "everysec"}}}}"#))
                .unwrap();
        let e = one.validate().unwrap_err().to_string();
        assert!(
            e.contains("only always applies"),
            "{}: {e}",
            algorithm.name()
        );
    }
    s.params.zookeeper.session_timeout_ms = Some(8_000);
    let e = s.validate().unwrap_err().to_string();
    assert!(
        e.contains("params.zookeeper") && e.contains("params.etcd"),
        "{e}"
    );
    let mut zk = Scenario::new(Algorithm::ZkSequential);
    zk.params.etcd.lease_ttl_s = Some(5);
    let e = zk.validate().unwrap_err().to_string();
    assert!(e.contains("params.etcd (lease_ttl_s)"), "{e}");
}

#[test]
fn one_seed_replays_to_an_identical_history() {
    let f = find(&options(
        Algorithm::EtcdMutex,
        &[FaultProfile::Pause],
        Params::default(),
        500,
    ));
    let again = run(&f.scenario);
    assert_eq!(again.history, f.outcome.history);
}

#[test]
fn the_late_close_of_a_dead_process_does_not_take_its_successors_watch() {
    // client-1 is killed at 608 ms and restarted at once; the member's messages are delayed
    // until then, so the notice that the dead process's connection closed reaches the member
    // about 2.8 s later, after the new process has queued and watched the holder's key. The
    // notice ends the dead connection's watches only: when client-0 releases, the new
    // process is woken and takes the lock (with the watch dropped by node, it waited out the
    // whole run: STUCK).
    let s = common::scenario_file("etcd-late-close-of-a-dead-process.json");
    let outcome = run(&s);
    assert!(!outcome.violated(), "{:?}", outcome.violations);
    let history = &outcome.history.entries;
    let woken = history.iter().any(|e| {
        matches!(&e.op, Op::Watch { to, event, .. } if to == "client-1" && event == "node_deleted")
    });
    assert!(woken, "the waiter's watch fired");
    let granted = history
        .iter()
        .any(|e| e.node == "client-1" && e.kind == Kind::Ok && matches!(&e.op, Op::Acquire { .. }));
    assert!(granted, "the restarted client-1 acquired");
}

#[test]
fn a_careful_client_that_checks_its_session_before_access_survives_the_pause_a_classic_one_does_not(
) {
    // The pause that breaks the classic client, with the holder pausing itself (not the
    // member): the careful client asks its session (`Session.Done()`) before each access.
    let f = find(&options(
        Algorithm::EtcdMutex,
        &[FaultProfile::Pause],
        Params::default(),
        500,
    ));
    let mut careful = f.scenario.clone();
    careful.workload.check_before_access = true;
    let outcome = run(&careful);
    assert!(
        !outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::MutualExclusion),
        "{:?}\n{}",
        outcome.violations,
        careful.to_json()
    );
}

#[test]
fn a_careful_client_whose_access_is_delayed_in_the_network_still_writes_late() {
    // client-0's messages are delayed by 11 s from 7 s (for 1.5 s) while it holds the lock: its
    // keep-alives reach the member too late and the lease expires; its session was alive when it
    // checked `Session.Done()` and sent its exit, but the exit reaches the resource 11 s later,
    // inside the next holder's section (Kleppmann's delayed packet). Only fencing turns it away.
    let s = common::scenario_file("etcd-delayed-access-careful-client.json");
    assert!(s.workload.check_before_access);
    let outcome = run(&s);
    assert!(
        outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::MutualExclusion && v.clients[0] == "client-0"),
        "{:?}",
        outcome.violations
    );
}

/// `lessor.Renew`: a keep-alive that lands past its lease's TTL renews nothing, even before the
/// lessor's next look; the lease goes at that look and the next waiter enters. client-0 holds,
/// its lease last renewed at about 3.5 s (the Go client's send loop, every 500 ms, sends once a
/// third of the 10 s TTL has passed since the last answer), and is paused at 4 s for 9.6 s. On
/// waking (13.6 s) it sends a keep-alive at once: past the member's deadline (about 13.5 s, a TTL
/// after the renewal) and before the lessor's look (14 s, the member's clock pinned to phase 0).
/// The model once renewed it there (safe, and wrong: a real etcd refuses it,
/// `real/tests/etcd_conformance.rs`).
#[test]
fn a_keep_alive_past_the_ttl_renews_nothing_and_the_next_waiter_enters() {
    let s = common::scenario_file("etcd-keep-alive-past-the-ttl.json");
    let outcome = run(&s);
    let violation = outcome
        .violations
        .iter()
        .find(|v| v.kind == ViolationKind::MutualExclusion)
        .unwrap_or_else(|| panic!("{:?}", outcome.violations));
    assert_eq!(
        violation.clients,
        ["client-0", "client-1"],
        "{}",
        violation.story
    );
    // The lease went at the lessor's look after its deadline (14 s), not a TTL after the late
    // keep-alive.
    let expired = expiries(&outcome.history.entries);
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert!(
        (13_500.0..=14_000.5).contains(&expired[0]),
        "expired at {} ms",
        expired[0]
    );
    // Woken 100 ms sooner, its keep-alive lands in time and renews the lease: the lateness is
    // what lost it.
    let mut sooner = s.clone();
    for fault in &mut sooner.faults {
        if let Fault::Pause { node, for_ms, .. } = fault {
            if node == "client-0" {
                *for_ms -= 100;
            }
        }
    }
    assert!(run(&sooner).violations.is_empty());
}

/// A lease ends one TTL after its last renewal, at the lessor's next check (every 500 ms of the
/// member's clock), never later: with a 2 s lease the Go client's send loop (every 500 ms)
/// renews once a third of it has passed since the last answer, so a holder paused at 3 s was
/// last renewed at about 2 s, and its key goes between 4 s and 5.5 s. The same for every phase
/// of the lessor's loop. (Mutation check: a lease renewed for two TTLs ends after 6 s and fails
/// this.)
#[test]
fn a_lease_ends_one_ttl_after_its_last_renewal() {
    use lockcheck_core::scenario::ServerClocks;
    for phase in [0, 125, 250, 375] {
        let mut s = Scenario::new(Algorithm::EtcdMutex);
        s.params.etcd.lease_ttl_s = Some(2);
        s.clients = 2;
        s.workload.acquisitions_per_client = 1;
        s.workload.hold_ms = 10_000;
        s.duration_ms = 30_000;
        s.server_clocks = ServerClocks::Pinned([("etcd-0".to_string(), phase)].into());
        s.faults = vec![
            Fault::Pause {
                at_ms: 0,
                node: "client-1".into(),
                for_ms: 300,
            },
            Fault::Pause {
                at_ms: 3_000,
                node: "client-0".into(),
                for_ms: 10_000,
            },
        ];
        s.validate().unwrap();
        let outcome = run(&s);
        let ended = expiries(&outcome.history.entries);
        assert_eq!(ended.len(), 1, "phase {phase}: {ended:?}");
        assert!(
            (4_000.0..=5_500.0).contains(&ended[0]),
            "phase {phase}: the holder's lease ended at {} ms",
            ended[0]
        );
    }
}

/// The 3.4 Go client's `Mutex.Lock` returns once the keys created before its own are gone,
/// without reading its own key; the 3.5 client reads it and fails with `ErrSessionExpired` when
/// it is gone (`params.variant`). client-1 waits behind client-0 and is paused for 4.5 s, past
/// its 2 s lease: its key goes with the lease. client-0 releases and takes the lock again (first
/// in line now); client-1 wakes, finds client-0's first key deleted and, as the 3.4 client, takes
/// the lock beside it. The 3.5 client waits its turn. `real/tests/etcd_servers.rs` tells the
/// same file to a real etcd, and `expectations/known-results.toml` pins both.
#[test]
fn the_3_4_client_takes_a_lock_its_lapsed_lease_lost_the_3_5_client_does_not() {
    let path = format!(
        "{}/tests/scenarios/etcd-waiter-whose-lease-ran-out.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let story = Scenario::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let with = |variant: &str| {
        let mut s = story.clone();
        s.params.variant = Some(variant.to_string());
        s.validate().unwrap();
        run(&s)
    };
    let old = with("etcd-3.4");
    let two = old
        .violations
        .iter()
        .find(|v| v.kind == ViolationKind::MutualExclusion)
        .unwrap_or_else(|| panic!("{:#?}", old.violations));
    assert_eq!(two.clients, ["client-0", "client-1"]);
    // client-1's key ended with its lease before it took the lock.
    assert!(!expiries(&old.history.entries).is_empty());
    let new = with("etcd-3.5");
    assert!(new.violations.is_empty(), "{:#?}", new.violations);
    // The default is the current client.
    assert!(run(&story).violations.is_empty());
}

/// etcd 3.4's lessor finds candidates in a heap keyed by the wall clock (`expiry.UnixNano()`):
/// a dead holder's lease, whose TTL runs out on the monotonic clock, is revoked only once the
/// member's wall clock reaches the heap time too. The member's wall clock stepped back 20 s
/// after the holder died delays the revocation, and so the next waiter, by those 20 s; a step
/// forward revokes nothing early. A liveness story, not a safety one.
#[test]
fn a_wall_clock_stepped_back_on_the_member_delays_a_dead_holders_revocation() {
    let mut s = Scenario::new(Algorithm::EtcdMutex);
    s.clients = 2;
    s.workload.acquisitions_per_client = 1;
    s.workload.hold_ms = 5_000;
    s.duration_ms = 60_000;
    // client-0 takes the lock first (client-1 starts 300 ms late) and dies holding it.
    s.faults = vec![
        Fault::Pause {
            at_ms: 0,
            node: "client-1".into(),
            for_ms: 300,
        },
        Fault::Crash {
            at_ms: 1_000,
            node: "client-0".into(),
            scope: Default::default(),
        },
    ];
    let plain = run(&s);
    assert!(!plain.violated(), "{:?}", plain.violations);
    let revoked = expiries(&plain.history.entries);
    assert_eq!(revoked.len(), 1, "the dead holder's lease is revoked once");
    for (by_ms, later) in [(-20_000, 20_000.0), (20_000, 0.0)] {
        let mut stepped = s.clone();
        stepped.faults.push(Fault::ClockJump {
            at_ms: 2_000,
            node: "etcd-0".into(),
            by_ms,
        });
        let outcome = run(&stepped);
        assert!(!outcome.violated(), "{:?}", outcome.violations);
        let at = expiries(&outcome.history.entries);
        assert_eq!(at.len(), 1, "stepped {by_ms} ms: {at:?}");
        let delay = at[0] - revoked[0];
        // A step forward may cost up to the lessor's 3 s retry, never revoke before the TTL.
        let slack = if by_ms > 0 { 3_000.0 } else { 500.0 };
        assert!(
            delay >= later - 500.0 && delay <= later + slack,
            "stepped {by_ms} ms: revoked {delay} ms after the unstepped run's revocation"
        );
    }
}
