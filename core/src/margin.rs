//! Margins: how far a story's fault spans stand from the thresholds that decide its verdict.
//!
//! A simulated run is exact to the nanosecond; a real run is not (a process takes a few ms to
//! start, a proxy to relay, a JVM to collect). A story whose verdict hinges on a pause 30 ms
//! longer or shorter than a session timeout gives one verdict in the simulation and either
//! verdict on a real machine, and a disagreement about it says nothing about the model. So a
//! story used to compare the two worlds keeps every fault span (a pause, a partition, an extra
//! delay, a clock step) at least a margin away from every threshold the servers and clients of
//! its algorithm decide by:
//!
//! - the lease: a Redis TTL, a ZooKeeper session timeout, an etcd lease TTL, MariaDB's
//!   `wait_timeout` (and `innodb_lock_wait_timeout`);
//! - the lease plus the server's own check interval, the latest a silent holder's lease ends: a
//!   ZooKeeper tick (`tickTime`, 2 s), etcd's lessor loop (500 ms);
//! - a ZooKeeper client's own deadlines: two thirds of the session timeout (it calls the
//!   connection lost), and in an ensemble `syncLimit` ticks (a member gives up on its leader);
//! - the renewal interval of a lock that renews (a Redis watchdog, an etcd keep-alive): a third
//!   of the lease.
//!
//! The rule, as docs/real-mode.md states it: a span is *within margin* when it is closer than
//! `margin_ms` to one of these. [`closest`] names the nearest such pair, so a story that is
//! within margin can be drawn again or reported apart, with the reason.

use crate::backend::BackendExt;
use crate::scenario::{Algorithm, Fault, Scenario};

/// The default margin, in ms: well above what a loopback machine adds to a span (a few ms for a
/// signal or a relay, tens for a busy JVM) and well below the shortest lease real mode runs (2 s).
pub const DEFAULT_MARGIN_MS: u64 = 250;

pub use crate::backend::etcd::ETCD_LESSOR_LOOP_MS;

/// A time a verdict may turn on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Threshold {
    /// What it is, for people: "session timeout", "session timeout + tick".
    pub name: String,
    /// Its length in ms.
    pub ms: u64,
}

/// A fault span close to a threshold: why a story is within margin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closeness {
    /// The fault's index in the scenario.
    pub fault: usize,
    /// What span of it: "pause", "partition", "delay", "clock step".
    pub span: &'static str,
    /// The span's length in ms.
    pub span_ms: u64,
    /// The threshold it is close to.
    pub threshold: Threshold,
}

impl Closeness {
    /// One line for people: "faults[0]'s pause of 4100 ms is 100 ms from the session timeout
    /// (4000 ms)".
    pub fn describe(&self) -> String {
        format!(
            "faults[{}]'s {} of {} ms is {} ms from the {} ({} ms)",
            self.fault,
            self.span,
            self.span_ms,
            self.span_ms.abs_diff(self.threshold.ms),
            self.threshold.name,
            self.threshold.ms
        )
    }
}

/// The thresholds `scenario`'s verdict may turn on, shortest first, each once.
pub fn thresholds(scenario: &Scenario) -> Vec<Threshold> {
    let algorithm: Algorithm = scenario.algorithm;
    let params = &scenario.params;
    let mut out: Vec<Threshold> = Vec::new();
    let mut add = |name: &str, ms: u64| {
        if ms > 0 && !out.iter().any(|t| t.ms == ms) {
            out.push(Threshold {
                name: name.to_string(),
                ms,
            });
        }
    };
    if let Some((name, lease)) = algorithm.lease_named(params) {
        add(name, lease);
        if params.watchdog {
            add("renewal interval (a third of the lease)", lease / 3);
        }
    }
    let servers = scenario
        .topology()
        .with_role(crate::topology::Role::Server)
        .len() as u64;
    // The backend's own thresholds: a ZooKeeper tick and syncLimit, etcd's lessor loop, …
    algorithm
        .backend()
        .thresholds(params, algorithm, servers, &mut add);
    out.sort_by_key(|t| t.ms);
    out
}

/// The spans of `fault` a threshold can decide, named.
fn spans(fault: &Fault) -> Vec<(&'static str, u64)> {
    match fault {
        Fault::Pause { for_ms, .. } => vec![("pause", *for_ms)],
        Fault::Partition { for_ms, .. } => vec![("partition", *for_ms)],
        Fault::Delay {
            extra_ms, for_ms, ..
        } => vec![("extra delay", *extra_ms), ("delay's span", *for_ms)],
        Fault::Loss { for_ms, .. } => vec![("loss's span", *for_ms)],
        Fault::ClockJump { by_ms, .. } => vec![("clock step", by_ms.unsigned_abs())],
        Fault::ClockDrift { .. }
        | Fault::Crash { .. }
        | Fault::Restart { .. }
        | Fault::Failover { .. } => Vec::new(),
    }
}

/// The fault span of `scenario` nearest to one of its [`thresholds`], when it is closer than
/// `margin_ms`; `None` when every span keeps the margin (or `margin_ms` is 0).
pub fn closest(scenario: &Scenario, margin_ms: u64) -> Option<Closeness> {
    let thresholds = thresholds(scenario);
    let mut best: Option<Closeness> = None;
    for (i, fault) in scenario.faults.iter().enumerate() {
        for (span, span_ms) in spans(fault) {
            for t in &thresholds {
                let distance = span_ms.abs_diff(t.ms);
                if distance >= margin_ms {
                    continue;
                }
                let closer = best
                    .as_ref()
                    .is_none_or(|b| distance < b.span_ms.abs_diff(b.threshold.ms));
                if closer {
                    best = Some(Closeness {
                        fault: i,
                        span,
                        span_ms,
                        threshold: t.clone(),
                    });
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(for_ms: u64) -> Fault {
        Fault::Pause {
            at_ms: 100,
            node: "client-0".into(),
            for_ms,
        }
    }

    #[test]
    fn a_zookeeper_lock_turns_on_its_session_its_tick_and_its_clients_disconnect() {
        let mut s = Scenario::new(Algorithm::ZkSequential);
        s.params.zookeeper.session_timeout_ms = Some(6_000);
        let ms: Vec<u64> = thresholds(&s).iter().map(|t| t.ms).collect();
        assert_eq!(ms, vec![4_000, 6_000, 8_000]);
        s.params.nodes = Some(3);
        let ms: Vec<u64> = thresholds(&s).iter().map(|t| t.ms).collect();
        assert_eq!(
            ms,
            vec![4_000, 6_000, 8_000, 10_000],
            "syncLimit in an ensemble"
        );
    }

    #[test]
    fn an_etcd_lock_turns_on_its_lease_its_lessor_loop_and_its_keep_alives() {
        let mut s = Scenario::new(Algorithm::EtcdMutex);
        s.params.etcd.lease_ttl_s = Some(3);
        let ms: Vec<u64> = thresholds(&s).iter().map(|t| t.ms).collect();
        assert_eq!(ms, vec![1_000, 3_000, 3_500]);
    }

    #[test]
    fn a_span_closer_than_the_margin_is_named_with_its_threshold() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.params.ttl_ms = Some(2_000);
        s.faults = vec![pause(1_000), pause(2_100)];
        let near = closest(&s, 250).expect("2100 is 100 ms from the TTL");
        assert_eq!(
            (near.fault, near.span_ms, near.threshold.ms),
            (1, 2_100, 2_000)
        );
        assert!(
            near.describe().contains("100 ms from the TTL"),
            "{}",
            near.describe()
        );
        assert_eq!(closest(&s, 100), None, "100 ms away keeps a 100 ms margin");
        assert_eq!(closest(&s, 0), None, "no margin");
        s.faults = vec![pause(2_300)];
        assert_eq!(closest(&s, 250), None);
    }

    #[test]
    fn a_clock_step_back_is_measured_by_its_size() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.params.ttl_ms = Some(2_000);
        s.faults = vec![Fault::ClockJump {
            at_ms: 0,
            node: "redis-0".into(),
            by_ms: -1_900,
        }];
        assert_eq!(closest(&s, 250).map(|c| c.span), Some("clock step"));
    }
}
