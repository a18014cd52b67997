//! Idle simulated time is free (#15 item 2): clients that hear nothing from their servers back
//! off, so an outage of hours costs attempts in proportion to its length divided by the longest
//! backoff, not by the retry delay. (Before the backoff, a 10 h pause of the MySQL server cost
//! 308,060 attempts, 6.6 s and 771 MB for one run.)

use lockcheck_algorithms::retry::MAX_BACKOFF;
use lockcheck_core::history::Entry;
use lockcheck_core::scenario::{Fault, Scenario};
use lockcheck_core::topology::Role;
use lockcheck_core::workload::max_retry_delay;
use lockcheck_core::Algorithm;

const HOUR_MS: u64 = 3_600_000;
const PAUSE_MS: u64 = 10 * HOUR_MS;

/// `algorithm` with 3 clients, every server paused for 10 hours from 1 s on, and a workload
/// that keeps asking for the whole time.
fn outage(algorithm: Algorithm, ttl_ms: Option<u64>) -> Scenario {
    let mut s = Scenario::new(algorithm);
    s.clients = 3;
    s.duration_ms = PAUSE_MS + HOUR_MS;
    s.params.ttl_ms = ttl_ms;
    let topology = s.topology();
    s.faults = topology
        .with_role(Role::Server)
        .into_iter()
        .map(|server| Fault::Pause {
            at_ms: 1_000,
            node: topology.name(server).to_string(),
            for_ms: PAUSE_MS,
        })
        .collect();
    s
}

fn attempts(scenario: &Scenario) -> u64 {
    let outcome = lockcheck_sim::run(scenario);
    // A fold of refusals counts as the attempts it stands for.
    outcome.history.entries.iter().map(Entry::attempts).sum()
}

#[test]
fn a_ten_hour_server_pause_costs_attempts_by_the_backoff_not_by_the_retry_delay() {
    for (algorithm, ttl_ms) in [
        (Algorithm::MysqlForUpdateHeld, None),
        (Algorithm::MysqlRow, Some(HOUR_MS)),
        (Algorithm::SingleRedis, Some(HOUR_MS)),
        (Algorithm::RedisReentrant, Some(HOUR_MS)),
        (Algorithm::Redlock, Some(HOUR_MS)),
    ] {
        let scenario = outage(algorithm, ttl_ms);
        let cap = max_retry_delay(&scenario);
        assert_eq!(
            cap, MAX_BACKOFF,
            "{algorithm:?}: a lease of an hour allows the full backoff"
        );
        // A backed-off wait is at least half the cap; allow a few hundred attempts for the
        // doubling up to it and for the rest of the run.
        let bound = scenario.clients as u64 * (PAUSE_MS / (cap.as_millis() as u64 / 2) + 300);
        let without_backoff = scenario.clients as u64 * PAUSE_MS / scenario.params.retry_delay_ms;
        let made = attempts(&scenario);
        assert!(
            made <= bound,
            "{algorithm:?}: {made} attempts through a 10 h pause, more than {bound} \
             (retrying every retry delay would make about {without_backoff})"
        );
        assert!(made > 0, "{algorithm:?}: the clients never asked");
    }
}

#[test]
fn the_backoff_is_at_most_half_the_lease_so_a_waiter_does_not_sit_out_a_free_lock() {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(4_000);
    assert_eq!(max_retry_delay(&s).as_millis(), 2_000);
    // Never below the retry delay.
    s.params.ttl_ms = Some(100);
    s.params.retry_delay_ms = 200;
    assert_eq!(max_retry_delay(&s).as_millis(), 200);
    // MariaDB's 8 h wait_timeout is the transaction-held lock's lease: the full 30 s.
    let held = Scenario::new(Algorithm::MysqlForUpdateHeld);
    assert_eq!(max_retry_delay(&held), MAX_BACKOFF);
}
