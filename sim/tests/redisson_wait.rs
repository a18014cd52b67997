//! How a Redisson waiter waits (issue 20, item 5): on the lock's pub/sub channel, woken by the
//! holder's release, for at most the PTTL its last attempt read. The simulated Redis delivers a
//! `PUBLISH` to the connections subscribed at that moment and keeps nothing for the others, so
//! a wake-up published while a waiter's subscription is gone is lost, and the waiter sits out
//! its PTTL on a lock that is free. Scenario files are under `tests/scenarios/`.

mod common;

use common::scenario_file;
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Entry, Kind, Op};
use lockcheck_core::scenario::{CrashScope, Fault};
use lockcheck_sim::run;

/// When (true ms) `client`'s first operation matching `op` reached `kind`.
fn first(entries: &[Entry], client: &str, kind: Kind, op: fn(&Op) -> bool) -> u64 {
    entries
        .iter()
        .find(|e| e.node == client && e.kind == kind && op(&e.op))
        .map(|e| e.true_ns / 1_000_000)
        .unwrap_or_else(|| panic!("{client} never completed the operation"))
}

/// (When the holder sent its release, when the waiter had acquired), in ms of true time.
fn hand_over(entries: &[Entry]) -> (u64, u64) {
    let holder = entries
        .iter()
        .find(|e| e.kind == Kind::Ok && matches!(e.op, Op::Acquire { .. }))
        .map(|e| e.node.clone())
        .expect("someone acquires");
    let waiter = if holder == "client-0" {
        "client-1"
    } else {
        "client-0"
    };
    let released = first(entries, &holder, Kind::Invoke, |op| {
        matches!(op, Op::Release { .. })
    });
    let acquired = first(entries, waiter, Kind::Ok, |op| {
        matches!(op, Op::Acquire { .. })
    });
    (released, acquired)
}

/// Story: client-0 holds for 3 s under Redisson's 30 s watchdog lease; client-1 waits. The
/// release publishes the unlock message, and client-1, subscribed to the channel, attempts
/// again as soon as it arrives: within a few message latencies, in every Redisson release.
#[test]
fn the_release_wakes_the_waiter_within_a_few_message_latencies() {
    for variant in lockcheck_core::Algorithm::RedisReentrant
        .description()
        .variant_names()
    {
        let mut s = scenario_file("redisson-wake-up.json");
        s.params.variant = Some(variant.into());
        let outcome = run(&s);
        let (released, acquired) = hand_over(&outcome.history.entries);
        assert!(
            released < acquired && acquired < released + 50,
            "{variant}: released at {released} ms, the waiter acquired at {acquired} ms"
        );
        assert_eq!(outcome.violations, vec![], "{variant}");
    }
}

/// Story: the same for Redisson's fair lock (`redis-fair`): each waiter waits on its own channel
/// (`redisson_lock__channel:{lock}:{owner}`), and the release publishes to the waiter at the
/// head of the queue, which attempts again as soon as the message arrives. Without the message
/// it would attempt again only when half its place-keeping deadline had passed (2.5 s).
#[test]
fn the_release_wakes_the_fair_locks_waiter_at_the_head_within_a_few_message_latencies() {
    let mut s = scenario_file("redisson-wake-up.json");
    s.algorithm = lockcheck_core::Algorithm::RedisFair;
    let outcome = run(&s);
    let (released, acquired) = hand_over(&outcome.history.entries);
    assert!(
        released < acquired && acquired < released + 50,
        "released at {released} ms, the waiter acquired at {acquired} ms"
    );
    assert_eq!(outcome.violations, vec![]);
}

/// Story: the fair lock's wake-up lost in the same silent machine restart. Its waiter does not
/// sit out the lock's PTTL as a reentrant lock's does: it attempts again at least twice per
/// place-keeping deadline (5 s) to keep its place, so the lost message costs it at most 2.5 s.
#[test]
fn a_fair_waiter_whose_wake_up_is_lost_attempts_again_within_half_its_queue_timeout() {
    let mut s = scenario_file("redisson-wake-up-lost-in-a-machine-restart.json");
    s.algorithm = lockcheck_core::Algorithm::RedisFair;
    let outcome = run(&s);
    let (released, acquired) = hand_over(&outcome.history.entries);
    assert!(
        (11_000..14_000).contains(&released),
        "released at {released} ms"
    );
    assert!(
        released + 50 < acquired && acquired <= released + 2_500,
        "the waiter acquired at {acquired} ms, released at {released} ms"
    );
    assert_eq!(outcome.violations, vec![]);
}

/// Story: the server's machine restarts at 1 s (the lock survives: `appendfsync always`).
/// A machine that dies says nothing to its clients: client-1's subscription, made before,
/// is gone from the new process without client-1 knowing. client-0 releases at about 12 s
/// and the unlock message reaches nobody: client-1 sits out the PTTL it read at about 0 s
/// (the 30 s lease) and takes the lock at about 30 s, 18 s after it was free. The wait is
/// Redisson's bound by design (one lease), under the stuck check's (two): nothing is reported,
/// and the history shows the lost wake-up.
#[test]
fn a_wake_up_published_after_a_silent_server_restart_is_lost_and_costs_the_waiter_its_pttl() {
    let s = scenario_file("redisson-wake-up-lost-in-a-machine-restart.json");
    let outcome = run(&s);
    let (released, acquired) = hand_over(&outcome.history.entries);
    assert!(
        (11_000..14_000).contains(&released),
        "released at {released} ms"
    );
    assert!(
        (29_000..31_000).contains(&acquired),
        "the waiter acquired at {acquired} ms, released at {released} ms"
    );
    assert_eq!(outcome.violations, vec![]);
    // The same restart said by the process dying (its kernel resets the connections): the
    // waiter hears it, subscribes again at once, and is woken by the release.
    let mut process = s.clone();
    if let Fault::Crash { scope, .. } = &mut process.faults[0] {
        *scope = CrashScope::Process;
    }
    let (released, acquired) = hand_over(&run(&process).history.entries);
    assert!(
        released < acquired && acquired < released + 50,
        "process restart: released at {released} ms, the waiter acquired at {acquired} ms"
    );
}

/// The stuck check reports a lost wake-up only past its bound (twice the lease): with the
/// lease's bound halved, the same history is STUCK. The check sees the lost wake-up; Redisson's
/// PTTL bound is what keeps it under the line.
#[test]
fn the_lost_wake_up_is_what_the_stuck_check_measures() {
    let s = scenario_file("redisson-wake-up-lost-in-a-machine-restart.json");
    let outcome = run(&s);
    let mut liveness = lockcheck_core::checker::Liveness::of(&s);
    liveness.stuck_after_ns = 10_000_000_000;
    let stuck = lockcheck_core::checker::stuck(&outcome.history.entries, &liveness);
    assert_eq!(
        stuck.iter().map(|v| v.kind).collect::<Vec<_>>(),
        [ViolationKind::Stuck]
    );
}
