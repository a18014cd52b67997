//! Where everything goes: lanes, bars, fault bands and marks in SVG user units, computed from a
//! report without writing any markup, so that the geometry can be tested on its own.
//!
//! The x axis is true time from 0 to a little past the last thing that happened. Lanes are
//! stacked top to bottom in a stable order; what goes on each is in [`super::lanes`], the faults
//! in [`super::faults`].

use super::faults::{clock_charts, fault_bands, Faults};
use super::lanes::{client_lane, resource_lane, server_lane};
use crate::history::Entry;
use crate::report::Report;
use std::collections::{BTreeMap, BTreeSet};

/// Width of the lane labels left of the plot.
const LABEL_W: f64 = 150.0;
/// Width of the plot (true time 0 to the axis end).
const PLOT_W: f64 = 1200.0;
/// Space right of the plot.
const RIGHT_MARGIN: f64 = 20.0;
/// Height of the time axis above the lanes.
pub(super) const AXIS_H: f64 = 40.0;
const LANE_GAP: f64 = 6.0;
/// Height of the row of observation ticks at the bottom of every lane.
pub(super) const TICK_H: f64 = 8.0;
/// Narrowest bar drawn: a 2 ms overlap in a 30 s run must still be seen.
const MIN_W: f64 = 2.0;
/// Client colours (CSS classes `who-0` … `who-7`).
pub(super) const WHO_COLOURS: usize = 8;

/// The time axis.
pub(super) struct Axis {
    /// True time at the right end of the plot, in ns (never 0).
    pub end_ns: u64,
}

impl Axis {
    /// The x of true time `ns` (clamped to the axis).
    pub fn x(&self, ns: u64) -> f64 {
        LABEL_W + PLOT_W * (ns.min(self.end_ns) as f64 / self.end_ns as f64)
    }

    /// Tick times: a round step (1, 2 or 5 × a power of ten ns) giving about ten ticks.
    pub fn ticks(&self) -> Vec<u64> {
        let wanted = (self.end_ns / 10).max(1);
        let mut magnitude: u64 = 1;
        let step = 'found: loop {
            for m in [1, 2, 5] {
                if m * magnitude >= wanted {
                    break 'found m * magnitude;
                }
            }
            match magnitude.checked_mul(10) {
                Some(next) if next <= u64::MAX / 10 => magnitude = next,
                _ => break self.end_ns,
            }
        };
        (0..=self.end_ns / step).map(|i| i * step).collect()
    }
}

/// One node's horizontal strip.
pub(super) struct Lane {
    /// The node's name (`client-0`, `redis-1`, `resource`, `probe`).
    pub node: String,
    /// `client`, `server`, `resource` or `probe`.
    pub role: &'static str,
    /// Top edge.
    pub top: f64,
    /// Height.
    pub height: f64,
    /// A second line under the name, saying what the lane shows.
    pub caption: &'static str,
}

/// What a shape is drawn as.
pub(super) enum Form {
    Rect { x: f64, y: f64, w: f64, h: f64 },
    Line { x: f64, y1: f64, y2: f64 },
    Circle { cx: f64, cy: f64, r: f64 },
    Polygon(Vec<(f64, f64)>),
}

/// Drawing order within a lane: bands under bars under marks.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Layer {
    Band,
    Bar,
    Mark,
}

/// One drawn element, with its hover text (history entries, as JSON) and data attributes.
pub(super) struct Shape {
    /// The lane it belongs to.
    pub lane: usize,
    pub layer: Layer,
    /// CSS classes, e.g. `fault-band pause`.
    pub class: String,
    pub form: Form,
    /// Hover text.
    pub title: String,
    /// `data-*` attributes (name without the prefix, value).
    pub data: Vec<(&'static str, String)>,
    /// A short text drawn inside (a band's "paused 10074 ms"), when there is room.
    pub label: Option<String>,
}

/// A violation: a marker across every lane at the time it became certain.
pub(super) struct ViolationMark {
    /// Which violation of the report (its position in `violations`).
    pub index: usize,
    /// The kind as written in the report (`mutual_exclusion`).
    pub kind: String,
    pub at_ns: u64,
    pub x: f64,
    /// Its story.
    pub title: String,
}

/// A moved clock: its model (the scenario's jumps and drifts, through [`NodeClock`]) and the
/// readings the history recorded on that node.
pub(super) struct ClockChart {
    pub node: String,
    /// (true ns, local ns since the wall origin) at every change of the model, and at both ends.
    pub model: Vec<(u64, i64)>,
    /// (true ns, local ns, hover text) of every entry the node recorded.
    pub readings: Vec<(u64, i64, String)>,
    /// What moved it, for people.
    pub changes: Vec<String>,
}

/// Everything the page draws, in SVG user units.
pub(super) struct Layout {
    pub axis: Axis,
    pub lanes: Vec<Lane>,
    pub shapes: Vec<Shape>,
    pub violations: Vec<ViolationMark>,
    pub clocks: Vec<ClockChart>,
    /// Remarks shown under the timeline (what could not be drawn, and why).
    pub notes: Vec<String>,
    /// Height of the whole timeline.
    pub height: f64,
}

impl Layout {
    /// Width of the whole timeline.
    pub fn width(&self) -> f64 {
        LABEL_W + PLOT_W + RIGHT_MARGIN
    }
}

/// Lays out `report`.
pub(super) fn layout(report: &Report) -> Layout {
    let entries = &report.history.entries;
    let faults = Faults::of(report);
    let last_ns = entries
        .iter()
        .map(Entry::end_ns)
        .chain(
            faults
                .spans
                .iter()
                .flat_map(|s| [s.start, s.end.unwrap_or(0)]),
        )
        .chain(faults.marks.iter().map(|m| m.at))
        .chain(report.violations.iter().map(|v| v.at_ns))
        .max()
        .unwrap_or(0);
    let end_ns = if last_ns == 0 {
        report.scenario.duration_ms.saturating_mul(1_000_000).max(1)
    } else {
        last_ns.saturating_add(last_ns / 50).max(1)
    };
    let axis = Axis { end_ns };
    let names = lane_names(report, faults.valid);
    let who: BTreeMap<String, usize> = names
        .iter()
        .filter(|(_, role)| matches!(*role, "client" | "probe"))
        .enumerate()
        .map(|(i, (name, _))| (name.clone(), i % WHO_COLOURS))
        .collect();
    let ctx = Ctx {
        axis: &axis,
        last_ns,
        faults: &faults,
        who: &who,
        watchdog: report.scenario.params.watchdog,
    };
    let mut lanes = Vec::new();
    let mut shapes = Vec::new();
    let mut top = AXIS_H;
    for (index, (node, role)) in names.iter().enumerate() {
        let mine: Vec<&Entry> = entries.iter().filter(|e| &e.node == node).collect();
        let at = Place { lane: index, top };
        let (height, caption) = match *role {
            "client" | "probe" => (
                client_lane(at, node, &mine, &ctx, &mut shapes),
                "lock as it believes",
            ),
            "resource" => (resource_lane(at, &mine, &ctx, &mut shapes), "who is inside"),
            _ => (
                server_lane(at, node, &mine, &ctx, &mut shapes),
                "lock keys it keeps",
            ),
        };
        fault_bands(at, height, node, &ctx, &mut shapes);
        lanes.push(Lane {
            node: node.clone(),
            role,
            top,
            height,
            caption,
        });
        top += height + LANE_GAP;
    }
    let violations = violation_marks(report, &axis, &lanes, &mut shapes);
    let clocks = clock_charts(report, &faults, last_ns);
    shapes.sort_by_key(|s| (s.lane, s.layer));
    let mut notes = Vec::new();
    notes.extend(faults.note.clone());
    if report.scenario.params.watchdog {
        notes.push(
            "the watchdog renews the lease while the client holds it: the validity bars show \
             each acquisition's first validity only"
                .to_string(),
        );
    }
    Layout {
        axis,
        lanes,
        shapes,
        violations,
        clocks,
        notes,
        height: top + 4.0,
    }
}

/// What every lane builder needs.
pub(super) struct Ctx<'a> {
    pub axis: &'a Axis,
    /// The last true time anything happened: where open intervals end.
    pub last_ns: u64,
    pub faults: &'a Faults,
    /// Colour index of each client.
    pub who: &'a BTreeMap<String, usize>,
    /// The lease is renewed while held, so a first validity says little.
    pub watchdog: bool,
}

impl Ctx<'_> {
    /// The colour class of `node` (`who-none` for a node that is not a client).
    pub fn who(&self, node: &str) -> String {
        self.who
            .get(node)
            .map_or("who-none".to_string(), |i| format!("who-{i}"))
    }

    /// A bar from `start` to `end`, at least [`MIN_W`] wide so that a short interval still shows.
    pub fn bar(&self, start: u64, end: u64, y: f64, h: f64) -> Form {
        let x = self.axis.x(start);
        let w = (self.axis.x(end.max(start)) - x).max(MIN_W);
        Form::Rect { x, y, w, h }
    }
}

/// A lane's index and top edge.
#[derive(Clone, Copy)]
pub(super) struct Place {
    pub lane: usize,
    pub top: f64,
}

/// A true time for people.
pub(super) fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// A history entry as the report writes it: the hover text of every mark.
pub(super) fn json(entry: &Entry) -> String {
    serde_json::to_string(entry).unwrap_or_else(|e| format!("entry {}: {e}", entry.index))
}

/// The lanes in a stable order: the scenario's nodes (clients, servers, the resource), then
/// any other node the history names (the liveness probe), by name.
fn lane_names(report: &Report, valid: bool) -> Vec<(String, &'static str)> {
    let mut names: Vec<String> = if valid {
        report.scenario.topology().names()
    } else {
        Vec::new()
    };
    let known: BTreeSet<String> = names.iter().cloned().collect();
    let others: BTreeSet<&str> = report
        .history
        .entries
        .iter()
        .map(|e| e.node.as_str())
        .filter(|n| !known.contains(*n))
        .collect();
    let mut others: Vec<&str> = others.into_iter().collect();
    // Without the scenario's order, clients first, then servers, then the resource and probe;
    // `client-10` after `client-9`.
    others.sort_by_key(|n| {
        let role = role_of(n);
        let rank = ["client", "server", "resource", "probe"]
            .iter()
            .position(|r| *r == role);
        let (stem, number) = match n.rsplit_once('-') {
            Some((stem, digits)) => (stem, digits.parse::<u64>().ok()),
            None => (*n, None),
        };
        (rank, stem, number, *n)
    });
    names.extend(others.into_iter().map(str::to_string));
    names
        .into_iter()
        .map(|n| {
            let role = role_of(&n);
            (n, role)
        })
        .collect()
}

fn role_of(node: &str) -> &'static str {
    if node.starts_with("client-") {
        "client"
    } else if node == "resource" {
        "resource"
    } else if node == "probe" {
        "probe"
    } else {
        "server"
    }
}

/// A marker across every lane per violation, and a ring around each entry that shows it.
fn violation_marks(
    report: &Report,
    axis: &Axis,
    lanes: &[Lane],
    shapes: &mut Vec<Shape>,
) -> Vec<ViolationMark> {
    let mut marks = Vec::new();
    for (index, v) in report.violations.iter().enumerate() {
        let kind = serde_json::to_value(v.kind)
            .ok()
            .and_then(|k| k.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{:?}", v.kind));
        marks.push(ViolationMark {
            index,
            kind,
            at_ns: v.at_ns,
            x: axis.x(v.at_ns),
            title: v.story.clone(),
        });
        for entry in v
            .entries
            .iter()
            .filter_map(|&i| report.history.entries.get(i))
        {
            let Some((lane, l)) = lanes.iter().enumerate().find(|(_, l)| l.node == entry.node)
            else {
                continue;
            };
            shapes.push(Shape {
                lane,
                layer: Layer::Mark,
                class: "violation-entry".to_string(),
                form: Form::Circle {
                    cx: axis.x(entry.true_ns),
                    cy: l.top + l.height - 2.0 - TICK_H / 2.0,
                    r: 6.0,
                },
                title: format!("shows violation {index}: {}\n{}", v.story, json(entry)),
                data: vec![
                    ("entry", entry.index.to_string()),
                    ("violation", index.to_string()),
                ],
                label: None,
            });
        }
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{History, Kind, Op, Phase};
    use crate::scenario::{Algorithm, Fault, Scenario};
    use crate::timeline::tests::{pause_report, quiet_report};

    fn band<'a>(l: &'a Layout, class: &str, node: &str) -> Vec<&'a Shape> {
        let lane = l.lanes.iter().position(|x| x.node == node).unwrap();
        l.shapes
            .iter()
            .filter(|s| s.lane == lane && s.class == class)
            .collect()
    }

    #[test]
    fn a_lane_per_node_clients_then_servers_then_resource_then_probe() {
        let l = layout(&pause_report());
        let names: Vec<(&str, &str)> = l.lanes.iter().map(|x| (x.node.as_str(), x.role)).collect();
        assert_eq!(
            names,
            [
                ("client-0", "client"),
                ("client-1", "client"),
                ("redis-0", "server"),
                ("resource", "resource"),
                ("probe", "probe"),
            ]
        );
        // Lanes stack without overlapping.
        for pair in l.lanes.windows(2) {
            assert!(pair[0].top + pair[0].height <= pair[1].top);
        }
    }

    #[test]
    fn a_pause_band_spans_the_pause_on_the_paused_nodes_lane_only() {
        let l = layout(&pause_report());
        let bands = band(&l, "fault-band pause", "client-0");
        assert_eq!(bands.len(), 1);
        let Form::Rect { x, w, .. } = bands[0].form else {
            panic!("a band is a rect");
        };
        let ns = |name: &str| -> u64 {
            let (_, v) = bands[0].data.iter().find(|(n, _)| *n == name).unwrap();
            v.parse().unwrap()
        };
        // Paused at 500 ms for 15 000 ms: the nemesis records each action within a
        // microsecond of its time.
        let (start, end) = (ns("start-ns"), ns("end-ns"));
        assert!((500_000_000..500_001_000).contains(&start), "{start}");
        assert!((15_500_000_000..15_500_001_000).contains(&end), "{end}");
        assert_eq!(x, l.axis.x(start));
        assert!((x + w - l.axis.x(end)).abs() < 1e-9);
        // 15 s of the axis, in proportion to the plot's width.
        assert!((w - PLOT_W * (end - start) as f64 / l.axis.end_ns as f64).abs() < 1e-9);
        assert!(band(&l, "fault-band pause", "client-1").is_empty());
    }

    #[test]
    fn the_paused_holder_believes_past_its_validity_and_the_resource_shows_the_overlap() {
        let l = layout(&pause_report());
        let client0 = l.lanes.iter().position(|x| x.node == "client-0").unwrap();
        let beyond: Vec<&Shape> = l
            .shapes
            .iter()
            .filter(|s| s.lane == client0 && s.class == "beyond-validity")
            .collect();
        assert_eq!(beyond.len(), 1, "client-0 held on past its 10 s validity");
        assert_eq!(band(&l, "overlap", "resource").len(), 1);
        assert_eq!(l.violations.len(), 1);
        assert_eq!(l.violations[0].kind, "mutual_exclusion");
    }

    #[test]
    fn no_violation_no_marker_and_no_overlap() {
        let l = layout(&quiet_report());
        assert!(l.violations.is_empty());
        assert!(band(&l, "overlap", "resource").is_empty());
        assert!(!l.shapes.iter().any(|s| s.class == "violation-entry"));
    }

    #[test]
    fn crash_restart_partition_and_clock_faults_are_drawn_where_they_struck() {
        let mut s = Scenario::new(Algorithm::Redlock);
        s.params.nodes = Some(3);
        s.params.restart_delay_ms = 4_000;
        s.duration_ms = 10_000;
        s.faults = vec![
            Fault::Crash {
                at_ms: 1_000,
                node: "redis-1".into(),
                scope: crate::scenario::CrashScope::Machine,
            },
            Fault::Restart {
                at_ms: 2_000,
                node: "redis-1".into(),
            },
            Fault::Partition {
                at_ms: 500,
                isolate: vec!["client-1".into(), "redis-2".into()],
                for_ms: 3_000,
                hold: false,
                from: None,
            },
            Fault::ClockJump {
                at_ms: 2_000,
                node: "redis-0".into(),
                by_ms: 5_000,
            },
            Fault::ClockDrift {
                at_ms: 0,
                node: "client-0".into(),
                rate: 1.5,
            },
        ];
        let report = Report::of_run(&s, &crate::outcome::Outcome::of(Default::default(), &s));
        let l = layout(&report);
        let crash = band(&l, "fault-band crash", "redis-1");
        assert_eq!(crash.len(), 1);
        // The restart waited out restart_delay_ms: down from 1 s to 5 s.
        assert_eq!(crash[0].data[2], ("end-ns", "5000000000".to_string()));
        assert!(crash[0].title.contains("restart_delay_ms = 4000 ms"));
        assert_eq!(band(&l, "fault-band partition", "client-1").len(), 1);
        assert_eq!(band(&l, "fault-band partition", "redis-2").len(), 1);
        assert!(band(&l, "fault-band partition", "redis-0").is_empty());
        assert_eq!(band(&l, "fault-mark clock-jump", "redis-0").len(), 1);
        assert_eq!(band(&l, "fault-mark clock-drift", "client-0").len(), 1);
        let charts: Vec<&str> = l.clocks.iter().map(|c| c.node.as_str()).collect();
        assert_eq!(charts, ["client-0", "redis-0"]);
        // redis-0's wall clock steps 5 s forward at 2 s and runs at true rate otherwise.
        let redis0 = &l.clocks[1].model;
        assert!(redis0.contains(&(2_000_000_000, 2_000_000_000)));
        assert!(redis0.contains(&(2_000_000_000, 7_000_000_000)));
    }

    #[test]
    fn an_invalid_scenario_still_renders_its_history_without_fault_bands() {
        let mut report = pause_report();
        report.scenario.faults.push(Fault::Pause {
            at_ms: 1,
            node: "client-99".into(),
            for_ms: 1,
        });
        let l = layout(&report);
        assert!(!l.shapes.iter().any(|s| s.class.starts_with("fault-")));
        assert!(l.notes.iter().any(|n| n.contains("invalid")));
        assert!(l.lanes.iter().any(|x| x.node == "resource"));
    }

    #[test]
    fn a_holder_that_never_exits_overlaps_nobody() {
        // client-0 entered and crashed inside (no exit); client-1 entered and left later. The
        // checker finds nothing, and the resource lane shows no overlap.
        let mut history = History::default();
        let access = |client: &str, phase: Phase| Op::Resource {
            client: client.into(),
            phase,
            token: format!("{client}-token"),
            fence: None,
            accepted: true,
            shared: false,
        };
        history.push(
            1_000,
            "resource",
            1_000,
            Kind::Observe,
            access("client-0", Phase::Enter),
        );
        history.push(
            5_000,
            "resource",
            5_000,
            Kind::Observe,
            access("client-1", Phase::Enter),
        );
        history.push(
            9_000,
            "resource",
            9_000,
            Kind::Observe,
            access("client-1", Phase::Exit),
        );
        let s = Scenario::new(Algorithm::SingleRedis);
        let report = Report::of_run(&s, &crate::outcome::Outcome::of(history, &s));
        assert!(report.violations.is_empty());
        let l = layout(&report);
        assert!(band(&l, "overlap", "resource").is_empty());
        assert_eq!(band(&l, "occupancy who-0 open", "resource").len(), 1);
        assert_eq!(band(&l, "occupancy who-1", "resource").len(), 1);
    }

    #[test]
    fn ticks_are_round_and_cover_the_axis() {
        let axis = Axis {
            end_ns: 31_000_000_000,
        };
        let ticks = axis.ticks();
        assert_eq!(ticks[1], 5_000_000_000);
        assert_eq!(*ticks.last().unwrap(), 30_000_000_000);
        assert_eq!(Axis { end_ns: 1 }.ticks(), [0, 1]);
    }
}
