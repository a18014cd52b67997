//! Searching for violations: proptest generates fault schedules and workloads, runs each in a
//! [`World`] (the simulator unless told otherwise), and shrinks the first failing case to a
//! minimal one.
//!
//! The search is itself deterministic: case `i` is drawn by proptest from a generator seeded with
//! `--seed` and `i` alone, and carries its own madsim seed (which shrinking leaves alone), so the
//! same command finds the same minimal counterexample on any machine. Because no case depends on
//! another, cases run on parallel threads (`jobs`, each case in its own madsim runtime) and on
//! separate machines (`shard`) without changing the result: the search reports the failing case
//! of lowest index, and shrinks it alone, in order. Nothing is read from the environment
//! (proptest's `PROPTEST_*` variables are overridden).
//!
//! Here, the options and the search itself; beside it, `generator.rs` (what a case is drawn
//! from) and `shrink.rs` (what a failing case is shrunk by), the two halves of proptest's work
//! that the search takes apart to run cases in parallel and in shards.

use crate::world::{Simulation, World};
use lockcheck_core::checker::{Severity, ViolationKind};
use lockcheck_core::outcome::Outcome;
use lockcheck_core::profile::{FaultProfile, DEFAULT_MAX_DRIFT};
use lockcheck_core::report::{Report, Search};
use lockcheck_core::scenario::{Algorithm, Params, Scenario, ScenarioError};
use lockcheck_core::verdict::{Coverage, Verdict};
use proptest::strategy::ValueTree;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod generator;
mod shrink;

use generator::case_tree;
pub use generator::{draw, scenarios, scenarios_where};
use shrink::shrink;

/// What to search.
#[derive(Clone, Debug, PartialEq)]
pub struct ExploreOptions {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Fault families; their faults are combined in each case.
    pub profiles: Vec<FaultProfile>,
    /// Fixed parameters (TTL, fencing, persistence, …). `crash-delayed-restart` raises
    /// `restart_delay_ms` to at least the TTL.
    pub params: Params,
    /// Cases to try before concluding that nothing was found.
    pub cases: u32,
    /// Seed of the search.
    pub seed: u64,
    /// The largest clock drift `clock-drift` draws, as a fraction (0.05: rates in [0.95, 1.05]).
    pub max_drift: f64,
    /// The longest partition `partition` draws, in ms (default: twice the lease). A ZooKeeper
    /// session survives a partition shorter than its timeout; this is how to search only those.
    pub max_partition_ms: Option<u64>,
    /// Count only safety violations (two holders, a lock freed under its holder): a search for
    /// what breaks mutual exclusion, past the liveness failures it would otherwise stop at.
    pub safety_only: bool,
    /// Count only violations of this kind: `MutualExclusion` is the sense of "unsafe" in the
    /// known-results table (two clients inside at once at the resource), which another safety
    /// violation found first would otherwise stand in for.
    pub only: Option<ViolationKind>,
    /// Threads running cases at once (at least 1). Never changes the result.
    pub jobs: usize,
    /// This search's slice of the case space: shard `index` (0-based) of `count` takes the cases
    /// whose index is `index` modulo `count`. Joined by lowest failing case, the shards' results
    /// are the unsharded search's.
    pub shard: Shard,
    /// Stop taking new cases after this much wall time (`--budget-seconds`). The cases run are
    /// still a prefix of the case space and are counted, so the same verdict is reproduced by a
    /// search of exactly that many cases; `None` runs all `cases`.
    pub time_limit: Option<Duration>,
    /// Whether the clients check their lock before each access (`workload.check_before_access`):
    /// never (the default, which keeps every search's case stream as it was), in half the cases
    /// (the differential search, since a careful client is where a model's timing — when a
    /// client learns its session is gone — decides the verdict), or always (a team pinning the
    /// client it writes).
    pub careful: Careful,
}

/// Which clients of a search check their lock before each access ([`ExploreOptions::careful`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Careful {
    /// None.
    #[default]
    Never,
    /// Those of half the cases, drawn (a failure shrinks towards the classic client).
    Half,
    /// All of them.
    Always,
}

impl Careful {
    /// Every value, in order.
    pub const ALL: [Careful; 3] = [Careful::Never, Careful::Half, Careful::Always];

    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Careful::Never => "never",
            Careful::Half => "half",
            Careful::Always => "always",
        }
    }

    /// The value named `name`, or an error naming the choices.
    pub fn parse(name: &str) -> Result<Careful, String> {
        Careful::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                format!(
                    "careful '{}': expected never, half or always",
                    lockcheck_core::input::clip(name)
                )
            })
    }

    /// Whether it is the default ([`Careful::Never`]).
    pub fn is_never(&self) -> bool {
        *self == Careful::Never
    }
}

/// A slice of a search's case space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which slice, from 0.
    pub index: u32,
    /// How many slices.
    pub count: u32,
}

impl Default for Shard {
    /// The whole case space.
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// Parses `I/N` (1-based, as people count: `1/2` and `2/2`).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard '{text}': expected I/N with 1 ≤ I ≤ N, e.g. 1/4");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (i, n): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if n == 0 || i == 0 || i > n {
            return Err(bad());
        }
        Ok(Shard {
            index: i - 1,
            count: n,
        })
    }

    /// Whether the slice exists (`index` < `count`).
    pub fn check(self) -> Result<(), String> {
        if self.count > lockcheck_core::limits::MAX_CASES {
            return Err(format!(
                "--shard: at most {} shards, got {}",
                lockcheck_core::limits::MAX_CASES,
                self.count
            ));
        }
        if self.count == 0 || self.index >= self.count {
            return Err(format!(
                "shard {} of {} does not exist",
                self.index + 1,
                self.count
            ));
        }
        Ok(())
    }

    /// The global index of this shard's `slot`-th case.
    pub fn case(self, slot: u32) -> u64 {
        u64::from(slot) * u64::from(self.count) + u64::from(self.index)
    }

    /// Whether global case `case` is in this slice.
    pub fn owns(self, case: u64) -> bool {
        case % u64::from(self.count) == u64::from(self.index)
    }

    /// How many of the first `cases` cases are this shard's.
    pub fn slots(self, cases: u32) -> u32 {
        let (cases, index, count) = (
            u64::from(cases),
            u64::from(self.index),
            u64::from(self.count),
        );
        (cases.saturating_sub(index).div_ceil(count)) as u32
    }
}

impl ExploreOptions {
    /// Options with the defaults for everything but the algorithm, profiles, cases and seed.
    pub fn new(algorithm: Algorithm, profiles: Vec<FaultProfile>, cases: u32, seed: u64) -> Self {
        ExploreOptions {
            algorithm,
            profiles,
            params: Params::default(),
            cases,
            seed,
            max_drift: DEFAULT_MAX_DRIFT,
            max_partition_ms: None,
            safety_only: false,
            only: None,
            jobs: 1,
            shard: Shard::default(),
            time_limit: None,
            careful: Careful::Never,
        }
    }
}

/// The result of a search: a shrunk [`Finding`], or the [`Coverage`] of a search that found
/// nothing (the shared vocabulary of [`lockcheck_core::verdict`]).
pub type Exploration = Verdict<Box<Finding>>;

/// A minimal failing case.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The shrunk scenario: runnable as is.
    pub scenario: Scenario,
    /// Its outcome.
    pub outcome: Outcome,
    /// The first failing case, before shrinking.
    pub original: Scenario,
    /// Its index in the case space (the same in every shard).
    pub case_index: u64,
    /// Simulated time covered by this search's cases up to the first failure (it included), in ns.
    pub simulated_ns: u64,
    /// Cases this search ran before the first failure (it included).
    pub cases: u32,
    /// Runs spent shrinking.
    pub shrink_runs: u32,
    /// Wall time spent shrinking, for rates people read (never written into a report: it depends
    /// on the machine).
    pub shrink_elapsed: Duration,
}

impl Finding {
    /// The report of this finding, found by a search of `profiles` from `seed`.
    pub fn report(&self, profiles: &[FaultProfile], seed: u64) -> Report {
        Report::of_search(
            &self.scenario,
            &self.outcome,
            Search {
                profiles: profiles.to_vec(),
                seed,
                cases: self.cases,
                shrink_runs: self.shrink_runs,
                original: self.original.clone(),
            },
        )
    }
}

/// Why a search could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    /// proptest gave up (too many generated cases were rejected as invalid).
    #[error("exploration aborted: {0}")]
    Aborted(String),
    /// The options cannot be searched as given.
    #[error("{0}")]
    Invalid(String),
    /// The parameters do not fit the algorithm.
    #[error(transparent)]
    Params(#[from] ScenarioError),
}

/// Whether `options` can be searched as given: what [`explore`] refuses before running a case.
/// The one check of search options, whoever gives them (`explore`'s flags, an expectations entry,
/// a matrix cell), so callers that read options from a file can name the entry at fault first.
/// Each message names the option as a file names it, then as a flag.
pub fn check_options(options: &ExploreOptions) -> Result<(), ExploreError> {
    let invalid = |m: String| Err(ExploreError::Invalid(m));
    use lockcheck_core::limits;
    // A time budget runs as many cases as fit (`u32::MAX` stands for "no count").
    let most = match options.time_limit {
        None => limits::MAX_CASES,
        Some(_) => u32::MAX,
    };
    limits::within("cases (--cases)", options.cases, 1, most).map_err(ExploreError::Invalid)?;
    if !(0.0..1.0).contains(&options.max_drift) {
        return invalid(format!(
            "max_drift must be in [0, 1) (--max-drift), got {}",
            lockcheck_core::input::float_text(options.max_drift)
        ));
    }
    if let Some(ms) = options.max_partition_ms {
        limits::positive_ms("max_partition_ms (--max-partition-ms)", ms)
            .map_err(ExploreError::Invalid)?;
    }
    options.params.check_for(options.algorithm)?;
    if options.profiles.contains(&FaultProfile::Failover) && options.params.redis.replicas == 0 {
        return invalid(
            "the failover profile needs a replica to promote: set params.redis.replicas (--replicas) \
             to at least 1"
                .into(),
        );
    }
    limits::within("--jobs", options.jobs, 1, limits::MAX_JOBS).map_err(ExploreError::Invalid)?;
    options.shard.check().map_err(ExploreError::Invalid)?;
    if options.time_limit == Some(Duration::ZERO) {
        return invalid("a time budget must be longer than zero".into());
    }
    if let Some(kind) = options
        .only
        .filter(|k| options.safety_only && !k.is_safety())
    {
        // It would count nothing, and find nothing however long it searched.
        return invalid(format!(
            "--violation {} is not a safety violation and --safety-only counts only those: \
             drop --safety-only to count it",
            kind.name()
        ));
    }
    Ok(())
}

/// Searches for a violation; `progress(cases_run)` is called after every case until the first
/// failure (shrinking runs are not counted as cases), from the threads that run them.
pub fn explore(
    options: &ExploreOptions,
    progress: &(dyn Fn(u32) + Sync),
) -> Result<Exploration, ExploreError> {
    explore_noting(options, progress, &|_, _, _| {})
}

/// [`explore`], telling `found(case, scenario, outcome)` of the failing case as drawn, before
/// shrinking it: what a search keeps at once, so that an interruption while shrinking (which
/// may take thousands of runs) does not lose the failure.
pub fn explore_noting(
    options: &ExploreOptions,
    progress: &(dyn Fn(u32) + Sync),
    found: &dyn Fn(u64, &Scenario, &Outcome),
) -> Result<Exploration, ExploreError> {
    explore_in(&Simulation, options, progress, found)
}

/// [`explore_noting`] in `world`: every case and every shrinking candidate is run there.
pub fn explore_in(
    world: &dyn World,
    options: &ExploreOptions,
    progress: &(dyn Fn(u32) + Sync),
    found: &dyn Fn(u64, &Scenario, &Outcome),
) -> Result<Exploration, ExploreError> {
    check_options(options)?;
    let shard = options.shard;
    let started = Instant::now();
    let slots = shard.slots(options.cases);
    let next = AtomicU32::new(0);
    // The first slot left unrun because the time budget ran out: results from later slots (a
    // slower thread may still have been running one) are dropped, so the cases counted are
    // always a prefix of the case space.
    let cut = AtomicU32::new(u32::MAX);
    let first_failure = AtomicU64::new(u64::MAX);
    let done = AtomicU32::new(0);
    let results: Mutex<BTreeMap<u64, (bool, u64)>> = Mutex::new(BTreeMap::new());
    let aborted: Mutex<Option<String>> = Mutex::new(None);
    // The outcome of each failing case, so the lowest is not run again before shrinking.
    let failures: Mutex<BTreeMap<u64, Outcome>> = Mutex::new(BTreeMap::new());
    let worker = || {
        let strategy = scenarios(options);
        loop {
            let slot = next.fetch_add(1, Ordering::Relaxed);
            if slot >= slots {
                return;
            }
            if options
                .time_limit
                .is_some_and(|limit| started.elapsed() >= limit)
            {
                cut.fetch_min(slot, Ordering::Relaxed);
                return;
            }
            let case = shard.case(slot);
            // Slots are handed out in order: past the lowest failure, nothing can matter.
            if case > first_failure.load(Ordering::Relaxed) {
                return;
            }
            let scenario = match case_tree(&strategy, options.seed, case) {
                Ok(tree) => tree.current(),
                Err(reason) => {
                    *aborted.lock().expect("no worker panics holding it") = Some(reason);
                    first_failure.fetch_min(0, Ordering::Relaxed);
                    return;
                }
            };
            let outcome = world.run(&scenario);
            if let Some(refusal) = outcome.refusal(&scenario) {
                // A case too long to keep: the search is refused, as `run` refuses it.
                *aborted.lock().expect("no worker panics holding it") =
                    Some(format!("case {case}: {refusal}"));
                first_failure.fetch_min(0, Ordering::Relaxed);
                return;
            }
            let failed = fails(options, &outcome);
            if failed {
                first_failure.fetch_min(case, Ordering::Relaxed);
            }
            let simulated = outcome.history.entries.last().map_or(0, |e| e.true_ns);
            if failed {
                failures
                    .lock()
                    .expect("no worker panics holding it")
                    .insert(case, outcome);
            }
            results
                .lock()
                .expect("no worker panics holding it")
                .insert(case, (failed, simulated));
            progress(done.fetch_add(1, Ordering::Relaxed) + 1);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..options.jobs {
            scope.spawn(worker);
        }
        worker();
    });
    if let Some(reason) = aborted.into_inner().expect("the workers are done") {
        return Err(ExploreError::Aborted(reason));
    }
    let mut results = results.into_inner().expect("the workers are done");
    let cut = cut.into_inner();
    if cut < slots {
        results.retain(|&case, _| case < shard.case(cut));
    }
    let failure = results
        .iter()
        .find(|(_, (failed, _))| *failed)
        .map(|(&c, _)| c);
    let upto = failure.unwrap_or(u64::MAX);
    let covered = results.range(..=upto);
    let cases = covered.clone().count() as u32;
    let simulated_ns = covered.map(|(_, (_, ns))| ns).sum();
    let Some(case) = failure else {
        return Ok(Exploration::NotFound(Coverage {
            cases,
            simulated_ns,
        }));
    };
    let first = failures
        .into_inner()
        .expect("the workers are done")
        .remove(&case)
        .expect("every failing case's outcome is kept");
    let drawn = draw(&scenarios(options), options.seed, case)?;
    found(case, &drawn, &first);
    let shrinking = Instant::now();
    let (original, scenario, outcome, shrink_runs) = shrink(world, options, case, first)?;
    Ok(Exploration::Found(Box::new(Finding {
        original,
        scenario,
        outcome,
        case_index: case,
        simulated_ns,
        cases,
        shrink_runs,
        shrink_elapsed: shrinking.elapsed(),
    })))
}

/// Whether `outcome` fails the search (with `safety_only`, only safety violations do; with
/// `only`, only violations of that kind).
pub fn fails(options: &ExploreOptions, outcome: &Outcome) -> bool {
    worst_counted(options, &outcome.violations).is_some()
}

/// The worst of the violations in `violations` that `options` counts ([`fails`]): what a
/// search's finding is called (UNSAFE, DEADLOCK, STUCK, ORDER), and what its shrinking keeps.
pub fn worst_counted(
    options: &ExploreOptions,
    violations: &[lockcheck_core::checker::Violation],
) -> Option<Severity> {
    violations
        .iter()
        .filter(|v| counts(options, v.kind))
        .map(|v| v.kind.severity())
        .min()
}

/// Whether a search with `options` counts violations of `kind` (`safety_only`, `only`).
pub fn counts(options: &ExploreOptions, kind: ViolationKind) -> bool {
    (!options.safety_only || kind.is_safety()) && options.only.is_none_or(|k| kind == k)
}
