//! `redis-server`: its command line from the scenario's persistence, ready on `PONG`.
//!
//! Each server also reads a config file of its own (`redis.conf` in its directory, empty at
//! first), as a production server does: Sentinel reconfigures the servers it watches with
//! `REPLICAOF` followed by `CONFIG REWRITE`, and a server started without a config file refuses
//! the rewrite and forgets its role at its next restart. With the file, a killed replica comes
//! back a replica, and a demoted primary comes back as what Sentinel made it.

use super::ServerKind;
use lockcheck_core::scenario::Persistence;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Redis server binary looked for on PATH.
pub const REDIS_SERVER: &str = "redis-server";
/// How to install it.
pub const REDIS_INSTALL: &str = "apt-get install redis-server";

/// A `redis-server` with the scenario's persistence: `none` is `--save "" --appendonly no`;
/// `everysec`/`always` are `--appendonly yes --appendfsync …`. Ready when it answers `PING` with
/// `PONG` (a server still loading its append-only file answers `-LOADING`). A full resync starts
/// at once (`repl-diskless-sync-delay 0`): Redis's default waits 5 s for more replicas to join,
/// longer than a real run's short leases.
pub struct Redis {
    /// What the server persists.
    pub persistence: Persistence,
}

impl ServerKind for Redis {
    fn binary(&self) -> &'static str {
        REDIS_SERVER
    }

    fn install(&self) -> &'static str {
        REDIS_INSTALL
    }

    /// An empty config file: what `CONFIG REWRITE` writes the server's replication settings to.
    fn prepare(&self, dir: &Path, _port: u16) -> Result<(), String> {
        let file = dir.join(CONFIG_FILE);
        std::fs::write(&file, "").map_err(|e| format!("{}: {e}", file.display()))
    }

    fn command(&self, dir: &Path, port: u16) -> Command {
        let mut command = Command::new(REDIS_SERVER);
        // The file first: the command line's settings win over what a rewrite put there (they
        // are the same values; the port may have moved before the first start).
        command
            .arg(dir.join(CONFIG_FILE))
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .args(["--save", ""])
            .args(["--repl-diskless-sync-delay", "0"]);
        match self.persistence {
            Persistence::None => command.args(["--appendonly", "no"]),
            Persistence::Everysec => {
                command.args(["--appendonly", "yes", "--appendfsync", "everysec"])
            }
            Persistence::Always => command.args(["--appendonly", "yes", "--appendfsync", "always"]),
        };
        command
    }

    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>> {
        Box::pin(ping(addr))
    }

    fn logs(&self) -> &'static [&'static str] {
        &["redis.log"]
    }
}

/// The config file in each server's directory.
pub const CONFIG_FILE: &str = "redis.conf";

/// Whether the server at `addr` answers `PING` with `PONG` within a short while.
pub async fn ping(addr: SocketAddr) -> bool {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
        let mut reply = [0u8; 64];
        let mut read = 0;
        while read < 7 {
            let n = stream.read(&mut reply[read..]).await?;
            if n == 0 {
                break;
            }
            read += n;
        }
        Ok::<bool, std::io::Error>(reply[..read].starts_with(b"+PONG"))
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), exchange).await,
        Ok(Ok(true))
    )
}
