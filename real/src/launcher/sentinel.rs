//! Redis Sentinel: `redis-server sentinel.conf --sentinel`, the same binary as the servers (Debian's
//! `redis-sentinel` package only adds a service and a link to it), ready on `PONG`.
//!
//! Sentinel insists on a config file it can rewrite (it saves what it learns: the replicas, the
//! epochs, a failover's new primary). Lockcheck writes one with the port, the address and the
//! log into the Sentinel's own directory; what it watches is told at run time
//! (`SENTINEL MONITOR`, see [`crate::replication`]), once the servers' proxies are known.

use super::redis::{ping, REDIS_INSTALL, REDIS_SERVER};
use super::ServerKind;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;

/// Sentinel's config file, in its directory.
pub const SENTINEL_CONFIG: &str = "sentinel.conf";

/// A Redis Sentinel process (no master watched until told).
pub struct Sentinel;

impl Sentinel {
    /// The config file's text for a Sentinel on `port` keeping its files in `dir`.
    fn config(dir: &Path, port: u16) -> String {
        format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir \"{}\"\nlogfile \"{}\"\n",
            dir.display(),
            dir.join("sentinel.log").display()
        )
    }

    fn write(dir: &Path, port: u16) -> Result<(), String> {
        let file = dir.join(SENTINEL_CONFIG);
        std::fs::write(&file, Self::config(dir, port))
            .map_err(|e| format!("{}: {e}", file.display()))
    }
}

impl ServerKind for Sentinel {
    fn binary(&self) -> &'static str {
        REDIS_SERVER
    }

    fn install(&self) -> &'static str {
        REDIS_INSTALL
    }

    fn prepare(&self, dir: &Path, port: u16) -> Result<(), String> {
        Self::write(dir, port)
    }

    /// Nothing has been learnt before the first start: the file is written again.
    fn port_moved(&self, dir: &Path, port: u16) -> Result<(), String> {
        Self::write(dir, port)
    }

    fn command(&self, dir: &Path, _port: u16) -> Command {
        let mut command = Command::new(REDIS_SERVER);
        command.arg(dir.join(SENTINEL_CONFIG)).arg("--sentinel");
        command
    }

    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>> {
        Box::pin(ping(addr))
    }

    fn logs(&self) -> &'static [&'static str] {
        &["sentinel.log"]
    }
}
