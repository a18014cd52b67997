//! redis-reentrant with replicas (issue 39, item 8), as each Redisson release range behaves: from
//! 3.12.5 every acquire, unlock and renewal goes out in a batch followed by `WAIT <replicas>
//! 1000`, and what a `WAIT` that counted no replica comes to changed between releases
//! (`reentrant::NoSync`). Each story is a scenario file under `tests/scenarios/`; `lockcheck run
//! FILE --variant NAME` tells it for any range.

mod common;

use common::{counts, scenario_file};
use lockcheck_algorithms::redis::reentrant::NO_SYNC;
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Entry, KeyChange, Kind, Op};
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_sim::run;

/// Every variant of redis-reentrant, the default (the current release) first.
fn variants() -> Vec<&'static str> {
    Algorithm::RedisReentrant.description().variant_names()
}

/// The scenario file `name` as variant `variant` tells it.
fn as_variant(name: &str, variant: &str) -> Scenario {
    let mut s = scenario_file(name);
    s.params.variant = Some(variant.into());
    s.validate().unwrap();
    s
}

fn kinds(s: &Scenario) -> Vec<ViolationKind> {
    run(s).violations.iter().map(|v| v.kind).collect()
}

/// The variants whose run of `file` finds a violation, checking that each of them finds one of
/// `kind` and that the others find none at all.
fn unsafe_in(file: &str, kind: ViolationKind) -> Vec<&'static str> {
    let mut found = Vec::new();
    for variant in variants() {
        let seen = kinds(&as_variant(file, variant));
        if seen.is_empty() {
            continue;
        }
        assert!(seen.contains(&kind), "{file} as {variant}: {seen:?}");
        found.push(variant);
    }
    found
}

/// The acquisitions `client` was told failed because no replica synced.
fn failed_unsynced(history: &[Entry], client: &str) -> usize {
    history
        .iter()
        .filter(|e| e.node == client && e.kind == Kind::Fail)
        .filter(|e| matches!(&e.op, Op::Acquire { error: Some(err), .. } if err.contains(NO_SYNC)))
        .count()
}

/// Story: one replica, cut off from the primary from the start (its replication link only:
/// clients reach both), Redisson's watchdog lease (30 s). The first holder's acquisition is
/// followed by `WAIT 1 1000`, which counts no replica. At 2 s the primary dies and the replica,
/// which never got the lock, is promoted at 2.1 s; the holder works until about 41 s. Up to
/// 3.16.6 the count is not read: the holder goes on, the lock is gone with the failover, and
/// the other client takes it on the new primary when the PTTL it read runs out (about 30 s):
/// two holders. From 3.16.7 the acquisition fails ("None of slaves were synced"): 3.16.7–3.19
/// and 3.25–3.46 leave the lock in Redis under a client told it failed, which, as the owner,
/// takes it again at its next attempt (its count at 2 while it believes 1); 3.20–3.24 and 3.47
/// and later release it first. Either way nobody works on a lock the failover lost.
#[test]
fn a_failover_loses_a_lock_no_replica_synced_only_up_to_redisson_3_16() {
    let file = "redisson-replica-failover-before-sync.json";
    assert_eq!(
        unsafe_in(file, ViolationKind::MutualExclusion),
        ["redisson-3.16"]
    );
    // The mechanisms, in the history: the first holder (client-1 by the seed) is told it
    // failed; 3.19 leaves the lock in place (its count goes on to 2 at the next attempt), 3.52+
    // takes it back at once (its count back to 0, the key deleted).
    let left = run(&as_variant(file, "redisson-3.19")).history.entries;
    assert!(failed_unsynced(&left, "client-1") >= 1);
    assert_eq!(counts(&left, "client-1")[..2], [Some(1), Some(2)]);
    let released = run(&as_variant(file, "redisson-3.52+")).history.entries;
    assert_eq!(counts(&released, "client-1")[..3], [Some(1), Some(0), None]);
    let ignored = run(&as_variant(file, "redisson-3.16")).history.entries;
    assert_eq!(failed_unsynced(&ignored, "client-1"), 0);
    // The file itself names the newest range that goes on.
    assert_eq!(
        scenario_file(file).params.variant.as_deref(),
        Some("redisson-3.16")
    );
}

/// Story: client-1 holds the lock two levels deep; one replica, in sync, until its link to the
/// primary is cut at 2 s for 1.5 s, as the holder's inner unlock goes out (at about 2.1 s). The
/// unlock applies (count 2 → 1) and its `WAIT` counts no replica. 3.20–3.24 and 3.47–3.51 retry
/// an unlock that failed so (`ServiceManager.execute`, 1.5 s or 1–2 s later, after the cut has
/// healed) under a new request id: 3.24's latch does not know it, and the retry applies again
/// (1 → 0): the lock is deleted under its holder, which still holds it one level deep (issue
/// #6651). 3.52 retries under the same id, which its latch answers; 3.16.7–3.19 and 3.25–3.46
/// do not retry (the unlock is reported failed, the count stays 1); up to 3.16.6 the count is
/// not read.
#[test]
fn an_unlock_no_replica_synced_is_retried_and_applies_twice_in_3_20_to_3_24_and_3_47_to_3_51() {
    let file = "redisson-replica-inner-unlock-not-synced.json";
    assert_eq!(
        unsafe_in(file, ViolationKind::FreedWhileHeld),
        [
            "redisson-3.51",
            "redisson-3.47",
            "redisson-3.24",
            "redisson-3.23"
        ]
    );
    // 3.19: the inner unlock is reported failed, the lock held at 1 until the outer unlock.
    let failed = run(&as_variant(file, "redisson-3.19")).history.entries;
    let release_failed = failed.iter().any(|e| {
        e.node == "client-1"
            && e.kind == Kind::Fail
            && matches!(&e.op, Op::Release { error: Some(err), .. } if err.contains(NO_SYNC))
    });
    assert!(release_failed);
    assert_eq!(
        counts(&failed, "client-1"),
        [Some(1), Some(2), Some(1), Some(0), None]
    );
    assert_eq!(
        scenario_file(file).params.variant.as_deref(),
        Some("redisson-3.51")
    );
}

/// Story: Redisson's watchdog lease (30 s, renewed every 10 s); client-1 holds and works for
/// 75 s. One replica, whose link to the primary is cut from 9 s to 11.5 s: the renewal at about
/// 10 s applies, and its `WAIT` counts no replica. From 3.16.7 that renewal failed; up to 3.43
/// the watchdog stops after a failed renewal, the lease runs out at about 40 s under a holder
/// that works on, and client-0 enters beside it. 3.44 and later renew again at the next tick;
/// up to 3.16.6 the count is not read.
#[test]
fn a_renewal_no_replica_synced_stops_the_watchdog_in_3_16_7_to_3_43() {
    let file = "redisson-replica-renewal-not-synced.json";
    assert_eq!(
        unsafe_in(file, ViolationKind::MutualExclusion),
        [
            "redisson-3.43",
            "redisson-3.36",
            "redisson-3.24",
            "redisson-3.23",
            "redisson-3.19"
        ]
    );
    // The renewals the holder's watchdog applies after the one the cut failed: none where it
    // stopped, the next ticks' where it goes on.
    let renewed_after = |variant: &str| {
        run(&as_variant(file, variant))
            .history
            .entries
            .iter()
            .filter(|e| e.true_ns > 12_000_000_000 && e.true_ns < 70_000_000_000)
            .filter(|e| {
                matches!(&e.op, Op::Key { change: KeyChange::ExpiryChanged, by: Some(b), .. }
                    if b == "client-1")
            })
            .count()
    };
    assert_eq!(renewed_after("redisson-3.43"), 0);
    assert!(renewed_after("redisson-3.46") >= 5);
    assert!(renewed_after("redisson-3.16") >= 5);
}

/// Story: client-1 holds the lock two levels deep; its outer acquisition synced the replica,
/// whose link to the primary is then cut (at 150 ms, for 5 s) before the nested one's write
/// reaches it. The nested acquisition's `WAIT` ends at about 1.1 s counting no replica, and its
/// reply is held up (messages to and from the primary take 0.8 s longer from 1 s); at 1.5 s
/// the replica, which holds the outer level only, is promoted. 3.20–3.24 and 3.47 and later
/// (`handleNoSync`) then undo the nested acquisition with the unlock script, which goes to the
/// new primary and takes away the outer level there: the lock is deleted under a holder that
/// still holds it (and taken again at its retry, as if it had never been freed). Up to 3.16.6
/// the nested acquisition counts (the holder believes two levels; the new primary has one, and
/// the inner unlock deletes it). 3.16.7–3.19 and 3.25–3.46 only fail the nested acquisition:
/// holder and new primary agree on one level.
#[test]
fn the_undo_of_an_acquisition_no_replica_synced_frees_the_outer_level_on_a_new_primary() {
    let file = "redisson-replica-undo-on-the-new-primary.json";
    assert_eq!(
        unsafe_in(file, ViolationKind::FreedWhileHeld),
        [
            "redisson-3.52+",
            "redisson-3.51",
            "redisson-3.47",
            "redisson-3.24",
            "redisson-3.23",
            "redisson-3.16"
        ]
    );
    // In the current release the deletion is the undo's, on the promoted replica, before the
    // holder released anything.
    let outcome = run(&scenario_file(file));
    let freed = &outcome.violations[0];
    assert_eq!(freed.kind, ViolationKind::FreedWhileHeld);
    assert!(freed.story.contains("on redis-1"), "{}", freed.story);
    let first_release = outcome
        .history
        .entries
        .iter()
        .find(|e| e.node == "client-1" && matches!(e.op, Op::Release { .. }))
        .map(|e| e.true_ns)
        .unwrap();
    assert!(freed.at_ns < first_release, "{}", freed.story);
    // The file names no variant: the current release.
    assert_eq!(scenario_file(file).params.variant, None);
}

/// Without their faults the stories are safe in every variant, and no `WAIT` fails to count
/// its replica: what breaks them is the replica cut off (or the failover), not the `WAIT`.
#[test]
fn without_the_faults_every_variant_is_safe_and_every_wait_counts_the_replica() {
    for file in [
        "redisson-replica-failover-before-sync.json",
        "redisson-replica-inner-unlock-not-synced.json",
        "redisson-replica-renewal-not-synced.json",
        "redisson-replica-undo-on-the-new-primary.json",
    ] {
        for variant in variants() {
            let mut s = as_variant(file, variant);
            s.faults.clear();
            let outcome = run(&s);
            assert!(outcome.violations.is_empty(), "{file} as {variant}");
            for client in ["client-0", "client-1"] {
                assert_eq!(
                    failed_unsynced(&outcome.history.entries, client),
                    0,
                    "{file} as {variant}"
                );
            }
        }
    }
}

/// 3.47 and 3.48–3.51 differ in timing only: a renewal whose replies all come late is re-sent 3
/// times, 4.5 s apart (3 s timeout + 1.5 s), by 3.47, and 4 times by 3.48 and later, after an
/// equal-jitter delay (3 s + 0.5–1 s, then 3 s + 1–2 s). The late-renewal story
/// (`redisson-watchdog-failed-renewal.json`: every message 1.6 s late from 9 s to 28 s) shows
/// it in the renewals that reach the server; both ranges renew again at the next tick, and both
/// are safe.
#[test]
fn redisson_3_48_resends_4_times_after_jittered_delays_where_3_47_resends_3_times_4_5_s_apart() {
    let file = "redisson-watchdog-failed-renewal.json";
    let applied = |variant: &str| -> Vec<u64> {
        run(&as_variant(file, variant))
            .history
            .entries
            .iter()
            .filter(|e| e.true_ns > 9_000_000_000 && e.true_ns < 30_000_000_000)
            .filter(|e| {
                matches!(&e.op, Op::Key { change: KeyChange::ExpiryChanged, by: Some(b), .. }
                    if b == "client-0")
            })
            .map(|e| e.true_ns / 1_000_000)
            .collect()
    };
    let gaps = |at: &[u64]| -> Vec<u64> { at.windows(2).map(|w| w[1] - w[0]).collect() };
    let fixed = applied("redisson-3.47");
    assert_eq!(fixed.len(), 4, "the renewal and 3 re-sends: {fixed:?}");
    assert!(
        gaps(&fixed).iter().all(|g| g.abs_diff(4_500) <= 25),
        "{fixed:?}"
    );
    let jittered = applied("redisson-3.51");
    assert_eq!(
        jittered.len(),
        5,
        "the renewal and 4 re-sends: {jittered:?}"
    );
    let gaps = gaps(&jittered);
    assert!((3_475..=4_025).contains(&gaps[0]), "{jittered:?}");
    assert!(
        gaps[1..].iter().all(|g| (3_975..=5_025).contains(g)),
        "{jittered:?}"
    );
    for variant in ["redisson-3.47", "redisson-3.51"] {
        assert_eq!(kinds(&as_variant(file, variant)), [], "{variant}");
    }
}
