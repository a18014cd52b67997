//! What every real-server test file needs: skipping (or, under CI, failing) when a server is not
//! installed, one run at a time, and a real run checked against the simulation of the same
//! scenario with every server it started gone.

#![allow(dead_code)] // each test file uses its own part

use lockcheck_core::checker::{kinds_both_worlds_see, Violation, ViolationKind};
use lockcheck_core::history::{Op, Phase};
use lockcheck_core::scenario::Scenario;
use lockcheck_real::launcher::{Launcher, ServerKind};
use lockcheck_real::{run, RealRun};
use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

/// Whether `kind`'s server is installed. Says so on the real stderr (not captured) when it is
/// not, with the command that installs it; under CI (`CI=true`) a missing server fails instead.
/// The quick tier (`lockcheck_real::launcher::servers_off_for_tests`) skips as if it were not.
pub fn installed(kind: &dyn ServerKind) -> bool {
    if lockcheck_real::launcher::servers_off_for_tests() {
        let _ = writeln!(
            std::io::stderr().lock(),
            "skipping a real-server test: LOCKCHECK_NO_SERVERS is set"
        );
        return false;
    }
    if kind.installed() {
        return true;
    }
    let install = kind.install();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{} is not installed under CI=true: .ci/run must `{install}`",
            kind.binary()
        );
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipping a real-server test: {install}"
    );
    false
}

/// Real runs one at a time: they share two cores, and a verdict should never depend on a
/// neighbour's load.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `pid` is alive and runs something whose command line contains `marker` (a reaped PID
/// has no /proc entry; a reused one runs something else).
pub fn alive(pid: u32, marker: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
}

/// The kinds of violation a real run can see ([`kinds_both_worlds_see`]).
pub fn kinds(violations: &[Violation]) -> Vec<ViolationKind> {
    kinds_both_worlds_see(violations)
}

/// Runs `scenario` for real, checks that every server it started (whose command line contains
/// `marker`) is gone, and that the simulation of the same scenario reaches the same verdict.
pub fn run_real(scenario: &Scenario, marker: &str) -> RealRun {
    let real = run(scenario).unwrap_or_else(|e| panic!("the real run failed: {e}"));
    assert!(!real.server_pids.is_empty(), "no server was started");
    let left: Vec<u32> = real
        .server_pids
        .iter()
        .copied()
        .filter(|&pid| alive(pid, marker))
        .collect();
    assert!(left.is_empty(), "servers left running: {left:?}");
    let simulated = lockcheck_sim::run(scenario);
    assert_eq!(
        kinds(&real.outcome.violations),
        kinds(&simulated.violations),
        "real and simulated verdicts differ:\nreal: {:#?}\nsimulated: {:#?}\nreal history: {:#?}",
        real.outcome.violations,
        simulated.violations,
        real.outcome.history.entries
    );
    real
}

/// Accepted entries into the critical section, per the resource.
pub fn sections(real: &RealRun) -> usize {
    entered(real).len()
}

/// Who entered the critical section (accepted by the resource), in order.
pub fn entered(real: &RealRun) -> Vec<&str> {
    real.outcome
        .history
        .entries
        .iter()
        .filter_map(|e| match &e.op {
            Op::Resource {
                client,
                phase: Phase::Enter,
                accepted: true,
                ..
            } => Some(client.as_str()),
            _ => None,
        })
        .collect()
}

/// The simulator's story file `name` (under `sim/tests/scenarios/`): the real tests run the
/// very scenario the simulation's tests pin.
pub fn sim_scenario(name: &str) -> Scenario {
    let path = format!(
        "{}/../sim/tests/scenarios/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Scenario::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// No violation.
/// The run's first violation is two holders at once, `client` one of them (the story's stale
/// holder).
pub fn assert_two_holders_including(real: &RealRun, client: &str) {
    let v = real
        .outcome
        .violations
        .first()
        .unwrap_or_else(|| panic!("no violation:\n{:#?}", real.outcome.history));
    assert_eq!(v.kind, ViolationKind::MutualExclusion, "{v:?}");
    assert!(v.clients.iter().any(|c| c == client), "{v:?}");
}

/// No violation at all.
pub fn assert_safe(real: &RealRun) {
    assert!(
        real.outcome.violations.is_empty(),
        "{:#?}",
        real.outcome.violations
    );
}

/// A server started as "the user's": lockcheck's launcher, but used only through its address
/// (the `--endpoints` tests). Stopped, and its directory removed, when dropped.
pub struct UsersServer {
    pub launcher: RefCell<Launcher>,
    pub addr: SocketAddr,
    pub runtime: tokio::runtime::Runtime,
}

impl UsersServer {
    /// Server `kind`, named `name`, started and ready.
    pub fn start(name: &str, kind: Box<dyn ServerKind>) -> UsersServer {
        let launcher = RefCell::new(Launcher::new().expect("a temp dir"));
        let index = launcher.borrow_mut().add(name, kind, Vec::new()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(Launcher::until_ready(&launcher, index))
            .unwrap();
        let addr = launcher.borrow().addr(index);
        UsersServer {
            launcher,
            addr,
            runtime,
        }
    }
}

impl Drop for UsersServer {
    fn drop(&mut self) {
        self.launcher.borrow_mut().close();
    }
}
