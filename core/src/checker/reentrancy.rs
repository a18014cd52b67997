//! Reentrancy: a reentrant lock's key deleted by its owner's release while the owner still held
//! it at an outer level.

use super::{ms, Violation, ViolationKind};
use crate::history::{Entry, KeyChange, Kind, Op};
use crate::schedule::kind as nemesis;
use std::collections::BTreeMap;

/// A lock key deleted at its owner's request while the owner, by its own operations, still held
/// that very lock: for a reentrant lock, an inner release must leave the lock held. What a key
/// held is known from its value (a string lock: the token) or from the last owner field written
/// into it on that server (a hash lock: the owner, which is the guard's token); a deletion of
/// anything else (a stale key from an earlier attempt, landing late on a server that was paused
/// or cut off) frees nothing the client holds.
pub fn reentrancy(history: &[Entry]) -> Vec<Violation> {
    // Per client, the tokens of the locks it holds, once per acquisition not yet released.
    let mut held: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    // Lock keys, per server: what each holds now (a string's value, a hash's owner field).
    // Queues and deadline sets are not locks, and a purge that empties them is no release.
    let mut holding: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    let mut found = Vec::new();
    for e in history {
        match (&e.op, e.kind) {
            (
                Op::Key {
                    key,
                    change: KeyChange::Set,
                    value: Some(value),
                    ..
                },
                _,
            ) => {
                holding.insert((e.node.as_str(), key), value);
            }
            (
                Op::Key {
                    key,
                    change: KeyChange::FieldSet,
                    field: Some(owner),
                    ..
                },
                _,
            ) => {
                holding.insert((e.node.as_str(), key), owner);
            }
            (
                Op::Acquire {
                    token: Some(token), ..
                },
                Kind::Ok,
            ) => held.entry(&e.node).or_default().push(token),
            (Op::Release { token, .. }, Kind::Invoke) => {
                if let Some(tokens) = held.get_mut(e.node.as_str()) {
                    if let Some(at) = tokens.iter().rposition(|t| t == token) {
                        tokens.remove(at);
                    }
                }
            }
            // A crashed client is a new process when it restarts: it holds nothing.
            (Op::Nemesis { kind, .. }, _) if kind == nemesis::CRASH => {
                held.remove(e.node.as_str());
            }
            (
                Op::Key {
                    key,
                    change: KeyChange::Deleted,
                    value,
                    by: Some(by),
                    ..
                },
                _,
            ) => {
                let lock = value
                    .as_deref()
                    .or_else(|| holding.get(&(e.node.as_str(), key.as_str())).copied());
                holding.remove(&(e.node.as_str(), key.as_str()));
                let Some(lock) = lock else { continue };
                let d = held
                    .get(by.as_str())
                    .map_or(0, |tokens| tokens.iter().filter(|t| **t == lock).count());
                if d > 0 {
                    found.push(Violation {
                        kind: ViolationKind::FreedWhileHeld,
                        clients: vec![by.clone()],
                        tokens: vec![lock.to_string()],
                        at_ns: e.true_ns,
                        entries: vec![e.index],
                        story: format!(
                            "{by}'s release deleted {key} on {} at {} while it still held that \
                             lock {d} level(s) deep",
                            e.node,
                            ms(e.true_ns)
                        ),
                    });
                }
            }
            // Expired or lost with its server: no longer held by anyone there.
            (
                Op::Key {
                    key,
                    change: KeyChange::Expired | KeyChange::Deleted | KeyChange::Lost,
                    ..
                },
                _,
            ) => {
                holding.remove(&(e.node.as_str(), key.as_str()));
            }
            _ => {}
        }
    }
    found
}
