//! Clients that are processes of the user's (`lockcheck real --client 'COMMAND'`): the lock
//! library under test runs in them, not lockcheck's rendition of the algorithm.
//!
//! Each client (and, at the end, the liveness probe) is one run of `sh -c COMMAND`, in a process
//! group of its own, told by environment variables who it is and where the servers are (its own
//! proxies, so partitions act on it as on lockcheck's clients), and driven over the line
//! protocol of [`crate::protocol`]. lockcheck records the history exactly as it does for its own
//! clients (`lockcheck_core::workload`): an acquire's invocation when it sends `acquire`, its
//! completion when the answer comes; an access when the client's `access` line is read (so a
//! stalled client writes late, as a real one would); a release when its outcome is read.
//!
//! Faults on such a client are real: a pause is `SIGSTOP`/`SIGCONT` of its process group
//! (everything in it stops, the library's keep-alive threads included), a crash `SIGKILL` of
//! the group, a restart a new process; a client whose clock the scenario moves runs under the
//! time-shift library ([`crate::timeshift`]) from its start.
//!
//! Credentials reach a client in its environment only ([`LOGIN_VARS`], listed in
//! [`crate::protocol`]'s documentation): the user, the password, and for MariaDB, whose client
//! speaks TLS itself, the TLS files; never on a command line, in a log or in a report, and a
//! line of the client's kept for an error or a report has the password blanked out. What the
//! user declares of the library ([`ClientCommand::keys`], [`ClientCommand::lease_ms`]) is
//! checked by [`check`] and used by the runner ([`crate::declared`]).
//!
//! A client that exits, prints a line that is not the protocol's, or stays silent past a timeout
//! (time spent paused by the nemesis does not count) ends the run with [`RealError::Client`],
//! naming it, with what it printed and the end of its stderr: never a verdict. The end of every
//! process's stderr is kept for the run's report too ([`ClientProcesses::report`]), whatever
//! the verdict. Every process is
//! killed by its group at the end of the run, on error and on Ctrl-C ([`ClientProcesses::close`]),
//! and started with `PR_SET_PDEATHSIG` as a last resort.

use crate::endpoints::Login;
use crate::error::RealError;
use crate::protocol::{self, Command, Reply};
use crate::timeshift::{self, ClockFile};
use crate::world::RealWorld;
use lockcheck_core::history::{Kind, Op, Phase};
use lockcheck_core::resource::{AccessRequest, ACCESS_TIMEOUT};
use lockcheck_core::scenario::{Backend, Fault, Scenario};
use lockcheck_core::workload::NO_LONGER_HELD;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// How many of a client's last stderr (and stdout) lines an error and a report show.
const KEPT_LINES: usize = 20;
/// The longest stderr line kept, in characters (the rest is cut, saying how long it was).
const KEPT_LINE_CHARS: usize = 500;

/// The user's client command and its timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCommand {
    /// Run as `sh -c COMMAND` (so it may hold arguments, quotes, `cd x &&`), once per client.
    pub command: String,
    /// How long a client may take from its start to its `ready` line (a JVM's start included).
    pub start_timeout: Duration,
    /// How long a client may stay silent beyond what it was asked to do (`wait_ms`, `hold_ms`,
    /// an access's timeout), not counting time it spent paused by the nemesis.
    pub silence: Duration,
    /// The names the library writes beside the lock (`--client-keys`): patterns in which
    /// `{key}` stands for the lock's name, a trailing `*` a prefix ([`crate::declared`]). On
    /// servers the user runs they are checked free before the run and removed after it.
    pub keys: Vec<String>,
    /// The lease the library really uses, when it is not the one lockcheck tells it
    /// (`LOCKCHECK_TTL_MS`): the liveness checks judge by it, and the probe waits twice it.
    pub lease_ms: Option<u64>,
}

impl ClientCommand {
    /// `command`, with the default timeouts (60 s to start, 10 s of silence).
    pub fn new(command: impl Into<String>) -> ClientCommand {
        ClientCommand {
            command: command.into(),
            start_timeout: Duration::from_secs(60),
            silence: Duration::from_secs(10),
            keys: Vec::new(),
            lease_ms: None,
        }
    }

    /// The same command, its library writing `keys` beside the lock (see [`ClientCommand::keys`]).
    pub fn with_keys(mut self, keys: impl IntoIterator<Item = impl Into<String>>) -> ClientCommand {
        self.keys = keys.into_iter().map(Into::into).collect();
        self
    }

    /// The same command, its library's lease `lease_ms` (see [`ClientCommand::lease_ms`]).
    pub fn with_lease_ms(mut self, lease_ms: u64) -> ClientCommand {
        self.lease_ms = Some(lease_ms);
        self
    }
}

/// The variables that carry credentials to a client process: set by lockcheck from the run's
/// login ([`ClientProcesses::log_in_as`]) or removed, never inherited from lockcheck's own
/// environment (a password there is for servers lockcheck logs in to, not for servers it
/// started without one).
pub const LOGIN_VARS: [&str; 7] = [
    "LOCKCHECK_USER",
    crate::endpoints::PASSWORD_VAR,
    "LOCKCHECK_TLS",
    "LOCKCHECK_TLS_CA",
    "LOCKCHECK_TLS_CERT",
    "LOCKCHECK_TLS_KEY",
    "LOCKCHECK_TLS_SERVER_NAME",
];

/// What a client process is given to log in with (no `Debug`: it holds the password).
#[derive(Default)]
struct ClientLogin {
    /// The variables of [`LOGIN_VARS`] that are set, with their values.
    vars: Vec<(&'static str, String)>,
    /// The password, hidden from every line of the client's kept for an error or a report.
    password: Option<String>,
}

impl ClientLogin {
    /// The variables for a client of a `backend` lock logging in as `login`: the user (MariaDB:
    /// `root` when none is given, as lockcheck's own clients), the password, and for MariaDB
    /// over TLS, which its client speaks itself, the TLS files (absolute paths) and the name the
    /// server's certificate must carry. Redis, ZooKeeper and etcd clients speak plaintext to
    /// their proxies, which speak TLS to the servers ([`crate::tls`]): they get no TLS variable.
    fn of(login: &Login, backend: Backend) -> ClientLogin {
        let mut vars = Vec::new();
        let user = login.user.clone().or_else(|| {
            (backend == Backend::Mysql).then(|| crate::launcher::mariadb::USER.to_string())
        });
        if let Some(user) = user {
            vars.push(("LOCKCHECK_USER", user));
        }
        if let Some(password) = &login.password {
            vars.push((crate::endpoints::PASSWORD_VAR, password.clone()));
        }
        if let (Some(tls), Backend::Mysql) = (&login.tls, backend) {
            vars.push(("LOCKCHECK_TLS", "1".to_string()));
            let files = tls.files();
            let path = |p: &std::path::Path| {
                std::path::absolute(p)
                    .unwrap_or_else(|_| p.to_path_buf())
                    .display()
                    .to_string()
            };
            for (var, file) in [
                ("LOCKCHECK_TLS_CA", &files.ca),
                ("LOCKCHECK_TLS_CERT", &files.cert),
                ("LOCKCHECK_TLS_KEY", &files.key),
            ] {
                if let Some(file) = file {
                    vars.push((var, path(file)));
                }
            }
            if let Some(name) = &files.server_name {
                vars.push(("LOCKCHECK_TLS_SERVER_NAME", name.clone()));
            }
        }
        ClientLogin {
            vars,
            password: login.password.clone().filter(|p| !p.is_empty()),
        }
    }
}

/// `line` without `password` in it.
fn redact(line: String, password: Option<&str>) -> String {
    match password {
        Some(p) if line.contains(p) => line.replace(p, "[LOCKCHECK_PASSWORD]"),
        _ => line,
    }
}

/// What a scenario asks of lockcheck's own clients that a client process cannot be told:
/// refused before anything starts.
pub fn check(scenario: &Scenario, command: &ClientCommand) -> Result<(), RealError> {
    if command.command.trim().is_empty() {
        return Err(RealError::Unsupported(
            "--client: the command is empty".into(),
        ));
    }
    crate::declared::check(scenario.algorithm.backend(), &command.keys)?;
    crate::declared::check_lease(command.lease_ms)?;
    check_scenario(scenario)
}

/// Whether a client process can be told what `scenario` asks of its clients (a search of
/// `--client` runs draws only such scenarios).
pub fn supports(scenario: &Scenario) -> bool {
    check_scenario(scenario).is_ok()
}

/// What [`check`] refuses of the scenario.
fn check_scenario(scenario: &Scenario) -> Result<(), RealError> {
    let refuse = |what: &str| Err(RealError::Unsupported(format!("--client: {what}")));
    if scenario.algorithm.has_readers() {
        return refuse("read/write locks (the protocol has no shared sections)");
    }
    if scenario.workload.reentrant_depth > 1 {
        return refuse("reentrant acquisitions (workload.reentrant_depth > 1)");
    }
    if scenario.workload.hold_until_validity {
        return refuse("workload.hold_until_validity (the client decides how long it works)");
    }
    Ok(())
}

/// A running client process.
struct Running {
    child: Child,
    /// Its PID, which is also its process group's.
    pid: u32,
    /// Its stdin and stdout, until its driver takes them.
    io: Option<Io>,
    /// The last lines of its stderr.
    stderr: Stderr,
}

/// The client processes of one run, by node.
pub struct ClientProcesses {
    command: ClientCommand,
    /// Where the clock files of the clients whose clocks move are.
    dir: PathBuf,
    running: RefCell<BTreeMap<usize, Running>>,
    /// Per client whose clock the scenario moves: its shift file (kept across restarts).
    clocks: RefCell<BTreeMap<usize, ClockFile>>,
    /// Per node: paused now, and how many pauses and resumes it had (for the silence timeout).
    pauses: RefCell<BTreeMap<usize, (bool, u64)>>,
    /// Every PID started, in order.
    pids: RefCell<Vec<u32>>,
    /// Every process started, in order: its node's name, its incarnation, the end of its
    /// stderr (kept after it is killed, for the report).
    stderr_logs: RefCell<Vec<(String, u64, Stderr)>>,
    /// The tasks reading the processes' stderr: each ends when its pipe closes.
    readers: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    /// What the processes are given to log in with.
    login: RefCell<ClientLogin>,
}

/// The longest [`ClientProcesses::drained`] waits for the last stderr lines of processes
/// already killed (a pipe stays open while something else holds it).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// The last lines of one process's stderr, shared with the task that reads them.
type Stderr = Rc<RefCell<VecDeque<String>>>;

impl ClientProcesses {
    /// The client processes of a run of `command`, keeping their files under `dir`.
    pub fn new(command: ClientCommand, dir: PathBuf) -> ClientProcesses {
        ClientProcesses {
            command,
            dir,
            running: RefCell::default(),
            clocks: RefCell::default(),
            pauses: RefCell::default(),
            pids: RefCell::default(),
            stderr_logs: RefCell::default(),
            readers: RefCell::default(),
            login: RefCell::default(),
        }
    }

    /// Gives the processes started from now on the credentials of `login`, for a `backend` lock
    /// (see [`LOGIN_VARS`]): in their environment only, never in a command line, a log or a
    /// report; a line of theirs kept for an error or a report has the password blanked out.
    pub fn log_in_as(&self, login: &Login, backend: Backend) {
        *self.login.borrow_mut() = ClientLogin::of(login, backend);
    }

    /// `line` as kept: without the password.
    fn redact(&self, line: String) -> String {
        redact(line, self.login.borrow().password.as_deref())
    }

    /// `reply` with the password blanked out of its free text (a reason), which the history
    /// records.
    fn redact_reply(&self, reply: Reply) -> Reply {
        match reply {
            Reply::NotAcquired { reason } => Reply::NotAcquired {
                reason: reason.map(|r| self.redact(r)),
            },
            Reply::Lost { reason } => Reply::Lost {
                reason: reason.map(|r| self.redact(r)),
            },
            Reply::Error { reason } => Reply::Error {
                reason: self.redact(reason),
            },
            // A token is the client's free text too, kept in the history and the report.
            Reply::Acquired {
                token,
                fence,
                valid_ms,
            } => Reply::Acquired {
                token: token.map(|t| self.redact(t)),
                fence,
                valid_ms,
            },
            other => other,
        }
    }

    /// What the user declared of the library: [`ClientCommand::keys`] and
    /// [`ClientCommand::lease_ms`].
    pub fn client(&self) -> &ClientCommand {
        &self.command
    }

    /// Waits (at most [`DRAIN_TIMEOUT`]) until every stderr reader has read its pipe to the
    /// end, so that a report keeps the lines a process wrote just before it was killed. Call
    /// after [`ClientProcesses::close`].
    pub async fn drained(&self) {
        let readers = std::mem::take(&mut *self.readers.borrow_mut());
        let all = futures_util::future::join_all(readers);
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, all).await;
    }

    /// The command and, per process started (in order), the end of its stderr: what a report
    /// keeps of the run's clients.
    pub fn report(&self) -> lockcheck_core::report::ClientRun {
        lockcheck_core::report::ClientRun {
            command: self.command.command.clone(),
            stderr: self
                .stderr_logs
                .borrow()
                .iter()
                .map(
                    |(client, incarnation, lines)| lockcheck_core::report::ClientStderr {
                        client: client.clone(),
                        incarnation: *incarnation,
                        lines: lines.borrow().iter().cloned().collect(),
                    },
                )
                .collect(),
            keys: self.command.keys.clone(),
            lease_ms: self.command.lease_ms,
        }
    }

    /// The command the clients run.
    pub fn command(&self) -> &str {
        &self.command.command
    }

    /// Every PID started (each the leader of its process group), in order.
    pub fn started_pids(&self) -> Vec<u32> {
        self.pids.borrow().clone()
    }

    fn error(&self, name: &str, node: usize, reason: String) -> RealError {
        let stderr = self
            .running
            .borrow()
            .get(&node)
            .map(|r| r.stderr.borrow().iter().cloned().collect())
            .unwrap_or_default();
        RealError::Client {
            client: name.to_string(),
            command: self.command.command.clone(),
            reason,
            stderr,
        }
    }

    /// Starts node `node`'s process (a client's next incarnation, or the probe), reaching the
    /// servers at `servers`, and waits for its `ready` line.
    pub async fn start(
        &self,
        scenario: &Scenario,
        node: usize,
        servers: &[SocketAddr],
        incarnation: u64,
    ) -> Result<(), RealError> {
        let topology = scenario.topology();
        let name = topology.name(node).to_string();
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg(&self.command.command);
        let backend = match scenario.algorithm.backend() {
            Backend::Redis => "redis",
            Backend::ZooKeeper => "zookeeper",
            Backend::Mysql => "mysql",
            Backend::Etcd => "etcd",
        };
        let servers_list: Vec<String> = servers.iter().map(SocketAddr::to_string).collect();
        command
            .env("LOCKCHECK_PROTOCOL", protocol::VERSION.to_string())
            .env("LOCKCHECK_CLIENT_ID", &name)
            .env("LOCKCHECK_CLIENT_INDEX", node.to_string())
            .env("LOCKCHECK_INCARNATION", incarnation.to_string())
            .env("LOCKCHECK_BACKEND", backend)
            .env("LOCKCHECK_SERVERS", servers_list.join(","))
            .env("LOCKCHECK_KEY", scenario.params.lock_key())
            .env(
                "LOCKCHECK_TTL_MS",
                scenario.algorithm.lease_ms(&scenario.params).to_string(),
            );
        for var in LOGIN_VARS {
            command.env_remove(var);
        }
        command.envs(self.login.borrow().vars.iter().cloned());
        if moves_clock(scenario, &name) {
            let mut clocks = self.clocks.borrow_mut();
            if let std::collections::btree_map::Entry::Vacant(e) = clocks.entry(node) {
                std::fs::create_dir_all(&self.dir).map_err(|source| RealError::Io {
                    path: self.dir.clone(),
                    source,
                })?;
                e.insert(ClockFile::create(&self.dir.join(format!("{name}.clock")))?);
            }
            let library = timeshift::library()?;
            command.envs(clocks[&node].env(&library));
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        crate::launcher::dies_with_parent(command.as_std_mut());
        let mut child = command
            .spawn()
            .map_err(|e| self.error(&name, node, format!("cannot start `sh -c`: {e}")))?;
        let pid = child.id().unwrap_or_default();
        crate::launcher::ledger::record(pid, "sh");
        self.pids.borrow_mut().push(pid);
        tracing::info!(client = %name, pid, "client process started");
        let stderr: Stderr = Rc::new(RefCell::new(VecDeque::new()));
        self.stderr_logs
            .borrow_mut()
            .push((name.clone(), incarnation, stderr.clone()));
        if let Some(err) = child.stderr.take() {
            let kept = stderr.clone();
            let password = self.login.borrow().password.clone();
            let reader = tokio::task::spawn_local(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let mut kept = kept.borrow_mut();
                    if kept.len() == KEPT_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(clip_line(redact(line, password.as_deref())));
                }
            });
            self.readers.borrow_mut().push(reader);
        }
        let io = Io {
            node,
            name: name.clone(),
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::new(child.stdout.take().expect("piped")).lines(),
            printed: VecDeque::new(),
        };
        self.running.borrow_mut().insert(
            node,
            Running {
                child,
                pid,
                io: Some(io),
                stderr,
            },
        );
        let mut io = self.take_io(node).expect("just started");
        match io.read(self, self.command.start_timeout).await? {
            Reply::Ready => {
                self.running
                    .borrow_mut()
                    .get_mut(&node)
                    .expect("just started")
                    .io = Some(io);
                Ok(())
            }
            other => Err(self.error(
                &name,
                node,
                format!("said {other:?} before it was ready (its first line must be `ready`)"),
            )),
        }
    }

    /// Takes node `node`'s stdin and stdout, for its driver.
    fn take_io(&self, node: usize) -> Option<Io> {
        self.running.borrow_mut().get_mut(&node)?.io.take()
    }

    /// Kills node `node`'s process group (`kill -9`): a crash.
    pub fn kill(&self, node: usize) {
        if let Some(running) = self.running.borrow_mut().remove(&node) {
            signal_group(running.pid, libc::SIGKILL);
            reap(running.pid);
        }
        self.pauses.borrow_mut().remove(&node);
    }

    /// Stops (`SIGSTOP`, `pause`) or continues (`SIGCONT`) node `node`'s process group.
    pub fn pause(&self, node: usize, pause: bool) {
        let mut pauses = self.pauses.borrow_mut();
        let entry = pauses.entry(node).or_default();
        *entry = (pause, entry.1 + 1);
        if let Some(running) = self.running.borrow().get(&node) {
            signal_group(
                running.pid,
                if pause { libc::SIGSTOP } else { libc::SIGCONT },
            );
        }
    }

    /// Whether node `node` is paused now, and how many pauses and resumes it had.
    fn pause_state(&self, node: usize) -> (bool, u64) {
        self.pauses.borrow().get(&node).copied().unwrap_or_default()
    }

    /// The shift file of client `node`'s clocks, if the scenario moves them.
    pub fn clock(&self, node: usize) -> Option<std::cell::RefMut<'_, ClockFile>> {
        std::cell::RefMut::filter_map(self.clocks.borrow_mut(), |c| c.get_mut(&node)).ok()
    }

    /// Kills every process group still running and reaps its leader. Idempotent.
    pub fn close(&self) {
        let mut running = std::mem::take(&mut *self.running.borrow_mut());
        for (_, r) in running.iter_mut() {
            signal_group(r.pid, libc::SIGKILL);
        }
        for (_, r) in running.iter_mut() {
            reap(r.pid);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for ClientProcesses {
    fn drop(&mut self) {
        self.close();
    }
}

/// Sends `signal` to the process group led by `pid`.
fn signal_group(pid: u32, signal: libc::c_int) {
    if pid == 0 {
        return;
    }
    // SAFETY: kill(2) on the process group this run started (the group outlives its leader's
    // reaping only while a member runs, so it cannot be another's).
    unsafe {
        libc::kill(-(pid as libc::pid_t), signal);
    }
}

/// Waits for the group leader `pid`, just killed, to be gone (a `SIGKILL` ends even a stopped
/// process at once), so that no zombie of the run's outlives it.
fn reap(pid: u32) {
    // SAFETY: waitpid(2) on a child of ours, killed; ECHILD if tokio's reaper was first.
    unsafe {
        libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
    }
}

/// `line`, cut to [`KEPT_LINE_CHARS`] characters (saying how long it was).
fn clip_line(line: String) -> String {
    if line.chars().count() <= KEPT_LINE_CHARS {
        return line;
    }
    let start: String = line.chars().take(KEPT_LINE_CHARS).collect();
    format!("{start}… ({} bytes)", line.len())
}

/// Whether `scenario` jumps or drifts the clock of node `name`.
fn moves_clock(scenario: &Scenario, name: &str) -> bool {
    scenario.faults.iter().any(|f| {
        matches!(f, Fault::ClockJump { .. } | Fault::ClockDrift { .. }) && f.nodes().contains(&name)
    })
}

/// One process's stdin and stdout.
struct Io {
    node: usize,
    name: String,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The last lines it printed.
    printed: VecDeque<String>,
}

impl Io {
    async fn send(&mut self, procs: &ClientProcesses, command: Command) -> Result<(), RealError> {
        let line = command.line() + "\n";
        // A client that exits is said by the next read, with what it printed; a write to it
        // may fail first (a closed pipe).
        if let Err(e) = self.stdin.write_all(line.as_bytes()).await {
            return Err(self
                .gone(procs, format!("stopped reading its stdin ({e})"))
                .await);
        }
        let _ = self.stdin.flush().await;
        Ok(())
    }

    /// The next line, within `limit` of silence (time the client spent paused by the nemesis
    /// does not count).
    async fn read(&mut self, procs: &ClientProcesses, limit: Duration) -> Result<Reply, RealError> {
        loop {
            let before = procs.pause_state(self.node);
            match tokio::time::timeout(limit, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => {
                    if self.printed.len() == KEPT_LINES {
                        self.printed.pop_front();
                    }
                    // Read as printed; kept, and its free text recorded, without the password.
                    let parsed = protocol::parse(&line);
                    let line = procs.redact(line);
                    self.printed.push_back(line.clone());
                    return match parsed {
                        Ok(reply) => Ok(procs.redact_reply(reply)),
                        Err(why) => Err(procs.error(
                            &self.name,
                            self.node,
                            format!(
                                "printed a line that is not the protocol's: {}:\n  {}",
                                procs.redact(why),
                                lockcheck_core::input::clip(&line)
                            ),
                        )),
                    };
                }
                Ok(Ok(None)) => return Err(self.gone(procs, "exited".into()).await),
                Ok(Err(e)) => return Err(self.gone(procs, format!("cannot be read ({e})")).await),
                Err(_) => {
                    let after = procs.pause_state(self.node);
                    if after.0 || after.1 != before.1 {
                        continue;
                    }
                    return Err(procs.error(
                        &self.name,
                        self.node,
                        format!(
                            "said nothing for {} s when it had to answer{}",
                            limit.as_secs_f64(),
                            self.said()
                        ),
                    ));
                }
            }
        }
    }

    /// The error of a client that went away: its exit status if it has one, what it printed.
    async fn gone(&mut self, procs: &ClientProcesses, what: String) -> RealError {
        // Give its stderr reader and the kernel a moment to have the last word.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status = procs
            .running
            .borrow_mut()
            .get_mut(&self.node)
            .and_then(|r| r.child.try_wait().ok().flatten())
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        procs.error(
            &self.name,
            self.node,
            format!("{what}{status} in the middle of the run{}", self.said()),
        )
    }

    fn said(&self) -> String {
        if self.printed.is_empty() {
            "; it printed nothing on stdout".into()
        } else {
            format!(
                "; its last lines on stdout:\n    {}",
                self.printed
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n    ")
            )
        }
    }
}

/// Runs client `client`'s workload in its process: the one already started (the first
/// incarnation, started before time began), or a new one (a restart). An error is handed to the
/// world, which ends the run with it.
pub async fn drive(world: Rc<RealWorld>, client: usize) {
    if let Err(e) = workload(&world, client).await {
        world.fail_client(e);
    }
}

/// An acquisition the client reported (`acquired`), as lockcheck's own clients record theirs.
fn acquired_op(token: &str, fence: Option<u64>, valid_ms: Option<u64>) -> Op {
    Op::Acquire {
        token: Some(token.to_string()),
        fence,
        valid_ns: valid_ms.map(|ms| ms * 1_000_000),
        error: None,
        shared: false,
    }
}

/// An acquisition that did not succeed, and why.
fn acquire_op(error: Option<String>) -> Op {
    Op::Acquire {
        token: None,
        fence: None,
        valid_ns: None,
        error,
        shared: false,
    }
}

/// The workload of `lockcheck_core::workload::run`, one critical section at a time, with the
/// section itself done by the process.
async fn workload(world: &Rc<RealWorld>, client: usize) -> Result<(), RealError> {
    let procs = world
        .processes()
        .expect("a client process's world has them");
    let scenario = &world.scenario;
    let incarnation = world.incarnation_of(client);
    let io = procs.take_io(client);
    let mut io = match io {
        Some(io) => io,
        None => {
            procs
                .start(scenario, client, &world.servers_for(client), incarnation)
                .await?;
            procs.take_io(client).expect("just started")
        }
    };
    note_start(world, client, incarnation);
    let silence = procs.command.silence;
    let workload = &scenario.workload;
    let retry = Duration::from_millis(scenario.params.retry_delay_ms);
    let think = Duration::from_millis(workload.think_ms);
    let name = io.name.clone();
    let mut section = 0u64;
    while world.remaining(client) > 0 {
        let wait = wait_left(world);
        if wait.is_zero() {
            break;
        }
        world.record(client, Kind::Invoke, acquire_op(None));
        io.send(
            procs,
            Command::Acquire {
                wait_ms: wait.as_millis() as u64,
                hold_ms: workload.hold_ms,
                probe: false,
            },
        )
        .await?;
        let (token, fence) = match io.read(procs, wait + silence).await? {
            Reply::Acquired {
                token,
                fence,
                valid_ms,
            } => {
                section += 1;
                let token = token.unwrap_or_else(|| format!("{name}.{incarnation}.{section}"));
                world.record(client, Kind::Ok, acquired_op(&token, fence, valid_ms));
                (token, fence)
            }
            Reply::NotAcquired { reason } => {
                let why = reason.unwrap_or_else(|| "gave up".into());
                world.record(client, Kind::Fail, acquire_op(Some(why)));
                // As the workload: the run is over when less than a retry is left.
                if wait_left(world) <= retry {
                    break;
                }
                tokio::time::sleep(retry.max(think)).await;
                continue;
            }
            Reply::Error { reason } => {
                world.record(client, Kind::Fail, acquire_op(Some(reason)));
                tokio::time::sleep(retry.max(think)).await;
                continue;
            }
            other => return Err(unexpected(procs, &io, &other, "an answer to acquire")),
        };
        let mut counted = false;
        let limit = Duration::from_millis(workload.hold_ms) + 2 * ACCESS_TIMEOUT + silence;
        loop {
            let release = |kind, error| {
                world.record(
                    client,
                    Kind::Invoke,
                    Op::Release {
                        token: token.clone(),
                        error: None,
                    },
                );
                world.record(
                    client,
                    kind,
                    Op::Release {
                        token: token.clone(),
                        error,
                    },
                );
            };
            match io.read(procs, limit).await? {
                Reply::Access(phase) => {
                    let accepted = access(world, client, phase, &token, fence).await;
                    if phase == Phase::Enter && accepted == Some(true) && !counted {
                        counted = true;
                        world.take_acquisition(client);
                    }
                    io.send(procs, Command::Accessed(accepted)).await?;
                }
                Reply::Released => {
                    release(Kind::Ok, None);
                    break;
                }
                Reply::Lost { reason } => {
                    let why = match reason {
                        Some(r) => format!("{NO_LONGER_HELD} ({r})"),
                        None => NO_LONGER_HELD.to_string(),
                    };
                    release(Kind::Fail, Some(why));
                    break;
                }
                // The outcome is unknown: the lock may still be held, as after a store error.
                Reply::Error { reason } => {
                    release(Kind::Info, Some(reason));
                    break;
                }
                other => {
                    return Err(unexpected(
                        procs,
                        &io,
                        &other,
                        "an access or the section's end",
                    ))
                }
            }
        }
        tokio::time::sleep(think).await;
    }
    world.finish(client);
    // Done: it may exit now; whether it does is its business (it is killed at the end).
    let _ = io.send(procs, Command::Stop).await;
    Ok(())
}

/// Records client `client`'s start (its process, its incarnation) in the history, for the report.
fn note_start(world: &RealWorld, client: usize, incarnation: u64) {
    let procs = world.processes().expect("client processes");
    let pid = procs.running.borrow().get(&client).map_or(0, |r| r.pid);
    world.record(
        client,
        Kind::Observe,
        Op::Note {
            text: format!(
                "client process {pid} (incarnation {incarnation}) of `{}`, protocol v{}",
                procs.command(),
                protocol::VERSION
            ),
        },
    );
}

/// The time left before the run ends.
fn wait_left(world: &RealWorld) -> Duration {
    let end = world.scenario.duration_ms * 1_000_000;
    Duration::from_nanos(end.saturating_sub(world.true_ns()))
}

/// Performs and records client `client`'s access, as `lockcheck_core::workload` does.
async fn access(
    world: &Rc<RealWorld>,
    client: usize,
    phase: Phase,
    token: &str,
    fence: Option<u64>,
) -> Option<bool> {
    let op = Op::Access {
        phase,
        token: token.to_string(),
        fence,
        shared: false,
    };
    world.record(client, Kind::Invoke, op.clone());
    let request = AccessRequest {
        phase,
        token: token.to_string(),
        fence,
        shared: false,
    };
    let answer =
        crate::client::touch(world, client, request, tokio::time::sleep(ACCESS_TIMEOUT)).await;
    let kind = match answer {
        Some(true) => Kind::Ok,
        Some(false) => Kind::Fail,
        None => Kind::Info,
    };
    world.record(client, kind, op);
    answer
}

fn unexpected(procs: &ClientProcesses, io: &Io, reply: &Reply, expected: &str) -> RealError {
    procs.error(
        &io.name,
        io.node,
        format!(
            "said {reply:?} where lockcheck waited for {expected}{}",
            io.said()
        ),
    )
}

/// The liveness probe as a client process: a new process acquires within `wait` and releases at
/// once; recorded as lockcheck's own probe is (`lockcheck_core::workload::probe`).
pub async fn probe(world: &Rc<RealWorld>, wait: Duration) -> Result<(), RealError> {
    let procs = world.processes().expect("client processes");
    let node = world.topology().probe();
    procs
        .start(&world.scenario, node, &world.servers_for(node), 1)
        .await?;
    let mut io = procs.take_io(node).expect("just started");
    world.record(node, Kind::Invoke, acquire_op(None));
    io.send(
        procs,
        Command::Acquire {
            wait_ms: wait.as_millis() as u64,
            hold_ms: 0,
            probe: true,
        },
    )
    .await?;
    let silence = procs.command.silence;
    let token = match io.read(procs, wait + silence).await? {
        Reply::Acquired {
            token,
            fence,
            valid_ms,
        } => {
            let token = token.unwrap_or_else(|| "probe.1.1".into());
            world.record(node, Kind::Ok, acquired_op(&token, fence, valid_ms));
            token
        }
        Reply::NotAcquired { .. } => {
            let gave_up = format!("not acquired within {} ms", wait.as_millis());
            world.record(node, Kind::Fail, acquire_op(Some(gave_up)));
            let _ = io.send(procs, Command::Stop).await;
            return Ok(());
        }
        Reply::Error { reason } => {
            world.record(node, Kind::Fail, acquire_op(Some(reason)));
            let _ = io.send(procs, Command::Stop).await;
            return Ok(());
        }
        other => return Err(unexpected(procs, &io, &other, "an answer to acquire")),
    };
    world.record(
        node,
        Kind::Invoke,
        Op::Release {
            token: token.clone(),
            error: None,
        },
    );
    loop {
        let (kind, error) = match io.read(procs, silence).await? {
            // The probe does not touch the resource: an access it asks for anyway is answered
            // "no answer", and not recorded.
            Reply::Access(_) => {
                io.send(procs, Command::Accessed(None)).await?;
                continue;
            }
            Reply::Released => (Kind::Ok, None),
            Reply::Lost { reason } => (Kind::Fail, reason.or(Some(NO_LONGER_HELD.into()))),
            Reply::Error { reason } => (Kind::Info, Some(reason)),
            other => return Err(unexpected(procs, &io, &other, "the probe's release")),
        };
        world.record(node, kind, Op::Release { token, error });
        break;
    }
    let _ = io.send(procs, Command::Stop).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(login: &Login, backend: Backend) -> Vec<(&'static str, String)> {
        ClientLogin::of(login, backend).vars
    }

    #[test]
    fn a_client_is_given_the_runs_login_and_nothing_it_does_not_need() {
        assert_eq!(vars(&Login::default(), Backend::Redis), vec![]);
        // MariaDB: the account lockcheck's own clients use when no --user is given.
        assert_eq!(
            vars(&Login::default(), Backend::Mysql),
            vec![("LOCKCHECK_USER", "root".to_string())]
        );
        let login = Login {
            user: Some("alice".into()),
            password: Some("s3cret".into()),
            tls: None,
        };
        assert_eq!(
            vars(&login, Backend::ZooKeeper),
            vec![
                ("LOCKCHECK_USER", "alice".to_string()),
                ("LOCKCHECK_PASSWORD", "s3cret".to_string())
            ]
        );
        for (var, _) in vars(&login, Backend::Mysql) {
            assert!(
                LOGIN_VARS.contains(&var),
                "{var} is set, so it must be cleared too"
            );
        }
    }

    #[test]
    fn the_password_is_blanked_out_of_what_is_kept() {
        assert_eq!(
            redact("auth s3cret failed".into(), Some("s3cret")),
            "auth [LOCKCHECK_PASSWORD] failed"
        );
        assert_eq!(redact("nothing".into(), Some("s3cret")), "nothing");
        assert_eq!(redact("nothing".into(), None), "nothing");
        // An empty password blanks nothing.
        let login = Login {
            password: Some(String::new()),
            ..Login::default()
        };
        assert_eq!(ClientLogin::of(&login, Backend::Redis).password, None);
    }
}
