//! redlock as the implementations people run (issue 20): the reference algorithm of the Redis
//! distributed-lock page (the default), node-redlock 4.2.0 and go-redsync v4
//! (`params.variant`). Each story is a scenario file under `tests/scenarios/`;
//! `lockcheck run FILE --variant NAME` tells it for any implementation.

mod common;

use common::scenario_file;
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::scenario::Fault;
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_sim::run;

/// Every variant of redlock, the default (the reference) first.
const VARIANTS: [&str; 3] = ["reference", "node-redlock", "redsync"];

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

/// When client-0 was first told it holds the lock, in ms of true time.
fn first_grant_ms(s: &Scenario) -> u64 {
    run(s)
        .history
        .entries
        .iter()
        .find(|e| e.node == "client-0" && e.kind == Kind::Ok && matches!(e.op, Op::Acquire { .. }))
        .map(|e| e.true_ns / 1_000_000)
        .expect("client-0 acquires at some point")
}

#[test]
fn the_variants_are_the_ones_the_description_lists_the_reference_first() {
    let d = Algorithm::Redlock.description();
    assert_eq!(d.variant_names(), VARIANTS);
    assert_eq!(d.variant(None).map(|v| v.name), Some("reference"));
    let mut s = Scenario::new(Algorithm::Redlock);
    s.params.variant = Some("redlock-rb".into());
    let e = s.validate().unwrap_err().to_string();
    assert!(
        e.contains("redlock-rb") && VARIANTS.iter().all(|v| e.contains(v)),
        "{e}"
    );
}

/// Story: client-1 is cut off for the first second, so client-0 asks alone. Its SETs leave at
/// about 3 ms and a majority grants them, but client-0 is frozen at 4 ms for 10.5 s, past the
/// 10 s TTL. Meanwhile the leases run out and client-1 takes the lock (at about 10 s, for 2 s).
/// At 5 s, during the pause, client-0's wall clock is stepped back 5 s (an NTP step, an
/// operator). When client-0 resumes, 10.5 s have passed on its monotonic clock but 5.5 s on its
/// wall clock: node-redlock, which times the attempt with `Date.now()`, finds 4.4 s of validity
/// left and hands out a lock whose leases ran out 0.5 s ago; client-0 enters beside client-1.
/// The reference and redsync time it on the monotonic clock and refuse it.
#[test]
fn a_client_clock_stepped_back_during_the_attempt_fools_node_redlock_only() {
    let file = "redlock-client-clock-steps-back.json";
    assert_eq!(
        kinds(&as_variant(file, "node-redlock")),
        [ViolationKind::MutualExclusion]
    );
    for variant in ["reference", "redsync"] {
        let s = as_variant(file, variant);
        assert_eq!(kinds(&s), [], "{variant}");
        assert!(
            first_grant_ms(&s) > 10_504,
            "{variant}: the lock asked for before the pause is never handed out"
        );
    }
    // The file itself tells the node-redlock story.
    assert_eq!(
        scenario_file(file).params.variant.as_deref(),
        Some("node-redlock")
    );
}

/// The same hole without a pause, as a real run can tell it (`real/tests/clients.rs` runs this
/// file with node-redlock itself). client-0 takes the lock once without faults (which also
/// loads the scripts on the servers, as a real client's first `EVALSHA` does), then asks again
/// at about 2.5 s while its SETs and their replies are each held up 2.5 s (the keys are set at
/// about 5 s and expire at 7 s; the replies arrive at 7.5 s), and its wall clock is stepped
/// back 5 s meanwhile; client-1 is cut off (its messages held) until 8 s. node-redlock finds
/// that the attempt took no time by `Date.now()` and hands client-0 a lock whose keys are gone;
/// client-1, refused once (its own attempt took 8 s), takes the lock again at once and both are
/// inside. The reference and redsync find 5 s > the 2 s TTL and refuse; and without the step
/// node-redlock refuses too.
#[test]
fn slow_replies_and_a_clock_stepped_back_fool_node_redlock_only() {
    let file = "redlock-client-clock-steps-back-slow-replies.json";
    assert_eq!(
        kinds(&as_variant(file, "node-redlock")),
        [ViolationKind::MutualExclusion]
    );
    for variant in ["reference", "redsync"] {
        assert_eq!(kinds(&as_variant(file, variant)), [], "{variant}");
    }
    for variant in VARIANTS {
        let mut s = as_variant(file, variant);
        s.faults.retain(|f| !matches!(f, Fault::ClockJump { .. }));
        assert_eq!(kinds(&s), [], "without the step, {variant}");
    }
}

/// Without the clock step, the same pause is refused by every implementation: node-redlock
/// 4.2.0 does check the validity after the quorum answered (`lock.expiration > Date.now()`),
/// and a pause moves the wall clock as far as the monotonic one. (Issue 20 said node-redlock
/// hands the lock out without that check: its 5.0 betas do, 4.2.0, the `latest`, does not.)
#[test]
fn a_pause_before_the_acquisition_completes_is_refused_by_every_implementation() {
    for variant in VARIANTS {
        let mut s = as_variant("redlock-client-clock-steps-back.json", variant);
        s.faults.retain(|f| !matches!(f, Fault::ClockJump { .. }));
        assert_eq!(kinds(&s), [], "{variant}");
        assert!(first_grant_ms(&s) > 10_504, "{variant}");
    }
}
