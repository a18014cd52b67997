//! The search for lock violations, over any world's runs.
//!
//! A run belongs to a world: the deterministic simulation of `lockcheck-sim`, or real servers
//! (`lockcheck-real`). The search decides which runs to make and what they mean: [`explore`]
//! draws fault schedules and workloads with proptest from a seed, runs them in a [`World`], and
//! shrinks the first failure to a minimal one; [`cases`] hands the same draws one at a time to a
//! world that runs them itself (`lockcheck real --cases`). One [`ExploreOptions`] says what to
//! search in either world.
//!
//! Around the search: a [`cell`] is one search with the failures persisted by earlier runs
//! ([`regression`]) replayed first and its report written; the [`matrix`] plans, runs, writes
//! and merges every algorithm × fault profile cell; [`expectations`] checks searches and stories
//! against the verdicts the literature says they must reach.
//!
//! Like the simulator it searches, every crate of the workspace is built with `--cfg madsim`
//! (`.cargo/config.toml`); this one refuses to compile without it rather than compile against
//! another world's runtime.
//!
//! ```no_run
//! use lockcheck_core::profile::FaultProfile;
//! use lockcheck_core::Algorithm;
//! use lockcheck_search::explore::{explore, Exploration, ExploreOptions};
//!
//! // Case i of seed 1 is the same schedule on any machine, so the finding is too.
//! let options = ExploreOptions::new(Algorithm::SingleRedis, vec![FaultProfile::Pause], 200, 1);
//! match explore(&options, &|_cases| {}).expect("valid options") {
//!     Exploration::Found(finding) => println!("{}", finding.report(&options.profiles, 1).summary),
//!     Exploration::NotFound(coverage) => println!("nothing in {} cases", coverage.cases),
//! }
//! ```

#[cfg(not(madsim))]
compile_error!(
    "lockcheck-search must be compiled with `--cfg madsim`. In a checkout, `cargo build`, `cargo run` \
     and `cargo test` take it from .cargo/config.toml, unless RUSTFLAGS or \
     CARGO_ENCODED_RUSTFLAGS is set in your environment (it replaces that setting: unset it, or \
     add `--cfg madsim` to it). `cargo install` never reads .cargo/config.toml: install with \
     RUSTFLAGS=\"--cfg madsim\" cargo install --path . (or --git URL)."
);

pub mod cases;
pub mod cell;
pub mod expectations;
pub mod explore;
pub mod matrix;
pub mod regression;
pub mod world;

pub use explore::ExploreOptions;
pub use world::{Simulation, World};
