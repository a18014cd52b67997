//! What people see while searches run and after: a progress bar, and the rates of a search.

use anyhow::Context;
use lockcheck_search::cell::CellStats;
use std::io::IsTerminal;
use std::time::Duration;

/// A progress bar on stderr when it is a terminal, hidden otherwise (logs and pipes get only the
/// final lines).
pub fn progress_bar(len: u64, unit: &str) -> anyhow::Result<indicatif::ProgressBar> {
    bar_with(
        len,
        &format!("{{bar:40}} {{pos}}/{{len}} {unit} {{per_sec}} {{elapsed_precise}} {{msg}}"),
    )
}

/// [`progress_bar`] for steps of seconds each (real runs): with the time left, at the rate so far.
pub fn progress_bar_with_eta(len: u64, unit: &str) -> anyhow::Result<indicatif::ProgressBar> {
    bar_with(
        len,
        &format!("{{bar:40}} {{pos}}/{{len}} {unit} {{elapsed_precise}}, ETA {{eta}} {{msg}}"),
    )
}

fn bar_with(len: u64, template: &str) -> anyhow::Result<indicatif::ProgressBar> {
    let bar = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(len)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(template).context("progress bar template")?,
    );
    Ok(bar)
}

/// Rates for people: the search's cases per second apart from the time spent shrinking. Each
/// cell's search time is its own: one thread's for `matrix` and `check` (`per_thread`), the wall
/// time of all threads for `explore`.
pub fn rates(stats: &[&CellStats], wall: Duration, threads: usize, per_thread: bool) -> String {
    let cases: u64 = stats.iter().map(|s| u64::from(s.cases)).sum();
    let search: f64 = stats.iter().map(|s| s.search.as_secs_f64()).sum();
    let shrink_runs: u64 = stats.iter().map(|s| u64::from(s.shrink_runs)).sum();
    let shrink: f64 = stats.iter().map(|s| s.shrink.as_secs_f64()).sum();
    let regressions: usize = stats.iter().map(|s| s.regressions).sum();
    let changed: usize = stats.iter().map(|s| s.regressions_changed).sum();
    let replayed = match (regressions, changed) {
        (0, _) => String::new(),
        (n, 0) => format!(" (after {n} persisted failure(s) replayed first)"),
        (n, c) => format!(
            " (after {n} persisted failure(s) replayed first, {c} of them with another history \
             than when found: the simulator or the algorithm changed since)"
        ),
    };
    format!(
        "search: {cases} cases in {search:.1} s{replayed}, {:.0} cases/s{}; shrinking: \
         {shrink_runs} runs in {shrink:.1} s; {:.1} s wall on {threads} thread(s)",
        cases as f64 / search.max(1e-9),
        if per_thread { " per thread" } else { "" },
        wall.as_secs_f64()
    )
}
