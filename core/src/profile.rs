//! Fault profiles: the families of faults a search draws from, named alike in both worlds (the
//! simulation's generator and real mode's fault stories).

use serde::{Deserialize, Serialize};

/// A family of faults to search over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultProfile {
    /// No faults: the algorithm on a good day.
    None,
    /// GC-like pauses of clients and servers.
    Pause,
    /// Wall-clock steps, forwards and backwards.
    ClockJump,
    /// Clocks running fast or slow (by up to `max_drift`, ±5 % by default).
    ClockDrift,
    /// Crash and immediate restart, of a server or a client, its machine (unsynced writes
    /// lost, peers learn by timeouts) or its process (kill -9: nothing written is lost, its
    /// sockets close at once).
    CrashRestart,
    /// Crash and restart no sooner than one TTL later (seed 002's remedy); the same crashes.
    CrashDelayedRestart,
    /// Network partitions: a group against everyone else, or clients against the lock service
    /// only (the resource still reachable); messages across the cut lost, or held and
    /// delivered at the heal as TCP does.
    Partition,
    /// Extra latency on one node's messages (Kleppmann's delayed packet: a write sent while the
    /// lock was held arrives after its lease).
    Delay,
    /// The primary crashes and a replica is promoted (needs `params.redis.replicas` ≥ 1).
    Failover,
    /// All of the above, mixed.
    All,
}

impl FaultProfile {
    /// Every profile.
    pub const ALL: &'static [FaultProfile] = &[
        FaultProfile::None,
        FaultProfile::Pause,
        FaultProfile::ClockJump,
        FaultProfile::ClockDrift,
        FaultProfile::CrashRestart,
        FaultProfile::CrashDelayedRestart,
        FaultProfile::Partition,
        FaultProfile::Delay,
        FaultProfile::Failover,
        FaultProfile::All,
    ];

    /// The user-facing name.
    pub fn name(self) -> &'static str {
        match self {
            FaultProfile::None => "none",
            FaultProfile::Pause => "pause",
            FaultProfile::ClockJump => "clock-jump",
            FaultProfile::ClockDrift => "clock-drift",
            FaultProfile::CrashRestart => "crash-restart",
            FaultProfile::CrashDelayedRestart => "crash-delayed-restart",
            FaultProfile::Partition => "partition",
            FaultProfile::Delay => "delay",
            FaultProfile::Failover => "failover",
            FaultProfile::All => "all",
        }
    }

    /// Parses a comma-separated list of profile names.
    pub fn parse_list(text: &str) -> Result<Vec<FaultProfile>, String> {
        let mut out = Vec::new();
        for name in text.split(',').map(str::trim) {
            let profile = Self::ALL
                .iter()
                .copied()
                .find(|p| p.name() == name)
                .ok_or_else(|| {
                    let known: Vec<&str> = Self::ALL.iter().map(|p| p.name()).collect();
                    format!(
                        "unknown fault profile '{}' (known: {})",
                        crate::input::clip(name),
                        known.join(", ")
                    )
                })?;
            if !out.contains(&profile) {
                out.push(profile);
            }
        }
        Ok(out)
    }
}

/// The default largest drift of the `clock-drift` profile: five times Redlock's drift factor.
pub const DEFAULT_MAX_DRIFT: f64 = 0.05;
