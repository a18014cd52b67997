//! Starts and stops real servers (Jepsen's "db"): server processes on loopback ports.
//!
//! What is common to every server lives here: a free port on `127.0.0.1` (drawn below the kernel's
//! ephemeral range, so that no connection's or proxy's port can take it between the draw and the
//! server's bind; a first start that still finds it taken moves to another), a
//! directory of its own under a temp dir of the run, its own process group (so a Ctrl-C in the
//! terminal reaches lockcheck and not the servers directly: lockcheck then stops them itself),
//! `PR_SET_PDEATHSIG = SIGKILL`, and the faults. What differs (the command line, what "ready"
//! means, where the log is) is a [`ServerKind`]: [`redis::Redis`], [`sentinel::Sentinel`],
//! [`zookeeper::ZooKeeper`],
//! [`mariadb::MariaDb`] and [`etcd::Etcd`].
//!
//! Faults act on the process by its PID, never by name: a crash is `SIGKILL`, a restart starts the
//! binary again on the same port and directory (so what the server persisted is read back), a
//! pause is `SIGSTOP` and its end `SIGCONT`.
//!
//! Stopping is `SIGKILL` to each PID started, then reaping it: when the run ends, when it fails,
//! when the [`Launcher`] is dropped (a panic included), and on Ctrl-C (the runner catches it).
//! As a last resort, each server is started with `PR_SET_PDEATHSIG = SIGKILL`, so the kernel kills
//! it if the thread that started it dies without stopping it (lockcheck killed by a signal).

pub mod etcd;
pub mod ledger;
pub mod mariadb;
pub mod redis;
pub mod sentinel;
pub mod zookeeper;
pub mod zookeeper_member;

use crate::error::RealError;
use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use self::etcd::{Etcd, EtcdMember, ETCD, ETCD_INSTALL};
pub use self::mariadb::{MariaDb, MARIADBD, MARIADB_INSTALL};
pub use self::redis::{Redis, REDIS_INSTALL, REDIS_SERVER};
pub use self::sentinel::Sentinel;
pub use self::zookeeper::{ZooKeeper, JAVA, ZOOKEEPER_INSTALL, ZOOKEEPER_JAR};
pub use self::zookeeper_member::{PeerPorts, ZooKeeperMember};

/// A kind of server: how to start it and how to tell it is ready. The launcher does the rest
/// (ports, directories, process groups, signals, stopping).
pub trait ServerKind {
    /// The binary that must be on PATH, for the message when it is not.
    fn binary(&self) -> &'static str;
    /// The command that installs it.
    fn install(&self) -> &'static str;
    /// A word of the server process's command line that tells it is this server (for the PID
    /// ledger's check that none is left running). By default, the binary.
    fn process_marker(&self) -> &'static str {
        self.binary()
    }
    /// Whether the server can be started here: its binary (and whatever else it needs, a jar)
    /// is installed. By default, the binary is on PATH.
    fn installed(&self) -> bool {
        find_on_path(self.binary()).is_some()
    }
    /// Makes server directory `dir` ready for the first start on `port` (a config file, an
    /// initialised data dir). Runs once, before the first start, not before restarts.
    fn prepare(&self, _dir: &Path, _port: u16) -> Result<(), String> {
        Ok(())
    }
    /// Rewrites what [`ServerKind::prepare`] wrote that names the port, after the first start
    /// failed because another process had taken the port and the launcher moved the server to
    /// `port`. By default nothing: the port is on the command line.
    fn port_moved(&self, _dir: &Path, _port: u16) -> Result<(), String> {
        Ok(())
    }
    /// The command that starts (and restarts) the server on `port`, with everything it keeps in
    /// `dir`. The launcher adds stdio, the process group and the environment.
    fn command(&self, dir: &Path, port: u16) -> Command;
    /// Whether the server at `addr` is ready for clients now (an answer that says so, not just
    /// an open port). Should give up within a second. The future owns what it needs, so no
    /// borrow of the launcher is held while it runs.
    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>>;
    /// Log files in the server's directory worth showing when it fails to start.
    fn logs(&self) -> &'static [&'static str];
    /// How long a start (or a restart, with its recovery) may take before it counts as failed.
    fn ready_within(&self) -> Duration {
        Duration::from_secs(10)
    }
}

/// Whether the test suites' quick tier was asked for (`LOCKCHECK_NO_SERVERS` set, not `0`;
/// ARCHITECTURE.md's contributor loop): their `installed` helpers then skip every test that
/// would start a server. lockcheck itself never reads it. CI runs every test, so under
/// `CI=true` asking for it panics.
pub fn servers_off_for_tests() -> bool {
    let off = std::env::var_os("LOCKCHECK_NO_SERVERS").is_some_and(|v| !v.is_empty() && v != "0");
    if off && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("LOCKCHECK_NO_SERVERS is set under CI=true: CI runs every test");
    }
    off
}

/// The path of executable `name` on PATH, if there is one.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// One server the launcher started.
struct Server {
    name: String,
    kind: Box<dyn ServerKind>,
    port: u16,
    dir: PathBuf,
    /// Extra environment of its process (a preloaded library and its settings).
    env: Vec<(OsString, OsString)>,
    /// The running process (none while crashed or stopped).
    child: Option<Child>,
    /// Every PID this server ever ran as (a restart is a new process).
    pids: Vec<u32>,
}

/// The servers of one run. Dropping it stops them all and removes their directories.
pub struct Launcher {
    root: PathBuf,
    servers: Vec<Server>,
}

impl Launcher {
    /// A launcher with a fresh private directory for its servers ([`crate::private_dir`]): the
    /// servers load their configuration from it.
    pub fn new() -> Result<Launcher, RealError> {
        let root = crate::private_dir::fresh("real")?;
        Ok(Launcher {
            root,
            servers: Vec::new(),
        })
    }

    /// Starts a new `redis-server` called `name` (`redis-0`) with `persistence`, without waiting
    /// for it ([`Launcher::until_ready`] does); its index for the other methods.
    pub fn add_redis(
        &mut self,
        name: &str,
        persistence: lockcheck_core::scenario::Persistence,
    ) -> Result<usize, RealError> {
        self.add(name, Box::new(Redis { persistence }), Vec::new())
    }

    /// Starts a new server of `kind` called `name`, with `env` added to its environment, without
    /// waiting for it ([`Launcher::until_ready`] does); its index for the other methods. Fails at
    /// once when the kind's binary is not on PATH.
    pub fn add(
        &mut self,
        name: &str,
        kind: Box<dyn ServerKind>,
        env: Vec<(OsString, OsString)>,
    ) -> Result<usize, RealError> {
        let index = self.register(name, kind, env)?;
        self.spawn(index)?;
        Ok(index)
    }

    /// Prepares a new server of `kind` called `name` (its port, its directory, its
    /// configuration) without starting it: [`Launcher::start`] does, so that servers can be
    /// numbered in one order and started in another (an ensemble's members). Its index.
    pub fn register(
        &mut self,
        name: &str,
        kind: Box<dyn ServerKind>,
        env: Vec<(OsString, OsString)>,
    ) -> Result<usize, RealError> {
        if !kind.installed() {
            return Err(RealError::MissingBinary {
                binary: kind.binary(),
                install: kind.install(),
            });
        }
        let port = free_port().map_err(|e| self.fail(name, format!("no free port: {e}")))?;
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).map_err(|source| RealError::Io {
            path: dir.clone(),
            source,
        })?;
        kind.prepare(&dir, port)
            .map_err(|reason| self.fail(name, reason))?;
        self.servers.push(Server {
            name: name.to_string(),
            kind,
            port,
            dir,
            env,
            child: None,
            pids: Vec::new(),
        });
        Ok(self.servers.len() - 1)
    }

    /// Starts registered server `index` for the first time, without waiting for it
    /// ([`Launcher::until_ready`] does).
    pub fn start(&mut self, index: usize) -> Result<(), RealError> {
        self.spawn(index)
    }

    /// Waits until server `index` is ready ([`ServerKind::ready`]), failing early, with its log,
    /// if it exits. A first start that exits because its port was taken (another program bound
    /// it after the launcher drew it) is moved to another port and started again, up to
    /// [`PORT_TRIES`] times: a busy machine never fails a run that way. No borrow of the
    /// launcher is held across a wait, so other tasks may use it meanwhile.
    pub async fn until_ready(launcher: &RefCell<Launcher>, index: usize) -> Result<(), RealError> {
        let within = launcher.borrow().servers[index].kind.ready_within();
        let mut deadline = tokio::time::Instant::now() + within;
        let mut moves = 0;
        loop {
            let exited = launcher.borrow_mut().exited(index);
            if let Some((e, port_taken)) = exited {
                let first_start = launcher.borrow().servers[index].pids.len() == moves + 1;
                if !(port_taken && first_start && moves + 1 < PORT_TRIES) {
                    return Err(e);
                }
                moves += 1;
                launcher.borrow_mut().move_port(index)?;
                deadline = tokio::time::Instant::now() + within;
                continue;
            }
            let (addr, probe) = {
                let l = launcher.borrow();
                let addr = l.addr(index);
                (addr, l.servers[index].kind.ready(addr))
            };
            let ready = probe.await;
            if ready {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                let l = launcher.borrow();
                // What the server said last is what tells why it is not ready (a member
                // that cannot reach its peers, a refused data directory).
                return Err(l.fail(
                    l.name(index),
                    format!(
                        "not ready on {addr} within {} s; its log ends:\n  {}",
                        within.as_secs(),
                        tails(&l.log_texts(index), 5)
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Gives server `index`, whose first start found its port taken, another port, and starts
    /// it there.
    fn move_port(&mut self, index: usize) -> Result<(), RealError> {
        let name = self.servers[index].name.clone();
        let port = free_port().map_err(|e| self.fail(&name, format!("no free port: {e}")))?;
        let server = &mut self.servers[index];
        tracing::info!(server = %name, from = server.port, to = port, "port taken; moving");
        server.port = port;
        server
            .kind
            .port_moved(&server.dir, port)
            .map_err(|reason| self.fail(&name, reason))?;
        self.spawn(index)
    }

    /// The run's temp dir (each server's directory is in it); removed when the launcher drops.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The address of server `index`.
    pub fn addr(&self, index: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.servers[index].port))
    }

    /// The node name of server `index`.
    pub fn name(&self, index: usize) -> &str {
        &self.servers[index].name
    }

    /// The PID server `index` runs as now, if it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.servers[index].child.as_ref().map(Child::id)
    }

    /// Every PID this launcher ever started, in order.
    pub fn started_pids(&self) -> Vec<u32> {
        self.servers
            .iter()
            .flat_map(|s| s.pids.iter().copied())
            .collect()
    }

    fn fail(&self, server: &str, reason: String) -> RealError {
        RealError::Server {
            server: server.to_string(),
            reason,
        }
    }

    /// Starts server `index`'s process (again), on its port and in its directory.
    fn spawn(&mut self, index: usize) -> Result<(), RealError> {
        let server = &self.servers[index];
        let mut command = server.kind.command(&server.dir, server.port);
        command.envs(server.env.iter().map(|(k, v)| (k, v)));
        // Errors in the arguments come out before the log file is open.
        let stderr_path = server.dir.join("stderr.log");
        let stderr = File::create(&stderr_path).map_err(|source| RealError::Io {
            path: stderr_path,
            source,
        })?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0);
        dies_with_parent(&mut command);
        let child = command.spawn().map_err(|e| {
            self.fail(
                &server.name,
                format!("cannot start {}: {e}", server.kind.binary()),
            )
        })?;
        tracing::debug!(server = %server.name, pid = child.id(), port = server.port, "started");
        ledger::record(child.id(), server.kind.process_marker());
        let server = &mut self.servers[index];
        server.pids.push(child.id());
        server.child = Some(child);
        Ok(())
    }

    /// If server `index`'s process has exited, why (with the end of its log), and whether its
    /// log says its port was taken.
    fn exited(&mut self, index: usize) -> Option<(RealError, bool)> {
        let server = &mut self.servers[index];
        let status = server.child.as_mut()?.try_wait().ok()??;
        server.child = None;
        let texts = self.log_texts(index);
        // Every server says it in these words (redis-server, mariadbd, the JVM's
        // BindException, Go's net package).
        let port_taken = texts
            .iter()
            .any(|t| t.to_ascii_lowercase().contains("address already in use"));
        let server = &self.servers[index];
        let (name, binary) = (server.name.clone(), server.kind.binary());
        let error = self.fail(
            &name,
            format!(
                "{binary} exited ({status}) before it was ready:\n  {}",
                tails(&texts, 5)
            ),
        );
        Some((error, port_taken))
    }

    /// The texts of server `index`'s logs (its stderr first), empty where one cannot be read.
    fn log_texts(&self, index: usize) -> Vec<String> {
        let server = &self.servers[index];
        ["stderr.log"]
            .iter()
            .chain(server.kind.logs())
            .map(|file| std::fs::read_to_string(server.dir.join(file)).unwrap_or_default())
            .collect()
    }

    /// Kills server `index` with `SIGKILL` (a crash) and reaps it. Its directory stays.
    pub fn crash(&mut self, index: usize) -> Result<(), RealError> {
        let Some(mut child) = self.servers[index].child.take() else {
            return Ok(());
        };
        let name = self.servers[index].name.clone();
        // `Child::kill` is kill(pid, SIGKILL); a stopped process dies of it too.
        child
            .kill()
            .map_err(|e| self.fail(&name, format!("kill -9 {}: {e}", child.id())))?;
        child
            .wait()
            .map_err(|e| self.fail(&name, format!("reaping {}: {e}", child.id())))?;
        tracing::debug!(server = %name, pid = child.id(), "killed");
        Ok(())
    }

    /// Starts crashed server `index` again on its port and directory (kills it first if it
    /// still runs), without waiting for it ([`Launcher::until_ready`] does).
    pub fn respawn(&mut self, index: usize) -> Result<(), RealError> {
        self.crash(index)?;
        self.spawn(index)
    }

    /// Stops server `index` with `SIGSTOP` (a pause: it keeps its connections and answers
    /// nothing until [`Launcher::resume`]).
    pub fn pause(&mut self, index: usize) -> Result<(), RealError> {
        self.signal(index, libc::SIGSTOP, "kill -STOP")
    }

    /// Continues server `index` with `SIGCONT`.
    pub fn resume(&mut self, index: usize) -> Result<(), RealError> {
        self.signal(index, libc::SIGCONT, "kill -CONT")
    }

    fn signal(&mut self, index: usize, signal: libc::c_int, what: &str) -> Result<(), RealError> {
        let Some(pid) = self.pid(index) else {
            // Down: nothing to stop or continue.
            return Ok(());
        };
        // SAFETY: kill(2) with a PID this launcher started and has not reaped (it is still its
        // child, so the PID cannot have been reused).
        let result = unsafe { libc::kill(pid as libc::pid_t, signal) };
        if result != 0 {
            let e = std::io::Error::last_os_error();
            return Err(self.fail(
                &self.servers[index].name.clone(),
                format!("{what} {pid}: {e}"),
            ));
        }
        Ok(())
    }

    /// Stops every server that runs (`SIGKILL` by PID, then reaped). Idempotent.
    pub fn stop_all(&mut self) {
        for index in 0..self.servers.len() {
            if let Err(e) = self.crash(index) {
                tracing::warn!("stopping {}: {e}", self.servers[index].name);
            }
        }
    }
}

impl Launcher {
    /// Stops every server and removes the run's temp dir with their directories: what a run
    /// leaves behind is nothing. Idempotent; [`Drop`] calls it too, and a runner calls it
    /// itself so that nothing that still holds the launcher can keep the directory alive. A
    /// removal that fails is tried again (a file being closed as the last process dies), then
    /// said as a warning naming the directory.
    pub fn close(&mut self) {
        self.stop_all();
        self.remove_root();
        crate::private_dir::release(&self.root);
    }

    fn remove_root(&self) {
        if !self.root.exists() {
            return;
        }
        let mut last = None;
        for _ in 0..5 {
            match std::fs::remove_dir_all(&self.root) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(e) = last {
            tracing::warn!("could not remove {}: {e}", self.root.display());
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        self.close();
    }
}

/// How many ports a server's first start tries before its failure stands.
pub const PORT_TRIES: usize = 5;

/// The lowest port drawn for a server.
const LOWEST_PORT: u16 = 10_000;

/// Has the kernel kill the process `command` starts when lockcheck dies (`PR_SET_PDEATHSIG =
/// SIGKILL`): the last resort behind the PID ledger, for servers and client processes alike.
pub(crate) fn dies_with_parent(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl(2),
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// A port nobody listens on now, drawn below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`): the kernel hands ports from that range to every `bind` to
/// port 0 (the proxies') and to every outgoing connection, so a port drawn there could be taken
/// between this check and the server's own bind; below it, only another program choosing the
/// same number can. When the range leaves too little room below it, the kernel's pick.
pub(crate) fn free_port() -> std::io::Result<u16> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_low > LOWEST_PORT + 1_000 {
        let span = u64::from(ephemeral_low - LOWEST_PORT);
        for _ in 0..64 {
            let port = LOWEST_PORT + (draw() % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A number that differs between draws, processes and runs (the time, the PID and a counter,
/// scattered by SplitMix64's finaliser): which free port a server gets decides nothing in a run.
fn draw() -> u64 {
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let count = DRAWS.fetch_add(1, Ordering::Relaxed);
    lockcheck_core::randomness::mix(nanos ^ (u64::from(std::process::id()) << 32))
        ^ lockcheck_core::randomness::mix(count.wrapping_add(1))
}

/// The last `n` lines of each non-empty log text, indented under one another.
fn tails(texts: &[String], n: usize) -> String {
    texts
        .iter()
        .filter(|t| !t.trim().is_empty())
        .map(|text| {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n  ")
        })
        .collect::<Vec<_>>()
        .join("\n  ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_drawn_below_the_ephemeral_range_and_is_free() {
        let port = free_port().unwrap();
        TcpListener::bind(("127.0.0.1", port)).expect("it is free");
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .unwrap_or(32_768);
        if low > LOWEST_PORT + 1_000 {
            assert!((LOWEST_PORT..low).contains(&port), "{port}");
        }
    }

    #[test]
    fn a_first_start_whose_port_was_taken_moves_to_another_port() {
        let kind = Redis {
            persistence: lockcheck_core::scenario::Persistence::None,
        };
        if !kind.installed() {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "redis-server is not installed under CI=true"
            );
            return;
        }
        // Another program holds the port the launcher drew, as on a busy machine.
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let mut launcher = Launcher::new().unwrap();
        let dir = launcher.root.join("redis-0");
        std::fs::create_dir_all(&dir).unwrap();
        kind.prepare(&dir, port).unwrap();
        launcher.servers.push(Server {
            name: "redis-0".into(),
            kind: Box::new(kind),
            port,
            dir,
            env: Vec::new(),
            child: None,
            pids: Vec::new(),
        });
        launcher.spawn(0).unwrap();
        let launcher = RefCell::new(launcher);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(Launcher::until_ready(&launcher, 0))
            .expect("ready on another port");
        let launcher = launcher.into_inner();
        assert_ne!(launcher.addr(0).port(), port);
        assert_eq!(
            launcher.started_pids().len(),
            2,
            "one failed start, one moved"
        );
    }
}
