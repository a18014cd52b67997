//! What each lane shows: a client's operations and the lock as it believes it holds it, a
//! server's lock keys, the resource's occupants; and on every lane its observations as ticks.

use super::layout::{json, ms, Ctx, Form, Layer, Place, Shape, TICK_H};
use crate::history::{Entry, KeyChange, Kind, Op, Phase};
use std::collections::BTreeMap;

/// Height of a row of stacked bars.
const ROW_H: f64 = 12.0;
/// Rows of stacked bars a lane grows to at most; more overlap in the last row.
const MAX_ROWS: usize = 6;

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Invoke => "invoke",
        Kind::Ok => "ok",
        Kind::Fail => "fail",
        Kind::Info => "info",
        Kind::Observe => "observe",
    }
}

/// A tick for an observation, in the lane's bottom row; hovering it shows the entry.
fn tick(at: Place, height: f64, entry: &Entry, ctx: &Ctx, shapes: &mut Vec<Shape>) {
    let mut class = format!("entry {}", entry.op.name());
    match &entry.op {
        Op::Attempt { acquired: true, .. } => class.push_str(" acquired"),
        Op::Resource {
            accepted: false, ..
        } => class.push_str(" rejected"),
        Op::Key { change, .. } => class.push_str(&format!(" {}", change_name(*change))),
        _ => {}
    }
    let x = ctx.axis.x(entry.true_ns);
    let bottom = at.top + height - 2.0;
    let form = if entry.attempts() > 1 {
        // A fold of refusals: a band from the first to the last of them.
        class.push_str(" folded");
        ctx.bar(
            entry.true_ns,
            entry.end_ns(),
            bottom - TICK_H / 2.0,
            TICK_H / 2.0,
        )
    } else if class.ends_with("rejected") {
        // The fence turning a stale holder away: bigger than a tick, so it is seen.
        Form::Polygon(vec![
            (x, bottom - 10.0),
            (x - 5.0, bottom),
            (x + 5.0, bottom),
        ])
    } else {
        Form::Line {
            x,
            y1: bottom - TICK_H,
            y2: bottom,
        }
    };
    shapes.push(Shape {
        lane: at.lane,
        layer: Layer::Mark,
        class,
        form,
        title: json(entry),
        data: vec![("entry", entry.index.to_string())],
        label: None,
    });
}

fn change_name(change: KeyChange) -> &'static str {
    match change {
        KeyChange::Set => "set",
        KeyChange::Deleted => "deleted",
        KeyChange::Expired => "expired",
        KeyChange::ExpiryChanged => "expiry-changed",
        KeyChange::Lost => "lost",
        KeyChange::FieldSet => "field-set",
        KeyChange::FieldRemoved => "field-removed",
        KeyChange::ListPushed => "list-pushed",
        KeyChange::ListRemoved => "list-removed",
    }
}

/// The lock a client believes it holds, from its acquisition's `ok` to its release's return.
struct Belief<'a> {
    start: &'a Entry,
    token: String,
    valid_ns: Option<u64>,
    shared: bool,
}

/// A client's (or the probe's) lane: its operations (top row), the lock as it believes it holds
/// it (middle), the validity it was given (thin, below), and its observations (bottom). Returns
/// the lane's height.
pub(super) fn client_lane(
    at: Place,
    node: &str,
    mine: &[&Entry],
    ctx: &Ctx,
    shapes: &mut Vec<Shape>,
) -> f64 {
    const HEIGHT: f64 = 50.0;
    let ops_y = at.top + 4.0;
    let belief_y = at.top + 15.0;
    let validity_y = at.top + 31.0;
    let who = ctx.who(node);
    let mut pending: Option<&Entry> = None;
    let mut depth: u32 = 0;
    let mut belief: Option<Belief> = None;
    let mut beliefs: Vec<(Belief, u64, Option<&Entry>)> = Vec::new();
    let op_shape = |start: &Entry, end: Option<&Entry>, until: u64| {
        let outcome = end.map_or("pending", |e| kind_name(e.kind));
        let mut class = format!("op {} {outcome}", start.op.name());
        if let Op::Access { phase, .. } = &start.op {
            class.push_str(match phase {
                Phase::Enter => " enter",
                Phase::Exit => " exit",
            });
        }
        let mut title = format!(
            "{node}: {} {} ({} → {})\n{}",
            start.op.name(),
            outcome,
            ms(start.true_ns),
            ms(until),
            json(start)
        );
        if let Some(e) = end {
            title.push('\n');
            title.push_str(&json(e));
        }
        Shape {
            lane: at.lane,
            layer: Layer::Bar,
            class,
            form: ctx.bar(start.true_ns, until, ops_y, 8.0),
            title,
            data: vec![
                ("entry", start.index.to_string()),
                ("start-ns", start.true_ns.to_string()),
                ("end-ns", until.to_string()),
            ],
            label: None,
        }
    };
    for &e in mine {
        match e.kind {
            Kind::Observe => tick(at, HEIGHT, e, ctx, shapes),
            Kind::Invoke => {
                if let Some(p) = pending.replace(e) {
                    // The previous operation never completed (its node crashed, say).
                    shapes.push(op_shape(p, None, e.true_ns));
                }
            }
            Kind::Ok | Kind::Fail | Kind::Info => {
                let start = pending.take_if(|p| p.op.name() == e.op.name()).unwrap_or(e);
                shapes.push(op_shape(start, Some(e), e.true_ns));
                match &e.op {
                    Op::Acquire {
                        token,
                        valid_ns,
                        shared,
                        ..
                    } if e.kind == Kind::Ok => {
                        depth += 1;
                        if belief.is_none() {
                            belief = Some(Belief {
                                start: e,
                                token: token.clone().unwrap_or_default(),
                                valid_ns: *valid_ns,
                                shared: *shared,
                            });
                        }
                    }
                    Op::Release { .. } => {
                        // A reentrant lock is held until its outermost release.
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            if let Some(b) = belief.take() {
                                beliefs.push((b, e.true_ns, Some(e)));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some(p) = pending {
        let until = ctx
            .faults
            .crash_after(node, p.true_ns)
            .unwrap_or(ctx.last_ns);
        shapes.push(op_shape(p, None, until));
    }
    if let Some(b) = belief {
        // A crash wipes the client's memory of its lock; otherwise it held on to the end.
        let until = ctx
            .faults
            .crash_after(node, b.start.true_ns)
            .unwrap_or(ctx.last_ns);
        beliefs.push((b, until, None));
    }
    for (b, until, end) in beliefs {
        let start = b.start.true_ns;
        let mut class = format!("belief {who}");
        if b.shared {
            class.push_str(" shared");
        }
        if end.is_none() {
            class.push_str(" open");
        }
        let mut title = format!(
            "{node} believes it holds the lock{} (token {}) from {} to {}\n{}",
            if b.shared { " (shared)" } else { "" },
            b.token,
            ms(start),
            ms(until),
            json(b.start)
        );
        if let Some(e) = end {
            title.push('\n');
            title.push_str(&json(e));
        }
        shapes.push(Shape {
            lane: at.lane,
            layer: Layer::Bar,
            class,
            form: ctx.bar(start, until, belief_y, 14.0),
            title,
            data: vec![
                ("start-ns", start.to_string()),
                ("end-ns", until.to_string()),
                ("token", b.token.clone()),
            ],
            label: None,
        });
        let Some(valid_ns) = b.valid_ns else {
            continue;
        };
        // The validity is counted on the client's monotonic clock, which runs at its rate.
        let rate = ctx.faults.rate_at(node, start);
        let valid_true = if rate > 0.0 {
            (valid_ns as f64 / rate).min(u64::MAX as f64) as u64
        } else {
            u64::MAX
        };
        let valid_until = start.saturating_add(valid_true);
        shapes.push(Shape {
            lane: at.lane,
            layer: Layer::Bar,
            class: "validity".to_string(),
            form: ctx.bar(start, valid_until, validity_y, 4.0),
            title: format!(
                "{node}: the validity it computed, {} by its monotonic clock: until {} true time",
                ms(valid_ns),
                if valid_until > ctx.axis.end_ns {
                    "past the end of the run".to_string()
                } else {
                    ms(valid_until)
                }
            ),
            data: vec![
                ("start-ns", start.to_string()),
                ("end-ns", valid_until.to_string()),
            ],
            label: None,
        });
        if !ctx.watchdog && valid_until < until {
            shapes.push(Shape {
                lane: at.lane,
                layer: Layer::Bar,
                class: "beyond-validity".to_string(),
                form: ctx.bar(valid_until, until, belief_y, 14.0),
                title: format!(
                    "{node} went on believing it held the lock for {} after its validity ended \
                     at {}",
                    ms(until - valid_until),
                    ms(valid_until)
                ),
                data: vec![
                    ("start-ns", valid_until.to_string()),
                    ("end-ns", until.to_string()),
                ],
                label: None,
            });
        }
    }
    HEIGHT
}

/// Assigns each interval the first row where it fits (greedy, in start order), at most
/// [`MAX_ROWS`] rows; returns each interval's row and the number of rows.
fn pack(intervals: &[(u64, u64)]) -> (Vec<usize>, usize) {
    let mut row_ends: Vec<u64> = Vec::new();
    let mut rows = Vec::with_capacity(intervals.len());
    for &(start, end) in intervals {
        let row = match row_ends.iter().position(|&e| e <= start) {
            Some(r) => r,
            None if row_ends.len() < MAX_ROWS => {
                row_ends.push(0);
                row_ends.len() - 1
            }
            None => MAX_ROWS - 1,
        };
        row_ends[row] = row_ends[row].max(end);
        rows.push(row);
    }
    (rows, row_ends.len().max(1))
}

/// A key's (or hash field's) life on a server, from the write to its removal.
struct Held<'a> {
    key: String,
    field: Option<String>,
    value: Option<String>,
    by: Option<String>,
    start: &'a Entry,
    end: Option<&'a Entry>,
}

/// A server's lane: each lock key (or hash field) from its write to its deletion, expiry, loss
/// or overwrite, coloured by the client that wrote it, stacked where they overlap; and its
/// observations. Returns the lane's height.
pub(super) fn server_lane(
    at: Place,
    node: &str,
    mine: &[&Entry],
    ctx: &Ctx,
    shapes: &mut Vec<Shape>,
) -> f64 {
    let mut held: Vec<Held> = Vec::new();
    let mut open: BTreeMap<(String, Option<String>), usize> = BTreeMap::new();
    for &e in mine {
        let Op::Key {
            key,
            change,
            field,
            value,
            by,
            ..
        } = &e.op
        else {
            continue;
        };
        let mut close = |open: &mut BTreeMap<(String, Option<String>), usize>,
                         field: Option<&Option<String>>| {
            open.retain(|(k, fld), i| {
                let ends = k == key && field.is_none_or(|field| fld == field);
                if ends {
                    held[*i].end = Some(e);
                }
                !ends
            });
        };
        let starts = match change {
            KeyChange::Set => {
                close(&mut open, None);
                true
            }
            KeyChange::FieldSet => !open.contains_key(&(key.clone(), field.clone())),
            KeyChange::FieldRemoved => {
                close(&mut open, Some(field));
                false
            }
            KeyChange::Deleted | KeyChange::Expired | KeyChange::Lost => {
                close(&mut open, None);
                false
            }
            KeyChange::ExpiryChanged | KeyChange::ListPushed | KeyChange::ListRemoved => false,
        };
        if starts {
            let field = if *change == KeyChange::FieldSet {
                field.clone()
            } else {
                None
            };
            open.insert((key.clone(), field.clone()), held.len());
            held.push(Held {
                key: key.clone(),
                field,
                value: value.clone(),
                by: by.clone(),
                start: e,
                end: None,
            });
        }
    }
    let span = |h: &Held| (h.start.true_ns, h.end.map_or(ctx.last_ns, |e| e.true_ns));
    let intervals: Vec<(u64, u64)> = held.iter().map(span).collect();
    let (rows, count) = pack(&intervals);
    let height = 6.0 + count as f64 * ROW_H + TICK_H + 4.0;
    for ((h, &(start, end)), row) in held.iter().zip(&intervals).zip(rows) {
        let how = match h.end.map(|e| &e.op) {
            Some(Op::Key { change, .. }) => change_name(*change),
            _ => "still there",
        };
        let name = match &h.field {
            Some(field) => format!("{}[{field}]", h.key),
            None => h.key.clone(),
        };
        let mut title = format!(
            "{node}: {name} = {} written by {} at {}; {how} at {}\n{}",
            h.value.as_deref().unwrap_or("?"),
            h.by.as_deref().unwrap_or("?"),
            ms(start),
            ms(end),
            json(h.start)
        );
        if let Some(e) = h.end {
            title.push('\n');
            title.push_str(&json(e));
        }
        shapes.push(Shape {
            lane: at.lane,
            layer: Layer::Bar,
            class: format!(
                "key-held {} ended-{}",
                ctx.who(h.by.as_deref().unwrap_or("")),
                how.replace(' ', "-")
            ),
            form: ctx.bar(start, end, at.top + 4.0 + row as f64 * ROW_H, ROW_H - 2.0),
            title,
            data: vec![
                ("start-ns", start.to_string()),
                ("end-ns", end.to_string()),
                ("key", h.key.clone()),
            ],
            label: None,
        });
    }
    for &e in mine.iter().filter(|e| e.kind == Kind::Observe) {
        tick(at, height, e, ctx, shapes);
    }
    height
}

/// A critical section as the resource saw it: an accepted enter to the accepted exit.
struct Inside<'a> {
    client: String,
    token: String,
    shared: bool,
    enter: &'a Entry,
    exit: Option<&'a Entry>,
}

/// The resource's lane: who was inside (an accepted enter to the accepted exit), stacked where
/// sections overlap, with every overlap that breaks mutual exclusion highlighted, and its
/// observations (rejected stale accesses larger). Returns the lane's height.
pub(super) fn resource_lane(at: Place, mine: &[&Entry], ctx: &Ctx, shapes: &mut Vec<Shape>) -> f64 {
    let mut sections: Vec<Inside> = Vec::new();
    let mut open: BTreeMap<(String, String), usize> = BTreeMap::new();
    for &e in mine {
        let Op::Resource {
            client,
            phase,
            token,
            accepted: true,
            shared,
            ..
        } = &e.op
        else {
            continue;
        };
        let key = (client.clone(), token.clone());
        match phase {
            Phase::Enter => {
                open.insert(key, sections.len());
                sections.push(Inside {
                    client: client.clone(),
                    token: token.clone(),
                    shared: *shared,
                    enter: e,
                    exit: None,
                });
            }
            Phase::Exit => {
                if let Some(i) = open.remove(&key) {
                    sections[i].exit = Some(e);
                }
            }
        }
    }
    let intervals: Vec<(u64, u64)> = sections
        .iter()
        .map(|s| (s.enter.true_ns, s.exit.map_or(ctx.last_ns, |e| e.true_ns)))
        .collect();
    let (rows, count) = pack(&intervals);
    let rows_h = count as f64 * (ROW_H + 2.0);
    let height = 6.0 + rows_h + TICK_H + 6.0;
    for ((s, &(start, end)), row) in sections.iter().zip(&intervals).zip(rows) {
        let mut class = format!("occupancy {}", ctx.who(&s.client));
        if s.shared {
            class.push_str(" shared");
        }
        if s.exit.is_none() {
            class.push_str(" open");
        }
        let mut title = format!(
            "{} inside (token {}) from {} to {}\n{}",
            s.client,
            s.token,
            ms(start),
            if s.exit.is_some() {
                ms(end)
            } else {
                "the end (no exit was accepted)".to_string()
            },
            json(s.enter)
        );
        if let Some(e) = s.exit {
            title.push('\n');
            title.push_str(&json(e));
        }
        shapes.push(Shape {
            lane: at.lane,
            layer: Layer::Bar,
            class,
            form: ctx.bar(start, end, at.top + 4.0 + row as f64 * (ROW_H + 2.0), ROW_H),
            title,
            data: vec![
                ("client", s.client.clone()),
                ("start-ns", start.to_string()),
                ("end-ns", end.to_string()),
            ],
            label: None,
        });
    }
    // Two sections inside at once, unless both are readers': mutual exclusion broken. As the
    // checker judges it, only between sections the resource saw end: a holder whose exit never
    // came (it crashed) touched nothing after its enter, so it overlapped nobody. Sections are
    // in enter order, so the later ones a section overlaps follow it directly.
    for (i, a) in sections.iter().enumerate() {
        if a.exit.is_none() {
            continue;
        }
        for (j, b) in sections.iter().enumerate().skip(i + 1) {
            if intervals[j].0 >= intervals[i].1 {
                break;
            }
            if b.exit.is_none() || a.client == b.client || (a.shared && b.shared) {
                continue;
            }
            let start = intervals[j].0;
            let end = intervals[i].1.min(intervals[j].1);
            shapes.push(Shape {
                lane: at.lane,
                layer: Layer::Mark,
                class: "overlap".to_string(),
                form: ctx.bar(start, end, at.top + 2.0, rows_h + 4.0),
                title: format!(
                    "{} and {} both inside from {} to {} ({})",
                    a.client,
                    b.client,
                    ms(start),
                    ms(end),
                    ms(end - start)
                ),
                data: vec![("start-ns", start.to_string()), ("end-ns", end.to_string())],
                label: None,
            });
        }
    }
    for &e in mine {
        tick(at, height, e, ctx, shapes);
    }
    height
}
