//! Deterministic simulation of distributed lock algorithms under faults, on [madsim].
//!
//! A run is a [`Scenario`]: an algorithm, its parameters, a workload, a seed and a fault schedule.
//! [`runner::run`] builds one madsim node per client and server plus the protected resource,
//! lets the [`nemesis`] strike at the scheduled true times, and returns the [`History`] with the
//! [`checker`]'s verdict. The same scenario always yields the same history, byte for byte.
//! [`explore`] searches fault schedules with proptest and shrinks what it finds; [`report`] writes
//! and replays the result, and [`timeline`] draws it as a self-contained HTML page. [`cell`] is
//! one search with its persisted failures ([`regression`]) replayed first; [`matrix`] runs every
//! algorithm × fault profile, and [`expectations`] checks searches against the verdicts they
//! must reach.
//!
//! The parts follow Jepsen's split: [`workload`] (what clients do), [`nemesis`] (faults),
//! [`checker`] (what must hold), [`history`] (what happened), with the simulated servers in
//! [`redis`] and the resource in [`resource`]. Per-node clocks ([`clock`]) and disks ([`disk`])
//! live outside the nodes, in the [`world`], as FoundationDB's simulator owns clocks and disks.
//!
//! [madsim]: https://docs.rs/madsim

#[cfg(not(madsim))]
compile_error!(
    "lockcheck-sim must be compiled with `--cfg madsim` (set in .cargo/config.toml). \
     If you see this, RUSTFLAGS or CARGO_ENCODED_RUSTFLAGS in your environment replaced that \
     setting: unset them, or add `--cfg madsim` to them."
);

pub mod cell;
pub mod checker;
pub mod client;
pub mod clock;
pub mod disk;
pub mod env;
pub mod expectations;
pub mod explore;
pub mod history;
pub mod input;
pub mod limits;
pub mod lock;
pub mod matrix;
pub mod message_faults;
pub mod mysql;
pub mod nemesis;
pub mod net;
pub mod output;
pub mod redis;
pub mod regression;
pub mod report;
pub mod resource;
pub mod runner;
pub mod scenario;
pub mod signal;
pub mod timeline;
pub mod timer;
pub mod topology;
pub mod workload;
pub mod world;
pub mod zookeeper;

pub use history::History;
pub use runner::{run, Outcome};
pub use scenario::{Algorithm, Scenario, ScenarioError};
