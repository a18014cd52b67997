//! Signals as users send them: Ctrl-C and SIGTERM to a real run (also one a script started in
//! the background, and one inside MariaDB's `mariadb-install-db`), and to a matrix. A real run
//! stops every process it started, removes its directories and exits 130 / 143 (so does a
//! differential search, which writes no summary then); an interrupted matrix writes no `matrix.json` or `matrix.md` of cells it did not search.
//!
//! Each run gets a `TMPDIR` of its own, so "what it left behind" is what is in that directory
//! and every process whose command line names it. Nothing is killed by name.

mod common;

use common::Scratch;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Waits until `ready()` holds; a guard against a hang, not a timing assertion.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The run directories in `tmp`: `real-PID-N` in the user's private directory there
/// (`lockcheck-UID`, `lockcheck_real::private_dir`).
fn run_dirs(tmp: &Path) -> Vec<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let private = tmp.join(format!("lockcheck-{}", unsafe { libc::geteuid() }));
    std::fs::read_dir(private)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("real-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every live process started with `tmp` as its TMPDIR, or that names `tmp` in its command line
/// or works in it (redis-server rewrites its command line; it keeps its environment and working
/// directory), other than `except`, as `pid: command line`.
fn processes_in(tmp: &Path, except: &[u32]) -> Vec<String> {
    let needle = tmp.to_string_lossy().into_owned();
    let env_needle = format!("TMPDIR={needle}\0");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if except.contains(&pid) || pid == std::process::id() {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        let environ = std::fs::read(entry.path().join("environ"))
            .map(|e| String::from_utf8_lossy(&e).into_owned())
            .unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
        });
        let ours = line.contains(&needle) || environ.contains(&env_needle) || cwd.starts_with(tmp);
        if ours && !zombie {
            found.push(format!("{pid}: {line}"));
        }
    }
    found
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child this test started and has not reaped.
    let result = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(result, 0, "kill({pid}, {signal})");
}

/// `lockcheck real ARGS` with its own TMPDIR.
fn real(tmp: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("real")
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs")
}

/// What a finished real run must have left: nothing.
fn assert_nothing_left(tmp: &Path, status: ExitStatus, code: i32, stderr: &str) {
    assert_eq!(status.code(), Some(code), "{status:?}: {stderr}");
    assert!(stderr.contains("interrupted by"), "{stderr}");
    assert_eq!(
        run_dirs(tmp),
        Vec::<PathBuf>::new(),
        "directories left behind"
    );
    assert_eq!(
        processes_in(tmp, &[]),
        Vec::<String>::new(),
        "processes left behind"
    );
}

fn finish(mut child: Child) -> (ExitStatus, String) {
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    (child.wait().unwrap(), stderr)
}

#[test]
fn sigterm_and_sigint_stop_every_server_and_remove_the_run_directory() {
    if !common::installed("redis-server") {
        return;
    }
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let scratch = Scratch::new(&format!("signal-{sig}"));
        let tmp = scratch.0.clone();
        let child = real(&tmp, &["--algorithm", "redlock", "--faults", "none"]);
        let pid = child.id();
        wait_for("the redis servers run", || {
            processes_in(&tmp, &[pid]).len() >= 3
        });
        signal(pid, sig);
        let (status, stderr) = finish(child);
        assert_nothing_left(&tmp, status, code, &stderr);
    }
}

/// Issue 40 item 7: SIGKILL cannot be caught, so a killed run leaves its directory (its
/// servers die with it: `PR_SET_PDEATHSIG`); the next run removes it, since its process is gone.
#[test]
fn a_run_killed_with_sigkill_leaves_its_directory_to_the_next_run_which_removes_it() {
    if !common::installed("redis-server") {
        return;
    }
    let scratch = Scratch::new("sigkill");
    let tmp = scratch.0.clone();
    let child = real(&tmp, &["--algorithm", "single-redis", "--faults", "none"]);
    let pid = child.id();
    wait_for("the redis server runs", || {
        !processes_in(&tmp, &[pid]).is_empty()
    });
    signal(pid, libc::SIGKILL);
    let (status, _) = finish(child);
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let left = run_dirs(&tmp);
    assert_eq!(left.len(), 1, "{left:?}");
    wait_for("the killed run's server is gone", || {
        processes_in(&tmp, &[]).is_empty()
    });
    let next = real(
        &tmp,
        &[
            "--algorithm",
            "single-redis",
            "--faults",
            "none",
            "--duration-ms",
            "1000",
        ],
    );
    let (status, stderr) = finish(next);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!left[0].exists(), "{} is still there", left[0].display());
    assert_eq!(run_dirs(&tmp), Vec::<PathBuf>::new());
}

#[test]
fn sigint_to_a_differential_search_stops_every_server_and_writes_no_summary() {
    if !common::installed("redis-server") {
        return;
    }
    let scratch = Scratch::new("signal-differential");
    let tmp = scratch.0.clone();
    let out = tmp.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["differential", "--algorithm", "redlock", "--nodes", "3"])
        .args(["--faults", "pause", "--stories", "5", "--out"])
        .arg(&out)
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let pid = child.id();
    wait_for("the redis servers of a real run", || {
        processes_in(&tmp, &[pid]).len() >= 3
    });
    signal(pid, libc::SIGINT);
    let (status, stderr) = finish(child);
    assert_nothing_left(&tmp, status, 130, &stderr);
    assert!(
        !out.join("differential.json").exists(),
        "a summary of stories the search did not run"
    );
}

#[test]
fn sigint_reaches_a_run_a_script_started_in_the_background() {
    // A non-interactive shell starts `&` jobs with SIGINT ignored; lockcheck catches it anyway.
    if !common::installed("redis-server") {
        return;
    }
    let scratch = Scratch::new("signal-background");
    let tmp = scratch.0.clone();
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" real --algorithm single-redis --faults none >/dev/null & echo $!; wait $!")
        .arg(env!("CARGO_BIN_EXE_lockcheck"))
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(shell.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let pid: u32 = first.trim().parse().expect("the shell says the job's pid");
    let shell_pid = shell.id();
    wait_for("the redis server runs", || {
        !processes_in(&tmp, &[pid, shell_pid]).is_empty()
    });
    signal(pid, libc::SIGINT);
    let (status, stderr) = finish(shell);
    assert_nothing_left(&tmp, status, 130, &stderr);
}

#[test]
fn ctrl_c_inside_mariadb_install_db_stops_it_and_its_bootstrap_server() {
    if !common::installed("mariadbd") || !common::installed("mariadb-install-db") {
        return;
    }
    let scratch = Scratch::new("signal-install-db");
    let tmp = scratch.0.clone();
    let child = real(&tmp, &["--algorithm", "mysql-row", "--faults", "none"]);
    wait_for("mariadb-install-db runs", || {
        processes_in(&tmp, &[])
            .iter()
            .any(|p| p.contains("install-db"))
    });
    signal(child.id(), libc::SIGINT);
    let (status, stderr) = finish(child);
    assert_nothing_left(&tmp, status, 130, &stderr);
}

#[test]
fn an_interrupted_matrix_writes_no_matrix_of_cells_it_did_not_search() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let scratch = Scratch::new(&format!("matrix-{sig}"));
        let out = scratch.0.join("out");
        let mut matrix = Command::new(env!("CARGO_BIN_EXE_lockcheck"));
        matrix
            .args(["matrix", "--cases", "1000000", "--jobs", "1", "--out"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Started as a non-interactive shell starts a background job: with SIGINT ignored. The
        // signal must still stop it (whatever the test harness itself inherited).
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            matrix.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = matrix.spawn().unwrap();
        // A matrix writes nothing until its last cell is done: a second of CPU spent searching
        // shows it is under way.
        let pid = child.id();
        wait_for("the matrix searches", || cpu_ticks(pid) >= 100);
        signal(child.id(), sig);
        let status = child.wait().unwrap();
        assert!(
            status.signal() == Some(sig) || status.code() == Some(128 + sig),
            "{status:?}"
        );
        for file in ["matrix.json", "matrix.md"] {
            assert!(
                !out.join(file).exists(),
                "{file} written by an interrupted matrix"
            );
        }
    }
}

/// The CPU time process `pid` has used, in clock ticks (user + system, /proc/PID/stat).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // After the command's closing parenthesis: state is field 0, utime 11 and stime 12.
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

#[test]
fn sigint_during_a_run_with_client_processes_kills_them_all() {
    if !common::installed("redis-server") {
        return;
    }
    let scratch = Scratch::new("signal-clients");
    let tmp = scratch.0.clone();
    // Ready, then silent (a client whose library hangs): the run is interrupted well before its
    // silence timeout would end it.
    let child = real(
        &tmp,
        &[
            "--algorithm",
            "single-redis",
            "--client",
            r#"echo '{"v":1,"op":"ready"}'; sleep 300"#,
        ],
    );
    let pid = child.id();
    // The server, and each of 3 clients' shell and its sleep.
    wait_for("the server and the client processes run", || {
        processes_in(&tmp, &[pid]).len() >= 7
    });
    signal(pid, libc::SIGINT);
    let (status, stderr) = finish(child);
    assert_nothing_left(&tmp, status, 130, &stderr);
}
