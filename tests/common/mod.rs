//! What the binary's test suites share: running `lockcheck`, reading its output, scratch
//! directories.
#![allow(dead_code)] // each suite uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `lockcheck` binary with `args`.
pub fn lockcheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Its standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Its standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh (emptied) directory named after the test and this process.
    pub fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("lockcheck-test-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    /// A directory `name` inside it.
    pub fn sub(&self, name: &str) -> PathBuf {
        let dir = self.0.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
    /// Writes `text` to `name` inside it.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// Whether server binary `binary` is installed (on PATH or in an sbin directory); under CI it
/// must be, so that a suite cannot pass by skipping. The quick tier
/// (`lockcheck_real::launcher::servers_off_for_tests`) skips as if it were not.
pub fn installed(binary: &str) -> bool {
    if lockcheck_real::launcher::servers_off_for_tests() {
        return false;
    }
    let found = lockcheck_real::launcher::mariadb::locate(binary).is_some();
    if !found {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and {binary} is not installed: .ci/run must install it"
        );
    }
    found
}

/// The report (JSON) a run or a search wrote into `dir`.
pub fn report_in(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a report was written")
}

/// docs/real-mode.md's story: client-0 pauses past its 10 s lease while it holds the lock, and
/// client-1 takes it: two holders (exit 1).
pub const PAUSE_STORY: &str = r#"{
  "algorithm": "single-redis",
  "params": { "ttl_ms": 10000 },
  "clients": 2,
  "workload": { "acquisitions_per_client": 1, "hold_ms": 2000, "think_ms": 100 },
  "duration_ms": 30000,
  "seed": 7,
  "faults": [ { "at_ms": 500, "fault": "pause", "node": "client-0", "for_ms": 15000 } ]
}"#;
