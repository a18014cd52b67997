//! What happened, as plain data (Jepsen's history).
//!
//! Clients record each operation twice: an `invoke` when they start it and an `ok`, `fail` or
//! `info` (outcome unknown) when it completes. Servers, the resource and the nemesis record
//! `observe` entries: things they saw happen, in true order. Every entry carries the true time and
//! the reading of the node's own wall clock, because lock bugs live in the gap between the two.
//! Checkers are pure functions of this list.

use serde::{Deserialize, Serialize};

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

    /// The index of the first entry where two histories differ, if they do.
    pub fn first_difference(&self, other: &History) -> Option<usize> {
        let common = self.entries.len().min(other.entries.len());
        (0..common)
            .find(|&i| self.entries[i] != other.entries[i])
            .or((self.entries.len() != other.entries.len()).then_some(common))
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
}
