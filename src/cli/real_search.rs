//! `lockcheck real --cases N`: the simulation's search, against real servers.
//!
//! The cases are `explore`'s: the same generator (`lockcheck_search::explore::scenarios`) with the
//! same seed draws the same fault schedules, timed from the lease of the run (real mode's short
//! default, so that a case takes seconds), from the profiles `--faults` names in explore's words
//! (every profile real mode can carry out when none is given). A drawn schedule is kept only
//! when a real machine can tell its story, else the case is drawn again:
//!
//! - real mode can carry it out (no machine crash: real mode kills processes; no clock fault on
//!   an etcd member);
//! - no fault span (a pause, a partition, a delay, a clock step) falls within `--margin-ms` of a
//!   threshold the verdict turns on ([`lockcheck_core::margin`]): a pause 30 ms past a TTL
//!   breaks the lock in the simulation and, on a real machine, either way;
//! - [`story_holds`]: some fault strikes while a client holds the lock, in the simulation (a
//!   schedule whose faults all fall between critical sections tells no story a lock can fail,
//!   and a real case costs ten seconds), and the simulation gives the schedule the same verdict
//!   with its faults moved `--margin-ms` earlier and later, with its critical sections as much
//!   shorter and longer, and with [`PROBE_SEEDS`] other seeds. A real run's steps drift from
//!   the simulation's (a simulated round trip takes 2–20 ms, one on loopback a fraction of one:
//!   a waiter that retried eight times is some 90 ms ahead for real), so a verdict that turns on
//!   which client's attempt comes first after a release, on a pause landing just before its
//!   holder leaves, or on a second holder that overlaps the first by one ms is a different
//!   story on a real machine. Measured on single-redis × pause (`--ttl-ms 2000`): of explore's
//!   own first 20 draws of seed 1, the simulation finds 5 UNSAFE and real runs found none; of
//!   the first 40 draws these rules keep for each of seeds 0, 1 and 2, the simulation finds 13
//!   UNSAFE, and 11 of them were UNSAFE for real (the other two are a paused Redis server's
//!   story, which the two worlds tell differently), and the 9 safe ones tried were safe.
//!
//! Every client but `client-0` is held back [`HOLD_BACK_MS`] at the start (as `differential`
//! does), so that `client-0` is the first holder in both worlds: who wins the first race is
//! otherwise decided by a fraction of a millisecond, and a fault drawn for "the holder" strikes
//! a waiting client instead. Each drawn schedule is printed as its case starts.
//!
//! Each case runs against servers started fresh for it. The first case that fails is written as
//! a real report, and its scenario is run in the simulation, which says whether it agrees; where
//! it does, the simulation's report of that scenario is written too, and it replays byte for
//! byte.
//!
//! With `--client`, every case runs the user's lock library in fresh client processes (as a
//! single `--client` run does), drawing again the cases a client process cannot be asked for;
//! the report's rerun command runs that client again, and the simulation runs lockcheck's
//! rendition, so a disagreement there is the library's behaviour (or the machine's timing)
//! against the rendition's.

use super::differential::{hold_back_all_but_the_first, is_hold_back, HOLD_BACK_MS};
use super::progress::progress_bar_with_eta;
use super::run::print_outcome;
use super::usage;
use lockcheck_core::checker::{kinds_both_worlds_see, Severity, ViolationKind};
use lockcheck_core::history::{History, Kind, Op};
use lockcheck_core::margin;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::Report;
use lockcheck_core::scenario::{Fault, Scenario};
use lockcheck_real::{ClientCommand, RealError, Servers};
use lockcheck_search::cases::Cases;
use lockcheck_search::explore::{ExploreError, ExploreOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A search of real runs.
pub struct RealSearch {
    /// What to search, as `explore` takes it, so that the same options draw the same cases in
    /// both worlds: the algorithm, the profiles (`--faults` in explore's words, `restart` read
    /// as `crash-restart`, [`REAL_PROFILES`] when none is given: [`profiles`]), the parameters
    /// (the lease already real mode's), the cases, the seed and what counts. What only a real
    /// search has is beside it.
    pub options: ExploreOptions,
    /// How far a drawn story's fault spans keep from the thresholds its verdict turns on
    /// ([`margin::closest`]), and how far [`story_holds`] moves its faults; 0 draws as `explore`
    /// does.
    pub margin_ms: u64,
    /// Where the reports go.
    pub out: PathBuf,
    /// The servers and their roles, for the header (`real::topology_text`).
    pub topology: String,
    /// `--client`: the user's lock library in processes of this command, fresh ones for every
    /// case, instead of lockcheck's rendition.
    pub client: Option<ClientCommand>,
}

/// The profiles a search without `--faults` draws from: every concrete profile of `explore` but
/// `failover`, whose drawn crash of the primary is a machine crash (real mode kills processes).
/// What real mode cannot do on a particular topology within the others (a clock fault on an etcd
/// member) is drawn again case by case.
pub const REAL_PROFILES: &[FaultProfile] = &[
    FaultProfile::Pause,
    FaultProfile::ClockJump,
    FaultProfile::ClockDrift,
    FaultProfile::CrashRestart,
    FaultProfile::CrashDelayedRestart,
    FaultProfile::Partition,
    FaultProfile::Delay,
];

/// The profiles `faults` names, in explore's words, with `restart` (real mode's old name of its
/// restart story) read as `crash-restart`; `None`: [`REAL_PROFILES`].
pub fn profiles(faults: Option<&str>) -> Result<Vec<FaultProfile>, String> {
    let Some(text) = faults else {
        return Ok(REAL_PROFILES.to_vec());
    };
    let names: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .map(|n| lockcheck_real::profile::canonical_name(n).unwrap_or(n))
        .collect();
    FaultProfile::parse_list(&names.join(","))
}

/// Runs the search and prints what it found; the exit code is the verdict's.
pub fn search(search: RealSearch) -> anyhow::Result<u8> {
    let options = &search.options;
    let faults_text = options
        .profiles
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(",");
    // A client process cannot be asked for everything lockcheck's own clients can (a hold
    // until the validity, a reentrant acquisition): such draws are drawn again.
    let with_client = search.client.is_some();
    let margin_ms = search.margin_ms;
    let cases = Cases::new(options.clone(), move |drawn| {
        let held = hold_back_all_but_the_first(drawn.clone());
        lockcheck_real::support::check(&held).is_ok()
            && (!with_client || lockcheck_real::client_process::supports(&held))
            && margin::closest(drawn, margin_ms).is_none()
            && story_holds(&held, margin_ms)
    })
    .map_err(|e| usage(e.to_string()))?;
    // What real mode refuses whatever the faults (a setting it cannot apply, a lock a client
    // process cannot be asked for) is said once, up front, rather than as a search that finds
    // no case to run.
    let mut template = Scenario::new(options.algorithm);
    template.params = options.params.clone();
    if let Some(client) = &search.client {
        lockcheck_real::client_process::check(&template, client)
            .map_err(|e| usage(e.to_string()))?;
    }
    lockcheck_real::preflight_on(&template, &Servers::Launched)
        .map_err(|e| usage(e.to_string()))?;
    let name = options.algorithm.name();
    say!(
        "real search: {name} on {} × [{faults_text}], {} case(s) with seed {}, each against fresh \
         servers{}",
        search.topology,
        options.cases,
        options.seed,
        match &search.client {
            Some(c) => format!(
                " and fresh processes of `{}` (protocol v{}), not lockcheck's rendition",
                c.command,
                lockcheck_real::protocol::VERSION
            ),
            None => String::new(),
        }
    );
    if margin_ms > 0 {
        say!(
            "  drawn again: what real mode cannot carry out, a fault span within {margin_ms} ms \
             of a threshold the verdict turns on, a schedule none of whose faults strikes a \
             holder in the simulation, and one whose simulated verdict changes with its faults \
             or its sections' ends {margin_ms} ms earlier or later, or with other seeds; every \
             client but client-0 held back {HOLD_BACK_MS} ms at the start, so that it holds \
             first in both worlds"
        );
    }
    let bar = progress_bar_with_eta(u64::from(options.cases), "real cases")?;
    let started = Instant::now();
    let mut real_time = Duration::ZERO;
    for case in 0..u64::from(options.cases) {
        let scenario = match cases.draw(case) {
            Ok(drawn) => hold_back_all_but_the_first(drawn),
            Err(e) => {
                bar.finish_and_clear();
                return Err(usage(undrawable(&search, &faults_text, case, &e)));
            }
        };
        bar.suspend(|| print_case(case, &scenario));
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
        if !cases.fails(&real.outcome) {
            bar.suspend(|| {
                say!(
                    "  nothing found ({:.1} s, {:.0} s in all)",
                    real.elapsed.as_secs_f64(),
                    started.elapsed().as_secs_f64()
                )
            });
            continue;
        }
        bar.finish_and_clear();
        return found(&search, &faults_text, case, &scenario, &real, started);
    }
    bar.finish_and_clear();
    say!(
        "NOT FOUND: {name} × [{faults_text}]: no violation in {} real case(s) ({:.0} s of real \
         runs, {:.0} s in all) with seed {}",
        options.cases,
        real_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        options.seed
    );
    Ok(super::EXIT_OK)
}

/// Why case `case` could not be drawn (`e`): nothing of the profiles real mode can carry out, or
/// nothing that also keeps its story ([`story_holds`], the margin).
fn undrawable(search: &RealSearch, faults: &str, case: u64, e: &ExploreError) -> String {
    let options = &search.options;
    let name = options.algorithm.name();
    let with_client = search.client.is_some();
    let carried_out = Cases::new(options.clone(), move |drawn| {
        let held = hold_back_all_but_the_first(drawn.clone());
        lockcheck_real::support::check(&held).is_ok()
            && (!with_client || lockcheck_real::client_process::supports(&held))
    });
    if search.margin_ms > 0 && carried_out.and_then(|c| c.draw(case)).is_ok() {
        return format!(
            "case {case}: no schedule of {name} × [{faults}] that keeps its story on a real \
             machine (a {} ms margin, a fault that strikes a holder, a verdict that stays) \
             could be drawn ({e}); try other --faults, or a smaller --margin-ms (0 draws as \
             explore does)",
            search.margin_ms
        );
    }
    let failover = if options.profiles.contains(&FaultProfile::Failover) {
        "; explore's failover profile crashes the primary's machine, which real mode cannot do \
         on one loopback machine (it kills processes): `real --faults failover` without --cases \
         tells the failover story for real"
    } else {
        ""
    };
    format!(
        "case {case}: no schedule of {name} × [{faults}] that real mode can carry out could be \
         drawn ({e}){failover}"
    )
}

/// Prints the schedule of case `case` as it starts: its clients and sections, and its faults one
/// line each, times in ms.
fn print_case(case: u64, scenario: &Scenario) {
    let w = &scenario.workload;
    say!(
        "case {case}: {} clients, {} section(s) each of {} ms{}, {} ms between; {} fault(s):",
        scenario.clients,
        w.acquisitions_per_client,
        w.hold_ms,
        if w.hold_until_validity {
            " (or until the lock's validity)"
        } else {
            ""
        },
        w.think_ms,
        scenario.faults.len()
    );
    for fault in &scenario.faults {
        say!("    {}", fault.describe());
    }
}

/// The default of `real --cases --margin-ms`: how far a drawn schedule's fault spans keep from
/// the thresholds its verdict turns on, and how far [`story_holds`] moves its faults each way.
/// Smaller than `differential`'s 250 ms, which compares verdicts where any disagreement is an
/// alarm: here [`story_holds`] asks the simulation itself whether the story survives the drift,
/// and the span rule has only the real span's own error to cover (a few ms for a signal or a
/// relay, tens for a busy JVM). A real run's client steps drift from the simulation's by about
/// as much: a simulated message takes 1–10 ms, one on loopback a fraction of one, and a client's
/// attempts, accesses and releases add the difference up over a run. (Measured on single-redis ×
/// pause: a pause 216 ms longer than the TTL, struck 570 ms into its holder's section, is
/// UNSAFE in both worlds, and 250 ms would draw it again.)
pub const DEFAULT_MARGIN_MS: u64 = 100;

/// How many other seeds [`story_holds`] runs a story with in the simulation: other latencies,
/// other retry jitter, other phases of the servers' timers.
pub const PROBE_SEEDS: u64 = 2;

/// Whether a real machine can tell `scenario`'s story as the simulation tells it: some fault
/// strikes while a client holds the lock ([`strikes_a_holder`]), and the simulation gives the
/// same verdict (the violations both worlds can see) with every fault but the hold-backs moved
/// `margin_ms` earlier and later, with every critical section `margin_ms` shorter and longer,
/// and with [`PROBE_SEEDS`] other seeds. A verdict that hangs on which waiter's retry comes
/// first after a release, or on a pause landing a few ms before its holder leaves, is the dice's
/// and not the schedule's: a real run rolls other dice. Always true for a margin of 0
/// (`--margin-ms 0`: the search draws as `explore` does).
pub fn story_holds(scenario: &Scenario, margin_ms: u64) -> bool {
    if margin_ms == 0 {
        return true;
    }
    let run = lockcheck_sim::run(scenario);
    // A schedule of no faults (`--faults none`) is the story of contention alone.
    let faulted = scenario.faults.iter().any(|f| !is_hold_back(f));
    if faulted && !strikes_a_holder(scenario, &run.history) {
        return false;
    }
    let verdict = kinds_both_worlds_see(&run.violations);
    let same = |s: &Scenario| kinds_both_worlds_see(&lockcheck_sim::run(s).violations) == verdict;
    let moved = [-(margin_ms as i64), margin_ms as i64]
        .into_iter()
        .map(|by| moved_by(scenario, by));
    let reseeded = (1..=PROBE_SEEDS).map(|k| {
        let mut other = scenario.clone();
        other.seed = lockcheck_core::randomness::mix(scenario.seed ^ k);
        other
    });
    // A client's steps drift from another's too (a waiter that retried eight times drifted eight
    // round trips): a section ending the margin earlier or later re-rolls the race between its
    // release and the waiters' retries.
    let held_otherwise = [-(margin_ms as i64), margin_ms as i64].map(|by| {
        let mut other = scenario.clone();
        other.workload.hold_ms = other.workload.hold_ms.saturating_add_signed(by);
        other
    });
    moved
        .chain(reseeded)
        .chain(held_otherwise)
        .all(|s| s.validate().is_ok() && same(&s))
}

/// Whether a fault of `scenario` (not a hold-back) acts while a client holds the lock in
/// `history` (from its acquisition to its release): a fault on a client while that client holds,
/// any other (a server's, a partition, a delay) while any client holds, over the fault's span (a
/// server's crash until its restart; a clock step or drift from then on). A schedule whose
/// faults all fall between critical sections, or after the last, tells no story a lock can
/// fail: a real case spent on it is ten seconds spent on nothing.
pub fn strikes_a_holder(scenario: &Scenario, history: &History) -> bool {
    // Each client's holding spans, in ms of true time.
    let mut held: Vec<(&str, f64, f64)> = Vec::new();
    let mut since: Vec<(&str, f64)> = Vec::new();
    for e in &history.entries {
        let at = e.true_ns as f64 / 1e6;
        match (&e.op, e.kind) {
            (Op::Acquire { .. }, Kind::Ok) => since.push((&e.node, at)),
            (Op::Release { .. }, Kind::Invoke) => {
                if let Some(i) = since.iter().position(|(n, _)| *n == e.node) {
                    let (node, from) = since.swap_remove(i);
                    held.push((node, from, at));
                }
            }
            _ => {}
        }
    }
    held.extend(since.into_iter().map(|(n, from)| (n, from, f64::INFINITY)));
    let topology = scenario.topology();
    let is_client = |node: &str| {
        topology
            .index_of(node)
            .is_some_and(|i| topology.role(i) == lockcheck_core::topology::Role::Client)
    };
    scenario.faults.iter().enumerate().any(|(i, fault)| {
        let at = fault.at_ms() as f64;
        if is_hold_back(fault) {
            return false;
        }
        let until = match fault {
            Fault::Restart { .. } => return false,
            Fault::Pause { for_ms, .. }
            | Fault::Partition { for_ms, .. }
            | Fault::Loss { for_ms, .. }
            | Fault::Delay { for_ms, .. } => at + *for_ms as f64,
            Fault::ClockJump { .. } | Fault::ClockDrift { .. } => f64::INFINITY,
            Fault::Crash { node, .. } => scenario.faults[i..]
                .iter()
                .find_map(|f| match f {
                    Fault::Restart { node: n, at_ms } if n == node => Some(*at_ms as f64),
                    _ => None,
                })
                .unwrap_or(f64::INFINITY),
            Fault::Failover { .. } => at,
        };
        let own = match fault {
            Fault::Pause { node, .. }
            | Fault::Crash { node, .. }
            | Fault::ClockJump { node, .. }
            | Fault::ClockDrift { node, .. }
                if is_client(node) =>
            {
                Some(node.as_str())
            }
            _ => None,
        };
        held.iter()
            .any(|&(node, from, to)| own.is_none_or(|own| own == node) && from <= until && at < to)
    })
}

/// `scenario` with every fault but the hold-backs starting `by_ms`
/// later (earlier when negative, never before 0).
fn moved_by(scenario: &Scenario, by_ms: i64) -> Scenario {
    let mut s = scenario.clone();
    for fault in &mut s.faults {
        if is_hold_back(fault) {
            continue;
        }
        match fault {
            Fault::Pause { at_ms, .. }
            | Fault::ClockJump { at_ms, .. }
            | Fault::ClockDrift { at_ms, .. }
            | Fault::Crash { at_ms, .. }
            | Fault::Restart { at_ms, .. }
            | Fault::Failover { at_ms, .. }
            | Fault::Partition { at_ms, .. }
            | Fault::Loss { at_ms, .. }
            | Fault::Delay { at_ms, .. } => *at_ms = at_ms.saturating_add_signed(by_ms),
        }
    }
    s
}

/// Reports the failing case `case`: its real report, and what the simulation makes of the same
/// scenario.
fn found(
    search: &RealSearch,
    faults: &str,
    case: u64,
    scenario: &Scenario,
    real: &lockcheck_real::RealRun,
    started: Instant,
) -> anyhow::Result<u8> {
    let outcome = &real.outcome;
    let name = search.options.algorithm.name();
    let worst = Severity::worst(&outcome.violations).unwrap_or(Severity::Unsafe);
    say!(
        "{}: {name} × [{faults}]: found for real at case {case} ({:.0} s in all)",
        worst.word(),
        started.elapsed().as_secs_f64()
    );
    say!("  schedule:");
    for fault in &scenario.faults {
        say!("    {}", fault.describe());
    }
    let mut report = Report::of_real_run(scenario, outcome);
    report.client = real.client.clone();
    print_outcome(&report, outcome);
    let stem = format!("real-{name}-{}", faults.replace(',', "+"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_core::scenario::{Params, Workload};
    use lockcheck_core::Algorithm;

    #[test]
    fn without_faults_a_search_draws_every_profile_real_mode_can_carry_out() {
        assert_eq!(profiles(None).unwrap(), REAL_PROFILES);
        assert!(!REAL_PROFILES.contains(&FaultProfile::Failover));
        // explore's names, and real mode's old name of the restart story.
        assert_eq!(
            profiles(Some("restart, pause")).unwrap(),
            vec![FaultProfile::CrashRestart, FaultProfile::Pause]
        );
        assert!(profiles(Some("nap")).is_err());
        // Each of them draws schedules real mode carries out, kept by the story rules.
        for &profile in REAL_PROFILES {
            let options = ExploreOptions {
                params: Params {
                    ttl_ms: Some(2_000),
                    ..Params::default()
                },
                ..ExploreOptions::new(Algorithm::SingleRedis, vec![profile], 1, 0)
            };
            let cases = Cases::new(options, |s| {
                let held = hold_back_all_but_the_first(s.clone());
                lockcheck_real::support::check(&held).is_ok()
                    && story_holds(&held, DEFAULT_MARGIN_MS)
            })
            .unwrap_or_else(|e| panic!("{profile:?}: {e}"));
            let drawn = cases.draw(0).unwrap_or_else(|e| panic!("{profile:?}: {e}"));
            assert!(!drawn.faults.is_empty(), "{profile:?}");
        }
    }

    /// The pause story of `real --faults pause` (client-0 paused at 400 ms, inside its 1000 ms
    /// section, for `pause_ms`), as a drawn schedule would tell it.
    fn paused_holder(pause_at: u64, pause_ms: u64) -> Scenario {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.params.ttl_ms = Some(2_000);
        s.clients = 2;
        s.workload = Workload {
            acquisitions_per_client: 1,
            hold_ms: 1_000,
            think_ms: 100,
            ..Workload::default()
        };
        s.faults = vec![Fault::Pause {
            at_ms: pause_at,
            node: "client-0".into(),
            for_ms: pause_ms,
        }];
        hold_back_all_but_the_first(s)
    }

    #[test]
    fn a_holder_paused_well_past_its_lease_is_a_story_that_holds() {
        let s = paused_holder(400, 2_800);
        let run = lockcheck_sim::run(&s);
        assert!(strikes_a_holder(&s, &run.history));
        assert!(!kinds_both_worlds_see(&run.violations).is_empty());
        assert!(story_holds(&s, DEFAULT_MARGIN_MS));
    }

    #[test]
    fn a_pause_between_sections_tells_no_story() {
        // client-0 left at about 1000 ms; client-1 holds from then to about 2000 ms; nobody
        // after 2100 ms.
        let s = paused_holder(6_000, 2_800);
        let run = lockcheck_sim::run(&s);
        assert!(!strikes_a_holder(&s, &run.history));
        assert!(!story_holds(&s, DEFAULT_MARGIN_MS));
        assert!(story_holds(&s, 0), "a margin of 0 draws as explore does");
    }

    #[test]
    fn a_pause_that_ends_just_as_its_holder_would_have_left_is_the_dices() {
        // Woken 2100 ms after the acquisition, 100 ms past the TTL: whether client-1 has the
        // lock by then turns on its retry jitter and the latencies, so the verdict changes with
        // the pause moved by the margin or with other seeds.
        let s = paused_holder(400, 1_700);
        assert!(!story_holds(&s, DEFAULT_MARGIN_MS));
    }
}
