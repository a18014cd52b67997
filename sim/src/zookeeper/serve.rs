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

/// Answers `request` against `tree` at the server's `mono` (session deadlines) and `wall`
/// (mtime) milliseconds: the watch events it fires are appended to `events`, and `ephemerals`
/// (each session's ephemeral nodes, what its expiry removes) follows its creates and deletes.
pub(crate) fn answer(
    tree: &mut ZkModel,
    ephemerals: &mut BTreeMap<SessionId, BTreeSet<String>>,
    request: ZkRequest,
    mono: u64,
    wall: u64,
    events: &mut Vec<WatchEvent>,
) -> Answer {
    match request {
        ZkRequest::Open { timeout_ms } => {
            let (session, timeout_ms) = tree.open_session(timeout_ms, mono);
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
            Ok(()) => Answer {
                attach: Some(session),
                ..Answer::only(ZkResponse::Reconnected)
            },
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
