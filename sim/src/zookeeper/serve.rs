//! How a ZooKeeper server answers a client's request against its tree. The standalone server
//! ([`super::node`]) and an ensemble's leader ([`super::member`]) answer alike; they differ only
//! in where they keep a session's client and on which node a change is recorded, which the
//! [`Answer`] leaves to them.

use super::model::{EventType, Op, OpResult, SessionId, WatchEvent, ZkError, ZkModel};
use super::node::{ZkRequest, ZkResponse};
use lockcheck_core::history::KeyChange;
use std::collections::{BTreeMap, BTreeSet};

/// What answering one request did.
pub(crate) struct Answer {
    /// The response to send.
    pub response: ZkResponse,
    /// The session the request's client now holds through its connection (opened, resumed or
    /// used): where its watch events go from now on.
    pub attach: Option<SessionId>,
    /// The node the request created or deleted, for the history.
    pub change: Option<(String, KeyChange)>,
}

impl Answer {
    fn only(response: ZkResponse) -> Answer {
        Answer {
            response,
            attach: None,
            change: None,
        }
    }
}

/// Answers `request`, which came on the client's `connection`, against `tree` at the server's
/// `mono` (session deadlines) and `wall` (mtime) milliseconds: the watch events it fires are
/// appended to `events`, and `ephemerals` (each session's ephemeral nodes, what its expiry
/// removes) follows its creates and deletes. A request on a connection its session has left is
/// not carried out ([`ZkResponse::SessionMoved`]).
pub(crate) fn answer(
    tree: &mut ZkModel,
    ephemerals: &mut BTreeMap<SessionId, BTreeSet<String>>,
    connection: u64,
    request: ZkRequest,
    mono: u64,
    wall: u64,
    events: &mut Vec<WatchEvent>,
) -> Answer {
    let session = match &request {
        ZkRequest::Open { .. } => None,
        ZkRequest::Reconnect { session, .. }
        | ZkRequest::Ping { session }
        | ZkRequest::Op { session, .. } => Some(*session),
    };
    if let Some(session) = session {
        if tree.moved_on(session, connection) {
            return Answer::only(ZkResponse::SessionMoved);
        }
    }
    match request {
        ZkRequest::Open { timeout_ms } => {
            let (session, timeout_ms) = tree.open_session(timeout_ms, mono);
            tree.claim(session, connection);
            Answer {
                attach: Some(session),
                ..Answer::only(ZkResponse::Opened {
                    session,
                    timeout_ms,
                })
            }
        }
        ZkRequest::Reconnect {
            session,
            last_zxid,
            watches,
        } => match tree.reconnect(session, last_zxid, &watches, mono, events) {
            Ok(()) => {
                tree.claim(session, connection);
                Answer {
                    attach: Some(session),
                    ..Answer::only(ZkResponse::Reconnected)
                }
            }
            Err(_) => Answer::only(ZkResponse::Expired),
        },
        ZkRequest::Ping { session } => match tree.touch(session, mono) {
            Ok(()) => Answer::only(ZkResponse::Pong),
            Err(_) => Answer::only(ZkResponse::Expired),
        },
        ZkRequest::Op { session, op } => {
            let result = tree.apply(session, &op, mono, wall, events);
            let (response, change) = match (&op, &result) {
                (_, OpResult::Error(ZkError::SessionExpired)) => (ZkResponse::Expired, None),
                (Op::Create { mode, .. }, OpResult::Created(path)) => {
                    if mode.is_ephemeral() {
                        ephemerals.entry(session).or_default().insert(path.clone());
                    }
                    let stat = tree.stat(path);
                    let change = Some((path.clone(), KeyChange::Set));
                    (ZkResponse::Result(result, stat), change)
                }
                (Op::Delete { path, .. }, OpResult::Deleted) => {
                    for nodes in ephemerals.values_mut() {
                        nodes.remove(path);
                    }
                    let change = Some((path.clone(), KeyChange::Deleted));
                    (ZkResponse::Result(result, None), change)
                }
                _ => (ZkResponse::Result(result, None), None),
            };
            Answer {
                response,
                attach: Some(session),
                change,
            }
        }
    }
}

/// A watch event's name in the history.
pub(crate) fn event_name(kind: EventType) -> &'static str {
    match kind {
        EventType::NodeCreated => "node_created",
        EventType::NodeDeleted => "node_deleted",
        EventType::NodeDataChanged => "node_data_changed",
        EventType::NodeChildrenChanged => "node_children_changed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zookeeper::model::{CreateMode, SetWatches};

    fn create(session: SessionId, path: &str) -> ZkRequest {
        ZkRequest::Op {
            session,
            op: Op::Create {
                path: path.into(),
                data: Vec::new(),
                mode: CreateMode::Ephemeral,
            },
        }
    }

    /// A session reconnects on its client's second connection: what was still on its way on
    /// the first (a create, a ping, a late reconnect) is not carried out, and what comes on the
    /// second is.
    #[test]
    fn a_request_on_a_connection_its_session_has_left_is_not_carried_out() {
        let mut tree = ZkModel::new();
        let mut ephemerals = BTreeMap::new();
        let mut events = Vec::new();
        let mut answer = |tree: &mut ZkModel, connection, request, at| {
            super::answer(
                tree,
                &mut ephemerals,
                connection,
                request,
                at,
                at,
                &mut events,
            )
            .response
        };
        let ZkResponse::Opened { session, .. } =
            answer(&mut tree, 1, ZkRequest::Open { timeout_ms: 4_000 }, 0)
        else {
            panic!("opened");
        };
        let reconnect = ZkRequest::Reconnect {
            session,
            last_zxid: 0,
            watches: SetWatches::default(),
        };
        assert!(matches!(
            answer(&mut tree, 2, reconnect.clone(), 100),
            ZkResponse::Reconnected
        ));
        let zxid = tree.last_zxid();
        assert!(matches!(
            answer(&mut tree, 1, create(session, "/a"), 200),
            ZkResponse::SessionMoved
        ));
        assert_eq!(tree.last_zxid(), zxid, "nothing was written");
        assert!(tree.stat("/a").is_none());
        assert!(matches!(
            answer(&mut tree, 1, ZkRequest::Ping { session }, 3_000),
            ZkResponse::SessionMoved
        ));
        assert!(matches!(
            answer(&mut tree, 1, reconnect, 3_000),
            ZkResponse::SessionMoved
        ));
        // The held ping renewed nothing: the session's deadline is still from the reconnect.
        assert!(tree.next_expiry_ms().unwrap() < 3_000 + 4_000);
        assert!(matches!(
            answer(&mut tree, 2, create(session, "/a"), 300),
            ZkResponse::Result(OpResult::Created(_), _)
        ));
        assert!(tree.stat("/a").is_some());
    }
}
