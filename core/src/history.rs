//! What happened, as plain data (Jepsen's history).
//!
//! Clients record each operation twice: an `invoke` when they start it and an `ok`, `fail` or
//! `info` (outcome unknown) when it completes. Servers, the resource and the nemesis record
//! `observe` entries: things they saw happen, in true order. Every entry carries the true time and
//! the reading of the node's own wall clock, because lock bugs live in the gap between the two.
//! Checkers are pure functions of this list.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The type of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An operation starts.
    Invoke,
    /// It completed and did what it says.
    Ok,
    /// It completed and certainly did not happen.
    Fail,
    /// Its outcome is unknown (a timeout).
    Info,
    /// A node saw something happen (a server changed a key, the resource took an access, the
    /// nemesis struck).
    Observe,
}

/// Which access of a critical section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The first touch, right after acquiring.
    Enter,
    /// The last touch, right before releasing.
    Exit,
}

/// How a server changed a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyChange {
    /// Written.
    Set,
    /// Removed by a command.
    Deleted,
    /// Removed because its deadline passed by the server's clock.
    Expired,
    /// Given a new deadline.
    ExpiryChanged,
    /// Lost in a crash (not on disk).
    Lost,
    /// A field of a hash written (`field` says which; reentrant locks keep their owner there).
    FieldSet,
    /// A field of a hash removed.
    FieldRemoved,
    /// An element pushed onto a list (fair locks queue their waiters so).
    ListPushed,
    /// An element taken off a list.
    ListRemoved,
}

/// The operation or observation of an entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "snake_case")]
pub enum Op {
    /// A client acquires the lock.
    Acquire {
        /// The token it holds (on `ok`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        /// The fencing token (on `ok`, when the algorithm has one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fence: Option<u64>,
        /// The validity the client computed, in ns of its monotonic clock (on `ok`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        valid_ns: Option<u64>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// A shared (read) acquisition of a read/write lock; absent for exclusive ones.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shared: bool,
    },
    /// One acquisition attempt of a client finished (inside an `acquire` operation).
    Attempt {
        /// Whether it acquired the lock.
        acquired: bool,
        /// Servers that accepted it.
        accepted: usize,
        /// Servers asked.
        of: usize,
        /// Servers the client could not reach when it finished: crashed or cut off.
        unreachable: usize,
        /// How many attempts the entry stands for: 1 (not written) for one attempt; more for a
        /// fold of one client's identical refusals ([`Recording`]), the first of which finished
        /// at the entry's time and the last at `last_true_ns`.
        #[serde(default = "one", skip_serializing_if = "is_one")]
        count: u64,
        /// A fold's last attempt: when it finished, in true ns.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_true_ns: Option<u64>,
        /// A fold's last attempt: when it finished by the node's wall clock (as `local_ns`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_local_ns: Option<i64>,
    },
    /// A client releases the lock.
    Release {
        /// The token it releases.
        token: String,
        /// Why it failed, or that the lock was no longer held.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A client touches the protected resource.
    Access {
        /// Enter or exit.
        phase: Phase,
        /// The lock token it holds.
        token: String,
        /// The fencing token it presents.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fence: Option<u64>,
        /// A reader's access, which may overlap other readers'; absent for exclusive ones.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shared: bool,
    },
    /// The resource took (or, with fencing, rejected) an access. In true order.
    Resource {
        /// Who.
        client: String,
        /// Enter or exit.
        phase: Phase,
        /// The lock token.
        token: String,
        /// The fencing token presented.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fence: Option<u64>,
        /// Whether the resource accepted it.
        accepted: bool,
        /// A reader's access, which may overlap other readers'; absent for exclusive ones.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shared: bool,
    },
    /// A server changed a key: whatever its backend stores a lock's state under, by its
    /// backend's own name for it.
    Key {
        /// The name the server stores it under: a Redis key, a znode's path, a lock row's
        /// `resource_name`. The checkers compare keys only with keys of the same server, and
        /// with the tokens its locks hand out (a ZooKeeper lock's token is its node's path).
        key: String,
        /// How.
        change: KeyChange,
        /// The hash field, for `field_set` and `field_removed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field: Option<String>,
        /// The value written or removed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// The node whose request caused it (none for expiry and crashes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// The new deadline by the server's wall clock, in ns since the run's wall origin.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_local_ns: Option<i64>,
    },
    /// A ZooKeeper server fired a watch: it tells a client that a node it watched changed. A
    /// lock's waiters wake on these, so they count the wake-ups a release causes.
    Watch {
        /// The watched node.
        path: String,
        /// What happened to it: `node_created`, `node_deleted`, `node_data_changed`,
        /// `node_children_changed`.
        event: String,
        /// The client told.
        to: String,
    },
    /// The nemesis acted.
    Nemesis {
        /// What kind of action: pause, resume, crash, restart, clock_jump, clock_drift, cut,
        /// heal, messages_start, messages_end, skipped.
        kind: String,
        /// What it did, for people.
        action: String,
        /// The node it acted on (the first, for a partition).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// A remark from the harness (e.g. why a check was skipped).
    Note {
        /// The remark.
        text: String,
    },
}

/// One line of the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Position in the history.
    pub index: usize,
    /// True (simulated global) time since the start of the run, in ns.
    pub true_ns: u64,
    /// The node that recorded it.
    pub node: String,
    /// That node's wall clock at that moment, in ns since the run's wall origin (equal to
    /// `true_ns` on a node whose clock never drifted or jumped).
    pub local_ns: i64,
    /// Invoke / ok / fail / info / observe.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// What.
    #[serde(flatten)]
    pub op: Op,
}

/// The history of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct History {
    /// The entries in the order they were recorded (true time order).
    pub entries: Vec<Entry>,
}

impl History {
    /// Appends an entry, numbering it.
    pub fn push(&mut self, true_ns: u64, node: &str, local_ns: i64, kind: Kind, op: Op) {
        let index = self.entries.len();
        self.entries.push(Entry {
            index,
            true_ns,
            node: node.to_string(),
            local_ns,
            kind,
            op,
        });
    }

    /// A stable 64-bit digest (FNV-1a over the canonical JSON), printed as hex. Two runs are
    /// identical exactly when their digests are; FNV is enough because this detects divergence,
    /// it does not defend against an adversary.
    pub fn digest(&self) -> String {
        // Hashed as it is written: every run computes its digest, and the JSON text of a
        // history is the largest thing a run would otherwise allocate.
        struct Fnv1a(u64);
        impl std::io::Write for Fnv1a {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                for &byte in bytes {
                    self.0 ^= u64::from(byte);
                    self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
                }
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut hash = Fnv1a(0xcbf2_9ce4_8422_2325);
        serde_json::to_writer(&mut hash, self).expect("a history always serializes");
        format!("{:016x}", hash.0)
    }

    /// The note a history stopped at its cap ends with ([`Recording`]), if it was: a run
    /// cut short, which is refused rather than judged.
    pub fn full(&self) -> Option<&str> {
        match &self.entries.last()?.op {
            Op::Note { text } if text.starts_with(HISTORY_FULL) => Some(text),
            _ => None,
        }
    }

    /// The index of the first entry where two histories differ, if they do.
    pub fn first_difference(&self, other: &History) -> Option<usize> {
        let common = self.entries.len().min(other.entries.len());
        (0..common)
            .find(|&i| self.entries[i] != other.entries[i])
            .or((self.entries.len() != other.entries.len()).then_some(common))
    }
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

impl Op {
    /// One acquisition attempt as a client records it (a [`Recording`] may fold it).
    pub fn attempt(acquired: bool, accepted: usize, of: usize, unreachable: usize) -> Op {
        Op::Attempt {
            acquired,
            accepted,
            of,
            unreachable,
            count: 1,
            last_true_ns: None,
            last_local_ns: None,
        }
    }

    /// The operation's name, as the history writes it (`f`).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Acquire { .. } => "acquire",
            Op::Attempt { .. } => "attempt",
            Op::Release { .. } => "release",
            Op::Access { .. } => "access",
            Op::Resource { .. } => "resource",
            Op::Key { .. } => "key",
            Op::Watch { .. } => "watch",
            Op::Nemesis { .. } => "nemesis",
            Op::Note { .. } => "note",
        }
    }
}

impl Entry {
    /// How many acquisition attempts the entry stands for: an attempt's `count` (more than one
    /// for a fold), 0 for any other entry.
    pub fn attempts(&self) -> u64 {
        match self.op {
            Op::Attempt { count, .. } => count,
            _ => 0,
        }
    }

    /// When what the entry records ended, in true ns: a fold's last attempt, else the entry's
    /// own time.
    pub fn end_ns(&self) -> u64 {
        match self.op {
            Op::Attempt {
                last_true_ns: Some(last),
                ..
            } => last.max(self.true_ns),
            _ => self.true_ns,
        }
    }
}

/// How many identical refusals in a row of one client are recorded one by one before the rest of
/// the row is folded into one entry ([`Recording`]). Above the longest such row of any run
/// lockcheck had written before folding (128, in `reports/`), so ordinary histories, and every
/// report written before, stay as they were, byte for byte.
pub const FOLD_AFTER: u64 = 256;

/// The text that the last entry of a history stopped at [`Retention::max_entries`], a note,
/// starts with.
pub const HISTORY_FULL: &str = "history full";

/// What a [`Recording`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Identical refusals in a row of one client recorded one by one before the rest of the row
    /// is folded ([`FOLD_AFTER`]; `u64::MAX` folds nothing).
    pub fold_after: u64,
    /// The most entries a history holds, the note that says it is full included
    /// ([`crate::limits::MAX_HISTORY_ENTRIES`]).
    pub max_entries: usize,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            fold_after: FOLD_AFTER,
            max_entries: crate::limits::MAX_HISTORY_ENTRIES,
        }
    }
}

/// A client's current row of identical refusals.
#[derive(Debug)]
struct Row {
    /// What each refusal said: (accepted, of, unreachable).
    attempt: (usize, usize, usize),
    /// Refusals in the row so far.
    len: u64,
    /// The entry the row is folded into, once it is longer than [`Retention::fold_after`].
    fold: Option<usize>,
}

/// A history being recorded, as both worlds record it: what keeps a run's memory and report
/// bounded however long the run.
///
/// - **Folding.** A client that polls a held lock (Redis retries every retry delay, MySQL waits
///   out `innodb_lock_wait_timeout` again) records an attempt per poll, for as long as the lock
///   is held: a lease of a year, a year of attempts. A row of one client's identical refusals
///   (not acquired, the same servers accepting of the same servers asked, the same unreachable,
///   and nothing else recorded by that client in between) is recorded one by one up to
///   [`Retention::fold_after`]; the rest of the row is one entry, an attempt with a `count` and
///   the time of the last (`last_true_ns`, `last_local_ns`), placed where the first of them
///   was. Other nodes' entries may come between; an attempt changes nothing any checker
///   judges but the availability counts, which read the `count`.
/// - **A cap.** A history holds at most [`Retention::max_entries`] entries. What would pass it
///   is not recorded: its last entry is a note starting with [`HISTORY_FULL`] ([`History::full`]),
///   and the run is to stop (the simulation stops at once, and `run`, `replay` and `explore`
///   refuse such a run rather than judge it: `Outcome::refusal`).
#[derive(Debug, Default)]
pub struct Recording {
    history: History,
    retention: Retention,
    /// Per node: its row of identical refusals, while one lasts.
    rows: BTreeMap<String, Row>,
    /// Whether the history reached its cap (its last entry is the note that says so).
    full: bool,
}

impl Recording {
    /// An empty history, recorded as `retention` says.
    pub fn new(retention: Retention) -> Recording {
        Recording {
            retention,
            ..Recording::default()
        }
    }

    /// Appends an entry recorded by `node`, folding it into its row of refusals or, once the
    /// history is full, dropping it.
    pub fn push(&mut self, true_ns: u64, node: &str, local_ns: i64, kind: Kind, op: Op) {
        if self.full {
            return;
        }
        match (&op, kind) {
            (
                Op::Attempt {
                    acquired: false,
                    accepted,
                    of,
                    unreachable,
                    count: 1,
                    ..
                },
                Kind::Observe,
            ) => {
                let attempt = (*accepted, *of, *unreachable);
                let next = self.history.entries.len();
                match self.rows.get_mut(node) {
                    Some(row) if row.attempt == attempt => {
                        row.len += 1;
                        if let Some(fold) = row.fold {
                            if let Op::Attempt {
                                count,
                                last_true_ns,
                                last_local_ns,
                                ..
                            } = &mut self.history.entries[fold].op
                            {
                                *count += 1;
                                *last_true_ns = Some(true_ns);
                                *last_local_ns = Some(local_ns);
                            }
                            return;
                        }
                        if row.len > self.retention.fold_after {
                            row.fold = Some(next);
                        }
                    }
                    Some(row) => {
                        *row = Row {
                            attempt,
                            len: 1,
                            fold: None,
                        };
                    }
                    None => {
                        self.rows.insert(
                            node.to_string(),
                            Row {
                                attempt,
                                len: 1,
                                fold: None,
                            },
                        );
                    }
                }
            }
            _ => {
                if !self.rows.is_empty() {
                    self.rows.remove(node);
                }
            }
        }
        if self.history.entries.len() + 1 >= self.retention.max_entries {
            let text = self.full_note(true_ns);
            self.history
                .push(true_ns, node, local_ns, Kind::Observe, Op::Note { text });
            self.full = true;
            return;
        }
        self.history.push(true_ns, node, local_ns, kind, op);
    }

    /// Whether the history is full: nothing more is recorded.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// The history so far.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The history.
    pub fn into_history(self) -> History {
        self.history
    }

    /// The note that ends a full history: when, and who recorded the most (what grew).
    fn full_note(&self, true_ns: u64) -> String {
        let mut by_node: BTreeMap<&str, BTreeMap<&'static str, u64>> = BTreeMap::new();
        for e in &self.history.entries {
            *by_node
                .entry(e.node.as_str())
                .or_default()
                .entry(e.op.name())
                .or_default() += 1;
        }
        let most = by_node
            .iter()
            .map(|(node, ops)| (ops.values().sum::<u64>(), *node, ops))
            .max_by_key(|&(n, node, _)| (n, std::cmp::Reverse(node)));
        let what = most.map_or_else(String::new, |(n, node, ops)| {
            let (op, _) = ops
                .iter()
                .max_by_key(|&(op, n)| (*n, std::cmp::Reverse(*op)))
                .expect("a node with entries has an operation");
            format!("; the most, {n}, recorded by {node}, mostly {op} entries")
        });
        format!(
            "{HISTORY_FULL}: {} entries by {} of simulated time{what}; the run stopped here",
            self.retention.max_entries,
            span(true_ns)
        )
    }
}

/// A span of true time for people: seconds below an hour, hours below 10 days, else days.
pub fn span(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 3_600.0 {
        format!("{s:.1} s")
    } else if s < 864_000.0 {
        format!("{:.1} h", s / 3_600.0)
    } else {
        format!("{:.1} days", s / 86_400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_serialize_in_jepsen_shape_and_round_trip() {
        let mut h = History::default();
        h.push(
            5,
            "client-0",
            5,
            Kind::Ok,
            Op::Acquire {
                token: Some("ab".into()),
                fence: None,
                valid_ns: Some(9),
                error: None,
                shared: false,
            },
        );
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(
            json,
            r#"[{"index":0,"true_ns":5,"node":"client-0","local_ns":5,"type":"ok","f":"acquire","token":"ab","valid_ns":9}]"#
        );
        let back: History = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.digest(), h.digest());
        assert_eq!(back.first_difference(&h), None);
    }

    fn refused(unreachable: usize) -> Op {
        Op::attempt(false, 0, 1, unreachable)
    }

    fn note(text: &str) -> Op {
        Op::Note { text: text.into() }
    }

    /// Records `ops` (time, node, op) both ways: one by one, and folded after `fold_after`.
    fn both(ops: &[(u64, &str, Op)], retention: Retention) -> (History, History) {
        let mut plain = History::default();
        let mut folded = Recording::new(retention);
        for (t, node, op) in ops {
            plain.push(*t, node, *t as i64, Kind::Observe, op.clone());
            folded.push(*t, node, *t as i64, Kind::Observe, op.clone());
        }
        (plain, folded.into_history())
    }

    fn fold_after(k: u64) -> Retention {
        Retention {
            fold_after: k,
            ..Retention::default()
        }
    }

    #[test]
    fn a_row_of_refusals_past_the_threshold_is_one_entry_with_a_count_and_a_span() {
        let mut ops = Vec::new();
        for i in 0..600u64 {
            ops.push((10 + i * 10, "client-1", refused(0)));
            if i % 100 == 7 {
                // Another node's entries may come between.
                ops.push((15 + i * 10, "redis-0", note("tick")));
            }
        }
        let (plain, folded) = both(&ops, Retention::default());
        let attempts = |h: &History| h.entries.iter().map(Entry::attempts).sum::<u64>();
        assert_eq!(attempts(&plain), 600);
        assert_eq!(attempts(&folded), 600, "the fold counts what it stands for");
        let rows: Vec<&Entry> = folded
            .entries
            .iter()
            .filter(|e| e.node == "client-1")
            .collect();
        assert_eq!(rows.len() as u64, FOLD_AFTER + 1);
        let fold = rows[FOLD_AFTER as usize];
        assert_eq!(fold.attempts(), 600 - FOLD_AFTER);
        assert_eq!(
            fold.true_ns,
            10 + FOLD_AFTER * 10,
            "where its first attempt was"
        );
        assert_eq!(fold.end_ns(), 10 + 599 * 10, "to the last");
        // The first FOLD_AFTER are as they were, and so is every other node's entry.
        assert_eq!(
            plain.entries[..FOLD_AFTER as usize + 2],
            folded.entries[..FOLD_AFTER as usize + 2]
        );
        let others = |h: &History| -> Vec<u64> {
            h.entries
                .iter()
                .filter(|e| e.node != "client-1")
                .map(|e| e.true_ns)
                .collect()
        };
        assert_eq!(others(&plain), others(&folded));
        // Written with its count and span, read back the same.
        let json = serde_json::to_string(fold).unwrap();
        assert!(
            json.contains(&format!(r#""count":{}"#, 600 - FOLD_AFTER))
                && json.contains(r#""last_true_ns":6000"#)
                && json.contains(r#""last_local_ns":6000"#),
            "{json}"
        );
        let back: Entry = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, fold);
    }

    #[test]
    fn rows_no_longer_than_the_threshold_are_recorded_as_they_always_were() {
        // A row of FOLD_AFTER, then a different refusal, then an entry of the client itself:
        // each breaks the row, and nothing is folded.
        let mut ops = Vec::new();
        let mut t = 0;
        for unreachable in [0, 1, 0] {
            for _ in 0..FOLD_AFTER {
                t += 10;
                ops.push((t, "client-0", refused(unreachable)));
            }
        }
        t += 10;
        ops.push((t, "client-0", note("mine")));
        for _ in 0..FOLD_AFTER {
            t += 10;
            ops.push((t, "client-0", refused(0)));
        }
        let (plain, folded) = both(&ops, Retention::default());
        assert_eq!(plain, folded);
        assert_eq!(plain.digest(), folded.digest());
        assert!(!serde_json::to_string(&folded).unwrap().contains("count"));
        // An acquisition is never folded.
        let (plain, folded) = both(
            &(0..10)
                .map(|i| (i, "client-0", Op::attempt(true, 1, 1, 0)))
                .collect::<Vec<_>>(),
            fold_after(0),
        );
        assert_eq!(plain, folded);
        // Nor a refusal into another client's row: two clients' refusals interleaved are each
        // client's first one, then one fold each, counting its own.
        let ops: Vec<(u64, &str, Op)> = (0..20u64)
            .map(|i| {
                let client = if i % 2 == 0 { "client-0" } else { "client-1" };
                (i, client, refused(0))
            })
            .collect();
        let (_, folded) = both(&ops, fold_after(0));
        let per_client: Vec<(&str, u64)> = folded
            .entries
            .iter()
            .map(|e| (e.node.as_str(), e.attempts()))
            .collect();
        assert_eq!(
            per_client,
            [
                ("client-0", 1),
                ("client-1", 1),
                ("client-0", 9),
                ("client-1", 9)
            ]
        );
    }

    #[test]
    fn a_full_history_ends_with_a_note_and_keeps_nothing_more() {
        let mut r = Recording::new(Retention {
            fold_after: 2,
            max_entries: 10,
        });
        for i in 0..100u64 {
            // Folds cost nothing: a long row stays within the cap.
            r.push(i, "client-0", i as i64, Kind::Observe, refused(0));
        }
        assert!(!r.is_full());
        assert_eq!(r.history().entries.len(), 3);
        for i in 0..100u64 {
            r.push(100 + i, "redis-0", 0, Kind::Observe, note("grows"));
        }
        assert!(r.is_full());
        let h = r.into_history();
        assert_eq!(h.entries.len(), 10);
        let full = h.full().expect("the note says it is full");
        assert!(
            full.starts_with(
                "history full: 10 entries by 0.0 s of simulated time; the most, 6, \
                              recorded by redis-0, mostly note entries"
            ),
            "{full}"
        );
        assert_eq!(History::default().full(), None);
    }
}
