//! The history of a real run, stamped with real time.

use lockcheck_core::history::{History, Kind, Op, Recording};
use lockcheck_core::topology::Topology;
use std::cell::RefCell;
use std::time::{Instant, SystemTime};

/// Records the entries of one run.
///
/// `true_ns` is the time since the run started on the host's monotonic clock: one clock for every
/// node, so it orders the entries as they really happened in this process. `local_ns` is the
/// host's wall clock relative to its reading at the start (equal to `true_ns` unless the host's
/// clock was stepped during the run). Every node shares the host's clocks; real clock faults,
/// when they come, will show here.
pub struct Recorder {
    topology: Topology,
    start: Instant,
    wall_start: SystemTime,
    /// Folded and capped as the simulation records ([`Recording`]), so both worlds' histories
    /// have one shape.
    history: RefCell<Recording>,
}

impl Recorder {
    /// A recorder for the nodes of `topology`, with time starting now.
    pub fn new(topology: Topology) -> Recorder {
        Recorder {
            topology,
            start: Instant::now(),
            wall_start: SystemTime::now(),
            history: RefCell::new(Recording::default()),
        }
    }

    /// The run's nodes.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Time since the start of the run, in ns.
    pub fn true_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The host's wall clock since its reading at the start, in ns (negative if it was stepped
    /// back past the start).
    fn local_ns(&self) -> i64 {
        match SystemTime::now().duration_since(self.wall_start) {
            Ok(ahead) => ahead.as_nanos() as i64,
            Err(behind) => -(behind.duration().as_nanos() as i64),
        }
    }

    /// Appends an entry recorded by node `node` (an index of the topology).
    pub fn record(&self, node: usize, kind: Kind, op: Op) {
        let true_ns = self.true_ns();
        let local_ns = self.local_ns();
        let name = self.topology.name(node).to_string();
        self.history
            .borrow_mut()
            .push(true_ns, &name, local_ns, kind, op);
    }

    /// The history so far.
    pub fn history(&self) -> History {
        self.history.borrow().history().clone()
    }
}
