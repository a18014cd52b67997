//! The markup: a laid-out report written as one HTML document with inline CSS, SVG and script.
//!
//! Every piece of text that comes from the report (node names, tokens, stories, history entries,
//! the replay command) goes through [`escape`], in element content and in attributes alike: a
//! report is data, and a key or a note may hold anything.

use super::layout::{ClockChart, Form, Lane, Layout, Shape, AXIS_H, WHO_COLOURS};
use crate::checker::ViolationKind;
use crate::report::{Report, RunWorld};
use crate::verdict::VerdictKind;
use std::fmt::Write;

/// `text` safe inside HTML element content and inside a quoted attribute.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate to one decimal, without a trailing `.0` or a negative zero, so that the same
/// layout always prints the same text.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_string();
    }
    let rounded = (v * 10.0).round() / 10.0;
    if rounded == 0.0 {
        "0".to_string()
    } else {
        format!("{rounded}")
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// The whole document.
pub(super) fn document(report: &Report, layout: &Layout) -> String {
    let mut out = String::with_capacity(32_768 + report.history.entries.len() * 512);
    head(&mut out, report);
    header(&mut out, report);
    out.push_str("<main>\n");
    timeline(&mut out, layout);
    legend(&mut out, report);
    violations(&mut out, report);
    clocks(&mut out, layout);
    schedule(&mut out, report);
    out.push_str("</main>\n");
    script(&mut out);
    out.push_str("</body>\n</html>\n");
    out
}

/// Whether the report's history holds a fold of refusals ([`crate::history::Recording`]).
fn folds(report: &Report) -> bool {
    report.history.entries.iter().any(|e| e.attempts() > 1)
}

fn head(out: &mut String, report: &Report) {
    let algorithm = report.scenario.algorithm.name();
    let verdict = match report.verdict {
        VerdictKind::Found => "violation",
        VerdictKind::NotFound => "no violation",
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n\
         <meta name=\"generator\" content=\"lockcheck {}\">\n\
         <meta name=\"lockcheck-rendered\" content=\"not rendered by a browser\">\n\
         <title>lockcheck: {} — {}</title>\n<style>\n{}{}</style>\n</head>\n<body>\n",
        escape(&report.lockcheck),
        escape(algorithm),
        verdict,
        css(),
        // Only a page that draws a fold of refusals styles one (the others stay as they were).
        if folds(report) {
            ".entry.folded { fill: #b0bec5; }\n"
        } else {
            ""
        }
    );
}

/// The page's style. Client colours come from a fixed palette by lane order.
fn css() -> String {
    const PALETTE: [&str; WHO_COLOURS] = [
        "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
    ];
    let mut css = String::from(
        "body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 0; \
         color: #212121; background: #fff; }\n\
         header, main { padding: 0 24px; }\n\
         header { border-bottom: 1px solid #ddd; padding-bottom: 8px; }\n\
         h1 { font-size: 20px; margin: 16px 0 8px; }\n\
         h2 { font-size: 16px; margin: 20px 0 8px; }\n\
         code, pre { font: 12px/1.4 ui-monospace, 'DejaVu Sans Mono', monospace; }\n\
         code { background: #f3f3f3; padding: 1px 4px; border-radius: 3px; }\n\
         pre { background: #f7f7f7; padding: 8px; overflow-x: auto; white-space: pre-wrap; \
         word-break: break-all; }\n\
         .verdict { font-size: 16px; margin: 8px 0; }\n\
         .badge { display: inline-block; padding: 1px 8px; border-radius: 3px; color: #fff; \
         font-weight: 700; margin-right: 6px; }\n\
         .verdict.unsafe .badge { background: #d50000; }\n\
         .verdict.liveness .badge { background: #ef6c00; }\n\
         .verdict.safe .badge { background: #2e7d32; }\n\
         dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; \
         margin: 8px 0; }\n\
         dl.facts dt { color: #616161; }\n\
         dl.facts dd { margin: 0; }\n\
         dl.facts ul { margin: 0; padding-left: 18px; }\n\
         .controls { margin: 8px 0; }\n\
         .scroll { overflow-x: auto; border: 1px solid #e0e0e0; }\n\
         #timeline-svg { display: block; width: 100%; height: auto; }\n\
         #hover-info { position: sticky; bottom: 0; margin: 0; min-height: 2.8em; max-height: \
         30vh; overflow: auto; background: #fffde7; border: 1px solid #e0e0e0; }\n\
         .notes { color: #616161; }\n\
         .legend { display: flex; flex-wrap: wrap; gap: 6px 18px; padding: 0; \
         list-style: none; }\n\
         .legend li { display: flex; align-items: center; gap: 6px; }\n\
         .legend svg { width: 28px; height: 14px; }\n\
         figure.clock-chart { display: inline-block; margin: 0 16px 16px 0; vertical-align: top; }\n\
         figure.clock-chart figcaption { max-width: 380px; color: #424242; }\n\
         svg text { font: 11px system-ui, sans-serif; fill: #424242; pointer-events: none; }\n\
         .lane-bg { fill: #f7f7f7; }\n\
         .lane-name { font-weight: 700; font-size: 12px; fill: #212121; }\n\
         .lane-caption { font-size: 10px; fill: #757575; }\n\
         .grid { stroke: #e0e0e0; stroke-width: 1; }\n\
         .tick-label { font-size: 10px; fill: #757575; }\n\
         .fault-band, .legend-band { stroke-width: 1; stroke-dasharray: 3 2; }\n\
         .fault-band.pause, .legend-pause { fill: rgba(91, 123, 213, 0.2); stroke: #5b7bd5; }\n\
         .fault-band.crash, .legend-crash { fill: rgba(33, 33, 33, 0.2); stroke: #212121; }\n\
         .fault-band.partition, .legend-partition { fill: rgba(230, 149, 0, 0.22); \
         stroke: #e69500; }\n\
         .fault-band.messages, .legend-messages { fill: rgba(201, 184, 0, 0.2); \
         stroke: #c9b800; }\n\
         .band-label { font-size: 10px; fill: #37474f; }\n\
         .fault-mark.clock-jump, .legend-clock-jump { fill: #8e24aa; }\n\
         .fault-mark.clock-drift, .legend-clock-drift { fill: #00897b; }\n\
         .fault-mark.failover { fill: #6d4c41; }\n\
         .fault-mark.skipped { fill: #9e9e9e; }\n\
         .belief, .occupancy, .legend-belief { stroke: rgba(0, 0, 0, 0.35); stroke-width: 0.5; }\n\
         .belief.open, .occupancy.open { stroke-dasharray: 4 2; stroke: #000; }\n\
         .belief.shared, .occupancy.shared { fill-opacity: 0.55; }\n\
         .beyond-validity, .legend-beyond { fill: url(#beyond-validity); stroke: #d50000; \
         stroke-width: 1; }\n\
         .validity, .legend-validity { fill: #424242; }\n\
         .op { fill: #cfd8dc; }\n\
         .op.ok { fill: #90a4ae; }\n\
         .op.fail { fill: #c62828; }\n\
         .op.info { fill: #f9a825; }\n\
         .op.pending { fill: #cfd8dc; stroke: #90a4ae; stroke-dasharray: 2 2; }\n\
         .entry { stroke: #b0bec5; stroke-width: 1; }\n\
         .entry.acquired { stroke: #2e7d32; stroke-width: 2; }\n\
         .entry.nemesis { stroke: #5b7bd5; stroke-width: 2; }\n\
         .entry.expired, .entry.lost { stroke: #e65100; stroke-width: 2; }\n\
         .entry.rejected, .legend-rejected { fill: #ef6c00; stroke: #bf360c; }\n\
         .key-held { fill-opacity: 0.75; }\n\
         .key-held.ended-expired, .key-held.ended-lost { stroke: #e65100; stroke-width: 1.5; }\n\
         .overlap, .legend-overlap { fill: rgba(213, 0, 0, 0.3); stroke: #d50000; \
         stroke-width: 1; }\n\
         .violation-line { stroke: #d50000; stroke-width: 2; }\n\
         .violation-flag { fill: #d50000; }\n\
         text.violation-label { fill: #fff; font-weight: 700; }\n\
         .violation-entry, .legend-violation-entry { fill: none; stroke: #d50000; \
         stroke-width: 2; }\n\
         .perfect-clock { stroke: #9e9e9e; stroke-dasharray: 4 3; fill: none; }\n\
         .clock-model { stroke: #8e24aa; stroke-width: 2; fill: none; }\n\
         .clock-reading { fill: #00897b; }\n\
         .axis-line { stroke: #616161; }\n\
         ",
    );
    for (i, colour) in PALETTE.iter().enumerate() {
        let _ = writeln!(css, ".who-{i} {{ fill: {colour}; }}");
    }
    css.push_str(".who-none { fill: #9e9e9e; }\n");
    css
}

fn header(out: &mut String, report: &Report) {
    let s = &report.scenario;
    let (class, badge) = match report.verdict {
        VerdictKind::Found if report.violations.iter().any(|v| v.kind.is_safety()) => {
            ("unsafe", "UNSAFE")
        }
        VerdictKind::Found => ("liveness", "VIOLATION"),
        VerdictKind::NotFound => ("safe", "NO VIOLATION"),
    };
    let verdict = serde_json::to_value(report.verdict)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<header>\n<h1>lockcheck: {} with {} client(s){}</h1>\n\
         <p id=\"verdict\" class=\"verdict {class}\" data-verdict=\"{}\">\
         <span class=\"badge\">{badge}</span>{}</p>\n",
        escape(s.algorithm.name()),
        s.clients,
        match report.world {
            RunWorld::Simulation => "",
            RunWorld::Real => ", against real servers",
        },
        escape(&verdict),
        escape(&report.summary)
    );
    let (verb, command) = match (report.world, report.replay_command.is_empty()) {
        (_, true) => ("Replay", "(the report was not written to a file)"),
        (RunWorld::Simulation, false) => ("Replay", report.replay_command.as_str()),
        (RunWorld::Real, false) => ("Rerun", report.replay_command.as_str()),
    };
    let _ = writeln!(
        out,
        "<p class=\"replay\">{verb}: <code id=\"replay-command\">{}</code></p>",
        escape(command)
    );
    out.push_str("<dl class=\"facts\">\n");
    let mut fact = |name: &str, value: String| {
        let _ = writeln!(out, "<dt>{}</dt><dd>{value}</dd>", escape(name));
    };
    fact("seed", report.seed.to_string());
    fact(
        "world",
        match report.world {
            RunWorld::Simulation => "simulation (replays byte for byte)".to_string(),
            RunWorld::Real => {
                "real servers (not byte-replayable: the machine decided the interleaving)"
                    .to_string()
            }
        },
    );
    let schedule = if report.schedule.is_empty() {
        "no faults".to_string()
    } else {
        let items: Vec<String> = report
            .schedule
            .iter()
            .map(|line| format!("<li>{}</li>", escape(line)))
            .collect();
        format!("<ul id=\"schedule-list\">{}</ul>", items.join(""))
    };
    fact("schedule", schedule);
    fact(
        "run",
        format!(
            "{} client(s), duration {} ms, {} history entries, history hash <code>{}</code>",
            s.clients,
            s.duration_ms,
            report.history.entries.len(),
            escape(&report.history_hash)
        ),
    );
    if let Some(search) = &report.search {
        fact(
            "found by",
            format!(
                "explore (search seed {}): after {} case(s), shrunk in {} run(s)",
                search.seed, search.cases, search.shrink_runs
            ),
        );
    }
    fact(
        "written by",
        format!("lockcheck {}", escape(&report.lockcheck)),
    );
    out.push_str("</dl>\n</header>\n");
}

fn timeline(out: &mut String, layout: &Layout) {
    let width = layout.width();
    let _ = write!(
        out,
        "<section id=\"timeline\">\n<h2>Timeline (true time)</h2>\n\
         <div class=\"controls\"><label>zoom <input id=\"zoom\" type=\"range\" min=\"1\" \
         max=\"8\" step=\"0.5\" value=\"1\"></label></div>\n<div class=\"scroll\">\n\
         <svg id=\"timeline-svg\" width=\"{w}\" \
         height=\"{h}\" viewBox=\"0 0 {w} {h}\" data-end-ns=\"{}\">\n\
         <defs><pattern id=\"beyond-validity\" width=\"6\" height=\"6\" \
         patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
         <rect width=\"6\" height=\"6\" fill=\"#ffebee\"/>\
         <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d50000\" stroke-width=\"2\"/>\
         </pattern></defs>\n",
        layout.axis.end_ns,
        w = num(width),
        h = num(layout.height),
    );
    // The axis: a grid line and a label per round time.
    out.push_str("<g id=\"axis\">\n");
    for t in layout.axis.ticks() {
        let x = num(layout.axis.x(t));
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>\
             <text class=\"tick-label\" x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{} s</text>",
            num(AXIS_H - 6.0),
            num(layout.height),
            num(AXIS_H - 9.0),
            t as f64 / 1e9
        );
    }
    out.push_str("</g>\n<g id=\"lanes\">\n");
    let mut shapes = layout.shapes.iter().peekable();
    for (index, lane) in layout.lanes.iter().enumerate() {
        lane_open(out, lane, width);
        while let Some(s) = shapes.next_if(|s| s.lane == index) {
            shape(out, s);
        }
        out.push_str("</g>\n");
    }
    out.push_str("</g>\n");
    for v in &layout.violations {
        let label = format!("✖ {}", v.kind);
        let flag_w = label.chars().count() as f64 * 6.6 + 10.0;
        // The flag hangs right of the line, or left of it near the right edge.
        let flag_x = if v.x + flag_w > width {
            v.x - flag_w
        } else {
            v.x
        };
        let _ = writeln!(
            out,
            "<g class=\"violation\" id=\"violation-{}\" data-kind=\"{}\" data-at-ns=\"{}\">\
             <title>{}</title>\
             <line class=\"violation-line\" x1=\"{x}\" y1=\"2\" x2=\"{x}\" y2=\"{}\"/>\
             <rect class=\"violation-flag\" x=\"{}\" y=\"2\" width=\"{}\" height=\"15\"/>\
             <text class=\"violation-label\" x=\"{}\" y=\"13\">{}</text></g>",
            v.index,
            escape(&v.kind),
            v.at_ns,
            escape(&format!(
                "violation {} at {}: {}",
                v.index,
                ms(v.at_ns),
                v.title
            )),
            num(layout.height),
            num(flag_x),
            num(flag_w),
            num(flag_x + 5.0),
            escape(&label),
            x = num(v.x),
        );
    }
    out.push_str("</svg>\n</div>\n");
    out.push_str(
        "<pre id=\"hover-info\">Hover over a mark to see what it is and its history entries.\
         </pre>\n",
    );
    if !layout.notes.is_empty() {
        out.push_str("<ul class=\"notes\">\n");
        for note in &layout.notes {
            let _ = writeln!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn lane_open(out: &mut String, lane: &Lane, width: f64) {
    let _ = writeln!(
        out,
        "<g class=\"lane\" data-lane=\"{n}\" data-role=\"{}\">\
         <rect class=\"lane-bg\" x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\"/>\
         <text class=\"lane-name\" x=\"8\" y=\"{}\">{n}</text>\
         <text class=\"lane-caption\" x=\"8\" y=\"{}\">{}</text>",
        lane.role,
        num(lane.top),
        num(width),
        num(lane.height),
        num(lane.top + 16.0),
        num(lane.top + 29.0),
        escape(lane.caption),
        n = escape(&lane.node),
    );
}

fn shape(out: &mut String, s: &Shape) {
    let mut attrs = format!("class=\"{}\"", escape(&s.class));
    for (name, value) in &s.data {
        let _ = write!(attrs, " data-{name}=\"{}\"", escape(value));
    }
    let title = escape(&s.title);
    match &s.form {
        Form::Rect { x, y, w, h } => {
            let _ = writeln!(
                out,
                "<rect {attrs} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{title}</title></rect>",
                num(*x),
                num(*y),
                num(*w),
                num(*h)
            );
            if let Some(label) = &s.label {
                // Only where the text fits inside the band.
                if label.chars().count() as f64 * 5.6 + 8.0 <= *w {
                    let _ = writeln!(
                        out,
                        "<text class=\"band-label\" x=\"{}\" y=\"{}\">{}</text>",
                        num(x + 4.0),
                        num(y + h - 4.0),
                        escape(label)
                    );
                }
            }
        }
        Form::Line { x, y1, y2 } => {
            let _ = writeln!(
                out,
                "<line {attrs} x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"><title>{title}</title></line>",
                num(*y1),
                num(*y2),
                x = num(*x)
            );
        }
        Form::Circle { cx, cy, r } => {
            let _ = writeln!(
                out,
                "<circle {attrs} cx=\"{}\" cy=\"{}\" r=\"{}\"><title>{title}</title></circle>",
                num(*cx),
                num(*cy),
                num(*r)
            );
        }
        Form::Polygon(points) => {
            let points: Vec<String> = points
                .iter()
                .map(|(x, y)| format!("{},{}", num(*x), num(*y)))
                .collect();
            let _ = writeln!(
                out,
                "<polygon {attrs} points=\"{}\"><title>{title}</title></polygon>",
                points.join(" ")
            );
        }
    }
}

fn legend(out: &mut String, report: &Report) {
    const ITEMS: [(&str, &str); 12] = [
        ("legend-belief who-0", "a client believes it holds the lock"),
        ("legend-validity", "the validity it was given"),
        ("legend-beyond", "it still believes, past its validity"),
        (
            "legend-belief who-1",
            "server: a lock key; resource: who is inside",
        ),
        ("legend-overlap", "two clients inside at once"),
        ("legend-violation-entry", "an entry that shows a violation"),
        ("legend-rejected", "an access the fence rejected"),
        ("legend-band legend-pause", "pause"),
        ("legend-band legend-crash", "crash → restart"),
        ("legend-band legend-partition", "partition"),
        ("legend-band legend-messages", "message loss or delay"),
        (
            "legend-clock-jump",
            "clock jump (▼) / drift: see the clocks",
        ),
    ];
    out.push_str("<section id=\"legend\">\n<h2>Legend</h2>\n<ul class=\"legend\">\n");
    for (class, text) in ITEMS {
        let _ = writeln!(
            out,
            "<li><svg viewBox=\"0 0 28 14\"><rect class=\"{class}\" x=\"1\" y=\"1\" \
             width=\"26\" height=\"12\"/></svg>{}</li>",
            escape(text)
        );
    }
    out.push_str(
        "</ul>\n<p class=\"notes\">On each lane: the top row is the client's operations \
         (acquire, access, release: dark when they returned ok, red when they failed, amber when \
         the outcome is unknown), the small ticks at the bottom its observations (attempts, key \
         changes, faults). The violation marker stands at the true time the violation became \
         certain.",
    );
    if folds(report) {
        out.push_str(
            " A thin band among the ticks is a client's identical refused attempts in a row, \
             folded into one entry from the first to the last (hover it for the count).",
        );
    }
    out.push_str("</p>\n</section>\n");
}

fn violations(out: &mut String, report: &Report) {
    out.push_str("<section id=\"violations\">\n<h2>Violations</h2>\n");
    if report.violations.is_empty() {
        out.push_str("<p>None in this run.</p>\n");
    } else {
        out.push_str("<ol start=\"0\">\n");
        for v in &report.violations {
            let kind = match v.kind {
                ViolationKind::MutualExclusion => "mutual exclusion",
                ViolationKind::ForeignRelease => "foreign release",
                ViolationKind::ForeignExtend => "foreign extend",
                ViolationKind::Deadlock => "deadlock",
                ViolationKind::FreedWhileHeld => "freed while held",
                ViolationKind::FifoOrder => "FIFO order",
                ViolationKind::Stuck => "stuck waiter",
            };
            let entries: Vec<String> = v
                .entries
                .iter()
                .filter_map(|&i| report.history.entries.get(i))
                .map(|e| serde_json::to_string(e).unwrap_or_default())
                .collect();
            let _ = writeln!(
                out,
                "<li><strong>{}</strong> at {}: {}<br>clients: {}; tokens: {}\
                 <pre>{}</pre></li>",
                escape(kind),
                ms(v.at_ns),
                escape(&v.story),
                escape(&v.clients.join(", ")),
                escape(&v.tokens.join(", ")),
                escape(&entries.join("\n"))
            );
        }
        out.push_str("</ol>\n");
    }
    if !report.stale_accesses.is_empty() {
        out.push_str(
            "<h2>Stale accesses the fencing resource rejected (the fence working)</h2>\n<ul>\n",
        );
        for s in &report.stale_accesses {
            let _ = writeln!(
                out,
                "<li>{} with fencing token {} at {} (entry {})</li>",
                escape(&s.client),
                s.fence.map_or("none".to_string(), |f| f.to_string()),
                ms(s.at_ns),
                s.entry
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn clocks(out: &mut String, layout: &Layout) {
    out.push_str("<section id=\"clocks\">\n<h2>Clocks</h2>\n");
    if layout.clocks.is_empty() {
        out.push_str("<p>No clock was moved: every node read true time.</p>\n");
    }
    for chart in &layout.clocks {
        clock_chart(out, chart);
    }
    out.push_str("</section>\n");
}

/// One node's local clock against true time, drawn as its error (local − true) so that a drift
/// is a slope and a jump a step, where a plot of local against true would hide a 1 % drift in
/// the diagonal: the schedule's model as a line, the readings its history entries recorded as
/// dots, a perfect clock dashed at zero.
fn clock_chart(out: &mut String, chart: &ClockChart) {
    const W: f64 = 380.0;
    const H: f64 = 200.0;
    const LEFT: f64 = 70.0;
    const BOTTOM: f64 = 24.0;
    const TOP: f64 = 10.0;
    const RIGHT: f64 = 10.0;
    let off = |t: u64, l: i64| l.saturating_sub(t.min(i64::MAX as u64) as i64);
    let end_true = chart.model.last().map_or(1, |p| p.0).max(1);
    let offsets = chart
        .model
        .iter()
        .map(|&(t, l)| off(t, l))
        .chain(chart.readings.iter().map(|&(t, l, _)| off(t, l)))
        .chain([0]);
    let (lo, hi) = offsets.fold((0i64, 0i64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo == hi {
        (-1_000_000, 1_000_000)
    } else {
        (lo, hi)
    };
    let span = hi.saturating_sub(lo).max(1) as f64;
    let x = |t: u64| LEFT + (W - LEFT - RIGHT) * (t.min(end_true) as f64 / end_true as f64);
    let y = |o: i64| H - BOTTOM - (H - BOTTOM - TOP) * ((o.saturating_sub(lo)) as f64 / span);
    let node = escape(&chart.node);
    let _ = write!(
        out,
        "<figure class=\"clock-chart\" data-node=\"{node}\">\n\
         <svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n\
         <line class=\"axis-line\" x1=\"{l}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\"/>\
         <line class=\"axis-line\" x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{b}\"/>\n\
         <text x=\"{l}\" y=\"{}\">0 s</text>\
         <text x=\"{r}\" y=\"{}\" text-anchor=\"end\">true time {:.1} s</text>\n\
         <text x=\"{}\" y=\"{b}\" text-anchor=\"end\">{:+.1} ms</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:+.1} ms</text>\n",
        num(H - 8.0),
        num(H - 8.0),
        end_true as f64 / 1e9,
        num(LEFT - 4.0),
        lo as f64 / 1e6,
        num(LEFT - 4.0),
        num(TOP + 8.0),
        hi as f64 / 1e6,
        w = num(W),
        h = num(H),
        l = num(LEFT),
        r = num(W - RIGHT),
        t = num(TOP),
        b = num(H - BOTTOM),
    );
    let _ = writeln!(
        out,
        "<line class=\"perfect-clock\" x1=\"{}\" y1=\"{z}\" x2=\"{}\" y2=\"{z}\">\
         <title>a perfect clock: local = true</title></line>",
        num(x(0)),
        num(x(end_true)),
        z = num(y(0)),
    );
    let points: Vec<String> = chart
        .model
        .iter()
        .map(|&(t, l)| format!("{},{}", num(x(t)), num(y(off(t, l)))))
        .collect();
    let _ = writeln!(
        out,
        "<polyline class=\"clock-model\" points=\"{}\"><title>{node}'s wall clock as the \
         schedule moves it: {}</title></polyline>",
        points.join(" "),
        escape(&chart.changes.join("; "))
    );
    for (t, l, title) in &chart.readings {
        let _ = writeln!(
            out,
            "<circle class=\"clock-reading\" cx=\"{}\" cy=\"{}\" r=\"1.8\"><title>{}</title></circle>",
            num(x(*t)),
            num(y(off(*t, *l))),
            escape(title)
        );
    }
    let final_offset = chart.model.last().map_or(0, |&(t, l)| off(t, l));
    let _ = writeln!(
        out,
        "</svg>\n<figcaption><strong>{node}</strong>: how far its wall clock reads from true \
         time (line: the schedule's model; dots: the local times its history entries recorded). \
         {}; at the end it is {:+.1} ms off.</figcaption>\n</figure>",
        escape(&chart.changes.join("; ")),
        final_offset as f64 / 1e6
    );
}

fn schedule(out: &mut String, report: &Report) {
    let a = &report.availability;
    let _ = writeln!(
        out,
        "<section id=\"availability\">\n<h2>Availability</h2>\n<p>Acquisition attempts that \
         acquired: {} of {} with every server reachable, {} of {} with a minority unreachable, \
         {} of {} with a majority unreachable.</p>\n</section>",
        a.all_reachable.acquired,
        a.all_reachable.attempts,
        a.minority_unreachable.acquired,
        a.minority_unreachable.attempts,
        a.majority_unreachable.acquired,
        a.majority_unreachable.attempts
    );
    let scenario = serde_json::to_string_pretty(&report.scenario).unwrap_or_default();
    let _ = writeln!(
        out,
        "<section id=\"scenario\">\n<h2>Scenario (runnable as is: <code>lockcheck run \
         FILE</code>)</h2>\n<pre>{}</pre>\n</section>",
        escape(&scenario)
    );
}

/// The page's only script: the hover panel, the zoom, and a summary of what the browser laid
/// out (counts of lanes, bands and markers, the violation marker's box), written into the
/// `lockcheck-rendered` meta element so that a headless browser's DOM dump proves the SVG was
/// rendered, not merely parsed.
fn script(out: &mut String) {
    out.push_str(
        r#"<script>
(function () {
  var svg = document.getElementById('timeline-svg');
  var info = document.getElementById('hover-info');
  function titleOf(el) {
    for (; el && el.nodeType === 1; el = el.parentNode) {
      var t = el.querySelector(':scope > title');
      if (t) return t.textContent;
    }
    return null;
  }
  document.addEventListener('mouseover', function (event) {
    var text = titleOf(event.target);
    if (text) info.textContent = text;
  });
  var zoom = document.getElementById('zoom');
  zoom.addEventListener('input', function () {
    svg.style.width = (100 * zoom.value) + '%';
  });
  function count(selector) { return document.querySelectorAll(selector).length; }
  function box(el) {
    if (!el) return 'none';
    var b = el.getBBox();
    return Math.round(b.width) + 'x' + Math.round(b.height);
  }
  var marker = document.querySelector('.violation');
  var shown = marker ? marker.getBoundingClientRect() : null;
  document.querySelector('meta[name="lockcheck-rendered"]').setAttribute('content', [
    'lanes=' + count('[data-lane]'),
    'fault-bands=' + count('.fault-band'),
    'pause=' + count('.fault-band.pause'),
    'crash=' + count('.fault-band.crash'),
    'partition=' + count('.fault-band.partition'),
    'clock-marks=' + count('.fault-mark'),
    'violations=' + count('.violation'),
    'violation-box=' + box(marker),
    'violation-on-screen=' + (shown ? Math.round(shown.width) + 'x' + Math.round(shown.height) : 'none'),
    'timeline-box=' + box(svg.getElementById('lanes')),
    'clock-charts=' + count('.clock-chart polyline')
  ].join(';'));
})();
</script>
"#,
    );
}
