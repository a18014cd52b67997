//! A simulated member of an etcd cluster: a [`Server`] on each of `etcd-0..etcd-{n-1}` around
//! the cluster's shared state ([`super::cluster`]).
//!
//! - Its raft ticks every [`TICK_MS`] on its clock ([`State::tick`]); a leader's lessor
//!   expires leases at their deadlines on its clock.
//! - A proposal (`LeaseGrant`, `LeaseRevoke`, `Txn`, `DeleteRange`) goes to the leader the
//!   member follows when it comes (raft forwards it there; a cut holds it until the heal), and
//!   is answered when that leader commits it. One that comes while the member follows no one
//!   is dropped at once (`raft proposal dropped`); one that reaches a member no longer leading,
//!   or whose leader steps down or is replaced before it commits, or whose leader's process
//!   died meanwhile, is lost, and the member answers `request timed out` after
//!   [`REQUEST_TIMEOUT_MS`]. It is never handed to a later leader.
//! - A read (`Range`) is linearizable, as the Go client's are by default: the member's leader
//!   must confirm its leadership with a quorum (`ReadIndex`) before it is answered.
//! - A keep-alive is renewed by the leader alone, from its lessor (a deposed leader's own):
//!   forwarded there by a follower that reaches it (`POST /leases`), waiting otherwise, and
//!   answered with an error after [`REQUEST_TIMEOUT_MS`] without one. One for a lease past its
//!   TTL waits for the lease's revocation (TTL 0), or for its leader's end (an error).
//! - A watch is served by the member it was made on, from what that member has applied: a
//!   member cut off from its leader tells its watchers of a deletion when it catches up.

use super::cluster::{
    Changes, Cluster, Proposed, Role, State, Watcher, REQUEST_TIMEOUT_MS, TICK_MS,
};
use super::model::{KeyEffect, Now, Renewal};
use super::node::{EtcdPush, EtcdRequest, EtcdResponse};
use crate::net::{Handled, Peer};
use crate::server::{Node, Server};
use crate::world::World;
use lockcheck_algorithms::etcd::{LeaseId, Revision};
use lockcheck_core::history::{KeyChange, Kind, Op};
use lockcheck_core::scenario::Persistence;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// How often a request waiting for its leader, a quorum or a revocation looks again.
const RETRY: Duration = Duration::from_millis(5);

/// One member's process.
pub struct EtcdMember {
    node: Node<EtcdMember>,
    cluster: Arc<Cluster>,
    /// Its place in the cluster (member order).
    me: usize,
    /// The endpoint its watch events leave from, bound while its process runs.
    _pusher: crate::net::Port,
    /// When its raft next ticks, on its monotonic clock.
    next_tick_ms: Cell<u64>,
    /// The cluster's members' nodes (member order): fixed for the run, read at every tick.
    members: Vec<usize>,
}

/// Where a request stands while it waits (see the module's documentation).
#[derive(Default)]
struct Waiting {
    /// A proposal forwarded to the leader the member followed, not yet delivered (a cut holds
    /// it).
    forwarded: Option<usize>,
    /// A proposal that will never commit: dropped by a member that did not lead when it came,
    /// or lost with a leader's end. Only the request timeout answers it.
    dropped: bool,
    /// A proposal: the leader it reached, and that leader's term.
    proposed: Option<Proposed>,
    /// A keep-alive of a lease past its TTL: the leader whose lessor revokes it.
    expiring: Option<(usize, LeaseId)>,
}

impl Server for EtcdMember {
    type Request = EtcdRequest;
    type Durable = ();
    type Kept = ();

    /// etcd fsyncs its write-ahead log before it answers; raft's term and vote are on disk.
    fn persistence(_: &World, _: usize) -> Persistence {
        Persistence::Always
    }

    /// A (re)started member keeps its term and log, and follows no one until a leader's
    /// heartbeat reaches it.
    fn start(node: Node<Self>, _recovered: Option<()>) -> Self {
        let cluster = node
            .world
            .etcd_cluster
            .get()
            .expect("the cluster is made before its members start")
            .clone();
        let pusher = crate::net::bind_pusher(node.world.clone(), node.me);
        let me = {
            let mut state = cluster.lock();
            let me = state
                .members
                .iter()
                .position(|&m| m == node.me)
                .expect("a member of its cluster");
            state.pushers[me] = Some(pusher.addr());
            if node.crashed.is_some() {
                let mut changes = Changes::default();
                state.restart(me, &mut changes);
                // Its clients' watches went with its connections.
                state.watchers.retain(|w| w.member != me);
            }
            me
        };
        let first = node.mono_ms() + TICK_MS;
        let members = cluster.lock().members.clone();
        EtcdMember {
            node,
            cluster,
            me,
            _pusher: pusher,
            next_tick_ms: Cell::new(first),
            members,
        }
    }

    fn node(&self) -> &Node<Self> {
        &self.node
    }

    fn handle(self: &Rc<Self>, peer: Peer, request: EtcdRequest) -> Handled {
        if let EtcdRequest::Watch { key, from } = request {
            let mut state = self.cluster.lock();
            state.watchers.push(Watcher {
                member: self.me,
                client: peer.node,
                addr: peer.addr,
                key,
                from,
            });
            self.answer_watches(&mut state);
            return Handled::now(EtcdResponse::Watching);
        }
        let arrived = self.node.mono_ms();
        let mut waiting = Waiting::default();
        if let Some(response) = self.attempt(peer.node, &request, &mut waiting) {
            return Handled::now(response);
        }
        let member = self.clone();
        Handled::later(async move {
            loop {
                crate::timer::sleep(RETRY).await;
                if let Some(response) = member.attempt(peer.node, &request, &mut waiting) {
                    return response;
                }
                if member.node.mono_ms() >= arrived + REQUEST_TIMEOUT_MS {
                    let reason = match request {
                        EtcdRequest::KeepAlive { .. }
                            if member.cluster.lock().m[member.me].lead.is_none() =>
                        {
                            "etcdserver: no leader"
                        }
                        _ => "etcdserver: request timed out",
                    };
                    // The member cannot tell a proposal that may still commit from one that
                    // was dropped: either may have been applied, for all its client knows.
                    return EtcdResponse::Unavailable {
                        reason,
                        maybe_applied: waiting.forwarded.is_some() || waiting.proposed.is_some(),
                    };
                }
            }
        })
    }

    /// A client's watches go with its connection.
    fn connection_closed(&self, from: Peer) {
        self.cluster
            .lock()
            .watchers
            .retain(|w| !(w.member == self.me && w.addr == from.addr));
    }

    /// Its next tick; a leader's lessor's next look, if sooner.
    fn next_due(&self) -> Option<(u64, Duration)> {
        let now = self.clocks();
        let state = self.cluster.lock();
        let mut due = self.next_tick_ms.get();
        let leads = state.m[self.me].role == Role::Leader && !state.is_deposed(self.me);
        if leads && state.commits(&self.node.world, self.me) {
            if let Some(at) = state.model.next_expiry_ms(now) {
                due = due.min(at);
            }
        }
        Some((due, Duration::from_millis(due.saturating_sub(now.mono_ms))))
    }

    fn on_due(&self) {
        let world = &self.node.world;
        let now = self.clocks();
        let mut changes = Changes::default();
        let mut state = self.cluster.lock();
        if now.mono_ms >= self.next_tick_ms.get() {
            self.next_tick_ms.set(now.mono_ms + TICK_MS);
            let now_of = |m: usize| clocks_of(world, self.members[m]);
            state.tick(world, self.me, now_of, &mut changes);
        }
        if state.m[self.me].role == Role::Leader {
            state.expire(world, self.me, now, &mut changes);
        }
        self.settle(&mut state, None, changes);
    }
}

/// Node `node`'s two clocks now.
fn clocks_of(world: &World, node: usize) -> Now {
    Now {
        mono_ms: world.mono_ns(node) / 1_000_000,
        wall_ms: (world.wall_ns(node).max(0) / 1_000_000) as u64,
    }
}

impl EtcdMember {
    /// Its clocks now.
    fn clocks(&self) -> Now {
        clocks_of(&self.node.world, self.node.me)
    }

    /// Carries `request` of client node `client` as far as it can go now: its answer, or `None`
    /// while it waits (for its leader, a quorum, a revocation).
    fn attempt(
        &self,
        client: usize,
        request: &EtcdRequest,
        waiting: &mut Waiting,
    ) -> Option<EtcdResponse> {
        let world = &self.node.world;
        let mut state = self.cluster.lock();
        if world.is_down(self.node.me) {
            return None;
        }
        match request {
            EtcdRequest::KeepAlive { lease } => self.keep_alive(&mut state, *lease, waiting),
            EtcdRequest::Range(range) => {
                let leader = state.leader_for(world, self.me)?;
                if state.is_deposed(leader) || !state.commits(world, leader) {
                    return None;
                }
                Some(EtcdResponse::Range(
                    state.model.range(range),
                    state.model.revision(),
                ))
            }
            EtcdRequest::Watch { .. } => Some(EtcdResponse::Watching),
            proposal => {
                if waiting.dropped {
                    return None;
                }
                let proposed = match waiting.proposed {
                    Some(p) => p,
                    None => {
                        // raft sends it to the leader the member follows (itself, leading),
                        // whoever that is now: a member that follows no one drops it at once;
                        // one that no longer leads when it arrives drops it, unanswered; a
                        // process that died meanwhile loses it with its connection.
                        let to = match waiting.forwarded {
                            Some(to) => to,
                            None => match state.m[self.me].lead {
                                Some(to) => {
                                    waiting.forwarded = Some(to);
                                    to
                                }
                                None => {
                                    return Some(EtcdResponse::Unavailable {
                                        reason: "etcdserver: raft proposal dropped",
                                        maybe_applied: false,
                                    })
                                }
                            },
                        };
                        if world.is_down(state.members[to]) {
                            waiting.dropped = true;
                            return None;
                        }
                        if !state.reaches(world, self.me, to) {
                            return None;
                        }
                        if state.m[to].role != Role::Leader {
                            waiting.dropped = true;
                            return None;
                        }
                        let p = Proposed {
                            leader: to,
                            term: state.m[to].term,
                        };
                        waiting.proposed = Some(p);
                        p
                    }
                };
                if state.lost(proposed) {
                    waiting.dropped = true;
                    return None;
                }
                if state.is_deposed(proposed.leader) || !state.commits(world, proposed.leader) {
                    return None;
                }
                let mut effects = Vec::new();
                let now = clocks_of(world, state.members[proposed.leader]);
                let response = match proposal {
                    EtcdRequest::Grant { ttl_s } => {
                        let (lease, ttl_s) = state.model.grant(*ttl_s, now);
                        EtcdResponse::Granted { lease, ttl_s }
                    }
                    EtcdRequest::Revoke { lease } => {
                        EtcdResponse::Revoked(state.model.revoke(*lease, &mut effects))
                    }
                    EtcdRequest::Txn(txn) => EtcdResponse::Txn(state.model.txn(txn, &mut effects)),
                    EtcdRequest::Delete { key } => {
                        let (deleted, revision) = state.model.delete(key, &mut effects);
                        EtcdResponse::Deleted(deleted, revision)
                    }
                    // Answered above: not proposals.
                    EtcdRequest::KeepAlive { .. }
                    | EtcdRequest::Range(_)
                    | EtcdRequest::Watch { .. } => return None,
                };
                let mut changes = Changes::default();
                state.commit_entry(world, proposed.leader);
                changes.effects.extend(effects);
                self.settle(&mut state, Some((proposed.leader, client)), changes);
                Some(response)
            }
        }
    }

    /// A keep-alive for `lease` (see the module's documentation).
    fn keep_alive(
        &self,
        state: &mut State,
        lease: LeaseId,
        waiting: &mut Waiting,
    ) -> Option<EtcdResponse> {
        let world = &self.node.world;
        if let Some((leader, lease)) = waiting.expiring {
            if state.m[leader].role != Role::Leader {
                return Some(EtcdResponse::Unavailable {
                    reason: "etcdserver: not primary",
                    maybe_applied: false,
                });
            }
            return (!state.lessor_of(leader).has_lease(lease))
                .then_some(EtcdResponse::KeptAlive { ttl_s: 0 });
        }
        let leader = state.leader_for(world, self.me)?;
        let now = clocks_of(world, state.members[leader]);
        tracing::debug!(
            member = self.me,
            leader,
            lease,
            "etcd member: keep-alive at the leader"
        );
        match state.lessor_of(leader).renew(lease, now) {
            Renewal::Renewed(ttl_s) => Some(EtcdResponse::KeptAlive { ttl_s }),
            Renewal::Gone => Some(EtcdResponse::KeptAlive { ttl_s: 0 }),
            Renewal::Expiring => {
                waiting.expiring = Some((leader, lease));
                None
            }
        }
    }

    /// Records what changed (key effects at the leader, by `by`'s client when a request made
    /// them), the members' notes, and answers the watches it satisfied.
    fn settle(&self, state: &mut State, by: Option<(usize, usize)>, changes: Changes) {
        let world = &self.node.world;
        let at = by
            .map(|(leader, _)| leader)
            .or(state.current_leader())
            .unwrap_or(self.me);
        let client = by.map(|(_, client)| client);
        let node = state.members[at];
        for effect in &changes.effects {
            let (key, change, by) = match effect {
                KeyEffect::Put(key) => (key, KeyChange::Set, client),
                KeyEffect::Deleted(key) => (key, KeyChange::Deleted, client),
                KeyEffect::Expired(key) => (key, KeyChange::Expired, None),
            };
            // A lock key's name is its identity, as a ZooKeeper node's path is.
            world.record(
                node,
                Kind::Observe,
                Op::Key {
                    key: key.clone(),
                    change,
                    field: None,
                    value: Some(key.clone()),
                    by: by.map(|n| world.topology.name(n).to_string()),
                    expires_local_ns: None,
                },
            );
        }
        for (member, text) in changes.notes {
            world.record(state.members[member], Kind::Observe, Op::Note { text });
        }
        self.answer_watches(state);
    }

    /// Pushes, from each watch's member, the deletions that member has applied, and forgets
    /// those watches.
    fn answer_watches(&self, state: &mut State) {
        let world = &self.node.world;
        let mut fired = Vec::new();
        let model = &state.model;
        let applied: Vec<Revision> = state.m.iter().map(|m| m.applied).collect();
        state.watchers.retain(|w| {
            match model
                .deleted_since(&w.key, w.from)
                .filter(|&rev| rev <= applied[w.member])
            {
                Some(revision) => {
                    fired.push((w.clone(), revision));
                    false
                }
                None => true,
            }
        });
        for (w, revision) in fired {
            let node = state.members[w.member];
            let Some(from) = state.pushers[w.member] else {
                continue;
            };
            if world.is_down(node) {
                continue;
            }
            world.record(
                node,
                Kind::Observe,
                Op::Watch {
                    path: w.key.clone(),
                    event: "node_deleted".to_string(),
                    to: world.topology.name(w.client).to_string(),
                },
            );
            let event = Box::new(EtcdPush {
                key: w.key,
                revision,
            });
            crate::net::push_from(world, node, from, w.addr, event);
        }
    }
}
