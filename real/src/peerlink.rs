//! Every member-to-member connection of an ensemble through the proxy of its link.
//!
//! An ensemble member dials its peers at the addresses its configuration names, which
//! [`crate::ensemble`] points at per-link proxies. ZooKeeper's election also dials an address it
//! learns at run time (a member answers an election connection from a lower id by connecting
//! back to the address that member advertises, its own listening port), and that connection
//! went around every proxy: a partition of the members let their election messages through, and
//! a member cut off from the others still voted with them (a real run elected it again, with
//! its uncommitted session closes, while the simulation of the same story said no leader could).
//! `peerlink/peerlink.c`, preloaded into each member, rewrites such a connection's destination
//! to the member's proxy for that peer.

use crate::error::RealError;
use std::ffi::OsString;
use std::path::PathBuf;

/// The library's source.
pub const SOURCE: &str = include_str!("../peerlink/peerlink.c");
/// The variable that gives the library its rewrites.
pub const PORTS_VAR: &str = "LOCKCHECK_PEER_PORTS";

/// The library, built on first use and checked each time it is asked for, before a member
/// loads it ([`crate::preload::build`]).
pub fn library() -> Result<PathBuf, RealError> {
    crate::preload::build("peerlink", SOURCE).map_err(RealError::PeerLink)
}

/// The environment of a member whose connections to a peer's real port `from` are to go to its
/// proxy's port `to`, for each `(from, to)` of `rewrites`.
pub fn env(library: PathBuf, rewrites: &[(u16, u16)]) -> Vec<(OsString, OsString)> {
    let ports = rewrites
        .iter()
        .map(|(from, to)| format!("{from}>{to}"))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        ("LD_PRELOAD".into(), library.into()),
        (PORTS_VAR.into(), ports.into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;
    use std::process::Command;

    /// A process with the library connects to a port it was told to rewrite and reaches the
    /// rewrite's target instead; a port not in the list is dialled as given.
    #[test]
    fn a_rewritten_port_is_dialled_at_its_proxy_and_others_as_given() {
        let target = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        // A port nobody listens on: without the rewrite, the connection is refused.
        let dead = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (to, plain) = (
            target.local_addr().unwrap().port(),
            other.local_addr().unwrap().port(),
        );
        let lib = library().unwrap();
        for (port, listener, says) in [(dead, &target, "proxied"), (plain, &other, "plain")] {
            // bash's /dev/tcp connects with connect(2) through libc, as a JVM does.
            let mut child = Command::new("bash")
                .arg("-c")
                .arg(format!("echo {says} > /dev/tcp/127.0.0.1/{port}"))
                .envs(env(lib.clone(), &[(dead, to)]))
                .spawn()
                .unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            let mut text = String::new();
            conn.read_to_string(&mut text).unwrap();
            assert_eq!(text.trim(), says);
            assert!(child.wait().unwrap().success());
        }
    }
}
