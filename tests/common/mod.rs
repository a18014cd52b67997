//! What the binary's test suites share: running `lockcheck`, reading its output, scratch
//! directories.
#![allow(dead_code)] // each suite uses its own part

use std::path::PathBuf;
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
    /// A fresh directory named after the test and this process.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("lockcheck-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
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
/// must be, so that a suite cannot pass by skipping.
pub fn installed(binary: &str) -> bool {
    let found = lockcheck_real::launcher::mariadb::locate(binary).is_some();
    if !found {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and {binary} is not installed: .ci/run must install it"
        );
    }
    found
}
