//! Folding a client's refusals (`history::Recording`) changes no verdict: the checkers judge a
//! folded history exactly as the same history recorded attempt by attempt. Checked over
//! synthetic histories, drawn from a fixed seed, in which clients wait, poll, hold, release,
//! crash and are paused, servers go down, and the lock is sometimes held twice at once: every
//! violation kind the checkers read from clients' operations shows up in some of them.

use lockcheck_algorithms::describe::Order;
use lockcheck_core::checker::{self, Liveness, Violation};
use lockcheck_core::history::{Entry, History, Kind, Op, Phase, Recording, Retention};
use lockcheck_core::scenario::Scenario;
use lockcheck_core::schedule::kind;
use lockcheck_core::workload::NO_LONGER_HELD;
use lockcheck_core::Algorithm;

/// A small deterministic generator (xorshift64*), so the histories are the same on every run.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    Idle,
    Waiting,
    Holding,
}

/// One synthetic history as (true ns, node, kind, op), in true-time order.
fn synthetic(seed: u64) -> Vec<(u64, String, Kind, Op)> {
    let mut d = Draw(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let clients = 2 + d.below(3) as usize;
    let mut state = vec![State::Idle; clients];
    let mut tokens = vec![0u64; clients];
    let mut out = Vec::new();
    let mut t: u64 = 1_000_000;
    let acquire = |error: Option<&str>, token: Option<String>| Op::Acquire {
        token,
        fence: None,
        valid_ns: None,
        error: error.map(str::to_string),
        shared: false,
    };
    let steps = 300 + d.below(900);
    for _ in 0..steps {
        // Mostly short steps (polls), sometimes long ones (a wait past the stuck bound).
        t += if d.chance(3) {
            1_000_000_000 + d.below(20_000_000_000)
        } else {
            1_000_000 + d.below(300_000_000)
        };
        let c = d.below(clients as u64) as usize;
        let node = format!("client-{c}");
        let token = format!("t{c}-{}", tokens[c]);
        let r = d.below(100);
        if r < 4 {
            // A fault: a pause or crash of a client or the server, or its end.
            let target = if d.chance(50) {
                "redis-0".to_string()
            } else {
                node.clone()
            };
            let k = [kind::PAUSE, kind::RESUME, kind::CRASH, kind::RESTART][d.below(4) as usize];
            if k == kind::CRASH && target == node {
                state[c] = State::Idle;
            }
            out.push((
                t,
                target.clone(),
                Kind::Observe,
                Op::Nemesis {
                    kind: k.into(),
                    action: format!("{k} {target}"),
                    target: Some(target),
                },
            ));
            continue;
        }
        match state[c] {
            State::Idle => {
                out.push((t, node, Kind::Invoke, acquire(None, None)));
                state[c] = State::Waiting;
            }
            State::Waiting if r < 75 => {
                // A refusal; now and then seen with the server unreachable.
                let unreachable = usize::from(d.chance(5));
                out.push((
                    t,
                    node,
                    Kind::Observe,
                    Op::attempt(false, 0, 1, unreachable),
                ));
            }
            State::Waiting if r < 85 => {
                out.push((t, node.clone(), Kind::Observe, Op::attempt(false, 0, 1, 0)));
                out.push((t, node, Kind::Fail, acquire(Some("gave up"), None)));
                state[c] = State::Idle;
            }
            State::Waiting => {
                out.push((
                    t,
                    "redis-0".into(),
                    Kind::Observe,
                    Op::Key {
                        key: "lock".into(),
                        change: lockcheck_core::history::KeyChange::Set,
                        field: None,
                        value: Some(token.clone()),
                        by: Some(node.clone()),
                        expires_local_ns: None,
                    },
                ));
                out.push((t, node.clone(), Kind::Observe, Op::attempt(true, 1, 1, 0)));
                out.push((
                    t,
                    node.clone(),
                    Kind::Ok,
                    acquire(None, Some(token.clone())),
                ));
                let access = Op::Access {
                    phase: Phase::Enter,
                    token: token.clone(),
                    fence: None,
                    shared: false,
                };
                out.push((t, node.clone(), Kind::Invoke, access.clone()));
                out.push((
                    t,
                    "resource".into(),
                    Kind::Observe,
                    Op::Resource {
                        client: node.clone(),
                        phase: Phase::Enter,
                        token: token.clone(),
                        fence: None,
                        accepted: true,
                        shared: false,
                    },
                ));
                out.push((t, node, Kind::Ok, access));
                state[c] = State::Holding;
            }
            State::Holding if r < 60 => {}
            State::Holding => {
                let exit = Op::Access {
                    phase: Phase::Exit,
                    token: token.clone(),
                    fence: None,
                    shared: false,
                };
                out.push((t, node.clone(), Kind::Invoke, exit.clone()));
                out.push((
                    t,
                    "resource".into(),
                    Kind::Observe,
                    Op::Resource {
                        client: node.clone(),
                        phase: Phase::Exit,
                        token: token.clone(),
                        fence: None,
                        accepted: true,
                        shared: false,
                    },
                ));
                out.push((t, node.clone(), Kind::Ok, exit));
                let release = |error: Option<String>| Op::Release {
                    token: token.clone(),
                    error,
                };
                out.push((t, node.clone(), Kind::Invoke, release(None)));
                let (kind, error) = match d.below(10) {
                    0 => (Kind::Info, Some("timed out".to_string())),
                    1 => (Kind::Fail, Some(NO_LONGER_HELD.to_string())),
                    _ => (Kind::Ok, None),
                };
                out.push((t, node, kind, release(error)));
                tokens[c] += 1;
                state[c] = State::Idle;
            }
        }
    }
    // The probe, which may wait long itself (while clients still wait).
    t += 1_000_000;
    out.push((t, "probe".into(), Kind::Invoke, acquire(None, None)));
    for _ in 0..d.below(600) {
        t += 100_000_000;
        out.push((
            t,
            "probe".into(),
            Kind::Observe,
            Op::attempt(false, 0, 1, 0),
        ));
    }
    if d.chance(30) {
        // Stopped at its limit while still asking: the history ends with its polls.
        return out;
    }
    let gave_up = d.chance(50);
    out.push((
        t,
        "probe".into(),
        if gave_up { Kind::Fail } else { Kind::Ok },
        if gave_up {
            acquire(Some("not acquired within 20000 ms"), None)
        } else {
            acquire(None, Some("probe".into()))
        },
    ));
    out
}

/// An entry as the checkers' findings point at it: everything but its place in the history.
fn identity(e: &Entry) -> String {
    let mut v = serde_json::to_value(e).unwrap();
    v.as_object_mut().unwrap().remove("index");
    v.to_string()
}

/// Violations with the entries they point at written out, so that a folded history's (whose
/// indices are smaller past its first fold) compare with the plain one's.
fn findings(h: &History, v: &[Violation]) -> Vec<String> {
    v.iter()
        .map(|v| {
            let entries: Vec<String> = v.entries.iter().map(|&i| identity(&h.entries[i])).collect();
            format!(
                "{:?} {:?} {:?} {} {} {}",
                v.kind,
                v.clients,
                v.tokens,
                v.at_ns,
                v.story,
                entries.join(" | ")
            )
        })
        .collect()
}

#[test]
fn the_checkers_judge_a_folded_history_as_the_same_history_recorded_attempt_by_attempt() {
    let mut s = Scenario::new(Algorithm::SingleRedis);
    s.params.ttl_ms = Some(1_000);
    let liveness = Liveness::of(&s);
    let mut kinds = std::collections::BTreeSet::new();
    let mut folds = 0;
    for seed in 0..300 {
        let ops = synthetic(seed);
        let mut plain = History::default();
        for (t, node, kind, op) in &ops {
            plain.push(*t, node, *t as i64, *kind, op.clone());
        }
        for fold_after in [0, 1, 3, 20] {
            let mut recording = Recording::new(Retention {
                fold_after,
                ..Retention::default()
            });
            for (t, node, kind, op) in &ops {
                recording.push(*t, node, *t as i64, *kind, op.clone());
            }
            let folded = recording.into_history();
            folds += usize::from(folded.entries.len() < plain.entries.len());
            for order in [Order::None, Order::Fifo] {
                let a = checker::check(&plain.entries, &liveness, order);
                let b = checker::check(&folded.entries, &liveness, order);
                kinds.extend(a.iter().map(|v| v.kind));
                assert_eq!(
                    findings(&plain, &a),
                    findings(&folded, &b),
                    "seed {seed}, folded after {fold_after}"
                );
            }
            assert_eq!(
                checker::availability(&plain.entries),
                checker::availability(&folded.entries),
                "seed {seed}, folded after {fold_after}"
            );
            // Nothing but attempts was folded, and the rest is in the same order.
            let rest = |h: &History| -> Vec<String> {
                h.entries
                    .iter()
                    .filter(|e| !matches!(e.op, Op::Attempt { .. }))
                    .map(identity)
                    .collect()
            };
            assert_eq!(rest(&plain), rest(&folded), "seed {seed}");
        }
    }
    assert!(folds > 500, "the histories fold ({folds})");
    // The histories show the checkers' client-side findings, so the comparison means something.
    for kind in ["MutualExclusion", "Deadlock", "Stuck"] {
        assert!(
            kinds.iter().any(|k| format!("{k:?}") == kind),
            "no {kind} among {kinds:?}"
        );
    }
}
