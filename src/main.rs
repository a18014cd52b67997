//! `lockcheck`: which distributed lock can you trust, under which faults?
//!
//! This file only parses the command line and hands each verb to its module under `cli/`; see
//! `lockcheck --help`.

mod cli;

use clap::Parser;
use cli::{Cli, Command, EXIT_USAGE};
use std::process::ExitCode;

/// mimalloc instead of the system allocator: a simulated run allocates and frees a message, a
/// timer and a future for every request, and glibc's malloc was a fifth of a run's instructions
/// (mimalloc takes 15 % fewer in all; see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // madsim warns on every runtime after the first in a thread that std's HashMap
                // seeds are not deterministic; lockcheck uses no std HashMap in simulated code.
                .unwrap_or_else(|_| {
                    // The ZooKeeper client warns of every failed reconnection, which a real run
                    // with pauses and partitions causes on purpose.
                    tracing_subscriber::EnvFilter::new(
                        "warn,madsim::sim::rand=error,zookeeper_client=error",
                    )
                }),
        )
        .with_writer(std::io::stderr)
        .init();
    lockcheck_real::signals::take_over();
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Errors quote input (names, paths, a client's stderr): never to the terminal raw.
            let message = message(&e);
            eprintln!(
                "lockcheck: {}",
                lockcheck_core::input::terminal_text(&message)
            );
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// An error and its causes on one line, each said once: the library errors already name their
/// source in their own text (`{path}: {source}`), and repeating it reads as two failures.
fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

/// Hands a verb to its module; the exit code it returns, or an error for bad input.
fn dispatch(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Run {
            file,
            report,
            script,
            variant,
        } => cli::run::run_file(
            &file,
            script.as_deref(),
            variant.as_deref(),
            report.as_deref(),
        ),
        Command::Explore(args) => cli::explore::explore(*args),
        Command::Differential(args) => cli::differential::differential(*args),
        Command::Matrix(args) => cli::matrix::matrix(args),
        Command::Merge { dirs, out } => cli::matrix::merge(&dirs, &out),
        Command::Check(args) => cli::check::check(args),
        Command::Replay { report } => cli::run::replay(&report),
        Command::Timeline { report } => cli::run::timeline(&report),
        Command::Real(args) => cli::real::real(*args),
    }
}
