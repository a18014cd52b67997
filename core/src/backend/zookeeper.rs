//! ZooKeeper: its parameter group (`params.zookeeper`), the rules a ZooKeeper lock's scenario
//! follows, its session as the lease, its timing constants, and its servers' names (`zk-0`, or
//! an ensemble's members `zk-0..zk-{n-1}`).

use super::{Common, Module};
use crate::persistence::Persistence;
use crate::registry::Algorithm;
use lockcheck_algorithms::describe::Lease;
use serde::{Deserialize, Serialize};

/// The session timeout a client asks for when a scenario gives none.
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 10_000;

/// The tick used when none is configured. `zoo_sample.cfg`, the official Docker image and the
/// admin guide's examples all run `tickTime=2000`; the Java constant `DEFAULT_TICK_TIME` (3000)
/// only applies to an embedded server built without a config, which is not what users run.
pub const DEFAULT_TICK_TIME_MS: u64 = 2000;

/// An ensemble member's `syncLimit`, in ticks: how long a follower waits for its leader (and a
/// leader for a quorum of followers) before it gives up and goes back to an election. Both
/// worlds use it, so a leader paused for less than `SYNC_LIMIT_TICKS × tickTime` comes back as
/// the leader in both; 5 is `zoo_sample.cfg`'s value.
pub const SYNC_LIMIT_TICKS: u64 = 5;

/// An ensemble member's `initLimit`, in ticks: how long a follower may take to connect to and
/// sync with its leader (`zoo_sample.cfg`'s 10).
pub const INIT_LIMIT_TICKS: u64 = 10;

/// The member whose origin every member of a ZooKeeper ensemble shares
/// ([`crate::server_clock`]): the simulated ensemble keeps its sessions in one tree on one clock.
pub const ENSEMBLE_CLOCK: &str = "zk-0";

/// `params.zookeeper`: settings of the ZooKeeper sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZooKeeperParams {
    /// The session timeout the client asks for (default 10000); the lock dies with the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_timeout_ms: Option<u64>,
    /// Treat a disconnected session as a lost lock at once, rather than as a suspended one that a
    /// reconnection may give back (Curator's advice for the cautious; default false). Only a
    /// client that checks its lock (`workload.check_before_access`) acts on either.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspended_is_lost: bool,
}

impl ZooKeeperParams {
    /// The session timeout, or its default.
    pub fn session_timeout_ms(&self) -> u64 {
        self.session_timeout_ms
            .unwrap_or(DEFAULT_SESSION_TIMEOUT_MS)
    }
}

/// The ZooKeeper backend, as [`Module`] asks.
pub struct ZooKeeper;

impl Module for ZooKeeper {
    const NAME: &'static str = "zookeeper";
    const SERVER_PREFIX: &'static str = "zk";
    // A ZooKeeper server logs every transaction before it answers.
    const PERSISTENCE: Persistence = Persistence::Always;
    type Params = ZooKeeperParams;

    fn check_ranges(z: &ZooKeeperParams) -> Result<(), String> {
        if let Some(ms) = z.session_timeout_ms {
            crate::limits::positive_ms("params.zookeeper.session_timeout_ms", ms)?;
        }
        Ok(())
    }

    // One standalone server (1, the default) or an ensemble of `zk-0..zk-{n-1}`.
    fn check_nodes(_name: &str, n: u32) -> Result<(), String> {
        super::check_odd(
            n,
            &format!("an ensemble of {n} ZooKeeper servers"),
            "a standalone server",
        )
    }

    fn check_server_settings(z: &ZooKeeperParams, common: &Common) -> Result<(), String> {
        super::logs_first(common, "a ZooKeeper server logs every transaction")?;
        let session = z.session_timeout_ms();
        if !(4_000..=40_000).contains(&session) {
            return Err(format!(
                "params.zookeeper.session_timeout_ms must be within 4000..=40000 (2 to 20 \
                 ticks of 2000 ms, what a server with the default tickTime accepts), got \
                 {session}"
            ));
        }
        Ok(())
    }

    fn server_lease_ms(lease: Lease, z: &ZooKeeperParams) -> Option<u64> {
        (lease == Lease::Session).then(|| z.session_timeout_ms())
    }

    fn thresholds(z: &ZooKeeperParams, _: Algorithm, servers: u64, add: &mut dyn FnMut(&str, u64)) {
        let session = z.session_timeout_ms();
        let tick = DEFAULT_TICK_TIME_MS;
        add("session timeout + tick", session + tick);
        add(
            "client's disconnect (2/3 of the session timeout)",
            session * 2 / 3,
        );
        if servers > 1 {
            add("syncLimit", SYNC_LIMIT_TICKS * tick);
        }
    }
}
