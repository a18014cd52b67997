//! Deterministic simulation of distributed lock algorithms under faults, on [madsim].
//!
//! A run is a [`Scenario`](lockcheck_core::Scenario) (defined, with everything else both worlds
//! share, in `lockcheck-core`). [`runner::run`] builds one madsim node per client and server plus
//! the protected resource, lets the [`nemesis`] strike at the scheduled true times, and returns
//! the history with the checker's verdict ([`Outcome`](lockcheck_core::Outcome)). The same
//! scenario always yields the same history, byte for byte; [`runner::replay`] proves it for a
//! report. The search over these runs (explore, shrinking, the matrix, the expectations) is
//! the crate `lockcheck-search`: this crate runs one scenario, that one decides which to run.
//!
//! The simulated servers are in [`redis`], [`zookeeper`] and [`mysql`]: each is a
//! [`server::Server`] (a model behind the network), run by the one process in [`server`] that
//! owns what every server shares (its disk across crashes, restarts, its timer, closed
//! connections); [`backends`] says which one a backend runs. The resource is in [`resource`],
//! the clients in [`client`]; messages, opaque to it, travel through [`net`]. Per-node clocks
//! live in the [`world`], link state in [`links`], and disks ([`disk`]) on each server's
//! [`server::Machine`]: outside the nodes, as FoundationDB's simulator owns clocks and disks.
//!
//! [madsim]: https://docs.rs/madsim

#[cfg(not(madsim))]
compile_error!(
    "lockcheck-sim must be compiled with `--cfg madsim`. In a checkout, `cargo build`, `cargo run` \
     and `cargo test` take it from .cargo/config.toml, unless RUSTFLAGS or \
     CARGO_ENCODED_RUSTFLAGS is set in your environment (it replaces that setting: unset it, or \
     add `--cfg madsim` to it). `cargo install` never reads .cargo/config.toml: install with \
     RUSTFLAGS=\"--cfg madsim\" cargo install --path . (or --git URL)."
);

pub mod backends;
pub mod client;
pub mod disk;
pub mod env;
pub mod etcd;
pub mod links;
pub mod mysql;
pub mod nemesis;
pub mod net;
pub mod redis;
pub mod resource;
pub mod runner;
pub mod script_file;
pub mod server;
pub mod signal;
pub mod timer;
pub mod world;
pub mod zookeeper;

pub use runner::{replay, run, run_keeping};
