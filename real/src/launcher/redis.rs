//! `redis-server`: its command line from the scenario's persistence, ready on `PONG`.

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
/// `PONG` (a server still loading its append-only file answers `-LOADING`).
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

    fn command(&self, dir: &Path, port: u16) -> Command {
        let mut command = Command::new(REDIS_SERVER);
        command
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .args(["--save", ""]);
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
