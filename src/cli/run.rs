//! The verbs of one run: `lockcheck run`, `replay` and `timeline`.

use super::{usage, EXIT_FOUND, EXIT_OK};
use lockcheck_core::checker::Severity;
use lockcheck_core::report::{Report, RunWorld};
use lockcheck_core::{Outcome, Scenario};
use lockcheck_sim::replay as replay_report;
use lockcheck_sim::run;
use std::path::Path;

/// The verdict of one run, for people: the summary, each violation and rejected stale access,
/// availability, and the wake-ups of a ZooKeeper lock.
pub fn print_outcome(report: &Report, outcome: &Outcome) {
    match Severity::worst(&outcome.violations) {
        Some(worst) => say!("{}: {}", worst.word(), report.summary),
        None => say!("{}", report.summary),
    }
    for v in &outcome.violations {
        say!("  {:?}: {}", v.kind, v.story);
    }
    if let Some(failure) = lockcheck_sim::script_file::first_failure(&outcome.history) {
        say!("  a script failed (see the history for every failure): {failure}");
    }
    for s in &outcome.stale_accesses {
        say!(
            "  stale access rejected: {} with fence {:?} at {:.1} ms",
            s.client,
            s.fence,
            s.at_ns as f64 / 1e6
        );
    }
    let a = &outcome.availability;
    for (label, rate) in [
        ("all servers reachable", a.all_reachable),
        ("a minority unreachable", a.minority_unreachable),
        ("a majority unreachable", a.majority_unreachable),
    ] {
        if rate.attempts > 0 {
            say!(
                "  attempts with {label}: {} of {} acquired",
                rate.acquired,
                rate.attempts
            );
        }
    }
    let w = &outcome.wakeups;
    if !w.is_empty() {
        say!(
            "  wake-ups: {} release(s) woke {} waiter(s), {:.2} per release, at most {}",
            w.releases,
            w.wakeups,
            w.mean(),
            w.max_per_release
        );
    }
}

/// The exit code of a run: that of its worst finding ([`Severity::exit_code`]: 1 unsafe, 3
/// deadlock, 4 order, 5 stuck), 0 when nothing was found.
pub fn exit_code(outcome: &Outcome) -> u8 {
    Severity::worst(&outcome.violations).map_or(EXIT_OK, Severity::exit_code)
}

/// The scenario file at `file` (a usage error naming the file when it cannot be read or
/// parsed), with the scripts of the file `script` (`--script`) in place of
/// those it embeds (a scenario of `redis-script` may then embed none), and the library variant
/// `variant` (`--variant`) in place of its `params.variant`.
pub fn read_scenario_with(
    file: &Path,
    script: Option<&Path>,
    variant: Option<&str>,
) -> anyhow::Result<Scenario> {
    let named = |e: &dyn std::fmt::Display| usage(format!("{}: {e}", file.display()));
    let text = lockcheck_core::input::read_text(file, lockcheck_core::input::MAX_SCENARIO_BYTES)
        .map_err(|e| named(&e))?;
    let scenario = if script.is_none() && variant.is_none() {
        Scenario::from_json(&text).map_err(|e| named(&e))?
    } else {
        let mut s: Scenario = lockcheck_core::input::parse_json(&text)
            .map_err(|e| named(&format!("{}: {}", e.path, e.message)))?;
        lockcheck_core::input::objects_as_written(&text, &s)
            .map_err(|e| named(&format!("{}: {}", e.path, e.message)))?;
        if let Some(script) = script {
            super::params::apply_script_file(script, &mut s.params)?;
        }
        if let Some(variant) = variant {
            s.params.variant = Some(variant.to_string());
        }
        s.validate().map_err(|e| named(&e))?;
        s
    };
    compile_scripts(&scenario).map_err(|e| named(&e))?;
    Ok(scenario)
}

/// Compiles the user's scripts a scenario embeds (`params.redis.script`), so that a syntax
/// error is refused before the run, naming the script and its line.
pub fn compile_scripts(scenario: &Scenario) -> Result<(), String> {
    match &scenario.params.redis.script {
        Some(script) => lockcheck_sim::script_file::compile(script).map_err(|(name, message)| {
            format!("params.redis.script: the {name} script does not compile: {message}")
        }),
        None => Ok(()),
    }
}

/// Runs `lockcheck run FILE`, with the scripts of `script` (`--script`) in place of those the
/// scenario embeds and the library variant `variant` (`--variant`) in place of its own.
pub fn run_file(
    file: &Path,
    script: Option<&Path>,
    variant: Option<&str>,
    report_dir: Option<&Path>,
) -> anyhow::Result<u8> {
    let scenario = read_scenario_with(file, script, variant)?;
    let outcome = run(&scenario);
    if let Some(refusal) = outcome.refusal(&scenario) {
        return Err(usage(format!("{}: {refusal}", file.display())));
    }
    let mut report = Report::of_run(&scenario, &outcome);
    print_outcome(&report, &outcome);
    say!("history hash {}", outcome.digest());
    if let Some(dir) = report_dir {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        let path = report.write(dir, &stem)?;
        say!("report: {}", path.display());
        say!("timeline: {}", Report::timeline_path(&path).display());
    }
    Ok(exit_code(&outcome))
}

/// (Re)writes the HTML timeline of the report at `path`, beside it.
pub fn timeline(path: &Path) -> anyhow::Result<u8> {
    let report = Report::read(path).map_err(|e| usage(e.to_string()))?;
    let html = report
        .write_timeline(path)
        .map_err(|e| usage(e.to_string()))?;
    say!("timeline: {}", html.display());
    Ok(EXIT_OK)
}

/// Runs `lockcheck replay REPORT`.
pub fn replay(path: &Path) -> anyhow::Result<u8> {
    let report = Report::read(path).map_err(|e| usage(e.to_string()))?;
    if report.world == RunWorld::Real {
        return Err(usage(format!(
            "{}: a run against real servers is not byte-replayable (the machine decided its \
             interleaving); rerun its scenario: {}",
            path.display(),
            report.replay_command
        )));
    }
    let replayed = replay_report(&report);
    if let Some(refusal) = replayed.outcome.refusal(&report.scenario) {
        return Err(usage(format!("{}: {refusal}", path.display())));
    }
    if replayed.identical() {
        say!(
            "identical: {} entries, history hash {} ({})",
            replayed.outcome.history.entries.len(),
            replayed.outcome.digest(),
            report.summary
        );
        return Ok(EXIT_OK);
    }
    match replayed.first_difference {
        Some(at) => {
            // The report's history as it is in the file, hashed again: an edited entry shows
            // as two different hashes even when the recorded `history_hash` was left alone.
            say!(
                "DIVERGED at history entry {at}: report hash {}, replay hash {}",
                report.history.digest(),
                replayed.outcome.digest()
            );
            if let Some(e) = report.history.entries.get(at) {
                say!("  report: {}", serde_json::to_string(e)?);
            }
            if let Some(e) = replayed.outcome.history.entries.get(at) {
                say!("  replay: {}", serde_json::to_string(e)?);
            }
        }
        None => say!(
            "DIVERGED: the replay's history is the report's, entry for entry, but the report \
             says otherwise of it:"
        ),
    }
    for d in &replayed.differences {
        say!("  {}: report {}, replay {}", d.field, d.report, d.replay);
    }
    Ok(EXIT_FOUND)
}
