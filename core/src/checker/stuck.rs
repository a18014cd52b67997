//! Lost wake-ups: a waiter that waits on while nobody holds the lock and nothing stops it from
//! taking it.
//!
//! The end-of-run probe ([`super::deadlock`]) catches a lock that never comes free again. It
//! cannot catch the bug class of watch- and notification-based locks: the lock is free, but a
//! waiter is never told (a watch lost with a server restart, a queue blocked by a waiter that
//! died). That waiter waits until its own wait runs out, while every other check stays silent.
//!
//! The check reads only the history. At each moment it knows:
//! - **who holds the lock, by the clients' own records**: from an acquisition to a release that
//!   certainly let it go. A holder that crashed, or whose release got no answer, may have left
//!   the lock behind on the server; it is counted as holding until a lease after that
//!   ([`Liveness::lease_ns`]; forever for a lock without one), or until another client takes
//!   the lock exclusively;
//! - **whether the lock service is reachable**: no server (or the resource) down or paused, no
//!   partition and no message fault in force, no failover, and the waiter itself running. Clock
//!   faults do not count: a clock that is off is a state the lock must live with, not an outage;
//! - **who waits**: a client from its first acquire invocation until it acquires (its retries
//!   after giving up continue the same wait), crashes or stops asking.
//!
//! A waiter that has been waiting for [`Liveness::stuck_after_ns`] of such time, all of it with
//! the lock free and the service reachable, is stuck. The bound is stated in the finding.

use super::reach::Reach;
use super::{ms, Violation, ViolationKind};
use crate::history::{Entry, Kind, Op};
use crate::scenario::Scenario;
use crate::topology::Topology;
use lockcheck_algorithms::describe::Order;
use std::collections::BTreeMap;

/// What the liveness checks allow, derived from the scenario so that one history is judged the
/// same way in both worlds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    /// How long a lock can outlive a holder that died or lost track of it: the lease, for
    /// ZooKeeper the session, for a transaction-held MySQL lock the server's `wait_timeout`;
    /// `None` for a lock that never ends by itself (a MySQL row lock without a lease), which a
    /// dead holder keeps forever (the deadlock probe's finding, not a stuck waiter).
    pub lease_ns: Option<u64>,
    /// How long a waiter may wait while the lock is free and reachable before it is stuck:
    /// twice the longest a dead client's claim may last, which is the lease, or for a fair lock
    /// the queue timeout if that is longer. Once covers what legitimately stands between a free
    /// lock and a waiter (a dead waiter ahead of it in a queue keeps its place until its
    /// session, its queue deadline or its connection's timeout ends); the other is slack for
    /// retries and reconnections.
    pub stuck_after_ns: u64,
    /// For a fair lock, how long a waiter keeps its place in the queue without polling: the
    /// order check keeps a waiter dropped sooner than that (by a client whose clock disagrees
    /// with time) in the race. `None` for other locks.
    pub queue_timeout_ns: Option<u64>,
}

impl Liveness {
    /// The bounds for `scenario`.
    pub fn of(scenario: &Scenario) -> Liveness {
        let (algorithm, params) = (scenario.algorithm, &scenario.params);
        let lease_ns = algorithm.lease_ms(params) * 1_000_000;
        let queue_timeout_ns = (algorithm.description().order == Order::Fifo)
            .then_some(params.redis.queue_timeout_ms() * 1_000_000);
        let ends = algorithm.ends_when_silent(params);
        Liveness {
            lease_ns: ends.then_some(lease_ns),
            stuck_after_ns: Liveness::stuck_after(lease_ns, queue_timeout_ns),
            queue_timeout_ns,
        }
    }

    /// These bounds for a lock whose lease is `lease_ns` rather than the scenario's (a client
    /// library's own, declared with `--client-lease-ms`): a dead holder's lock lasts that long
    /// (where the lock ends by itself at all), and a waiter is stuck after twice it.
    pub fn with_lease(self, lease_ns: u64) -> Liveness {
        Liveness {
            lease_ns: self.lease_ns.map(|_| lease_ns),
            stuck_after_ns: Liveness::stuck_after(lease_ns, self.queue_timeout_ns),
            ..self
        }
    }

    /// Twice the longest a dead client's claim may last: its lease, or a fair lock's queue
    /// timeout if that is longer.
    fn stuck_after(lease_ns: u64, queue_timeout_ns: Option<u64>) -> u64 {
        2 * lease_ns.max(queue_timeout_ns.unwrap_or(0))
    }

    /// Until when a lock left behind at `t` (its holder crashed, or its release went
    /// unanswered) may still be on the server.
    fn left_until(&self, t: u64) -> u64 {
        self.lease_ns.map_or(u64::MAX, |lease| t + lease)
    }
}

/// A client's claim on the lock.
#[derive(Clone, Copy, Debug)]
struct Hold {
    /// Acquisitions not yet released (reentrant locks nest); while above zero the lock is held.
    levels: u32,
    /// At zero levels, when the lock is certainly gone from the server even if it was left
    /// behind there: the holder crashed, or a release went unanswered.
    left_until: Option<u64>,
}

/// A client that wants the lock.
#[derive(Clone, Copy, Debug)]
struct Waiter {
    /// When it first asked (true ns); retries after giving up keep it.
    since: u64,
    /// Its first acquire invocation, for the finding.
    entry: usize,
    /// Whether an acquire is in flight (between retries it is not: it thinks).
    asking: bool,
    /// Already reported; once per wait.
    reported: bool,
}

/// The state the check walks the history with.
#[derive(Default)]
struct State<'a> {
    holds: BTreeMap<&'a str, Hold>,
    /// When the last live hold ended.
    free_since: u64,
    waiters: BTreeMap<&'a str, Waiter>,
    /// The outages in force.
    reach: Reach<'a>,
}

impl<'a> State<'a> {
    /// Since when (true ns) `client` has been able to take a free lock, if it can now: the lock
    /// free by every holder's records, the service reachable, the client running.
    fn free_for(&self, client: &str) -> Option<u64> {
        let mut since = self.free_since.max(self.reach.since(client)?);
        for hold in self.holds.values() {
            if hold.levels > 0 {
                return None;
            }
            since = since.max(hold.left_until.unwrap_or(0));
        }
        Some(since)
    }

    /// `client` certainly let go of the lock at `at`.
    fn hold_ended(&mut self, client: &str, at: u64) {
        self.holds.remove(client);
        self.free_since = self.free_since.max(at);
    }
}

/// Waiters that waited [`Liveness::stuck_after_ns`] while the lock was free and reachable (see
/// the module's documentation). The probe is left out: its failure is a deadlock.
pub fn stuck(history: &[Entry], liveness: &Liveness) -> Vec<Violation> {
    let mut s = State::default();
    let mut found = Vec::new();
    let bound = liveness.stuck_after_ns;
    for e in history {
        report_due(&mut s, e.true_ns, bound, &mut found);
        apply(&mut s, e, liveness);
    }
    // The end of the history: its last entry, or a fold of refusals that went on past it (a
    // fold stands where its first attempt was; attempts change nothing this check reads, so
    // only the time they reach matters).
    if let Some(end) = history.iter().map(Entry::end_ns).max() {
        report_due(&mut s, end, bound, &mut found);
    }
    found
}

/// Reports the waiters whose free, reachable wait reached the bound before true time `now`.
fn report_due(s: &mut State, now: u64, bound: u64, found: &mut Vec<Violation>) {
    let due: Vec<(&str, u64)> = s
        .waiters
        .iter()
        .filter(|(_, w)| w.asking && !w.reported)
        .filter_map(|(client, w)| Some((*client, s.free_for(client)?.max(w.since))))
        .filter(|(_, from)| from.saturating_add(bound) <= now)
        .collect();
    for (client, from) in due {
        let w = s.waiters.get_mut(client).expect("listed above");
        w.reported = true;
        let due = from.saturating_add(bound);
        found.push(Violation {
            kind: ViolationKind::Stuck,
            clients: vec![client.to_string()],
            tokens: vec![],
            at_ns: due,
            entries: vec![w.entry],
            story: format!(
                "{client} asked for the lock at {} and was still waiting at {}, although from {} \
                 no client held it and the lock service was up and reachable (the bound is {}, \
                 twice the longest a dead client's claim lasts): a lost wake-up, or a queue \
                 blocked by a waiter that is gone",
                ms(w.since),
                ms(due),
                ms(from),
                ms(bound),
            ),
        });
    }
}

fn apply<'a>(s: &mut State<'a>, e: &'a Entry, liveness: &Liveness) {
    let t = e.true_ns;
    let node = e.node.as_str();
    match (&e.op, e.kind) {
        _ if node == Topology::PROBE => {}
        // A nested acquisition by a holder waits for nothing; a client whose last release
        // went unanswered (a hold left behind) does wait, like anyone.
        (Op::Acquire { .. }, Kind::Invoke) if s.holds.get(node).is_none_or(|h| h.levels == 0) => {
            let w = s.waiters.entry(node).or_insert(Waiter {
                since: t,
                entry: e.index,
                asking: true,
                reported: false,
            });
            w.asking = true;
        }
        (Op::Acquire { shared, .. }, Kind::Ok) => {
            s.waiters.remove(node);
            if !shared {
                // Whatever a dead or confused holder left behind, this client got past it.
                s.holds.retain(|_, h| h.levels > 0);
            }
            let hold = s.holds.entry(node).or_insert(Hold {
                levels: 0,
                left_until: None,
            });
            hold.levels += 1;
            hold.left_until = None;
        }
        (Op::Acquire { .. }, Kind::Fail) => {
            if let Some(w) = s.waiters.get_mut(node) {
                w.asking = false;
            }
        }
        (Op::Release { error, .. }, Kind::Ok | Kind::Fail | Kind::Info) => {
            let certain = e.kind == Kind::Ok
                || (e.kind == Kind::Fail
                    && error.as_deref() == Some(crate::workload::NO_LONGER_HELD));
            let Some(hold) = s.holds.get_mut(node) else {
                return;
            };
            hold.levels = hold.levels.saturating_sub(1);
            if !certain {
                // Maybe still on the server, until its lease runs out.
                hold.left_until = Some(liveness.left_until(t));
            }
            if hold.levels == 0 && hold.left_until.is_none() {
                s.hold_ended(node, t);
            }
        }
        (
            Op::Nemesis {
                kind,
                target: Some(target),
                ..
            },
            _,
        ) => nemesis(s, kind, target, t, liveness),
        _ => {}
    }
}

fn nemesis<'a>(s: &mut State<'a>, kind: &str, target: &'a str, t: u64, liveness: &Liveness) {
    if kind == crate::schedule::kind::CRASH && target.starts_with(Topology::CLIENT_PREFIX) {
        s.waiters.remove(target);
        if let Some(hold) = s.holds.get_mut(target) {
            hold.levels = 0;
            hold.left_until = Some(liveness.left_until(t));
        }
    }
    s.reach.nemesis(kind, target, t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::History;

    const S: u64 = 1_000_000_000;
    /// A 10 s lease: stuck after 20 s.
    const LIVENESS: Liveness = Liveness {
        lease_ns: Some(10 * S),
        stuck_after_ns: 20 * S,
        queue_timeout_ns: None,
    };

    fn acquire(h: &mut History, t: u64, client: &str, kind: Kind) {
        let token = (kind == Kind::Ok).then(|| format!("{client}-token"));
        let op = Op::Acquire {
            token,
            fence: None,
            valid_ns: None,
            error: (kind == Kind::Fail).then(|| "gave up".to_string()),
            shared: false,
        };
        h.push(t, client, t as i64, kind, op);
    }

    fn release(h: &mut History, t: u64, client: &str, kind: Kind, error: Option<&str>) {
        let op = Op::Release {
            token: format!("{client}-token"),
            error: error.map(str::to_string),
        };
        h.push(t, client, t as i64, Kind::Invoke, op.clone());
        h.push(t, client, t as i64, kind, op);
    }

    fn nemesis(h: &mut History, t: u64, kind: &str, target: &str) {
        let op = Op::Nemesis {
            kind: kind.into(),
            action: format!("{kind} {target}"),
            target: Some(target.into()),
        };
        h.push(t, "nemesis", t as i64, Kind::Observe, op);
    }

    fn end(h: &mut History, t: u64) {
        let op = Op::Note { text: "end".into() };
        h.push(t, "client-1", t as i64, Kind::Observe, op);
    }

    /// client-0 holds from 0.1 s; client-1 asks at 0.2 s.
    fn contended() -> History {
        let mut h = History::default();
        acquire(&mut h, S / 10, "client-0", Kind::Invoke);
        acquire(&mut h, S / 10, "client-0", Kind::Ok);
        acquire(&mut h, S / 5, "client-1", Kind::Invoke);
        h
    }

    #[test]
    fn a_waiter_never_woken_after_a_release_is_stuck_after_the_stated_bound() {
        // The story of issue 14, item 4: the holder releases at 5.1 s, the server restarted at
        // 1 s and the waiter's watch died with it; the waiter waits until the run ends.
        let mut h = contended();
        nemesis(&mut h, S, "crash", "zk-0");
        nemesis(&mut h, S, "restart", "zk-0");
        release(&mut h, 5 * S + S / 10, "client-0", Kind::Ok, None);
        end(&mut h, 60 * S);
        let v = stuck(&h.entries, &LIVENESS);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].kind, ViolationKind::Stuck);
        assert_eq!(v[0].clients, vec!["client-1"]);
        assert_eq!(v[0].at_ns, 25 * S + S / 10, "20 s after the lock came free");
        assert_eq!(v[0].entries, vec![2], "its acquire invocation");
        assert!(v[0].story.contains("20000.0 ms"), "{}", v[0].story);
    }

    #[test]
    fn a_waiter_woken_within_the_bound_is_not_stuck() {
        let mut h = contended();
        release(&mut h, 5 * S, "client-0", Kind::Ok, None);
        acquire(&mut h, 24 * S, "client-1", Kind::Ok);
        end(&mut h, 60 * S);
        assert!(stuck(&h.entries, &LIVENESS).is_empty());
        // Its wait ending by a give-up does not end its wanting: retries continue it.
        let mut h = contended();
        release(&mut h, 5 * S, "client-0", Kind::Ok, None);
        acquire(&mut h, 10 * S, "client-1", Kind::Fail);
        acquire(&mut h, 11 * S, "client-1", Kind::Invoke);
        end(&mut h, 60 * S);
        let v = stuck(&h.entries, &LIVENESS);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].at_ns, 25 * S);
    }

    #[test]
    fn a_lock_left_behind_counts_as_held_for_a_lease() {
        // The holder crashes: its lease may hold the lock for 10 s more.
        let mut h = contended();
        nemesis(&mut h, 2 * S, "crash", "client-0");
        acquire(&mut h, 31 * S, "client-1", Kind::Ok);
        end(&mut h, 60 * S);
        assert!(
            stuck(&h.entries, &LIVENESS).is_empty(),
            "free only from 12 s"
        );
        let mut h = contended();
        nemesis(&mut h, 2 * S, "crash", "client-0");
        end(&mut h, 60 * S);
        let v = stuck(&h.entries, &LIVENESS);
        assert_eq!(v[0].at_ns, 32 * S, "{v:?}");
        // A release without an answer: the same.
        let mut h = contended();
        release(&mut h, 2 * S, "client-0", Kind::Info, Some("timeout"));
        end(&mut h, 60 * S);
        assert_eq!(stuck(&h.entries, &LIVENESS)[0].at_ns, 32 * S);
        // A release that found the lock gone left nothing.
        let mut h = contended();
        release(
            &mut h,
            2 * S,
            "client-0",
            Kind::Fail,
            Some(crate::workload::NO_LONGER_HELD),
        );
        end(&mut h, 60 * S);
        assert_eq!(stuck(&h.entries, &LIVENESS)[0].at_ns, 22 * S);
    }

    #[test]
    fn a_client_whose_release_went_unanswered_waits_like_anyone_when_it_asks_again() {
        // client-0's release gets no answer at 1 s (its lock may stay until 11 s); it asks
        // again at 2 s and is never served: stuck from 11 s, 20 s later.
        let mut h = History::default();
        acquire(&mut h, S / 10, "client-0", Kind::Invoke);
        acquire(&mut h, S / 10, "client-0", Kind::Ok);
        release(&mut h, S, "client-0", Kind::Info, Some("timeout"));
        acquire(&mut h, 2 * S, "client-0", Kind::Invoke);
        end(&mut h, 60 * S);
        let v = stuck(&h.entries, &LIVENESS);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].clients[0].as_str(), v[0].at_ns), ("client-0", 31 * S));
    }

    #[test]
    fn a_holder_that_never_lets_go_makes_nobody_stuck() {
        let mut h = contended();
        nemesis(&mut h, 2 * S, "pause", "client-0");
        end(&mut h, 60 * S);
        assert!(stuck(&h.entries, &LIVENESS).is_empty());
        // Nor one that crashed holding a lock without a lease: that is a deadlock.
        let mut h = contended();
        nemesis(&mut h, 2 * S, "crash", "client-0");
        end(&mut h, 60 * S);
        let forever = Liveness {
            lease_ns: None,
            ..LIVENESS
        };
        assert!(stuck(&h.entries, &forever).is_empty());
    }

    #[test]
    fn only_time_with_the_service_reachable_and_the_waiter_running_counts() {
        for (kind, end_kind, target) in [
            ("crash", "restart", "redis-0"),
            ("pause", "resume", "redis-0"),
            ("pause", "resume", "client-1"),
            ("cut", "heal", "client-1"),
            ("messages_start", "messages_settled", "client-0"),
        ] {
            let mut h = contended();
            release(&mut h, S, "client-0", Kind::Ok, None);
            nemesis(&mut h, 10 * S, kind, target);
            nemesis(&mut h, 30 * S, end_kind, target);
            end(&mut h, 60 * S);
            let v = stuck(&h.entries, &LIVENESS);
            assert_eq!(v.len(), 1, "{kind} {target}: {v:?}");
            assert_eq!(
                v[0].at_ns,
                50 * S,
                "{kind} {target}: counted from {end_kind}"
            );
        }
        // A clock fault is no outage; another client's pause is none either.
        for (kind, target) in [("clock_jump", "redis-0"), ("pause", "client-2")] {
            let mut h = contended();
            release(&mut h, S, "client-0", Kind::Ok, None);
            nemesis(&mut h, 10 * S, kind, target);
            end(&mut h, 60 * S);
            assert_eq!(stuck(&h.entries, &LIVENESS)[0].at_ns, 21 * S, "{kind}");
        }
    }

    #[test]
    fn a_crashed_waiter_and_the_probe_are_not_waiting() {
        let mut h = contended();
        release(&mut h, S, "client-0", Kind::Ok, None);
        nemesis(&mut h, 2 * S, "crash", "client-1");
        acquire(&mut h, 3 * S, Topology::PROBE, Kind::Invoke);
        end(&mut h, 60 * S);
        assert!(stuck(&h.entries, &LIVENESS).is_empty());
    }
}
