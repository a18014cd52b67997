//! A simulated ZooKeeper ensemble's shared state: the committed tree, each member's replica of
//! it, who leads, who serves, and the rules by which members follow, give up, and elect, as
//! ZooKeeper's quorum peers do.
//!
//! - **Commits need a quorum.** A transaction (creating or closing a session, a create, delete
//!   or setData) is proposed by the leader and commits once a quorum of members — the leader
//!   and the serving followers it reaches — has it; until then the request waits, and a leader
//!   that never gets its quorum back steps down with its proposals lost, so its clients'
//!   requests end with their connections. Since any quorum overlaps every other, the committed
//!   tree ([`State::tree`]) is the one every future leader starts from. (A real minority
//!   leader's proposals are truncated by a leader elected without it, and would be committed if
//!   it were elected again first, its log having the highest zxid; that race is not modelled.)
//! - **Each member its own replica.** A follower applies commits when its leader reaches it;
//!   one cut off from the leader falls behind ([`State::replicas`]). It answers its clients'
//!   pings from what it has (the real `LearnerSessionTracker.touchSession` answers them
//!   without asking anyone; a ping waits only behind its own connection's pending requests,
//!   `super::member`), so a client whose session the leader has closed keeps hearing
//!   from a cut-off follower until that follower gives up — the story where a careful client
//!   that checks its session before each access is not safe. It answers their reads from its
//!   replica too, stale while it lags ([`Replica::stale`], kept from the first commit it
//!   misses): a read there shows nodes the leader has since deleted, and the watch it leaves
//!   fires when the follower catches up and applies what it missed, as a real follower's does.
//! - **Sessions are the leader's.** Deadlines are on the leader's monotonic clock, in its
//!   session tracker (`SessionTrackerImpl`); a client's pings to a follower are answered by the
//!   follower, which notes the session as touched (`LearnerSessionTracker`) and reports it in its
//!   answer to the leader's next ping (every tick/2), when the leader renews it. A leader that
//!   comes back from a pause runs its expirer before any follower's report can reach it, so a
//!   session whose deadline passed meanwhile ends, however recently its client pinged its
//!   follower. A session's end is a `closeSession` proposal: a leader without a quorum marks
//!   it closing (no ping renews it any more) and commits it when the quorum is back, or never.
//!   A new leader gives every session a full timeout from its election, as ZooKeeper's new
//!   leader does when it loads its session tracker.
//! - **Following.** A follower that has not heard its leader for `syncLimit` ticks (its socket's
//!   read timeout, `tickTime × syncLimit` after the leader's last packet, so at that moment and not
//!   at a look), or whose leader's process died (TCP reset), gives up; a leader that has not heard
//!   a quorum of followers for `syncLimit` ticks of its own tick counter steps down (ZooKeeper
//!   counts ticks the leader lived through, so its own pause does not count). The leader counts
//!   whole ticks and looks once a tick (`Leader.lead`: a learner is synced while the tick is at
//!   most the tick of its last packet plus `syncLimit`), so it steps down up to a tick after its
//!   followers gave it up. A member that gives up stops serving: it closes its clients' connections
//!   and refuses new ones, so they move on.
//! - **Deposed.** Meanwhile the followers may have elected another leader. The old one, cut off
//!   from them, does not know: it serves its clients on from its own view ([`Deposed`]) until
//!   its own check steps it down. It answers their pings and a session's reconnection from its
//!   own session tracker, so a client that moves to it is told that a session it holds closing
//!   (past its deadline, the close never committed) expired, although the new leader keeps
//!   that session. It answers reads from its own tree too, and a reconnection's watches fire
//!   there for what that tree saw change; a write needs a quorum it no longer has. A leader the
//!   voters reach hears of the election and stops at once.
//! - **Election.** A member that serves no one looks for the current leader every tick/2 and
//!   whenever who reaches whom changes (a heal, a resume, a restart: held election messages
//!   are answered at once; a real member cut off past `syncLimit` served again 14–24 ms after
//!   the heal, so the vote's resend backoff never showed), and follows it if they reach each
//!   other (catching up from it first); otherwise, when it reaches a quorum of members that
//!   serve no one either, an election begins (a member that gives up looks at once, so it
//!   begins when the quorum's last member gives up). It takes `finalizeWait` (200 ms, the wait
//!   for a better vote once a quorum agrees) and the new
//!   leader's sync with its followers, drawn below 200 ms from the seed and the epoch: 0.2–0.4 s,
//!   as real elections across a cut took. When it ends, if its members still make a quorum, the
//!   highest of them becomes the leader (ZooKeeper's vote among members with the same history)
//!   and they follow it; until then none of them serves. A member
//!   reaches another when neither is crashed or paused and no partition cuts the link between
//!   them.

use super::model::{SessionId, WatchEvent, ZkModel, Zxid};
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
    /// Per member: what its replica has applied of [`State::tree`] (the leader's is always
    /// current; a follower's when its leader last reached it).
    pub replicas: Vec<Replica>,
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
    /// A leader replaced by an election it did not take part in, still serving until its own
    /// check steps it down.
    pub deposed: Option<Deposed>,
    /// An election under way: a quorum of looking members reach each other, and their vote is
    /// decided when it ends.
    pub election: Option<Election>,
    /// Watch events that members catching up fired for their clients, to deliver.
    pub caught_up: Vec<WatchEvent>,
}

/// An election under way (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Election {
    /// The members that were looking together when it began (server order).
    pub voters: Vec<usize>,
    /// When it ends, in the world's true ns.
    pub ends_ns: u64,
}

/// `FastLeaderElection.finalizeWait`: once a quorum agrees, a member waits this long for a
/// better vote before it decides.
const FINALIZE_WAIT_MS: u64 = 200;
/// The longest the new leader and its followers take, after the vote, to exchange epochs and
/// sync before they serve (`Leader.lead`'s `NEWLEADER` and `UPTODATE`): real elections across
/// a cut on loopback took 0.2–0.4 s in all (FIDELITY.md), so the sync is drawn below this.
const SYNC_AFTER_VOTE_MS: u64 = 200;

/// How long election number `epoch` of a run with `seed` takes: the vote's finalize wait and
/// a sync drawn from the seed and the epoch (not from the simulator's stream, so an election
/// moves no other draw).
fn election_ms(seed: u64, epoch: u64) -> u64 {
    use lockcheck_core::randomness::mix;
    const ELECTIONS: u64 = 0x0E1E_C710_0000_0001;
    FINALIZE_WAIT_MS + mix(mix(seed ^ ELECTIONS) ^ epoch) % SYNC_AFTER_VOTE_MS
}

/// A leader whose followers elected another while it could not hear them (see the module's
/// documentation): what it still believes. A paused leader is deposed too; once it runs again,
/// the followers it reaches have closed their connections to it, and it steps down at its next
/// whole-tick check.
#[derive(Clone, Debug)]
pub struct Deposed {
    /// The member (server order).
    pub member: usize,
    /// Its tree and session tracker as of the election that replaced it: the sessions' deadlines
    /// on its clock, those past them closing.
    pub tree: ZkModel,
    /// Half-ticks it has lived through as leader.
    pub ticks: u64,
    /// Per member: its half-tick count when it last heard that member.
    pub acked: Vec<u64>,
}

/// What a member's replica has applied: enough to answer a ping and a read, and to say how far
/// it is.
#[derive(Clone, Debug, Default)]
pub struct Replica {
    /// The last committed transaction it applied.
    pub zxid: Zxid,
    /// The sessions open as of that transaction.
    pub sessions: BTreeSet<SessionId>,
    /// While it lags, its own tree: the committed tree as of `zxid`, with the watches its
    /// clients left on it since (`None`: it has every commit, and reads the committed tree).
    pub stale: Option<ZkModel>,
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
            tree: ZkModel::new().quorum_expires(),
            replicas: vec![Replica::default(); n],
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
            deposed: None,
            election: None,
            caught_up: Vec::new(),
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
    /// Members (server order) that found the leader and follow it again, caught up.
    pub followed: Vec<usize>,
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

    /// Whether the leader can commit now: it serves and reaches a quorum of serving members
    /// (itself included). A proposal waits for this; the leader's acknowledgements here are
    /// instant, so a follower the leader reaches always has the latest commit.
    pub fn commits(&self, world: &World) -> bool {
        let Some(leader) = self.leader else {
            return false;
        };
        if !self.serving[leader] {
            return false;
        }
        let acks = (0..self.members.len())
            .filter(|&m| self.serving[m] && self.reaches(world, leader, m))
            .count();
        acks >= self.quorum()
    }

    /// Brings every serving member the leader reaches up to the committed tree: the leader
    /// sends each commit to its followers, and one that lagged catches up on reaching it again.
    /// One that catches up applies what it missed, so the watches its clients left on its
    /// stale tree fire for what changed since (into [`State::caught_up`]) or stay set.
    pub fn sync(&mut self, world: &World) {
        let Some(leader) = self.leader else {
            return;
        };
        if !self.serving[leader] {
            return;
        }
        let zxid = self.tree.last_zxid();
        for m in 0..self.members.len() {
            let behind_or_stale = self.replicas[m].zxid != zxid || self.replicas[m].stale.is_some();
            if self.serving[m] && self.reaches(world, leader, m) && behind_or_stale {
                let behind = std::mem::replace(
                    &mut self.replicas[m],
                    Replica {
                        zxid,
                        sessions: self.tree.session_ids().collect(),
                        stale: None,
                    },
                );
                if let Some(mut stale) = behind.stale {
                    let here: Vec<SessionId> = self
                        .clients
                        .iter()
                        .filter(|(_, a)| a.member == m)
                        .map(|(s, _)| *s)
                        .collect();
                    for session in here {
                        let watches = stale.take_watches(session);
                        self.tree
                            .rewatch(session, behind.zxid, &watches, &mut self.caught_up);
                    }
                }
            }
        }
    }

    /// Before a commit: every serving follower the leader does not reach keeps the tree it has
    /// ([`Replica::stale`]), which it answers reads from until it catches up.
    pub fn freeze_lagging(&mut self, world: &World) {
        let Some(leader) = self.leader else {
            return;
        };
        let zxid = self.tree.last_zxid();
        for m in 0..self.members.len() {
            let lags = m != leader && self.serving[m] && !self.reaches(world, leader, m);
            if lags && self.replicas[m].stale.is_none() && self.replicas[m].zxid == zxid {
                self.replicas[m].stale = Some(self.tree.clone());
            }
        }
    }

    fn stop(&mut self, member: usize, changes: &mut Changes) {
        if std::mem::replace(&mut self.serving[member], false) {
            changes.stopped.push(member);
        }
        self.touched[member].clear();
        // Its clients' connections close, and their watches with them.
        self.replicas[member].stale = None;
        if self.deposed.as_ref().is_some_and(|d| d.member == member) {
            self.deposed = None;
        }
    }

    /// Whether `member` is a deposed leader still serving (see [`Deposed`]; stopping it, or
    /// its crash, ends that).
    pub fn is_deposed(&self, member: usize) -> bool {
        self.deposed.as_ref().is_some_and(|d| d.member == member)
    }

    /// A leader's look at its followers, once a whole tick (on even half-ticks, as
    /// `Leader.lead` skips every other one): whether a quorum counting itself is still synced,
    /// a follower (a member other than `me` that `follows`) being synced while the whole tick
    /// is at most that of its last packet plus `syncLimit`. `None` on the half-ticks it does
    /// not look.
    fn quorum_synced(
        &self,
        me: usize,
        ticks: u64,
        acked: &[u64],
        follows: impl Fn(usize) -> bool,
    ) -> Option<bool> {
        if !ticks.is_multiple_of(2) {
            return None;
        }
        let synced = 1
            + (0..self.members.len())
                .filter(|&f| f != me && follows(f) && ticks / 2 <= acked[f] / 2 + SYNC_LIMIT_TICKS)
                .count();
        Some(synced >= self.quorum())
    }

    /// The leader's expirer at its monotonic `now_ms`: each session past its deadline is closed
    /// by a `closeSession` proposal, which commits only with a quorum. Without one the sessions
    /// stay closing (past their deadline, so no ping renews them: `touchSession` refuses a
    /// closing session) until the quorum is back or the leader steps down.
    pub fn expire(&mut self, world: &World, now_ms: u64, changes: &mut Changes) {
        if !self.commits(world) {
            return;
        }
        if self.tree.next_expiry_ms().is_some_and(|d| d <= now_ms) {
            // A close is a commit: a follower the leader does not reach keeps what it had.
            self.freeze_lagging(world);
        }
        let expired = self.tree.expire_due(now_ms, &mut changes.events);
        if !expired.is_empty() {
            changes.expired.extend(expired);
            self.sync(world);
        }
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
        let n = self.members.len();
        if self.is_deposed(me) {
            // It hears no follower (they follow another): it steps down at its own check. One it
            // reaches closed its connection when it left, which the old leader sees (its learner
            // handler ends): that one is not synced however recent its last packet. One behind a
            // cut still counts until its deadline, as nothing tells the leader it left.
            self.deposed.as_mut().expect("deposed").ticks += 1;
            let deposed = self.deposed.as_ref().expect("deposed");
            let unheard = |f| !self.reaches(world, me, f);
            if self.quorum_synced(me, deposed.ticks, &deposed.acked, unheard) == Some(false) {
                self.stop(me, changes);
            }
            return;
        }
        if self.leader == Some(me) && self.serving[me] {
            self.leader_ticks += 1;
            // The expirer first: a follower's report answers a ping, a round trip later.
            self.expire(world, now_ms, changes);
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
            let serving = |f| self.serving[f];
            let synced = self.quorum_synced(me, self.leader_ticks, &self.acked, serving);
            if synced == Some(false) {
                // "Not sufficient followers synced": back to an election, and so are they.
                // What it proposed without a quorum is lost with it.
                self.leader = None;
                for m in 0..n {
                    self.stop(m, changes);
                }
            } else {
                self.sync(world);
            }
        }
        self.look(world, me, now_ms, mono_of, changes);
    }

    /// When member `me` (not leading) next has something to do on its monotonic clock, apart
    /// from its half-tick look and from acting when who reaches whom changes: give its leader up
    /// (`syncLimit` ticks after it last heard it, the real follower's socket read timeout) or
    /// end an election it votes in.
    pub fn next_for_member(&self, world: &World, me: usize, now_ms: u64) -> Option<u64> {
        if self.is_deposed(me) {
            return None;
        }
        match self.leader {
            Some(leader) if leader != me && self.serving[me] => {
                Some(self.heard_leader_ms[me] + SYNC_LIMIT_TICKS * self.tree.tick_time_ms() + 1)
            }
            _ if self.serving[me] => None,
            _ => {
                let election = self.election.as_ref()?;
                if !election.voters.contains(&me) {
                    return None;
                }
                let left_ns = election.ends_ns.saturating_sub(world.true_ns());
                Some(now_ms + left_ns.div_ceil(1_000_000))
            }
        }
    }

    /// Member `me`'s look as a follower or a looking member, at its monotonic `now_ms`: a
    /// follower gives its leader up once it has not heard it for `syncLimit` ticks; a looking
    /// member follows the leader if it reaches it, or, with a quorum of looking members it
    /// reaches, begins an election, or ends one whose time has come (see the module's
    /// documentation).
    pub fn look(
        &mut self,
        world: &World,
        me: usize,
        now_ms: u64,
        mono_of: impl Fn(usize) -> u64,
        changes: &mut Changes,
    ) {
        if self.is_deposed(me) {
            return;
        }
        let tick = self.tree.tick_time_ms();
        if let Some(leader) = self.leader {
            if leader != me && self.serving[me] {
                let silent = now_ms.saturating_sub(self.heard_leader_ms[me]);
                let reset = world.power(self.members[leader]).refuses();
                if silent > SYNC_LIMIT_TICKS * tick || reset {
                    self.stop(me, changes);
                }
            }
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
                // A member that follows catches up from its leader before it serves.
                self.sync(world);
                changes.followed.push(me);
                return;
            }
        }
        let voters: Vec<usize> = (0..self.members.len())
            .filter(|&m| m == me || (!self.serving[m] && self.reaches(world, me, m)))
            .collect();
        let now_ns = world.true_ns();
        if voters.len() < self.quorum() {
            // An election it began with others ends without a leader if, when its time comes,
            // they no longer make a quorum; it is begun again when they do.
            if self
                .election
                .as_ref()
                .is_some_and(|e| e.voters.contains(&me) && now_ns >= e.ends_ns)
            {
                self.election = None;
            }
            return;
        }
        match &self.election {
            None => {
                // The vote and the new leader's sync take time; until they are done, no member
                // of the quorum serves.
                let ms = election_ms(world.scenario.seed, self.epoch);
                self.election = Some(Election {
                    voters: voters.clone(),
                    ends_ns: now_ns + ms * 1_000_000,
                });
                return;
            }
            Some(e) if now_ns < e.ends_ns => return,
            Some(_) => self.election = None,
        }
        let elected = *voters.iter().max().expect("a quorum is not empty");
        if let Some(old) = self.leader {
            // Its followers elected another. Reached, it hears of it and leads no one; cut off,
            // it serves on from its own view until its own check (see [`Deposed`]).
            if let Some(earlier) = self.deposed.as_ref().map(|d| d.member) {
                self.stop(earlier, changes);
            }
            if self.serving[old] && !voters.iter().any(|&v| self.reaches(world, v, old)) {
                self.deposed = Some(Deposed {
                    member: old,
                    tree: self.tree.clone(),
                    ticks: self.leader_ticks,
                    acked: self.acked.clone(),
                });
            } else {
                self.stop(old, changes);
            }
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
        self.tree = ZkModel::restore(self.tree.snapshot(), mono_of(elected)).quorum_expires();
        self.sync(world);
        changes.elected = Some(elected);
        tracing::debug!(
            leader = elected,
            epoch = self.epoch,
            "ensemble elected a leader"
        );
    }
}
