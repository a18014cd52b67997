//! What an etcd (v3 API) backend can do, as seen by an algorithm.
//!
//! The operations are etcd's own, reduced to what a lock uses: transactions that compare a key's
//! `create_revision`, `mod_revision` or `version` and then put (with a lease), get or delete;
//! ranges by prefix sorted by create revision with a limit and a maximum create revision; a
//! watch for a key's deletion from a given revision; and the response header's revision, which
//! every write moves forward by one. The simulated server (`lockcheck-sim`'s etcd model) speaks
//! these very types, so sim and algorithm cannot drift.
//!
//! The lease a lock's keys are attached to belongs to the store, as the Go client's
//! `concurrency.Session` owns its lease: granted on first use, kept alive by the store every third
//! of its TTL, and *done* when no keep-alive was answered within the TTL or the server says the
//! lease is gone. An algorithm sees only the lease's id and whether the session is done.

use crate::error::StoreError;
use std::future::Future;

/// A lease's id (etcd's `LeaseID`). Never 0: 0 is "no lease".
pub type LeaseId = i64;

/// A revision of the whole keyspace: every write (a put, a delete, a transaction with writes, a
/// lease's revocation or expiry with keys) moves it forward by one.
pub type Revision = i64;

/// A key as the server returns it (etcd's `mvccpb.KeyValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// The revision of the write that created it (since it last did not exist): a lock key's
    /// fencing token, since no later key gets a smaller one.
    pub create_revision: Revision,
    /// The revision of its last write.
    pub mod_revision: Revision,
    /// How many times it was written since it was created (1 after the create).
    pub version: i64,
    /// The lease it is attached to (0: none); it is deleted when that lease ends.
    pub lease: LeaseId,
}

/// What a [`Compare`] reads of its key. A key that does not exist has 0 for all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    /// `create_revision`.
    CreateRevision,
    /// `mod_revision`.
    ModRevision,
    /// `version`.
    Version,
}

/// How a [`Compare`] compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `=`.
    Equal,
    /// `!=`.
    NotEqual,
    /// `>`.
    Greater,
    /// `<`.
    Less,
}

/// One condition of a transaction: `target(key) op value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    /// The key.
    pub key: String,
    /// What of it.
    pub target: CompareTarget,
    /// How.
    pub op: CompareOp,
    /// Against what.
    pub value: i64,
}

impl Compare {
    /// `create_revision(key) = 0`: the key does not exist.
    pub fn absent(key: &str) -> Compare {
        Compare {
            key: key.to_string(),
            target: CompareTarget::CreateRevision,
            op: CompareOp::Equal,
            value: 0,
        }
    }
}

/// The order a range's keys come in, by create revision (the Go client's `WithFirstCreate`
/// and `WithLastCreate` are a sort with a limit of 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortOrder {
    /// Oldest first.
    Ascend,
    /// Newest first.
    Descend,
}

/// A read of one key or of every key under a prefix (etcd's `RangeRequest`, reduced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    /// The key, or the prefix.
    pub key: String,
    /// Whether `key` is a prefix.
    pub prefix: bool,
    /// Sorted by create revision this way; `None`: by key, as etcd does.
    pub sort: Option<SortOrder>,
    /// At most this many keys (0: all).
    pub limit: i64,
    /// Only keys created at or before this revision (0: all).
    pub max_create_revision: Revision,
}

impl Range {
    /// The key `key`.
    pub fn key(key: &str) -> Range {
        Range {
            key: key.to_string(),
            prefix: false,
            sort: None,
            limit: 0,
            max_create_revision: 0,
        }
    }

    /// The key created first under `prefix` (`WithFirstCreate`).
    pub fn first_created(prefix: &str) -> Range {
        Range {
            key: prefix.to_string(),
            prefix: true,
            sort: Some(SortOrder::Ascend),
            limit: 1,
            max_create_revision: 0,
        }
    }

    /// The key created last under `prefix` at or before `max` (`WithLastCreate` with
    /// `WithMaxCreateRev`).
    pub fn last_created_up_to(prefix: &str, max: Revision) -> Range {
        Range {
            key: prefix.to_string(),
            prefix: true,
            sort: Some(SortOrder::Descend),
            limit: 1,
            max_create_revision: max,
        }
    }
}

/// One operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read.
    Range(Range),
    /// Write `value` to `key`, attached to `lease` (0: none).
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The lease (0: none).
        lease: LeaseId,
    },
    /// Delete `key`.
    Delete {
        /// The key.
        key: String,
    },
}

/// The result of one [`Op`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// The keys read.
    Range(Vec<KeyValue>),
    /// The put was applied.
    Put,
    /// How many keys the delete removed (0 or 1).
    Delete(i64),
}

/// A transaction: if every condition holds, the `success` operations, else the `failure` ones,
/// applied at one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    /// The conditions.
    pub compare: Vec<Compare>,
    /// What runs when they all hold.
    pub success: Vec<Op>,
    /// What runs otherwise.
    pub failure: Vec<Op>,
}

/// A transaction's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResult {
    /// The header's revision: the keyspace's revision after the transaction (the revision of its
    /// writes, if it wrote).
    pub revision: Revision,
    /// Whether the conditions held.
    pub succeeded: bool,
    /// One result per operation of the branch that ran.
    pub results: Vec<OpResult>,
}

/// The etcd errors the requests of this trait can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// A put names a lease the server does not have (expired, revoked, or never granted).
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    /// A branch of a transaction puts one key twice, or puts a key it also deletes.
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
}

/// One connection to an etcd server with its session lease, as the Go client and its
/// `concurrency.Session` offer it. Every call is bounded by the store's request timeout:
/// `Err(StoreError::Timeout)` means the request may have been applied; server errors are
/// `Ok(Err(EtcdError))`.
pub trait EtcdStore {
    /// The session's lease: the current one, or, when there is none or the last is done, a new
    /// one granted with the store's TTL and kept alive from then on (`concurrency.NewSession`).
    fn session(&self) -> impl Future<Output = Result<LeaseId, StoreError>>;

    /// Whether the session's lease is done (`Session.Done()` closed): no keep-alive was answered
    /// within its TTL, or the server said it no longer has it. Its keys may be gone.
    fn session_done(&self) -> bool;

    /// Waits until the session's lease is done.
    fn session_ended(&self) -> impl Future<Output = ()>;

    /// A transaction.
    fn txn(
        &self,
        txn: Txn,
    ) -> impl Future<Output = Result<Result<TxnResult, EtcdError>, StoreError>>;

    /// A read, with the header's revision.
    fn range(
        &self,
        range: Range,
    ) -> impl Future<Output = Result<(Vec<KeyValue>, Revision), StoreError>>;

    /// Deletes `key`: how many keys went (0 or 1).
    fn delete(&self, key: &str) -> impl Future<Output = Result<i64, StoreError>>;

    /// Waits until `key` is deleted at a revision at or after `from` (a watch from `from`: a
    /// deletion between the caller's read and this call is seen too). The store re-registers the
    /// watch after a lost connection, from where it left off.
    fn wait_deleted(&self, key: &str, from: Revision) -> impl Future<Output = ()>;
}
