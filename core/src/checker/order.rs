//! Order: fair and sequential locks must hand the lock out in the order waiters arrived.
//!
//! - **FIFO** ([`fifo`]), for fair Redis locks: a grant goes to the longest-queued waiter still
//!   in the race.
//! - **Sequence** ([`sequence_order`]), for ZooKeeper's sequential-node locks: the lock passes in
//!   the order the server created the nodes.

use super::reach::Reach;
use super::{ms, Liveness, Violation, ViolationKind};
use crate::history::{Entry, KeyChange, Kind, Op};
use crate::schedule::kind::CRASH;
use crate::topology::Topology;
use lockcheck_algorithms::zookeeper::sequential::is_write_node;
use std::collections::{BTreeMap, BTreeSet};

/// A waiter's place in a fair lock's queue.
#[derive(Clone, Copy, Debug)]
struct Place<'a> {
    /// The history index of its push: the order of the queue.
    at: usize,
    /// The queue's key.
    queue: &'a str,
    /// Taken off the queue by another client while it was still polling, and not queued again
    /// since: out of the server's queue, but not out of the race.
    off_queue: bool,
    /// Ever taken off the queue while polling (for the finding's story).
    dropped_while_polling: bool,
}

/// Fair locks: a grant (an owner's count in the lock hash going from nothing to 1) must go to the
/// longest-queued waiter still in the race.
///
/// Who is in the race is judged by what the waiters did, not by the server's queue alone: a
/// fair queue drops a waiter whose deadline passed, and the deadline is judged by the clock of
/// whichever client runs the script. A waiter taken off the queue by another client while it
/// was still polling (its acquire in flight, it and the service reachable for a whole queue
/// timeout before, so it polled within its deadline in true time) was dropped by a clock that
/// disagrees with time, and stays in the race at its old place; when it queues again it keeps
/// that place. (Not for a client that ever crashed: its places cannot be told from its dead
/// predecessor's.) Otherwise, a waiter taken off the queue without a grant (its deadline passed, it
/// gave up, it crashed) is out of the race; one that never queued may take the lock only when
/// nobody is waiting. A queue that is gone (deleted, or lost in a crash) holds nobody, and a
/// grant takes its owner out of the queue whether or not the server popped it.
pub fn fifo(history: &[Entry], liveness: &Liveness) -> Vec<Violation> {
    let mut queued: BTreeMap<&str, Place> = BTreeMap::new();
    let mut dequeued: BTreeMap<&str, usize> = BTreeMap::new();
    let mut counts: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    // Which client queued each owner, and since when each client's acquire has been in flight.
    let mut client_of: BTreeMap<&str, &str> = BTreeMap::new();
    let mut asking: BTreeMap<&str, u64> = BTreeMap::new();
    let mut crashed: BTreeSet<&str> = BTreeSet::new();
    let mut reach = Reach::default();
    let mut found = Vec::new();
    for e in history {
        let t = e.true_ns;
        let (key, change, field, value, by) = match &e.op {
            Op::Key {
                key,
                change,
                field,
                value,
                by,
                ..
            } => (key, change, field, value, by),
            Op::Acquire { .. } if e.node != Topology::PROBE => {
                let client = e.node.as_str();
                if e.kind == Kind::Invoke {
                    asking.entry(client).or_insert(t);
                } else {
                    asking.remove(client);
                    if e.kind != Kind::Ok {
                        stopped_asking(&mut queued, &client_of, client);
                    }
                }
                continue;
            }
            Op::Nemesis {
                kind,
                target: Some(target),
                ..
            } => {
                if kind == CRASH {
                    // Its owners died with the process. Which owner a push came from is not in
                    // the history (a dead process's last command may still arrive after its
                    // successor's first), so from now on none of the client's places is
                    // judged by its polling: the queue's word is final for them.
                    asking.remove(target.as_str());
                    stopped_asking(&mut queued, &client_of, target);
                    crashed.insert(target.as_str());
                }
                reach.nemesis(kind, target, t);
                continue;
            }
            _ => continue,
        };
        match (change, field, value) {
            (KeyChange::ListPushed, _, Some(owner)) => {
                if let Some(client) = by {
                    client_of.insert(owner, client);
                }
                let place = queued.entry(owner).or_insert(Place {
                    at: e.index,
                    queue: key,
                    off_queue: false,
                    dropped_while_polling: false,
                });
                place.off_queue = false;
            }
            (KeyChange::ListRemoved, _, Some(owner)) => {
                let alive = match (client_of.get(owner.as_str()), by) {
                    (Some(&waiter), Some(by)) if by != waiter && !crashed.contains(waiter) => {
                        liveness.queue_timeout_ns.is_some_and(|timeout| {
                            t >= timeout && polling_throughout(waiter, t - timeout, &asking, &reach)
                        })
                    }
                    _ => false,
                };
                if alive {
                    if let Some(place) = queued.get_mut(owner.as_str()) {
                        place.off_queue = true;
                        place.dropped_while_polling = true;
                    }
                } else if let Some(place) = queued.remove(owner.as_str()) {
                    dequeued.insert(owner, place.at);
                }
            }
            (KeyChange::FieldSet, Some(owner), Some(count)) => {
                let before = counts.insert((key, owner), count);
                if count != "1" || before.is_some_and(|c| c != "0") {
                    continue;
                }
                // A grant. Its place in the queue: when it was queued, or never.
                let place = dequeued
                    .remove(owner.as_str())
                    .or_else(|| queued.remove(owner.as_str()).map(|p| p.at))
                    .unwrap_or(usize::MAX);
                let ahead: Vec<(&str, Place)> = queued
                    .iter()
                    .filter(|(w, p)| p.at < place && **w != owner.as_str())
                    .map(|(w, p)| (*w, *p))
                    .collect();
                if let Some((first, _)) = ahead.first() {
                    let client = by.clone().unwrap_or_default();
                    let dropped = ahead
                        .iter()
                        .filter(|(_, p)| p.dropped_while_polling)
                        .count();
                    let why = if dropped == 0 {
                        String::new()
                    } else {
                        format!(
                            " ({dropped} of them taken off the queue by another client while \
                             still polling: a deadline judged by a clock that disagrees with \
                             time)"
                        )
                    };
                    found.push(Violation {
                        kind: ViolationKind::FifoOrder,
                        clients: vec![client.clone()],
                        tokens: vec![owner.clone(), first.to_string()],
                        at_ns: t,
                        entries: vec![e.index],
                        story: format!(
                            "{client} was granted {key} at {} while {} waiter(s) queued before it \
                             were still waiting{why}",
                            ms(t),
                            ahead.len()
                        ),
                    });
                }
            }
            // A queue emptied by its last pop is deleted too: that takes nobody out of the
            // race who was not already off the queue.
            (KeyChange::Deleted | KeyChange::Expired, _, _) => {
                counts.retain(|(k, _), _| *k != key.as_str());
                queued.retain(|_, p| p.queue != key.as_str() || p.off_queue);
            }
            (KeyChange::Lost, _, _) => {
                counts.retain(|(k, _), _| *k != key.as_str());
                queued.retain(|_, p| p.queue != key.as_str());
            }
            _ => {}
        }
    }
    found
}

/// `client` stopped asking (it gave up, or crashed): its places kept in the race only by this
/// check, off the server's queue, leave the race.
fn stopped_asking(
    queued: &mut BTreeMap<&str, Place>,
    client_of: &BTreeMap<&str, &str>,
    client: &str,
) {
    queued.retain(|owner, p| !p.off_queue || client_of.get(owner) != Some(&client));
}

/// Whether `client` has been asking for the lock, running and with the service reachable, from
/// `from` (true ns) until now. A waiter polls at least twice per queue timeout, so if this held
/// for a whole queue timeout, it kept its deadline in the future by true time. Nothing shorter
/// will do: a poll held up by an outage that ended within the window may reach the server late
/// with a deadline already past, and a place dropped for that is no clock's fault.
fn polling_throughout(
    client: &str,
    from: u64,
    asking: &BTreeMap<&str, u64>,
    reach: &Reach,
) -> bool {
    let asked = asking.get(client).is_some_and(|&since| since <= from);
    asked && reach.since(client).is_some_and(|since| since <= from)
}

/// Sequential-node locks (ZooKeeper): the lock passes in the order the server created the nodes.
/// At each grant (a client's acquisition of a node path as its token), no node created before it
/// may still exist ungranted. Nodes deleted or expired without a grant are out of the race.
///
/// It reads every key the history sets as a node path: `checker::check` applies it only to the
/// algorithms whose description promises `Order::Sequence`, whose server is a ZooKeeper.
pub fn sequence_order(history: &[Entry]) -> Vec<Violation> {
    // Nodes (ZooKeeper paths) alive and not yet granted, with their creation position.
    let mut waiting: BTreeMap<&str, usize> = BTreeMap::new();
    let mut found = Vec::new();
    for e in history {
        match (&e.op, e.kind) {
            (
                Op::Key {
                    key,
                    change: KeyChange::Set,
                    ..
                },
                _,
            ) => {
                waiting.insert(key, e.index);
            }
            (
                Op::Key {
                    key,
                    change: KeyChange::Deleted | KeyChange::Expired,
                    ..
                },
                _,
            ) => {
                waiting.remove(key.as_str());
            }
            (
                Op::Acquire {
                    token: Some(token),
                    shared,
                    ..
                },
                Kind::Ok,
            ) => {
                let Some(created) = waiting.remove(token.as_str()) else {
                    continue; // not a node path, or a re-entry
                };
                // A reader may pass an older reader that has not looked yet, never an older
                // write node; an exclusive grant passes nobody.
                let older: Vec<&str> = waiting
                    .iter()
                    .filter(|(path, at)| **at < created && parent(path) == parent(token))
                    .filter(|(path, _)| !*shared || is_write_node(path))
                    .map(|(path, _)| *path)
                    .collect();
                if let Some(first) = older.first() {
                    found.push(Violation {
                        kind: ViolationKind::FifoOrder,
                        clients: vec![e.node.clone()],
                        tokens: vec![token.clone(), first.to_string()],
                        at_ns: e.true_ns,
                        entries: vec![e.index],
                        story: format!(
                            "{} was granted {token} at {} while {} older node(s) still waited",
                            e.node,
                            ms(e.true_ns),
                            older.len()
                        ),
                    });
                }
            }
            _ => {}
        }
    }
    found
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

#[cfg(test)]
mod tests {
    use super::super::tests::zk_node;
    use super::*;
    use crate::history::History;

    /// No fair lock's deadlines to judge: the queue's word is final.
    const NO_CLOCK_JUDGED: Liveness = Liveness {
        lease_ns: None,
        stuck_after_ns: u64::MAX,
        queue_timeout_ns: None,
    };

    fn key(h: &mut History, change: KeyChange, field: Option<&str>, value: &str, by: &str) {
        key_at(h, h.entries.len() as u64, change, field, value, by);
    }

    /// A change by `by` at true time `t` to the lock hash (with a field) or else its queue.
    fn key_at(
        h: &mut History,
        t: u64,
        change: KeyChange,
        field: Option<&str>,
        value: &str,
        by: &str,
    ) {
        let key = if field.is_some() {
            "lock"
        } else {
            "lock:queue"
        };
        h.push(
            t,
            "redis-0",
            0,
            Kind::Observe,
            Op::Key {
                key: key.into(),
                change,
                field: field.map(String::from),
                value: Some(value.into()),
                by: Some(by.into()),
                expires_local_ns: None,
            },
        );
    }

    #[test]
    fn grants_out_of_queue_order_break_fifo() {
        let mut h = History::default();
        key(&mut h, KeyChange::FieldSet, Some("a"), "1", "client-0");
        key(&mut h, KeyChange::ListPushed, None, "b", "client-1");
        key(&mut h, KeyChange::ListPushed, None, "c", "client-2");
        key(&mut h, KeyChange::FieldSet, Some("a"), "0", "client-0");
        // The head, b, is granted: fine.
        key(&mut h, KeyChange::ListRemoved, None, "b", "client-1");
        key(&mut h, KeyChange::FieldSet, Some("b"), "1", "client-1");
        assert!(fifo(&h.entries, &NO_CLOCK_JUDGED).is_empty());
        key(&mut h, KeyChange::FieldSet, Some("b"), "0", "client-1");
        // A newcomer d takes the lock while c is still waiting: it jumped the queue.
        key(&mut h, KeyChange::FieldSet, Some("d"), "1", "client-3");
        let v = fifo(&h.entries, &NO_CLOCK_JUDGED);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].kind, ViolationKind::FifoOrder);
        assert_eq!(v[0].tokens, vec!["d", "c"]);
    }

    /// `client` was granted the node at `path` (`shared`: as a reader).
    fn grant(h: &mut History, client: &str, path: &str, shared: bool) {
        h.push(
            h.entries.len() as u64,
            client,
            0,
            Kind::Ok,
            Op::Acquire {
                token: Some(path.into()),
                fence: None,
                valid_ns: None,
                error: None,
                shared,
            },
        )
    }

    #[test]
    fn a_reader_may_pass_an_older_reader_but_never_an_older_write_node() {
        let mut h = History::default();
        zk_node(&mut h, KeyChange::Set, "/lock/x-__READ__0000000001");
        zk_node(&mut h, KeyChange::Set, "/lock/y-__READ__0000000002");
        grant(&mut h, "client-1", "/lock/y-__READ__0000000002", true);
        assert!(sequence_order(&h.entries).is_empty(), "reader past reader");
        zk_node(&mut h, KeyChange::Set, "/lock/z-__WRIT__0000000003");
        zk_node(&mut h, KeyChange::Set, "/lock/w-__READ__0000000004");
        grant(&mut h, "client-3", "/lock/w-__READ__0000000004", true);
        let v = sequence_order(&h.entries);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            v[0].tokens,
            vec!["/lock/w-__READ__0000000004", "/lock/z-__WRIT__0000000003"]
        );
    }

    #[test]
    fn sequential_nodes_are_granted_in_creation_order() {
        let mut h = History::default();
        let granted = |h: &mut History, client: &str, path: &str| grant(h, client, path, false);
        zk_node(&mut h, KeyChange::Set, "/lock/a-1");
        zk_node(&mut h, KeyChange::Set, "/lock/b-2");
        zk_node(&mut h, KeyChange::Set, "/lock/c-3");
        granted(&mut h, "client-0", "/lock/a-1");
        zk_node(&mut h, KeyChange::Deleted, "/lock/a-1");
        // b gave up: its node went without a grant; c is next.
        zk_node(&mut h, KeyChange::Deleted, "/lock/b-2");
        granted(&mut h, "client-2", "/lock/c-3");
        assert!(sequence_order(&h.entries).is_empty());
        zk_node(&mut h, KeyChange::Set, "/lock/d-4");
        zk_node(&mut h, KeyChange::Set, "/lock/e-5");
        zk_node(&mut h, KeyChange::Deleted, "/lock/c-3");
        granted(&mut h, "client-4", "/lock/e-5");
        let v = sequence_order(&h.entries);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].tokens, vec!["/lock/e-5", "/lock/d-4"]);
    }

    #[test]
    fn a_re_entry_or_an_inner_release_is_not_a_grant() {
        let mut h = History::default();
        key(&mut h, KeyChange::FieldSet, Some("a"), "1", "client-0");
        key(&mut h, KeyChange::ListPushed, None, "b", "client-1");
        key(&mut h, KeyChange::FieldSet, Some("a"), "2", "client-0");
        key(&mut h, KeyChange::FieldSet, Some("a"), "1", "client-0");
        assert!(fifo(&h.entries, &NO_CLOCK_JUDGED).is_empty());
    }

    const S: u64 = 1_000_000_000;
    /// redis-fair's: a place lasts 5 s without a poll.
    const FAIR: Liveness = Liveness {
        lease_ns: Some(10 * S),
        stuck_after_ns: 20 * S,
        queue_timeout_ns: Some(5 * S),
    };

    fn acquire(h: &mut History, t: u64, client: &str, kind: Kind) {
        let op = Op::Acquire {
            token: None,
            fence: None,
            valid_ns: None,
            error: None,
            shared: false,
        };
        h.push(t, client, t as i64, kind, op);
    }

    fn nemesis(h: &mut History, t: u64, kind: &str, target: &str) {
        let op = Op::Nemesis {
            kind: kind.into(),
            action: format!("{kind} {target}"),
            target: Some(target.into()),
        };
        h.push(t, target, t as i64, Kind::Observe, op);
    }

    /// client-0 holds from 0 until 8 s. client-1 asks at `asks` and queues as b; client-2, whose
    /// clock runs ahead, asks at 6 s, drops b from the queue and queues as c; `between` runs
    /// next; client-1 (if `requeues`) queues again at 6.1 s; client-2 is granted at 8 s.
    fn clock_ahead_story(asks: u64, between: impl FnOnce(&mut History), requeues: bool) -> History {
        use KeyChange::*;
        let mut h = History::default();
        key_at(&mut h, 0, FieldSet, Some("a"), "1", "client-0");
        acquire(&mut h, asks, "client-1", Kind::Invoke);
        key_at(&mut h, asks + S / 10, ListPushed, None, "b", "client-1");
        between(&mut h);
        acquire(&mut h, 6 * S, "client-2", Kind::Invoke);
        key_at(&mut h, 6 * S, ListRemoved, None, "b", "client-2");
        key_at(&mut h, 6 * S, Deleted, None, "b", "client-2");
        key_at(&mut h, 6 * S, ListPushed, None, "c", "client-2");
        if requeues {
            key_at(&mut h, 6 * S + S / 10, ListPushed, None, "b", "client-1");
        }
        key_at(&mut h, 8 * S, FieldSet, Some("a"), "0", "client-0");
        key_at(&mut h, 8 * S, ListRemoved, None, "c", "client-2");
        key_at(&mut h, 8 * S, FieldSet, Some("c"), "1", "client-2");
        h
    }

    #[test]
    fn a_waiter_dropped_by_another_clients_clock_while_polling_stays_in_the_race() {
        for requeues in [true, false] {
            let h = clock_ahead_story(S / 10, |_| {}, requeues);
            let v = fifo(&h.entries, &FAIR);
            assert_eq!(v.len(), 1, "requeues {requeues}: {v:?}");
            assert_eq!(v[0].tokens, vec!["c", "b"]);
            assert_eq!(v[0].clients, vec!["client-2"]);
            assert!(v[0].story.contains("still polling"), "{}", v[0].story);
            // Without a queue timeout to judge by, the queue's word is final.
            assert!(fifo(&h.entries, &NO_CLOCK_JUDGED).is_empty());
        }
    }

    #[test]
    fn a_waiter_that_could_not_poll_for_a_whole_queue_timeout_is_out_of_the_race() {
        use crate::schedule::kind::*;
        type Between = fn(&mut History);
        let stories: [(&str, u64, Between); 6] = [
            ("asked less than a queue timeout before", 2 * S, |_| {}),
            ("paused", S / 10, |h| {
                nemesis(h, 3 * S, PAUSE, "client-1");
                nemesis(h, 3 * S + S / 2, RESUME, "client-1");
            }),
            ("the server paused", S / 10, |h| {
                nemesis(h, 3 * S, PAUSE, "redis-0");
                nemesis(h, 3 * S + S / 2, RESUME, "redis-0");
            }),
            ("its messages were late", S / 10, |h| {
                nemesis(h, S, MESSAGES_START, "client-1");
                nemesis(h, 2 * S, MESSAGES_END, "client-1");
                nemesis(h, 3 * S, MESSAGES_SETTLED, "client-1");
            }),
            ("gave up", S / 10, |h| {
                acquire(h, 3 * S, "client-1", Kind::Fail)
            }),
            ("crashed once", S / 10, |h| {
                nemesis(h, 2 * S, CRASH, "client-1");
                nemesis(h, 2 * S, RESTART, "client-1");
                acquire(h, 2 * S, "client-1", Kind::Invoke);
            }),
        ];
        for (what, asks, between) in stories {
            let h = clock_ahead_story(asks, between, false);
            let v = fifo(&h.entries, &FAIR);
            assert!(v.is_empty(), "{what}: {v:?}");
        }
    }

    #[test]
    fn a_queue_lost_with_its_server_takes_even_a_waiter_dropped_while_polling_out_of_the_race() {
        use KeyChange::*;
        // The story, with the queue lost in a server crash before the grant.
        let mut h = clock_ahead_story(S / 10, |_| {}, false);
        let grant = h.entries.pop().expect("the grant");
        key_at(&mut h, 7 * S, Lost, None, "x", "redis-0");
        h.entries.push(grant);
        assert!(fifo(&h.entries, &FAIR).is_empty());
    }
}
