//! Why a real run could not be carried out.

use lockcheck_core::ScenarioError;
use std::path::PathBuf;
use thiserror::Error;

/// A real run that could not start or could not be carried out. (A violation is not an error: it
/// is a verdict, in the run's outcome.)
#[derive(Debug, Error)]
pub enum RealError {
    /// A server binary (or what else the server needs, a jar) is not installed.
    #[error("{binary} not found: install it with `{install}`")]
    MissingBinary {
        /// The binary looked for.
        binary: &'static str,
        /// The command that installs it.
        install: &'static str,
    },
    /// The scenario is not valid.
    #[error("invalid scenario: {0}")]
    Scenario(#[from] ScenarioError),
    /// The scenario asks for something real mode cannot do yet.
    #[error("not supported in real mode yet: {0}")]
    Unsupported(String),
    /// A server could not be started, stopped or signalled.
    #[error("{server}: {reason}")]
    Server {
        /// The server's node name (`redis-0`).
        server: String,
        /// What went wrong, with the server's log where there is one.
        reason: String,
    },
    /// The servers given with `--endpoints` do not fit the scenario.
    #[error("--endpoints: {0}")]
    Endpoints(String),
    /// A server given with `--endpoints` did not answer.
    #[error("{server}: nothing answers at {addr} (is the server running, on that address?)")]
    Unreachable {
        /// The server's node name.
        server: String,
        /// The address given for it.
        addr: std::net::SocketAddr,
    },
    /// A server given with `--endpoints` answered, but not as the run needs: a refused login,
    /// another kind of server, a failed administrative request.
    #[error("{server} at {addr}: {reason}")]
    Endpoint {
        /// The server's node name.
        server: String,
        /// The address given for it.
        addr: std::net::SocketAddr,
        /// What went wrong, and what to do about it.
        reason: String,
    },
    /// Something already exists under a name the run would write, on a server given with
    /// `--endpoints`: the run would take it for the lock's own state, and change it.
    #[error(
        "{server}: {} already exist(s); the run would read and change it. Choose another \
         --key (by default each run draws a fresh one), or remove it",
        .found.join(", ")
    )]
    Occupied {
        /// The server's node name.
        server: String,
        /// What was found.
        found: Vec<String>,
    },
    /// What a `--client` declares of its library (`--client-keys`, `--client-lease-ms`) cannot
    /// be used as given: the message names the flag, the value and why.
    #[error("{0}")]
    Declared(String),
    /// TLS to the user's servers: a file that does not load, a certificate that does not verify,
    /// a server that does not speak TLS where it was asked to.
    #[error("TLS: {0}")]
    Tls(String),
    /// A server setting the scenario relies on is not what the server gives the run's sessions.
    #[error("server setting: {0}")]
    Setting(String),
    /// A file or directory the run needs could not be made.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A client's proxy to a server could not be started.
    #[error("proxy to {upstream}: {source}")]
    Proxy {
        /// The server it was to relay to.
        upstream: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Redis replication or Sentinel did not do what the run needs of it: the replicas did not
    /// sync, Sentinel did not learn them, or did not promote the replica a failover names in
    /// time. An error of the run, never a verdict.
    #[error("Redis replication: {0}")]
    Replication(String),
    /// The time-shift library (for clock faults) could not be built.
    #[error("clock faults: {0}")]
    TimeShift(String),
    /// The peer-link library (which keeps an ensemble's member-to-member connections on their
    /// proxies, so that partitions of the members are real) could not be built.
    #[error("ensemble links: {0}")]
    PeerLink(String),
    /// A client process (`lockcheck real --client`) did not keep to the protocol: it exited,
    /// printed a line that is not the protocol's, or stayed silent past its timeout. An error of
    /// the run, never a verdict about the lock.
    #[error("{client} (the --client command `{command}`): {reason}{}", stderr_tail(.stderr))]
    Client {
        /// The client's node name (`client-0`, `probe`).
        client: String,
        /// The command it runs.
        command: String,
        /// What went wrong, with what it printed.
        reason: String,
        /// The last lines it wrote to stderr.
        stderr: Vec<String>,
    },
    /// The async runtime could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The run was interrupted (Ctrl-C, SIGTERM); every server it started was stopped and its
    /// directories removed.
    #[error("interrupted by {}; every server this run started was stopped", .0.name())]
    Interrupted(crate::signals::Signal),
}

/// The end of a client's stderr, for [`RealError::Client`]'s message.
fn stderr_tail(lines: &[String]) -> String {
    if lines.is_empty() {
        "\n  (nothing on its stderr)".to_string()
    } else {
        format!("\n  its stderr, last lines:\n    {}", lines.join("\n    "))
    }
}
