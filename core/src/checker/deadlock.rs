//! Deadlock: after the faults and the clients stopped, the liveness probe could not acquire the
//! lock within its wait.

use super::{ms, Violation, ViolationKind};
use crate::history::{Entry, Kind, Op};
use crate::schedule::kind as nemesis;
use crate::topology::Topology;
use std::collections::BTreeMap;

/// Whether the liveness probe failed to acquire. The story names the client that last took the
/// lock without a release that certainly let it go (it crashed, its release got no answer, or
/// it never released), when there is one: the likely holder.
pub fn deadlock(history: &[Entry]) -> Vec<Violation> {
    history
        .iter()
        .filter(|e| e.node == Topology::PROBE && e.kind == Kind::Fail)
        .filter_map(|e| match &e.op {
            Op::Acquire { error, .. } => {
                let holder = last_holder(&history[..e.index]);
                let mut clients = vec![Topology::PROBE.to_string()];
                let held = match &holder {
                    Some((client, since, how)) => {
                        clients.push(client.to_string());
                        format!("; last held by {client} since {} ({how})", ms(*since))
                    }
                    None => String::new(),
                };
                Some(Violation {
                    kind: ViolationKind::Deadlock,
                    clients,
                    tokens: vec![],
                    at_ns: e.true_ns,
                    entries: vec![e.index],
                    story: format!(
                        "after every fault and client had stopped, the probe still could not acquire the lock at {} ({}){held}",
                        ms(e.true_ns),
                        error.as_deref().unwrap_or("no reason given")
                    ),
                })
            }
            _ => None,
        })
        .collect()
}

/// The client that most recently acquired without a release known to have let go: who, since
/// when (true ns), and what became of it.
fn last_holder(history: &[Entry]) -> Option<(&str, u64, String)> {
    // Per client: when it acquired, and what happened since.
    let mut holding: BTreeMap<&str, (u64, String)> = BTreeMap::new();
    for e in history {
        match (&e.op, e.kind) {
            (Op::Acquire { .. }, Kind::Ok) if e.node != Topology::PROBE => {
                holding.insert(&e.node, (e.true_ns, "it never released it".to_string()));
            }
            (Op::Release { .. }, Kind::Ok | Kind::Fail) => {
                holding.remove(e.node.as_str());
            }
            (Op::Release { error, .. }, Kind::Info) => {
                if let Some((_, how)) = holding.get_mut(e.node.as_str()) {
                    *how = format!(
                        "its release at {} got no answer: {}",
                        ms(e.true_ns),
                        error.as_deref().unwrap_or("unknown")
                    );
                }
            }
            (
                Op::Nemesis {
                    kind,
                    target: Some(target),
                    ..
                },
                _,
            ) if kind == nemesis::CRASH => {
                if let Some((_, how)) = holding.get_mut(target.as_str()) {
                    *how = format!("it crashed at {} while holding it", ms(e.true_ns));
                }
            }
            _ => {}
        }
    }
    holding
        .into_iter()
        .max_by_key(|(_, (since, _))| *since)
        .map(|(client, (since, how))| (client, since, how))
}
