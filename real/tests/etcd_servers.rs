//! `etcd-mutex` against a real etcd (Debian's `etcd-server`, started by lockcheck itself), each
//! test a story with the verdict it must reach, which is also the simulation's verdict for the
//! same scenario (every run is checked against it). Only verdicts are asserted, never timings:
//! the stories are timed from the session lease's TTL with the lessor's 500 ms and margins.
//!
//! Without etcd these tests print one line saying how to install it and pass, except under CI
//! (`CI=true`), where they fail: CI must install it.

mod common;

use common::{assert_safe, assert_two_holders_including, one_at_a_time, sections};
use lockcheck_core::scenario::{Algorithm, Scenario};
use lockcheck_real::launcher::Etcd;
use lockcheck_real::profile::{self, Profile, Shape};
use lockcheck_real::RealRun;

/// The session lease of every story: the shortest etcd grants, so that a story takes seconds.
const TTL_MS: u64 = 2_000;

fn installed() -> bool {
    common::installed(&Etcd)
}

fn run_real(scenario: &Scenario) -> RealRun {
    common::run_real(scenario, "etcd")
}

fn shape(clients: u32) -> Shape {
    Shape {
        clients,
        ttl_ms: TTL_MS,
        ..Shape::for_algorithm(Algorithm::EtcdMutex)
    }
}

#[test]
fn three_clients_without_faults_never_share_etcd_mutex() {
    if !installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::EtcdMutex, Profile::None, &shape(3)).unwrap();
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
fn a_holder_paused_past_its_lease_breaks_etcd_mutex_as_in_the_simulation() {
    if !installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::EtcdMutex, Profile::Pause, &shape(2)).unwrap();
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
}

#[test]
fn the_create_revision_fences_the_paused_etcd_holder_at_the_real_resource() {
    if !installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = profile::scenario(Algorithm::EtcdMutex, Profile::Pause, &shape(2)).unwrap();
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
fn a_holder_cut_off_past_its_lease_through_the_proxy_breaks_etcd_mutex() {
    if !installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::EtcdMutex, Profile::Partition, &shape(2)).unwrap();
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
}

#[test]
fn a_clock_fault_on_the_etcd_member_is_refused_with_the_reason() {
    // Whatever is installed: the refusal comes before anything starts.
    let s = profile::scenario(Algorithm::EtcdMutex, Profile::ClockJump, &shape(3)).unwrap();
    let Err(e) = lockcheck_real::run(&s) else {
        panic!("a clock jump on etcd-0 was carried out")
    };
    let e = e.to_string();
    assert!(e.contains("vDSO"), "{e}");
}

/// `sim/tests/scenarios/etcd-waiter-whose-lease-ran-out.json` against a real etcd, as each
/// version of the Go client's `Mutex.Lock` (`params.variant`): client-1 waits behind client-0
/// and is paused past its 2 s lease, which etcd revokes with client-1's key; client-0 releases
/// and takes the lock again. The 3.4 client's `Lock` returns on waking without reading its own
/// key, and client-1 enters beside client-0; the 3.5 client reads it, finds it gone and waits.
/// The same verdicts as the simulation's (every real run is checked against it).
#[test]
fn the_3_4_client_takes_a_lock_its_lapsed_lease_lost_the_3_5_client_does_not() {
    if !installed() {
        return;
    }
    let _serial = one_at_a_time();
    let story = common::sim_scenario("etcd-waiter-whose-lease-ran-out.json");
    let with = |variant: &str| {
        let mut s = story.clone();
        s.params.variant = Some(variant.to_string());
        s.validate().unwrap();
        run_real(&s)
    };
    assert_two_holders_including(&with("etcd-3.4"), "client-1");
    assert_safe(&with("etcd-3.5"));
}
