//! Real Redis replication under a real Sentinel: the primary `redis-0`, its replicas `redis-1`,
//! …, and one Sentinel that performs the scenario's failovers.
//!
//! The shape of a production deployment, on loopback:
//! - Every server has an **ingress proxy** ([`Proxy`]) that the other servers and Sentinel reach
//!   it through, and each server announces that proxy as its address
//!   (`replica-announce-ip`/`replica-announce-port`). So every replication link runs through
//!   the proxy of the server it replicates from — the initial one, the ones Sentinel makes in a
//!   failover, and the one it gives an old primary that comes back — and the proxy delays it by
//!   `params.redis.replication_lag_ms` each way: a replica has what its primary had that long
//!   ago (the simulation's replica pulls every `replication_lag_ms`, so it is up to that much
//!   behind), and `WAIT` hears from a replica after twice that (the simulation: within it).
//!   What a link still holds when its server dies is lost with it
//!   ([`crate::proxy::Link::lose_in_flight_when_upstream_closes`]), as what a simulated
//!   replica had not pulled is.
//!   Sentinel's own connections to the servers run through the same proxies.
//! - The replicas are told `REPLICAOF` the primary's proxy and `CONFIG REWRITE` it, as Sentinel
//!   does on every reconfiguration: a restarted server comes back with the role it last had.
//! - Sentinel watches the primary (`SENTINEL MONITOR lockcheck …`, quorum 1) with a
//!   `down-after-milliseconds` longer than any run: it never fails over on its own. A failover
//!   happens when the scenario says (`Action::Failover`, at its time, as in the simulation):
//!   [`Replication::failover`] makes the named replica the one Sentinel prefers
//!   (`replica-priority`) and asks Sentinel for it (`SENTINEL FAILOVER`). The failover itself is
//!   Sentinel's: it elects itself, promotes the replica (`REPLICAOF NO ONE`, `CONFIG REWRITE`,
//!   `CLIENT KILL TYPE normal`), points the other replicas at it, and, when the old primary
//!   comes back, makes it a replica of the new one.
//! - Clients ask Sentinel for the primary (`SENTINEL get-master-addr-by-name`) as a
//!   Sentinel-aware client library does: when they connect, and again after a connection error
//!   or a `READONLY` reply ([`SentinelRoute`]). The answer is a server's announced address; the
//!   client connects through its own proxy to that server, so a client's faults still act on
//!   its own links.
//!
//! Sentinel's periods are shortened (`SENTINEL DEBUG`: it asks the servers for `INFO` every
//! second rather than every 10 s, reconnects after 100 ms rather than 15 s, and demotes a
//! primary that comes back after 400 ms rather than 8 s), so that it learns of a replica's
//! priority within a second and an old primary is demoted within about a second of its restart.
//! (Shorter still, and a replica behind a lagging link looks unfit to Sentinel: it trusts only
//! recent answers, counted in those periods.)

use crate::error::RealError;
use crate::launcher::{Launcher, Sentinel};
use crate::proxy::{Impairment, Proxy};
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, Value,
};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// The name Sentinel knows the primary by.
pub const MASTER_NAME: &str = "lockcheck";

/// How long one control command (to a server or to Sentinel) may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the replicas may take to sync, and Sentinel to learn them, before the run starts.
const SETUP_WITHIN: Duration = Duration::from_secs(30);
/// How long Sentinel may take to promote the replica a failover names. Generous: a failover
/// that Sentinel does not finish is an error of the run, and a busy machine must not make one.
const FAILOVER_WITHIN: Duration = Duration::from_secs(30);
/// How often the control loops look again.
const POLL: Duration = Duration::from_millis(20);
/// Sentinel's `failover-timeout`: how long it gives the other replicas to follow the new
/// primary before it finishes the failover anyway.
const FAILOVER_TIMEOUT_MS: u64 = 10_000;
/// Sentinel's `down-after-milliseconds`: a day, so that it never fails over on its own.
const NEVER_DOWN_MS: u64 = 86_400_000;

/// The replicated servers of one run and their Sentinel. Dropping it ends the ingress proxies
/// (the processes are the launcher's).
pub struct Replication {
    /// Per server (in server order): its own address.
    servers: Vec<SocketAddr>,
    /// Per server: the proxy the other servers and Sentinel reach it through.
    ingress: Vec<Proxy>,
    /// Sentinel's address.
    sentinel: SocketAddr,
    /// Sentinel's log, whose end an error quotes.
    log: std::path::PathBuf,
}

impl Replication {
    /// Makes `servers[0]` the primary and the others its replicas, each replication link
    /// through an ingress proxy delayed by `lag`, and starts a Sentinel watching them with
    /// `launcher`; returns when every replica is in sync and Sentinel knows them all.
    /// Replica `preferred`, if given, is the one Sentinel promotes first (the scenario's first
    /// failover names it): told now, Sentinel need not learn it during the run.
    pub async fn start(
        launcher: &Rc<RefCell<Launcher>>,
        servers: &[SocketAddr],
        lag: Duration,
        seed: u64,
        preferred: Option<usize>,
    ) -> Result<Replication, RealError> {
        let mut ingress = Vec::new();
        for (i, &upstream) in servers.iter().enumerate() {
            // Its own stream of the scenario's seed, apart from the clients' proxies'.
            let proxy = Proxy::start(upstream, seed ^ (0x5e27_1e00_0000_0000 | i as u64))
                .await
                .map_err(|source| RealError::Proxy { upstream, source })?;
            ingress.push(proxy);
        }
        let primary = ingress[0].addr();
        for (i, &server) in servers.iter().enumerate() {
            let port = ingress[i].addr().port().to_string();
            let announce = [
                "CONFIG",
                "SET",
                "replica-announce-ip",
                "127.0.0.1",
                "replica-announce-port",
                &port,
            ];
            command(server, &announce).await.map_err(setup_error(i))?;
            let priority = if preferred == Some(i) { "1" } else { "100" };
            command(server, &["CONFIG", "SET", "replica-priority", priority])
                .await
                .map_err(setup_error(i))?;
            if i > 0 {
                let port = primary.port().to_string();
                command(server, &["REPLICAOF", "127.0.0.1", &port])
                    .await
                    .map_err(setup_error(i))?;
            }
            command(server, &["CONFIG", "REWRITE"])
                .await
                .map_err(setup_error(i))?;
        }
        let deadline = tokio::time::Instant::now() + SETUP_WITHIN;
        for (i, &server) in servers.iter().enumerate().skip(1) {
            until(deadline, || async move {
                let info = command(server, &["INFO", "replication"]).await?;
                Ok(text(&info).contains("master_link_status:up"))
            })
            .await
            .map_err(|why| {
                RealError::Replication(format!("redis-{i} did not sync with redis-0: {why}"))
            })?;
        }

        let index = launcher
            .borrow_mut()
            .add("sentinel", Box::new(Sentinel), Vec::new())?;
        Launcher::until_ready(launcher, index).await?;
        let sentinel = launcher.borrow().addr(index);
        let log = launcher
            .borrow()
            .root()
            .join("sentinel")
            .join("sentinel.log");
        let tell = |args: Vec<String>| async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            command(sentinel, &args).await.map_err(|why| {
                RealError::Replication(format!("Sentinel: {}: {why}", args.join(" ")))
            })
        };
        let strings = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        tell(strings(&[
            "SENTINEL",
            "DEBUG",
            "info-period",
            "1000",
            "publish-period",
            "100",
            "min-link-reconnect-period",
            "100",
        ]))
        .await?;
        let port = primary.port().to_string();
        tell(strings(&[
            "SENTINEL",
            "MONITOR",
            MASTER_NAME,
            "127.0.0.1",
            &port,
            "1",
        ]))
        .await?;
        tell(strings(&[
            "SENTINEL",
            "SET",
            MASTER_NAME,
            "down-after-milliseconds",
            &NEVER_DOWN_MS.to_string(),
            "failover-timeout",
            &FAILOVER_TIMEOUT_MS.to_string(),
            "parallel-syncs",
            &servers.len().to_string(),
        ]))
        .await?;
        let ingress_addrs: Vec<SocketAddr> = ingress.iter().map(Proxy::addr).collect();
        let replicas: Vec<SocketAddr> = ingress_addrs[1..].to_vec();
        until(deadline, || {
            let replicas = replicas.clone();
            let ingress_addrs = ingress_addrs.clone();
            async move {
                let known = replicas_of(sentinel).await?;
                Ok(replicas.iter().all(|addr| {
                    known.get(addr).is_some_and(|r| {
                        r.get("flags").is_some_and(|f| f == "slave")
                            && r.get("master-link-status").is_some_and(|s| s == "ok")
                            && r.get("slave-priority").is_some_and(|p| {
                                (p == "1") == (preferred.map(|i| ingress_addrs[i]) == Some(*addr))
                            })
                    })
                }))
            }
        })
        .await
        .map_err(|why| {
            RealError::Replication(format!("Sentinel did not learn every replica: {why}"))
        })?;

        // The lag from now on: the run starts in sync. What a link still holds when its
        // server dies is lost with it, as what a replica had not pulled is in the simulation.
        for proxy in &ingress {
            proxy.link().impair(Impairment {
                delay: lag,
                loss: 0.0,
            });
            proxy.link().lose_in_flight_when_upstream_closes();
        }
        tracing::info!(
            "replication: redis-0 and {} replica(s) in sync, Sentinel at {sentinel}",
            servers.len() - 1
        );
        Ok(Replication {
            servers: servers.to_vec(),
            ingress,
            sentinel,
            log,
        })
    }

    /// The last lines of Sentinel's log, for an error.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n  ")
    }

    /// Sentinel's address.
    pub fn sentinel(&self) -> SocketAddr {
        self.sentinel
    }

    /// Per server (in server order): the address it is known by to the other servers, to
    /// Sentinel and in Sentinel's answers (its ingress proxy's).
    pub fn announced(&self) -> Vec<SocketAddr> {
        self.ingress.iter().map(Proxy::addr).collect()
    }

    /// Has Sentinel promote server `to` (in server order): it is made the replica Sentinel
    /// prefers, Sentinel is asked to fail over, and this returns once Sentinel names it as the
    /// primary. An error when Sentinel does not (it promoted another, or not within
    /// [`FAILOVER_WITHIN`]: the replica is down, say): the run cannot tell its story.
    pub async fn failover(&self, to: usize) -> Result<(), RealError> {
        let wanted = self.ingress[to].addr();
        let name = |i: usize| format!("redis-{i}");
        let fail = |why: String| {
            RealError::Replication(format!(
                "Sentinel did not promote {}: {why}; Sentinel's log ends:\n  {}",
                name(to),
                self.log_tail()
            ))
        };
        let deadline = tokio::time::Instant::now() + FAILOVER_WITHIN;
        let current = master_of(self.sentinel).await.map_err(fail)?;
        if current == wanted {
            return Ok(());
        }
        // Sentinel promotes the replica with the lowest priority; it reads priorities from
        // each replica's INFO. A server that is down answers nothing and is left as it is.
        for (i, &server) in self.servers.iter().enumerate() {
            let priority = if i == to { "1" } else { "100" };
            if let Err(why) =
                command(server, &["CONFIG", "SET", "replica-priority", priority]).await
            {
                tracing::debug!("replica-priority of {}: {why}", name(i));
            }
        }
        let sentinel = self.sentinel;
        until(deadline, || async move {
            let known = replicas_of(sentinel).await?;
            Ok(known
                .get(&wanted)
                .is_some_and(|r| r.get("slave-priority").is_some_and(|p| p == "1")))
        })
        .await
        .map_err(|why| {
            fail(format!(
                "Sentinel never saw it as the preferred replica: {why}"
            ))
        })?;
        // Asked again whenever no failover is under way: Sentinel gives one up when, at the
        // moment it picks, no replica looks fit to it (its last word from one is too old).
        let announced = self.announced();
        let promoted = until(deadline, || async move {
            if master_of(sentinel).await? != current {
                return Ok(true);
            }
            let master = fields(command(sentinel, &["SENTINEL", "MASTER", MASTER_NAME]).await?);
            let under_way = master
                .get("flags")
                .is_some_and(|f| f.contains("failover_in_progress"));
            if !under_way {
                match command(sentinel, &["SENTINEL", "FAILOVER", MASTER_NAME]).await {
                    Ok(_) => {}
                    // One finishing, or no replica it can promote yet: ask again.
                    Err(why) if why.contains("INPROG") || why.contains("NOGOODSLAVE") => {
                        tracing::debug!("SENTINEL FAILOVER: {why}");
                    }
                    Err(why) => return Err(why),
                }
            }
            Ok(false)
        })
        .await;
        promoted.map_err(|why| fail(format!("no new primary: {why}")))?;
        let now = master_of(sentinel).await.map_err(fail)?;
        if now != wanted {
            let who = announced
                .iter()
                .position(|&a| a == now)
                .map_or(now.to_string(), name);
            return Err(fail(format!("it promoted {who}")));
        }
        Ok(())
    }
}

/// How a client finds the primary behind Sentinel: it asks Sentinel, and reaches the server it
/// names through the client's own route to that server.
#[derive(Clone, Debug)]
pub struct SentinelRoute {
    /// Sentinel's address.
    pub sentinel: SocketAddr,
    /// Per server: the address Sentinel names it by.
    pub announced: Vec<SocketAddr>,
    /// Per server: where this client connects to reach it (its proxy).
    pub routes: Vec<SocketAddr>,
}

impl SentinelRoute {
    /// Where this client reaches the primary Sentinel names now.
    pub async fn primary(&self) -> Result<SocketAddr, String> {
        let named = master_of(self.sentinel).await?;
        let server = self
            .announced
            .iter()
            .position(|&a| a == named)
            .ok_or_else(|| format!("Sentinel names {named}, which is no server of this run"))?;
        Ok(self.routes[server])
    }
}

/// The primary Sentinel at `sentinel` names now (`SENTINEL get-master-addr-by-name`).
pub async fn master_of(sentinel: SocketAddr) -> Result<SocketAddr, String> {
    let reply = command(
        sentinel,
        &["SENTINEL", "get-master-addr-by-name", MASTER_NAME],
    )
    .await?;
    let Value::Array(items) = reply else {
        return Err(format!("Sentinel knows no {MASTER_NAME}: {reply:?}"));
    };
    let [ip, port] = items.as_slice() else {
        return Err(format!("Sentinel's answer: {items:?}"));
    };
    format!("{}:{}", text(ip), text(port))
        .parse()
        .map_err(|e| format!("Sentinel's answer {ip:?} {port:?}: {e}"))
}

/// What Sentinel at `sentinel` knows of the replicas, by announced address: each replica's
/// fields (`flags`, `slave-priority`, `master-link-status`, …).
async fn replicas_of(
    sentinel: SocketAddr,
) -> Result<BTreeMap<SocketAddr, BTreeMap<String, String>>, String> {
    let reply = command(sentinel, &["SENTINEL", "REPLICAS", MASTER_NAME]).await?;
    let Value::Array(replicas) = reply else {
        return Err(format!("SENTINEL REPLICAS: {reply:?}"));
    };
    let mut known = BTreeMap::new();
    for replica in replicas {
        let Value::Array(fields) = replica else {
            continue;
        };
        let fields = fields_of(&fields);
        let addr = format!(
            "{}:{}",
            fields.get("ip").map_or("", String::as_str),
            fields.get("port").map_or("", String::as_str)
        );
        if let Ok(addr) = addr.parse() {
            known.insert(addr, fields);
        }
    }
    Ok(known)
}

/// The fields of a reply that is a flat list of names and values (`SENTINEL MASTER`); none for
/// another reply.
fn fields(reply: Value) -> BTreeMap<String, String> {
    match reply {
        Value::Array(items) => fields_of(&items),
        _ => BTreeMap::new(),
    }
}

/// The fields of a flat list of names and values.
fn fields_of(items: &[Value]) -> BTreeMap<String, String> {
    items
        .chunks(2)
        .filter_map(|pair| match pair {
            [k, v] => Some((text(k), text(v))),
            _ => None,
        })
        .collect()
}

/// A reply's text (a bulk or simple string); empty for anything else.
fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Okay => "OK".into(),
        Value::Int(n) => n.to_string(),
        _ => String::new(),
    }
}

/// The error of setting up server `i`'s replication.
fn setup_error(i: usize) -> impl Fn(String) -> RealError {
    move |why| RealError::Replication(format!("setting up redis-{i}: {why}"))
}

/// Sends one command to the server (or Sentinel) at `addr` on a connection of its own, and
/// returns its reply; an error reply, a broken connection or no answer within
/// [`CONTROL_TIMEOUT`] is an error, said in words.
pub async fn command(addr: SocketAddr, args: &[&str]) -> Result<Value, String> {
    let exchange = async {
        let info = ConnectionAddr::Tcp(addr.ip().to_string(), addr.port())
            .into_connection_info()?
            .set_redis_settings(RedisConnectionInfo::default().set_skip_set_lib_name());
        let client = Client::open(info)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query_async::<Value>(&mut connection).await
    };
    match tokio::time::timeout(CONTROL_TIMEOUT, exchange).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "{addr}: no answer to {} within {CONTROL_TIMEOUT:?}",
            args[0]
        )),
    }
}

/// Asks `check` again every [`POLL`] until it says yes (`Ok(true)`), fails, or `deadline`
/// passes (an error saying the last thing it said).
async fn until<F, Fut>(deadline: tokio::time::Instant, mut check: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    let mut last = String::from("not yet");
    loop {
        match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(why) => last = why,
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("gave up waiting ({last})"));
        }
        tokio::time::sleep(POLL).await;
    }
}
