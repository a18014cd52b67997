//! A standalone ZooKeeper server from Debian's `zookeeper` package: `java` running
//! `ZooKeeperServerMain` on a `zoo.cfg` of its own, ready once `srvr` reports a `Mode:`.

use super::{find_on_path, ServerKind};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Command;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Java runtime looked for on PATH.
pub const JAVA: &str = "java";
/// How to install ZooKeeper (it brings a Java runtime with it).
pub const ZOOKEEPER_INSTALL: &str = "apt-get install zookeeper";
/// Where Debian's `libzookeeper-java` puts the server. Its manifest's `Class-Path` names the
/// jars it needs (netty, jute, slf4j-api, …), so it is the whole classpath but for logging.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// The slf4j binding and log4j 1.2 that Debian's package logs with (`log4j.properties` in its
/// `conf_example`); without them the server logs nothing. Both are dependencies of the package.
const LOGGING_JARS: [&str; 2] = [
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
];
/// Netty's codecs, which its TLS handler is built on (a `secureClientPort`, as a user's server
/// may have): ZooKeeper's own distribution ships the jar in `lib/`, Debian's manifest leaves it
/// out. From `libnetty-java`, a dependency of the package.
const NETTY_CODEC_JAR: &str = "/usr/share/java/netty-codec.jar";
/// The class the JVM runs: a standalone server.
pub const MAIN_CLASS: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
/// The server's log, in its directory.
pub(crate) const LOG_FILE: &str = "zookeeper.log";

/// A standalone ZooKeeper server.
///
/// Its `tickTime` is the simulated server's ([`DEFAULT_TICK_TIME_MS`]) wherever a story runs,
/// on purpose: the tick is the granularity of session expiry (a session ends between its timeout
/// and its timeout plus a tick after its last renewal), so both worlds expire a silent client's
/// session in the same window, and a story's verdict does not depend on which world tells it.
/// The session timeouts a server grants are set explicitly to the span the tick allows (2 to 20
/// ticks), which grants `session_timeout_ms` as asked.
///
/// [`DEFAULT_TICK_TIME_MS`]: lockcheck_core::scenario::DEFAULT_TICK_TIME_MS
///
/// Every transaction is logged to the data directory before it is answered (ZooKeeper's default
/// `forceSync=yes`), so a crash and a restart on the same directory keep the tree and the open
/// sessions (each with a fresh timeout from the restart), as the simulated server's disk does.
pub struct ZooKeeper {
    /// The session timeout clients will ask for, in ms; the server must grant it.
    pub session_timeout_ms: u64,
    /// The server's `tickTime`, in ms: [`DEFAULT_TICK_TIME_MS`] for every story, so that both
    /// worlds expire sessions in the same window. The conformance test that compares session
    /// expiry with the model (given the same tick) asks for a smaller one, so that an expiry
    /// costs a fraction of a second rather than seconds.
    pub tick_time_ms: u64,
}

impl ZooKeeper {
    /// The JVM and server flags: a small heap, the serial collector and the client compiler
    /// only, for a start in about half a second on a small machine; no admin web server; the
    /// four-letter words the readiness probe uses.
    fn jvm_flags() -> [&'static str; 6] {
        [
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=srvr,ruok,stat",
            // Otherwise log4j's loggers are registered as JMX beans, which nobody reads.
            "-Dzookeeper.jmx.log4j.disable=true",
        ]
    }

    /// Writes `zoo.cfg` (the tick, the session timeouts it grants, the data dir, the client
    /// port, and `extra`: an ensemble member's lines) and the logging configuration into `dir`.
    pub(crate) fn write_config(&self, dir: &Path, port: u16, extra: &str) -> Result<(), String> {
        let tick = self.tick_time_ms;
        if tick == 0 {
            return Err("tickTime must be positive".into());
        }
        let (min, max) = (2 * tick, 20 * tick);
        if !(min..=max).contains(&self.session_timeout_ms) {
            return Err(format!(
                "session timeout {} ms is outside what the server grants ({min}..={max} ms, 2 to \
                 20 ticks of {tick} ms)",
                self.session_timeout_ms
            ));
        }
        let data = dir.join("data");
        std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        let config = format!(
            "# Written by lockcheck for one run.\n\
             tickTime={tick}\n\
             minSessionTimeout={min}\n\
             maxSessionTimeout={max}\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress=127.0.0.1\n\
             # Every client comes from 127.0.0.1 (through its proxies): no per-address cap.\n\
             maxClientCnxns=0\n\
             {extra}",
            data = data.display(),
        );
        write(&dir.join("zoo.cfg"), &config)?;
        // Debian's conf_example/log4j.properties, reduced to one file appender in the server's
        // directory.
        let logging = format!(
            "log4j.rootLogger=INFO, FILE\n\
             log4j.appender.FILE=org.apache.log4j.FileAppender\n\
             log4j.appender.FILE.File={log}\n\
             log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n\
             log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} - %-5p [%t:%C{{1}}@%L] - %m%n\n",
            log = dir.join(LOG_FILE).display(),
        );
        write(&dir.join("log4j.properties"), &logging)
    }

    /// The JVM's command line running `main_class` on `dir`'s `zoo.cfg`.
    pub(crate) fn java(dir: &Path, main_class: &str) -> Command {
        let mut command = Command::new(JAVA);
        command
            .args(Self::jvm_flags())
            .arg(format!(
                "-Dlog4j.configuration=file:{}",
                dir.join("log4j.properties").display()
            ))
            .arg("-cp")
            .arg(Self::classpath())
            .arg(main_class)
            .arg(dir.join("zoo.cfg"));
        command
    }

    fn classpath() -> String {
        std::iter::once(ZOOKEEPER_JAR)
            .chain(
                LOGGING_JARS
                    .into_iter()
                    .chain([NETTY_CODEC_JAR])
                    .filter(|jar| Path::new(jar).exists()),
            )
            .collect::<Vec<_>>()
            .join(":")
    }
}

impl ServerKind for ZooKeeper {
    /// What must be installed, for messages: the runtime and the server's jar.
    fn binary(&self) -> &'static str {
        "zookeeper (java on PATH and /usr/share/java/zookeeper.jar)"
    }

    fn install(&self) -> &'static str {
        ZOOKEEPER_INSTALL
    }

    /// The JVM's command line names the server's main class.
    fn process_marker(&self) -> &'static str {
        MAIN_CLASS
    }

    /// Java on PATH and the server's jar where Debian puts it.
    fn installed(&self) -> bool {
        find_on_path(JAVA).is_some() && Path::new(ZOOKEEPER_JAR).is_file()
    }

    fn prepare(&self, dir: &Path, port: u16) -> Result<(), String> {
        self.write_config(dir, port, "")
    }

    /// `zoo.cfg` names the port: written again (the rest of what `prepare` writes is the same).
    fn port_moved(&self, dir: &Path, port: u16) -> Result<(), String> {
        self.prepare(dir, port)
    }

    fn command(&self, dir: &Path, _port: u16) -> Command {
        Self::java(dir, MAIN_CLASS)
    }

    fn ready(&self, addr: SocketAddr) -> Pin<Box<dyn Future<Output = bool>>> {
        Box::pin(serving(addr))
    }

    fn logs(&self) -> &'static [&'static str] {
        &[LOG_FILE]
    }

    /// A JVM start, or a restart that replays the transaction log, on a loaded two-core machine.
    fn ready_within(&self) -> Duration {
        Duration::from_secs(30)
    }
}

pub(crate) fn write(path: &PathBuf, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether the server at `addr` serves clients: its `srvr` answer has a `Mode:` line. (`ruok`
/// answers `imok` as soon as the port is open, before the database is loaded; an ensemble member
/// that is not in a quorum answers `srvr` with "not currently serving requests".)
pub async fn serving(addr: SocketAddr) -> bool {
    mode(addr).await.is_some()
}

/// What the server at `addr` says it is in its `srvr` answer's `Mode:` line (`standalone`,
/// `leader`, `follower`), if it answers within half a second and serves clients.
pub async fn mode(addr: SocketAddr) -> Option<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(b"srvr").await?;
        let mut reply = Vec::new();
        // The server closes the connection after its answer.
        stream.read_to_end(&mut reply).await?;
        Ok::<Option<String>, std::io::Error>(
            String::from_utf8_lossy(&reply)
                .lines()
                .find_map(|line| line.strip_prefix("Mode:"))
                .map(|mode| mode.trim().to_string()),
        )
    };
    match tokio::time::timeout(Duration::from_millis(500), exchange).await {
        Ok(Ok(mode)) => mode,
        _ => None,
    }
}
