//! `lockcheck differential`: real servers judge the models.
//!
//! The stories are `explore`'s (the same generator, the same seed, the same case `k`, with every
//! client but `client-0` held back [`HOLD_BACK_MS`] at the start), kept to what real mode can
//! carry out and drawn again when a fault span falls within the margin of a
//! threshold the verdict turns on ([`lockcheck_core::margin`]): a real machine cannot reproduce a
//! schedule that hinges on a few milliseconds. Careful clients (`check_before_access`) are drawn
//! too. Each story runs once in the simulation and `--repeat` times against real servers started
//! fresh for each run, and is classed ([`lockcheck_core::differential::Class`]): agree, sim safe
//! but real unsafe (a false "not found", reported first), sim unsafe but real safe, or
//! inconclusive (the real runs split).
//!
//! Every disagreement gets a folder of its own: the scenario, the simulation's report, every real
//! run's report, `compare.html` (the timelines side by side under the one-screen summary) and the
//! commands that rerun each world. A disagreement is then shrunk (fewer faults, fewer clients,
//! fewer sections) while the simulation's verdict stays and every real run still disagrees, within
//! `--shrink-runs` real runs in all. `differential.json` and `differential.md` sum the search up.
//!
//! A story whose real run fails twice (a server that would not start on a busy machine) is set
//! aside, said and counted, and the search goes on.
//!
//! Exit 1 when a story is simulation-safe and real-unsafe in all of its real runs (the kind that
//! makes a verdict untrustworthy), 0 otherwise (the other disagreements are reported), 2 for bad
//! input (refused before any server starts) or when no story could be run for real, 130/143 when
//! interrupted (every server stopped).

use super::params::ParamArgs;
use super::progress::progress_bar_with_eta;
use super::run::read_scenario_with;
use super::{parse_algorithm, usage, EXIT_FOUND, EXIT_OK};
use clap::Args;
use lockcheck_core::differential::{
    classify, classify_over_phases, overlap_within_margin, runs_split, Class, Seen,
};
use lockcheck_core::margin::{self, DEFAULT_MARGIN_MS};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::{shell_quote, Report};
use lockcheck_core::scenario::{Fault, Scenario};
use lockcheck_core::server_clock;
use lockcheck_real::signals::Signal;
use lockcheck_real::{RealError, RealRun};
use lockcheck_search::cases::Cases;
use lockcheck_search::explore::ExploreOptions;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The arguments of `lockcheck differential`.
#[derive(Args)]
#[command(allow_negative_numbers = true)]
pub struct DifferentialArgs {
    /// The algorithm (every registered one is listed under `explore --help`).
    #[arg(long, value_name = "NAME", required_unless_present = "scenario")]
    algorithm: Option<String>,
    /// The fault profiles the stories are drawn from, as `explore` names them: pause,
    /// clock-jump, clock-drift, crash-restart, crash-delayed-restart, partition, delay,
    /// failover, all. What real mode cannot carry out (a machine crash, a clock fault on an etcd
    /// member) is drawn again.
    #[arg(
        long,
        value_name = "F[,F…]",
        default_value = "all",
        conflicts_with = "scenario"
    )]
    faults: String,
    /// Compare the worlds on this one scenario file (`lockcheck run`'s format) instead of
    /// drawing stories.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Stories to draw and run in both worlds.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        conflicts_with = "scenario"
    )]
    stories: u32,
    /// The first story to run: stories K, K+1, … (K + --stories − 1), so that one story of a
    /// search (a disagreement, one not run) can be run again on its own with the same --seed.
    #[arg(
        long,
        value_name = "K",
        default_value_t = 0,
        conflicts_with = "scenario"
    )]
    from_story: u64,
    /// Real runs of each story (real timing varies; the runs of a story that split make it
    /// inconclusive, and a story stops being run once they have split).
    #[arg(long, value_name = "K", default_value_t = 3)]
    repeat: u32,
    /// The search's seed (`explore --seed`: story k is explore's case k, with every client but
    /// client-0 held back 200 ms at the start).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 0,
        conflicts_with = "scenario"
    )]
    seed: u64,
    /// Keep every fault span (pause, partition, delay, clock step) at least this far from the
    /// thresholds the verdict turns on (lease, lease + the server's check interval, a ZooKeeper
    /// client's disconnect, syncLimit, renewal intervals); a story closer than that is drawn
    /// again. 0 turns it off. With --scenario, a story within the margin is run and flagged.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_MARGIN_MS)]
    margin_ms: u64,
    /// Real runs spent, in all, shrinking the disagreements to smaller stories that still
    /// disagree (0: no shrinking).
    #[arg(long, value_name = "N", default_value_t = 24)]
    shrink_runs: u32,
    /// Run each story for real once, and again (up to --repeat runs) only when that run
    /// disagrees with the simulation: an agreement is then seen once, not --repeat times (so a
    /// story whose real runs would split can pass as agreeing). For bounded budgets (the test
    /// suite's); a disagreement is still confirmed by every one of its runs.
    #[arg(long)]
    quick: bool,
    /// Draw only clients that do not check their lock before each access (by default half the
    /// stories' clients are careful ones).
    #[arg(long)]
    no_careful: bool,
    /// The lease in ms: the TTL, a ZooKeeper session timeout, an etcd lease [default: real
    /// mode's: 2000, ZooKeeper 4000], short so that a real run takes seconds.
    #[arg(long, value_name = "MS", conflicts_with = "scenario")]
    ttl_ms: Option<u64>,
    /// Number of servers (redlock: odd, ≥ 3; ZooKeeper: 3 for an ensemble).
    #[arg(long, value_name = "N", conflicts_with = "scenario")]
    nodes: Option<u32>,
    /// The longest partition the partition profile draws, in ms (`explore --max-partition-ms`).
    #[arg(long, value_name = "MS")]
    max_partition_ms: Option<u64>,
    /// The largest clock drift clock-drift draws (`explore --max-drift`).
    #[arg(long, value_name = "FRACTION")]
    max_drift: Option<f64>,
    /// Where the summary and every disagreement's folder go.
    #[arg(long, value_name = "DIR", default_value = "reports/differential")]
    out: PathBuf,
    /// The scenario parameters, as `explore` takes them.
    #[command(flatten)]
    params: ParamArgs,
}

/// One story's result, as `differential.json` keeps it.
#[derive(Clone, Debug, Serialize)]
struct Story {
    /// The case index (explore's), or the file's name.
    name: String,
    class: Class,
    simulation: Seen,
    real: Vec<Seen>,
    /// Why the story is within the margin, when it is: a given scenario's fault span near a
    /// threshold, or a disagreement resting on an overlap shorter than the margin.
    #[serde(skip_serializing_if = "Option::is_none")]
    within_margin: Option<String>,
    /// The disagreement's folder, relative to the output directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    folder: Option<String>,
    /// The smaller story that still disagrees, when shrinking found one.
    #[serde(skip_serializing_if = "Option::is_none")]
    shrunk: Option<Scenario>,
    /// Real runs spent shrinking it, when it was shrunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    shrink_runs: Option<u32>,
    scenario: Scenario,
}

/// The whole search, as `differential.json` keeps it.
#[derive(Serialize)]
struct Summary<'a> {
    lockcheck: &'static str,
    algorithm: &'a str,
    topology: String,
    faults: &'a str,
    seed: u64,
    repeat: u32,
    margin_ms: u64,
    stories: &'a [Story],
    /// Stories per class, those within margin left out.
    counts: Vec<(Class, usize)>,
    /// Disagreements within margin, reported apart.
    within_margin: usize,
    /// Stories whose real runs failed twice (a server that would not start), with why.
    not_run: &'a [(String, String)],
    real_runs: u32,
    real_seconds: u64,
}

/// Runs `lockcheck differential`.
pub fn differential(args: DifferentialArgs) -> anyhow::Result<u8> {
    lockcheck_core::limits::within("--repeat", args.repeat, 1, 100).map_err(usage)?;
    let (stories, faults) = match &args.scenario {
        Some(file) => {
            let mut s = read_scenario_with(file, args.params.script.as_deref(), None)?;
            args.params.apply(s.algorithm, &mut s.params)?;
            s.validate().map_err(|e| usage(e.to_string()))?;
            lockcheck_real::preflight(&s).map_err(|e| usage(e.to_string()))?;
            let name = file
                .file_stem()
                .map_or("scenario".into(), |n| n.to_string_lossy().into_owned());
            (vec![(name, s)], "file".to_string())
        }
        None => (draw_stories(&args)?, args.faults.clone()),
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| usage(format!("--out {}: {e}", args.out.display())))?;
    let first = &stories[0].1;
    let algorithm = first.algorithm.name();
    let topology = super::real::topology_text(first);
    say!(
        "differential: {algorithm} ({topology}) × [{faults}], {} stor{} in the simulation and {} \
         real run(s) each against fresh servers; margin {} ms",
        stories.len(),
        if stories.len() == 1 { "y" } else { "ies" },
        args.repeat,
        args.margin_ms
    );
    let bar = progress_bar_with_eta(stories.len() as u64 * u64::from(args.repeat), "real runs")?;
    let started = Instant::now();
    let mut real_runs = 0u32;
    let mut shrink_budget = args.shrink_runs;
    let mut results: Vec<Story> = Vec::new();
    // Stories whose real runs could not be made, with why.
    let mut not_run: Vec<(String, String)> = Vec::new();
    for (name, scenario) in &stories {
        bar.set_message(format!("story {name}"));
        // Every story is kept, so that any of them (one that would not run, one whose real
        // runs ended oddly) can be run again on its own, in either world.
        let kept = write_story(&args.out, name, scenario)?;
        let simulated = lockcheck_sim::run(scenario);
        let simulation = Seen::of(&simulated);
        // The same story at other tick phases of the servers: a real server's phase is its
        // start's, so a verdict that turns on it compares as a set.
        let at_phases: Vec<Seen> = server_clock::PHASE_SWEEP
            .iter()
            .map(|&origin| {
                Seen::of(&lockcheck_sim::run(&server_clock::at_phase(
                    scenario, origin,
                )))
            })
            .collect();
        let mut real = Vec::new();
        let mut real_reports = Vec::new();
        let mut failed = None;
        for _ in 0..args.repeat {
            let run = match real_run(scenario) {
                Ok(Ok(run)) => run,
                Ok(Err(e)) => {
                    failed = Some(e.to_string());
                    break;
                }
                Err(signal) => {
                    bar.finish_and_clear();
                    return Ok(interrupted(signal, name));
                }
            };
            real_runs += 1;
            bar.inc(1);
            real.push(Seen::of(&run.outcome));
            real_reports.push(Report::of_real_run(scenario, &run.outcome));
            let agrees_once =
                args.quick && !classify_over_phases(&simulation, &at_phases, &real).disagrees();
            if runs_split(&real) || agrees_once {
                bar.inc(u64::from(args.repeat) - real.len() as u64);
                break;
            }
        }
        if let Some(e) = failed {
            bar.suspend(|| {
                say!(
                    "story {name}: NOT RUN: a real run failed twice: {e} (its scenario: {}; \
                     `lockcheck real --scenario` runs it again)",
                    kept.display()
                )
            });
            not_run.push((name.clone(), e));
            continue;
        }
        let class = classify_over_phases(&simulation, &at_phases, &real);
        let within_margin = margin::closest(scenario, args.margin_ms)
            .map(|c| c.describe())
            .or_else(|| overlap_within_margin(class, &simulation, &real, args.margin_ms));
        // One line per story, so that a log (or a terminal after the bar) shows the search as
        // it goes.
        bar.suspend(|| {
            say!(
                "story {name}: {}{}: simulation {}; real {}",
                class.word(),
                if within_margin.is_some() {
                    " (within margin)"
                } else {
                    ""
                },
                simulation.describe(),
                real.iter()
                    .map(Seen::describe)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        });
        let mut story = Story {
            name: name.clone(),
            class,
            simulation,
            real,
            within_margin,
            folder: None,
            shrunk: None,
            shrink_runs: None,
            scenario: scenario.clone(),
        };
        if class.disagrees() {
            let mut sim_report = Report::of_run(scenario, &simulated);
            story.folder = Some(write_folder(
                &args.out,
                &story,
                &mut sim_report,
                &mut real_reports,
            )?);
            let shrinkable = matches!(class, Class::SimSafeRealUnsafe | Class::SimUnsafeRealSafe)
                && story.within_margin.is_none();
            if shrinkable && shrink_budget > 0 {
                bar.set_message(format!("shrinking story {name}"));
                let (shrunk, spent) =
                    match shrink(scenario, class, args.repeat, args.margin_ms, shrink_budget) {
                        Ok(done) => done,
                        Err(signal) => {
                            bar.finish_and_clear();
                            return Ok(interrupted(signal, name));
                        }
                    };
                shrink_budget -= spent;
                real_runs += spent;
                story.shrink_runs = Some(spent);
                if let Some(shrunk) = shrunk {
                    let folder = args.out.join(story.folder.as_deref().unwrap_or_default());
                    std::fs::write(folder.join("shrunk.json"), shrunk.to_json() + "\n")
                        .map_err(|e| usage(format!("{}: {e}", folder.display())))?;
                    story.shrunk = Some(shrunk);
                }
            }
        }
        results.push(story);
    }
    bar.finish_and_clear();
    if results.is_empty() && !not_run.is_empty() {
        // Not one story could be run for real: the servers, not the models, are at fault.
        let (name, e) = &not_run[0];
        return Err(usage(format!(
            "no story could be run for real (story {name}, twice: {e})"
        )));
    }
    let elapsed = started.elapsed();
    print_summary(&args, &results, real_runs, elapsed);
    if !not_run.is_empty() {
        say!(
            "{} stor{} not run (a real run failed twice; rerun one with --seed, --from-story \
             and --stories 1):",
            not_run.len(),
            if not_run.len() == 1 { "y" } else { "ies" }
        );
        for (name, e) in &not_run {
            say!("  {name}: {e}");
        }
    }
    let counts: Vec<(Class, usize)> = Class::ALL
        .iter()
        .map(|&class| (class, clear(&results, class)))
        .collect();
    let summary = Summary {
        lockcheck: env!("CARGO_PKG_VERSION"),
        algorithm,
        topology: topology.clone(),
        faults: &faults,
        seed: args.seed,
        repeat: args.repeat,
        margin_ms: args.margin_ms,
        stories: &results,
        counts,
        within_margin: apart(&results),
        not_run: &not_run,
        real_runs,
        real_seconds: elapsed.as_secs(),
    };
    let json = args.out.join("differential.json");
    std::fs::write(&json, serde_json::to_string_pretty(&summary)? + "\n")
        .map_err(|e| usage(format!("{}: {e}", json.display())))?;
    let md = args.out.join("differential.md");
    std::fs::write(&md, markdown(&summary)).map_err(|e| usage(format!("{}: {e}", md.display())))?;
    say!("summary: {} and {}", json.display(), md.display());
    let false_not_found = results
        .iter()
        .any(|s| s.class == Class::SimSafeRealUnsafe && s.within_margin.is_none());
    Ok(if false_not_found { EXIT_FOUND } else { EXIT_OK })
}

/// The stories of a drawn search, each validated and checked against real mode before any
/// server starts.
fn draw_stories(args: &DifferentialArgs) -> anyhow::Result<Vec<(String, Scenario)>> {
    lockcheck_core::limits::within("--stories", args.stories, 1, 10_000).map_err(usage)?;
    let algorithm = parse_algorithm(args.algorithm.as_deref().unwrap_or_default())?;
    let mut template = Scenario::new(algorithm);
    template.params = super::real::search_params(algorithm, args.ttl_ms, args.nodes, &args.params)?;
    let profiles = FaultProfile::parse_list(&args.faults).map_err(usage)?;
    let options = ExploreOptions {
        params: template.params.clone(),
        max_drift: args
            .max_drift
            .unwrap_or(lockcheck_core::profile::DEFAULT_MAX_DRIFT),
        max_partition_ms: args.max_partition_ms,
        careful: if args.no_careful {
            lockcheck_search::explore::Careful::Never
        } else {
            lockcheck_search::explore::Careful::Half
        },
        ..ExploreOptions::new(algorithm, profiles, args.stories, args.seed)
    };
    let margin_ms = args.margin_ms;
    let stories = Cases::new(options, move |s| {
        lockcheck_real::support::check(s).is_ok() && margin::closest(s, margin_ms).is_none()
    })
    .map_err(|e| usage(e.to_string()))?;
    // A topology or a setting real mode cannot run, or a server not installed: refused here,
    // before any story is drawn or any server started.
    lockcheck_real::preflight(&template).map_err(|e| usage(e.to_string()))?;
    let first = args.from_story;
    lockcheck_core::limits::within(
        "--from-story",
        first,
        0,
        u64::from(lockcheck_core::limits::MAX_CASES),
    )
    .map_err(usage)?;
    (first..first + u64::from(args.stories))
        .map(|case| {
            stories
                .draw(case)
                .map(|s| (format!("case-{case}"), hold_back_all_but_the_first(s)))
                .map_err(|e| {
                    usage(format!(
                        "no story of {} × [{}] that real mode can carry out and that keeps a \
                         {margin_ms} ms margin could be drawn ({e}); try other --faults or a \
                         smaller --margin-ms",
                        algorithm.name(),
                        args.faults
                    ))
                })
        })
        .collect()
}

/// How long every client but `client-0` waits at the start of a drawn story.
pub const HOLD_BACK_MS: u64 = 200;

/// `scenario` with every client but `client-0` paused for [`HOLD_BACK_MS`] at the start, so that
/// `client-0` takes the lock first in both worlds. Without it, who wins the first race is decided
/// by a few milliseconds of latency (the simulation's drawn 1–10 ms, loopback's fraction of one),
/// and a story whose fault strikes "the holder" strikes another client in each world (12 of the
/// first 90 drawn etcd stories had real runs that split, and the one looked at split for that
/// reason: FIDELITY.md). What the real stories of `lockcheck real --faults` do too.
pub(super) fn hold_back_all_but_the_first(scenario: Scenario) -> Scenario {
    let mut held = scenario.clone();
    held.faults = Fault::hold_backs(scenario.clients, HOLD_BACK_MS);
    held.faults.extend(scenario.faults.iter().cloned());
    // A drawn pause of its own that the hold-back would overlap keeps the story as drawn.
    if held.validate().is_ok() {
        held
    } else {
        scenario
    }
}

/// Whether `fault` is a hold-back (which shrinking keeps: without it the story is a race).
pub(super) fn is_hold_back(fault: &Fault) -> bool {
    matches!(fault, Fault::Pause { at_ms: 0, node, for_ms: HOLD_BACK_MS }
        if node != "client-0" && node.starts_with("client-"))
}

/// Says that the search was interrupted at `story`, and returns the signal's exit code.
fn interrupted(signal: Signal, story: &str) -> u8 {
    eprintln!(
        "lockcheck: interrupted by {} at story {story} (every server it started was stopped)",
        signal.name()
    );
    signal.exit_code()
}

/// A real run of `scenario` against servers started for it, tried once more when it fails (a
/// server that would not start on a busy machine: a JVM past its readiness wait), so that such a
/// failure costs a story, not the search. `Err` only when a signal interrupted it; `Ok(Err)`
/// when both tries failed.
fn real_run(scenario: &Scenario) -> Result<Result<RealRun, RealError>, Signal> {
    match lockcheck_real::run(scenario) {
        Err(RealError::Interrupted(signal)) => Err(signal),
        Err(_) => match lockcheck_real::run(scenario) {
            Err(RealError::Interrupted(signal)) => Err(signal),
            second => Ok(second),
        },
        first => Ok(first),
    }
}

/// Shrinks a disagreeing story: drops a fault (a crash with its restart), a client, sections,
/// keeping a candidate when the simulation's safety verdict is unchanged and every one of
/// `repeat` real runs still disagrees with it. Spends at most `budget` real runs (a real run that
/// fails twice ends the shrinking); returns the smallest story found (if smaller than
/// `scenario`) and the real runs spent; `Err` when a signal interrupted it.
fn shrink(
    scenario: &Scenario,
    class: Class,
    repeat: u32,
    margin_ms: u64,
    budget: u32,
) -> Result<(Option<Scenario>, u32), Signal> {
    let mut spent = 0u32;
    let mut current = scenario.clone();
    let mut shrunk = false;
    'outer: loop {
        for candidate in smaller(&current) {
            if candidate.validate().is_err() || lockcheck_real::support::check(&candidate).is_err()
            {
                continue;
            }
            // The simulation first (it costs nothing): it must still give its verdict, clear of
            // the margin.
            let sim = Seen::of(&lockcheck_sim::run(&candidate));
            if overlap_within_margin(class, &sim, &[], margin_ms).is_some()
                || sim.is_unsafe() != (class == Class::SimUnsafeRealSafe)
            {
                continue;
            }
            let mut real = Vec::new();
            for _ in 0..repeat {
                if spent >= budget {
                    break 'outer;
                }
                let Ok(run) = real_run(&candidate)? else {
                    break 'outer;
                };
                spent += 1;
                real.push(Seen::of(&run.outcome));
                if classify(&sim, &real) != class {
                    break;
                }
            }
            let holds = real.len() == repeat as usize
                && classify(&sim, &real) == class
                && overlap_within_margin(class, &sim, &real, margin_ms).is_none();
            if holds {
                current = candidate;
                shrunk = true;
                continue 'outer;
            }
        }
        break;
    }
    Ok((shrunk.then_some(current), spent))
}

/// The one-step-smaller stories of `scenario`, the biggest cut first: each fault dropped (a
/// crash with the restart that follows it), then a client, then sections.
fn smaller(scenario: &Scenario) -> Vec<Scenario> {
    let mut out = Vec::new();
    for (i, fault) in scenario.faults.iter().enumerate() {
        if matches!(fault, Fault::Restart { .. }) || is_hold_back(fault) {
            continue;
        }
        let mut s = scenario.clone();
        s.faults.remove(i);
        if let Fault::Crash { node, .. } = fault {
            if let Some(j) = s.faults[i..]
                .iter()
                .position(|f| matches!(f, Fault::Restart { node: n, .. } if n == node))
            {
                s.faults.remove(i + j);
            }
        }
        out.push(s);
    }
    if scenario.clients > 2 {
        // The last client goes, with the faults that name it (its hold-back among them).
        let mut s = scenario.clone();
        s.clients -= 1;
        let gone = format!("client-{}", s.clients);
        s.faults.retain(|f| !f.nodes().iter().any(|n| *n == gone));
        out.push(s);
    }
    if scenario.workload.acquisitions_per_client > 1 {
        let mut s = scenario.clone();
        s.workload.acquisitions_per_client = 1;
        out.push(s);
    }
    out
}

/// Writes a story's scenario (`OUT/stories/NAME.json`), and returns its path.
fn write_story(out: &Path, name: &str, scenario: &Scenario) -> anyhow::Result<PathBuf> {
    let dir = out.join("stories");
    std::fs::create_dir_all(&dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, scenario.to_json() + "\n")
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    Ok(path)
}

/// Writes a disagreement's folder: the scenario, both worlds' reports, the page that sets their
/// timelines side by side, and the commands that rerun each world. Returns its name.
fn write_folder(
    out: &Path,
    story: &Story,
    sim_report: &mut Report,
    real_reports: &mut [Report],
) -> anyhow::Result<String> {
    let name = format!("{}-{}", story.name, story.class.name());
    let dir = out.join(&name);
    std::fs::create_dir_all(&dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let scenario_path = dir.join("scenario.json");
    std::fs::write(&scenario_path, story.scenario.to_json() + "\n")
        .map_err(|e| usage(format!("{}: {e}", scenario_path.display())))?;
    let quoted = shell_quote(&scenario_path.display().to_string());
    let sim_json = sim_report.write(&dir, "simulation")?;
    let mut panes: Vec<(String, &Report)> = vec![(
        format!("simulation: {}", story.simulation.describe()),
        &*sim_report,
    )];
    let mut real_paths = Vec::new();
    for (i, report) in real_reports.iter_mut().enumerate() {
        real_paths.push(report.write(&dir, &format!("real-{}", i + 1))?);
    }
    for (i, report) in real_reports.iter().enumerate() {
        panes.push((
            format!("real run {}: {}", i + 1, story.real[i].describe()),
            report,
        ));
    }
    let lines = summary_lines(story, &quoted);
    let mut text = lines.join("\n");
    text.push('\n');
    text.push_str(&format!(
        "simulation report: {}\nreal reports: {}\n",
        sim_json.display(),
        real_paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    std::fs::write(dir.join("README.txt"), &text)
        .map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let title = format!(
        "{}: {} — story {}",
        story.scenario.algorithm.name(),
        story.class.word(),
        story.name
    );
    std::fs::write(
        dir.join("compare.html"),
        lockcheck_core::timeline::side_by_side(&title, &lines, &panes),
    )
    .map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    Ok(name)
}

/// What a reader needs in one screen: the class and its meaning, each world's verdict, the
/// story, and the commands that rerun each world.
fn summary_lines(story: &Story, quoted_file: &str) -> Vec<String> {
    let s = &story.scenario;
    let mut lines = vec![
        format!("{}: {}", story.class.word(), story.class.meaning()),
        format!(
            "simulation: {}; real runs: {}",
            story.simulation.describe(),
            story
                .real
                .iter()
                .map(Seen::describe)
                .collect::<Vec<_>>()
                .join(" | ")
        ),
        format!(
            "story: {} ({}), {} clients{}, {} section(s) each, holding {} ms; seed {}",
            s.algorithm.name(),
            super::real::topology_text(s),
            s.clients,
            if s.workload.check_before_access {
                " that check their lock before each access"
            } else {
                ""
            },
            s.workload.acquisitions_per_client,
            s.workload.hold_ms,
            s.seed
        ),
    ];
    for fault in &s.faults {
        lines.push(format!("  fault: {}", fault.describe()));
    }
    if let Some(why) = &story.within_margin {
        lines.push(format!("within margin: {why}"));
    }
    lines.push(format!("rerun the simulation: lockcheck run {quoted_file}"));
    lines.push(format!(
        "rerun for real: lockcheck real --scenario {quoted_file}"
    ));
    lines.push(format!(
        "rerun both, {} real runs: lockcheck differential --scenario {quoted_file} --repeat {}",
        story.real.len().max(1),
        story.real.len().max(1)
    ));
    lines
}

/// The stories of `class` that stand clear of the margin.
fn clear(results: &[Story], class: Class) -> usize {
    results
        .iter()
        .filter(|s| s.class == class && s.within_margin.is_none())
        .count()
}

/// The disagreements within margin, reported apart.
fn apart(results: &[Story]) -> usize {
    results
        .iter()
        .filter(|s| s.class.disagrees() && s.within_margin.is_some())
        .count()
}

fn print_summary(args: &DifferentialArgs, results: &[Story], real_runs: u32, elapsed: Duration) {
    say!(
        "{} stor{}: {} agree ({} of them at another tick phase than the one drawn), {} sim \
         safe/real unsafe, {} sim unsafe/real safe, {} inconclusive, {} disagreement(s) within \
         margin reported apart ({real_runs} real runs, {:.0} s)",
        results.len(),
        if results.len() == 1 { "y" } else { "ies" },
        results.iter().filter(|s| !s.class.disagrees()).count(),
        results
            .iter()
            .filter(|s| s.class == Class::AgreeAtAnotherPhase)
            .count(),
        clear(results, Class::SimSafeRealUnsafe),
        clear(results, Class::SimUnsafeRealSafe),
        clear(results, Class::Inconclusive),
        apart(results),
        elapsed.as_secs_f64()
    );
    // Worst first; those within margin last, apart.
    let mut order: Vec<&Story> = results.iter().filter(|s| s.class.disagrees()).collect();
    order.sort_by_key(|s| (s.within_margin.is_some(), s.class));
    for story in order {
        let apart = if story.within_margin.is_some() {
            " (within margin, reported apart)"
        } else {
            ""
        };
        say!("{}{apart}: story {}", story.class.word(), story.name);
        let folder = args.out.join(story.folder.as_deref().unwrap_or_default());
        let quoted = shell_quote(&folder.join("scenario.json").display().to_string());
        for line in summary_lines(story, &quoted).iter().skip(1) {
            say!("  {line}");
        }
        say!("  side by side: {}", folder.join("compare.html").display());
        match (&story.shrunk, story.shrink_runs) {
            (Some(shrunk), _) => say!(
                "  shrunk to {} fault(s), {} clients: {}",
                shrunk.faults.len(),
                shrunk.clients,
                folder.join("shrunk.json").display()
            ),
            (None, Some(spent)) => say!(
                "  not shrunk: no smaller story kept the disagreement ({spent} real run(s) \
                 spent trying)"
            ),
            (None, None) => {}
        }
    }
}

/// The search as a Markdown table row set (what FIDELITY.md collects).
fn markdown(summary: &Summary) -> String {
    let mut md = format!(
        "# Differential search: {} ({}) × [{}]\n\nseed {}, {} real run(s) per story, margin {} \
         ms, {} real runs in {} s\n\n| story | class | simulation | real runs | within margin |\n|---|---|---|---|---|\n",
        summary.algorithm,
        summary.topology,
        summary.faults,
        summary.seed,
        summary.repeat,
        summary.margin_ms,
        summary.real_runs,
        summary.real_seconds
    );
    for s in summary.stories {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            s.name,
            s.class.word(),
            s.simulation.describe(),
            s.real
                .iter()
                .map(Seen::describe)
                .collect::<Vec<_>>()
                .join(", "),
            s.within_margin.as_deref().unwrap_or("")
        ));
    }
    md
}
