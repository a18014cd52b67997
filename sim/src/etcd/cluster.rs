//! A simulated etcd cluster's shared state: each member's raft state (term, role, the leader it
//! follows, its election clock in ticks), the committed keyspace and leases, and the rules by
//! which members follow, campaign, elect and step down, as etcd 3.4's raft runs them with the
//! server's settings (heartbeat 100 ms, election timeout 1000 ms, CheckQuorum on, pre-vote off).
//! What these rules produce is pinned against a real cluster in `real/tests/etcd_cluster.rs`
//! (FIDELITY.md, "etcd cluster").
//!
//! - **Ticks.** A member's raft ticks every [`TICK_MS`] on its own clock, and only while it
//!   runs: a paused member's missed ticks are not made up (Go's ticker drops them), so one that
//!   resumes neither campaigns nor steps down at once; it hears the cluster first.
//! - **Following.** A leader's tick sends a heartbeat to every member it reaches: one at its
//!   term or below follows it (its term raised, its election clock reset, its log and applied
//!   revision caught up); one at a higher term answers with that term, and the leader steps down
//!   (how a member that campaigned alone behind a cut deposes the leader at the heal: pre-vote is
//!   off).
//! - **Campaigning.** A follower or candidate whose election clock reaches its randomized timeout
//!   (10–19 ticks, drawn from the seed, the member and its term) campaigns: a new term, its own
//!   vote, and the vote of every member it reaches that is not within its leader's lease
//!   (CheckQuorum: a follower that heard its leader less than an election timeout ago ignores
//!   the request, and so does a leader) and whose log is not ahead of its own. A majority makes
//!   it leader; it appends its term's first entry, commits it with the followers it reaches,
//!   and promotes the lessor (every lease its TTL and the election timeout from then,
//!   `lessor.Promote`). Messages take no time: a vote is decided the tick it is asked for.
//! - **CheckQuorum.** A leader counts its ticks; every election timeout it looks whether a quorum
//!   (itself included) was heard since its last look, and steps down otherwise. So an isolated
//!   leader leads on for one to two election timeouts after a cut (1.97 s in every real run),
//!   while the majority elects another: a **deposed** leader, which still renews leases from its
//!   own lessor ([`State::deposed`]) and commits nothing.
//! - **Commits.** A proposal (a grant, a revocation, a transaction, a delete) is carried out by
//!   the leader it reached once that leader, still leading in the same term, reaches a quorum of
//!   members at its term; a leader that steps down or is replaced first loses it. Followers the
//!   leader reaches apply each commit at once; one cut off applies what it missed when reached
//!   again (its watches fire then).
//! - **Leases** are the leader's: its lessor expires them on its clock and revokes them by a
//!   proposal, which needs the quorum; a keep-alive is renewed by the leader alone (no raft),
//!   forwarded there by a follower.

use super::model::{EtcdModel, KeyEffect, Now};
use crate::world::World;
use lockcheck_algorithms::etcd::Revision;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

/// How often a member's raft ticks (`--heartbeat-interval`).
pub const TICK_MS: u64 = 100;
/// The election timeout in ticks (`--election-timeout` 1000 ms over the 100 ms tick).
pub const ELECTION_TICKS: u64 = 10;
/// How long a member waits for a proposal to commit, a linearizable read's leader, or a
/// forwarded keep-alive's answer before it answers with an error (`ServerConfig.ReqTimeout`:
/// 5 s and two election timeouts; every real run's failures came 7.0 s after the request).
pub const REQUEST_TIMEOUT_MS: u64 = 7_000;

/// A member's raft role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Follows `Member::lead`, if any.
    Follower,
    /// Campaigning in its term.
    Candidate,
    /// Leads its term.
    Leader,
}

/// One member's raft state.
#[derive(Clone, Debug)]
pub struct Member {
    /// Its current term.
    pub term: u64,
    /// Its role.
    pub role: Role,
    /// The leader it follows (a follower), itself (a leader), or none.
    pub lead: Option<usize>,
    /// Whom it voted for in `term`.
    pub voted_for: Option<usize>,
    /// Ticks it has lived through since its election clock was last reset (a heartbeat heard,
    /// a vote given, a campaign begun; for a leader, since its last CheckQuorum look).
    pub elapsed: u64,
    /// The ticks after which it campaigns, drawn for its term.
    pub timeout: u64,
    /// Its last log entry: (term, index).
    pub last: (u64, u64),
    /// The committed revision it has applied (what its watches see).
    pub applied: Revision,
    /// A leader: the members heard since its last CheckQuorum look.
    pub active: Vec<bool>,
}

/// A proposal waiting to commit, as the leader it reached sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposed {
    /// The leader (member order).
    pub leader: usize,
    /// Its term then.
    pub term: u64,
}

/// A watch waiting for a deletion, on the member it was made on.
#[derive(Clone, Debug)]
pub struct Watcher {
    /// The member (member order).
    pub member: usize,
    /// The watching client's node.
    pub client: usize,
    /// Its connection's address, where events are pushed.
    pub addr: SocketAddr,
    /// The key.
    pub key: String,
    /// The first revision it looks at.
    pub from: Revision,
}

/// What the members share.
pub struct State {
    /// The members' nodes, in member order (`etcd-0` first).
    pub members: Vec<usize>,
    /// Their raft state.
    pub m: Vec<Member>,
    /// The committed keyspace and leases, the lease deadlines on the lessor of the leader that
    /// last promoted it.
    pub model: EtcdModel,
    /// The last committed entry: (term, index).
    pub commit: (u64, u64),
    /// Per deposed leader (one that leads on in an old term while another leads the newer):
    /// its own lessor, as it was when the newer leader promoted. It renews keep-alives from it
    /// and commits nothing.
    pub deposed: BTreeMap<usize, EtcdModel>,
    /// The watches waiting, on every member.
    pub watchers: Vec<Watcher>,
    /// Per member: the address it pushes watch events from (set when its process starts).
    pub pushers: Vec<Option<SocketAddr>>,
    /// The run's seed: the election timeouts are drawn from it.
    seed: u64,
}

/// What a look at the cluster changed, for the history.
#[derive(Default)]
pub struct Changes {
    /// Notes, per member: what it did (elected, stepped down).
    pub notes: Vec<(usize, String)>,
    /// Key effects of commits (a lease expired), recorded at the leader.
    pub effects: Vec<KeyEffect>,
}

/// The ticks of member `me`'s election timeout in `term`: 10–19 (raft's
/// `randomizedElectionTimeout` in [electiontimeout, 2 × electiontimeout)), drawn from the seed,
/// the member and the term alone (not from the simulator's stream, so an election moves no
/// other draw).
fn election_timeout(seed: u64, me: usize, term: u64) -> u64 {
    use lockcheck_core::randomness::mix;
    const ELECTIONS: u64 = 0xE7CD_E1EC_7100_0001;
    ELECTION_TICKS + mix(mix(mix(seed ^ ELECTIONS) ^ me as u64) ^ term) % ELECTION_TICKS
}

/// A cluster's shared state, kept in the [`World`] (`World::etcd_cluster`).
pub struct Cluster(Mutex<State>);

impl Cluster {
    /// The cluster of `members` (nodes, in member order), as real mode's launcher hands it to a
    /// run: every member at term 2 following the highest, which leads (a fresh cluster's
    /// election is over before the run starts), the lessor empty.
    pub fn new(members: Vec<usize>, seed: u64) -> Cluster {
        let n = members.len();
        let leader = n - 1;
        let m = (0..n)
            .map(|i| Member {
                term: 2,
                role: if i == leader {
                    Role::Leader
                } else {
                    Role::Follower
                },
                lead: Some(leader),
                voted_for: Some(leader),
                elapsed: 0,
                timeout: election_timeout(seed, i, 2),
                last: (2, 1),
                applied: 1,
                active: vec![false; n],
            })
            .collect();
        Cluster(Mutex::new(State {
            members,
            m,
            model: EtcdModel::new(),
            commit: (2, 1),
            deposed: BTreeMap::new(),
            watchers: Vec::new(),
            pushers: vec![None; n],
            seed,
        }))
    }

    /// The state, locked (never across an await).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().expect("never poisoned")
    }
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

    /// The other members `me` reaches now.
    fn reached(&self, world: &World, me: usize) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&o| o != me && self.reaches(world, me, o))
            .collect()
    }

    /// Whether `leader` leads now and reaches a quorum of members at its term (itself
    /// included): what a commit, and a linearizable read's confirmation, needs.
    pub fn commits(&self, world: &World, leader: usize) -> bool {
        let me = &self.m[leader];
        if me.role != Role::Leader {
            return false;
        }
        let acks = (0..self.members.len())
            .filter(|&f| self.m[f].term <= me.term && self.reaches(world, leader, f))
            .count();
        acks >= self.quorum()
    }

    /// The leader a request at `member` goes to: itself when it leads, else the leader it
    /// follows if it reaches it; `None` while it has none it reaches.
    pub fn leader_for(&self, world: &World, member: usize) -> Option<usize> {
        match self.m[member].role {
            Role::Leader => Some(member),
            _ => self.m[member]
                .lead
                .filter(|&l| l != member && self.reaches(world, member, l))
                .filter(|&l| self.m[l].role == Role::Leader),
        }
    }

    /// Whether `leader` is deposed: it leads an older term than another leader.
    pub fn is_deposed(&self, leader: usize) -> bool {
        self.deposed.contains_key(&leader)
    }

    /// The lessor `leader` renews keep-alives from: its own if it is deposed, else the
    /// committed one.
    pub fn lessor_of(&mut self, leader: usize) -> &mut EtcdModel {
        if self.deposed.contains_key(&leader) {
            self.deposed.get_mut(&leader).expect("checked")
        } else {
            &mut self.model
        }
    }

    /// Commits at `leader` (which [`State::commits`]): a new entry at its term, every
    /// follower it reaches caught up.
    pub fn commit_entry(&mut self, world: &World, leader: usize) {
        let term = self.m[leader].term;
        let index = self.commit.1.max(self.m[leader].last.1) + 1;
        self.m[leader].last = (term, index);
        self.commit = (term, index);
        self.replicate(world, leader);
    }

    /// Brings every member `leader` reaches at its term up to its log and the committed state.
    fn replicate(&mut self, world: &World, leader: usize) {
        let (last, revision) = (self.m[leader].last, self.model.revision());
        for f in 0..self.members.len() {
            if self.m[f].term <= self.m[leader].term && self.reaches(world, leader, f) {
                self.m[f].last = last;
                self.m[f].applied = revision;
            }
        }
    }

    /// Member `me` steps down to follower (at `term`, following no one).
    fn step_down(&mut self, me: usize, term: u64, why: &str, changes: &mut Changes) {
        let was_leader = self.m[me].role == Role::Leader;
        let m = &mut self.m[me];
        if term > m.term {
            m.term = term;
            m.voted_for = None;
        }
        m.role = Role::Follower;
        m.lead = None;
        m.elapsed = 0;
        m.timeout = election_timeout(self.seed, me, m.term);
        if was_leader {
            self.deposed.remove(&me);
            changes
                .notes
                .push((me, format!("stepped down ({why}): leads no one")));
        }
    }

    /// Member `me`'s tick, at its clocks `now` (see the module's documentation); `now_of`
    /// reads another member's clocks.
    pub fn tick(
        &mut self,
        world: &World,
        me: usize,
        now_of: impl Fn(usize) -> Now,
        changes: &mut Changes,
    ) {
        let n = self.members.len();
        self.m[me].elapsed += 1;
        if self.m[me].role == Role::Leader {
            // Heartbeats: followers at its term or below follow; a higher term deposes it.
            let term = self.m[me].term;
            for f in self.reached(world, me) {
                if self.m[f].term > term {
                    let higher = self.m[f].term;
                    self.step_down(
                        me,
                        higher,
                        &format!("a member answered term {higher}"),
                        changes,
                    );
                    return;
                }
                let follower = &mut self.m[f];
                if follower.term < term {
                    follower.voted_for = None;
                }
                follower.term = term;
                follower.role = Role::Follower;
                follower.lead = Some(me);
                follower.elapsed = 0;
                self.m[me].active[f] = true;
            }
            if !self.is_deposed(me) {
                self.replicate(world, me);
            }
            if self.m[me].elapsed >= ELECTION_TICKS {
                let heard = 1 + self.m[me].active.iter().filter(|&&a| a).count();
                self.m[me].active = vec![false; n];
                self.m[me].elapsed = 0;
                if heard < self.quorum() {
                    self.step_down(
                        me,
                        term,
                        "CheckQuorum: no quorum heard in an election timeout",
                        changes,
                    );
                }
            }
            return;
        }
        if self.m[me].elapsed >= self.m[me].timeout {
            self.campaign(world, me, now_of, changes);
        }
    }

    /// Member `me` campaigns (see the module's documentation).
    fn campaign(
        &mut self,
        world: &World,
        me: usize,
        now_of: impl Fn(usize) -> Now,
        changes: &mut Changes,
    ) {
        let n = self.members.len();
        let term = self.m[me].term + 1;
        {
            let m = &mut self.m[me];
            m.term = term;
            m.role = Role::Candidate;
            m.lead = None;
            m.voted_for = Some(me);
            m.elapsed = 0;
            m.timeout = election_timeout(self.seed, me, term);
        }
        let last = self.m[me].last;
        let mut votes = 1;
        for v in self.reached(world, me) {
            let voter = &self.m[v];
            let in_lease = voter.role == Role::Leader
                || (voter.lead.is_some() && voter.elapsed < ELECTION_TICKS);
            if in_lease || voter.term > term {
                continue;
            }
            let voter = &mut self.m[v];
            if voter.term < term {
                let was_leader = voter.role == Role::Leader;
                voter.term = term;
                voter.voted_for = None;
                voter.role = Role::Follower;
                voter.lead = None;
                debug_assert!(!was_leader);
            }
            if voter.voted_for.is_none() && last >= voter.last {
                voter.voted_for = Some(me);
                voter.elapsed = 0;
                votes += 1;
            }
        }
        if votes < self.quorum() {
            return;
        }
        // Elected: followers it reaches follow, its term's first entry commits, and its lessor
        // is promoted. A leader of an older term it does not reach leads on, deposed, with the
        // lessor it had.
        {
            let m = &mut self.m[me];
            m.role = Role::Leader;
            m.lead = Some(me);
            m.elapsed = 0;
            m.active = vec![false; n];
        }
        for f in self.reached(world, me) {
            let follower = &mut self.m[f];
            if follower.term <= term {
                follower.term = term;
                follower.role = Role::Follower;
                follower.lead = Some(me);
                follower.elapsed = 0;
            }
        }
        for old in (0..n).filter(|&o| o != me && self.m[o].role == Role::Leader) {
            if !self.deposed.contains_key(&old) {
                self.deposed.insert(old, self.model.clone());
            }
        }
        self.commit_entry(world, me);
        self.model.promote(now_of(me));
        changes
            .notes
            .push((me, format!("elected leader (term {term}); leases promoted")));
    }

    /// The leader's lessor at its clocks `now`: leases past their TTL are revoked, which commits
    /// only with the quorum (without it they wait for it, or for the leader's end).
    pub fn expire(&mut self, world: &World, leader: usize, now: Now, changes: &mut Changes) {
        if self.is_deposed(leader) || !self.commits(world, leader) {
            return;
        }
        let mut effects = Vec::new();
        self.model.expire_due(now, &mut effects);
        if !effects.is_empty() {
            self.commit_entry(world, leader);
            changes.effects.extend(effects);
        }
    }

    /// Whether a proposal `proposed` is lost: its leader no longer leads that term.
    pub fn lost(&self, proposed: Proposed) -> bool {
        let m = &self.m[proposed.leader];
        m.role != Role::Leader || m.term != proposed.term
    }

    /// The leader of the newest term any member leads (a member campaigning alone behind a
    /// cut may have a newer term and lead nothing).
    pub fn current_leader(&self) -> Option<usize> {
        (0..self.members.len())
            .filter(|&l| self.m[l].role == Role::Leader)
            .max_by_key(|&l| self.m[l].term)
    }

    /// Member `me` (re)starts: raft's term and vote are on disk, so it keeps them, and follows
    /// no one until a leader's heartbeat reaches it.
    pub fn restart(&mut self, me: usize, changes: &mut Changes) {
        let term = self.m[me].term;
        self.step_down(me, term, "restarted", changes);
    }
}

#[cfg(test)]
mod tests {
    //! The rules against the real cluster's figures (`real/tests/etcd_cluster.rs`, FIDELITY.md
    //! "etcd cluster"), ticking every member once per [`TICK_MS`] in member order, with no
    //! clock of its own: each test says what a tick count means.

    use super::*;
    use lockcheck_core::scenario::{Algorithm, CrashScope, Scenario};

    /// A world with a 3-member cluster (nodes of the scenario's topology) and the cluster.
    fn cluster() -> (World, State) {
        let mut scenario = Scenario::new(Algorithm::EtcdMutex);
        scenario.params.nodes = Some(3);
        let world = World::new(scenario);
        let members = world
            .topology
            .with_role(lockcheck_core::topology::Role::Server);
        let state = Cluster::new(members, 7).0.into_inner().unwrap();
        (world, state)
    }

    /// Runs `test` where a [`World`] can be made (it reads madsim's context).
    fn in_runtime(test: fn()) {
        madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default())
            .block_on(async move { test() });
    }

    fn now(ms: u64) -> impl Fn(usize) -> Now {
        move |_| Now::steady(ms)
    }

    /// Ticks every running member once, at `ms`; the notes made.
    fn tick_all(world: &World, state: &mut State, ms: u64) -> Vec<(usize, String)> {
        let mut changes = Changes::default();
        for m in 0..state.members.len() {
            let node = state.members[m];
            if !world.is_down(node) && !world.is_paused(node) {
                state.tick(world, m, now(ms), &mut changes);
            }
        }
        changes.notes
    }

    fn cut(world: &World, state: &State, a: usize, b: usize) {
        let (a, b) = (state.members[a], state.members[b]);
        world.links().cut(a, b, true);
        world.links().cut(b, a, true);
    }

    fn heal(world: &World, state: &State, a: usize, b: usize) {
        let (a, b) = (state.members[a], state.members[b]);
        world.links().heal(a, b, true);
        world.links().heal(b, a, true);
    }

    /// A leader cut off from both followers: they elect another within one to two election
    /// timeouts (real: 0.98-1.80 s); it leads on, deposed, renewing leases from its own lessor
    /// (real: `TTL 3` at once) and committing nothing, until CheckQuorum steps it down one to
    /// two election timeouts after the cut (real: 1.97 s, the cut just after a look); the
    /// majority's leader promotes every lease to its TTL and the election timeout.
    #[test]
    fn an_isolated_leader_is_replaced_leads_on_deposed_and_steps_down_by_check_quorum() {
        in_runtime(isolated_leader);
    }

    fn isolated_leader() {
        let (world, mut s) = cluster();
        let (lease, _) = s.model.grant(3, Now::steady(0));
        for t in 1..=5 {
            tick_all(&world, &mut s, t * TICK_MS);
        }
        let old = s.current_leader().expect("a leader");
        for other in (0..3).filter(|&o| o != old) {
            cut(&world, &s, old, other);
        }
        let (mut elected, mut stepped_down) = (None, None);
        for t in 6..=40 {
            for (m, note) in tick_all(&world, &mut s, t * TICK_MS) {
                if note.starts_with("elected") && elected.is_none() {
                    elected = Some((t - 5, m));
                    // Two leaders: the old one renews from its own lessor, and cannot commit.
                    assert!(s.is_deposed(old));
                    assert!(!s.commits(&world, old));
                    assert_eq!(
                        s.lessor_of(old).renew(lease, Now::steady(t * TICK_MS)),
                        super::super::model::Renewal::Renewed(3)
                    );
                    assert_eq!(
                        s.model.next_expiry_ms(Now::steady(t * TICK_MS)),
                        Some((t * TICK_MS + 3_000 + 1_000).div_ceil(500) * 500),
                        "promoted: TTL and the election timeout from the election"
                    );
                }
                if m == old && note.starts_with("stepped down (CheckQuorum") {
                    stepped_down = Some(t - 5);
                }
            }
        }
        let (ticks, new) = elected.expect("the majority elected a leader");
        assert_ne!(new, old);
        assert!(
            (ELECTION_TICKS - 1..2 * ELECTION_TICKS).contains(&ticks),
            "{ticks} ticks"
        );
        let down = stepped_down.expect("CheckQuorum stepped the old leader down");
        assert!((1..=2 * ELECTION_TICKS).contains(&down), "{down} ticks");
        assert!(!s.is_deposed(old));
        assert_ne!(s.m[old].role, Role::Leader, "it campaigns alone now");
    }

    /// At the heal, the member cut off has campaigned alone to a higher term (pre-vote off):
    /// the leader's heartbeat finds it and steps down, and an election follows (real: every
    /// heal, 0.5-1.2 s); in the end one leader of the highest term leads every member, and the
    /// member cut off has every commit.
    #[test]
    fn a_heal_forces_an_election_and_every_member_follows_one_leader() {
        in_runtime(heal_forces_an_election);
    }

    fn heal_forces_an_election() {
        let (world, mut s) = cluster();
        for t in 1..=5 {
            tick_all(&world, &mut s, t * TICK_MS);
        }
        let old = s.current_leader().unwrap();
        for other in (0..3).filter(|&o| o != old) {
            cut(&world, &s, old, other);
        }
        for t in 6..=60 {
            tick_all(&world, &mut s, t * TICK_MS);
        }
        let majority = s.current_leader().unwrap();
        assert_ne!(majority, old);
        s.commit_entry(&world, majority);
        assert!(s.m[old].term > s.m[majority].term, "campaigned alone");
        for other in (0..3).filter(|&o| o != old) {
            heal(&world, &s, old, other);
        }
        let mut notes = Vec::new();
        for t in 61..=120 {
            notes.extend(tick_all(&world, &mut s, t * TICK_MS));
        }
        assert!(
            notes
                .iter()
                .any(|(m, n)| *m == majority && n.contains("a member answered term")),
            "{notes:?}"
        );
        let leader = s.current_leader().expect("a leader again");
        assert!(s.m.iter().all(|m| m.term == s.m[leader].term));
        assert!(s.m.iter().all(|m| m.lead == Some(leader)));
        assert!(s.m.iter().all(|m| m.last == s.m[leader].last));
    }

    /// A leader's process killed: its followers elect another once its heartbeats stop
    /// (real: 1.1-1.3 s after kill -9), and no proposal to it is handed to the next leader.
    #[test]
    fn a_killed_leader_is_replaced_and_its_proposals_are_lost() {
        in_runtime(killed_leader);
    }

    fn killed_leader() {
        let (world, mut s) = cluster();
        for t in 1..=5 {
            tick_all(&world, &mut s, t * TICK_MS);
        }
        let old = s.current_leader().unwrap();
        let proposed = Proposed {
            leader: old,
            term: s.m[old].term,
        };
        world.set_crashed(s.members[old], CrashScope::Process);
        let mut elected = None;
        for t in 6..=40 {
            if tick_all(&world, &mut s, t * TICK_MS)
                .iter()
                .any(|(_, n)| n.starts_with("elected"))
            {
                elected.get_or_insert(t - 5);
            }
        }
        let ticks = elected.expect("elected");
        assert!(
            (ELECTION_TICKS - 1..2 * ELECTION_TICKS).contains(&ticks),
            "{ticks}"
        );
        world.set_restarted(s.members[old]);
        s.restart(old, &mut Changes::default());
        assert!(
            s.lost(proposed),
            "the old term's proposal is not the new leader's"
        );
    }
}
