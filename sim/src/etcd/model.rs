//! The simulated etcd server as a pure state machine: an MVCC keyspace at a global revision,
//! leases that expire on the server's monotonic clock, and the log of deletions a watch reads
//! from. No I/O, no clock of its own: time comes in as the server's monotonic ms.
//!
//! What it keeps from etcd (v3.4/3.5, one member):
//! - Every write moves the revision forward by one: a put, a delete that deleted something, a
//!   transaction with writes (all its writes share that revision), a lease's revocation or expiry
//!   with keys attached (all its deletions share one revision). Reads, failed compares and
//!   deletes of absent keys leave it alone.
//! - A key's `create_revision` is the revision that created it (since it last did not exist),
//!   its `mod_revision` the revision of its last write, its `version` the writes since creation.
//!   A missing key compares as 0 on all three.
//! - A transaction's reads see its own earlier writes (etcd's `storeTxnWrite.Range`).
//! - A put attached to a lease the server does not have fails the whole transaction
//!   (`requested lease not found`).
//! - A lease is granted for at least [`MIN_TTL_S`] seconds and expires once a keep-alive has not
//!   renewed it for its TTL on the monotonic clock (`Lease.Remaining` is `time.Until` of a
//!   monotonic reading). The lessor looks every [`EXPIRY_CHECK_MS`] (its loop), but finds
//!   candidates in a heap keyed by the expiry's *wall-clock* nanoseconds (`LeaseWithTime.time`,
//!   `expiry.UnixNano()`, etcd 3.4, which real mode runs): a lease is revoked at the first look
//!   at which the wall clock has passed its heap time and its TTL has run out on the monotonic
//!   clock. A look that finds the wall clock past the heap time of a lease not yet expired puts
//!   it back [`EXPIRED_RETRY_MS`] later (`expireExists`). So a wall clock stepped back on the
//!   server delays a dead holder's revocation by the step, and one stepped forward by up to 3 s;
//!   neither revokes a lease early. Its keys go with it. A keep-alive that comes once the lease
//!   is past its TTL renews nothing, even before the lessor has looked: etcd's `lessor.Renew`
//!   finds it expired and waits for its revocation, then answers that the lease is gone (TTL 0)
//!   ([`EtcdModel::renew`]).
//! - A restart keeps everything acknowledged (etcd fsyncs its WAL before answering) and renews
//!   every lease to its full TTL plus the election timeout from the restart (`lessor.Promote`
//!   with `electionTimeout()`, when the restarted member, leader again, applies its term's first
//!   entry).

use lockcheck_algorithms::etcd::{
    Compare, CompareOp, CompareTarget, EtcdError, KeyValue, LeaseId, Op, OpResult, Range, Revision,
    SortOrder, Txn, TxnResult,
};
use std::collections::{BTreeMap, BTreeSet};

/// What a keep-alive does to a lease ([`EtcdModel::renew`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Renewed to its full TTL, in seconds: the answer.
    Renewed(i64),
    /// Past its TTL and not yet revoked: not renewed; the answer (TTL 0) waits for the lessor to
    /// revoke it.
    Expiring,
    /// The server does not have it: TTL 0 at once.
    Gone,
}

/// The shortest lease etcd grants with its default timing (`--heartbeat-interval 100`,
/// `--election-timeout 1000`): 1.5 × the election timeout, rounded up to whole seconds
/// (`minLeaseTTL` in the lessor). A shorter TTL asked for is raised to it.
pub const MIN_TTL_S: i64 = 2;

/// How often the lessor looks for expired leases (its `runLoop` sleeps 500 ms).
pub const EXPIRY_CHECK_MS: u64 = 500;

/// How far a look puts back a lease it found due by the wall clock but not expired
/// (`defaultExpiredleaseRetryInterval`).
pub const EXPIRED_RETRY_MS: u64 = 3_000;

/// What `lessor.Promote` extends every lease by when a member becomes leader: the election
/// timeout (`--election-timeout`, 1000 ms by default, as real mode runs it).
pub const PROMOTE_EXTEND_MS: u64 = 1_000;

/// A moment on the server's two clocks, in ms: leases run out on the monotonic one, the
/// lessor's heap is keyed by the wall one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// The monotonic clock.
    pub mono_ms: u64,
    /// The wall clock.
    pub wall_ms: u64,
}

impl Now {
    /// `ms` on both clocks: a server whose wall clock was never stepped, for tests that drive
    /// the model by elapsed time.
    pub fn steady(ms: u64) -> Now {
        Now {
            mono_ms: ms,
            wall_ms: ms,
        }
    }
}

/// A lease on the server.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Lease {
    ttl_s: i64,
    /// Monotonic ms at which it expires unless renewed.
    deadline_ms: u64,
    /// Its place in the lessor's heap: wall ms, set with the deadline and put back by a look
    /// that found it due by the wall clock only.
    heap_wall_ms: u64,
    /// The keys attached to it.
    keys: BTreeSet<String>,
}

/// What a request or the lessor did to a key, for the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyEffect {
    /// A put.
    Put(String),
    /// Deleted by a request (a delete, or a revoked lease).
    Deleted(String),
    /// Deleted because its lease expired.
    Expired(String),
}

/// What a restart recovers: everything but the lease deadlines, which a restart renews.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    revision: Revision,
    keys: BTreeMap<String, KeyValue>,
    leases: BTreeMap<LeaseId, (i64, BTreeSet<String>)>,
    next_lease: LeaseId,
    deletions: Vec<(Revision, String)>,
}

/// One etcd member's state.
#[derive(Clone, Debug)]
pub struct EtcdModel {
    revision: Revision,
    keys: BTreeMap<String, KeyValue>,
    leases: BTreeMap<LeaseId, Lease>,
    next_lease: LeaseId,
    /// Every deletion so far, by revision: what a watch from a past revision replays (the model
    /// never compacts).
    deletions: Vec<(Revision, String)>,
    /// Counts the changes to the set of leases (grants, revocations, expiries): like writes,
    /// they go through the log before the answer, while a keep-alive's renewal does not.
    lease_changes: u64,
}

impl Default for EtcdModel {
    fn default() -> Self {
        Self::new()
    }
}

impl EtcdModel {
    /// An empty member at revision 1 (etcd starts its keyspace there).
    pub fn new() -> Self {
        EtcdModel {
            revision: 1,
            keys: BTreeMap::new(),
            leases: BTreeMap::new(),
            // etcd's lease ids are large numbers from a member-based generator; any nonzero,
            // growing id serves the lock (it only names the key).
            next_lease: 0x6b8f_0000_0000_0001,
            deletions: Vec::new(),
            lease_changes: 0,
        }
    }

    /// What the disk holds.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            revision: self.revision,
            keys: self.keys.clone(),
            leases: self
                .leases
                .iter()
                .map(|(id, l)| (*id, (l.ttl_s, l.keys.clone())))
                .collect(),
            next_lease: self.next_lease,
            deletions: self.deletions.clone(),
        }
    }

    /// A member restarted from `snapshot` at `now`: every lease gets its full TTL and the
    /// election timeout (`lessor.Promote`).
    pub fn restore(snapshot: Snapshot, now: Now) -> Self {
        EtcdModel {
            revision: snapshot.revision,
            keys: snapshot.keys,
            leases: snapshot
                .leases
                .into_iter()
                .map(|(id, (ttl_s, keys))| {
                    let left = ttl_s as u64 * 1000 + PROMOTE_EXTEND_MS;
                    (
                        id,
                        Lease {
                            ttl_s,
                            deadline_ms: now.mono_ms + left,
                            heap_wall_ms: now.wall_ms + left,
                            keys,
                        },
                    )
                })
                .collect(),
            next_lease: snapshot.next_lease,
            deletions: snapshot.deletions,
            lease_changes: 0,
        }
    }

    /// `lessor.Promote` on a member that became leader at `now` (its clocks): every lease runs
    /// its full TTL and the election timeout from now, whatever the last leader's lessor had
    /// left of it (etcd 3.4 does not checkpoint what is left).
    pub fn promote(&mut self, now: Now) {
        for l in self.leases.values_mut() {
            let left = l.ttl_s as u64 * 1000 + PROMOTE_EXTEND_MS;
            l.deadline_ms = now.mono_ms + left;
            l.heap_wall_ms = now.wall_ms + left;
        }
    }

    /// What a change to the disk must follow: the revision, and the changes to the set of
    /// leases (a restart keeps every acknowledged write and grant).
    pub fn logged(&self) -> (Revision, u64) {
        (self.revision, self.lease_changes)
    }

    /// The current revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// `LeaseGrant`: a new lease of `ttl_s` seconds (at least [`MIN_TTL_S`]): its id and TTL.
    pub fn grant(&mut self, ttl_s: i64, now: Now) -> (LeaseId, i64) {
        let ttl_s = ttl_s.max(MIN_TTL_S);
        let id = self.next_lease;
        self.next_lease += 1;
        self.lease_changes += 1;
        self.leases.insert(
            id,
            Lease {
                ttl_s,
                deadline_ms: now.mono_ms + ttl_s as u64 * 1000,
                heap_wall_ms: now.wall_ms + ttl_s as u64 * 1000,
                keys: BTreeSet::new(),
            },
        );
        (id, ttl_s)
    }

    /// `LeaseKeepAlive`, as `lessor.Renew` treats it: a lease within its TTL is renewed to its
    /// full TTL; one past its TTL is not (`l.expired()`): the keep-alive waits until the lessor
    /// revokes it, and is then told the lease is gone, as it is for a lease the server does not
    /// have.
    pub fn renew(&mut self, lease: LeaseId, now: Now) -> Renewal {
        match self.leases.get_mut(&lease) {
            Some(l) if l.deadline_ms <= now.mono_ms => Renewal::Expiring,
            Some(l) => {
                l.deadline_ms = now.mono_ms + l.ttl_s as u64 * 1000;
                l.heap_wall_ms = now.wall_ms + l.ttl_s as u64 * 1000;
                Renewal::Renewed(l.ttl_s)
            }
            None => Renewal::Gone,
        }
    }

    /// The TTL a `LeaseKeepAlive` at `now` is answered with ([`EtcdModel::renew`]): the lease's
    /// TTL when it was renewed, 0 when it is gone or past its TTL (answered once revoked).
    pub fn keep_alive(&mut self, lease: LeaseId, now: Now) -> i64 {
        match self.renew(lease, now) {
            Renewal::Renewed(ttl_s) => ttl_s,
            Renewal::Expiring | Renewal::Gone => 0,
        }
    }

    /// Whether the server still has `lease` (granted, and not yet revoked or found expired).
    pub fn has_lease(&self, lease: LeaseId) -> bool {
        self.leases.contains_key(&lease)
    }

    /// `LeaseRevoke`: ends `lease` and deletes its keys.
    pub fn revoke(
        &mut self,
        lease: LeaseId,
        effects: &mut Vec<KeyEffect>,
    ) -> Result<(), EtcdError> {
        let Some(l) = self.leases.remove(&lease) else {
            return Err(EtcdError::LeaseNotFound);
        };
        self.lease_changes += 1;
        self.delete_all(l.keys, false, effects);
        Ok(())
    }

    /// When (monotonic ms) the lessor next has something to do, seen from `now`: its first look
    /// at which the wall clock has reached a lease's heap time. Looks fall on the monotonic
    /// clock's multiples of [`EXPIRY_CHECK_MS`] (the loop's phase is the clock's origin).
    pub fn next_expiry_ms(&self, now: Now) -> Option<u64> {
        self.leases
            .values()
            .map(|l| {
                let at = now.mono_ms + l.heap_wall_ms.saturating_sub(now.wall_ms);
                at.div_ceil(EXPIRY_CHECK_MS) * EXPIRY_CHECK_MS
            })
            .min()
    }

    /// The lessor's look at `now`: every lease whose heap time the wall clock has reached is
    /// revoked if its TTL has run out on the monotonic clock, its keys deleted (each lease's at a
    /// revision of its own), and put back [`EXPIRED_RETRY_MS`] later otherwise.
    pub fn expire_due(&mut self, now: Now, effects: &mut Vec<KeyEffect>) {
        let mut due = Vec::new();
        for (id, l) in &mut self.leases {
            if l.heap_wall_ms > now.wall_ms {
                continue;
            }
            if l.deadline_ms <= now.mono_ms {
                due.push(*id);
            } else {
                l.heap_wall_ms = now.wall_ms + EXPIRED_RETRY_MS;
            }
        }
        for id in due {
            let lease = self.leases.remove(&id).expect("listed above");
            self.lease_changes += 1;
            self.delete_all(lease.keys, true, effects);
        }
    }

    /// Deletes `keys` at one new revision (if any existed).
    fn delete_all(&mut self, keys: BTreeSet<String>, expired: bool, effects: &mut Vec<KeyEffect>) {
        let present: Vec<String> = keys
            .into_iter()
            .filter(|k| self.keys.contains_key(k))
            .collect();
        if present.is_empty() {
            return;
        }
        self.revision += 1;
        for key in present {
            self.keys.remove(&key);
            self.deletions.push((self.revision, key.clone()));
            effects.push(if expired {
                KeyEffect::Expired(key)
            } else {
                KeyEffect::Deleted(key)
            });
        }
    }

    /// A range read now.
    pub fn range(&self, range: &Range) -> Vec<KeyValue> {
        read(&self.keys, range)
    }

    /// `DeleteRange` of one key: how many keys it deleted, and the revision after.
    pub fn delete(&mut self, key: &str, effects: &mut Vec<KeyEffect>) -> (i64, Revision) {
        let deleted = self.keys.contains_key(key);
        if deleted {
            self.revision += 1;
            self.remove(key);
            effects.push(KeyEffect::Deleted(key.to_string()));
        }
        (i64::from(deleted), self.revision)
    }

    /// Removes `key` at the current revision, detaching it from its lease.
    fn remove(&mut self, key: &str) {
        if let Some(kv) = self.keys.remove(key) {
            if let Some(lease) = self.leases.get_mut(&kv.lease) {
                lease.keys.remove(key);
            }
            self.deletions.push((self.revision, key.to_string()));
        }
    }

    /// A transaction.
    pub fn txn(&mut self, txn: &Txn, effects: &mut Vec<KeyEffect>) -> Result<TxnResult, EtcdError> {
        // Both branches are checked before the compare is (etcd's `checkIntervals`).
        if overlaps(&txn.success) || overlaps(&txn.failure) {
            return Err(EtcdError::DuplicateKey);
        }
        let succeeded = txn.compare.iter().all(|c| self.holds(c));
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        // A put on a lease the server lacks fails the whole transaction, before anything applies.
        for op in ops {
            if let Op::Put { lease, .. } = op {
                if *lease != 0 && !self.leases.contains_key(lease) {
                    return Err(EtcdError::LeaseNotFound);
                }
            }
        }
        let writes = ops.iter().any(|op| match op {
            Op::Put { .. } => true,
            Op::Delete { key } => self.keys.contains_key(key),
            Op::Range(_) => false,
        });
        let at = if writes {
            self.revision + 1
        } else {
            self.revision
        };
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            results.push(match op {
                Op::Range(range) => OpResult::Range(read(&self.keys, range)),
                Op::Put { key, value, lease } => {
                    self.put(key, value, *lease, at);
                    effects.push(KeyEffect::Put(key.clone()));
                    OpResult::Put
                }
                Op::Delete { key } => {
                    let deleted = self.keys.contains_key(key);
                    if deleted {
                        self.revision = at;
                        self.remove(key);
                        effects.push(KeyEffect::Deleted(key.clone()));
                    }
                    OpResult::Delete(i64::from(deleted))
                }
            });
        }
        self.revision = at;
        Ok(TxnResult {
            revision: self.revision,
            succeeded,
            results,
        })
    }

    /// Writes `key` at revision `at`.
    fn put(&mut self, key: &str, value: &str, lease: LeaseId, at: Revision) {
        let previous = self.keys.get(key).cloned();
        if let Some(old) = &previous {
            if old.lease != lease {
                if let Some(l) = self.leases.get_mut(&old.lease) {
                    l.keys.remove(key);
                }
            }
        }
        if let Some(l) = self.leases.get_mut(&lease) {
            l.keys.insert(key.to_string());
        }
        let kv = KeyValue {
            key: key.to_string(),
            value: value.to_string(),
            create_revision: previous.as_ref().map_or(at, |old| old.create_revision),
            mod_revision: at,
            version: previous.as_ref().map_or(1, |old| old.version + 1),
            lease,
        };
        self.keys.insert(key.to_string(), kv);
    }

    fn holds(&self, compare: &Compare) -> bool {
        let kv = self.keys.get(&compare.key);
        let actual = match compare.target {
            CompareTarget::CreateRevision => kv.map_or(0, |kv| kv.create_revision),
            CompareTarget::ModRevision => kv.map_or(0, |kv| kv.mod_revision),
            CompareTarget::Version => kv.map_or(0, |kv| kv.version),
        };
        match compare.op {
            CompareOp::Equal => actual == compare.value,
            CompareOp::NotEqual => actual != compare.value,
            CompareOp::Greater => actual > compare.value,
            CompareOp::Less => actual < compare.value,
        }
    }

    /// The revision at which `key` was first deleted at or after `from`, if it was.
    pub fn deleted_since(&self, key: &str, from: Revision) -> Option<Revision> {
        let start = self.deletions.partition_point(|(rev, _)| *rev < from);
        self.deletions[start..]
            .iter()
            .find(|(_, k)| k == key)
            .map(|(rev, _)| *rev)
    }
}

/// Whether `ops` put one key twice, or put a key they also delete (deleting one twice is
/// allowed).
fn overlaps(ops: &[Op]) -> bool {
    let deleted: BTreeSet<&str> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Delete { key } => Some(key.as_str()),
            _ => None,
        })
        .collect();
    let mut put = BTreeSet::new();
    ops.iter().any(|op| match op {
        Op::Put { key, .. } => deleted.contains(key.as_str()) || !put.insert(key.as_str()),
        _ => false,
    })
}

/// The keys `range` reads from `keys`.
fn read(keys: &BTreeMap<String, KeyValue>, range: &Range) -> Vec<KeyValue> {
    let mut found: Vec<KeyValue> = if range.prefix {
        keys.range(range.key.clone()..)
            .take_while(|(k, _)| k.starts_with(&range.key))
            .map(|(_, kv)| kv.clone())
            .collect()
    } else {
        keys.get(&range.key).cloned().into_iter().collect()
    };
    if range.max_create_revision > 0 {
        found.retain(|kv| kv.create_revision <= range.max_create_revision);
    }
    match range.sort {
        Some(SortOrder::Ascend) => found.sort_by_key(|kv| kv.create_revision),
        Some(SortOrder::Descend) => found.sort_by_key(|kv| std::cmp::Reverse(kv.create_revision)),
        None => {}
    }
    if range.limit > 0 {
        found.truncate(range.limit as usize);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, lease: LeaseId) -> Op {
        Op::Put {
            key: key.into(),
            value: String::new(),
            lease,
        }
    }

    fn create(model: &mut EtcdModel, key: &str, lease: LeaseId) -> TxnResult {
        let txn = Txn {
            compare: vec![Compare::absent(key)],
            success: vec![put(key, lease)],
            failure: vec![Op::Range(Range::key(key))],
        };
        model.txn(&txn, &mut Vec::new()).unwrap()
    }

    #[test]
    fn every_write_moves_the_revision_by_one_and_reads_do_not() {
        let mut m = EtcdModel::new();
        assert_eq!(m.revision(), 1);
        let r = create(&mut m, "/l/a", 0);
        assert!(r.succeeded);
        assert_eq!(r.revision, 2);
        // The compare fails: a read, no write.
        let r = create(&mut m, "/l/a", 0);
        assert!(!r.succeeded);
        assert_eq!(r.revision, 2);
        assert_eq!(m.delete("/l/missing", &mut Vec::new()), (0, 2));
        assert_eq!(m.delete("/l/a", &mut Vec::new()), (1, 3));
        // Created again: a new create revision, version 1.
        create(&mut m, "/l/a", 0);
        let kv = &m.range(&Range::key("/l/a"))[0];
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (4, 4, 1));
    }

    #[test]
    fn a_transaction_reads_its_own_writes_at_one_revision() {
        let mut m = EtcdModel::new();
        create(&mut m, "/l/b", 0);
        let txn = Txn {
            compare: vec![Compare::absent("/l/a")],
            success: vec![
                put("/l/a", 0),
                put("/l/c", 0),
                Op::Range(Range::first_created("/l/")),
            ],
            failure: vec![],
        };
        let r = m.txn(&txn, &mut Vec::new()).unwrap();
        assert_eq!(r.revision, 3);
        let OpResult::Range(first) = &r.results[2] else {
            panic!("{r:?}")
        };
        assert_eq!(first[0].key, "/l/b");
        let all = m.range(&Range {
            key: "/l/".into(),
            prefix: true,
            sort: Some(SortOrder::Descend),
            limit: 0,
            max_create_revision: 0,
        });
        let revs: Vec<_> = all
            .iter()
            .map(|kv| (kv.key.as_str(), kv.create_revision))
            .collect();
        assert_eq!(revs, [("/l/a", 3), ("/l/c", 3), ("/l/b", 2)]);
        let last = m.range(&Range::last_created_up_to("/l/", 2));
        assert_eq!(last[0].key, "/l/b");
    }

    #[test]
    fn a_branch_that_writes_a_key_twice_is_refused_whichever_branch_runs() {
        let mut m = EtcdModel::new();
        let twice = Txn {
            compare: vec![],
            success: vec![],
            failure: vec![put("/l/x", 0), Op::Delete { key: "/l/x".into() }],
        };
        assert_eq!(m.txn(&twice, &mut Vec::new()), Err(EtcdError::DuplicateKey));
        let deletes = Txn {
            compare: vec![],
            success: vec![
                Op::Delete { key: "/l/x".into() },
                Op::Delete { key: "/l/x".into() },
            ],
            failure: vec![put("/l/x", 0), put("/l/y", 0)],
        };
        assert!(m.txn(&deletes, &mut Vec::new()).is_ok());
        assert_eq!(m.revision(), 1);
    }

    #[test]
    fn a_put_on_a_missing_lease_fails_the_whole_transaction() {
        let mut m = EtcdModel::new();
        let txn = Txn {
            compare: vec![],
            success: vec![put("/l/x", 0), put("/l/y", 42)],
            failure: vec![],
        };
        assert_eq!(m.txn(&txn, &mut Vec::new()), Err(EtcdError::LeaseNotFound));
        assert!(m.range(&Range::first_created("/")).is_empty());
        assert_eq!(m.revision(), 1);
    }

    #[test]
    fn a_lease_expires_on_the_monotonic_clock_at_the_lessors_next_check() {
        let mut m = EtcdModel::new();
        let (lease, ttl) = m.grant(1, Now::steady(0));
        assert_eq!(ttl, MIN_TTL_S, "a TTL below the minimum is raised");
        create(&mut m, "/l/a", lease);
        assert_eq!(m.next_expiry_ms(Now::steady(0)), Some(2_000));
        // Renewed at 1.2 s: due at 3.2 s, found at the 3.5 s check.
        assert_eq!(m.keep_alive(lease, Now::steady(1_200)), 2);
        assert_eq!(m.next_expiry_ms(Now::steady(1_200)), Some(3_500));
        let mut effects = Vec::new();
        m.expire_due(Now::steady(3_100), &mut effects);
        assert!(effects.is_empty());
        m.expire_due(Now::steady(3_500), &mut effects);
        assert_eq!(effects, [KeyEffect::Expired("/l/a".into())]);
        assert_eq!(m.deleted_since("/l/a", 0), Some(3));
        assert_eq!(
            m.keep_alive(lease, Now::steady(3_600)),
            0,
            "gone: a keep-alive gets TTL 0"
        );
    }

    #[test]
    fn a_keep_alive_past_the_ttl_renews_nothing_even_before_the_lessor_looks() {
        let mut m = EtcdModel::new();
        let (lease, _) = m.grant(2, Now::steady(0));
        create(&mut m, "/l/a", lease);
        // Due at 2 s, found at the 2 s check; a keep-alive at 1.999 s still renews it.
        assert_eq!(m.renew(lease, Now::steady(1_999)), Renewal::Renewed(2));
        assert_eq!(
            m.next_expiry_ms(Now::steady(1_999)),
            Some(4_000),
            "due at 3.999 s, found at the 4 s check"
        );
        // At 3.999 s it is past its TTL: the keep-alive waits for the revocation at 4 s.
        assert_eq!(m.renew(lease, Now::steady(3_999)), Renewal::Expiring);
        assert_eq!(m.keep_alive(lease, Now::steady(3_999)), 0);
        assert!(m.has_lease(lease), "not revoked before the lessor looks");
        assert_eq!(
            m.next_expiry_ms(Now::steady(3_999)),
            Some(4_000),
            "and not renewed either"
        );
        let mut effects = Vec::new();
        m.expire_due(Now::steady(4_000), &mut effects);
        assert_eq!(effects, [KeyEffect::Expired("/l/a".into())]);
        assert!(!m.has_lease(lease));
        assert_eq!(m.renew(lease, Now::steady(4_001)), Renewal::Gone);
    }

    #[test]
    fn a_restart_keeps_the_keyspace_and_renews_every_lease() {
        let mut m = EtcdModel::new();
        let (lease, _) = m.grant(10, Now::steady(0));
        create(&mut m, "/l/a", lease);
        let snapshot = m.snapshot();
        // Restarted at 9 s: the lease runs 10 s and the election timeout from then, not from its
        // last renewal.
        let mut r = EtcdModel::restore(snapshot, Now::steady(9_000));
        assert_eq!(r.revision(), m.revision());
        assert_eq!(r.range(&Range::key("/l/a")), m.range(&Range::key("/l/a")));
        let mut effects = Vec::new();
        r.expire_due(Now::steady(12_000), &mut effects);
        assert!(effects.is_empty());
        r.expire_due(Now::steady(19_500), &mut effects);
        assert!(
            effects.is_empty(),
            "Promote extends it by the election timeout"
        );
        r.expire_due(Now::steady(20_000), &mut effects);
        assert_eq!(effects.len(), 1);
    }

    /// The lessor's heap is keyed by the wall clock (etcd 3.4): a wall clock stepped back on the
    /// server delays a dead holder's revocation by the step; one stepped forward finds the lease
    /// due early by the wall clock, puts it back 3 s, and revokes it at that look, not before
    /// its TTL has run out on the monotonic clock.
    #[test]
    fn the_lessors_heap_follows_the_wall_clock_and_never_revokes_early() {
        let at = |mono_ms, wall_ms| Now { mono_ms, wall_ms };
        let mut effects = Vec::new();
        // Stepped back 5 s at 1 s: the lease's heap time (2 s) is reached at 7 s.
        let mut m = EtcdModel::new();
        let (lease, _) = m.grant(2, at(0, 0));
        create(&mut m, "/l/a", lease);
        let back = |mono: u64| at(mono, mono - 5_000);
        assert_eq!(m.next_expiry_ms(back(6_000)), Some(7_000));
        m.expire_due(back(6_500), &mut effects);
        assert!(
            effects.is_empty(),
            "the TTL ran out at 2 s, the heap says 7 s"
        );
        m.expire_due(back(7_000), &mut effects);
        assert_eq!(effects, [KeyEffect::Expired("/l/a".into())]);

        // Stepped forward 60 s at 1 s: the 1.5 s look finds it due by the wall clock, not by the
        // monotonic one, and puts it back to 4.5 s (by the monotonic clock's count).
        let mut effects = Vec::new();
        let mut m = EtcdModel::new();
        let (lease, _) = m.grant(2, at(0, 0));
        create(&mut m, "/l/a", lease);
        let ahead = |mono: u64| at(mono, mono + 60_000);
        assert_eq!(m.next_expiry_ms(ahead(1_000)), Some(1_000));
        m.expire_due(ahead(1_500), &mut effects);
        assert!(effects.is_empty(), "not expired on the monotonic clock");
        assert_eq!(m.next_expiry_ms(ahead(1_500)), Some(4_500));
        m.expire_due(ahead(2_000), &mut effects);
        assert!(
            effects.is_empty(),
            "expired at 2 s, but its heap time is 4.5 s"
        );
        assert_eq!(
            m.keep_alive(lease, ahead(2_000)),
            0,
            "and it renews nothing"
        );
        m.expire_due(ahead(4_500), &mut effects);
        assert_eq!(effects, [KeyEffect::Expired("/l/a".into())]);
    }

    #[test]
    fn a_watch_from_a_past_revision_sees_a_deletion_since() {
        let mut m = EtcdModel::new();
        let (lease, _) = m.grant(5, Now::steady(0));
        create(&mut m, "/l/a", lease);
        let read_at = m.revision();
        let mut effects = Vec::new();
        m.revoke(lease, &mut effects).unwrap();
        assert_eq!(effects, [KeyEffect::Deleted("/l/a".into())]);
        assert_eq!(m.deleted_since("/l/a", read_at), Some(read_at + 1));
        assert_eq!(m.deleted_since("/l/a", read_at + 2), None);
        assert_eq!(m.revoke(lease, &mut effects), Err(EtcdError::LeaseNotFound));
    }
}
