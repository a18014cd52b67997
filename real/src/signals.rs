//! SIGINT and SIGTERM during a real run: caught from before the first server starts, remembered,
//! and acted on wherever the run is (waiting for a server, inside `mariadb-install-db`, in the
//! workload), so that every process started is stopped and every directory removed.
//!
//! The handler only stores the signal's number (an atomic store is async-signal-safe); the run
//! looks at it. Installing it replaces an inherited "ignore" (a non-interactive shell starts a
//! background job with SIGINT ignored): `kill -INT` still stops a run started with `&`. Outside a
//! run the signals take their default action, so a program that runs several (a test binary)
//! still ends on Ctrl-C between them.

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

/// Signals caught while a run was in progress, ever: a run was interrupted when this moved
/// since it started (so that every run in progress sees a signal, not only the first to look).
static CAUGHT: AtomicU64 = AtomicU64::new(0);
/// The last signal caught.
static LAST: AtomicI32 = AtomicI32::new(0);
/// Runs in progress in this process. With none, a signal takes its default action: lockcheck
/// used as a library (a test binary) still ends on Ctrl-C between runs.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// [`CAUGHT`] when the run on this thread started (a run is on one thread).
    static SEEN: Cell<Option<u64>> = const { Cell::new(None) };
}
/// A signal that interrupts a real run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, a CI runner's timeout, systemd).
    Terminate,
}

impl Signal {
    /// Its number.
    pub fn number(self) -> i32 {
        match self {
            Signal::Interrupt => libc::SIGINT,
            Signal::Terminate => libc::SIGTERM,
        }
    }

    /// Its name, `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }

    /// The exit code shells report for a process it ended: 128 + its number (130, 143).
    pub fn exit_code(self) -> u8 {
        128 + self.number() as u8
    }

    fn of(number: i32) -> Option<Signal> {
        match number {
            libc::SIGINT => Some(Signal::Interrupt),
            libc::SIGTERM => Some(Signal::Terminate),
            _ => None,
        }
    }
}

/// Takes SIGINT and SIGTERM over for the whole process, before any command runs: outside a real
/// run they do what they would by default (end the process), even when the process was started
/// with them ignored (a non-interactive shell starts a background job with SIGINT ignored), so
/// that `kill -INT` stops a `matrix` or an `explore` started with `&` as it stops a real run.
pub fn take_over() {
    install();
}

/// A run's watch over SIGINT and SIGTERM, from its creation until it is dropped: the signals
/// are caught (installed once per process), and [`caught`] on this thread tells whether one came.
pub struct Watch(());

/// Starts watching for signals for the run on this thread.
pub fn watch() -> Watch {
    install();
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    SEEN.with(|seen| seen.set(Some(CAUGHT.load(Ordering::SeqCst))));
    Watch(())
}

impl Drop for Watch {
    fn drop(&mut self) {
        SEEN.with(|seen| seen.set(None));
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the action only touches atomics and calls signal(2) and raise(3), which are
            // async-signal-safe.
            let registered = unsafe {
                signal_hook_registry::register(signal, move || {
                    if ACTIVE.load(Ordering::SeqCst) == 0 {
                        // No run to stop: what the signal would have done without lockcheck.
                        libc::signal(signal, libc::SIG_DFL);
                        libc::raise(signal);
                        return;
                    }
                    LAST.store(signal, Ordering::SeqCst);
                    CAUGHT.fetch_add(1, Ordering::SeqCst);
                })
            };
            if let Err(e) = registered {
                tracing::warn!("cannot catch signal {signal}: {e}; it will end lockcheck at once");
            }
        }
    });
}

/// The signal that interrupted the run on this thread, if one came since it started watching.
pub fn caught() -> Option<Signal> {
    let seen = SEEN.with(Cell::get)?;
    if CAUGHT.load(Ordering::SeqCst) == seen {
        return None;
    }
    Signal::of(LAST.load(Ordering::SeqCst))
}

/// Completes when a signal has come ([`caught`]; looked at every 10 ms, so a run stops well
/// within a second).
pub async fn caught_one() -> Signal {
    loop {
        if let Some(signal) = caught() {
            return signal;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    /// Runs test `name` of this binary again in a child process (with `LOCKCHECK_SIGNAL_CHILD`
    /// set, so the test does its signalling part there), and returns how the child ended.
    fn in_child(name: &str) -> std::process::ExitStatus {
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads", "1"])
            .env("LOCKCHECK_SIGNAL_CHILD", "1")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
    }

    fn is_child() -> bool {
        std::env::var_os("LOCKCHECK_SIGNAL_CHILD").is_some()
    }

    #[test]
    fn during_a_run_a_signal_is_caught_and_the_run_sees_it() {
        if is_child() {
            let _watch = watch();
            assert_eq!(caught(), None);
            // SAFETY: raise(3) on this process.
            unsafe { libc::raise(libc::SIGTERM) };
            assert_eq!(caught(), Some(Signal::Terminate));
            return;
        }
        let status =
            in_child("signals::tests::during_a_run_a_signal_is_caught_and_the_run_sees_it");
        assert!(status.success(), "{status:?}");
    }

    #[test]
    fn outside_a_run_a_signal_takes_its_default_action() {
        if is_child() {
            drop(watch());
            // SAFETY: raise(3) on this process.
            unsafe { libc::raise(libc::SIGINT) };
            std::thread::sleep(Duration::from_secs(60));
            return;
        }
        let status = in_child("signals::tests::outside_a_run_a_signal_takes_its_default_action");
        assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    }
}
