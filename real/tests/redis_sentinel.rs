//! A Redis primary with two replicas under a real Sentinel: the failover story
//! (`real --faults failover`) against real servers, each run checked against the simulation of
//! the same scenario. The replicas lag by a real delay on their replication links; the primary
//! is killed before they can have the first holder's key; Sentinel promotes `redis-1`.
//! Only verdicts are asserted, never timings.
//!
//! Without `redis-server` on PATH these tests print one line saying how to install it and pass,
//! except under CI (`CI=true`), where they fail.

use lockcheck_core::history::Op;
use lockcheck_core::scenario::{Algorithm, Persistence};
use lockcheck_real::launcher::{Redis, REDIS_SERVER};
use lockcheck_real::profile::{self, Profile, Shape};
use lockcheck_real::RealRun;

mod common;

use common::{assert_safe, assert_two_holders_including, entered, one_at_a_time};

fn servers_installed() -> bool {
    common::installed(&Redis {
        persistence: Persistence::None,
    })
}

/// The failover story with two clients, with `WAIT` for `wait_replicas` replicas (0: none).
fn failover_story(wait_replicas: u32) -> lockcheck_core::Scenario {
    let shape = Shape {
        clients: 2,
        ..Shape::for_story(Algorithm::SingleRedis, Profile::Failover)
    };
    let mut s = profile::scenario(Algorithm::SingleRedis, Profile::Failover, &shape).unwrap();
    s.params.redis.wait_replicas = wait_replicas;
    profile::fit_story(Profile::Failover, &mut s);
    s.validate().unwrap();
    s
}

/// Whether the run's history records Sentinel's promotion of `node`.
fn promoted(real: &RealRun, node: &str) -> bool {
    real.outcome
        .history
        .entries
        .iter()
        .any(|e| e.node == node && matches!(&e.op, Op::Nemesis { kind, .. } if kind == "failover"))
}

#[test]
fn a_sentinel_failover_before_replication_gives_two_holders_as_in_the_simulation() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let real = common::run_real(&failover_story(0), REDIS_SERVER);
    assert!(promoted(&real, "redis-1"), "Sentinel promoted redis-1");
    // Three servers and their Sentinel, all started and stopped.
    assert_eq!(real.server_pids.len(), 4, "{:?}", real.server_pids);
    assert_two_holders_including(&real, "client-0");
    assert_eq!(entered(&real)[..2], ["client-0", "client-1"]);
}

#[test]
fn waiting_for_a_replica_keeps_a_sentinel_failover_safe_as_in_the_simulation() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let real = common::run_real(&failover_story(1), REDIS_SERVER);
    assert!(promoted(&real, "redis-1"), "Sentinel promoted redis-1");
    assert_safe(&real);
    // Both clients did their work, on the new primary, one after the other.
    assert_eq!(entered(&real).len(), 2, "{:#?}", real.outcome.history);
}

/// The old primary comes back (empty, no persistence) after the failover: Sentinel makes it a
/// replica of the new primary, as the simulation's comes back a replica, and clients go on with
/// the new primary. The first failover's two holders are the only violation in both worlds, and
/// every later section is done.
#[test]
fn an_old_primary_that_comes_back_is_demoted_and_the_story_is_the_same() {
    if !servers_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = failover_story(0);
    s.workload.acquisitions_per_client = 2;
    // Long enough that Sentinel's failover (its own detection and election: 3.6 s once, on a
    // loaded machine) comes while client-0 is still inside, as the simulation's at 200 ms does.
    s.workload.hold_ms = 6_000;
    s.faults.push(lockcheck_core::scenario::Fault::Restart {
        at_ms: 2_500,
        node: "redis-0".into(),
    });
    s.validate().unwrap();
    let real = common::run_real(&s, REDIS_SERVER);
    assert!(promoted(&real, "redis-1"), "Sentinel promoted redis-1");
    assert_eq!(real.server_pids.len(), 5, "redis-0 restarted once");
    assert_two_holders_including(&real, "client-0");
    assert_eq!(entered(&real).len(), 4, "{:#?}", real.outcome.history);
}
