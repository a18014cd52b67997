//! A single-member etcd from Debian's `etcd-server` package, ready once its client port answers
//! `GET /health` with `{"health":"true"}`.

use super::ServerKind;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The server binary.
pub const ETCD: &str = "etcd";
/// How to install it.
pub const ETCD_INSTALL: &str = "apt-get install etcd-server";
/// The server's log, in its directory.
const LOG_FILE: &str = "etcd.log";

/// One etcd member, a cluster of its own.
///
/// Its peer URL is a unix socket in its directory (`unix://localhost:2380`, which etcd creates
/// as the file `localhost:2380` in its working directory), so it takes no second TCP port. It
/// keeps its data in `data/` of its directory: a crash and a restart there keep every write it
/// acknowledged (etcd fsyncs its write-ahead log first) and its leases, each renewed for a full
/// TTL when the restarted member becomes leader again.
pub struct Etcd;

impl ServerKind for Etcd {
    fn binary(&self) -> &'static str {
        ETCD
    }

    fn install(&self) -> &'static str {
        ETCD_INSTALL
    }

    fn command(&self, dir: &Path, port: u16) -> Command {
        let peer = "unix://localhost:2380";
        let urls = PeerUrls {
            listen: peer,
            advertised: peer,
        };
        command(dir, port, "member", urls, &format!("member={peer}"))
    }

    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>> {
        Box::pin(healthy(addr))
    }

    fn logs(&self) -> &'static [&'static str] {
        &[LOG_FILE]
    }
}

/// One member of an etcd cluster of several (`crate::etcd_cluster`): it listens for its peers
/// on a loopback port of its own, and advertises another, its front door's
/// ([`crate::peer_proxy`]), which every member's `--initial-cluster` names; it keeps its data in
/// `data/` of its directory as a lone member does.
///
/// The two ports differ so that every connection a member's peers make to it goes through the
/// cluster's proxies, where a partition between two members can be cut: a member's id is
/// derived from the peer URLs the initial cluster names, so each member must name the others
/// alike, at one address each, and etcd (Go) dials through raw system calls that the peer-link
/// preload cannot redirect.
pub struct EtcdMember {
    /// Its name in the cluster (`etcd-0`, …).
    pub name: String,
    /// The port it listens on for its peers (`--listen-peer-urls`), which only its front door
    /// dials.
    pub peer_port: u16,
    /// The port its peers reach it at (`--initial-advertise-peer-urls`): its front door's.
    pub advertised_peer_port: u16,
    /// `--initial-cluster`: `name=http://127.0.0.1:ADVERTISED_PEER_PORT` of every member,
    /// comma-separated.
    pub initial_cluster: String,
}

impl ServerKind for EtcdMember {
    fn binary(&self) -> &'static str {
        ETCD
    }

    fn install(&self) -> &'static str {
        ETCD_INSTALL
    }

    fn command(&self, dir: &Path, port: u16) -> Command {
        let listen = format!("http://127.0.0.1:{}", self.peer_port);
        let advertised = format!("http://127.0.0.1:{}", self.advertised_peer_port);
        let peer = PeerUrls {
            listen: &listen,
            advertised: &advertised,
        };
        command(dir, port, &self.name, peer, &self.initial_cluster)
    }

    /// Healthy: the member has a leader, which takes a quorum of members started.
    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>> {
        Box::pin(healthy(addr))
    }

    fn logs(&self) -> &'static [&'static str] {
        &[LOG_FILE]
    }
}

/// Where a member listens for its peers, and where it tells them it is.
struct PeerUrls<'a> {
    listen: &'a str,
    advertised: &'a str,
}

/// etcd as member `name` of the cluster `initial_cluster` (`name=PEER_URL,…`), serving clients on
/// loopback `port` and its peers as `peer` says, with its data and log in `dir`.
fn command(dir: &Path, port: u16, name: &str, peer: PeerUrls, initial_cluster: &str) -> Command {
    let client = format!("http://127.0.0.1:{port}");
    let mut command = Command::new(ETCD);
    command
        .current_dir(dir)
        .arg("--name")
        .arg(name)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--listen-client-urls")
        .arg(&client)
        .arg("--advertise-client-urls")
        .arg(&client)
        .arg("--listen-peer-urls")
        .arg(peer.listen)
        .arg("--initial-advertise-peer-urls")
        .arg(peer.advertised)
        .arg("--initial-cluster")
        .arg(initial_cluster)
        .arg("--log-outputs")
        .arg(dir.join(LOG_FILE))
        .arg("--logger")
        .arg("zap");
    command
}

/// Whether the member at `addr` says it is healthy (it has a leader: itself).
pub async fn healthy(addr: SocketAddr) -> bool {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: etcd\r\nConnection: close\r\n\r\n")
            .await?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await?;
        Ok::<bool, std::io::Error>(String::from_utf8_lossy(&reply).contains(r#""health":"true""#))
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), exchange).await,
        Ok(Ok(true))
    )
}
