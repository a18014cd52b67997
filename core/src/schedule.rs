//! A fault schedule as the nemesis of either world carries it out.
//!
//! A scenario's faults are expanded into [`Actions`], primitive and timed (a pause becomes a
//! pause and a resume, a partition a cut and a heal, a restart waits out `restart_delay_ms`),
//! sorted by time and, for equal times, by the schedule's order. The simulator's nemesis
//! (`lockcheck_sim::nemesis`) and real mode's (`lockcheck_real::nemesis`) both apply this one
//! list, and the checkers read the history entries it leaves by their [`kind`]. (The HTML page
//! that draws a run is `crate::timeline`; the two used to share the name.)

use crate::scenario::{CrashScope, Fault, Scenario};
use std::collections::BTreeMap;
use std::time::Duration;

/// A primitive action of the nemesis.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Freeze a node.
    Pause(usize),
    /// Unfreeze it.
    Resume(usize),
    /// Kill a node: its process, or the whole machine.
    Crash(usize, CrashScope),
    /// Start a killed node again.
    Restart(usize),
    /// Step a node's wall clock.
    ClockJump(usize, i64),
    /// Change a node's clock rate.
    ClockDrift(usize, f64),
    /// Cut partition `id`'s links.
    Cut(usize, Cut),
    /// Heal partition `id`.
    Heal(usize, Cut),
    /// Promote a replica to primary.
    Failover(usize),
    /// A fault that had nothing to act on (a crash of a node already down); recorded only.
    Skipped(usize),
    /// Start message fault `id` on a node: loss probability and extra delay.
    MessagesStart(usize, usize, f64, Duration),
    /// End message fault `id` on a node: what it sends from now on is on time.
    MessagesEnd(usize, usize),
    /// Every message a message fault on a node held back has arrived (a delay fault's last
    /// delayed message is due up to its extra delay after the fault ends). Recorded only: the
    /// point from which the checks may count the node's messages as on time again.
    MessagesSettled(usize),
}

/// The links one partition cuts: between `group` and `others` (every other node when `None`).
#[derive(Clone, Debug, PartialEq)]
pub struct Cut {
    /// The isolated group.
    pub group: Vec<usize>,
    /// The other side; `None`: everyone not in `group`.
    pub others: Option<Vec<usize>>,
    /// Messages across the cut wait for the heal instead of being lost.
    pub hold: bool,
}

impl Cut {
    /// Whether the link between nodes `a` and `b` crosses the cut (one on each side).
    pub fn cuts(&self, a: usize, b: usize) -> bool {
        let side = |n: usize| {
            if self.group.contains(&n) {
                Some(true)
            } else if self.others.as_ref().is_none_or(|o| o.contains(&n)) {
                Some(false)
            } else {
                None
            }
        };
        matches!((side(a), side(b)), (Some(x), Some(y)) if x != y)
    }
}

/// Whether a node is down while the schedule is expanded, so that a restart answers the crash
/// that is actually in force (a crash landing while the node is held down is moot).
#[derive(Default)]
struct Power {
    down_since: Option<u64>,
    restart_at: Option<u64>,
}

impl Power {
    /// Brings the state up to true time `at`: a pending restart due by then has happened.
    fn settle(&mut self, at: u64) {
        if self.restart_at.is_some_and(|r| r <= at) {
            self.down_since = None;
            self.restart_at = None;
        }
    }
}

/// The `kind` of a nemesis entry in the history, one per [`Action`]: what the checkers read, so
/// that the words are written once for both worlds.
pub mod kind {
    /// A node paused.
    pub const PAUSE: &str = "pause";
    /// A paused node resumed.
    pub const RESUME: &str = "resume";
    /// A node crashed (its process or its machine).
    pub const CRASH: &str = "crash";
    /// A crashed node restarted.
    pub const RESTART: &str = "restart";
    /// A wall clock jumped.
    pub const CLOCK_JUMP: &str = "clock_jump";
    /// A node's clocks started to drift.
    pub const CLOCK_DRIFT: &str = "clock_drift";
    /// A partition began.
    pub const CUT: &str = "cut";
    /// A partition healed.
    pub const HEAL: &str = "heal";
    /// A fault that could not act (a crash of a node already down, …).
    pub const SKIPPED: &str = "skipped";
    /// A replica was promoted.
    pub const FAILOVER: &str = "failover";
    /// Message loss or delay began on a node.
    pub const MESSAGES_START: &str = "messages_start";
    /// Message loss or delay ended.
    pub const MESSAGES_END: &str = "messages_end";
    /// The last message held back by a message fault arrived.
    pub const MESSAGES_SETTLED: &str = "messages_settled";
}

impl Action {
    /// The action's kind, as recorded in the history (see [`kind`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Pause(_) => kind::PAUSE,
            Action::Resume(_) => kind::RESUME,
            Action::Crash(..) => kind::CRASH,
            Action::Restart(_) => kind::RESTART,
            Action::ClockJump(..) => kind::CLOCK_JUMP,
            Action::ClockDrift(..) => kind::CLOCK_DRIFT,
            Action::Cut(..) => kind::CUT,
            Action::Heal(..) => kind::HEAL,
            Action::Skipped(_) => kind::SKIPPED,
            Action::Failover(_) => kind::FAILOVER,
            Action::MessagesStart(..) => kind::MESSAGES_START,
            Action::MessagesEnd(..) => kind::MESSAGES_END,
            Action::MessagesSettled(_) => kind::MESSAGES_SETTLED,
        }
    }
}

/// The schedule as primitive actions: (true time in ns, action, its description).
pub type Actions = Vec<(u64, Action, String)>;

/// Expands `scenario`'s fault schedule. The scenario must be valid.
pub fn actions(scenario: &Scenario) -> Actions {
    let topology = scenario.topology();
    let idx = |name: &str| topology.index_of(name).expect("validated node name");
    let ms = |v: u64| v * 1_000_000;
    let mut order: Vec<(u64, usize)> = scenario
        .faults
        .iter()
        .enumerate()
        .map(|(i, f)| (f.at_ms(), i))
        .collect();
    order.sort();
    // Every delay window (start, end, extra), in ms: overlapping delays add up (on one node, and
    // between a delayed sender and a delayed receiver).
    let delays: Vec<(u64, u64, u64)> = scenario
        .faults
        .iter()
        .filter_map(|f| match f {
            Fault::Delay {
                at_ms,
                extra_ms,
                for_ms,
                ..
            } => Some((*at_ms, at_ms + for_ms, *extra_ms)),
            _ => None,
        })
        .collect();
    let mut power: BTreeMap<usize, Power> = BTreeMap::new();
    let mut out: Vec<(u64, usize, Action, String)> = Vec::new();
    for (seq, (_, i)) in order.into_iter().enumerate() {
        let fault = &scenario.faults[i];
        let at = ms(fault.at_ms());
        let mut push = |t: u64, action: Action, text: String| out.push((t, seq, action, text));
        match fault {
            Fault::Pause { node, for_ms, .. } => {
                let n = idx(node);
                push(at, Action::Pause(n), format!("pause {node}"));
                push(
                    at + ms(*for_ms),
                    Action::Resume(n),
                    format!("resume {node}"),
                );
            }
            Fault::ClockJump { node, by_ms, .. } => push(
                at,
                Action::ClockJump(idx(node), by_ms * 1_000_000),
                format!("{node}'s wall clock jumps by {by_ms:+} ms"),
            ),
            Fault::ClockDrift { node, rate, .. } => push(
                at,
                Action::ClockDrift(idx(node), *rate),
                format!(
                    "{node}'s clocks now run at {}x",
                    crate::input::float_text(*rate)
                ),
            ),
            Fault::Crash { node, scope, .. } => {
                let n = idx(node);
                let state = power.entry(n).or_default();
                state.settle(at);
                if state.down_since.is_some() {
                    push(
                        at,
                        Action::Skipped(n),
                        format!("crash {node}: skipped, already down"),
                    );
                } else {
                    state.down_since = Some(at);
                    let text = match scope {
                        CrashScope::Machine => format!("crash {node}"),
                        CrashScope::Process => format!("kill {node}'s process"),
                    };
                    push(at, Action::Crash(n, *scope), text);
                }
            }
            Fault::Restart { node, .. } => {
                let n = idx(node);
                let state = power.entry(n).or_default();
                state.settle(at);
                match (state.down_since, state.restart_at) {
                    (Some(_), Some(_)) => push(
                        at,
                        Action::Skipped(n),
                        format!("restart {node}: skipped, already restarting"),
                    ),
                    (Some(since), None) => {
                        let delay = ms(scenario.params.restart_delay_of(node));
                        let when = at.max(since + delay);
                        state.restart_at = Some(when);
                        let text = if when > at {
                            format!("restart {node} (held down for restart_delay_ms)")
                        } else {
                            format!("restart {node}")
                        };
                        push(when, Action::Restart(n), text);
                    }
                    (None, _) => push(
                        at,
                        Action::Skipped(n),
                        format!("restart {node}: skipped, not down"),
                    ),
                }
            }
            Fault::Failover { node, .. } => push(
                at,
                Action::Failover(idx(node)),
                format!("fail over: {node} is now the primary"),
            ),
            Fault::Partition {
                isolate,
                from,
                for_ms,
                hold,
                ..
            } => {
                let cut = Cut {
                    group: isolate.iter().map(|n| idx(n)).collect(),
                    others: from.as_ref().map(|f| f.iter().map(|n| idx(n)).collect()),
                    hold: *hold,
                };
                let names = isolate.join(", ");
                let others = crate::scenario::from_clause(from);
                let held = if *hold { ", holding messages" } else { "" };
                push(
                    at,
                    Action::Cut(i, cut.clone()),
                    format!("isolate [{names}]{others}{held}"),
                );
                push(
                    at + ms(*for_ms),
                    Action::Heal(i, cut),
                    format!("heal [{names}]{others}"),
                );
            }
            Fault::Loss {
                node, rate, for_ms, ..
            } => {
                let n = idx(node);
                push(
                    at,
                    Action::MessagesStart(n, i, *rate, Duration::ZERO),
                    format!(
                        "drop {} of {node}'s messages",
                        crate::input::float_text(*rate)
                    ),
                );
                push(
                    at + ms(*for_ms),
                    Action::MessagesEnd(n, i),
                    format!("stop dropping {node}'s messages"),
                );
                push(
                    at + ms(*for_ms),
                    Action::MessagesSettled(n),
                    format!("{node}'s messages are on time again"),
                );
            }
            Fault::Delay {
                node,
                extra_ms,
                for_ms,
                ..
            } => {
                let n = idx(node);
                push(
                    at,
                    Action::MessagesStart(n, i, 0.0, Duration::from_millis(*extra_ms)),
                    format!("delay {node}'s messages by {extra_ms} ms"),
                );
                push(
                    at + ms(*for_ms),
                    Action::MessagesEnd(n, i),
                    format!("stop delaying {node}'s messages"),
                );
                // A message sent inside the window is due at most every overlapping window's
                // extra delay and one latency after the window ends.
                let end = fault.at_ms() + for_ms;
                let extra: u64 = delays
                    .iter()
                    .filter(|(start, stop, _)| *start <= end && fault.at_ms() <= *stop)
                    .map(|(_, _, extra)| extra)
                    .sum();
                push(
                    ms(end + extra) + crate::message_faults::LATENCY_NS.end,
                    Action::MessagesSettled(n),
                    format!("the last of {node}'s delayed messages has arrived"),
                );
            }
        }
    }
    out.sort_by_key(|(t, seq, _, _)| (*t, *seq));
    out.into_iter().map(|(t, _, a, d)| (t, a, d)).collect()
}

/// The true time of the last action, i.e. when every fault has ended (0 without faults).
pub fn quiet_after_ns(actions: &Actions) -> u64 {
    actions.last().map_or(0, |(t, _, _)| *t)
}

/// When a run stops waiting for clients that never finish (blocked, or holding on), in ns of
/// true time: after the end of the workload and of the faults (`quiet_ns`), twice the longest a
/// lock can outlive its holder (the lease, or for ZooKeeper the session) or a hold, and 10 s.
/// The same in both worlds.
pub fn hard_limit_ns(scenario: &Scenario, quiet_ns: u64) -> u64 {
    let ttl = Duration::from_millis(scenario.algorithm.lease_ms(&scenario.params));
    let hold = Duration::from_millis(scenario.workload.hold_ms);
    let end_ns = scenario.duration_ms * 1_000_000;
    end_ns.max(quiet_ns) + (2 * ttl.max(hold)).as_nanos() as u64 + 10_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Algorithm;

    #[test]
    fn restart_waits_out_the_restart_delay() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.params.restart_delay_ms = 5_000;
        s.faults = vec![
            Fault::Crash {
                at_ms: 1_000,
                node: "redis-0".into(),
                scope: CrashScope::Machine,
            },
            Fault::Restart {
                at_ms: 1_000,
                node: "redis-0".into(),
            },
        ];
        let t = actions(&s);
        assert_eq!(t[0].0, 1_000_000_000);
        assert_eq!(t[1].0, 6_000_000_000);
        assert_eq!(
            t[1].1,
            Action::Restart(s.topology().index_of("redis-0").unwrap())
        );
    }

    #[test]
    fn a_crash_while_held_down_is_moot_and_its_restart_does_not_cut_the_delay_short() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.params.restart_delay_ms = 10_000;
        let crash = |at_ms| Fault::Crash {
            at_ms,
            node: "redis-0".into(),
            scope: CrashScope::Machine,
        };
        let restart = |at_ms| Fault::Restart {
            at_ms,
            node: "redis-0".into(),
        };
        s.faults = vec![
            crash(0),
            restart(0),
            crash(3_760),
            restart(3_760),
            crash(12_973),
            restart(12_973),
        ];
        let r = s.topology().index_of("redis-0").unwrap();
        let acts: Vec<(u64, Action)> = actions(&s)
            .into_iter()
            .map(|(t, a, _)| (t / 1_000_000, a))
            .collect();
        assert_eq!(
            acts,
            vec![
                (0, Action::Crash(r, CrashScope::Machine)),
                (3_760, Action::Skipped(r)),
                (3_760, Action::Skipped(r)),
                (10_000, Action::Restart(r)),
                (12_973, Action::Crash(r, CrashScope::Machine)),
                (22_973, Action::Restart(r)),
            ]
        );
    }

    #[test]
    fn pauses_expand_to_pause_and_resume_in_time_order() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.faults = vec![
            Fault::Pause {
                at_ms: 100,
                node: "client-0".into(),
                for_ms: 1_000,
            },
            Fault::Pause {
                at_ms: 50,
                node: "client-1".into(),
                for_ms: 10,
            },
        ];
        let times: Vec<u64> = actions(&s).iter().map(|(t, _, _)| t / 1_000_000).collect();
        assert_eq!(times, vec![50, 60, 100, 1_100]);
    }

    #[test]
    fn a_delay_settles_when_its_last_message_can_have_arrived_with_every_overlapping_delay() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        let delay = |at_ms, node: &str, extra_ms, for_ms| Fault::Delay {
            at_ms,
            node: node.into(),
            extra_ms,
            for_ms,
        };
        // A message client-0 sends to redis-0 at 1 s takes both delays: 3 s extra.
        s.faults = vec![
            delay(0, "redis-0", 2_000, 5_000),
            delay(1_000, "client-0", 1_000, 100),
            delay(9_000, "client-1", 500, 100),
        ];
        let settled: Vec<u64> = actions(&s)
            .iter()
            .filter(|(_, a, _)| matches!(a, Action::MessagesSettled(_)))
            .map(|(t, _, _)| t / 1_000_000)
            .collect();
        let latency = crate::message_faults::LATENCY_NS.end / 1_000_000;
        assert_eq!(
            settled,
            vec![
                1_100 + 3_000 + latency,
                5_000 + 3_000 + latency,
                9_600 + latency
            ]
        );
        assert_eq!(quiet_after_ns(&actions(&s)) / 1_000_000, 9_600 + latency);
    }

    #[test]
    fn the_latest_schedule_the_ranges_allow_fits_simulated_time() {
        // Every span as long as allowed and as late as allowed: a pause, a held-down restart,
        // delays whose extras add up to the most allowed, clocks thrown the furthest. Expanding
        // it and working out the run's end must not overflow (this crate is built with
        // overflow checks), whatever the ranges of `limits` are raised to.
        use crate::limits::MAX_MS;
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.duration_ms = MAX_MS;
        s.params.ttl_ms = Some(MAX_MS);
        s.params.restart_delay_ms = MAX_MS;
        s.workload.hold_ms = MAX_MS;
        let last = MAX_MS - 1;
        let node = |n: &str| n.to_string();
        s.faults = vec![
            Fault::Pause {
                at_ms: last,
                node: node("client-0"),
                for_ms: MAX_MS,
            },
            Fault::Crash {
                at_ms: last - 1,
                node: node("redis-0"),
                scope: Default::default(),
            },
            Fault::Restart {
                at_ms: last,
                node: node("redis-0"),
            },
            Fault::Delay {
                at_ms: last,
                node: node("client-1"),
                extra_ms: MAX_MS / 2,
                for_ms: MAX_MS,
            },
            Fault::Delay {
                at_ms: last,
                node: node("redis-0"),
                extra_ms: MAX_MS - MAX_MS / 2,
                for_ms: MAX_MS,
            },
            Fault::ClockJump {
                at_ms: last,
                node: node("client-1"),
                by_ms: -(MAX_MS as i64),
            },
            Fault::ClockDrift {
                at_ms: 0,
                node: node("client-1"),
                rate: crate::limits::MAX_DRIFT_RATE,
            },
        ];
        s.validate().expect("every value at the edge of its range");
        let quiet = quiet_after_ns(&actions(&s));
        // The delays' end plus every extra: the latest the schedule reaches.
        assert!(quiet >= (last + MAX_MS + MAX_MS) * 1_000_000, "{quiet}");
        let end = hard_limit_ns(&s, quiet);
        assert!(end > quiet);
        let mut clock = crate::clock::NodeClock::default();
        clock.set_rate(0, crate::limits::MAX_DRIFT_RATE);
        clock.jump(last * 1_000_000, -(MAX_MS as i64) * 1_000_000);
        // 100× fast for years passes year 2262, where an i64 of ns ends: the clock stops there
        // rather than wrapping back to 1677.
        assert!(clock.wall_ns(end) >= clock.wall_ns(quiet));
        assert!(clock.wall_ns(quiet) > crate::clock::WALL_ORIGIN_NS);
    }
}
