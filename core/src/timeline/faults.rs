//! The fault schedule as drawn: bands over the lanes a fault struck, marks for instants, and
//! each moved clock's model.
//!
//! Fault times come from the same expansion of the schedule that the simulator and the real
//! nemesis carry out ([`schedule::actions`]), at the true time the history recorded each action:
//! in a simulation the planned time, in a real run when it was done (a restart, say, is recorded
//! once the server is ready).

use super::layout::{json, ms, ClockChart, Ctx, Form, Layer, Place, Shape};
use crate::clock::{NodeClock, WALL_ORIGIN_NS};
use crate::history::{Entry, Op};
use crate::report::Report;
use crate::schedule::{self, Action};
use std::collections::BTreeMap;

/// A scheduled fault with a duration, on one node's lane.
pub(super) struct Span {
    /// `pause`, `crash`, `partition` or `messages`.
    pub kind: &'static str,
    pub node: String,
    pub start: u64,
    /// None: never ended (a crash without a restart).
    pub end: Option<u64>,
    title: String,
    label: String,
}

/// An instantaneous fault on one node's lane.
pub(super) struct Mark {
    /// `clock-jump`, `clock-drift`, `failover` or `skipped`.
    kind: &'static str,
    node: String,
    pub at: u64,
    title: String,
}

/// A change of a node's clock model.
#[derive(Clone, Copy)]
enum ClockChange {
    Jump(i64),
    Rate(f64),
}

/// The fault schedule as drawn.
pub(super) struct Faults {
    /// Whether the embedded scenario is valid (otherwise nothing of it is drawn).
    pub valid: bool,
    pub spans: Vec<Span>,
    pub marks: Vec<Mark>,
    /// Per node whose clock the schedule moves: each change at its true time, in order.
    clocks: BTreeMap<String, Vec<(u64, ClockChange)>>,
    /// Why nothing is drawn, when it is not.
    pub note: Option<String>,
}

impl Faults {
    /// The schedule of `report`'s scenario, at the times its history recorded.
    pub fn of(report: &Report) -> Faults {
        let mut faults = Faults {
            valid: true,
            spans: Vec::new(),
            marks: Vec::new(),
            clocks: BTreeMap::new(),
            note: None,
        };
        if let Err(e) = report.scenario.validate() {
            // The expansion needs a valid scenario (every node it names must exist).
            faults.valid = false;
            faults.note = Some(format!(
                "the embedded scenario is invalid ({e}): its faults are not drawn"
            ));
            return faults;
        }
        let topology = report.scenario.topology();
        let name = |i: usize| topology.name(i).to_string();
        let recorded: Vec<&Entry> = report
            .history
            .entries
            .iter()
            .filter(|e| matches!(e.op, Op::Nemesis { .. }))
            .collect();
        let mut paused: BTreeMap<usize, u64> = BTreeMap::new();
        let mut crashed: BTreeMap<usize, u64> = BTreeMap::new();
        let mut cut: BTreeMap<usize, (u64, String)> = BTreeMap::new();
        let mut cut_groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut messages: BTreeMap<(usize, usize), (u64, String)> = BTreeMap::new();
        for (i, (planned, action, text)) in schedule::actions(&report.scenario).iter().enumerate() {
            // Both worlds record every action, in order, as it happens.
            let at = recorded
                .get(i)
                .filter(|e| matches!(&e.op, Op::Nemesis { kind, .. } if kind == action.kind()))
                .map_or(*planned, |e| e.true_ns);
            match action {
                Action::Pause(n) => {
                    paused.insert(*n, at);
                }
                Action::Resume(n) => {
                    let start = paused.remove(n).unwrap_or(at);
                    faults.spans.push(Span {
                        kind: "pause",
                        node: name(*n),
                        start,
                        end: Some(at),
                        title: format!(
                            "{} paused at {} for {} (resumed at {})",
                            name(*n),
                            ms(start),
                            ms(at - start.min(at)),
                            ms(at)
                        ),
                        label: format!("paused {}", ms(at - start.min(at))),
                    });
                }
                Action::Crash(n, _) => {
                    crashed.insert(*n, at);
                }
                Action::Restart(n) => {
                    let start = crashed.remove(n).unwrap_or(at);
                    let held = if text.contains("held down") {
                        format!(
                            " (held down by restart_delay_ms = {} ms)",
                            report.scenario.params.restart_delay_of(&name(*n))
                        )
                    } else {
                        String::new()
                    };
                    faults.spans.push(Span {
                        kind: "crash",
                        node: name(*n),
                        start,
                        end: Some(at),
                        title: format!(
                            "{} crashed at {}, restarted at {}{held}",
                            name(*n),
                            ms(start),
                            ms(at)
                        ),
                        label: format!("down {}", ms(at - start.min(at))),
                    });
                }
                Action::Cut(id, c) => {
                    cut.insert(*id, (at, text.clone()));
                    cut_groups.insert(*id, c.group.clone());
                }
                Action::Heal(id, c) => {
                    let (start, what) = cut.remove(id).unwrap_or((at, text.clone()));
                    let from = if c.others.is_some() {
                        "cut off from the other side"
                    } else {
                        "cut off from every other node"
                    };
                    for n in &c.group {
                        faults.spans.push(Span {
                            kind: "partition",
                            node: name(*n),
                            start,
                            end: Some(at),
                            title: format!("{what}: {from} from {} to {}", ms(start), ms(at)),
                            label: format!("cut off {}", ms(at - start.min(at))),
                        });
                    }
                }
                Action::MessagesStart(n, id, ..) => {
                    messages.insert((*n, *id), (at, text.clone()));
                }
                Action::MessagesEnd(n, id) => {
                    let (start, what) = messages.remove(&(*n, *id)).unwrap_or((at, text.clone()));
                    faults.spans.push(Span {
                        kind: "messages",
                        node: name(*n),
                        start,
                        end: Some(at),
                        title: format!("{what} from {} to {}", ms(start), ms(at)),
                        label: what,
                    });
                }
                Action::ClockJump(n, by) => {
                    faults
                        .clocks
                        .entry(name(*n))
                        .or_default()
                        .push((at, ClockChange::Jump(*by)));
                    faults.marks.push(Mark {
                        kind: "clock-jump",
                        node: name(*n),
                        at,
                        title: format!("{text} at {}", ms(at)),
                    });
                }
                Action::ClockDrift(n, rate) => {
                    faults
                        .clocks
                        .entry(name(*n))
                        .or_default()
                        .push((at, ClockChange::Rate(*rate)));
                    faults.marks.push(Mark {
                        kind: "clock-drift",
                        node: name(*n),
                        at,
                        title: format!("{text} from {}", ms(at)),
                    });
                }
                Action::Failover(n) => faults.marks.push(Mark {
                    kind: "failover",
                    node: name(*n),
                    at,
                    title: format!("{text} at {}", ms(at)),
                }),
                // The messages span ends when the fault does; what it held back is drawn where
                // it arrives.
                Action::MessagesSettled(_) => {}
                Action::Skipped(n) => faults.marks.push(Mark {
                    kind: "skipped",
                    node: name(*n),
                    at,
                    title: format!("{text} at {}", ms(at)),
                }),
            }
        }
        // What never ended: a pause or cut past the end of the run, a crash never restarted.
        for (n, start) in paused {
            faults
                .spans
                .push(open_span("pause", name(n), start, "paused"));
        }
        for (n, start) in crashed {
            faults.spans.push(open_span(
                "crash",
                name(n),
                start,
                "crashed, never restarted",
            ));
        }
        for (id, (start, _)) in cut {
            for n in cut_groups.remove(&id).unwrap_or_default() {
                faults
                    .spans
                    .push(open_span("partition", name(n), start, "cut off"));
            }
        }
        for ((n, _), (start, what)) in messages {
            faults
                .spans
                .push(open_span("messages", name(n), start, &what));
        }
        faults
    }

    /// The clock rate of `node` at true time `at` (1 unless the schedule drifts it).
    pub fn rate_at(&self, node: &str, at: u64) -> f64 {
        self.clocks
            .get(node)
            .into_iter()
            .flatten()
            .filter(|(t, _)| *t <= at)
            .filter_map(|(_, c)| match c {
                ClockChange::Rate(r) => Some(*r),
                ClockChange::Jump(_) => None,
            })
            .next_back()
            .unwrap_or(1.0)
    }

    /// When `node` crashed first after `after`, if it did.
    pub fn crash_after(&self, node: &str, after: u64) -> Option<u64> {
        self.spans
            .iter()
            .filter(|s| s.kind == "crash" && s.node == node && s.start >= after)
            .map(|s| s.start)
            .min()
    }
}

fn open_span(kind: &'static str, node: String, start: u64, what: &str) -> Span {
    Span {
        kind,
        title: format!("{node}: {what} from {} to the end of the run", ms(start)),
        label: what.to_string(),
        node,
        start,
        end: None,
    }
}

/// The faults that struck `node`, over its lane: a band for each span, a marker for each
/// instant.
pub(super) fn fault_bands(at: Place, height: f64, node: &str, ctx: &Ctx, shapes: &mut Vec<Shape>) {
    for s in ctx.faults.spans.iter().filter(|s| s.node == node) {
        let end = s.end.unwrap_or(ctx.axis.end_ns);
        shapes.push(Shape {
            lane: at.lane,
            layer: Layer::Band,
            class: format!("fault-band {}", s.kind),
            form: ctx.bar(s.start, end, at.top, height),
            title: s.title.clone(),
            data: vec![
                ("node", node.to_string()),
                ("start-ns", s.start.to_string()),
                ("end-ns", end.to_string()),
            ],
            label: Some(s.label.clone()),
        });
    }
    for m in ctx.faults.marks.iter().filter(|m| m.node == node) {
        let x = ctx.axis.x(m.at);
        let (y, h) = (at.top, height);
        let form = match m.kind {
            // A jump is a step: an arrow down the lane.
            "clock-jump" => Form::Polygon(vec![
                (x - 6.0, y),
                (x + 6.0, y),
                (x + 1.0, y + h * 0.6),
                (x + 1.0, y + h),
                (x - 1.0, y + h),
                (x - 1.0, y + h * 0.6),
            ]),
            _ => Form::Polygon(vec![(x - 5.0, y), (x + 5.0, y), (x, y + 9.0)]),
        };
        shapes.push(Shape {
            lane: at.lane,
            layer: Layer::Mark,
            class: format!("fault-mark {}", m.kind),
            form,
            title: m.title.clone(),
            data: vec![("node", node.to_string()), ("at-ns", m.at.to_string())],
            label: None,
        });
    }
}

/// A chart per node whose clock the schedule moves.
pub(super) fn clock_charts(report: &Report, faults: &Faults, last_ns: u64) -> Vec<ClockChart> {
    let mut charts = Vec::new();
    for (node, changes) in &faults.clocks {
        let mut clock = NodeClock::default();
        let local = |c: &NodeClock, t: u64| c.wall_ns(t).saturating_sub(WALL_ORIGIN_NS);
        let mut model = vec![(0, local(&clock, 0))];
        let mut described = Vec::new();
        for &(at, change) in changes {
            model.push((at, local(&clock, at)));
            match change {
                ClockChange::Jump(by) => {
                    clock.jump(at, by);
                    described.push(format!(
                        "wall clock jumps by {:+} ms at {}",
                        by / 1_000_000,
                        ms(at)
                    ));
                }
                ClockChange::Rate(rate) => {
                    clock.set_rate(at, rate);
                    described.push(format!(
                        "runs at {}× true time from {}",
                        crate::input::float_text(rate),
                        ms(at)
                    ));
                }
            }
            model.push((at, local(&clock, at)));
        }
        let end = last_ns.max(model.last().map_or(0, |p| p.0));
        model.push((end, local(&clock, end)));
        let readings = report
            .history
            .entries
            .iter()
            .filter(|e| &e.node == node)
            .map(|e| (e.true_ns, e.local_ns, json(e)))
            .collect();
        charts.push(ClockChart {
            node: node.clone(),
            model,
            readings,
            changes: described,
        });
    }
    charts
}
