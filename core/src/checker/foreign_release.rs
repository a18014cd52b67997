//! Foreign release: a server deleted a lock value at the request of a node other than the one
//! that wrote it.

use super::{ms, Violation, ViolationKind};
use crate::history::{Entry, KeyChange, Op};
use std::collections::BTreeMap;

/// Deletions of a lock by a node other than its owner. The owner of a string lock is the node
/// that wrote the deleted value (its token); the owner of a hash lock (reentrant locks) is the
/// node that last wrote one of its fields, until the key goes away.
pub fn foreign_releases(history: &[Entry]) -> Vec<Violation> {
    let mut writer: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    let mut hash_owner: BTreeMap<&str, &str> = BTreeMap::new();
    let mut found = Vec::new();
    for e in history {
        let Op::Key {
            key,
            change,
            value,
            by,
            ..
        } = &e.op
        else {
            continue;
        };
        let owner = match (change, value, by) {
            (KeyChange::Set, Some(value), Some(by)) => {
                writer.insert((key, value), by);
                continue;
            }
            (KeyChange::FieldSet, _, Some(by)) => {
                hash_owner.insert(key, by);
                continue;
            }
            (KeyChange::Expired | KeyChange::Lost, _, _) => {
                hash_owner.remove(key.as_str());
                continue;
            }
            (KeyChange::Deleted, Some(value), Some(_)) => {
                writer.get(&(key.as_str(), value.as_str())).copied()
            }
            (KeyChange::Deleted, None, Some(_)) => hash_owner.remove(key.as_str()),
            _ => continue,
        };
        let (Some(owner), Some(by)) = (owner, by) else {
            continue;
        };
        if owner != by {
            found.push(Violation {
                kind: ViolationKind::ForeignRelease,
                clients: vec![owner.to_string(), by.clone()],
                tokens: value.iter().cloned().collect(),
                at_ns: e.true_ns,
                entries: vec![e.index],
                story: format!(
                    "{by} deleted {key} at {} while it was {owner}'s lock",
                    ms(e.true_ns)
                ),
            });
        }
    }
    found
}
