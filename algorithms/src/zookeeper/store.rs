//! What a ZooKeeper backend can do, as seen by an algorithm.
//!
//! The simulated server (`lockcheck-sim`'s ZooKeeper model) speaks these very types, as the
//! simulated Redis speaks this crate's `Command` and `Reply`, so sim and algorithm cannot drift.

use crate::error::StoreError;
use std::future::Future;

/// A session id. Never 0: 0 is the `ephemeralOwner` of a node that is not ephemeral.
pub type SessionId = u64;

/// A ZooKeeper transaction id: a global counter that every write moves forward.
pub type Zxid = i64;

/// How a node is created (ZooKeeper's `CreateMode`, without containers and TTL nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CreateMode {
    /// Stays until deleted.
    Persistent,
    /// Deleted when its owner's session ends (closed or expired).
    Ephemeral,
    /// Persistent, with a sequence number appended to the name: the number of children ever
    /// created under the parent.
    PersistentSequential,
    /// Ephemeral, with the sequence number appended to the name: the lock recipes' node.
    EphemeralSequential,
}

impl CreateMode {
    /// Whether the node dies with its session.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// Whether the server appends a sequence number (the number of children ever created under
    /// the parent) to the name.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }
}

/// A node's metadata as the server returns it (ZooKeeper's `Stat`, without `aversion`). The
/// integer widths are the wire format's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The zxid of the transaction that created the node: a lock node's fencing token, since no
    /// later node can be created with a smaller one.
    pub czxid: Zxid,
    /// The zxid of the transaction that last wrote the node's data.
    pub mzxid: Zxid,
    /// The zxid of the last transaction that added or removed a child.
    pub pzxid: Zxid,
    /// Creation time on the server's wall clock, in ms.
    pub ctime_ms: u64,
    /// Last data write on the server's wall clock, in ms.
    pub mtime_ms: u64,
    /// The number of `setData`s the node has seen.
    pub version: i32,
    /// The number of changes to the node's children, creations and deletions (the server counts
    /// creations and reports `2 × creations − children`).
    pub cversion: i32,
    /// The owning session of an ephemeral node, 0 otherwise.
    pub ephemeral_owner: SessionId,
    /// The length of the node's data in bytes.
    pub data_length: i32,
    /// The number of children the node has now.
    pub num_children: i32,
}

/// The ZooKeeper error codes the requests of this trait can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum ZkError {
    /// The node (or, for a create, its parent) does not exist.
    #[error("KeeperErrorCode = NoNode")]
    NoNode,
    /// The node to create exists already.
    #[error("KeeperErrorCode = NodeExists")]
    NodeExists,
    /// The version given does not match the node's.
    #[error("KeeperErrorCode = BadVersion")]
    BadVersion,
    /// The node to delete has children.
    #[error("KeeperErrorCode = Directory not empty")]
    NotEmpty,
    /// The parent of the node to create is ephemeral.
    #[error("KeeperErrorCode = NoChildrenForEphemerals")]
    NoChildrenForEphemerals,
    /// The session is unknown, closed or expired.
    #[error("KeeperErrorCode = Session expired")]
    SessionExpired,
    /// The path is malformed, or names a node that cannot be deleted.
    #[error("KeeperErrorCode = BadArguments")]
    BadArguments,
}

impl ZkError {
    /// The numeric code on the wire (`KeeperException.Code`), for comparing with a real server.
    pub fn code(self) -> i32 {
        match self {
            ZkError::NoNode => -101,
            ZkError::NodeExists => -110,
            ZkError::BadVersion => -103,
            ZkError::NotEmpty => -111,
            ZkError::NoChildrenForEphemerals => -108,
            ZkError::SessionExpired => -112,
            ZkError::BadArguments => -8,
        }
    }
}

/// What a watch reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventType {
    /// A node watched with `exists` was created.
    NodeCreated,
    /// A watched node was deleted (by a request or because its owner's session ended).
    NodeDeleted,
    /// A node watched with `exists`/`getData` had its data written.
    NodeDataChanged,
    /// A child was created under, or deleted from, a node watched with `getChildren`.
    NodeChildrenChanged,
}

/// A watch of this store's session that fired. The session is implicit: a store is one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    /// The watched path.
    pub path: String,
    /// What happened.
    pub kind: EventType,
}

/// The client's view of its session (ZooKeeper's `KeeperState`, reduced to what locks act on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Connected to a server; the session is alive.
    Connected,
    /// The connection was lost; the session may still be alive on the server (its ephemeral
    /// nodes stay) until its timeout passes there.
    Disconnected,
    /// The server ended the session: its ephemeral nodes and watches are gone.
    Expired,
}

/// Something the session tells its client without being asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkNotice {
    /// A watch fired.
    Watch(WatchEvent),
    /// The session's state changed.
    State(SessionState),
}

/// One client session with a ZooKeeper ensemble, as a client library offers it.
///
/// The session lives inside the store: its pings, its reconnects, and (like Curator's
/// `ConnectionState`) a fresh session on the next request once the old one has expired. An
/// algorithm sees only requests, the notices of its session and the session's state. Every call
/// is bounded by the store's own request timeout: `Err(StoreError::Timeout)` means the request
/// may have been applied; server errors are `Ok(Err(ZkError))`.
pub trait ZkStore {
    /// `create(path, data, OPEN_ACL_UNSAFE, mode)` (`create2`): the path actually created (with
    /// the sequence suffix if any) and the new node's stat.
    fn create(
        &self,
        path: &str,
        data: Vec<u8>,
        mode: CreateMode,
    ) -> impl Future<Output = Result<Result<(String, Stat), ZkError>, StoreError>>;

    /// `delete(path, version)`; a `version` of -1 matches any.
    fn delete(
        &self,
        path: &str,
        version: i32,
    ) -> impl Future<Output = Result<Result<(), ZkError>, StoreError>>;

    /// Curator's `delete().guaranteed()`, for a delete that got no answer: the session keeps
    /// deleting `path` in the background, again after every reconnection, until the server
    /// answers (deleted, or no such node) or the session ends (and an ephemeral node with it).
    /// Returns at once. Without it a lock node whose delete was lost would outlive its release
    /// for as long as its client lives, and block every waiter behind it.
    fn delete_in_background(&self, path: &str);

    /// Curator's `FindAndDeleteProtectedNodeInBackground`, for a protected create given up
    /// on while its outcome is unknown: the session keeps looking among `parent`'s children for
    /// the one whose name contains `mark` (the create's protection prefix) and deleting it, in
    /// the background and again after every reconnection, until it is deleted, none is there,
    /// or the session ends. Returns at once. Without it a create applied after its client gave
    /// up would leave a node no one owns ahead of every waiter, for as long as the client lives.
    fn find_and_delete_in_background(&self, parent: &str, mark: &str);

    /// `exists(path, watch)`: the node's stat, `None` when there is no such node. With `watch`,
    /// leaves a one-shot data watch even when the node does not exist.
    fn exists(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Result<Option<Stat>, ZkError>, StoreError>>;

    /// `getChildren(path, watch)`: the children's names (not paths), in no promised order.
    fn get_children(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Result<Vec<String>, ZkError>, StoreError>>;

    /// Waits for the next watch event or session state change of this session, in the order the
    /// session saw them. Cancel-safe: dropping the future before it completes loses no notice,
    /// so an algorithm may race it against a timer.
    fn next_event(&self) -> impl Future<Output = ZkNotice>;

    /// The session's state as the client knows it now.
    fn state(&self) -> SessionState;

    /// The session requests go out in now; `None` before the first one opened and after it
    /// expired. A node whose `ephemeral_owner` is this id was made by this client in this
    /// session: how a lock recognises its node after a create whose reply was lost.
    fn session_id(&self) -> Option<SessionId>;
}

/// One session shared by several locks of a client (Curator's read and write locks share their
/// client's session).
impl<S: ZkStore> ZkStore for std::rc::Rc<S> {
    fn create(
        &self,
        path: &str,
        data: Vec<u8>,
        mode: CreateMode,
    ) -> impl Future<Output = Result<Result<(String, Stat), ZkError>, StoreError>> {
        (**self).create(path, data, mode)
    }

    fn delete(
        &self,
        path: &str,
        version: i32,
    ) -> impl Future<Output = Result<Result<(), ZkError>, StoreError>> {
        (**self).delete(path, version)
    }

    fn delete_in_background(&self, path: &str) {
        (**self).delete_in_background(path)
    }

    fn find_and_delete_in_background(&self, parent: &str, mark: &str) {
        (**self).find_and_delete_in_background(parent, mark)
    }

    fn exists(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Result<Option<Stat>, ZkError>, StoreError>> {
        (**self).exists(path, watch)
    }

    fn get_children(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Result<Vec<String>, ZkError>, StoreError>> {
        (**self).get_children(path, watch)
    }

    fn next_event(&self) -> impl Future<Output = ZkNotice> {
        (**self).next_event()
    }

    fn state(&self) -> SessionState {
        (**self).state()
    }

    fn session_id(&self) -> Option<SessionId> {
        (**self).session_id()
    }
}
