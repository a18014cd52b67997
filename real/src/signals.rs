//! SIGINT and SIGTERM during a real run: caught from before the first server starts, remembered,
//! and acted on wherever the run is (waiting for a server, inside `mariadb-install-db`, in the
//! workload), so that every process started is stopped and every directory removed.
//!
//! The handler only stores the signal's number (an atomic store is async-signal-safe); the run
//! looks at it. Installing it replaces an inherited "ignore" (a non-interactive shell starts a
//! background job with SIGINT ignored): `kill -INT` still stops a run started with `&`.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;
use std::time::Duration;

/// The signal caught and not yet taken, 0 for none.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

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

/// Catches SIGINT and SIGTERM from now on, for the life of the process (once; later calls do
/// nothing). Until it is called, they keep their default action (the process ends, having started
/// nothing yet).
pub fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the action only stores to an atomic, which is async-signal-safe, and
            // touches nothing else.
            let registered = unsafe {
                signal_hook_registry::register(signal, move || {
                    CAUGHT.store(signal, Ordering::SeqCst);
                })
            };
            if let Err(e) = registered {
                tracing::warn!("cannot catch signal {signal}: {e}; it will end lockcheck at once");
            }
        }
    });
}

/// The signal caught since the last [`take`], if any, without taking it.
pub fn caught() -> Option<Signal> {
    Signal::of(CAUGHT.load(Ordering::SeqCst))
}

/// The signal caught since the last call, if any; the next run starts clean.
pub fn take() -> Option<Signal> {
    Signal::of(CAUGHT.swap(0, Ordering::SeqCst))
}

/// Completes when a signal has been caught (looked at every 10 ms: a run stops well within a
/// second).
pub async fn caught_one() -> Signal {
    loop {
        if let Some(signal) = caught() {
            return signal;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
