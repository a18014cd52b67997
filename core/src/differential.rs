//! The differential verdict: one story, run in the simulation once and on real servers `k`
//! times, and what the two worlds' verdicts say about each other.
//!
//! The simulation is deterministic, so one run is its verdict. A real run is not (the machine
//! decides the interleaving), so a story is run there `k` times; when the real runs split, the
//! story is inconclusive rather than a finding either way. The worlds are compared on what both
//! can see ([`crate::checker::kinds_both_worlds_see`]): two clients inside at once at the
//! resource, a lock that never came free again, a waiter left waiting.
//!
//! The classes, worst first, in the order a search reports them:
//! - [`Class::SimSafeRealUnsafe`]: a false "not found", the kind that makes a verdict a lie;
//! - [`Class::SimUnsafeRealSafe`]: an UNSAFE no real run reproduced (the model may allow what
//!   the server never does);
//! - [`Class::Inconclusive`]: the real runs split;
//! - [`Class::Agree`].
//!
//! Pure data and pure functions: the runs are made by the binary, which has both worlds.

use crate::checker::{kinds_both_worlds_see, Violation, ViolationKind};
use crate::history::History;
use crate::outcome::Outcome;
use serde::{Deserialize, Serialize};

/// What one world made of a story, on what both worlds see.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// The violation kinds found, each once, in the kinds' order.
    pub kinds: Vec<ViolationKind>,
    /// The longest time two holders were inside at once, in ms (rounded down), when mutual
    /// exclusion was broken: a verdict that rests on an overlap shorter than the margin hangs
    /// on milliseconds, which a real machine does not reproduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap_ms: Option<u64>,
}

impl Seen {
    /// What `outcome` shows that both worlds can see.
    pub fn of(outcome: &Outcome) -> Seen {
        Seen {
            kinds: kinds_both_worlds_see(&outcome.violations),
            overlap_ms: longest_overlap_ms(&outcome.history, &outcome.violations),
        }
    }

    /// Whether mutual exclusion was broken (the safety verdict the classes are drawn on).
    pub fn is_unsafe(&self) -> bool {
        self.kinds.iter().any(|k| k.is_safety())
    }

    /// For people: "UNSAFE (MutualExclusion)", "safe", "safe (Stuck)".
    pub fn describe(&self) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(|k| format!("{k:?}")).collect();
        match (self.is_unsafe(), kinds.is_empty()) {
            (true, _) => match self.overlap_ms {
                Some(ms) => format!("UNSAFE ({}; two holders for {ms} ms)", kinds.join(", ")),
                None => format!("UNSAFE ({})", kinds.join(", ")),
            },
            (false, true) => "safe".into(),
            (false, false) => format!("safe ({})", kinds.join(", ")),
        }
    }
}

/// The longest overlap of two holders among `violations` of `history`, in ms: from the later
/// holder's entry to the earlier one's exit (the entries a mutual-exclusion violation names:
/// the earlier's enter, the later's enter, the earlier's exit).
pub fn longest_overlap_ms(history: &History, violations: &[Violation]) -> Option<u64> {
    violations
        .iter()
        .filter(|v| v.kind == ViolationKind::MutualExclusion)
        .filter_map(|v| {
            let later = history.entries.get(*v.entries.get(1)?)?;
            Some(v.at_ns.saturating_sub(later.true_ns) / 1_000_000)
        })
        .max()
}

/// How a story's worlds compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// The simulation found nothing; every real run broke mutual exclusion: a false "not
    /// found", the worst kind.
    SimSafeRealUnsafe,
    /// The simulation broke mutual exclusion; no real run did: an UNSAFE that may be impossible.
    SimUnsafeRealSafe,
    /// The real runs split: some broke mutual exclusion and some did not.
    Inconclusive,
    /// The simulation's verdict turns on the servers' tick phases (their clocks' origins,
    /// `server_clock`), which a real server's start decides: at the phases drawn for the story
    /// it differs from the real runs', at other phases it is theirs.
    AgreeAtAnotherPhase,
    /// Every real run gave the simulation's safety verdict.
    Agree,
}

impl Class {
    /// Every class, worst first.
    pub const ALL: [Class; 5] = [
        Class::SimSafeRealUnsafe,
        Class::SimUnsafeRealSafe,
        Class::Inconclusive,
        Class::AgreeAtAnotherPhase,
        Class::Agree,
    ];

    /// The headline word.
    pub fn word(self) -> &'static str {
        match self {
            Class::SimSafeRealUnsafe => "SIM SAFE, REAL UNSAFE",
            Class::SimUnsafeRealSafe => "SIM UNSAFE, REAL SAFE",
            Class::Inconclusive => "INCONCLUSIVE",
            Class::AgreeAtAnotherPhase => "agree at another phase",
            Class::Agree => "agree",
        }
    }

    /// What it means, in a sentence.
    pub fn meaning(self) -> &'static str {
        match self {
            Class::SimSafeRealUnsafe => {
                "the simulation finds nothing where every real run broke mutual exclusion: a \
                 model is kinder than the server or client it stands for (or the story is \
                 outside what the simulation models: see docs/not-modelled.md)"
            }
            Class::SimUnsafeRealSafe => {
                "the simulation breaks mutual exclusion where no real run did: the model may \
                 allow what the server never does, or the real runs missed a narrow window"
            }
            Class::Inconclusive => {
                "the real runs split: the story's verdict hangs on the machine's timing"
            }
            Class::AgreeAtAnotherPhase => {
                "the simulation's verdict turns on the servers' tick phases, which a real \
                 server's start decides: at other phases it is the real runs' verdict"
            }
            Class::Agree => "both worlds give the same safety verdict",
        }
    }

    /// Its name in files and folders, as `differential.json` writes it: `sim-safe-real-unsafe`.
    pub fn name(self) -> &'static str {
        match self {
            Class::SimSafeRealUnsafe => "sim-safe-real-unsafe",
            Class::SimUnsafeRealSafe => "sim-unsafe-real-safe",
            Class::Inconclusive => "inconclusive",
            Class::AgreeAtAnotherPhase => "agree-at-another-phase",
            Class::Agree => "agree",
        }
    }

    /// Whether it is a disagreement (anything but [`Class::Agree`] and
    /// [`Class::AgreeAtAnotherPhase`]: the real runs' verdict is one the simulation gives).
    pub fn disagrees(self) -> bool {
        !matches!(self, Class::Agree | Class::AgreeAtAnotherPhase)
    }
}

/// The class of a story the simulation judged `sim` and the real runs `real` (at least one).
pub fn classify(sim: &Seen, real: &[Seen]) -> Class {
    if runs_split(real) {
        return Class::Inconclusive;
    }
    match (sim.is_unsafe(), real.first().is_some_and(Seen::is_unsafe)) {
        (false, true) => Class::SimSafeRealUnsafe,
        (true, false) => Class::SimUnsafeRealSafe,
        _ => Class::Agree,
    }
}

/// The class of a story as [`classify`] has it, with the simulation's verdicts at other tick
/// phases of the servers, `at_phases` (the story run with each server's clock origin pinned to
/// each of [`crate::server_clock::PHASE_SWEEP`]): a disagreement the simulation itself gives at
/// one of those phases is [`Class::AgreeAtAnotherPhase`]. A real server's phase is whatever its
/// start gave it, so a verdict that turns on the phase is only comparable as a set.
pub fn classify_over_phases(sim: &Seen, at_phases: &[Seen], real: &[Seen]) -> Class {
    let class = classify(sim, real);
    let real_unsafe = real.first().is_some_and(Seen::is_unsafe);
    match class {
        Class::SimSafeRealUnsafe | Class::SimUnsafeRealSafe
            if at_phases.iter().any(|p| p.is_unsafe() == real_unsafe) =>
        {
            Class::AgreeAtAnotherPhase
        }
        other => other,
    }
}

/// Why a disagreement of `class` hangs on milliseconds, when it does: the world that broke
/// mutual exclusion did so with two holders inside at once for less than `margin_ms` (in every
/// run that broke it), a window a real machine's timing does not reproduce. `None` for an
/// agreement, or a disagreement that stands clear of the margin.
pub fn overlap_within_margin(
    class: Class,
    sim: &Seen,
    real: &[Seen],
    margin_ms: u64,
) -> Option<String> {
    let short = |seen: &[&Seen]| {
        let longest = seen.iter().filter_map(|s| s.overlap_ms).max()?;
        (longest < margin_ms).then_some(longest)
    };
    let unsafe_real: Vec<&Seen> = real.iter().filter(|r| r.is_unsafe()).collect();
    match class {
        Class::Agree | Class::AgreeAtAnotherPhase => None,
        Class::SimUnsafeRealSafe => short(&[sim]).map(|ms| {
            format!("the simulation's two holders were inside at once for only {ms} ms (margin {margin_ms} ms)")
        }),
        Class::SimSafeRealUnsafe | Class::Inconclusive => short(&unsafe_real).map(|ms| {
            format!("the real runs' two holders were inside at once for at most {ms} ms (margin {margin_ms} ms)")
        }),
    }
}

/// Whether the real runs so far, `real`, split (some broke mutual exclusion, some did not): the
/// story is then inconclusive whatever more runs show.
pub fn runs_split(real: &[Seen]) -> bool {
    let unsafe_runs = real.iter().filter(|r| r.is_unsafe()).count();
    unsafe_runs != 0 && unsafe_runs != real.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(kinds: &[ViolationKind]) -> Seen {
        Seen {
            kinds: kinds.to_vec(),
            overlap_ms: None,
        }
    }

    #[test]
    fn the_classes_follow_the_safety_verdicts_of_both_worlds() {
        let safe = seen(&[]);
        let unsafe_ = seen(&[ViolationKind::MutualExclusion]);
        let stuck = seen(&[ViolationKind::Stuck]);
        assert_eq!(
            classify(&safe, &[unsafe_.clone(), unsafe_.clone()]),
            Class::SimSafeRealUnsafe
        );
        assert_eq!(
            classify(&unsafe_, &[safe.clone(), stuck.clone()]),
            Class::SimUnsafeRealSafe,
            "a liveness finding is not a safety verdict"
        );
        assert_eq!(
            classify(&safe, &[safe.clone(), unsafe_.clone()]),
            Class::Inconclusive
        );
        assert_eq!(
            classify(&unsafe_, &[safe.clone(), unsafe_.clone()]),
            Class::Inconclusive
        );
        assert_eq!(classify(&safe, std::slice::from_ref(&stuck)), Class::Agree);
        assert_eq!(
            classify(&unsafe_, std::slice::from_ref(&unsafe_)),
            Class::Agree
        );
        assert!(runs_split(&[safe.clone(), unsafe_.clone()]));
        assert!(!runs_split(&[safe.clone(), safe]));
    }

    #[test]
    fn a_disagreement_the_simulation_gives_up_at_another_tick_phase_is_no_disagreement() {
        let safe = seen(&[]);
        let unsafe_ = seen(&[ViolationKind::MutualExclusion]);
        let real_safe = [safe.clone(), safe.clone()];
        // UNSAFE at the drawn phase, safe at another: the real runs' safe is one of its verdicts.
        let phases = [unsafe_.clone(), safe.clone()];
        let class = classify_over_phases(&unsafe_, &phases, &real_safe);
        assert_eq!(class, Class::AgreeAtAnotherPhase);
        assert!(!class.disagrees());
        // UNSAFE at every phase: a disagreement still.
        let every = [unsafe_.clone(), unsafe_.clone()];
        assert_eq!(
            classify_over_phases(&unsafe_, &every, &real_safe),
            Class::SimUnsafeRealSafe
        );
        // The first kind too: safe at every phase, real unsafe.
        let never = [safe.clone(), safe.clone()];
        assert_eq!(
            classify_over_phases(&safe, &never, std::slice::from_ref(&unsafe_)),
            Class::SimSafeRealUnsafe
        );
        // Split real runs stay inconclusive, agreements stay agreements.
        assert_eq!(
            classify_over_phases(&safe, &phases, &[safe.clone(), unsafe_.clone()]),
            Class::Inconclusive
        );
        assert_eq!(
            classify_over_phases(&safe, &phases, &real_safe),
            Class::Agree
        );
    }

    #[test]
    fn a_disagreement_resting_on_a_short_overlap_is_within_margin() {
        let safe = seen(&[]);
        let brief = Seen {
            kinds: vec![ViolationKind::MutualExclusion],
            overlap_ms: Some(3),
        };
        let long = Seen {
            kinds: vec![ViolationKind::MutualExclusion],
            overlap_ms: Some(900),
        };
        let why = overlap_within_margin(
            Class::SimUnsafeRealSafe,
            &brief,
            std::slice::from_ref(&safe),
            250,
        );
        assert!(why.unwrap().contains("only 3 ms"));
        assert_eq!(
            overlap_within_margin(
                Class::SimUnsafeRealSafe,
                &long,
                std::slice::from_ref(&safe),
                250
            ),
            None
        );
        assert!(overlap_within_margin(
            Class::SimSafeRealUnsafe,
            &safe,
            &[brief.clone(), brief.clone()],
            250
        )
        .is_some());
        assert_eq!(
            overlap_within_margin(Class::SimSafeRealUnsafe, &safe, &[brief, long.clone()], 250),
            None,
            "one long overlap is enough"
        );
        assert_eq!(
            overlap_within_margin(Class::Agree, &long, std::slice::from_ref(&long), 250),
            None
        );
    }

    #[test]
    fn worst_first_and_named_as_the_summary_writes_them() {
        let mut sorted = Class::ALL.to_vec();
        sorted.sort();
        assert_eq!(sorted, Class::ALL.to_vec());
        for class in Class::ALL {
            assert_eq!(
                serde_json::to_value(class).unwrap(),
                serde_json::Value::from(class.name())
            );
        }
        assert!(!Class::Agree.disagrees());
        assert!(Class::Inconclusive.disagrees());
    }

    #[test]
    fn described_for_people() {
        assert_eq!(seen(&[]).describe(), "safe");
        assert_eq!(
            seen(&[ViolationKind::MutualExclusion, ViolationKind::Stuck]).describe(),
            "UNSAFE (MutualExclusion, Stuck)"
        );
        assert_eq!(
            seen(&[ViolationKind::Deadlock]).describe(),
            "safe (Deadlock)"
        );
    }
}
