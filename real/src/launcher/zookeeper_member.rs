//! A member of a ZooKeeper ensemble from Debian's `zookeeper` package: `java` running
//! `QuorumPeerMain` on a `zoo.cfg` that lists every member (`server.N=host:peer:election`) and a
//! `myid` file in its data dir, ready once `srvr` reports a `Mode:` (which a member says only
//! while it is in a quorum: `leader` or `follower`).
//!
//! Each member has a view of its own: its own `server.N` line names the ports it listens on, and
//! every other member's line names this member's proxies to that member
//! (`crate::ensemble`), so that a partition of members is a cut proxy, as a client's is.

use super::zookeeper::{ZooKeeper, LOG_FILE};
use super::ServerKind;
use lockcheck_core::scenario::{INIT_LIMIT_TICKS, SYNC_LIMIT_TICKS};
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::time::Duration;

/// The class the JVM runs for an ensemble member.
pub const QUORUM_MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// Where one member reaches another (or, for itself, where it listens): its quorum (peer) port,
/// which followers connect to the leader on, and its leader-election port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerPorts {
    /// The port followers talk to the leader on.
    pub quorum: u16,
    /// The port leader election runs on.
    pub election: u16,
}

/// One member of an ensemble.
pub struct ZooKeeperMember {
    /// What every member shares with a standalone server: the tick and the session timeout.
    pub server: ZooKeeper,
    /// Its `myid`: its place in the ensemble, from 1 (`zk-0` is 1). ZooKeeper's election
    /// prefers, among members with the same history, the highest id.
    pub myid: u32,
    /// Its view of the ensemble, by `myid - 1`: its own ports, and for every other member the
    /// ports of its proxies to that member.
    pub view: Vec<PeerPorts>,
}

impl ZooKeeperMember {
    /// The lines of `zoo.cfg` that make the server a member of this ensemble.
    fn ensemble_config(&self) -> String {
        let mut lines = format!(
            "initLimit={INIT_LIMIT_TICKS}\n\
             syncLimit={SYNC_LIMIT_TICKS}\n\
             # A static ensemble: no dynamic reconfiguration (no split configuration file).\n\
             reconfigEnabled=false\n"
        );
        for (i, ports) in self.view.iter().enumerate() {
            lines.push_str(&format!(
                "server.{}=127.0.0.1:{}:{}\n",
                i + 1,
                ports.quorum,
                ports.election
            ));
        }
        lines
    }
}

impl ServerKind for ZooKeeperMember {
    fn binary(&self) -> &'static str {
        self.server.binary()
    }

    fn install(&self) -> &'static str {
        self.server.install()
    }

    /// The JVM's command line names the quorum peer's main class.
    fn process_marker(&self) -> &'static str {
        QUORUM_MAIN_CLASS
    }

    fn installed(&self) -> bool {
        self.server.installed()
    }

    fn prepare(&self, dir: &Path, port: u16) -> Result<(), String> {
        self.server
            .write_config(dir, port, &self.ensemble_config())?;
        super::zookeeper::write(&dir.join("data").join("myid"), &format!("{}\n", self.myid))
    }

    /// `zoo.cfg` names the client port: written again. The peer ports do not move (the other
    /// members' proxies lead to them).
    fn port_moved(&self, dir: &Path, port: u16) -> Result<(), String> {
        self.prepare(dir, port)
    }

    fn command(&self, dir: &Path, _port: u16) -> Command {
        ZooKeeper::java(dir, QUORUM_MAIN_CLASS)
    }

    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>> {
        self.server.ready(addr)
    }

    fn logs(&self) -> &'static [&'static str] {
        &[LOG_FILE]
    }

    /// A JVM start, an election and a sync with the leader (`initLimit` ticks at most).
    fn ready_within(&self) -> Duration {
        Duration::from_secs(30).max(Duration::from_millis(
            2 * INIT_LIMIT_TICKS * self.server.tick_time_ms,
        ))
    }
}
