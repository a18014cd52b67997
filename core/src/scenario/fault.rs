//! `faults`: the fault schedule's vocabulary, as a file writes it.

use super::*;

/// One fault, at a true time from the start of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Freeze every task of a node (a GC pause, SIGSTOP) for `for_ms`; its messages queue up.
    Pause {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// How long.
        for_ms: u64,
    },
    /// Step the node's wall clock by `by_ms` (negative: backwards). Monotonic clocks never jump.
    ClockJump {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// By how much.
        by_ms: i64,
    },
    /// From now on the node's clocks (wall and monotonic) run at `rate` × true time.
    ClockDrift {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// Rate, e.g. 1.05 for 5 % fast.
        rate: f64,
    },
    /// Kill the node: its tasks stop, its memory is lost, its disk is kept. What else it loses,
    /// and how its peers learn of it, is its `scope` (default `machine`).
    Crash {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// A `process` crash (kill -9) or a `machine` crash (power loss). Default `machine`.
        #[serde(default, skip_serializing_if = "CrashScope::is_machine")]
        scope: CrashScope,
    },
    /// Start a crashed node again from its disk (not before `restart_delay_ms` after the crash).
    Restart {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
    },
    /// Promote replica `node` to primary (what Sentinel does when the primary is unreachable);
    /// clients follow the new primary. A restarted old primary comes back as a replica.
    Failover {
        /// When.
        at_ms: u64,
        /// The replica to promote.
        node: String,
    },
    /// Cut the listed nodes, as one group, off from every other node (or only from the nodes
    /// `from` lists) for `for_ms`.
    Partition {
        /// When.
        at_ms: u64,
        /// The isolated group.
        isolate: Vec<String>,
        /// The other side of the cut: without it, every node not in `isolate`. With it, only the
        /// links between the two groups are cut (a client cut off from the lock service that
        /// still reaches the resource: `"isolate": ["client-0"], "from": ["zk-0"]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Vec<String>>,
        /// How long.
        for_ms: u64,
        /// Messages sent across the cut wait and arrive after the heal, as a TCP connection
        /// retransmits them (and as real mode's proxies hold them); without it they are lost, as
        /// a network that drops packets loses them. Default false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        hold: bool,
    },
    /// Drop each message to or from the node with probability `rate` for `for_ms`.
    Loss {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// Probability in [0, 1].
        rate: f64,
        /// How long.
        for_ms: u64,
    },
    /// Delay each message to or from the node by an extra `extra_ms` for `for_ms`.
    Delay {
        /// When.
        at_ms: u64,
        /// Which node.
        node: String,
        /// Added latency.
        extra_ms: u64,
        /// How long.
        for_ms: u64,
    },
}

impl Fault {
    /// Every client of `clients` but `client-0` paused from the start for `for_ms`, so that
    /// `client-0` takes the lock first in either world (who wins the first race otherwise hangs
    /// on a millisecond of latency).
    pub fn hold_backs(clients: u32, for_ms: u64) -> Vec<Fault> {
        (1..clients)
            .map(|c| Fault::Pause {
                at_ms: 0,
                node: format!("client-{c}"),
                for_ms,
            })
            .collect()
    }

    /// When the fault starts.
    pub fn at_ms(&self) -> u64 {
        match self {
            Fault::Pause { at_ms, .. }
            | Fault::ClockJump { at_ms, .. }
            | Fault::ClockDrift { at_ms, .. }
            | Fault::Crash { at_ms, .. }
            | Fault::Restart { at_ms, .. }
            | Fault::Failover { at_ms, .. }
            | Fault::Partition { at_ms, .. }
            | Fault::Loss { at_ms, .. }
            | Fault::Delay { at_ms, .. } => *at_ms,
        }
    }

    /// The nodes the fault names.
    pub fn nodes(&self) -> Vec<&str> {
        match self {
            Fault::Partition { isolate, from, .. } => isolate
                .iter()
                .chain(from.iter().flatten())
                .map(String::as_str)
                .collect(),
            Fault::Pause { node, .. }
            | Fault::ClockJump { node, .. }
            | Fault::ClockDrift { node, .. }
            | Fault::Crash { node, .. }
            | Fault::Restart { node, .. }
            | Fault::Failover { node, .. }
            | Fault::Loss { node, .. }
            | Fault::Delay { node, .. } => vec![node.as_str()],
        }
    }

    /// The fault's kind as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Pause { .. } => "pause",
            Fault::ClockJump { .. } => "clock_jump",
            Fault::ClockDrift { .. } => "clock_drift",
            Fault::Crash { .. } => "crash",
            Fault::Restart { .. } => "restart",
            Fault::Failover { .. } => "failover",
            Fault::Partition { .. } => "partition",
            Fault::Loss { .. } => "loss",
            Fault::Delay { .. } => "delay",
        }
    }

    /// A one-line description for people.
    pub fn describe(&self) -> String {
        match self {
            Fault::Pause {
                at_ms,
                node,
                for_ms,
            } => format!("{at_ms} ms: pause {node} for {for_ms} ms"),
            Fault::ClockJump { at_ms, node, by_ms } => {
                format!("{at_ms} ms: {node}'s wall clock jumps by {by_ms:+} ms")
            }
            Fault::ClockDrift { at_ms, node, rate } => {
                format!(
                    "{at_ms} ms: {node}'s clocks run at {}x",
                    crate::input::float_text(*rate)
                )
            }
            Fault::Crash {
                at_ms,
                node,
                scope: CrashScope::Machine,
            } => format!("{at_ms} ms: crash {node}"),
            Fault::Crash {
                at_ms,
                node,
                scope: CrashScope::Process,
            } => format!("{at_ms} ms: kill {node}'s process"),
            Fault::Restart { at_ms, node } => format!("{at_ms} ms: restart {node}"),
            Fault::Failover { at_ms, node } => {
                format!("{at_ms} ms: fail over to {node}")
            }
            Fault::Partition {
                at_ms,
                isolate,
                from,
                for_ms,
                hold,
            } => format!(
                "{at_ms} ms: isolate [{}]{} for {for_ms} ms{}",
                isolate.join(", "),
                from_clause(from),
                if *hold { ", holding messages" } else { "" }
            ),
            Fault::Loss {
                at_ms,
                node,
                rate,
                for_ms,
            } => format!(
                "{at_ms} ms: drop {} of {node}'s messages for {for_ms} ms",
                crate::input::float_text(*rate)
            ),
            Fault::Delay {
                at_ms,
                node,
                extra_ms,
                for_ms,
            } => format!("{at_ms} ms: delay {node}'s messages by {extra_ms} ms for {for_ms} ms"),
        }
    }
}

/// A partition's `from` as people read it: ` from [zk-0]`, or nothing for "everyone else".
pub fn from_clause(from: &Option<Vec<String>>) -> String {
    from.as_ref()
        .map(|from| format!(" from [{}]", from.join(", ")))
        .unwrap_or_default()
}

/// What a crash takes down with the node, and how its peers learn of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashScope {
    /// The process dies (kill -9, an OOM kill, a panic): what it wrote to the operating system
    /// survives even if never fsynced (Redis `everysec` and InnoDB's
    /// `innodb_flush_log_at_trx_commit=2` lose nothing), and the machine's kernel closes its
    /// sockets at once, so peers learn of it right away (a request in flight fails, a new
    /// connection is refused until it listens again).
    Process,
    /// The machine dies (power loss, a kernel panic): what was not fsynced is lost (`everysec`:
    /// up to the last second), and peers learn of it only by their timeouts; when it is back,
    /// their old connections are reset at their next packet.
    #[default]
    Machine,
}

impl CrashScope {
    /// Whether this is a machine crash (the default, written without a `scope`).
    pub fn is_machine(&self) -> bool {
        *self == CrashScope::Machine
    }
}
