//! `lockcheck real --client` on servers the user runs (`--endpoints`), with what the client
//! declares of its library: the names it writes beside the lock (`--client-keys`), checked free
//! before the run and removed after it; and the credentials it is given (`LOCKCHECK_USER`,
//! `LOCKCHECK_PASSWORD`), which never show in what the run keeps of it.
//!
//! The client is a small Python lock in the manner of python-redis-lock: its lock key is
//! `lock:KEY` (set to `free` on release rather than deleted, so it is still there when the run
//! ends) and each release leaves a signal key `lock-signal:KEY:CLIENT` behind. Without Redis or
//! Debian's python3-redis the tests print a line and pass, except under CI.

mod common;

use common::{installed, one_at_a_time, UsersServer};
use lockcheck_core::scenario::{Persistence, Scenario};
use lockcheck_core::Algorithm;
use lockcheck_real::launcher::{Etcd, Redis, ZooKeeper};
use lockcheck_real::profile::{self, Profile, Shape};
use lockcheck_real::{run_with, ClientCommand, Endpoints, Login, RealError, Servers};
use std::io::Write;
use std::net::SocketAddr;

const PYTHON: &str = "/usr/bin/python3";
const PASSWORD: &str = "s3cret-client-pw";

impl UsersServer {
    /// Sends `args` as `login`; the answer.
    fn query(&self, login: &Login, args: &[&str]) -> redis::Value {
        let info = lockcheck_real::redis_store::connection_info(self.addr, login);
        self.runtime.block_on(async {
            let client = redis::Client::open(info).unwrap();
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            cmd.query_async(&mut c).await.unwrap()
        })
    }

    /// Every key, sorted.
    fn keys(&self, login: &Login) -> Vec<String> {
        let mut keys: Vec<String> = match self.query(login, &["KEYS", "*"]) {
            redis::Value::Array(keys) => keys
                .into_iter()
                .map(|k| match k {
                    redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        };
        keys.sort();
        keys
    }
}

/// A Redis of the user's, without persistence.
fn redis() -> UsersServer {
    UsersServer::start(
        "redis-0",
        Box::new(Redis {
            persistence: Persistence::None,
        }),
    )
}

fn ready() -> bool {
    if !installed(&Redis {
        persistence: Persistence::None,
    }) {
        return false;
    }
    let found = std::process::Command::new(PYTHON)
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{PYTHON} cannot import redis under CI=true: apt-get install python3-redis");
        }
        let _ = writeln!(
            std::io::stderr().lock(),
            "skipping: apt-get install python3-redis"
        );
    }
    found
}

/// The lock of the module's documentation, as a client process.
const CLIENT: &str = r#"
import os, sys, time, uuid
sys.path.insert(0, os.environ["CLIENTS_DIR"])
import redis
import lockcheck_client as lc

host, port = lc.SERVERS[0]
user = os.environ.get("LOCKCHECK_USER")
password = os.environ.get("LOCKCHECK_PASSWORD")
# What a careless library logs: the run keeps this line with the password blanked out.
sys.stderr.write("connecting as %s with password %s\n" % (user, password))
sys.stderr.flush()
server = redis.Redis(host=host, port=int(port), username=user, password=password, socket_timeout=5)
server.ping()
LOCK = "lock:" + lc.KEY
SIGNAL = "lock-signal:" + lc.KEY + ":" + lc.CLIENT_ID
TTL_MS = int(os.environ["LOCKCHECK_TTL_MS"])
TAKE = """local v = redis.call('GET', KEYS[1])
if v == false or v == 'free' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0"""
GIVE = """if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], 'free') return 1 end
return 0"""

def acquire(wait_s):
    token = uuid.uuid4().hex
    deadline = time.monotonic() + wait_s
    while server.eval(TAKE, 1, LOCK, token, TTL_MS) != 1:
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
    return token

def release(token):
    given = server.eval(GIVE, 1, LOCK, token)
    server.set(SIGNAL, "1")
    return "released" if given == 1 else "lost"

lc.serve(acquire, release, token=lambda token: token)
"#;

/// The client, declaring `lock:{key}` and `lock-signal:{key}*`, and a 60 s lease.
fn client(dir: &std::path::Path) -> ClientCommand {
    let file = dir.join("declared_client.py");
    std::fs::write(&file, CLIENT).unwrap();
    ClientCommand::new(format!(
        "CLIENTS_DIR={}/../clients {PYTHON} {}",
        env!("CARGO_MANIFEST_DIR"),
        file.display()
    ))
    .with_keys(["lock:{key}", "lock-signal:{key}*"])
    .with_lease_ms(60_000)
}

/// Two clients, two short sections each, no fault, under `key`.
fn scenario(key: &str) -> Scenario {
    let shape = Shape {
        clients: 2,
        ttl_ms: 2_000,
        duration_ms: 10_000,
        ..Shape::for_algorithm(Algorithm::SingleRedis)
    };
    let mut s = profile::scenario(Algorithm::SingleRedis, Profile::None, &shape).unwrap();
    s.workload.acquisitions_per_client = 2;
    s.workload.hold_ms = 50;
    s.params.key = Some(key.to_string());
    s
}

fn servers(addr: SocketAddr, login: &Login, keep: bool) -> Servers {
    Servers::Endpoints(Endpoints {
        addrs: vec![addr],
        login: login.clone(),
        keep,
    })
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lockcheck-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A name the client declares that exists already (the exact `lock:KEY`, or a key under the
/// prefix `lock-signal:KEY`) refuses the run before anything is written, and is left as it was.
#[test]
fn a_declared_name_that_exists_refuses_the_run_and_is_left_as_it_was() {
    if !ready() {
        return;
    }
    let _serial = one_at_a_time();
    let server = redis();
    let dir = scratch("declared-occupied");
    let login = Login::default();
    let key = lockcheck_real::endpoints::fresh_key();
    for existing in [format!("lock:{key}"), format!("lock-signal:{key}:old")] {
        server.query(&login, &["SET", &existing, "users"]);
        let e = run_with(
            &scenario(&key),
            &servers(server.addr, &login, false),
            Some(&client(&dir)),
        )
        .unwrap_err();
        assert!(matches!(e, RealError::Occupied { .. }), "{e}");
        assert!(e.to_string().contains(&existing), "{e}");
        assert_eq!(
            server.query(&login, &["GET", &existing]),
            redis::Value::BulkString(b"users".to_vec()),
            "left as it was"
        );
        assert_eq!(
            server.keys(&login),
            vec![existing.clone()],
            "nothing written"
        );
        server.query(&login, &["DEL", &existing]);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A run whose client writes its declared names has them removed at the end (and says so),
/// leaving the user's keys, a key that only looks like the prefix among them; with --keep they
/// stay, and the run says so. The client logs in as the ACL user and password it is given in
/// its environment, and the password never shows in what the run keeps of its stderr; the
/// declarations are in what the run reports of its client.
#[test]
fn the_declared_names_are_removed_after_the_run_and_the_client_logs_in_as_told() {
    if !ready() {
        return;
    }
    let _serial = one_at_a_time();
    let server = redis();
    let dir = scratch("declared-removed");
    let open = Login::default();
    server.query(
        &open,
        &[
            "ACL",
            "SETUSER",
            "alice",
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
        ],
    );
    server.query(&open, &["SET", "users:own", "data"]);
    server.query(&open, &["SET", "lock-signal:other", "data"]);
    server.query(&open, &["ACL", "SETUSER", "default", "off"]);
    let login = Login {
        user: Some("alice".into()),
        password: Some(PASSWORD.into()),
        tls: None,
    };
    let users_keys = vec!["lock-signal:other".to_string(), "users:own".to_string()];

    let key = lockcheck_real::endpoints::fresh_key();
    let client = client(&dir);
    let real = run_with(
        &scenario(&key),
        &servers(server.addr, &login, false),
        Some(&client),
    )
    .unwrap_or_else(|e| panic!("the run failed: {e}"));
    assert!(
        real.outcome.violations.is_empty(),
        "{:#?}",
        real.outcome.violations
    );
    let removed = real.removed.join("\n");
    assert!(
        removed.contains(&format!("redis-0: Redis key 'lock:{key}'")),
        "{removed}"
    );
    assert!(
        removed.contains(&format!(
            "redis-0: 3 Redis key(s) starting with 'lock-signal:{key}'"
        )),
        "a signal key per client and the probe: {removed}"
    );
    assert!(real.left.is_empty(), "{:?}", real.left);
    assert_eq!(
        server.keys(&login),
        users_keys,
        "only the user's keys are left"
    );

    let kept = real.client.as_ref().expect("a client run");
    assert_eq!(kept.keys, client.keys);
    assert_eq!(kept.lease_ms, Some(60_000));
    let stderr: Vec<&String> = kept.stderr.iter().flat_map(|s| &s.lines).collect();
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("connecting as alice with password [LOCKCHECK_PASSWORD]")),
        "{stderr:#?}"
    );
    assert!(stderr.iter().all(|l| !l.contains(PASSWORD)), "{stderr:#?}");

    // --keep: the client's names stay, and the run says so.
    let key = lockcheck_real::endpoints::fresh_key();
    let real = run_with(
        &scenario(&key),
        &servers(server.addr, &login, true),
        Some(&client),
    )
    .unwrap_or_else(|e| panic!("the run failed: {e}"));
    let left = real.left.join("\n");
    assert!(
        left.contains(&format!(
            "redis-0: what the client wrote under 'lock:{key}', 'lock-signal:{key}*' (--keep)"
        )),
        "{left}"
    );
    let keys = server.keys(&login);
    assert!(keys.contains(&format!("lock:{key}")), "{keys:?}");
    assert!(
        keys.contains(&format!("lock-signal:{key}:client-0")),
        "{keys:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// On ZooKeeper a declared name is a path, its node with the subtree under it, and a prefix
/// every child of its parent whose name starts with it; on etcd a name is a key and a prefix a
/// range. What exists under them is found, then removed, and nothing else is touched.
#[test]
fn declared_names_on_zookeeper_and_etcd_are_found_and_removed_and_nothing_else() {
    use lockcheck_real::declared::{occupied, remove};
    let zookeeper = ZooKeeper {
        session_timeout_ms: 4_000,
        tick_time_ms: lockcheck_core::scenario::DEFAULT_TICK_TIME_MS,
    };
    if installed(&zookeeper) {
        let _serial = one_at_a_time();
        let server = UsersServer::start("zk-0", Box::new(zookeeper));
        let mut s = Scenario::new(Algorithm::ZkSequential);
        let key = lockcheck_real::endpoints::fresh_key();
        s.params.key = Some(key.clone());
        let patterns = vec!["/locks/{key}".to_string(), "/signals/{key}*".to_string()];
        let (found, removed, left) = server.runtime.block_on(async {
            use zookeeper_client as zk;
            let client = zk::Client::connect(&server.addr.to_string()).await.unwrap();
            let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            for path in [
                "/locks".to_string(),
                "/locks/other".to_string(),
                format!("/locks/{key}"),
                format!("/locks/{key}/_c_1-lock-0000000001"),
                "/signals".to_string(),
                "/signals/other".to_string(),
                format!("/signals/{key}-a"),
                format!("/signals/{key}-b"),
                format!("/signals/{key}-b/x"),
            ] {
                client.create(&path, b"", &options).await.unwrap();
            }
            let login = Login::default();
            let found = occupied(&s, &patterns, "zk-0", server.addr, &login)
                .await
                .unwrap();
            let removed = remove(&s, &patterns, "zk-0", server.addr, &login)
                .await
                .unwrap();
            let mut left = Vec::new();
            for parent in ["/locks", "/signals"] {
                let mut children = client.list_children(parent).await.unwrap();
                children.sort();
                left.push(children);
            }
            (found, removed, left)
        });
        assert_eq!(
            found,
            vec![
                format!("ZooKeeper node '/locks/{key}'"),
                format!("ZooKeeper node '/signals/{key}-a'"),
                format!("ZooKeeper node '/signals/{key}-b'"),
            ]
        );
        assert_eq!(removed.len(), 5, "{removed:?}");
        assert_eq!(
            left,
            vec![vec!["other".to_string()], vec!["other".to_string()]]
        );
    }

    if installed(&Etcd) {
        let _serial = one_at_a_time();
        let server = UsersServer::start("etcd-0", Box::new(Etcd));
        let mut s = Scenario::new(Algorithm::EtcdMutex);
        let key = lockcheck_real::endpoints::fresh_key();
        s.params.key = Some(key.clone());
        let patterns = vec!["lock:{key}".to_string(), "{key}/*".to_string()];
        let (found, removed, left) = server.runtime.block_on(async {
            use lockcheck_real::etcd_gateway::{b64, Connection};
            let mut c = Connection::open(server.addr).await.unwrap();
            for k in [
                format!("lock:{key}"),
                format!("{key}/a"),
                format!("{key}/b"),
                format!("{key}_other"),
                "lock:other".to_string(),
            ] {
                let body = serde_json::json!({ "key": b64(&k), "value": b64("v") });
                let (status, _) = c.post("/v3/kv/put", &body).await.unwrap();
                assert_eq!(status, 200);
            }
            let login = Login::default();
            let found = occupied(&s, &patterns, "etcd-0", server.addr, &login)
                .await
                .unwrap();
            let removed = remove(&s, &patterns, "etcd-0", server.addr, &login)
                .await
                .unwrap();
            let body =
                serde_json::json!({ "key": b64("\0"), "range_end": b64("\0"), "keys_only": true });
            let (_, answer) = c.post("/v3/kv/range", &body).await.unwrap();
            let mut left: Vec<String> = answer["kvs"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|kv| lockcheck_real::etcd_gateway::text(kv, "key"))
                .collect();
            left.sort();
            (found, removed, left)
        });
        let expected = vec![
            format!("etcd key 'lock:{key}'"),
            format!("2 etcd key(s) under '{key}/'"),
        ];
        assert_eq!(found, expected);
        assert_eq!(removed, expected);
        assert_eq!(left, vec!["lock:other".to_string(), format!("{key}_other")]);
    }
}
