//! A simulated member of a ZooKeeper ensemble: a [`Server`] on each of `zk-0..zk-{n-1}` around
//! the ensemble's shared state ([`super::ensemble`]).
//!
//! - A member that does not serve (cut off from a quorum, or looking for a leader) answers every
//!   request with [`ZkResponse::NotServing`]: the real one closes the connection at once, and
//!   the client moves to another member.
//! - Pings are answered by the member the client is connected to, from its own replica; a
//!   follower notes the session as touched and reports it to the leader at the leader's next
//!   ping (every tick/2).
//! - A connection's requests are answered in order: one that comes while an earlier one still
//!   waits (for the leader, or for a quorum) waits behind it, a ping included (the real
//!   `CommitProcessor` queues every request of a session with a pending one). A ping touches
//!   the session when it arrives (`ZooKeeperServer.submitRequest` touches before queueing), but
//!   its answer comes after its predecessors' — so a client whose write waits for a quorum
//!   hears nothing, and gives its connection up, as the real client does.
//! - A read is answered by the member from its own replica (stale while it lags its leader),
//!   with the session looked up and touched as a ping does.
//! - Everything else (opening and re-attaching a session, writes) goes to the leader,
//!   is applied there on the leader's clocks, and answered by the member once the leader has
//!   it: while the leader cannot be reached (paused, cut off) the request waits, as it waits in
//!   a real follower's queue, until the leader answers or the member gives up on it. A
//!   transaction waits, besides, for the leader to have a quorum to commit it.
//! - Watch events go to the client from the member its session is connected to.
//! - Every member wakes every tick/2 to look at the ensemble (follow, give up, elect), and at
//!   once when who reaches whom changes (a heal, a resume, a restart), as a real member acts
//!   at once on what a healed link delivers; the leader's expirer wakes at the sessions'
//!   deadlines as a standalone server's does.

use super::ensemble::{Attachment, Changes, Ensemble, State};
use super::model::WatchEvent;
use super::node::{ZkMessage, ZkPush, ZkReply, ZkRequest, ZkResponse};
use super::serve;
use crate::net::{Handled, Peer};
use crate::server::{Node, Server};
use crate::world::World;
use lockcheck_core::history::{KeyChange, Kind, Op as HistoryOp};
use lockcheck_core::scenario::Persistence;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// How often a follower holding a request for an unreachable leader looks again.
const RETRY: Duration = Duration::from_millis(5);

/// One member's process.
pub struct ZkMember {
    node: Node<ZkMember>,
    ensemble: Arc<Ensemble>,
    /// Its place in the ensemble (server order).
    me: usize,
    /// The endpoint its watch events leave from, bound while its process runs; pushes name its
    /// address (`State::pushers`), whichever member's code sends them.
    _pusher: crate::net::Port,
    /// When it next looks at the ensemble, on its monotonic clock.
    next_step_ms: Cell<u64>,
    /// Per client connection (by its push address), the requests still waiting: the next
    /// ticket to hand out and the ticket answered next. A request that finds none waiting is
    /// answered at once without a ticket.
    queues: RefCell<BTreeMap<SocketAddr, (u64, u64)>>,
}

impl Server for ZkMember {
    type Request = ZkMessage;
    type Durable = ();
    type Kept = ();

    /// Every transaction is logged by a quorum before it is answered.
    fn persistence(_: &World, _: usize) -> Persistence {
        Persistence::Always
    }

    /// A (re)started member serves no one until it has found its leader.
    fn start(node: Node<Self>, _recovered: Option<()>) -> Self {
        let ensemble = node
            .world
            .ensemble
            .get()
            .expect("the ensemble is made before its members start")
            .clone();
        let pusher = crate::net::bind_pusher(node.world.clone(), node.me);
        let me = {
            let mut state = ensemble.lock();
            let me = state
                .members
                .iter()
                .position(|&m| m == node.me)
                .expect("a member of its ensemble");
            state.pushers[me] = Some(pusher.addr());
            if node.crashed.is_some() {
                state.serving[me] = false;
                if state.leader == Some(me) {
                    state.leader = None;
                }
                if state.deposed.as_ref().is_some_and(|d| d.member == me) {
                    state.deposed = None;
                }
            }
            me
        };
        let first = node.mono_ms() + half_tick(&ensemble.lock());
        ZkMember {
            node,
            ensemble,
            me,
            _pusher: pusher,
            next_step_ms: Cell::new(first),
            queues: RefCell::new(BTreeMap::new()),
        }
    }

    fn node(&self) -> &Node<Self> {
        &self.node
    }

    fn handle(self: &Rc<Self>, from: Peer, message: ZkMessage) -> Handled {
        let ZkMessage {
            request,
            push_to,
            connection,
        } = message;
        let at = Attachment {
            member: self.me,
            client: from.node,
            push_to,
        };
        let queued = self.queues.borrow().contains_key(&push_to);
        let ping = {
            let mut state = self.ensemble.lock();
            if !state.serving[self.me] {
                return Handled::now(ZkReply {
                    response: ZkResponse::NotServing,
                    zxid: state.replicas[self.me].zxid,
                });
            }
            match request {
                // Touched on arrival; answered now, or after what waits before it.
                ZkRequest::Ping { session } => {
                    let response = self.ping(&mut state, session, connection);
                    let reply = ZkReply {
                        response,
                        zxid: state.replicas[self.me].zxid,
                    };
                    if !queued {
                        return Handled::now(reply);
                    }
                    Some(reply)
                }
                _ if !queued && self.ready(&state, &request) => {
                    return Handled::now(self.carry_out(&mut state, at, connection, request));
                }
                _ => None,
            }
        };
        // It waits for the requests before it on its connection, then for the leader (a
        // follower's cut off from it) or for a quorum (a proposal), as a request waits in a real
        // member's queue, until it can go on or the member gives up.
        let ticket = {
            let mut queues = self.queues.borrow_mut();
            let (next, _) = queues.entry(push_to).or_insert((0, 0));
            *next += 1;
            *next - 1
        };
        let member = self.clone();
        Handled::later(async move {
            let mut ping = ping;
            let reply = loop {
                let turn = member
                    .queues
                    .borrow()
                    .get(&push_to)
                    .is_some_and(|&(_, serving)| serving == ticket);
                if turn {
                    if let Some(reply) = ping.take() {
                        break reply;
                    }
                    let mut state = member.ensemble.lock();
                    if !state.serving[member.me] {
                        break ZkReply {
                            response: ZkResponse::NotServing,
                            zxid: state.replicas[member.me].zxid,
                        };
                    }
                    if member.ready(&state, &request) {
                        break member.carry_out(&mut state, at, connection, request.clone());
                    }
                }
                crate::timer::sleep(RETRY).await;
            };
            let mut queues = member.queues.borrow_mut();
            if let Some((next, serving)) = queues.get_mut(&push_to) {
                *serving += 1;
                if *serving == *next {
                    queues.remove(&push_to);
                }
            }
            reply
        })
    }

    /// The session stays (a killed client sends no `closeSession`); its watches go.
    fn connection_closed(&self, from: Peer) {
        let mut state = self.ensemble.lock();
        let sessions: Vec<_> = state
            .clients
            .iter()
            .filter(|(_, a)| a.member == self.me && a.push_to == from.addr)
            .map(|(s, _)| *s)
            .collect();
        for session in sessions {
            state.clients.remove(&session);
            state.tree.drop_watches(session);
        }
    }

    /// The next look at the ensemble; on the leader, a session's deadline if sooner; on a
    /// follower, the moment it gives its leader up; on a member looking, the end of the
    /// election it votes in.
    fn next_due(&self) -> Option<(u64, Duration)> {
        let mono = self.node.mono_ms();
        let state = self.ensemble.lock();
        let mut due = self.next_step_ms.get();
        // Without a quorum the expirer has nothing it can commit: its next look is the step's.
        if state.leader == Some(self.me) && state.commits(&self.node.world) {
            if let Some(deadline) = state.tree.next_expiry_ms() {
                due = due.min(deadline);
            }
        }
        if let Some(at) = state.next_for_member(&self.node.world, self.me, mono) {
            due = due.min(at);
        }
        Some((due, Duration::from_millis(due.saturating_sub(mono))))
    }

    /// Who reaches whom changes (a heal, a resume, a restart): the member acts on it at once
    /// ([`ZkMember::on_reach`]). A member that starts looks first at its half tick (its start),
    /// so only the changes after that are waited for.
    fn spawn_tasks(self: &Rc<Self>) {
        let member = self.clone();
        let mut seen = self.node.world.reach.changes();
        madsim::task::spawn_local(async move {
            loop {
                member.node.world.reach.after(seen).await;
                seen = member.node.world.reach.changes();
                member.on_reach();
            }
        });
    }

    fn on_due(&self) {
        self.act(self.node.mono_ms() >= self.next_step_ms.get());
    }
}

/// Whether `request` is a transaction the leader proposes (opening a session, a create,
/// delete or setData): it commits only with a quorum.
fn is_proposal(request: &ZkRequest) -> bool {
    match request {
        ZkRequest::Open { .. } => true,
        ZkRequest::Op { op, .. } => op.is_write(),
        ZkRequest::Reconnect { .. } | ZkRequest::Ping { .. } => false,
    }
}

/// Half a tick: how often members look at the ensemble (the leader pings its followers).
fn half_tick(state: &State) -> u64 {
    (state.tree.tick_time_ms() / 2).max(1)
}

impl ZkMember {
    /// Who reaches whom changed: the member acts at once, as real members act on what a cut
    /// held and a heal delivers ([`ZkMember::act`] between steps).
    fn on_reach(&self) {
        self.act(false);
    }

    /// The member's look at the ensemble now, from its timer or on a change of who reaches
    /// whom: its half-tick step when `step`; otherwise, leading, its expirer, after which the
    /// followers it reaches have every commit (a quorum back commits what waited for it, and a
    /// follower reached again catches up); else a follower's or looking member's look (give its
    /// leader up, follow the leader it reaches, vote). Then what changed is settled, and its
    /// timer is offered what is due next (following again or voting, it may have a deadline its
    /// timer is not sleeping towards).
    fn act(&self, step: bool) {
        let world = &self.node.world;
        let mono = self.node.mono_ms();
        let mut changes = Changes::default();
        let mut state = self.ensemble.lock();
        let members = state.members.clone();
        let mono_of = |m: usize| world.mono_ns(members[m]) / 1_000_000;
        if step {
            self.next_step_ms.set(mono + half_tick(&state));
            state.step(world, self.me, mono, mono_of, &mut changes);
        } else if state.leader == Some(self.me) && state.serving[self.me] {
            state.expire(world, mono, &mut changes);
            state.sync(world);
        } else {
            state.look(world, self.me, mono, mono_of, &mut changes);
        }
        self.settle(&mut state, changes);
        self.node
            .due
            .offer(state.next_for_member(world, self.me, mono));
    }

    /// A client's ping, answered here: the leader renews the session itself (a closing one, past
    /// its deadline, it refuses), a follower answers from its replica and notes the session for
    /// its next report. A real follower answers every ping (`LearnerSessionTracker.touchSession`)
    /// and closes a session's connection when it applies the session's close, after which the
    /// client's reconnection learns it expired; answering `Expired` once the replica has the
    /// close is the same news, a round trip sooner.
    ///
    /// A ping on a connection its session has left is read only if that connection is still
    /// open: a member closes the session's older connection when the session reconnects *to
    /// it*; one the session left for another member stays open, and a ping on it renews the
    /// session as any other (a ping is not checked against the session's owner).
    fn ping(&self, state: &mut State, session: u64, connection: u64) -> ZkResponse {
        if state.is_deposed(self.me) {
            // Its own session tracker, as when it led: a closing session is refused.
            let mono = self.node.mono_ms();
            let deposed = state.deposed.as_mut().expect("deposed");
            return match deposed.tree.touch(session, mono) {
                Ok(()) => ZkResponse::Pong,
                Err(_) => ZkResponse::Expired,
            };
        }
        let reconnected_here = state
            .clients
            .get(&session)
            .is_some_and(|at| at.member == self.me);
        if reconnected_here && state.tree.moved_on(session, connection) {
            return ZkResponse::SessionMoved;
        }
        if state.leader == Some(self.me) {
            return match state.tree.touch(session, self.node.mono_ms()) {
                Ok(()) => ZkResponse::Pong,
                Err(_) => ZkResponse::Expired,
            };
        }
        if !state.replicas[self.me].sessions.contains(&session) {
            return ZkResponse::Expired;
        }
        state.touched[self.me].insert(session);
        ZkResponse::Pong
    }

    /// Whether `request` can be carried out at the leader now: the leader is reached from here
    /// and, for a transaction (opening a session, a create, delete or setData), has a quorum to
    /// commit it.
    fn ready(&self, state: &State, request: &ZkRequest) -> bool {
        let read = matches!(request, ZkRequest::Op { op, .. } if !op.is_write());
        if state.is_deposed(self.me) {
            // What it answers from its own view: a session's reconnection and a read. A write
            // needs a quorum it no longer has.
            return read || matches!(request, ZkRequest::Reconnect { .. });
        }
        let Some(leader) = state.leader else {
            return false;
        };
        if read && leader != self.me {
            // A follower reads its own replica, however far behind.
            return true;
        }
        let world = &self.node.world;
        if !state.reaches(world, self.me, leader) {
            return false;
        }
        !is_proposal(request) || state.commits(world)
    }

    /// What the leader's clocks read now.
    fn leader_now(&self, state: &State) -> (usize, u64, u64) {
        let leader = state.members[state.leader.expect("called with a leader")];
        let world = &self.node.world;
        let wall = (world.wall_ns(leader).max(0) / 1_000_000) as u64;
        (leader, world.mono_ns(leader) / 1_000_000, wall)
    }

    /// Carries `request` of the client `at` out where it is decided: at a deposed leader itself
    /// ([`ZkMember::at_deposed`]), else at the leader.
    fn carry_out(
        &self,
        state: &mut State,
        at: Attachment,
        connection: u64,
        request: ZkRequest,
    ) -> ZkReply {
        if state.is_deposed(self.me) {
            return self.at_deposed(state, at, connection, request);
        }
        match request {
            ZkRequest::Op { session, op } if !op.is_write() && state.leader != Some(self.me) => {
                self.at_follower(state, at, connection, session, &op)
            }
            request => self.at_leader(state, at, connection, request),
        }
    }

    /// A read at a follower, answered from its own replica as the real `FollowerZooKeeperServer`
    /// answers it (no round trip to the leader): the tree it has, stale while it lags
    /// ([`super::ensemble::Replica::stale`]), the watch left there. The session is looked up
    /// and touched as a ping does it ([`ZkMember::ping`]).
    fn at_follower(
        &self,
        state: &mut State,
        at: Attachment,
        connection: u64,
        session: u64,
        op: &super::model::Op,
    ) -> ZkReply {
        let zxid = state.replicas[self.me].zxid;
        let response = match self.ping(state, session, connection) {
            ZkResponse::Pong => {
                state.clients.insert(session, at);
                let me = self.me;
                let tree = match &mut state.replicas[me].stale {
                    Some(stale) => stale,
                    None => &mut state.tree,
                };
                ZkResponse::Result(tree.read(session, op), None)
            }
            refused => refused,
        };
        ZkReply { response, zxid }
    }

    /// A session's reconnection or a read at a deposed leader, answered from its own view:
    /// `Expired` for a session it holds closing (or does not know), however alive the new leader
    /// keeps it; a read from its tree as of the election that replaced it, the watch left there
    /// (it fires nothing more: the deposed leader commits nothing). A reconnection's watches fire
    /// for what that tree saw change since the client's last zxid.
    fn at_deposed(
        &self,
        state: &mut State,
        at: Attachment,
        connection: u64,
        request: ZkRequest,
    ) -> ZkReply {
        let world = &self.node.world;
        let mono = self.node.mono_ms();
        let wall = (world.wall_ns(self.node.me).max(0) / 1_000_000) as u64;
        let deposed = state.deposed.as_mut().expect("deposed");
        let mut unsent = Vec::new();
        // A reconnection creates no node.
        let mut no_ephemerals = BTreeMap::new();
        let answer = serve::answer(
            &mut deposed.tree,
            &mut no_ephemerals,
            connection,
            request,
            mono,
            wall,
            &mut unsent,
        );
        if let Some(session) = answer.attach {
            state.clients.insert(session, at);
        }
        // A reconnection's watches are set again on its tree; those whose nodes it has seen
        // change fire, from here.
        for event in unsent {
            self.push_event(state, at, event);
        }
        ZkReply {
            response: answer.response,
            zxid: state.replicas[self.me].zxid,
        }
    }

    /// Applies `request` of the client `at` at the leader: the reply its member gives.
    fn at_leader(
        &self,
        state: &mut State,
        at: Attachment,
        connection: u64,
        request: ZkRequest,
    ) -> ZkReply {
        let (leader, mono, wall) = self.leader_now(state);
        let mut changes = Changes::default();
        state.expire(&self.node.world, mono, &mut changes);
        if is_proposal(&request) {
            state.freeze_lagging(&self.node.world);
        }
        let fired_by_expiry = changes.events.len();
        let mut events = Vec::new();
        let answer = serve::answer(
            &mut state.tree,
            &mut state.ephemerals,
            connection,
            request,
            mono,
            wall,
            &mut events,
        );
        if let Some(session) = answer.attach {
            state.clients.insert(session, at);
        }
        if let Some((path, change)) = &answer.change {
            self.record(leader, path, *change, Some(at.client));
        }
        state.sync(&self.node.world);
        let zxid = state.replicas[self.me].zxid;
        debug_assert!(fired_by_expiry <= changes.events.len());
        changes.events.extend(events);
        self.settle(state, changes);
        ZkReply {
            response: answer.response,
            zxid,
        }
    }

    /// Records a change to a node at the leader (the node's path is its identity).
    fn record(&self, leader: usize, path: &str, change: KeyChange, by: Option<usize>) {
        let world = &self.node.world;
        world.record(
            leader,
            Kind::Observe,
            HistoryOp::Key {
                key: path.to_string(),
                change,
                field: None,
                value: Some(path.to_string()),
                by: by.map(|n| world.topology.name(n).to_string()),
                expires_local_ns: None,
            },
        );
    }

    /// Carries out what a look at the ensemble or a transaction changed: the expired sessions'
    /// nodes recorded, the watch events pushed from each client's member, and the connections of
    /// members that stopped serving closed.
    fn settle(&self, state: &mut State, changes: Changes) {
        let world = &self.node.world;
        let leader = state.leader.map(|l| state.members[l]);
        for session in &changes.expired {
            let nodes = state.ephemerals.remove(session).unwrap_or_default();
            for path in nodes {
                self.record(
                    leader.unwrap_or(self.node.me),
                    &path,
                    KeyChange::Expired,
                    None,
                );
            }
            state.clients.remove(session);
        }
        for event in changes
            .events
            .into_iter()
            .chain(std::mem::take(&mut state.caught_up))
        {
            self.deliver(state, event);
        }
        for member in changes.stopped {
            let node = state.members[member];
            state.clients.retain(|_, a| a.member != member);
            world.record(
                node,
                Kind::Observe,
                HistoryOp::Note {
                    text: "stopped serving (no leader with a quorum): its clients' connections \
                           closed"
                        .into(),
                },
            );
            crate::net::reset_connections(world, node);
        }
        for member in changes.followed {
            let leader = state
                .leader
                .map_or("", |l| world.topology.name(state.members[l]));
            world.record(
                state.members[member],
                Kind::Observe,
                HistoryOp::Note {
                    text: format!("follows {leader} again, caught up: serving"),
                },
            );
        }
        if let Some(elected) = changes.elected {
            world.record(
                state.members[elected],
                Kind::Observe,
                HistoryOp::Note {
                    text: format!("elected leader (epoch {})", state.epoch),
                },
            );
        }
        if state.leader == Some(self.me) && state.commits(world) {
            self.node.due.offer(state.tree.next_expiry_ms());
        }
    }

    /// Pushes `event` to its session's client from the member the client is connected to, if
    /// that member serves and the leader reaches it (a commit it never got fires nothing there;
    /// the client's reconnection with its watches tells it later).
    fn deliver(&self, state: &State, event: WatchEvent) {
        let Some(at) = state.clients.get(&event.session).copied() else {
            return; // nobody to tell: not a wake-up
        };
        let world = &self.node.world;
        let leader = state.leader.unwrap_or(self.me);
        if !state.serving[at.member] || !state.reaches(world, leader, at.member) {
            return;
        }
        self.push_event(state, at, event);
    }

    /// Pushes `event` to the client `at` from the member it is connected to (its pusher, bound
    /// when that member's process starts), and records it.
    fn push_event(&self, state: &State, at: Attachment, event: WatchEvent) {
        let world = &self.node.world;
        let member = state.members[at.member];
        let Some(from) = state.pushers[at.member] else {
            return;
        };
        world.record(
            member,
            Kind::Observe,
            HistoryOp::Watch {
                path: event.path.clone(),
                event: serve::event_name(event.kind).to_string(),
                to: world.topology.name(at.client).to_string(),
            },
        );
        let push = Box::new(ZkPush(event));
        crate::net::push_from(world, member, from, at.push_to, push);
    }
}
