//! A ledger of every server process started, for a check from outside that none is left.
//!
//! Each test checks that the servers of its own runs are gone; what no test can see is a server
//! leaked by a test that panicked half-way, or by a test binary killed by its harness. When
//! `LOCKCHECK_PID_LEDGER` names a file, every PID the launcher starts is appended to it as
//! `PID BINARY`; CI (`.ci/run`) sets it for the whole test suite and fails when any of those
//! PIDs still runs that binary afterwards.

use std::io::Write;
use std::path::Path;

/// The variable naming the ledger file.
pub const LEDGER_VAR: &str = "LOCKCHECK_PID_LEDGER";

/// Appends `pid` (running `binary`) to the ledger, if there is one. Best effort: a ledger that
/// cannot be written is logged, never a reason to fail a run.
pub fn record(pid: u32, binary: &str) {
    let Some(path) = std::env::var_os(LEDGER_VAR) else {
        return;
    };
    let line = format!("{pid} {binary}\n");
    // One write of one short line in append mode: lines of parallel tests do not interleave.
    let result = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = result {
        tracing::warn!("PID ledger {}: {e}", Path::new(&path).display());
    }
}
