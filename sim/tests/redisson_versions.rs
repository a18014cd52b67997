//! redis-reentrant as the Redisson releases people run (issue 20): the same lock, the client
//! around its scripts as each release range behaves (`params.variant`). Each story is a scenario
//! file under `tests/scenarios/`; `lockcheck run FILE --variant NAME` tells it for any range.

mod common;

use common::scenario_file;
use common::search::{find, nothing_found, options};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Params;
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_search::explore::ExploreOptions;
use lockcheck_sim::run;

/// Every variant of redis-reentrant, the default (the current release) first.
const VARIANTS: [&str; 10] = [
    "redisson-3.52+",
    "redisson-3.51",
    "redisson-3.47",
    "redisson-3.46",
    "redisson-3.43",
    "redisson-3.36",
    "redisson-3.24",
    "redisson-3.23",
    "redisson-3.19",
    "redisson-3.16",
];

/// The ranges with the unlock latch (3.24 and later): the first seven.
const WITH_LATCH: usize = 7;

/// The ranges whose watchdog renews again after a failed renewal (3.44 and later): the first
/// four.
const RESCHEDULING: usize = 4;

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

#[test]
fn the_variants_are_the_ones_the_description_lists_the_current_release_first() {
    let d = Algorithm::RedisReentrant.description();
    assert_eq!(d.variant_names(), VARIANTS);
    assert_eq!(d.variant(None).map(|v| v.name), Some(VARIANTS[0]));
    let mut s = Scenario::new(Algorithm::RedisReentrant);
    s.params.variant = Some("redisson-3.0".into());
    let e = s.validate().unwrap_err().to_string();
    assert!(
        e.contains("redisson-3.0") && VARIANTS.iter().all(|v| e.contains(v)),
        "{e}"
    );
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.variant = Some("redisson-3.23".into());
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("single-redis has no library variants"), "{e}");
    // The default's name before 3.44–3.51 were told apart still names the current release.
    let mut s = Scenario::new(Algorithm::RedisReentrant);
    s.params.variant = Some("redisson-3.44+".into());
    s.validate().unwrap();
    assert_eq!(
        d.variant(Some("redisson-3.44+")).map(|v| v.name),
        Some(VARIANTS[0])
    );
}

/// Story (Redisson issue #4871): client-0 holds the lock two levels deep (count 2). At 1.5 s
/// every message to or from the server starts taking 1.6 s longer, for 4 s. client-0's inner
/// unlock (at about 2 s) arrives and takes the count to 1, but its reply comes back after
/// Redisson's 3 s `timeout`: to the client, a lost reply. Redisson ≤ 3.23 sends the unlock again
/// 1.5 s later; it applies again, the count drops to 0 and the lock is deleted while client-0
/// still holds it one level deep (and so do 3.10–3.19, which re-send the same way). 3.24–3.36
/// send the same unlock under a request id whose latch answers the re-send without applying it;
/// 3.37 and later do not re-send a single server's unlock at all.
#[test]
fn a_resent_inner_unlock_frees_the_lock_under_its_holder_up_to_redisson_3_23() {
    let file = "redisson-resent-inner-unlock.json";
    let old = as_variant(file, "redisson-3.23");
    let outcome = run(&old);
    let freed: Vec<_> = outcome
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::FreedWhileHeld)
        .collect();
    assert_eq!(freed.len(), 1, "{:?}", outcome.violations);
    assert_eq!(
        freed[0].clients,
        ["client-0"],
        "the seed makes client-0 the holder"
    );
    // The count went 1, 2 (nested), then 1 and 0: the one inner unlock applied twice.
    let counts = common::counts(&outcome.history.entries, "client-0");
    assert_eq!(
        counts[..4],
        [Some(1), Some(2), Some(1), Some(0)],
        "{counts:?}"
    );
    for variant in &VARIANTS[..WITH_LATCH] {
        let s = as_variant(file, variant);
        assert_eq!(kinds(&s), [], "{variant}");
    }
    for variant in &VARIANTS[WITH_LATCH..] {
        let s = as_variant(file, variant);
        assert!(
            kinds(&s).contains(&ViolationKind::FreedWhileHeld),
            "{variant}"
        );
    }
}

/// The same story, as the behaviour of 3.24–3.36 (the range that re-sends its unlock under
/// the latch): the inner unlock is sent twice, and applied once. The count goes 1, 2, 1 and
/// stays at 1 while client-0 works on one level deep; it reaches 0 only with the outer unlock,
/// and nobody else is let in meanwhile. (Mutation check: an unlock without the latch in this
/// range applies the re-send and frees the lock under its holder.)
#[test]
fn a_resent_unlock_under_the_latch_applies_once_from_redisson_3_24() {
    let s = as_variant("redisson-resent-inner-unlock.json", "redisson-3.36");
    let outcome = run(&s);
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    // 1, 2 (nested), 1 (the inner unlock, once), then the outer unlock's 0 and delete.
    let counts = common::counts(&outcome.history.entries, "client-0");
    assert_eq!(
        counts,
        [Some(1), Some(2), Some(1), Some(0), None],
        "{counts:?}"
    );
}

/// Story: Redisson's default watchdog lease (30 s, renewed every 10 s); client-0 holds the lock
/// and works for 75 s, 2.5 leases. From 9 s to 28 s every message to or from the server takes
/// 1.6 s longer: the renewal at 10 s and its three re-sends all arrive (each extends the lease)
/// but every reply comes back after the 3 s timeout, so the renewal fails. Redisson ≤ 3.43 logs
/// it and stops renewing: the lease runs out at about 55 s under a holder that works until 75 s,
/// and client-1 enters beside it. 3.44 and later renew again at the next tick, after the delay.
#[test]
fn a_watchdog_that_stops_after_one_failed_renewal_lets_the_lease_run_out_up_to_redisson_3_43() {
    let file = "redisson-watchdog-failed-renewal.json";
    for variant in &VARIANTS[RESCHEDULING..] {
        let s = as_variant(file, variant);
        assert_eq!(kinds(&s), [ViolationKind::MutualExclusion], "{variant}");
    }
    for variant in &VARIANTS[..RESCHEDULING] {
        let s = as_variant(file, variant);
        assert_eq!(kinds(&s), [], "{variant}");
    }
    // The file itself names the newest range that stops.
    assert_eq!(
        scenario_file(file).params.variant.as_deref(),
        Some("redisson-3.43")
    );
}

/// With no faults, the scenario files are safe in every variant: what breaks them is the lost
/// reply alone.
#[test]
fn without_the_slow_messages_every_variant_is_safe() {
    for file in [
        "redisson-resent-inner-unlock.json",
        "redisson-watchdog-failed-renewal.json",
    ] {
        for variant in VARIANTS {
            let mut s = as_variant(file, variant);
            s.faults.clear();
            assert_eq!(kinds(&s), [], "{file} as {variant}");
        }
    }
}

/// Late replies found by the search: a client timeout shorter than some round trips (10 ms,
/// where messages take 1–10 ms each way) makes every late reply a lost one, with no fault at
/// all. Redisson ≤ 3.23 then frees nested locks under their holders; the current release,
/// which sends its unlock once, is safe.
#[test]
fn the_search_finds_the_resent_unlock_with_late_replies_only_up_to_redisson_3_23() {
    let params = |variant: &str| Params {
        variant: Some(variant.into()),
        request_timeout_ms: 10,
        ..Params::default()
    };
    // Safety only: a client that re-sends its acquire can count itself in twice and leave the
    // lock to its lease (a liveness matter, reported as STUCK), in any range that re-sends.
    let search = |variant: &str| ExploreOptions {
        safety_only: true,
        ..options(
            Algorithm::RedisReentrant,
            &[FaultProfile::None],
            params(variant),
            300,
        )
    };
    let found = find(&search("redisson-3.23"));
    assert!(
        found
            .outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::FreedWhileHeld),
        "{:?}",
        found.outcome.violations
    );
    nothing_found(&search("redisson-3.52+"));
}

/// The watchdog's failure policy found by the search, with the same late replies: the holders
/// the search draws with a watchdog work up to three leases. Redisson 3.37–3.43 (whose unlock
/// is never re-sent) stop renewing after one renewal whose replies all came late, and the lease
/// runs out under a holder; 3.44 and later renew at the next tick.
#[test]
fn the_search_finds_the_watchdog_that_gives_up_only_up_to_redisson_3_43() {
    let search = |variant: &str| ExploreOptions {
        safety_only: true,
        ..options(
            Algorithm::RedisReentrant,
            &[FaultProfile::None],
            Params {
                variant: Some(variant.into()),
                watchdog: true,
                request_timeout_ms: 10,
                ..Params::default()
            },
            300,
        )
    };
    let found = find(&search("redisson-3.43"));
    assert!(
        found
            .outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::MutualExclusion),
        "{:?}",
        found.outcome.violations
    );
    nothing_found(&search("redisson-3.52+"));
}
