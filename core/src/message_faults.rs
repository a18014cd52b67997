//! The `loss` and `delay` faults in force: what a message between two nodes suffers. One
//! definition for both worlds: the simulator drops and delays its messages by it, real mode sets
//! its proxies and its way to the resource by it.

use std::collections::BTreeMap;
use std::time::Duration;

/// The latency of every simulated message, on top of any delay fault: what madsim's network drew
/// (its default `send_latency`). The schedule counts with its end to say when a delay has
/// settled, in both worlds.
pub const LATENCY_NS: std::ops::Range<u64> = 1_000_000..10_000_000;

/// Per node, the message faults in force on it (by fault id, since several may overlap): a
/// message between two nodes suffers both ends' faults.
#[derive(Clone, Debug, Default)]
pub struct MessageFaults {
    per_node: Vec<BTreeMap<usize, (f64, Duration)>>,
}

impl MessageFaults {
    /// No fault in force on any of `nodes` nodes.
    pub fn new(nodes: usize) -> MessageFaults {
        MessageFaults {
            per_node: vec![BTreeMap::new(); nodes],
        }
    }

    /// Starts (`Some((loss, delay))`) or ends (`None`) fault `id` on node `node`.
    pub fn set(&mut self, node: usize, id: usize, fault: Option<(f64, Duration)>) {
        let Some(active) = self.per_node.get_mut(node) else {
            return;
        };
        match fault {
            Some(f) => active.insert(id, f),
            None => active.remove(&id),
        };
    }

    /// The drop probability and added latency of a message from `from` to `to`: it is lost if
    /// any fault at either end drops it, and waits out every delay at both ends.
    pub fn between(&self, from: usize, to: usize) -> (f64, Duration) {
        let (a, b) = (self.on(from), self.on(to));
        (1.0 - (1.0 - a.0) * (1.0 - b.0), a.1 + b.1)
    }

    /// Node `node`'s own drop probability and added latency.
    fn on(&self, node: usize) -> (f64, Duration) {
        // Every message asks, twice: a node without faults answers at once.
        let Some(active) = self.per_node.get(node).filter(|active| !active.is_empty()) else {
            return (0.0, Duration::ZERO);
        };
        let kept: f64 = active.values().map(|(loss, _)| 1.0 - loss).product();
        (1.0 - kept, active.values().map(|(_, d)| *d).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ends_and_overlapping_faults_combine() {
        let mut m = MessageFaults::new(3);
        assert_eq!(m.between(0, 1), (0.0, Duration::ZERO));
        m.set(0, 7, Some((0.5, Duration::from_millis(10))));
        m.set(0, 8, Some((0.5, Duration::from_millis(5))));
        m.set(1, 9, Some((0.0, Duration::from_millis(1))));
        let (loss, delay) = m.between(1, 0);
        assert!((loss - 0.75).abs() < 1e-12, "{loss}");
        assert_eq!(delay, Duration::from_millis(16));
        assert_eq!(m.between(1, 2), (0.0, Duration::from_millis(1)));
        m.set(0, 7, None);
        m.set(0, 8, None);
        assert_eq!(m.between(0, 1), (0.0, Duration::from_millis(1)));
        // A node the run does not have is ignored, as is ending a fault twice.
        m.set(9, 1, Some((1.0, Duration::ZERO)));
        m.set(0, 8, None);
    }
}
