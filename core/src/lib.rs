//! What both of lockcheck's worlds share: the simulation (`lockcheck-sim`) and real servers
//! (`lockcheck-real`) are peers built on this crate, as madsim's `sim` and `std` trees are.
//!
//! A run is a [`Scenario`]: an algorithm, its parameters, a workload, a seed and a fault schedule.
//! Whichever world carries it out, the same pieces describe and judge it, after Jepsen's split:
//! - [`workload`]: what every client does (acquire, touch the [`resource`], release), written once
//!   over the algorithms' `Env` and a world's [`workload::ClientSide`];
//! - [`schedule`]: the scenario's faults expanded into the one [`schedule::Actions`] both
//!   nemeses apply, and the [`profile`]s searches draw them from;
//! - [`history`]: what happened, as both worlds record it; [`topology`] names its nodes;
//! - [`checker`]: what must hold, judged from the history alone, giving an [`Outcome`];
//! - [`report`]: an outcome a person (or CI) reads and replays, and [`timeline`] draws it as a
//!   self-contained HTML page.
//!
//! [`backend`] holds one module per kind of server (its parameter group, its rules, its lease,
//! its servers' names), registered once; [`registry`] lists every algorithm and builds it on a world's stores; [`clock`] is the per-node clock arithmetic
//! both worlds' clock faults follow; [`input`], [`output`] and [`limits`] read, write and bound
//! what users hand in.

pub mod backend;
pub mod checker;
pub mod clock;
pub mod differential;
pub mod history;
pub mod input;
pub mod limits;
pub mod margin;
pub mod message_faults;
pub mod outcome;
pub mod output;
pub mod persistence;
pub mod profile;
pub mod randomness;
pub mod registry;
pub mod report;
pub mod report_file;
pub mod resource;
pub mod scenario;
pub mod schedule;
pub mod server_clock;
pub mod timeline;
pub mod topology;
pub mod verdict;
pub mod workload;

pub use history::History;
pub use outcome::Outcome;
pub use report::Report;
pub use scenario::{Algorithm, Scenario, ScenarioError};
