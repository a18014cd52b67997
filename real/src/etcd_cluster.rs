//! An etcd cluster on loopback: `n` members (`etcd-0`, …), each with its own client port, peer
//! port and data directory, every one named in every member's `--initial-cluster`.
//!
//! What it is for so far: pinning how a real cluster behaves (its leader, a leader's crash and
//! the election after it, what the new leader does to the leases) against which a simulated
//! cluster will be built (issue 38). Members reach each other directly (see
//! [`EtcdMember`]): a member's crash, restart and pause act on it, partitions between members do
//! not exist here yet.

use crate::error::RealError;
use crate::etcd_gateway::Connection;
use crate::launcher::{free_port, EtcdMember, Launcher};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::net::SocketAddr;

/// Starts a cluster of `members` with `launcher` (member `i` as launcher index `i`) and waits
/// until every member is healthy (has a leader): the members' client addresses.
pub async fn launch(
    members: usize,
    launcher: &RefCell<Launcher>,
) -> Result<Vec<SocketAddr>, RealError> {
    let names: Vec<String> = (0..members).map(|i| format!("etcd-{i}")).collect();
    let mut peer_ports = Vec::new();
    for name in &names {
        loop {
            let port = free_port().map_err(|e| RealError::Server {
                server: name.clone(),
                reason: format!("no free port: {e}"),
            })?;
            if !peer_ports.contains(&port) {
                peer_ports.push(port);
                break;
            }
        }
    }
    let initial_cluster = names
        .iter()
        .zip(&peer_ports)
        .map(|(name, port)| format!("{name}=http://127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    for (name, &peer_port) in names.iter().zip(&peer_ports) {
        let kind = EtcdMember {
            name: name.clone(),
            peer_port,
            initial_cluster: initial_cluster.clone(),
        };
        launcher
            .borrow_mut()
            .register(name, Box::new(kind), Vec::new())?;
    }
    // All at once: a member is healthy only once a quorum elected a leader.
    for i in 0..members {
        launcher.borrow_mut().start(i)?;
    }
    for i in 0..members {
        Launcher::until_ready(launcher, i).await?;
    }
    Ok((0..members).map(|i| launcher.borrow().addr(i)).collect())
}

/// What the member at `addr` says of itself (`/v3/maintenance/status`): its member id and the
/// id of the leader it knows (0: none), if it answers.
pub async fn status(addr: SocketAddr) -> Option<(u64, u64)> {
    let ask = async {
        let mut connection = Connection::open(addr).await.ok()?;
        let (code, answer) = connection
            .post("/v3/maintenance/status", &json!({}))
            .await
            .ok()?;
        if code != 200 {
            return None;
        }
        let id = |v: Option<&Value>| -> u64 {
            v.and_then(|v| v.as_str().and_then(|s| s.parse().ok()).or(v.as_u64()))
                .unwrap_or(0)
        };
        let member = id(answer.get("header").and_then(|h| h.get("member_id")));
        let leader = id(answer.get("leader"));
        Some((member, leader))
    };
    tokio::time::timeout(std::time::Duration::from_millis(500), ask)
        .await
        .ok()
        .flatten()
}

/// Which member leads now (server order), by asking each; `None` while no member that answers
/// says it leads.
pub async fn leader(members: &[SocketAddr]) -> Option<usize> {
    for (i, &addr) in members.iter().enumerate() {
        if let Some((me, leader)) = status(addr).await {
            if me != 0 && me == leader {
                return Some(i);
            }
        }
    }
    None
}
