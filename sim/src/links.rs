//! The state of the links between nodes: which partitions cut them, and the message faults
//! (loss, delay) in force on each node's messages. Kept apart from the rest of the [`World`], as
//! turmoil keeps its topology's link state: the nemesis changes it, and `net.rs` reads it for
//! every message.
//!
//! [`World`]: crate::world::World

use lockcheck_core::message_faults::MessageFaults;
use std::collections::BTreeMap;
use std::time::Duration;

/// Every link's partitions and every node's message faults.
pub struct Links {
    /// Directed links currently cut, with how many partitions cut each (they may overlap).
    cuts: BTreeMap<(usize, usize), Cuts>,
    /// Message faults in force, per node.
    messages: MessageFaults,
}

/// The partitions cutting one link, by what they do to its messages.
#[derive(Default)]
struct Cuts {
    losing: u32,
    holding: u32,
}

impl Links {
    /// `nodes` nodes, every link whole and no message fault in force.
    pub fn new(nodes: usize) -> Links {
        Links {
            cuts: BTreeMap::new(),
            messages: MessageFaults::new(nodes),
        }
    }

    /// Counts one more partition cutting the link `from → to` (partitions may overlap); `hold`:
    /// it holds messages rather than losing them.
    pub fn cut(&mut self, from: usize, to: usize, hold: bool) {
        let link = self.cuts.entry((from, to)).or_default();
        if hold {
            link.holding += 1;
        } else {
            link.losing += 1;
        }
    }

    /// Counts one partition fewer on `from → to`; the link is back when none is left.
    pub fn heal(&mut self, from: usize, to: usize, hold: bool) {
        if let Some(link) = self.cuts.get_mut(&(from, to)) {
            let count = if hold {
                &mut link.holding
            } else {
                &mut link.losing
            };
            *count = count.saturating_sub(1);
            if link.holding == 0 && link.losing == 0 {
                self.cuts.remove(&(from, to));
            }
        }
    }

    /// What a partition does right now to a message on the link `from → to`: `None` when no
    /// partition cuts it, `Some(true)` when it is held, `Some(false)` when it is lost (a losing
    /// partition wins over a holding one).
    pub fn cut_holds(&self, from: usize, to: usize) -> Option<bool> {
        self.cuts.get(&(from, to)).map(|link| link.losing == 0)
    }

    /// Whether a partition cuts the link `from → to` right now.
    pub fn is_cut(&self, from: usize, to: usize) -> bool {
        self.cuts.contains_key(&(from, to))
    }

    /// Starts (`Some`) or ends (`None`) message fault `id` on node `node`.
    pub fn set_message_fault(&mut self, node: usize, id: usize, fault: Option<(f64, Duration)>) {
        self.messages.set(node, id, fault);
    }

    /// Drop probability and added latency for a message from `from` to `to`.
    pub fn message_faults(&self, from: usize, to: usize) -> (f64, Duration) {
        self.messages.between(from, to)
    }
}
