//! Mutual exclusion, judged only on accesses the resource ACCEPTED: a client's critical section
//! runs from its accepted `enter` to its accepted `exit`; if any other client's access was
//! accepted in between, two clients were inside at once. Readers of a read/write lock may
//! overlap each other, never a writer.

use super::{ms, Violation, ViolationKind};
use crate::history::{Entry, Op, Phase};
use std::collections::{BTreeMap, BTreeSet};

/// Mutual exclusion over the resource's accepted accesses.
pub fn mutual_exclusion(history: &[Entry]) -> Vec<Violation> {
    // Accepted accesses in true order: (entry, client, phase, token, shared).
    let accepted: Vec<(&Entry, &str, Phase, &str, bool)> = history
        .iter()
        .filter_map(|e| match &e.op {
            Op::Resource {
                client,
                phase,
                token,
                accepted: true,
                shared,
                ..
            } => Some((e, client.as_str(), *phase, token.as_str(), *shared)),
            _ => None,
        })
        .collect();
    let mut open: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    // Each overlapping pair once, whichever of the two exits first.
    let mut seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut found = Vec::new();
    for (pos, &(entry, client, phase, token, shared)) in accepted.iter().enumerate() {
        match phase {
            Phase::Enter => {
                open.insert(client, (pos, token));
            }
            Phase::Exit if open.get(client).is_some_and(|(_, held)| *held != token) => {
                // An exit for a section whose enter was not accepted: nothing to pair it with.
            }
            Phase::Exit => {
                let Some((start, held)) = open.remove(client) else {
                    continue;
                };
                let enter = accepted[start].0;
                for &(other, other_client, _, other_token, other_shared) in
                    &accepted[start + 1..pos]
                {
                    let readers = shared && other_shared;
                    let pair = (held.min(other_token), held.max(other_token));
                    if other_client == client || readers || !seen.insert(pair) {
                        continue;
                    }
                    found.push(Violation {
                        kind: ViolationKind::MutualExclusion,
                        clients: vec![client.to_string(), other_client.to_string()],
                        tokens: vec![held.to_string(), other_token.to_string()],
                        at_ns: entry.true_ns,
                        entries: vec![enter.index, other.index, entry.index],
                        story: format!(
                            "{client} entered at {} and was still inside (exit at {}) when {other_client} \
                             entered at {}: two holders at once",
                            ms(enter.true_ns),
                            ms(entry.true_ns),
                            ms(other.true_ns),
                        ),
                    });
                }
            }
        }
    }
    found
}
