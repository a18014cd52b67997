//! `lockcheck real --cases N`: the simulation's search, against real servers.
//!
//! The cases are `explore`'s: the same generator (`lockcheck_sim::explore::scenarios`) with the
//! same seed draws the same fault schedules, timed from the lease of the run (real mode's short
//! default, so that a case takes seconds), keeping only the schedules real mode can carry out
//! (no machine crash: real mode kills processes; no clock fault on an etcd member). Each case runs
//! against servers started fresh for it. The first case that fails is written as a real report,
//! and its scenario is run in the simulation, which says whether it agrees; where it does, the
//! simulation's report of that scenario is written too, and it replays byte for byte.
//!
//! With `--client`, every case runs the user's lock library in fresh client processes (as a
//! single `--client` run does), drawing again the cases a client process cannot be asked for;
//! the report's rerun command runs that client again, and the simulation runs lockcheck's
//! rendition, so a disagreement there is the library's behaviour (or the machine's timing)
//! against the rendition's.

use super::progress::progress_bar_with_eta;
use super::run::print_outcome;
use super::usage;
use lockcheck_core::checker::{kinds_both_worlds_see, Severity, ViolationKind};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::Report;
use lockcheck_core::scenario::{Params, Scenario};
use lockcheck_core::Algorithm;
use lockcheck_real::{ClientCommand, RealError, Servers};
use lockcheck_sim::explore::{check_options, draw, fails, scenarios_where, ExploreOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A search of real runs.
pub struct RealSearch {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The fault profiles, as `explore --faults` names them.
    pub faults: String,
    /// Its parameters (the lease already real mode's).
    pub params: Params,
    /// Cases to run before concluding nothing is found.
    pub cases: u32,
    /// The search's seed: `explore --seed`.
    pub seed: u64,
    /// `explore --max-drift`.
    pub max_drift: f64,
    /// `explore --max-partition-ms`.
    pub max_partition_ms: Option<u64>,
    /// `explore --safety-only`.
    pub safety_only: bool,
    /// Where the reports go.
    pub out: PathBuf,
    /// `--client`: the user's lock library in processes of this command, fresh ones for every
    /// case, instead of lockcheck's rendition.
    pub client: Option<ClientCommand>,
}

/// Runs the search and prints what it found; the exit code is the verdict's.
pub fn search(search: RealSearch) -> anyhow::Result<u8> {
    let profiles = FaultProfile::parse_list(&search.faults).map_err(usage)?;
    let options = ExploreOptions {
        params: search.params.clone(),
        max_drift: search.max_drift,
        max_partition_ms: search.max_partition_ms,
        safety_only: search.safety_only,
        ..ExploreOptions::new(search.algorithm, profiles, search.cases, search.seed)
    };
    check_options(&options).map_err(|e| usage(e.to_string()))?;
    // What real mode refuses whatever the faults (a setting it cannot apply, a lock a client
    // process cannot be asked for) is said once, up front, rather than as a search that finds
    // no case to run.
    let mut template = Scenario::new(search.algorithm);
    template.params = options.params.clone();
    if let Some(client) = &search.client {
        lockcheck_real::client_process::check(&template, client)
            .map_err(|e| usage(e.to_string()))?;
    }
    lockcheck_real::preflight_on(&template, &Servers::Launched)
        .map_err(|e| usage(e.to_string()))?;
    // A client process cannot be asked for everything lockcheck's own clients can (a hold
    // until the validity, a reentrant acquisition): such draws are drawn again.
    let keep: fn(&Scenario) -> bool = if search.client.is_some() {
        |s| lockcheck_real::support::check(s).is_ok() && lockcheck_real::client_process::supports(s)
    } else {
        |s| lockcheck_real::support::check(s).is_ok()
    };
    let strategy = scenarios_where(&options, keep);
    let name = search.algorithm.name();
    say!(
        "real search: {name} × [{}], {} case(s) with seed {}, each against fresh servers{}",
        search.faults,
        search.cases,
        search.seed,
        match &search.client {
            Some(c) => format!(
                " and fresh processes of `{}` (protocol v{}), not lockcheck's rendition",
                c.command,
                lockcheck_real::protocol::VERSION
            ),
            None => String::new(),
        }
    );
    let bar = progress_bar_with_eta(u64::from(search.cases), "real cases")?;
    let started = Instant::now();
    let mut real_time = Duration::ZERO;
    for case in 0..u64::from(search.cases) {
        let scenario = draw(&strategy, search.seed, case).map_err(|e| usage(e.to_string()))?;
        bar.set_message(format!(
            "case {case}: {} fault(s), {} clients",
            scenario.faults.len(),
            scenario.clients
        ));
        let real =
            match lockcheck_real::run_with(&scenario, &Servers::Launched, search.client.as_ref()) {
                Ok(real) => real,
                Err(e @ RealError::Interrupted(signal)) => {
                    bar.finish_and_clear();
                    eprintln!("lockcheck: {e} (at case {case})");
                    return Ok(signal.exit_code());
                }
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(usage(format!("case {case}: {e}")));
                }
            };
        real_time += real.elapsed;
        bar.inc(1);
        if !fails(&options, &real.outcome) {
            continue;
        }
        bar.finish_and_clear();
        return found(&search, case, &scenario, &real);
    }
    bar.finish_and_clear();
    say!(
        "NOT FOUND: {name} × [{}]: no violation in {} real case(s) ({:.0} s of real runs, {:.0} s \
         in all) with seed {}",
        search.faults,
        search.cases,
        real_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        search.seed
    );
    Ok(super::EXIT_OK)
}

/// Reports the failing case `case`: its real report, and what the simulation makes of the same
/// scenario.
fn found(
    search: &RealSearch,
    case: u64,
    scenario: &Scenario,
    real: &lockcheck_real::RealRun,
) -> anyhow::Result<u8> {
    let outcome = &real.outcome;
    let name = search.algorithm.name();
    let worst = Severity::worst(&outcome.violations).unwrap_or(Severity::Unsafe);
    say!(
        "{}: {name} × [{}]: found for real at case {case}",
        worst.word(),
        search.faults
    );
    say!("  schedule:");
    for fault in &scenario.faults {
        say!("    {}", fault.describe());
    }
    let mut report = Report::of_real_run(scenario, outcome);
    report.client = real.client.clone();
    print_outcome(&report, outcome);
    let stem = format!("real-{name}-{}", search.faults.replace(',', "+"));
    let path = report.write(&search.out, &stem)?;
    say!("  real report: {}", path.display());
    say!("  timeline: {}", Report::timeline_path(&path).display());
    say!("  rerun: {}", report.replay_command);
    // The same scenario in the simulation (with `--client`, lockcheck's rendition there: the
    // user's library runs only for real). Real mode sees no server's keys, so only what both
    // worlds can see is compared.
    let simulated = lockcheck_sim::run(scenario);
    let (real_kinds, sim_kinds) = (
        kinds_both_worlds_see(&outcome.violations),
        kinds_both_worlds_see(&simulated.violations),
    );
    let simulated_what = if search.client.is_some() {
        "lockcheck's rendition in the simulation"
    } else {
        "the simulation"
    };
    if real_kinds == sim_kinds {
        let mut sim_report = Report::of_run(scenario, &simulated);
        let sim_path = sim_report.write(&search.out, &format!("{name}-real-case-{case}"))?;
        say!(
            "  {simulated_what} agrees: the same scenario finds {} there too; its report \
             replays byte for byte: {}",
            kinds_text(&sim_kinds),
            sim_report.replay_command
        );
        say!("  simulated report: {}", sim_path.display());
    } else {
        let why = if search.client.is_some() {
            "The library behaves differently from lockcheck's rendition, or the machine's \
             timing differs from the model's"
        } else {
            "Either the model or the machine's timing differs from the real servers"
        };
        say!(
            "  {simulated_what} DISAGREES: the same scenario finds {} there (real: {}). {why}; \
             the real report's history shows what happened here.",
            kinds_text(&sim_kinds),
            kinds_text(&real_kinds)
        );
    }
    Ok(worst.exit_code())
}

/// `kinds` for people.
fn kinds_text(kinds: &[ViolationKind]) -> String {
    if kinds.is_empty() {
        return "no violation".into();
    }
    kinds
        .iter()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
