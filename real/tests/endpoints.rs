//! Runs on servers the user runs (`--endpoints`): each test starts a server as a user would have
//! it configured (a password, a long `wait_timeout`, data of their own), runs a story against it
//! as endpoints, and checks that the verdict is the simulation's, that the user's data is never
//! touched, and that nothing of the run's is left.
//!
//! Without the servers installed these tests print one line saying how to install them and
//! pass, except under CI (`CI=true`), where they fail.

use lockcheck_core::scenario::{Algorithm, FlushPolicy, Persistence, Scenario};
use lockcheck_real::launcher::{MariaDb, Redis, ServerKind, ZooKeeper};
use lockcheck_real::profile::{self, Profile, Shape};
use lockcheck_real::{run_on, Endpoints, Login, RealError, RealRun, Servers};
use std::net::SocketAddr;

mod common;

use common::{kinds, one_at_a_time, UsersServer};

/// A story of `algorithm` with the run's own key, as the CLI gives it.
fn story(algorithm: Algorithm, profile: Profile, ttl_ms: u64) -> Scenario {
    let shape = Shape {
        clients: 3,
        ttl_ms,
        ..Shape::for_algorithm(algorithm)
    };
    let mut s = profile::scenario(algorithm, profile, &shape).unwrap();
    s.params.key = Some(lockcheck_real::endpoints::fresh_key());
    s
}

fn endpoints(addr: SocketAddr, login: Login) -> Servers {
    Servers::Endpoints(Endpoints {
        addrs: vec![addr],
        login,
        keep: false,
    })
}

/// The run, whose verdict must be the simulation's for the same scenario.
fn run_agreeing(scenario: &Scenario, servers: &Servers) -> RealRun {
    let real = run_on(scenario, servers).unwrap_or_else(|e| panic!("the run failed: {e}"));
    assert!(real.server_pids.is_empty(), "endpoints start no server");
    let simulated = lockcheck_sim::run(scenario);
    assert_eq!(
        kinds(&real.outcome.violations),
        kinds(&simulated.violations),
        "real: {:#?}\nsimulated: {:#?}",
        real.outcome.violations,
        simulated.violations
    );
    real
}

/// A Redis of the user's, without persistence.
fn users_redis() -> UsersServer {
    UsersServer::start(
        "redis-0",
        Box::new(Redis {
            persistence: Persistence::None,
        }),
    )
}

fn redis_installed() -> bool {
    common::installed(&Redis {
        persistence: Persistence::None,
    })
}

async fn redis_query(addr: SocketAddr, password: Option<&str>, args: &[&str]) -> redis::Value {
    let login = Login {
        password: password.map(str::to_string),
        ..Login::default()
    };
    let client =
        redis::Client::open(lockcheck_real::redis_store::connection_info(addr, &login)).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut c).await.unwrap()
}

/// A Redis with `requirepass`: refused without the password, with a message that says where it
/// goes; with it, the pause story is UNSAFE as in the simulation, the user's own key is untouched,
/// and none of the run's keys is left.
#[test]
fn a_password_protected_redis_needs_the_password_and_keeps_only_the_users_keys() {
    if !redis_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let server = users_redis();
    let addr = server.addr;
    server.runtime.block_on(async {
        redis_query(addr, None, &["SET", "users:own", "data"]).await;
        redis_query(addr, None, &["CONFIG", "SET", "requirepass", "pw"]).await;
    });
    let s = story(Algorithm::SingleRedis, Profile::Pause, 2_000);

    let e = run_on(&s, &endpoints(addr, Login::default())).unwrap_err();
    assert!(
        matches!(e, RealError::Endpoint { .. }) && e.to_string().contains("LOCKCHECK_PASSWORD"),
        "{e}"
    );

    let login = Login {
        password: Some("pw".into()),
        ..Login::default()
    };
    let real = run_agreeing(&s, &endpoints(addr, login));
    assert!(
        !real.outcome.violations.is_empty(),
        "the pause story breaks single-redis"
    );
    assert!(real.left.is_empty(), "{:?}", real.left);
    let keys = server
        .runtime
        .block_on(redis_query(addr, Some("pw"), &["KEYS", "*"]));
    assert_eq!(
        keys,
        redis::Value::Array(vec![redis::Value::BulkString(b"users:own".to_vec())]),
        "only the user's key is left"
    );
}

/// A key the run would use already exists (here: the user's own `lock`): the run is refused
/// before anything is written, and the key is as it was.
#[test]
fn an_existing_key_is_refused_up_front_and_left_as_it_was() {
    if !redis_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let server = users_redis();
    let addr = server.addr;
    for existing in ["lock", "lock:fence"] {
        server
            .runtime
            .block_on(redis_query(addr, None, &["SET", existing, "users"]));
        let mut s = story(Algorithm::SingleRedis, Profile::None, 2_000);
        s.params.key = Some("lock".into());
        let e = run_on(&s, &endpoints(addr, Login::default())).unwrap_err();
        assert!(matches!(e, RealError::Occupied { .. }), "{e}");
        assert!(e.to_string().contains(existing), "{e}");
        let value = server
            .runtime
            .block_on(redis_query(addr, None, &["GET", existing]));
        assert_eq!(value, redis::Value::BulkString(b"users".to_vec()));
        server
            .runtime
            .block_on(redis_query(addr, None, &["DEL", existing]));
    }
}

/// A Redis of the user's that listens on three loopback addresses: one server, three names.
struct OnThreeAddresses;

impl ServerKind for OnThreeAddresses {
    fn binary(&self) -> &'static str {
        plain_redis().binary()
    }
    fn install(&self) -> &'static str {
        plain_redis().install()
    }
    fn command(&self, dir: &std::path::Path, port: u16) -> std::process::Command {
        let mut command = plain_redis().command(dir, port);
        // The last `--bind` wins.
        command.args(["--bind", "127.0.0.1", "127.0.0.2", "127.0.0.3"]);
        command
    }
    fn prepare(&self, dir: &std::path::Path, port: u16) -> Result<(), String> {
        plain_redis().prepare(dir, port)
    }
    fn ready(
        &self,
        addr: SocketAddr,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool>>> {
        plain_redis().ready(addr)
    }
    fn logs(&self) -> &'static [&'static str] {
        plain_redis().logs()
    }
}

fn plain_redis() -> Redis {
    Redis {
        persistence: Persistence::None,
    }
}

/// Issue 40 item 3: one Redis given as three Redlock masters, by three addresses that differ
/// (so the check of the addresses themselves lets them through): it would count three times in
/// the quorum. Its run id gives it away; the run is refused before anything is written, naming
/// both endpoints.
#[test]
fn one_server_given_by_two_addresses_is_refused_by_its_run_id() {
    if !redis_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let server = UsersServer::start("redis-0", Box::new(OnThreeAddresses));
    let port = server.addr.port();
    let addrs: Vec<SocketAddr> = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
        .iter()
        .map(|ip| format!("{ip}:{port}").parse().unwrap())
        .collect();
    let mut s = story(Algorithm::Redlock, Profile::None, 2_000);
    s.params.nodes = Some(3);
    let servers = Servers::Endpoints(Endpoints {
        addrs,
        login: Login::default(),
        keep: false,
    });
    let e = run_on(&s, &servers).unwrap_err();
    let said = e.to_string();
    assert!(matches!(e, RealError::Endpoints(_)), "{said}");
    assert!(
        said.contains(&format!(
            "127.0.0.1:{port} (redis-0) and 127.0.0.2:{port} (redis-1) are the same server \
             (Redis run_id "
        )),
        "{said}"
    );
    // Nothing was written: the server holds no key.
    let keys = server
        .runtime
        .block_on(redis_query(server.addr, None, &["DBSIZE"]));
    assert_eq!(keys, redis::Value::Int(0));
}

fn mariadb_installed() -> bool {
    common::installed(&MariaDb::of(&Scenario::new(Algorithm::MysqlRow), "mysql-0").unwrap())
}

/// The issue's story: a MariaDB whose own `wait_timeout` is the default 8 hours. The scenario's
/// `wait_timeout` (the story's 2 s) is applied to the run's sessions, so a holder paused past it
/// loses its transaction-held lock as in the simulation (before, the real run kept it: "safe").
/// The run's database is gone afterwards; the user's is untouched.
#[test]
fn a_mariadb_endpoint_runs_with_the_scenarios_wait_timeout_and_drops_its_database() {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let server = UsersServer::start(
        "mysql-0",
        Box::new(MariaDb {
            wait_timeout_s: 28_800,
            lock_wait_timeout_s: 50,
            flush: FlushPolicy::EverySecond,
            database: "users_db".into(),
        }),
    );
    let s = story(Algorithm::MysqlForUpdateHeld, Profile::Pause, 2_000);
    let real = run_agreeing(&s, &endpoints(server.addr, Login::default()));
    assert!(
        !real.outcome.violations.is_empty(),
        "the holder paused past wait_timeout lost its lock"
    );
    let key = s.params.key.clone().unwrap();
    assert_eq!(
        real.removed,
        vec![format!("mysql-0: MariaDB database '{key}'")]
    );
    let schemas: Vec<String> = server.runtime.block_on(async {
        use mysql_async::prelude::Queryable;
        let opts = lockcheck_real::launcher::mariadb::client_opts(server.addr, None);
        let mut c = mysql_async::Conn::new(opts).await.unwrap();
        c.query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
            .await
            .unwrap()
    });
    assert!(schemas.contains(&"users_db".to_string()), "{schemas:?}");
    assert!(!schemas.contains(&key), "{schemas:?}");
}

fn zookeeper_installed() -> bool {
    common::installed(&zookeeper())
}

fn zookeeper() -> ZooKeeper {
    ZooKeeper {
        session_timeout_ms: 4_000,
        tick_time_ms: lockcheck_core::scenario::DEFAULT_TICK_TIME_MS,
    }
}

/// ZooKeeper grants a session timeout within 2–20 ticks of its own: a scenario asking for more is refused
/// with what the server grants (rather than run with a session the scenario does not describe);
/// a run that fits leaves no node under its name.
#[test]
fn a_zookeeper_endpoint_refuses_a_session_timeout_it_would_not_grant_and_leaves_no_node() {
    if !zookeeper_installed() {
        return;
    }
    let _serial = one_at_a_time();
    // The user's server ticks every second: it grants at most 20 s.
    let server = UsersServer::start(
        "zk-0",
        Box::new(ZooKeeper {
            tick_time_ms: 1_000,
            ..zookeeper()
        }),
    );
    let mut s = story(Algorithm::ZkSequential, Profile::None, 4_000);
    s.params.zookeeper.session_timeout_ms = Some(30_000);
    let e = run_on(&s, &endpoints(server.addr, Login::default())).unwrap_err();
    assert!(
        matches!(e, RealError::Setting(_)) && e.to_string().contains("grants 20000 ms"),
        "{e}"
    );

    let s = story(Algorithm::ZkSequential, Profile::None, 4_000);
    let real = run_agreeing(&s, &endpoints(server.addr, Login::default()));
    assert!(real.left.is_empty(), "{:?}", real.left);
    let key = s.params.key.clone().unwrap();
    assert!(
        real.removed
            .iter()
            .any(|r| r.contains(&format!("'/{key}'"))),
        "{:?}",
        real.removed
    );
    let exists = server.runtime.block_on(async {
        let client = zookeeper_client::Client::connector()
            .connect(&server.addr.to_string())
            .await
            .unwrap();
        client.check_stat(&format!("/{key}")).await.unwrap()
    });
    assert!(exists.is_none(), "/{key} is left");
}

/// A second address for the server at `to`: a port on loopback whose connections are relayed
/// to it (what a NAT rule or a second listener of the user's would do), by threads of its own
/// (the run blocks the test's thread). Lives as long as the test.
fn second_address(to: SocketAddr) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(to) else {
                continue;
            };
            for (mut from, mut into) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    addr
}

/// Issue 40 item 3, ZooKeeper: one server given as an ensemble of three, by its address and two
/// others that reach it. ZooKeeper has no name to ask for, but its session ids come from one
/// counter per server: three sessions opened one after the other are a few ids apart, and the
/// run is refused naming both endpoints.
#[test]
fn one_zookeeper_given_as_three_members_is_refused_by_its_session_ids() {
    if !zookeeper_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let server = UsersServer::start("zk-0", Box::new(zookeeper()));
    let (a, b) = (second_address(server.addr), second_address(server.addr));
    let mut s = story(Algorithm::ZkSequential, Profile::None, 4_000);
    s.params.nodes = Some(3);
    let servers = Servers::Endpoints(Endpoints {
        addrs: vec![server.addr, a, b],
        login: Login::default(),
        keep: false,
    });
    let e = run_on(&s, &servers).unwrap_err();
    let said = e.to_string();
    assert!(matches!(e, RealError::Endpoints(_)), "{said}");
    assert!(
        said.contains(&format!(
            "{} (zk-0) and {a} (zk-1) are the same server (ZooKeeper sessions 0x",
            server.addr
        )),
        "{said}"
    );
}

fn etcd_installed() -> bool {
    common::installed(&lockcheck_real::launcher::Etcd)
}

/// etcd grants no lease shorter than 1.5 election timeouts (2 s with the defaults): on a user's
/// etcd whose elections take 3 s, a scenario asking for 2 s is refused with what it grants (5 s);
/// a run that fits leaves no key under its prefix, and no lease: the session leases its clients
/// were granted are revoked at its end (issue 40 item 7: they used to stay until their TTL).
#[test]
fn an_etcd_endpoint_refuses_a_lease_it_would_not_grant_and_leaves_no_key_or_lease() {
    if !etcd_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let slow = UsersServer::start("etcd-0", Box::new(SlowElections));
    let s = story(Algorithm::EtcdMutex, Profile::None, 2_000);
    let e = run_on(&s, &endpoints(slow.addr, Login::default())).unwrap_err();
    assert!(
        matches!(e, RealError::Setting(_)) && e.to_string().contains("grants 5 s"),
        "{e}"
    );
    drop(slow);

    let server = UsersServer::start("etcd-0", Box::new(lockcheck_real::launcher::Etcd));
    let real = run_agreeing(&s, &endpoints(server.addr, Login::default()));
    assert!(real.left.is_empty(), "{:?}", real.left);
    let key = s.params.key.clone().unwrap();
    let count = server.runtime.block_on(async {
        let mut c = lockcheck_real::etcd_gateway::Connection::open(server.addr)
            .await
            .unwrap();
        let prefix = format!("/{key}/");
        let body = serde_json::json!({
            "key": lockcheck_real::etcd_gateway::b64(&prefix),
            "range_end": base64_of(&lockcheck_real::etcd_gateway::prefix_end(&prefix)),
            "count_only": true,
        });
        let (_, answer) = c.post("/v3/kv/range", &body).await.unwrap();
        lockcheck_real::etcd_gateway::int(&answer, "count")
    });
    assert_eq!(count, 0, "keys left under /{key}/");
    assert!(
        real.removed
            .iter()
            .any(|r| r.contains("etcd session lease(s)")),
        "{:?}",
        real.removed
    );
    // The server was the run's alone: every lease on it was one of the run's.
    let leases = server.runtime.block_on(async {
        let mut c = lockcheck_real::etcd_gateway::Connection::open(server.addr)
            .await
            .unwrap();
        let (_, answer) = c
            .post("/v3/lease/leases", &serde_json::json!({}))
            .await
            .unwrap();
        answer["leases"].as_array().cloned().unwrap_or_default()
    });
    assert!(leases.is_empty(), "leases left: {leases:?}");
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// etcd as a user may run it: elections after 3 s (heartbeats every 300 ms), so that the
/// shortest lease it grants is 5 s.
struct SlowElections;

impl ServerKind for SlowElections {
    fn binary(&self) -> &'static str {
        lockcheck_real::launcher::Etcd.binary()
    }
    fn install(&self) -> &'static str {
        lockcheck_real::launcher::Etcd.install()
    }
    fn command(&self, dir: &std::path::Path, port: u16) -> std::process::Command {
        let mut command = lockcheck_real::launcher::Etcd.command(dir, port);
        command.args(["--heartbeat-interval", "300", "--election-timeout", "3000"]);
        command
    }
    fn ready(
        &self,
        addr: SocketAddr,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool>>> {
        lockcheck_real::launcher::Etcd.ready(addr)
    }
    fn logs(&self) -> &'static [&'static str] {
        lockcheck_real::launcher::Etcd.logs()
    }
    fn ready_within(&self) -> std::time::Duration {
        lockcheck_real::launcher::Etcd.ready_within()
    }
}

/// A Redis that may evict keys under memory pressure (a limit, and a policy that evicts keys
/// with a TTL, as every lease is) is refused: the model never evicts a lock's key.
#[test]
fn a_redis_that_may_evict_the_lock_key_is_refused() {
    if !redis_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let server = users_redis();
    let addr = server.addr;
    server.runtime.block_on(async {
        redis_query(addr, None, &["CONFIG", "SET", "maxmemory", "100mb"]).await;
        redis_query(
            addr,
            None,
            &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"],
        )
        .await;
    });
    let s = story(Algorithm::SingleRedis, Profile::None, 2_000);
    let e = run_on(&s, &endpoints(addr, Login::default())).unwrap_err();
    assert!(
        matches!(e, RealError::Setting(_)) && e.to_string().contains("volatile-lru"),
        "{e}"
    );
}

/// Certificates for the TLS tests, as a user's PKI would issue them: a CA, a server certificate
/// for 127.0.0.1 (and `localhost`), a client certificate, each in a PEM file of its own.
struct Pki {
    dir: std::path::PathBuf,
}

impl Pki {
    fn issue() -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair,
        };
        let dir = std::env::temp_dir().join(format!(
            "lockcheck-pki-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, pem: String| std::fs::write(dir.join(name), pem).unwrap();
        // Every certificate is named for what it is: a leaf named as its issuer would look
        // self-signed to OpenSSL (Redis, MariaDB).
        let ca_params = |name: &str| {
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca.distinguished_name.push(DnType::CommonName, name);
            ca
        };
        let ca = CertifiedIssuer::self_signed(
            ca_params("lockcheck test CA"),
            KeyPair::generate().unwrap(),
        )
        .unwrap();
        write("ca.pem", ca.pem());
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        // etcd's gateway dials its own gRPC port with the server's certificate: it is a
        // client's certificate too.
        for (name, usages) in [
            ("server", vec![ServerAuth, ClientAuth]),
            ("client", vec![ClientAuth]),
        ] {
            let key = KeyPair::generate().unwrap();
            let mut params =
                CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                    .unwrap();
            params
                .distinguished_name
                .push(DnType::CommonName, format!("lockcheck test {name}"));
            params.extended_key_usages = usages;
            let cert = params.signed_by(&key, &ca).unwrap();
            write(&format!("{name}.pem"), cert.pem());
            write(&format!("{name}.key"), key.serialize_pem());
            // ZooKeeper reads its key and certificate from one PEM file.
            write(
                &format!("{name}.both.pem"),
                format!("{}{}", key.serialize_pem(), cert.pem()),
            );
        }
        // A CA that signed none of them: the run must refuse the server.
        let other =
            CertifiedIssuer::self_signed(ca_params("another CA"), KeyPair::generate().unwrap())
                .unwrap();
        write("other-ca.pem", other.pem());
        Pki { dir }
    }

    /// What `lockcheck real --tls-ca ca.pem --tls-cert client.pem --tls-key client.key` loads.
    fn client(&self, ca: &str) -> lockcheck_real::Tls {
        lockcheck_real::Tls::load(lockcheck_real::TlsFiles {
            ca: Some(self.dir.join(ca)),
            cert: Some(self.dir.join("client.pem")),
            key: Some(self.dir.join("client.key")),
            server_name: None,
        })
        .unwrap()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One of lockcheck's server kinds with TLS, as a user may have it: Redis, etcd and ZooKeeper
/// (its `secureClientPort`) on their client port only, ready once a TLS handshake with it
/// succeeds; MariaDB offering TLS beside plain logins (an account may `REQUIRE SSL`).
struct WithTls {
    inner: Box<dyn ServerKind>,
    tls: lockcheck_real::Tls,
    pki: std::path::PathBuf,
}

impl ServerKind for WithTls {
    fn binary(&self) -> &'static str {
        self.inner.binary()
    }
    fn install(&self) -> &'static str {
        self.inner.install()
    }
    fn installed(&self) -> bool {
        self.inner.installed()
    }
    fn process_marker(&self) -> &'static str {
        self.inner.process_marker()
    }
    fn prepare(&self, dir: &std::path::Path, port: u16) -> Result<(), String> {
        self.inner.prepare(dir, port)?;
        self.secure_zookeeper(dir, port)
    }
    fn port_moved(&self, dir: &std::path::Path, port: u16) -> Result<(), String> {
        self.inner.port_moved(dir, port)?;
        self.secure_zookeeper(dir, port)
    }
    fn command(&self, dir: &std::path::Path, port: u16) -> std::process::Command {
        let mut command = self.inner.command(dir, port);
        let p = |name: &str| self.pki.join(name).display().to_string();
        match self.inner.binary() {
            "redis-server" => {
                // Later settings win: the plain port is closed, the TLS port is the one given.
                command.args(["--port", "0", "--tls-port", &port.to_string()]);
                command.args(["--tls-cert-file", &p("server.pem")]);
                command.args(["--tls-key-file", &p("server.key")]);
                command.args(["--tls-ca-cert-file", &p("ca.pem")]);
            }
            "etcd" => {
                let url = format!("https://127.0.0.1:{port}");
                command.args(["--listen-client-urls", &url]);
                command.args(["--advertise-client-urls", &url]);
                command.args([
                    "--cert-file",
                    &p("server.pem"),
                    "--key-file",
                    &p("server.key"),
                ]);
                command.args(["--trusted-ca-file", &p("ca.pem"), "--client-cert-auth"]);
            }
            "mariadbd" => {
                command.arg(format!("--ssl-cert={}", p("server.pem")));
                command.arg(format!("--ssl-key={}", p("server.key")));
                command.arg(format!("--ssl-ca={}", p("ca.pem")));
            }
            _ => {}
        }
        command
    }
    fn ready(
        &self,
        addr: SocketAddr,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool>>> {
        if self.inner.binary() == "mariadbd" {
            return self.inner.ready(addr);
        }
        let tls = self.tls.clone();
        Box::pin(async move { tls.connect(addr).await.is_ok() })
    }
    fn logs(&self) -> &'static [&'static str] {
        self.inner.logs()
    }
    fn ready_within(&self) -> std::time::Duration {
        self.inner.ready_within()
    }
}

impl WithTls {
    /// ZooKeeper's `zoo.cfg`, if `dir` has one: the client port becomes the secure one, served
    /// by Netty with PEM key and trust stores.
    fn secure_zookeeper(&self, dir: &std::path::Path, port: u16) -> Result<(), String> {
        let config = dir.join("zoo.cfg");
        if let Ok(text) = std::fs::read_to_string(&config) {
            let p = |name: &str| self.pki.join(name).display().to_string();
            let text = text.replace(
                &format!("clientPort={port}\nclientPortAddress=127.0.0.1\n"),
                &format!("secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n"),
            ) + &format!(
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                     ssl.keyStore.location={}\nssl.keyStore.type=PEM\n\
                     ssl.trustStore.location={}\nssl.trustStore.type=PEM\n\
                     ssl.clientHostnameVerification=false\n",
                p("server.both.pem"),
                p("ca.pem")
            );
            std::fs::write(&config, text).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

fn tls_endpoints(addr: SocketAddr, tls: lockcheck_real::Tls) -> Servers {
    endpoints(
        addr,
        Login {
            tls: Some(tls),
            ..Login::default()
        },
    )
}

/// A Redis that speaks only TLS and wants a client certificate (`tls-auth-clients yes`, its
/// default): without TLS the run is refused, with a CA that did not sign the server's
/// certificate it is refused naming the certificate, and with the user's PKI the pause story is
/// UNSAFE as in the simulation (the proxies speak TLS; the faults act on them as without).
#[test]
fn a_tls_redis_is_refused_without_tls_or_with_the_wrong_ca_and_agrees_with_it() {
    if !redis_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let pki = Pki::issue();
    let server = UsersServer::start(
        "redis-0",
        Box::new(WithTls {
            inner: Box::new(Redis {
                persistence: Persistence::None,
            }),
            tls: pki.client("ca.pem"),
            pki: pki.dir.clone(),
        }),
    );
    let s = story(Algorithm::SingleRedis, Profile::Pause, 2_000);

    let plain = run_on(&s, &endpoints(server.addr, Login::default())).unwrap_err();
    assert!(matches!(plain, RealError::Endpoint { .. }), "{plain}");

    let wrong = run_on(&s, &tls_endpoints(server.addr, pki.client("other-ca.pem"))).unwrap_err();
    assert!(
        matches!(wrong, RealError::Endpoint { .. }) && wrong.to_string().contains("TLS refused"),
        "{wrong}"
    );

    let real = run_agreeing(&s, &tls_endpoints(server.addr, pki.client("ca.pem")));
    assert!(
        !real.outcome.violations.is_empty(),
        "the pause story is UNSAFE"
    );
    // What the run wrote was looked for (and, had a lease outlived the run, removed) over TLS.
    assert!(real.left.is_empty(), "{:?}", real.left);
}

/// MariaDB switches to TLS inside its protocol, so its client (mysql_async) speaks it end to end
/// through the proxy. The account may log in over TLS only (`REQUIRE SSL`): the run goes
/// through, and agrees with the simulation.
#[test]
fn a_mariadb_account_that_requires_tls_runs_over_tls() {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let pki = Pki::issue();
    let mut kind = MariaDb::of(&Scenario::new(Algorithm::MysqlRow), "mysql-0").unwrap();
    kind.database = "users_db".into();
    let server = UsersServer::start(
        "mysql-0",
        Box::new(WithTls {
            inner: Box::new(kind),
            tls: pki.client("ca.pem"),
            pki: pki.dir.clone(),
        }),
    );
    server.runtime.block_on(async {
        use mysql_async::prelude::Queryable;
        let opts = lockcheck_real::launcher::mariadb::client_opts(server.addr, None);
        let mut c = mysql_async::Conn::new(opts).await.unwrap();
        c.query_drop("CREATE USER 'alice'@'%' IDENTIFIED BY 'pw' REQUIRE SSL")
            .await
            .unwrap();
        c.query_drop("GRANT ALL ON *.* TO 'alice'@'%'")
            .await
            .unwrap();
    });
    let alice = |tls: Option<lockcheck_real::Tls>| {
        endpoints(
            server.addr,
            Login {
                user: Some("alice".into()),
                password: Some("pw".into()),
                tls,
            },
        )
    };
    let s = story(Algorithm::MysqlRow, Profile::Pause, 2_000);
    let plain = run_on(&s, &alice(None)).unwrap_err();
    assert!(
        matches!(plain, RealError::Endpoint { .. }) && plain.to_string().contains("Access denied"),
        "{plain}"
    );
    let real = run_agreeing(&s, &alice(Some(pki.client("ca.pem"))));
    assert!(real.left.is_empty(), "{:?}", real.left);
}

/// etcd with TLS on its client port and client certificates required (`--client-cert-auth`):
/// the gateway's HTTP goes through the proxies' TLS; nothing is left under the run's prefix.
#[test]
fn an_etcd_that_wants_client_certificates_runs_over_tls() {
    if !etcd_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let pki = Pki::issue();
    let server = UsersServer::start(
        "etcd-0",
        Box::new(WithTls {
            inner: Box::new(lockcheck_real::launcher::Etcd),
            tls: pki.client("ca.pem"),
            pki: pki.dir.clone(),
        }),
    );
    let s = story(Algorithm::EtcdMutex, Profile::Pause, 2_000);
    let real = run_agreeing(&s, &tls_endpoints(server.addr, pki.client("ca.pem")));
    assert!(real.left.is_empty(), "{:?}", real.left);
}

/// ZooKeeper's `secureClientPort` (Netty, PEM key and trust stores, client certificates needed):
/// the session runs through the proxies' TLS, and the verdict is the simulation's.
#[test]
fn a_zookeeper_secure_client_port_runs_over_tls() {
    if !zookeeper_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let pki = Pki::issue();
    let server = UsersServer::start(
        "zk-0",
        Box::new(WithTls {
            inner: Box::new(zookeeper()),
            tls: pki.client("ca.pem"),
            pki: pki.dir.clone(),
        }),
    );
    let s = story(Algorithm::ZkSequential, Profile::Pause, 4_000);
    let real = run_agreeing(&s, &tls_endpoints(server.addr, pki.client("ca.pem")));
    assert!(real.left.is_empty(), "{:?}", real.left);
}
