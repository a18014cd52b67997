//! What must hold, as pure functions of a history (no I/O, no simulator): testable on
//! hand-written histories.
//!
//! - **Mutual exclusion**, judged only on accesses the resource ACCEPTED: a client's critical
//!   section runs from its accepted `enter` to its accepted `exit`; if any other client's access
//!   was accepted in between, two clients were inside at once. (A section whose exit never comes,
//!   say because the client crashed, writes nothing after its enter, so it cannot interleave.)
//!   Readers of a read/write lock may overlap each other, never a writer.
//! - **Foreign release**: a server deleted a lock value at the request of a node other than the
//!   one that wrote it.
//! - **Foreign extend**: a server moved a lock's expiry at the request of a node other than the
//!   one whose lock it was (an extend without an owner check).
//! - **Deadlock**: after the faults and the clients stopped, the probe could not acquire the lock
//!   within its wait.
//! - **Stuck** ([`stuck`]): a waiter waited on while no client held the lock and the lock service
//!   was reachable, for longer than a bound stated in the finding (a lost wake-up).
//! - **Order** ([`fifo`], [`sequence_order`]): a fair or sequential lock passed a waiter over.
//!
//! Stale accesses rejected by a fencing resource are reported separately: they are the fence
//! doing its job, not violations.

use crate::history::{Entry, KeyChange, Op};
use crate::topology::Topology;
use lockcheck_algorithms::describe::Order;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// One invariant per file, as TigerBeetle keeps its checkers.
mod deadlock;
mod foreign_extend;
mod foreign_release;
mod mutual_exclusion;
mod order;
mod reach;
mod reentrancy;
mod stuck;
pub use deadlock::deadlock;
pub use foreign_extend::foreign_extends;
pub use foreign_release::foreign_releases;
pub use mutual_exclusion::mutual_exclusion;
pub use order::{fifo, sequence_order};
pub use reentrancy::reentrancy;
pub use stuck::{stuck, Liveness};

/// The kind of a violation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// Two clients inside the critical section at once.
    MutualExclusion,
    /// A lock released by a client that did not hold it.
    ForeignRelease,
    /// A lock's expiry moved by a client that did not hold it (an extend without an owner
    /// check): the extender is told it still holds a lock that is another's.
    ForeignExtend,
    /// The lock could not be acquired again after the faults stopped (held forever, or the
    /// service unusable, e.g. a WAIT no replica can answer).
    Deadlock,
    /// A reentrant lock was freed while its owner still held it at an outer level.
    FreedWhileHeld,
    /// A fair lock granted a waiter ahead of one queued before it (or a newcomer jumped the
    /// queue).
    FifoOrder,
    /// A waiter waited on while the lock was free and reachable (a lost wake-up).
    Stuck,
}

/// What a finding means for the people who read its headline (and the CI that reads its exit
/// code), from the most to the least serious.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Safety: two holders at once, or a lock freed under its holder. Exit code 1. The
    /// variants are in order of seriousness; exit codes are kept as they were first given.
    Unsafe,
    /// Liveness: the lock could not be taken again after the faults ended. Exit code 3.
    Deadlock,
    /// Liveness: a waiter was not given a lock that was free and reachable. Exit code 5.
    Stuck,
    /// Fairness: a waiter was passed by one queued after it. Exit code 4.
    Order,
}

impl Severity {
    /// The word a headline starts with.
    pub fn word(self) -> &'static str {
        match self {
            Severity::Unsafe => "UNSAFE",
            Severity::Deadlock => "DEADLOCK",
            Severity::Stuck => "STUCK",
            Severity::Order => "ORDER",
        }
    }

    /// The exit code of a run, search or replay whose worst finding is this: 1 for safety, 3
    /// for a deadlock, 4 for order, 5 for a stuck waiter (0 is nothing found, 2 bad input).
    pub fn exit_code(self) -> u8 {
        match self {
            Severity::Unsafe => 1,
            Severity::Deadlock => 3,
            Severity::Order => 4,
            Severity::Stuck => 5,
        }
    }

    /// The worst of `violations`, if any.
    pub fn worst(violations: &[Violation]) -> Option<Severity> {
        violations.iter().map(|v| v.kind.severity()).min()
    }
}

/// The safety answer of one run, whatever else it found: a run that ends in a deadlock or a
/// stuck waiter still says whether two clients held the lock at once (or a lock was freed under
/// its holder), so a liveness finding never hides the safety one (or its absence). Over the
/// violations its world can see: a real run (`sees_server_keys` false) does not see the
/// servers' keys ([`ViolationKind::reads_server_keys`]), so it answers for two holders alone.
pub fn safety_answer(violations: &[Violation], sees_server_keys: bool) -> String {
    let unsafe_kinds: std::collections::BTreeSet<ViolationKind> = violations
        .iter()
        .map(|v| v.kind)
        .filter(|k| k.is_safety())
        .collect();
    if unsafe_kinds.is_empty() && sees_server_keys {
        "safety held in this run: no two holders at once, no lock freed or extended by a client \
         that did not hold it"
            .into()
    } else if unsafe_kinds.is_empty() {
        "safety held in this run: no two holders at once (a lock freed under its holder is \
         judged in simulation only)"
            .into()
    } else {
        let kinds: Vec<String> = unsafe_kinds.iter().map(|k| format!("{k:?}")).collect();
        format!("safety violated in this run: {}", kinds.join(", "))
    }
}

/// The kinds of violation in `violations` that a real run can see too (not those read from the
/// servers' keys, which only the simulation records), each once, in the kinds' order: what a
/// real run and the simulation of the same scenario are compared by.
pub fn kinds_both_worlds_see(violations: &[Violation]) -> Vec<ViolationKind> {
    let kinds: std::collections::BTreeSet<ViolationKind> = violations
        .iter()
        .map(|v| v.kind)
        .filter(|k| !k.reads_server_keys())
        .collect();
    kinds.into_iter().collect()
}

impl ViolationKind {
    /// Every kind, in order.
    pub const ALL: [ViolationKind; 7] = [
        ViolationKind::MutualExclusion,
        ViolationKind::ForeignRelease,
        ViolationKind::ForeignExtend,
        ViolationKind::Deadlock,
        ViolationKind::FreedWhileHeld,
        ViolationKind::FifoOrder,
        ViolationKind::Stuck,
    ];

    /// Its name in files and on the command line (`mutual_exclusion`, …).
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::MutualExclusion => "mutual_exclusion",
            ViolationKind::ForeignRelease => "foreign_release",
            ViolationKind::ForeignExtend => "foreign_extend",
            ViolationKind::Deadlock => "deadlock",
            ViolationKind::FreedWhileHeld => "freed_while_held",
            ViolationKind::FifoOrder => "fifo_order",
            ViolationKind::Stuck => "stuck",
        }
    }

    /// The kind named `name` (`-` taken as `_`).
    pub fn from_name(name: &str) -> Option<ViolationKind> {
        let name = name.replace('-', "_");
        ViolationKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether finding it needs the servers' own view (their keys, queues and nodes, recorded as
    /// key changes): the simulation has it, a real run (which sees only its clients and the
    /// resource) does not, so these are checked in simulation only.
    pub fn reads_server_keys(self) -> bool {
        match self {
            ViolationKind::ForeignRelease
            | ViolationKind::ForeignExtend
            | ViolationKind::FreedWhileHeld
            | ViolationKind::FifoOrder => true,
            ViolationKind::MutualExclusion | ViolationKind::Deadlock | ViolationKind::Stuck => {
                false
            }
        }
    }

    /// What the violation means: see [`Severity`].
    pub fn severity(self) -> Severity {
        match self {
            ViolationKind::MutualExclusion
            | ViolationKind::ForeignRelease
            | ViolationKind::ForeignExtend
            | ViolationKind::FreedWhileHeld => Severity::Unsafe,
            ViolationKind::Deadlock => Severity::Deadlock,
            ViolationKind::Stuck => Severity::Stuck,
            ViolationKind::FifoOrder => Severity::Order,
        }
    }

    /// Whether it breaks safety (two holders, a lock freed under its holder, or extended by a
    /// client that did not hold it), as opposed to
    /// liveness (deadlock) or fairness (order).
    pub fn is_safety(self) -> bool {
        matches!(
            self,
            ViolationKind::MutualExclusion
                | ViolationKind::ForeignRelease
                | ViolationKind::ForeignExtend
                | ViolationKind::FreedWhileHeld
        )
    }
}

/// One thing that must not happen, and did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// What kind.
    pub kind: ViolationKind,
    /// The clients involved (for mutual exclusion: the earlier holder first).
    pub clients: Vec<String>,
    /// Their lock tokens, in the same order.
    pub tokens: Vec<String>,
    /// True time at which it became certain, in ns.
    pub at_ns: u64,
    /// History indices of the entries that show it.
    pub entries: Vec<usize>,
    /// One sentence for people.
    pub story: String,
}

/// An access the fencing resource turned away.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StaleAccess {
    /// Who.
    pub client: String,
    /// Its fencing token (none: it had none).
    pub fence: Option<u64>,
    /// When, true time in ns.
    pub at_ns: u64,
    /// History index of the resource's entry.
    pub entry: usize,
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// Every check that applies to an algorithm promising `order` among its waiters, violations in
/// order of time.
pub fn check(history: &[Entry], liveness: &Liveness, order: Order) -> Vec<Violation> {
    let mut all = mutual_exclusion(history);
    all.extend(foreign_releases(history));
    all.extend(foreign_extends(history));
    all.extend(deadlock(history));
    all.extend(stuck(history, liveness));
    all.extend(reentrancy(history));
    // An order is checked where the algorithm promises it (its registry description).
    match order {
        Order::Fifo => all.extend(fifo(history, liveness)),
        Order::Sequence => all.extend(sequence_order(history)),
        Order::None => {}
    }
    all.sort_by_key(|v| (v.at_ns, v.kind));
    all
}

/// How many waiters the releases of a ZooKeeper lock woke: the herd effect seed 001 warns about.
/// A release is a lock node deleted (released, given up, or gone with its session); a wake-up is
/// a `node_deleted` watch that deletion fired at a client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wakeups {
    /// Lock nodes deleted.
    pub releases: u32,
    /// Clients those deletions woke.
    pub wakeups: u32,
    /// The most clients one deletion woke.
    pub max_per_release: u32,
}

impl Wakeups {
    /// Whether the run released no ZooKeeper node (a Redis lock, or nothing happened).
    pub fn is_empty(&self) -> bool {
        self.releases == 0
    }

    /// Wake-ups per release, on average.
    pub fn mean(&self) -> f64 {
        if self.releases == 0 {
            0.0
        } else {
            f64::from(self.wakeups) / f64::from(self.releases)
        }
    }
}

/// Wake-ups per release. ZooKeeper paths are absolute (they start with `/`), which tells a
/// ZooKeeper node from a Redis key; a server records the watches a deletion fires right after the
/// deletion, before the path can be created again.
pub fn wakeups(history: &[Entry]) -> Wakeups {
    let mut per_release: Vec<u32> = Vec::new();
    // The last deletion of each path, while no new node has taken the path.
    let mut deleted: BTreeMap<&str, usize> = BTreeMap::new();
    for e in history {
        match &e.op {
            Op::Key { key, change, .. } if key.starts_with('/') => match change {
                KeyChange::Deleted | KeyChange::Expired => {
                    deleted.insert(key, per_release.len());
                    per_release.push(0);
                }
                KeyChange::Set => {
                    deleted.remove(key.as_str());
                }
                _ => {}
            },
            Op::Watch { path, event, .. } if event == "node_deleted" => {
                if let Some(&release) = deleted.get(path.as_str()) {
                    per_release[release] += 1;
                }
            }
            _ => {}
        }
    }
    Wakeups {
        releases: per_release.len() as u32,
        wakeups: per_release.iter().sum(),
        max_per_release: per_release.iter().copied().max().unwrap_or(0),
    }
}

/// Acquisition attempts and how many succeeded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    /// Attempts (a fold of refusals counts as its `count`).
    pub attempts: u64,
    /// Attempts that acquired the lock.
    pub acquired: u64,
}

/// How available the lock was, by how many servers the attempting client could reach (the Redis
/// documentation's liveness property B: a minority of masters down must not stop acquisitions).
/// Attempts also fail because another client holds the lock, so compare the rows with each other,
/// not with 100 %.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Availability {
    /// Every server reachable.
    pub all_reachable: Rate,
    /// A minority unreachable (crashed or partitioned).
    pub minority_unreachable: Rate,
    /// A majority unreachable.
    pub majority_unreachable: Rate,
}

/// Attempts bucketed by how many servers were unreachable.
pub fn availability(history: &[Entry]) -> Availability {
    let mut a = Availability::default();
    for e in history {
        if e.node == Topology::PROBE {
            continue;
        }
        if let Op::Attempt {
            acquired,
            of,
            unreachable,
            ..
        } = e.op
        {
            let rate = if unreachable == 0 {
                &mut a.all_reachable
            } else if unreachable < of / 2 + 1 {
                &mut a.minority_unreachable
            } else {
                &mut a.majority_unreachable
            };
            let count = e.attempts();
            rate.attempts = rate.attempts.saturating_add(count);
            if acquired {
                rate.acquired = rate.acquired.saturating_add(count);
            }
        }
    }
    a
}

/// Accesses the resource rejected (only a fencing resource rejects).
pub fn stale_accesses(history: &[Entry]) -> Vec<StaleAccess> {
    history
        .iter()
        .filter_map(|e| match &e.op {
            Op::Resource {
                client,
                fence,
                accepted: false,
                ..
            } => Some(StaleAccess {
                client: client.clone(),
                fence: *fence,
                at_ns: e.true_ns,
                entry: e.index,
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{History, Kind, Phase};

    fn access(h: &mut History, t: u64, client: &str, phase: Phase, token: &str, accepted: bool) {
        touch(h, t, client, phase, token, accepted, false);
    }

    fn touch(
        h: &mut History,
        t: u64,
        client: &str,
        phase: Phase,
        token: &str,
        accepted: bool,
        shared: bool,
    ) {
        h.push(
            t,
            "resource",
            t as i64,
            Kind::Observe,
            Op::Resource {
                client: client.into(),
                phase,
                token: token.into(),
                fence: None,
                accepted,
                shared,
            },
        );
    }

    #[test]
    fn readers_may_overlap_each_other_but_never_a_writer() {
        let read = |h: &mut History, t, c: &str, p, tok: &str| touch(h, t, c, p, tok, true, true);
        let mut h = History::default();
        read(&mut h, 1, "client-0", Phase::Enter, "r0");
        read(&mut h, 2, "client-1", Phase::Enter, "r1");
        read(&mut h, 3, "client-0", Phase::Exit, "r0");
        read(&mut h, 4, "client-1", Phase::Exit, "r1");
        assert!(mutual_exclusion(&h.entries).is_empty(), "two readers share");
        // A writer inside a reader's section, and a reader inside a writer's.
        read(&mut h, 5, "client-0", Phase::Enter, "r2");
        touch(&mut h, 6, "client-1", Phase::Enter, "w", true, false);
        touch(&mut h, 7, "client-1", Phase::Exit, "w", true, false);
        read(&mut h, 8, "client-0", Phase::Exit, "r2");
        touch(&mut h, 9, "client-2", Phase::Enter, "w2", true, false);
        read(&mut h, 10, "client-0", Phase::Enter, "r3");
        read(&mut h, 11, "client-0", Phase::Exit, "r3");
        touch(&mut h, 12, "client-2", Phase::Exit, "w2", true, false);
        let v = mutual_exclusion(&h.entries);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].tokens, vec!["r2", "w"]);
        assert_eq!(v[1].tokens, vec!["w2", "r3"]);
    }

    fn violation(kind: ViolationKind) -> Violation {
        Violation {
            kind,
            clients: vec![],
            tokens: vec![],
            at_ns: 0,
            entries: vec![],
            story: String::new(),
        }
    }

    #[test]
    fn every_kind_is_named_as_files_name_it() {
        for kind in ViolationKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json.as_str(), Some(kind.name()));
            assert_eq!(ViolationKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(
            ViolationKind::from_name("foreign-extend"),
            Some(ViolationKind::ForeignExtend)
        );
        assert_eq!(ViolationKind::from_name("two-holders"), None);
    }

    #[test]
    fn a_liveness_finding_still_gives_the_safety_answer() {
        let deadlock = [
            violation(ViolationKind::Deadlock),
            violation(ViolationKind::Stuck),
        ];
        assert_eq!(Severity::worst(&deadlock), Some(Severity::Deadlock));
        assert!(safety_answer(&deadlock, true).starts_with("safety held"));
        assert!(safety_answer(&deadlock, false).contains("simulation only"));
        let both = [
            violation(ViolationKind::Deadlock),
            violation(ViolationKind::MutualExclusion),
            violation(ViolationKind::ForeignRelease),
        ];
        assert_eq!(Severity::worst(&both), Some(Severity::Unsafe));
        assert_eq!(
            safety_answer(&both, true),
            "safety violated in this run: MutualExclusion, ForeignRelease"
        );
    }

    #[test]
    fn wakeups_count_the_watches_each_deletion_fires() {
        let mut h = History::default();
        let watch = |h: &mut History, path: &str, event: &str, to: &str| {
            h.push(
                h.entries.len() as u64,
                "zk-0",
                0,
                Kind::Observe,
                Op::Watch {
                    path: path.into(),
                    event: event.into(),
                    to: to.into(),
                },
            )
        };
        zk_node(&mut h, KeyChange::Set, "/lock");
        zk_node(&mut h, KeyChange::Deleted, "/lock");
        for c in ["client-1", "client-2", "client-3"] {
            watch(&mut h, "/lock", "node_deleted", c);
        }
        zk_node(&mut h, KeyChange::Set, "/lock");
        // A creation watch of the new node, and a stray deletion watch after it: neither counts.
        watch(&mut h, "/lock", "node_created", "client-4");
        watch(&mut h, "/lock", "node_deleted", "client-4");
        zk_node(&mut h, KeyChange::Expired, "/lock");
        watch(&mut h, "/lock", "node_deleted", "client-2");
        // A Redis key is not a ZooKeeper node.
        zk_node(&mut h, KeyChange::Deleted, "lock");
        let w = wakeups(&h.entries);
        assert_eq!(
            w,
            Wakeups {
                releases: 2,
                wakeups: 4,
                max_per_release: 3
            }
        );
        assert_eq!(w.mean(), 2.0);
    }

    #[test]
    fn interleaved_sections_violate_mutual_exclusion() {
        let mut h = History::default();
        access(&mut h, 1, "client-0", Phase::Enter, "a", true);
        access(&mut h, 2, "client-1", Phase::Enter, "b", true);
        access(&mut h, 3, "client-1", Phase::Exit, "b", true);
        access(&mut h, 4, "client-0", Phase::Exit, "a", true);
        let v = mutual_exclusion(&h.entries);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].clients, vec!["client-0", "client-1"]);
        assert_eq!(v[0].entries, vec![0, 1, 3]);
    }

    #[test]
    fn sequential_sections_and_unfinished_ones_are_fine() {
        let mut h = History::default();
        access(&mut h, 1, "client-0", Phase::Enter, "a", true);
        access(&mut h, 2, "client-0", Phase::Exit, "a", true);
        access(&mut h, 3, "client-1", Phase::Enter, "b", true);
        access(&mut h, 4, "client-1", Phase::Exit, "b", true);
        // client-0 enters and never exits (crashed): nothing of it interleaves.
        access(&mut h, 5, "client-0", Phase::Enter, "c", true);
        access(&mut h, 6, "client-1", Phase::Enter, "d", true);
        access(&mut h, 7, "client-1", Phase::Exit, "d", true);
        assert!(mutual_exclusion(&h.entries).is_empty());
    }

    #[test]
    fn rejected_accesses_do_not_count_but_are_listed() {
        let mut h = History::default();
        access(&mut h, 1, "client-0", Phase::Enter, "a", true);
        access(&mut h, 2, "client-1", Phase::Enter, "b", true);
        access(&mut h, 3, "client-1", Phase::Exit, "b", true);
        access(&mut h, 4, "client-0", Phase::Exit, "a", false);
        assert!(mutual_exclusion(&h.entries).is_empty());
        assert_eq!(stale_accesses(&h.entries).len(), 1);
    }

    #[test]
    fn deleting_the_lock_on_an_inner_release_breaks_reentrancy() {
        let mut h = History::default();
        let acquired = Op::Acquire {
            token: Some("owner".into()),
            fence: None,
            valid_ns: None,
            error: None,
            shared: false,
        };
        let release = Op::Release {
            token: "owner".into(),
            error: None,
        };
        let deleted = Op::Key {
            key: "lock".into(),
            change: KeyChange::Deleted,
            field: None,
            value: None,
            by: Some("client-0".into()),
            expires_local_ns: None,
        };
        let owner_field = Op::Key {
            key: "lock".into(),
            change: KeyChange::FieldSet,
            field: Some("owner".into()),
            value: Some("1".into()),
            by: Some("client-0".into()),
            expires_local_ns: None,
        };
        h.push(0, "redis-0", 0, Kind::Observe, owner_field);
        h.push(1, "client-0", 1, Kind::Ok, acquired.clone());
        h.push(2, "client-0", 2, Kind::Ok, acquired);
        h.push(3, "client-0", 3, Kind::Invoke, release.clone());
        assert!(reentrancy(&h.entries).is_empty());
        h.push(4, "redis-0", 4, Kind::Observe, deleted.clone());
        assert_eq!(reentrancy(&h.entries).len(), 1, "freed one level deep");
        let mut ok = History::default();
        for e in &h.entries[..4] {
            ok.push(e.true_ns, &e.node, e.local_ns, e.kind, e.op.clone());
        }
        ok.push(4, "client-0", 4, Kind::Invoke, release);
        ok.push(5, "redis-0", 5, Kind::Observe, deleted);
        assert!(
            reentrancy(&ok.entries).is_empty(),
            "the outer release frees it"
        );
    }

    #[test]
    fn deleting_a_stale_key_of_an_earlier_attempt_frees_nothing_the_client_holds() {
        // client-0's first attempt (t0) failed; its clean-up reached redis-2, paused meanwhile,
        // only after its second attempt (t1) had succeeded elsewhere: redis-2 sets t0 late and
        // deletes it. client-0 still holds t1, which nothing touched.
        let set = |value: &str| Op::Key {
            key: "lock".into(),
            change: KeyChange::Set,
            field: None,
            value: Some(value.into()),
            by: Some("client-0".into()),
            expires_local_ns: None,
        };
        let deleted = |value: &str| Op::Key {
            key: "lock".into(),
            change: KeyChange::Deleted,
            field: None,
            value: Some(value.into()),
            by: Some("client-0".into()),
            expires_local_ns: None,
        };
        let mut h = History::default();
        h.push(0, "redis-0", 0, Kind::Observe, set("t1"));
        h.push(
            1,
            "client-0",
            1,
            Kind::Ok,
            Op::Acquire {
                token: Some("t1".into()),
                fence: None,
                valid_ns: None,
                error: None,
                shared: false,
            },
        );
        h.push(2, "redis-2", 2, Kind::Observe, set("t0"));
        h.push(3, "redis-2", 3, Kind::Observe, deleted("t0"));
        assert!(reentrancy(&h.entries).is_empty());
        // Its own lock deleted while it holds it is one.
        h.push(4, "redis-0", 4, Kind::Observe, deleted("t1"));
        let found = reentrancy(&h.entries);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].tokens, vec!["t1".to_string()]);
    }

    /// A ZooKeeper server's change to the node at `path`.
    pub(super) fn zk_node(h: &mut History, change: KeyChange, path: &str) {
        h.push(
            h.entries.len() as u64,
            "zk-0",
            0,
            Kind::Observe,
            Op::Key {
                key: path.into(),
                change,
                field: None,
                value: Some(path.into()),
                by: None,
                expires_local_ns: None,
            },
        )
    }

    #[test]
    fn deleting_another_clients_value_is_a_foreign_release() {
        let mut h = History::default();
        let key = |change, by: &str| Op::Key {
            key: "lock".into(),
            change,
            field: None,
            value: Some("t1".into()),
            by: Some(by.into()),
            expires_local_ns: None,
        };
        h.push(
            1,
            "redis-0",
            1,
            Kind::Observe,
            key(KeyChange::Set, "client-0"),
        );
        h.push(
            2,
            "redis-0",
            2,
            Kind::Observe,
            key(KeyChange::Deleted, "client-0"),
        );
        assert!(foreign_releases(&h.entries).is_empty());
        h.push(
            3,
            "redis-0",
            3,
            Kind::Observe,
            key(KeyChange::Set, "client-0"),
        );
        h.push(
            4,
            "redis-0",
            4,
            Kind::Observe,
            key(KeyChange::Deleted, "client-1"),
        );
        assert_eq!(foreign_releases(&h.entries).len(), 1);
    }
}
