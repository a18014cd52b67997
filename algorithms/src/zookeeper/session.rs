//! How a ZooKeeper lock follows its session while held.
//!
//! A ZooKeeper lock has no lease: it is an ephemeral node that lives as long as the holder's
//! session. The client learns of the session's fate only through its connection: DISCONNECTED
//! (no answer for two thirds of the timeout; the session may still be alive on the server) and
//! EXPIRED (the server ended it; learned only on reaching the server again, so always late).
//! Curator's advice is to treat the first as "suspended" and the second as "lost".

use super::config::ZkLockConfig;
use super::store::{SessionState, ZkNotice, ZkStore};
use crate::env::Env;
use crate::error::StoreError;
use crate::guard::Guard;
use futures_util::future::{select, Either};
use std::cell::RefCell;
use std::pin::pin;
use std::time::Duration;

/// Waits until something may have changed whether we can hold: a watch on `watched` fired, or
/// the session's state changed; false when `deadline` (client monotonic time) passed first.
pub(crate) async fn await_change<S: ZkStore, E: Env>(
    store: &S,
    env: &E,
    deadline: Duration,
    watched: &str,
) -> bool {
    loop {
        let now = env.mono_now();
        if now >= deadline {
            return false;
        }
        let notice = pin!(store.next_event());
        let timer = pin!(env.sleep(deadline - now));
        match select(notice, timer).await {
            Either::Left((ZkNotice::Watch(event), _)) if event.path == watched => return true,
            // Watches of an earlier wait, which fire late or never.
            Either::Left((ZkNotice::Watch(_), _)) => {}
            // The session may survive a disconnection, and our node with it.
            Either::Left((ZkNotice::State(SessionState::Disconnected), _)) => {}
            // After an expiry our node is gone, and after a reconnection our watch may be: a
            // fresh look tells. It also tells when the notice is stale, from an earlier session.
            Either::Left((ZkNotice::State(_), _)) => return true,
            Either::Right(((), _)) => return false,
        }
    }
}

/// Whether the node at `path` exists and belongs to our current session: for a lock node, that
/// we still hold it (a node of an expired session is gone; one at the same path may be another
/// client's).
pub(crate) async fn still_ours<S: ZkStore>(store: &S, path: &str) -> Result<bool, StoreError> {
    let Some(me) = store.session_id() else {
        return Ok(false);
    };
    Ok(matches!(
        store.exists(path, false).await?,
        Ok(Some(stat)) if stat.ephemeral_owner == me
    ))
}

/// Follows the session of our lock node at `node` until the lock is lost, keeping `guard`'s
/// validity in line: ended while the session is disconnected (restored when a reconnection finds
/// the node still there), ended for good once the node is gone, or at the first disconnection
/// with `config.suspended_is_lost`.
pub(crate) async fn session_watch<S: ZkStore, E: Env>(
    store: &S,
    config: &ZkLockConfig,
    env: &E,
    guard: &RefCell<Guard>,
    node: &str,
) {
    let held_until = guard.borrow().valid_until;
    let mut suspended = false;
    let end_validity = |guard: &RefCell<Guard>| {
        let mut guard = guard.borrow_mut();
        guard.valid_until = guard.valid_until.min(env.mono_now());
    };
    loop {
        let ZkNotice::State(state) = store.next_event().await else {
            continue;
        };
        match state {
            SessionState::Disconnected if config.suspended_is_lost => break,
            SessionState::Disconnected => {
                suspended = true;
                end_validity(guard);
            }
            SessionState::Connected if !suspended => {}
            SessionState::Connected | SessionState::Expired => {
                // A notice may be stale (from a session before our node's), and a reconnection
                // may come after the server expired us: ask whether the node is still there.
                match still_ours(store, node).await {
                    Ok(true) => {
                        if suspended {
                            suspended = false;
                            guard.borrow_mut().valid_until = held_until;
                        }
                    }
                    Ok(false) => break,
                    // No answer: trust an expiry notice; stay suspended after a reconnection.
                    Err(_) if state == SessionState::Expired => break,
                    Err(_) => {}
                }
            }
        }
    }
    end_validity(guard);
}
