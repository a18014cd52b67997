//! A simulated ZooKeeper ensemble's shared state: one replicated tree, who leads, who serves,
//! and the rules by which members follow, give up, and elect, as ZooKeeper's quorum peers do.
//!
//! - **One tree.** Every transaction is applied by the leader, which has a quorum (it steps down
//!   otherwise), so every member serves the same committed tree: followers do not lag here.
//! - **Sessions are the leader's.** Deadlines are on the leader's monotonic clock, in its
//!   session tracker (`SessionTrackerImpl`); a client's pings to a follower are answered by the
//!   follower, which notes the session as touched (`LearnerSessionTracker`) and reports it in its
//!   answer to the leader's next ping (every tick/2), when the leader renews it. A leader that
//!   comes back from a pause runs its expirer before any follower's report can reach it, so a
//!   session whose deadline passed meanwhile ends, however recently its client pinged its
//!   follower. A new leader gives every session a full timeout from its election, as ZooKeeper's
//!   new leader does when it loads its session tracker.
//! - **Following.** A follower that has not heard its leader for `syncLimit` ticks (or whose
//!   leader's process died: TCP reset) gives up; a leader that has not heard a quorum of
//!   followers for `syncLimit` ticks of its own tick counter steps down (ZooKeeper counts ticks
//!   the leader lived through, so its own pause does not count). A member that gives up stops
//!   serving: it closes its clients' connections and refuses new ones, so they move on.
//! - **Election.** A member that serves no one looks every tick/2 for the current leader, and
//!   follows it if they reach each other; otherwise, when it reaches a quorum of members that
//!   serve no one either, the highest of them becomes the leader (ZooKeeper's vote among members
//!   with the same history) and they follow it. A member reaches another when neither is
//!   crashed or paused and no partition cuts the link between them.

use super::model::{SessionId, WatchEvent, ZkModel};
use crate::world::World;
use lockcheck_core::scenario::SYNC_LIMIT_TICKS;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

/// A connected client of a member: the member (server order), the client's node and where
/// its events are pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// The member the client's connection is to.
    pub member: usize,
    /// The client's node.
    pub client: usize,
    /// The client's address for pushed events.
    pub push_to: SocketAddr,
}

/// What the members share (see the module's documentation).
pub struct State {
    /// The members' nodes, in server order (`zk-0` first).
    pub members: Vec<usize>,
    /// The committed tree, with the sessions and their deadlines on the leader's clock.
    pub tree: ZkModel,
    /// The leader (server order), if there is one.
    pub leader: Option<usize>,
    /// Leader elections so far.
    pub epoch: u64,
    /// Per member: whether it serves clients (it leads, or follows a leader).
    pub serving: Vec<bool>,
    /// Per member: its monotonic ms when it last heard its leader.
    pub heard_leader_ms: Vec<u64>,
    /// Half-ticks the leader has lived through since its election.
    pub leader_ticks: u64,
    /// Per member: the leader's half-tick count when the leader last heard it.
    pub acked: Vec<u64>,
    /// Per member: the sessions its clients pinged since it last reported to the leader.
    pub touched: Vec<BTreeSet<SessionId>>,
    /// Each session's client, and the member it is connected to.
    pub clients: BTreeMap<SessionId, Attachment>,
    /// Per member: the address it pushes watch events from (set when its process starts).
    pub pushers: Vec<Option<SocketAddr>>,
    /// Each session's ephemeral nodes, so their deletion by expiry shows in the history.
    pub ephemerals: BTreeMap<SessionId, BTreeSet<String>>,
}

/// An ensemble's shared state, kept in the [`World`] (`World::ensemble`).
pub struct Ensemble(Mutex<State>);

impl Ensemble {
    /// The ensemble of `members` (nodes, in server order) with a fresh tree, as real mode's
    /// launcher hands it to the run: every member serving, the highest leading, each having just
    /// heard its leader at `started_ms`, its monotonic reading at the start (a server's clock
    /// does not start at 0: `core::server_clock`).
    pub fn new(members: Vec<usize>, started_ms: Vec<u64>) -> Ensemble {
        let n = members.len();
        debug_assert_eq!(started_ms.len(), n);
        Ensemble(Mutex::new(State {
            tree: ZkModel::new(),
            leader: Some(n - 1),
            epoch: 1,
            serving: vec![true; n],
            heard_leader_ms: started_ms,
            leader_ticks: 0,
            acked: vec![0; n],
            touched: vec![BTreeSet::new(); n],
            clients: BTreeMap::new(),
            pushers: vec![None; n],
            ephemerals: BTreeMap::new(),
            members,
        }))
    }

    /// The state, locked (never across an await).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().expect("never poisoned")
    }
}

/// What a member's look at the ensemble changed: members that stopped serving (their clients'
/// connections are to be closed), sessions that expired, and watch events to deliver.
#[derive(Default)]
pub struct Changes {
    /// Members (server order) that stopped serving.
    pub stopped: Vec<usize>,
    /// Sessions the leader's expirer ended.
    pub expired: Vec<SessionId>,
    /// Watch events the expiries fired.
    pub events: Vec<WatchEvent>,
    /// The member (server order) elected leader, if an election ended.
    pub elected: Option<usize>,
}

impl State {
    /// How many members make a quorum.
    pub fn quorum(&self) -> usize {
        self.members.len() / 2 + 1
    }

    /// Whether member `from` reaches member `to` now (both ways; `to` up and not paused).
    pub fn reaches(&self, world: &World, from: usize, to: usize) -> bool {
        if from == to {
            return true;
        }
        let (a, b) = (self.members[from], self.members[to]);
        let links = world.links();
        !world.is_down(b) && !world.is_paused(b) && !links.is_cut(a, b) && !links.is_cut(b, a)
    }

    fn stop(&mut self, member: usize, changes: &mut Changes) {
        if std::mem::replace(&mut self.serving[member], false) {
            changes.stopped.push(member);
        }
        self.touched[member].clear();
    }

    /// The leader's expirer at its monotonic `now_ms`.
    pub fn expire(&mut self, now_ms: u64, changes: &mut Changes) {
        let expired = self.tree.expire_due(now_ms, &mut changes.events);
        changes.expired.extend(expired);
    }

    /// Member `me`'s look at the ensemble every half tick, at its monotonic `now_ms`, with
    /// `mono_of` reading another member's monotonic clock (see the module's documentation).
    pub fn step(
        &mut self,
        world: &World,
        me: usize,
        now_ms: u64,
        mono_of: impl Fn(usize) -> u64,
        changes: &mut Changes,
    ) {
        let tick = self.tree.tick_time_ms();
        let n = self.members.len();
        match self.leader {
            Some(leader) if leader == me && self.serving[me] => {
                self.leader_ticks += 1;
                // The expirer first: a follower's report answers a ping, a round trip later.
                self.expire(now_ms, changes);
                for f in (0..n).filter(|&f| f != me) {
                    if self.serving[f] && self.reaches(world, me, f) {
                        self.acked[f] = self.leader_ticks;
                        self.heard_leader_ms[f] = mono_of(f);
                        for session in std::mem::take(&mut self.touched[f]) {
                            // A session already ended stays ended.
                            let _ = self.tree.touch(session, now_ms);
                        }
                    }
                }
                let synced = 1
                    + (0..n)
                        .filter(|&f| f != me && self.serving[f])
                        .filter(|&f| self.leader_ticks - self.acked[f] <= 2 * SYNC_LIMIT_TICKS)
                        .count();
                if synced < self.quorum() {
                    // "Not sufficient followers synced": back to an election, and so are they.
                    self.leader = None;
                    for m in 0..n {
                        self.stop(m, changes);
                    }
                }
            }
            Some(leader) if self.serving[me] => {
                let silent = now_ms.saturating_sub(self.heard_leader_ms[me]);
                let reset = world.power(self.members[leader]).refuses();
                if silent > SYNC_LIMIT_TICKS * tick || reset {
                    self.stop(me, changes);
                }
            }
            _ => {}
        }
        if self.serving[me] {
            return;
        }
        // Looking: follow the leader if it is there, or elect one with a quorum of others who
        // are looking too.
        if let Some(leader) = self.leader {
            if leader != me && self.serving[leader] && self.reaches(world, me, leader) {
                self.serving[me] = true;
                self.heard_leader_ms[me] = now_ms;
                self.acked[me] = self.leader_ticks;
                return;
            }
        }
        let voters: Vec<usize> = (0..n)
            .filter(|&m| m == me || (!self.serving[m] && self.reaches(world, me, m)))
            .collect();
        if voters.len() < self.quorum() {
            return;
        }
        let elected = *voters.iter().max().expect("a quorum is not empty");
        if let Some(old) = self.leader {
            // Its followers elected another: it leads no one.
            self.stop(old, changes);
        }
        self.leader = Some(elected);
        self.epoch += 1;
        self.leader_ticks = 0;
        for &m in &voters {
            self.serving[m] = true;
            self.heard_leader_ms[m] = mono_of(m);
            self.acked[m] = 0;
            self.touched[m].clear();
        }
        // The new leader's session tracker: every session gets a full timeout from now on its
        // clock. (Watches are the connections' and go with them: every client reconnects and
        // sets its watches again.)
        self.tree = ZkModel::restore(self.tree.snapshot(), mono_of(elected));
        changes.elected = Some(elected);
        tracing::debug!(
            leader = elected,
            epoch = self.epoch,
            "ensemble elected a leader"
        );
    }
}
