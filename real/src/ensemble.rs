//! A ZooKeeper ensemble on loopback: `params.nodes` members (`zk-0`, `zk-1`, …), each with its
//! own data dir, client port, quorum port and election port, every member-to-member link through
//! a proxy of its own, and a leader known before the run starts.
//!
//! - **Links.** Member `a` reaches member `b` only through its two proxies to `b` (one for `b`'s
//!   quorum port, one for its election port): `a`'s `zoo.cfg` names the proxies in `b`'s
//!   `server.N` line. A partition that separates `a` from `b` cuts both directions' proxies
//!   ([`PeerLink`]), so a member cut off from the others really is: its follower stops hearing
//!   its leader (and gives up after `syncLimit` ticks), its election messages go nowhere.
//!   ZooKeeper's election also dials an address that is in no configuration: it answers an
//!   election connection from a lower id by connecting back to the address that member
//!   advertises, its own listening port. That connection once went around the proxies and
//!   outlived every cut, so a member cut off from the others still took part in their elections
//!   (and was elected, with proposals they never had). Each member now runs with the peer-link
//!   library ([`crate::peerlink`]), which sends a connection to a peer's own port through the
//!   member's proxy to that peer.
//! - **The leader.** ZooKeeper elects, among members with the same history, the one with the
//!   highest `myid`; so the highest-numbered member is started first with enough others to make
//!   a quorum (the `n/2 + 1` highest), and they elect it; the rest join it. The run then checks
//!   with `srvr` that `zk-{n-1}` says `Mode: leader`, and fails if not. A scenario can thus name
//!   the leader, `zk-{n-1}`, and the simulation, whose election follows the same rule, runs the
//!   same file.

use crate::error::RealError;
use crate::launcher::zookeeper::mode;
use crate::launcher::{free_port, Launcher, PeerPorts, ZooKeeper, ZooKeeperMember};
use crate::proxy::{Link, Proxy};
use lockcheck_core::scenario::{Scenario, DEFAULT_TICK_TIME_MS};
use lockcheck_core::topology::Role;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::rc::Rc;

/// How long a member's proxy to a peer tries a refused connection again: a ZooKeeper
/// follower's own retries of its connection to a new leader (`Learner.connectToLeader`: five
/// tries, `leaderConnectDelayDuringRetryMs` = 100 ms apart), which a proxy's accepted
/// connection would otherwise cut short ([`Proxy::start_patient`]).
const LEARNER_CONNECT_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// The links from one member to another: its proxies to that member's quorum and election
/// ports (in server order: `zk-0` is 0).
#[derive(Clone, Debug)]
pub struct PeerLink {
    /// The member whose connections these are (server order).
    pub from: usize,
    /// The member they lead to (server order).
    pub to: usize,
    /// The proxies' links: to the quorum port, then to the election port.
    pub links: [Link; 2],
}

/// An ensemble's member-to-member proxies. Dropping it closes them.
pub struct Ensemble {
    /// Every directed link between two members.
    pub links: Vec<PeerLink>,
    _proxies: Vec<Proxy>,
}

/// The member that leads an ensemble of `members` started as [`launch`] starts it (server
/// order): the highest-numbered, `zk-{members-1}`.
pub fn leader(members: usize) -> usize {
    members - 1
}

fn fail(server: &str, reason: String) -> RealError {
    RealError::Server {
        server: server.to_string(),
        reason,
    }
}

/// Starts `scenario`'s ensemble with `launcher` (member `i` as launcher index `i`, which is its
/// server order), waits until every member serves and the highest-numbered leads: the members'
/// client addresses, and the member-to-member proxies, which must live as long as the run.
pub async fn launch(
    scenario: &Scenario,
    launcher: &Rc<RefCell<Launcher>>,
) -> Result<(Vec<SocketAddr>, Ensemble), RealError> {
    let topology = scenario.topology();
    let names: Vec<String> = topology
        .with_role(Role::Server)
        .into_iter()
        .map(|n| topology.name(n).to_string())
        .collect();
    let members = names.len();
    // Each member's own peer ports: distinct, and from the range no proxy or connection takes.
    let mut taken = BTreeSet::new();
    let mut own = Vec::new();
    for name in &names {
        let mut draw = || loop {
            let port = free_port().map_err(|e| fail(name, format!("no free port: {e}")))?;
            if taken.insert(port) {
                return Ok::<u16, RealError>(port);
            }
        };
        own.push(PeerPorts {
            quorum: draw()?,
            election: draw()?,
        });
    }
    // Every member's proxies to every other member.
    let mut proxies = Vec::new();
    let mut links = Vec::new();
    let mut views = vec![own.clone(); members];
    for (from, view) in views.iter_mut().enumerate() {
        for to in (0..members).filter(|&to| to != from) {
            let mut pair = Vec::new();
            for (k, port) in [own[to].quorum, own[to].election].into_iter().enumerate() {
                let upstream = SocketAddr::from(([127, 0, 0, 1], port));
                let seed =
                    scenario.seed ^ 0x5a5a_0000_0000 ^ ((from * members + to) * 2 + k) as u64;
                let proxy = Proxy::start_patient(upstream, seed, LEARNER_CONNECT_PATIENCE)
                    .await
                    .map_err(|source| RealError::Proxy { upstream, source })?;
                pair.push(proxy);
            }
            view[to] = PeerPorts {
                quorum: pair[0].addr().port(),
                election: pair[1].addr().port(),
            };
            links.push(PeerLink {
                from,
                to,
                links: [pair[0].link(), pair[1].link()],
            });
            proxies.extend(pair);
        }
    }
    let session_timeout_ms = scenario.params.zookeeper.session_timeout_ms();
    let peerlink = crate::peerlink::library()?;
    for (i, (name, view)) in names.iter().zip(views).enumerate() {
        // A connection to a peer's own port goes through this member's proxy to it, as those
        // to the addresses its configuration names do.
        let rewrites: Vec<(u16, u16)> = (0..members)
            .filter(|&to| to != i)
            .flat_map(|to| {
                [
                    (own[to].quorum, view[to].quorum),
                    (own[to].election, view[to].election),
                ]
            })
            .collect();
        let env = crate::peerlink::env(peerlink.clone(), &rewrites);
        let kind = ZooKeeperMember {
            server: ZooKeeper {
                session_timeout_ms,
                tick_time_ms: DEFAULT_TICK_TIME_MS,
            },
            myid: i as u32 + 1,
            view,
        };
        let index = launcher.borrow_mut().register(name, Box::new(kind), env)?;
        debug_assert_eq!(index, i, "members are registered in server order");
    }
    // The quorum that elects the leader first, then the others, which join it.
    let quorum = members / 2 + 1;
    let first: Vec<usize> = (members - quorum..members).collect();
    let rest: Vec<usize> = (0..members - quorum).collect();
    for group in [first, rest] {
        for &i in &group {
            launcher.borrow_mut().start(i)?;
        }
        for &i in &group {
            Launcher::until_ready(launcher, i).await?;
        }
    }
    let addrs: Vec<SocketAddr> = (0..members).map(|i| launcher.borrow().addr(i)).collect();
    let leads = leader(members);
    let said = mode(addrs[leads]).await;
    if said.as_deref() != Some("leader") {
        return Err(fail(
            &names[leads],
            format!(
                "expected to lead the ensemble (the highest id, started with a quorum), but \
                 srvr says Mode: {}",
                said.as_deref().unwrap_or("(no answer)")
            ),
        ));
    }
    tracing::info!(
        "ensemble ready, {} leads: {}",
        names[leads],
        addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((
        addrs,
        Ensemble {
            links,
            _proxies: proxies,
        },
    ))
}

/// Which member leads now, by asking each with `srvr` (server order); `None` while none says
/// `Mode: leader` (an election under way, or no quorum).
pub async fn current_leader(members: &[SocketAddr]) -> Option<usize> {
    for (i, &addr) in members.iter().enumerate() {
        if mode(addr).await.as_deref() == Some("leader") {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::PauseGate;
    use crate::zk_store::RealZk;
    use lockcheck_algorithms::zookeeper::store::{CreateMode, ZkStore};
    use lockcheck_core::scenario::Algorithm;
    use std::time::Duration;

    /// Three members start, `zk-2` leads and says so, the others follow, and a client that
    /// starts on `zk-0` writes through it (a write a follower forwards to the leader).
    #[test]
    fn three_members_start_with_the_highest_leading_and_serve_a_write() {
        let kind = ZooKeeper {
            session_timeout_ms: 4_000,
            tick_time_ms: DEFAULT_TICK_TIME_MS,
        };
        if !crate::launcher::ServerKind::installed(&kind) {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "ZooKeeper is not installed under CI=true"
            );
            return;
        }
        let mut scenario = Scenario::new(Algorithm::ZkSequential);
        scenario.params.nodes = Some(3);
        scenario.params.zookeeper.session_timeout_ms = Some(4_000);
        let launcher = Rc::new(RefCell::new(Launcher::new().unwrap()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async {
            let (addrs, ensemble) = launch(&scenario, &launcher).await.unwrap();
            assert_eq!(ensemble.links.len(), 6, "every member to every other");
            assert_eq!(current_leader(&addrs).await, Some(2));
            for &follower in &addrs[..2] {
                assert_eq!(mode(follower).await.as_deref(), Some("follower"));
            }
            let client = RealZk::ensemble(
                addrs.clone(),
                0,
                Duration::from_secs(4),
                Duration::from_secs(10),
                PauseGate::new(),
            );
            let (path, _) = client
                .create("/written", b"x".to_vec(), CreateMode::Persistent)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(path, "/written");
            assert!(client
                .exists("/written", false)
                .await
                .unwrap()
                .unwrap()
                .is_some());
        });
        let pids = launcher.borrow().started_pids();
        assert_eq!(pids.len(), 3);
        launcher.borrow_mut().close();
        assert!(!launcher.borrow().root().exists());
    }
}
