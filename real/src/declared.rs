//! What a client process declares of its lock library (`lockcheck real --client`): the names the
//! library writes beside the lock (`--client-keys`), and the lease it really uses when it is not
//! the one lockcheck tells it (`--client-lease-ms`).
//!
//! **Names.** A library writes names of its own: python-redis-lock the keys `lock:KEY` and
//! `lock-signal:KEY`, Redisson `redisson_lock_queue:{KEY}`, a ZooKeeper recipe the children of
//! its lock node. lockcheck cannot know them; the client declares them as patterns in which
//! `{key}` stands for the run's lock name (`LOCKCHECK_KEY`) and a trailing `*` makes a prefix
//! ([`Name`]). A pattern without `{key}` is refused: it would name the user's own data, not the
//! run's. On servers the user runs ([`crate::endpoints`]) the declared names are checked free
//! before anything is written ([`occupied`]) and removed at the end ([`remove`]), as lockcheck's
//! own names are:
//! - Redis: a name is a key (`EXISTS`, `DEL`); a prefix every key that starts with it, found by
//!   `SCAN … MATCH` with the prefix's glob characters escaped (never `KEYS`, which stops a
//!   server);
//! - etcd: a name is a key; a prefix a range (`range_end`, as `clientv3.WithPrefix`);
//! - ZooKeeper: a name is a path, its node and the subtree under it; a prefix (`/locks/{key}*`)
//!   every child of its parent node whose name starts with it, each with its subtree;
//! - MariaDB: refused, a library's own tables are not supported.
//!
//! **Lease.** What the liveness checks judge by (`Outcome::of_with_lease`), and how long the
//! probe at the end waits for the lock: twice the declared lease.

use crate::endpoints::{
    delete_tree, etcd_connection, on_etcd_prefix, redis_connection, redis_reason, zk_session,
};
use crate::error::RealError;
use crate::etcd_gateway::{b64, int};
use crate::Login;
use lockcheck_core::input::clip;
use lockcheck_core::scenario::{Backend, Scenario};
use serde_json::json;
use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

/// What stands for the run's lock name in a pattern.
pub const KEY: &str = "{key}";
/// The most patterns a client declares.
pub const MAX_PATTERNS: usize = 64;
/// The longest pattern, in characters.
pub const MAX_PATTERN_CHARS: usize = 512;
/// The longest lease a client declares: 365 days, in ms.
pub const MAX_LEASE_MS: u64 = 365 * 24 * 3_600 * 1_000;
/// How long looking for (or removing) the declared names on one server may take: a prefix is
/// scanned through the whole keyspace.
const WITHIN: Duration = Duration::from_secs(60);
/// How many keys one `SCAN` asks the server to look at.
const SCAN_COUNT: u64 = 10_000;
/// How many of a prefix's keys a message names.
const SHOWN: usize = 3;

/// One declared pattern, the run's lock name in place of `{key}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Name {
    /// This name.
    Exact(String),
    /// Every name that starts with this.
    Prefix(String),
}

impl Name {
    /// `pattern` for the lock named `key`.
    pub fn of(pattern: &str, key: &str) -> Name {
        let name = pattern.replace(KEY, key);
        match name.strip_suffix('*') {
            Some(prefix) => Name::Prefix(prefix.to_string()),
            None => Name::Exact(name),
        }
    }

    /// As the user would write it: the name, a prefix with its `*`.
    pub fn shown(&self) -> String {
        match self {
            Name::Exact(name) => name.clone(),
            Name::Prefix(prefix) => format!("{prefix}*"),
        }
    }
}

/// Every pattern of `patterns` for the run of `scenario`.
pub fn names(scenario: &Scenario, patterns: &[String]) -> Vec<Name> {
    let key = scenario.params.lock_key();
    patterns.iter().map(|p| Name::of(p, key)).collect()
}

/// Refuses patterns that cannot be used as given on `backend`'s servers: without `{key}`, a `*`
/// elsewhere than at the end, not a path for ZooKeeper, any for MariaDB.
pub fn check(backend: Backend, patterns: &[String]) -> Result<(), RealError> {
    let refuse = |why: String| Err(RealError::Declared(format!("--client-keys: {why}")));
    if patterns.is_empty() {
        return Ok(());
    }
    if backend == Backend::Mysql {
        return refuse(
            "a MariaDB library's own tables are not supported: lockcheck checks free and removes \
             only its own database (the lock's name); give no --client-keys with a MariaDB lock"
                .into(),
        );
    }
    if patterns.len() > MAX_PATTERNS {
        return refuse(format!(
            "{} patterns; at most {MAX_PATTERNS}",
            patterns.len()
        ));
    }
    for pattern in patterns {
        let shown = clip(pattern);
        if pattern.chars().count() > MAX_PATTERN_CHARS {
            return refuse(format!("'{shown}': at most {MAX_PATTERN_CHARS} characters"));
        }
        if pattern.chars().any(char::is_control) {
            return refuse(format!("'{shown}': a control character"));
        }
        if !pattern.contains(KEY) {
            return refuse(format!(
                "'{shown}' does not hold {KEY}: a pattern names what the library writes for the \
                 run's lock, {KEY} standing for the lock's name (LOCKCHECK_KEY, e.g. \
                 'lock:{KEY}'); without it the pattern would name your own data, not the run's, \
                 and the run would refuse to start on it or remove it"
            ));
        }
        let stars = pattern.matches('*').count();
        if stars > 1 || (stars == 1 && !pattern.ends_with('*')) {
            return refuse(format!(
                "'{shown}': a '*' may only end a pattern (it makes the pattern a prefix)"
            ));
        }
        if backend == Backend::ZooKeeper {
            zk_path(pattern)
                .map_err(|why| RealError::Declared(format!("--client-keys: '{shown}': {why}")))?;
        }
    }
    Ok(())
}

/// Refuses a declared lease that is not a positive number of ms up to [`MAX_LEASE_MS`].
pub fn check_lease(lease_ms: Option<u64>) -> Result<(), RealError> {
    match lease_ms {
        Some(ms) if ms == 0 || ms > MAX_LEASE_MS => Err(RealError::Declared(format!(
            "--client-lease-ms {ms}: a lease is a positive number of ms, at most 365 days \
             ({MAX_LEASE_MS} ms)"
        ))),
        _ => Ok(()),
    }
}

/// Whether a ZooKeeper pattern is a path (a prefix: a path, then the start of a child's name).
fn zk_path(pattern: &str) -> Result<(), String> {
    if !pattern.starts_with('/') {
        return Err(
            "a ZooKeeper pattern is a path: it starts with '/' (e.g. '/locks/{key}')".into(),
        );
    }
    let body = pattern.strip_suffix('*').unwrap_or(pattern);
    let prefix = body.len() < pattern.len();
    // A prefix may end with '/' (every child of a node); a path may not.
    let path = if prefix {
        body.strip_suffix('/').unwrap_or(body)
    } else {
        body
    };
    let components: Vec<&str> = path.split('/').skip(1).collect();
    if path.len() > 1
        && components
            .iter()
            .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err("not a ZooKeeper path (an empty, '.' or '..' component)".into());
    }
    if !prefix && path == "/" {
        return Err("the root node is not the run's".into());
    }
    Ok(())
}

/// What exists on `server` at `addr` under the names `patterns` declare for the run of
/// `scenario`: empty when the run may start.
pub async fn occupied(
    scenario: &Scenario,
    patterns: &[String],
    server: &str,
    addr: SocketAddr,
    login: &Login,
) -> Result<Vec<String>, RealError> {
    on_server(scenario, patterns, server, addr, login, false).await
}

/// Deletes what exists on `server` at `addr` under the names `patterns` declare for the run of
/// `scenario`: what was deleted, in words.
pub async fn remove(
    scenario: &Scenario,
    patterns: &[String],
    server: &str,
    addr: SocketAddr,
    login: &Login,
) -> Result<Vec<String>, RealError> {
    on_server(scenario, patterns, server, addr, login, true).await
}

async fn on_server(
    scenario: &Scenario,
    patterns: &[String],
    server: &str,
    addr: SocketAddr,
    login: &Login,
    delete: bool,
) -> Result<Vec<String>, RealError> {
    if patterns.is_empty() {
        return Ok(vec![]);
    }
    let names = names(scenario, patterns);
    let what = if delete {
        "deleting the client's declared names"
    } else {
        "looking for the client's declared names"
    };
    match scenario.algorithm.backend() {
        Backend::Redis => {
            within(server, addr, what, redis_names(addr, login, &names, delete)).await
        }
        Backend::Etcd => within(server, addr, what, etcd_names(addr, login, &names, delete)).await,
        Backend::ZooKeeper => {
            within(server, addr, what, async {
                let (client, _route) = zk_session(scenario, addr, login).await?;
                let found = zk_names(&client, &names, delete).await;
                // Not detached: dropping the client closes its session.
                drop(client);
                found.map_err(|e| e.to_string())
            })
            .await
        }
        // Refused by `check`.
        Backend::Mysql => Ok(vec![]),
    }
}

/// Runs one exchange with `server` at `addr`, bounded by [`WITHIN`].
async fn within<T>(
    server: &str,
    addr: SocketAddr,
    what: &str,
    exchange: impl Future<Output = Result<T, String>>,
) -> Result<T, RealError> {
    let endpoint = |reason: String| RealError::Endpoint {
        server: server.to_string(),
        addr,
        reason: format!("{what}: {reason}"),
    };
    match tokio::time::timeout(WITHIN, exchange).await {
        Ok(result) => result.map_err(endpoint),
        Err(_) => Err(endpoint(format!("no answer within {} s", WITHIN.as_secs()))),
    }
}

/// `prefix` as a Redis glob that matches it literally: `*`, `?`, `[`, `]` and `\` escaped.
pub fn glob_escape(prefix: &str) -> String {
    let mut glob = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            glob.push('\\');
        }
        glob.push(c);
    }
    glob
}

/// `keys` in words: how many, and the first few.
fn listed(keys: &[Vec<u8>], what: &str, prefix: &str) -> String {
    let shown: Vec<String> = keys
        .iter()
        .take(SHOWN)
        .map(|k| format!("'{}'", clip(&String::from_utf8_lossy(k))))
        .collect();
    let more = if keys.len() > SHOWN { ", …" } else { "" };
    format!(
        "{} {what}(s) starting with '{}' ({}{more})",
        keys.len(),
        clip(prefix),
        shown.join(", ")
    )
}

async fn redis_names(
    addr: SocketAddr,
    login: &Login,
    names: &[Name],
    delete: bool,
) -> Result<Vec<String>, String> {
    let (mut c, _route) = redis_connection(addr, login).await?;
    let mut found = Vec::new();
    for name in names {
        match name {
            Name::Exact(key) => {
                let n: i64 = redis::cmd(if delete { "DEL" } else { "EXISTS" })
                    .arg(key)
                    .query_async(&mut c)
                    .await
                    .map_err(|e| redis_reason(&e))?;
                if n > 0 {
                    found.push(format!("Redis key '{}'", clip(key)));
                }
            }
            Name::Prefix(prefix) => {
                let pattern = format!("{}*", glob_escape(prefix));
                let mut keys = BTreeSet::new();
                let mut cursor = 0u64;
                loop {
                    let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(SCAN_COUNT)
                        .query_async(&mut c)
                        .await
                        .map_err(|e| redis_reason(&e))?;
                    keys.extend(batch);
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
                let keys: Vec<Vec<u8>> = keys.into_iter().collect();
                if delete {
                    for chunk in keys.chunks(100) {
                        let _: i64 = redis::cmd("DEL")
                            .arg(chunk)
                            .query_async(&mut c)
                            .await
                            .map_err(|e| redis_reason(&e))?;
                    }
                }
                if !keys.is_empty() {
                    found.push(listed(&keys, "Redis key", prefix));
                }
            }
        }
    }
    Ok(found)
}

async fn etcd_names(
    addr: SocketAddr,
    login: &Login,
    names: &[Name],
    delete: bool,
) -> Result<Vec<String>, String> {
    let (path, counted) = if delete {
        ("/v3/kv/deleterange", "deleted")
    } else {
        ("/v3/kv/range", "count")
    };
    let mut found = Vec::new();
    for name in names {
        match name {
            Name::Exact(key) => {
                let (mut c, _route) = etcd_connection(addr, login).await?;
                let mut body = json!({ "key": b64(key) });
                if !delete {
                    body["count_only"] = json!(true);
                }
                let (status, answer) = c.post(path, &body).await.map_err(|e| format!("{e:?}"))?;
                if status != 200 {
                    return Err(format!("HTTP {status}: {answer}"));
                }
                if int(&answer, counted) > 0 {
                    found.push(format!("etcd key '{}'", clip(key)));
                }
            }
            Name::Prefix(prefix) => {
                found.extend(on_etcd_prefix(addr, login, prefix, path, counted).await?);
            }
        }
    }
    Ok(found)
}

async fn zk_names(
    client: &zookeeper_client::Client,
    names: &[Name],
    delete: bool,
) -> Result<Vec<String>, zookeeper_client::Error> {
    use zookeeper_client::Error;
    let mut found = Vec::new();
    for name in names {
        let paths = match name {
            Name::Exact(path) => vec![path.clone()],
            Name::Prefix(prefix) => {
                let (parent, start) = prefix.rsplit_once('/').unwrap_or(("", prefix));
                let parent = if parent.is_empty() { "/" } else { parent };
                let children = match client.list_children(parent).await {
                    Ok(children) => children,
                    Err(Error::NoNode) => vec![],
                    Err(e) => return Err(e),
                };
                let mut matching: Vec<String> = children
                    .into_iter()
                    .filter(|child| child.starts_with(start))
                    .map(|child| format!("{}/{child}", parent.trim_end_matches('/')))
                    .collect();
                matching.sort();
                matching
            }
        };
        for path in paths {
            if delete {
                found.extend(delete_tree(client, &path).await?);
            } else if client.check_stat(&path).await?.is_some() {
                found.push(format!("ZooKeeper node '{}'", clip(&path)));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_pattern_names_the_runs_lock_and_a_trailing_star_makes_a_prefix() {
        assert_eq!(
            Name::of("lock:{key}", "lockcheck_1"),
            Name::Exact("lock:lockcheck_1".into())
        );
        assert_eq!(
            Name::of("lock-signal:{key}*", "k"),
            Name::Prefix("lock-signal:k".into())
        );
        // Redisson's hash tag: braces around the key.
        assert_eq!(
            Name::of("redisson_lock_queue:{{key}}", "k"),
            Name::Exact("redisson_lock_queue:{k}".into())
        );
        assert_eq!(Name::Prefix("a:k".into()).shown(), "a:k*");
        assert_eq!(glob_escape(r"a*b?c[d]e\f"), r"a\*b\?c\[d\]e\\f");
    }

    #[test]
    fn patterns_that_would_name_the_users_data_or_cannot_be_read_are_refused() {
        let refused = |backend, list: &[&str]| {
            check(backend, &patterns(list))
                .expect_err("refused")
                .to_string()
        };
        check(
            Backend::Redis,
            &patterns(&["lock:{key}", "lock-signal:{key}*"]),
        )
        .unwrap();
        let e = refused(Backend::Redis, &["lock:{key}", "users:*"]);
        assert!(e.contains("'users:*' does not hold {key}"), "{e}");
        assert!(e.contains("your own data"), "{e}");
        let e = refused(Backend::Redis, &["*:{key}"]);
        assert!(e.contains("a '*' may only end a pattern"), "{e}");
        let e = refused(Backend::Mysql, &["lock_{key}"]);
        assert!(e.contains("MariaDB"), "{e}");
        check(Backend::Mysql, &[]).unwrap();
        check(Backend::ZooKeeper, &patterns(&["/locks/{key}", "/{key}*"])).unwrap();
        let e = refused(Backend::ZooKeeper, &["locks/{key}"]);
        assert!(e.contains("starts with '/'"), "{e}");
        let e = refused(Backend::ZooKeeper, &["/locks//{key}"]);
        assert!(e.contains("not a ZooKeeper path"), "{e}");
        check(Backend::Etcd, &patterns(&["/{key}", "{key}/*"])).unwrap();
        let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("{i}:{{key}}")).collect();
        assert!(check(Backend::Redis, &many).is_err());
    }

    #[test]
    fn a_declared_lease_is_positive_and_at_most_a_year() {
        check_lease(None).unwrap();
        check_lease(Some(60_000)).unwrap();
        check_lease(Some(MAX_LEASE_MS)).unwrap();
        let e = check_lease(Some(0)).unwrap_err().to_string();
        assert!(
            e.contains("--client-lease-ms 0: a lease is a positive"),
            "{e}"
        );
        assert!(check_lease(Some(MAX_LEASE_MS + 1)).is_err());
    }
}
