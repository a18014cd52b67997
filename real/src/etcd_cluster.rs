//! An etcd cluster on loopback: `n` members (`etcd-0`, …), each with its own client port, peer
//! port and data directory, every one named in every member's `--initial-cluster`, and
//! partitions between its members.
//!
//! What it is for: a real run's topology when a scenario asks for an etcd cluster
//! (`params.nodes` > 1, `crate::runner`, which makes the highest member the leader with
//! [`make_leader`], as the simulated cluster starts), and the conformance tests that pin how a
//! real cluster behaves (its leader, a leader's crash or isolation and the election after it,
//! what the new leader does to the leases; `real/tests/etcd_cluster.rs`). A member's crash,
//! restart and pause act on it through the launcher; a partition acts on the links between
//! members ([`Cluster::cut`]); loss and delay on a member impair its links ([`Cluster::link`]).
//!
//! **Links.** Member `j` listens for its peers on a port only the cluster's proxies dial, and
//! advertises its front door ([`PeerFront`]), which every member's `--initial-cluster` names.
//! The front tells which member dialled each connection (through the kernel: see
//! [`crate::peer_proxy`]) and relays a connection from member `i` through the proxy of the pair
//! (`i`, `j`) ([`Proxy`]). Bytes go both ways on a connection whichever member dialled it (etcd's
//! raft streams carry a member's messages on the connection its peer dialled), so a cut between
//! `i` and `j` cuts both pairs' proxies, `i`→`j` and `j`→`i`.
//!
//! **A cut is a blackhole**, as real mode's partitions of clients and of a ZooKeeper ensemble
//! are ([`crate::proxy::Link::cut`]): open connections stay open and carry nothing, new ones
//! are accepted and held, and what was sent meanwhile is delivered, in order, at the heal (a
//! connection its dialler gave up on meanwhile is dropped instead). That is what a real
//! partition that heals does to TCP, and etcd notices it only through its own timeouts: the
//! election timeout, CheckQuorum, its streams' 5 s read timeout, a request's timeout.
//!
//! **A dialler the kernel cannot name** (no member holds the socket: someone else dialled, or
//! the dialler closed it before the front looked) goes through a proxy of its own to the member,
//! which resets its connections, open or new, while that member is cut from any other: such a
//! connection can never carry a message across a partition, and is logged when it comes.

use crate::error::RealError;
use crate::etcd_gateway::Connection;
use crate::launcher::{free_port, EtcdMember, Launcher};
use crate::peer_proxy::{MemberPids, PeerFront, Routes};
use crate::proxy::{Link, Mode, Proxy};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::rc::Rc;

/// A running cluster's addresses and its member-to-member links. The launcher owns the
/// processes; dropping the cluster closes its proxies (and so every link between members).
pub struct Cluster {
    clients: Vec<SocketAddr>,
    /// `links[from][to]`: the proxy of the connections `from` dials to `to` (none on the
    /// diagonal).
    links: Vec<Vec<Option<Link>>>,
    /// Per member: the proxy of connections to it that no member is known to have dialled.
    unknown: Vec<Link>,
    /// The pairs cut now, each as (lower, higher).
    cuts: RefCell<BTreeSet<(usize, usize)>>,
    fronts: Vec<PeerFront>,
    _proxies: Vec<Proxy>,
}

impl Cluster {
    /// The members' client addresses (member order).
    pub fn members(&self) -> &[SocketAddr] {
        &self.clients
    }

    /// The link that carries the connections member `from` dials to member `to` (a handle on
    /// its proxy: for delay and loss; a cut is [`Cluster::cut`], which cuts both directions).
    pub fn link(&self, from: usize, to: usize) -> Option<Link> {
        self.links.get(from)?.get(to)?.clone()
    }

    /// Cuts members `i` and `j` apart (both directions). Cutting a pair already cut does
    /// nothing.
    pub fn cut(&self, i: usize, j: usize) {
        let pair = (i.min(j), i.max(j));
        if i == j || !self.cuts.borrow_mut().insert(pair) {
            return;
        }
        tracing::info!("etcd cluster: cut etcd-{i} from etcd-{j}");
        for (from, to) in [(i, j), (j, i)] {
            if let Some(link) = &self.links[from][to] {
                link.cut();
            }
        }
        self.refresh_unknown();
    }

    /// Heals the cut between members `i` and `j`. Healing a pair not cut does nothing.
    pub fn heal(&self, i: usize, j: usize) {
        let pair = (i.min(j), i.max(j));
        if !self.cuts.borrow_mut().remove(&pair) {
            return;
        }
        tracing::info!("etcd cluster: healed etcd-{i} and etcd-{j}");
        for (from, to) in [(i, j), (j, i)] {
            if let Some(link) = &self.links[from][to] {
                link.heal();
            }
        }
        self.refresh_unknown();
    }

    /// Cuts member `i` from every other.
    pub fn isolate(&self, i: usize) {
        for j in (0..self.clients.len()).filter(|&j| j != i) {
            self.cut(i, j);
        }
    }

    /// Heals every cut.
    pub fn heal_all(&self) {
        let cuts: Vec<(usize, usize)> = self.cuts.borrow().iter().copied().collect();
        for (i, j) in cuts {
            self.heal(i, j);
        }
    }

    /// How many peer connections the members' front doors accepted, and how many of them no
    /// member was found to have dialled (see the module's docs for what becomes of those).
    pub fn peer_connections(&self) -> (u64, u64) {
        self.fronts
            .iter()
            .fold((0, 0), |(a, u), f| (a + f.accepted(), u + f.unidentified()))
    }

    /// Whether members `i` and `j` are cut apart now.
    pub fn is_cut(&self, i: usize, j: usize) -> bool {
        self.cuts.borrow().contains(&(i.min(j), i.max(j)))
    }

    /// Resets the unknown diallers' connections to every member cut from any other.
    fn refresh_unknown(&self) {
        let cuts = self.cuts.borrow();
        for (member, link) in self.unknown.iter().enumerate() {
            let cut = cuts.iter().any(|&(a, b)| a == member || b == member);
            link.set_mode(if cut { Mode::Reset } else { Mode::Pass });
        }
    }
}

fn fail(server: &str, reason: String) -> RealError {
    RealError::Server {
        server: server.to_string(),
        reason,
    }
}

/// Starts a cluster of `members` with `launcher` (member `i` as the `i`-th server it registers
/// now) and waits until every member is healthy (has a leader). Its proxies' tasks are local:
/// it must be called within a [`tokio::task::LocalSet`].
pub async fn launch(
    members: usize,
    launcher: &Rc<RefCell<Launcher>>,
) -> Result<Cluster, RealError> {
    let names: Vec<String> = (0..members).map(|i| format!("etcd-{i}")).collect();
    // Each member's own peer port: distinct, and from the range no proxy or connection takes.
    let mut hidden: Vec<u16> = Vec::new();
    for name in &names {
        loop {
            let port = free_port().map_err(|e| fail(name, format!("no free port: {e}")))?;
            if !hidden.contains(&port) {
                hidden.push(port);
                break;
            }
        }
    }
    let upstreams: Vec<SocketAddr> = hidden
        .iter()
        .map(|&port| SocketAddr::from(([127, 0, 0, 1], port)))
        .collect();
    // The members' launcher indices are known only once registered; the fronts start first
    // (their ports go into every command line) and read them from here.
    let indices: Rc<RefCell<Vec<usize>>> = Rc::default();
    let pids: MemberPids = {
        let launcher = Rc::downgrade(launcher);
        let indices = indices.clone();
        Rc::new(move || {
            let Some(launcher) = launcher.upgrade() else {
                return Vec::new();
            };
            // No borrow of the launcher is held across an await, so this one never fails on
            // the single thread the cluster's tasks share; if it did, nobody is named.
            let Ok(launcher) = launcher.try_borrow() else {
                return Vec::new();
            };
            indices.borrow().iter().map(|&k| launcher.pid(k)).collect()
        })
    };
    let start_proxy = |upstream: SocketAddr, seed: u64| async move {
        Proxy::start(upstream, seed)
            .await
            .map_err(|source| RealError::Proxy { upstream, source })
    };
    let mut proxies = Vec::new();
    let mut links = vec![vec![None; members]; members];
    let mut unknown = Vec::new();
    let mut fronts = Vec::new();
    for to in 0..members {
        let mut by_member = Vec::new();
        for (from, row) in links.iter_mut().enumerate() {
            if from == to {
                // A member dialling itself crosses no link.
                by_member.push(upstreams[to]);
                continue;
            }
            let proxy = start_proxy(upstreams[to], (from * members + to) as u64).await?;
            by_member.push(proxy.addr());
            row[to] = Some(proxy.link());
            proxies.push(proxy);
        }
        let stranger = start_proxy(upstreams[to], (members * members + to) as u64).await?;
        let routes = Routes {
            by_member,
            unknown: stranger.addr(),
        };
        unknown.push(stranger.link());
        proxies.push(stranger);
        let front = PeerFront::start(routes, pids.clone())
            .await
            .map_err(|source| RealError::Proxy {
                upstream: upstreams[to],
                source,
            })?;
        fronts.push(front);
    }
    let initial_cluster = names
        .iter()
        .zip(&fronts)
        .map(|(name, front)| format!("{name}=http://127.0.0.1:{}", front.addr().port()))
        .collect::<Vec<_>>()
        .join(",");
    for (i, name) in names.iter().enumerate() {
        let kind = EtcdMember {
            name: name.clone(),
            peer_port: hidden[i],
            advertised_peer_port: fronts[i].addr().port(),
            initial_cluster: initial_cluster.clone(),
        };
        let index = launcher
            .borrow_mut()
            .register(name, Box::new(kind), Vec::new())?;
        indices.borrow_mut().push(index);
    }
    let indices: Vec<usize> = indices.borrow().clone();
    // All at once: a member is healthy only once a quorum elected a leader.
    for &k in &indices {
        launcher.borrow_mut().start(k)?;
    }
    for &k in &indices {
        Launcher::until_ready(launcher, k).await?;
    }
    let clients = indices.iter().map(|&k| launcher.borrow().addr(k)).collect();
    Ok(Cluster {
        clients,
        links,
        unknown,
        cuts: RefCell::default(),
        fronts,
        _proxies: proxies,
    })
}

/// How long [`make_leader`] waits for a leader, and then for the one it wants.
const LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Makes member `wanted` (member order) the leader of the cluster at `members` (their client
/// addresses): waits for a leader every member agrees on, and, when it is another, moves
/// leadership to `wanted` (`POST /v3/maintenance/transfer-leadership` to the leader, etcd's
/// `MoveLeader`, which waits until the transferee leads), then checks that every member says
/// `wanted` leads. Fails, naming `wanted`, when that does not happen in 30 s.
pub async fn make_leader(members: &[SocketAddr], wanted: usize) -> Result<(), RealError> {
    let name = format!("etcd-{wanted}");
    let started = tokio::time::Instant::now();
    let target = loop {
        if let Some(status) = member_status(members[wanted]).await {
            break status.member;
        }
        if started.elapsed() > LEADER_WAIT {
            return Err(fail(&name, "does not answer its status".into()));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let mut asked = false;
    loop {
        let agreed = agreed_leader(members).await;
        match agreed {
            Some(leader) if leader == target => break,
            Some(leader) if !asked => {
                // The leader's own client port: MoveLeader is refused by a follower.
                let at = futures_util::future::join_all(members.iter().map(|&a| member_status(a)))
                    .await
                    .iter()
                    .position(|s| s.is_some_and(|s| s.member == leader));
                if let Some(at) = at {
                    let mut connection = Connection::open(members[at])
                        .await
                        .map_err(|e| fail(&name, format!("cannot reach the leader: {e:?}")))?;
                    let (code, answer) = connection
                        .post(
                            "/v3/maintenance/transfer-leadership",
                            &json!({ "targetID": target.to_string() }),
                        )
                        .await
                        .map_err(|e| fail(&name, format!("transfer-leadership: {e:?}")))?;
                    if code != 200 {
                        return Err(fail(
                            &name,
                            format!("etcd-{at} refused to hand it leadership: {code} {answer}"),
                        ));
                    }
                    tracing::info!("etcd cluster: leadership moved from etcd-{at} to {name}");
                    asked = true;
                }
            }
            _ => {}
        }
        if started.elapsed() > LEADER_WAIT {
            let said =
                futures_util::future::join_all(members.iter().map(|&a| member_status(a))).await;
            return Err(fail(
                &name,
                format!(
                    "expected to lead the cluster (the highest member, as the simulated cluster \
                     starts), but the members say {said:?}"
                ),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tracing::info!("etcd cluster: {name} leads");
    Ok(())
}

/// The leader's member id, when every member answers and names the same one.
async fn agreed_leader(members: &[SocketAddr]) -> Option<u64> {
    let said = futures_util::future::join_all(members.iter().map(|&a| member_status(a))).await;
    let first = said.first().copied().flatten()?.leader;
    (first != 0 && said.iter().all(|s| s.is_some_and(|s| s.leader == first))).then_some(first)
}

/// What a member says of itself in `/v3/maintenance/status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Its member id.
    pub member: u64,
    /// The id of the leader it knows (0: none).
    pub leader: u64,
    /// `raftTerm`: the term of the last entry it applied (etcd's `EtcdServer.Term`), not its
    /// raft's current term: a candidate's elections do not show here, a new leader's term shows
    /// once it applied its term's first entry.
    pub term: u64,
}

impl Status {
    /// Whether it says it leads.
    pub fn leads(&self) -> bool {
        self.member != 0 && self.member == self.leader
    }
}

/// What the member at `addr` says of itself (`/v3/maintenance/status`), if it answers within
/// 500 ms.
pub async fn member_status(addr: SocketAddr) -> Option<Status> {
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
        Some(Status {
            member: id(answer.get("header").and_then(|h| h.get("member_id"))),
            leader: id(answer.get("leader")),
            term: id(answer.get("raftTerm")),
        })
    };
    tokio::time::timeout(std::time::Duration::from_millis(500), ask)
        .await
        .ok()
        .flatten()
}

/// What the member at `addr` says of itself (`/v3/maintenance/status`): its member id and the
/// id of the leader it knows (0: none), if it answers.
pub async fn status(addr: SocketAddr) -> Option<(u64, u64)> {
    member_status(addr).await.map(|s| (s.member, s.leader))
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
