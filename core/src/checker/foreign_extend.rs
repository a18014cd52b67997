//! Foreign extend: a server moved a lock's expiry at the request of a node other than the one
//! whose lock it was. An extend (a watchdog's renewal, a `PEXPIRE`) that succeeds on another
//! client's lock tells the extender its lock is still its own: it then works on inside a
//! section it no longer holds, and the rightful holder's lock outlives its lease.

use super::{ms, Violation, ViolationKind};
use crate::history::{Entry, KeyChange, Op};
use std::collections::BTreeMap;

/// Who a key on one server belongs to, by the history's account.
#[derive(Default)]
struct Owners<'a> {
    /// A string lock: the node that wrote the value it holds.
    string: Option<&'a str>,
    /// A hash lock (reentrant locks): each field present, with the node that last wrote it.
    fields: BTreeMap<&'a str, &'a str>,
}

/// Expiry changes of a lock by a node that does not own it. A string lock belongs to the node
/// that wrote its value; a hash lock to the nodes whose fields it holds (a reentrant lock's
/// owner field, each reader's field). A key with neither (a fair lock's queue, a list, a sorted
/// set) has no owner to wrong, and is not judged. Keys are judged per server, as each server
/// of a Redlock holds its own copy.
pub fn foreign_extends(history: &[Entry]) -> Vec<Violation> {
    let mut owners: BTreeMap<(&str, &str), Owners> = BTreeMap::new();
    let mut found = Vec::new();
    for e in history {
        let Op::Key {
            key,
            change,
            field,
            value,
            by,
            ..
        } = &e.op
        else {
            continue;
        };
        let at = (e.node.as_str(), key.as_str());
        match change {
            KeyChange::Set => {
                let entry = owners.entry(at).or_default();
                entry.string = by.as_deref();
                entry.fields.clear();
            }
            KeyChange::FieldSet => {
                if let (Some(field), Some(by)) = (field, by) {
                    let entry = owners.entry(at).or_default();
                    entry.string = None;
                    entry.fields.insert(field, by);
                }
            }
            KeyChange::FieldRemoved => {
                if let (Some(field), Some(entry)) = (field, owners.get_mut(&at)) {
                    entry.fields.remove(field.as_str());
                }
            }
            KeyChange::Deleted | KeyChange::Expired | KeyChange::Lost => {
                owners.remove(&at);
            }
            KeyChange::ExpiryChanged => {
                let (Some(by), Some(entry)) = (by, owners.get(&at)) else {
                    continue;
                };
                let owner = match entry.string {
                    Some(owner) if owner != by => Some(owner.to_string()),
                    Some(_) => None,
                    None if entry.fields.is_empty() || entry.fields.values().any(|w| w == by) => {
                        None
                    }
                    None => {
                        let mut writers: Vec<&str> = entry.fields.values().copied().collect();
                        writers.dedup();
                        Some(writers.join(" and "))
                    }
                };
                let Some(owner) = owner else { continue };
                found.push(Violation {
                    kind: ViolationKind::ForeignExtend,
                    clients: vec![owner.clone(), by.clone()],
                    tokens: value.iter().cloned().collect(),
                    at_ns: e.true_ns,
                    entries: vec![e.index],
                    story: format!(
                        "{by} extended {key} on {} at {} while it was {owner}'s lock: an extend \
                         without an owner check tells a client that lost its lock that it still \
                         holds it",
                        e.node,
                        ms(e.true_ns)
                    ),
                });
            }
            KeyChange::ListPushed | KeyChange::ListRemoved => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{History, Kind};

    fn key(change: KeyChange, field: Option<&str>, by: &str) -> Op {
        Op::Key {
            key: "lock".into(),
            change,
            field: field.map(Into::into),
            value: Some("v".into()),
            by: Some(by.into()),
            expires_local_ns: None,
        }
    }

    fn push(h: &mut History, t: u64, node: &str, op: Op) {
        h.push(t, node, t as i64, Kind::Observe, op);
    }

    #[test]
    fn extending_another_clients_string_lock_is_a_foreign_extend() {
        let mut h = History::default();
        push(&mut h, 1, "redis-0", key(KeyChange::Set, None, "client-0"));
        push(
            &mut h,
            2,
            "redis-0",
            key(KeyChange::ExpiryChanged, None, "client-0"),
        );
        assert!(foreign_extends(&h.entries).is_empty(), "its own lock");
        push(
            &mut h,
            3,
            "redis-0",
            key(KeyChange::Expired, None, "client-0"),
        );
        push(&mut h, 4, "redis-0", key(KeyChange::Set, None, "client-1"));
        push(
            &mut h,
            5,
            "redis-0",
            key(KeyChange::ExpiryChanged, None, "client-0"),
        );
        let found = foreign_extends(&h.entries);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].clients, vec!["client-1", "client-0"]);
        assert_eq!(found[0].kind.severity(), super::super::Severity::Unsafe);
    }

    #[test]
    fn a_hash_lock_is_its_field_writers_and_each_server_keeps_its_own() {
        let mut h = History::default();
        push(
            &mut h,
            1,
            "redis-0",
            key(KeyChange::FieldSet, Some("a:1"), "client-0"),
        );
        push(&mut h, 2, "redis-1", key(KeyChange::Set, None, "client-1"));
        // client-0 renews its hash on redis-0; client-1 its string on redis-1.
        push(
            &mut h,
            3,
            "redis-0",
            key(KeyChange::ExpiryChanged, None, "client-0"),
        );
        push(
            &mut h,
            4,
            "redis-1",
            key(KeyChange::ExpiryChanged, None, "client-1"),
        );
        assert!(foreign_extends(&h.entries).is_empty());
        push(
            &mut h,
            5,
            "redis-0",
            key(KeyChange::ExpiryChanged, None, "client-1"),
        );
        assert_eq!(foreign_extends(&h.entries).len(), 1);
    }
}
