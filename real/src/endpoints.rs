//! Servers the user runs (`lockcheck real --endpoints`): how lockcheck logs in to them, and what
//! a run does to their data.
//!
//! A run against someone's servers must neither lie nor litter:
//! - **Its own names.** Everything it writes is named after the scenario's `params.key` (by
//!   default a fresh name per run: the CLI draws it), and before anything starts [`occupied`]
//!   looks for every name the run could write; one that exists refuses the run. An existing
//!   key would otherwise be judged as the algorithm's own lock (a "deadlock" that is the user's
//!   data), and the run would change it.
//! - **The settings it relies on.** A MariaDB scenario's `wait_timeout` and
//!   `innodb_lock_wait_timeout` are applied to every session of the run (and [`prepare`] reads
//!   them back: a server that does not take them refuses the run). A ZooKeeper session timeout
//!   and an etcd lease TTL are what the server negotiates: [`prepare`] asks for the scenario's,
//!   reads back what it got, and refuses the run when they differ. A Redis that may evict keys
//!   (a `maxmemory` with a policy other than `noeviction`) is refused: the model never evicts.
//!   Redis persistence matters only across a server crash, and every fault that needs the
//!   server's process is refused with endpoints ([`crate::support::check_endpoints`]).
//! - **Nothing left behind.** [`remove`] deletes what the run created, unless the user keeps it
//!   (`--keep`): the Redis keys of [`lockcheck_algorithms::redis::keys_of`], the ZooKeeper node
//!   `/KEY` with its children, the etcd keys under `/KEY/` and the session leases the run's
//!   clients were granted ([`revoke_leases`]), the MariaDB database `KEY` (its `lock_table` and
//!   `lock_fence`). A `--client`'s library declares the names it writes of its own
//!   (`--client-keys`): [`crate::declared`] checks them free and removes them alongside.
//! - **Credentials.** A user name and a password ([`Login`]): Redis `AUTH` (ACL user or
//!   `requirepass`), MariaDB's account, ZooKeeper's `digest` scheme; and TLS, with a client
//!   certificate when given ([`crate::tls`]). etcd's authentication is not supported: a run that
//!   asks for it is refused, never run without.

use crate::error::RealError;
use crate::etcd_gateway::{b64, int, prefix_end, Connection};
use crate::launcher::mariadb::{DATABASE, GLOBALS};
use crate::proxy::Proxy;
use crate::tls::Tls;
use lockcheck_algorithms::mysql::store::{CREATE_FENCE_SEQUENCE, CREATE_LOCK_TABLE};
use lockcheck_core::scenario::{Backend, Scenario};
use mysql_async::prelude::Queryable;
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use zookeeper_client as zk;

/// The environment variable a password is read from (never a flag: a flag shows in `ps`).
pub const PASSWORD_VAR: &str = "LOCKCHECK_PASSWORD";

/// How long one administrative exchange with a user's server may take.
const WITHIN: Duration = Duration::from_secs(5);

/// How lockcheck logs in to a server: nothing, a password (Redis `requirepass`), or a user and a
/// password; over TLS when the server asks for it (a client certificate is a credential too).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Login {
    /// The user (Redis ACL user, MariaDB account, ZooKeeper digest user).
    pub user: Option<String>,
    /// The password.
    pub password: Option<String>,
    /// TLS to every server ([`crate::tls`]); none: plain TCP.
    pub tls: Option<Tls>,
}

impl std::fmt::Debug for Login {
    // A password has no business in a log or a panic message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("tls", &self.tls)
            .finish()
    }
}

impl Login {
    /// The ZooKeeper `digest` credentials (`user:password`), when there is a user.
    pub fn zk_digest(&self) -> Option<Vec<u8>> {
        let user = self.user.as_ref()?;
        Some(format!("{user}:{}", self.password.as_deref().unwrap_or("")).into_bytes())
    }
}

/// Servers the user runs, one address per server node in server order, and how to use them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// The addresses.
    pub addrs: Vec<SocketAddr>,
    /// How to log in.
    pub login: Login,
    /// Leave what the run created (`--keep`), for a look at it afterwards.
    pub keep: bool,
}

impl Endpoints {
    /// Servers at `addrs`, without credentials, cleaned after the run.
    pub fn at(addrs: Vec<SocketAddr>) -> Endpoints {
        Endpoints {
            addrs,
            login: Login::default(),
            keep: false,
        }
    }
}

/// A fresh lock name for a run on a user's servers: `lockcheck_` and 8 random hex digits, so
/// two runs (or a run and the user's own data) do not meet by accident.
pub fn fresh_key() -> String {
    format!("lockcheck_{:08x}", rand::random::<u32>())
}

/// The MariaDB database a run's lock table lives in: the scenario's key when it names one, else
/// `lockcheck` (the launched server's).
pub fn database(scenario: &Scenario) -> String {
    scenario
        .params
        .key
        .clone()
        .unwrap_or_else(|| DATABASE.to_string())
}

/// Runs one administrative exchange with `server` at `addr`, bounded by [`WITHIN`].
async fn bounded<T>(
    server: &str,
    addr: SocketAddr,
    what: &str,
    exchange: impl Future<Output = Result<T, String>>,
) -> Result<T, RealError> {
    match tokio::time::timeout(WITHIN, exchange).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(reason)) => Err(RealError::Endpoint {
            server: server.to_string(),
            addr,
            reason: format!("{what}: {reason}"),
        }),
        Err(_) => Err(RealError::Endpoint {
            server: server.to_string(),
            addr,
            reason: format!("{what}: no answer within {} s", WITHIN.as_secs()),
        }),
    }
}

/// Refuses what the run cannot do on a user's server whatever it finds there (etcd with
/// credentials).
pub fn check_login(scenario: &Scenario, login: &Login) -> Result<(), RealError> {
    if scenario.algorithm.backend() == Backend::Etcd
        && (login.user.is_some() || login.password.is_some())
    {
        return Err(RealError::Unsupported(
            "etcd authentication: lockcheck's etcd client does not log in; give an etcd without \
             auth enabled"
                .into(),
        ));
    }
    Ok(())
}

/// Connects to `server` at `addr` as `login` and checks it is the scenario's kind of server:
/// an error that says what went wrong (nothing listens, the password is refused, another kind
/// of server answers).
pub async fn reach(
    scenario: &Scenario,
    server: &str,
    addr: SocketAddr,
    login: &Login,
) -> Result<(), RealError> {
    let backend = scenario.algorithm.backend();
    if let (Some(tls), false) = (&login.tls, backend == Backend::Mysql) {
        // TLS first, on its own: a certificate problem named as one, not as a dead server.
        bounded(server, addr, "TLS", async {
            tls.connect(addr)
                .await
                .map(drop)
                .map_err(|e| format!("{e} (is TLS on at this port, and do --tls-ca and --tls-server-name fit its certificate?)"))
        })
        .await?;
    }
    match backend {
        Backend::Redis => {
            bounded(server, addr, "Redis PING", async {
                let (mut c, _route) = redis_connection(addr, login).await?;
                let pong: String = redis::cmd("PING")
                    .query_async(&mut c)
                    .await
                    .map_err(|e| redis_reason(&e))?;
                if pong == "PONG" {
                    Ok(())
                } else {
                    Err(format!("answered '{pong}', not PONG"))
                }
            })
            .await
        }
        Backend::ZooKeeper => {
            bounded(server, addr, "ZooKeeper session", async {
                let (client, _route) = zk_session(scenario, addr, login).await?;
                // Not detached: dropping the client closes its session.
                drop(client);
                Ok(())
            })
            .await
        }
        Backend::Mysql => {
            bounded(server, addr, "MariaDB login", async {
                let mut c = mysql_connection(addr, login, None).await?;
                c.ping().await.map_err(|e| e.to_string())?;
                c.disconnect().await.ok();
                Ok(())
            })
            .await
        }
        Backend::Etcd => {
            bounded(server, addr, "etcd status", async {
                let (mut c, _route) = etcd_connection(addr, login).await?;
                let (status, _) = c
                    .post("/v3/maintenance/status", &json!({}))
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                if status == 200 {
                    Ok(())
                } else {
                    Err(format!(
                        "HTTP {status} (is it etcd's gRPC gateway, without auth?)"
                    ))
                }
            })
            .await
        }
    }
}

/// Who a server given with `--endpoints` is, as far as it says: two addresses of one server
/// (`127.0.0.1:6379` and `10.0.0.5:6379` of a Redis bound to both, a name and an address that
/// resolve differently but reach the same process through a proxy or NAT) would count twice in a
/// quorum, and the verdict would be about a topology that does not exist. [`distinct`] refuses
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// What the server calls itself, one process's alone: Redis's `run_id` (`INFO server`,
    /// drawn at each start), an etcd member's id in its cluster (`/v3/maintenance/status`).
    Named(String),
    /// The id of a ZooKeeper session just opened on it. ZooKeeper has no name of its own to ask
    /// for (`srvr` says no server id, `conf` and `envi` are off by default), but a server draws
    /// its session ids from one counter that starts at its own id (the top byte: 1 standalone,
    /// its `myid` in an ensemble) and the millisecond it started: two sessions opened one after
    /// the other on the same server are a few ids apart, on two servers (two members of an
    /// ensemble, or two servers not started in the same millisecond) far apart.
    ZkSession(i64),
    /// The server does not tell (a MariaDB: its locks run against one server, so there is
    /// never a second one to tell it from).
    Unknown,
}

impl Identity {
    /// Whether `self` (asked first) and `later` (asked after it) are one server.
    fn same_as(&self, later: &Identity) -> bool {
        match (self, later) {
            (Identity::Named(a), Identity::Named(b)) => a == b,
            (Identity::ZkSession(a), Identity::ZkSession(b)) => {
                // Same server: same top byte, and the later session a few ids on (other clients
                // may open sessions in between, far fewer than 2^16).
                (a >> 56) == (b >> 56) && b.wrapping_sub(*a) > 0 && b.wrapping_sub(*a) < 1 << 16
            }
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Identity::Named(name) => name.clone(),
            Identity::ZkSession(id) => format!("ZooKeeper sessions {id:#x} and the next"),
            Identity::Unknown => "unknown".into(),
        }
    }
}

/// Asks `server` at `addr` who it is ([`Identity`]).
pub async fn identity(
    scenario: &Scenario,
    server: &str,
    addr: SocketAddr,
    login: &Login,
) -> Result<Identity, RealError> {
    match scenario.algorithm.backend() {
        Backend::Redis => {
            let info = bounded(server, addr, "INFO server", async {
                let (mut c, _route) = redis_connection(addr, login).await?;
                redis::cmd("INFO")
                    .arg("server")
                    .query_async::<String>(&mut c)
                    .await
                    .map_err(|e| redis_reason(&e))
            })
            .await?;
            Ok(info_field(&info, "run_id").map_or(Identity::Unknown, |id| {
                Identity::Named(format!("Redis run_id {id}"))
            }))
        }
        Backend::ZooKeeper => {
            bounded(server, addr, "opening a session", async {
                let (client, _route) = zk_session(scenario, addr, login).await?;
                let id = client.session_id().0;
                // Not detached: dropping the client closes its session.
                drop(client);
                Ok(Identity::ZkSession(id))
            })
            .await
        }
        Backend::Mysql => Ok(Identity::Unknown),
        Backend::Etcd => {
            bounded(server, addr, "etcd status", async {
                let (mut c, _route) = etcd_connection(addr, login).await?;
                let (status, answer) = c
                    .post("/v3/maintenance/status", &json!({}))
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                if status != 200 {
                    return Err(format!("HTTP {status}: {answer}"));
                }
                let header = &answer["header"];
                let field = |name: &str| match &header[name] {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                };
                Ok(match (field("member_id"), field("cluster_id")) {
                    (Some(member), Some(cluster)) => {
                        Identity::Named(format!("etcd member {member} of cluster {cluster}"))
                    }
                    _ => Identity::Unknown,
                })
            })
            .await
        }
    }
}

/// Refuses servers given twice: `asked` holds, in the order they were asked, each server's node
/// name, address and [`Identity`].
pub fn distinct(asked: &[(&str, SocketAddr, Identity)]) -> Result<(), RealError> {
    for (j, (later, later_addr, b)) in asked.iter().enumerate() {
        for (first, first_addr, a) in &asked[..j] {
            if a.same_as(b) {
                return Err(RealError::Endpoints(format!(
                    "{first_addr} ({first}) and {later_addr} ({later}) are the same server \
                     ({}): it would count as two; give each server once",
                    a.describe()
                )));
            }
        }
    }
    Ok(())
}

/// The value of `name` in a Redis `INFO` answer.
fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// What already exists on `server` at `addr` under a name the run could write: empty when the
/// run may start.
pub async fn occupied(
    scenario: &Scenario,
    server: &str,
    addr: SocketAddr,
    login: &Login,
) -> Result<Vec<String>, RealError> {
    let key = scenario.params.lock_key();
    match scenario.algorithm.backend() {
        Backend::Redis => {
            let exchange = each_redis_key(addr, login, key, "EXISTS");
            bounded(server, addr, "looking for the run's keys", exchange).await
        }
        Backend::ZooKeeper => {
            bounded(server, addr, "looking for the run's node", async {
                let (client, _route) = zk_session(scenario, addr, login).await?;
                let path = format!("/{key}");
                let stat = client.check_stat(&path).await.map_err(|e| e.to_string());
                // Not detached: dropping the client closes its session.
                drop(client);
                Ok(match stat? {
                    Some(_) => vec![format!("ZooKeeper node '{path}'")],
                    None => vec![],
                })
            })
            .await
        }
        Backend::Mysql => {
            let db = database(scenario);
            bounded(server, addr, "looking for the run's database", async {
                let mut c = mysql_connection(addr, login, None).await?;
                let found: Option<String> = c
                    .exec_first(
                        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                        (db.as_str(),),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                c.disconnect().await.ok();
                Ok(found
                    .map(|name| format!("MariaDB database '{name}'"))
                    .into_iter()
                    .collect())
            })
            .await
        }
        Backend::Etcd => {
            let prefix = format!("/{key}/");
            let exchange = on_etcd_prefix(addr, login, &prefix, "/v3/kv/range", "count");
            bounded(server, addr, "looking for the run's keys", exchange).await
        }
    }
}

/// Makes `server` ready for the run and checks the settings the scenario relies on: the MariaDB
/// database with its lock table and fence sequence, and the session settings read back; the
/// ZooKeeper session timeout and the etcd lease TTL the server grants.
pub async fn prepare(
    scenario: &Scenario,
    server: &str,
    addr: SocketAddr,
    login: &Login,
) -> Result<(), RealError> {
    let p = &scenario.params;
    match scenario.algorithm.backend() {
        // Nothing to make. Persistence shows only across a server crash, which endpoints refuse;
        // eviction would delete a lock's key under memory pressure, which the model never does.
        Backend::Redis => {
            let info = bounded(server, addr, "INFO memory", async {
                let (mut c, _route) = redis_connection(addr, login).await?;
                redis::cmd("INFO")
                    .arg("memory")
                    .query_async::<String>(&mut c)
                    .await
                    .map_err(|e| redis_reason(&e))
            })
            .await?;
            match evicts(&info) {
                Some(policy) => Err(RealError::Setting(format!(
                    "{server}: maxmemory is set with maxmemory-policy {policy}: the server may \
                     evict a lock's key, which the model never does; run against a server with \
                     maxmemory 0 or maxmemory-policy noeviction"
                ))),
                None => Ok(()),
            }
        }
        Backend::ZooKeeper => {
            let asked = Duration::from_millis(p.zookeeper.session_timeout_ms());
            let got = bounded(server, addr, "opening a session", async {
                let (client, _route) = zk_session(scenario, addr, login).await?;
                let got = client.session_timeout();
                // Not detached: dropping the client closes its session.
                drop(client);
                Ok(got)
            })
            .await?;
            if got != asked {
                return Err(RealError::Setting(format!(
                    "{server}: the scenario's session timeout is {} ms, the server grants {} ms \
                     (its tickTime bounds it to 2–20 ticks, or minSessionTimeout/\
                     maxSessionTimeout do); run with --session-timeout-ms {}",
                    asked.as_millis(),
                    got.as_millis(),
                    got.as_millis()
                )));
            }
            Ok(())
        }
        Backend::Mysql => {
            let db = database(scenario);
            let session = crate::mysql_store::SessionSettings::of(scenario)?;
            let read = bounded(server, addr, "creating the run's database", async {
                let mut c = mysql_connection(addr, login, None).await?;
                let run = async {
                    c.query_drop(format!("CREATE DATABASE IF NOT EXISTS {db}"))
                        .await?;
                    c.query_drop(format!("USE {db}")).await?;
                    c.query_drop(CREATE_LOCK_TABLE).await?;
                    c.query_drop(CREATE_FENCE_SEQUENCE).await?;
                    for statement in session.statements() {
                        c.query_drop(statement).await?;
                    }
                    c.query_first::<(u64, u64), _>(
                        "SELECT @@session.wait_timeout, @@session.innodb_lock_wait_timeout",
                    )
                    .await
                };
                let read = run.await.map_err(|e| e.to_string());
                c.disconnect().await.ok();
                read?.ok_or_else(|| "no row for the session's settings".to_string())
            })
            .await?;
            let wanted = (session.wait_timeout_s, session.lock_wait_timeout_s);
            let globals = bounded(server, addr, "reading the server's settings", async {
                let mut c = mysql_connection(addr, login, None).await?;
                let mut found = Vec::new();
                for (name, _) in GLOBALS {
                    let value: Option<String> = c
                        .query_first(format!("SELECT CAST(@@global.{name} AS CHAR)"))
                        .await
                        .map_err(|e| e.to_string())?;
                    found.push(value.unwrap_or_default());
                }
                c.disconnect().await.ok();
                Ok(found)
            })
            .await?;
            let differ: Vec<String> = GLOBALS
                .iter()
                .zip(&globals)
                .filter(|((_, want), got)| !got.eq_ignore_ascii_case(want))
                .map(|((name, want), got)| format!("{name} is {got}, the model's is {want}"))
                .collect();
            if !differ.is_empty() {
                return Err(RealError::Setting(format!(
                    "{server}: server-wide settings the run relies on and a session cannot \
                     change differ: {}",
                    differ.join("; ")
                )));
            }
            if read != wanted {
                return Err(RealError::Setting(format!(
                    "{server}: the run's sessions need wait_timeout = {} s and \
                     innodb_lock_wait_timeout = {} s; the server keeps {} s and {} s",
                    wanted.0, wanted.1, read.0, read.1
                )));
            }
            Ok(())
        }
        Backend::Etcd => {
            let asked = p.etcd.lease_ttl_s();
            let got = bounded(server, addr, "granting a lease", async {
                let (mut c, _route) = etcd_connection(addr, login).await?;
                let (status, answer) = c
                    .post("/v3/lease/grant", &json!({ "TTL": asked }))
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                if status != 200 {
                    return Err(format!("HTTP {status}: {answer}"));
                }
                let got = int(&answer, "TTL");
                let id = answer.get("ID").cloned().unwrap_or(Value::Null);
                let _ = c.post("/v3/lease/revoke", &json!({ "ID": id })).await;
                Ok(got)
            })
            .await?;
            if got != asked as i64 {
                return Err(RealError::Setting(format!(
                    "{server}: the scenario's lease TTL is {asked} s, the server grants {got} s \
                     (etcd's shortest lease follows its election timeout); run with \
                     --lease-ttl-s {got}"
                )));
            }
            Ok(())
        }
    }
}

/// Deletes what the run created on `server` at `addr`; what was deleted, for the user.
pub async fn remove(
    scenario: &Scenario,
    server: &str,
    addr: SocketAddr,
    login: &Login,
) -> Result<Vec<String>, RealError> {
    let key = scenario.params.lock_key();
    match scenario.algorithm.backend() {
        Backend::Redis => {
            let exchange = each_redis_key(addr, login, key, "DEL");
            bounded(server, addr, "deleting the run's keys", exchange).await
        }
        Backend::ZooKeeper => {
            bounded(server, addr, "deleting the run's nodes", async {
                let (client, _route) = zk_session(scenario, addr, login).await?;
                let path = format!("/{key}");
                let removed = delete_tree(&client, &path).await;
                // Not detached: dropping the client closes its session.
                drop(client);
                removed.map_err(|e| e.to_string())
            })
            .await
        }
        Backend::Mysql => {
            let db = database(scenario);
            bounded(server, addr, "dropping the run's database", async {
                let mut c = mysql_connection(addr, login, None).await?;
                let dropped = c
                    .query_drop(format!("DROP DATABASE IF EXISTS {db}"))
                    .await
                    .map_err(|e| e.to_string());
                let affected = c.affected_rows();
                c.disconnect().await.ok();
                dropped?;
                // DROP DATABASE reports the tables it dropped; nothing, and there was no database.
                Ok(if affected > 0 {
                    vec![format!("MariaDB database '{db}'")]
                } else {
                    vec![]
                })
            })
            .await
        }
        Backend::Etcd => {
            let prefix = format!("/{key}/");
            let exchange = on_etcd_prefix(addr, login, &prefix, "/v3/kv/deleterange", "deleted");
            bounded(server, addr, "deleting the run's keys", exchange).await
        }
    }
}

/// Revokes the etcd session leases `leases` that the run's clients were granted, through the
/// first of `endpoints` that answers (a lease is the cluster's, not a member's): what was
/// revoked, in words. A lease the server no longer has (expired, or revoked by its client) is
/// not counted.
pub async fn revoke_leases(
    server: &str,
    endpoints: &Endpoints,
    leases: &[lockcheck_algorithms::etcd::store::LeaseId],
) -> Result<Vec<String>, RealError> {
    let mut last = None;
    for &addr in &endpoints.addrs {
        let exchange = async {
            let (mut c, _route) = etcd_connection(addr, &endpoints.login).await?;
            let mut revoked = 0;
            for lease in leases {
                let (status, answer) = c
                    .post("/v3/lease/revoke", &json!({ "ID": lease.to_string() }))
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                match status {
                    200 => revoked += 1,
                    _ if answer.to_string().contains("lease not found") => {}
                    _ => return Err(format!("HTTP {status}: {answer}")),
                }
            }
            Ok(revoked)
        };
        match bounded(server, addr, "revoking the run's session leases", exchange).await {
            Ok(0) => return Ok(vec![]),
            Ok(n) => return Ok(vec![format!("{n} etcd session lease(s)")]),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| RealError::Endpoints("no server to revoke leases on".into())))
}

/// Sends `path` (`/v3/kv/range`, counting only; `/v3/kv/deleterange`) for every key under
/// `prefix`: the keys it `counted` (its answer's field of that name), in words, if any.
pub(crate) async fn on_etcd_prefix(
    addr: SocketAddr,
    login: &Login,
    prefix: &str,
    path: &str,
    counted: &str,
) -> Result<Vec<String>, String> {
    let (mut c, _route) = etcd_connection(addr, login).await?;
    let mut body = json!({
        "key": b64(prefix),
        "range_end": base64_bytes(&prefix_end(prefix)),
    });
    if counted == "count" {
        // A range that counts need not send what it finds (a delete takes no such field).
        body["count_only"] = json!(true);
    }
    let (status, answer) = c.post(path, &body).await.map_err(|e| format!("{e:?}"))?;
    if status != 200 {
        return Err(format!("HTTP {status}: {answer}"));
    }
    let n = int(&answer, counted);
    Ok(if n > 0 {
        vec![format!("{n} etcd key(s) under '{prefix}'")]
    } else {
        vec![]
    })
}

/// The eviction policy of a Redis whose `INFO memory` is `info`, when it may evict keys: a
/// memory limit, and a policy other than `noeviction`.
fn evicts(info: &str) -> Option<String> {
    let limit: u64 = info_field(info, "maxmemory")?.parse().ok()?;
    let policy = info_field(info, "maxmemory_policy")?;
    (limit > 0 && policy != "noeviction").then_some(policy)
}

/// Deletes `path` and everything under it, children first; the paths deleted.
pub(crate) async fn delete_tree(client: &zk::Client, path: &str) -> Result<Vec<String>, zk::Error> {
    let mut removed = Vec::new();
    let mut stack = vec![(path.to_string(), false)];
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            match client.delete(&node, None).await {
                Ok(()) => removed.push(format!("ZooKeeper node '{node}'")),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        let children = match client.list_children(&node).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => continue,
            Err(e) => return Err(e),
        };
        stack.push((node.clone(), true));
        for child in children {
            stack.push((format!("{node}/{child}"), false));
        }
    }
    Ok(removed)
}

/// Sends `command KEY` (`EXISTS`, `DEL`) for each key a Redis lock named `key` may write
/// ([`lockcheck_algorithms::redis::keys_of`]); the keys it counted (that exist, that it deleted).
async fn each_redis_key(
    addr: SocketAddr,
    login: &Login,
    key: &str,
    command: &str,
) -> Result<Vec<String>, String> {
    let (mut c, _route) = redis_connection(addr, login).await?;
    let mut counted = Vec::new();
    for name in lockcheck_algorithms::redis::keys_of(key) {
        let n: i64 = redis::cmd(command)
            .arg(&name)
            .query_async(&mut c)
            .await
            .map_err(|e| redis_reason(&e))?;
        if n > 0 {
            counted.push(format!("Redis key '{name}'"));
        }
    }
    Ok(counted)
}

/// A Redis connection to `addr` as `login`, without the library's name announced.
pub(crate) async fn redis_connection(
    addr: SocketAddr,
    login: &Login,
) -> Result<(redis::aio::MultiplexedConnection, Option<Proxy>), String> {
    let (via, guard) = route(addr, login).await?;
    let client = redis::Client::open(crate::redis_store::connection_info(via, login))
        .map_err(|e| e.to_string())?;
    let c = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| redis_reason(&e))?;
    Ok((c, guard))
}

/// Where an administrative exchange connects to reach the server at `addr`: the server itself,
/// or, over TLS, a proxy that speaks it (see [`crate::tls`]), kept open while its guard lives.
async fn route(addr: SocketAddr, login: &Login) -> Result<(SocketAddr, Option<Proxy>), String> {
    match &login.tls {
        None => Ok((addr, None)),
        Some(tls) => {
            let proxy = Proxy::start_tls(addr, 0, Some(tls.clone()))
                .await
                .map_err(|e| format!("a TLS proxy to {addr}: {e}"))?;
            Ok((proxy.addr(), Some(proxy)))
        }
    }
}

/// An HTTP connection to the etcd gateway at `addr`, over TLS when `login` says so; the guard
/// keeps its route open.
pub(crate) async fn etcd_connection(
    addr: SocketAddr,
    login: &Login,
) -> Result<(Connection, Option<Proxy>), String> {
    let (via, guard) = route(addr, login).await?;
    let c = Connection::open(via).await.map_err(|e| format!("{e:?}"))?;
    Ok((c, guard))
}

/// A Redis error in words that say what to do about it.
pub(crate) fn redis_reason(e: &redis::RedisError) -> String {
    let text = e.to_string();
    if text.contains("NOAUTH") || text.contains("WRONGPASS") || text.contains("invalid password") {
        format!(
            "{text} (the server wants a password: give --user for an ACL user, and the password \
             in {PASSWORD_VAR})"
        )
    } else {
        text
    }
}

/// A ZooKeeper session with `addr` as `login`, asking for the scenario's session timeout.
pub(crate) async fn zk_session(
    scenario: &Scenario,
    addr: SocketAddr,
    login: &Login,
) -> Result<(zk::Client, Option<Proxy>), String> {
    let (via, guard) = route(addr, login).await?;
    let mut connector = zk::Client::connector().with_session_timeout(Duration::from_millis(
        scenario.params.zookeeper.session_timeout_ms(),
    ));
    if let Some(digest) = login.zk_digest() {
        connector = connector.with_auth("digest", &digest);
    }
    let client = connector
        .with_fail_eagerly()
        .connect(&via.to_string())
        .await
        .map_err(|e| e.to_string())?;
    Ok((client, guard))
}

/// A MariaDB connection to `addr` as `login`, in `database` if given.
async fn mysql_connection(
    addr: SocketAddr,
    login: &Login,
    database: Option<&str>,
) -> Result<mysql_async::Conn, String> {
    let opts = crate::launcher::mariadb::client_opts_as(addr, login, database);
    mysql_async::Conn::new(opts).await.map_err(|e| {
        let text = e.to_string();
        if text.contains("Access denied") {
            format!("{text} (give --user, and the password in {PASSWORD_VAR})")
        } else {
            text
        }
    })
}

/// Bytes as the gateway's base64.
fn base64_bytes(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_shows_in_debug_output() {
        let login = Login {
            user: Some("alice".into()),
            password: Some("s3cret".into()),
            tls: None,
        };
        let shown = format!("{login:?}");
        assert!(
            shown.contains("alice") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn a_redis_evicts_only_with_a_memory_limit_and_a_policy_that_evicts() {
        let info = |limit: u64, policy: &str| {
            format!("# Memory\r\nused_memory:1\r\nmaxmemory:{limit}\r\nmaxmemory_human:0B\r\nmaxmemory_policy:{policy}\r\n")
        };
        assert_eq!(evicts(&info(0, "allkeys-lru")), None);
        assert_eq!(evicts(&info(1 << 20, "noeviction")), None);
        assert_eq!(
            evicts(&info(1 << 20, "volatile-ttl")),
            Some("volatile-ttl".to_string())
        );
    }

    #[test]
    fn one_server_is_told_from_two_by_what_it_says_it_is() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        let named = |s: &str| Identity::Named(s.into());
        let ok = [
            ("redis-0", addr("127.0.0.1:1"), named("Redis run_id a")),
            ("redis-1", addr("127.0.0.1:2"), named("Redis run_id b")),
            ("redis-2", addr("127.0.0.1:3"), Identity::Unknown),
            ("redis-3", addr("127.0.0.1:4"), Identity::Unknown),
        ];
        distinct(&ok).unwrap();
        let twice = [
            ("redis-0", addr("127.0.0.1:1"), named("Redis run_id a")),
            ("redis-1", addr("127.0.0.2:1"), named("Redis run_id a")),
        ];
        let e = distinct(&twice).unwrap_err().to_string();
        assert!(
            e.contains("127.0.0.1:1 (redis-0) and 127.0.0.2:1 (redis-1) are the same server"),
            "{e}"
        );
        // ZooKeeper: the next session of one server, or of another member (top byte) or of a
        // server started in another millisecond.
        let started = 0x0100_0190_0000_0000_i64;
        let zk = |id: i64| Identity::ZkSession(id);
        assert!(zk(started + 3).same_as(&zk(started + 5)));
        assert!(!zk(started + 3).same_as(&zk(started + 3 + (2 << 56))));
        assert!(!zk(started + 3).same_as(&zk(started + (1 << 16) + 3)));
        assert!(!zk(started + 5).same_as(&zk(started + 3)));
        assert_eq!(
            info_field(
                "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n",
                "run_id"
            ),
            Some("abc".to_string())
        );
    }

    #[test]
    fn the_database_is_the_key_when_the_scenario_names_one() {
        let mut s = Scenario::new(lockcheck_core::Algorithm::from_name("mysql-row").unwrap());
        assert_eq!(database(&s), DATABASE);
        s.params.key = Some("orders_lock".into());
        assert_eq!(database(&s), "orders_lock");
    }
}
