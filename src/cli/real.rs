//! `lockcheck real`: the same algorithm code against real servers, with real faults.

use super::params::ParamArgs;
use super::run::{print_outcome, read_scenario_with};
use super::{parse_algorithm, usage};
use clap::Args;
use lockcheck_core::report::Report;
use lockcheck_core::{Algorithm, Scenario};
use lockcheck_real::endpoints::PASSWORD_VAR;
use lockcheck_real::profile::{Profile, Shape};
use lockcheck_real::{Endpoints, Login, RealError, Servers, Tls, TlsFiles};
use lockcheck_search::ExploreOptions;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

/// The arguments of `lockcheck real`.
#[derive(Args)]
// A negative number is a value the checks refuse by name, not an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct RealArgs {
    /// The algorithm (every registered one is listed under --help).
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "scenario",
        long_help = super::algorithm_help()
    )]
    algorithm: Option<String>,
    /// The fault profile, one story each, named as `explore` names the fault family it comes
    /// from: `none` (the default: clients contend, no fault); `pause` (the first holder is
    /// paused inside its critical section until its lease has surely ended, while the others
    /// wait); `partition` (the first holder is cut off as long: a session lock's holder,
    /// ZooKeeper or etcd, keeps working past the heal; any other's last access, sent inside its
    /// lease, is held by the network and arrives late); `clock-jump` (a server holding the first
    /// holder's key jumps 2 × TTL forward; Redlock: Kleppmann's story on 3 masters; refused for
    /// etcd, whose clocks real mode cannot move); `crash-restart` (that server is killed and
    /// restarted empty at once; Redlock: seed 002's story; `restart`, its old name, is still
    /// read); `failover` (the Redis locks with replicas: the primary redis-0 is killed before
    /// its 2 lagging replicas have the first holder's key and Sentinel promotes redis-1; add
    /// --wait-replicas 1 for the WAIT variant; a --replicas other than 2 is refused). explore's
    /// other families (clock-drift, crash-delayed-restart, delay) have no story: search them
    /// with --cases.
    ///
    /// With --cases: the profiles the schedules are drawn from, comma-separated, as `explore
    /// --faults` takes them (pause, clock-jump, clock-drift, crash-restart,
    /// crash-delayed-restart, partition, delay, failover, all, none; `restart` is read as
    /// crash-restart) [default with --cases: every profile real mode can carry out: pause,
    /// clock-jump, clock-drift, crash-restart, crash-delayed-restart, partition, delay].
    #[arg(long, value_name = "F", conflicts_with = "scenario")]
    faults: Option<String>,
    /// Run this scenario file (the `lockcheck run` format) instead of a profile.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Search instead of telling one story: run N fault schedules drawn by `explore`'s
    /// generator from the --faults profiles (explore's names; every profile real mode can carry
    /// out when --faults is not given), timed from the lease, each against fresh servers and
    /// printed as it starts; stop at the first violation, write its real report, and run its
    /// scenario in the simulation to say whether it agrees. Only schedules whose story a real
    /// machine can tell are drawn; the others are drawn again: what real mode cannot carry out
    /// (a machine crash, a clock fault on an etcd member), a fault span within --margin-ms of a
    /// threshold the verdict turns on (the lease, lease + a server's check interval, …), a
    /// schedule none of whose faults strikes while a client holds the lock (in the
    /// simulation), and one whose simulated verdict changes when its faults or its sections'
    /// ends move --margin-ms earlier or later, or under other seeds (a verdict that turns on
    /// which waiter retries first, or on a pause landing a few ms before its holder leaves, is
    /// the dice's, and a real run rolls other dice). Every client but client-0 is held back
    /// 200 ms at the start so that client-0 is the first holder in both worlds: who wins the
    /// first race otherwise turns on a fraction of a millisecond, and a fault drawn for "the
    /// holder" strikes a waiting client instead.
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["scenario", "endpoints", "clients", "duration_ms"]
    )]
    cases: Option<u32>,
    /// With --cases: how far (in ms) a drawn schedule's fault spans keep from the thresholds its
    /// verdict turns on, and how far its faults and its sections' ends are moved each way to see
    /// that its simulated verdict stays; a schedule that does not keep it is drawn again. 0
    /// draws as `explore` does [default: 100].
    #[arg(long, value_name = "MS", requires = "cases")]
    margin_ms: Option<u64>,
    /// The seed: of a story's scenario (its clients' randomness), or with --cases of the
    /// search (`explore --seed`: the same seed draws the same schedules) [default: 0].
    #[arg(long, value_name = "S", conflicts_with = "scenario")]
    seed: Option<u64>,
    /// With --cases: the largest clock drift clock-drift draws (`explore --max-drift`).
    #[arg(long, value_name = "FRACTION", requires = "cases")]
    max_drift: Option<f64>,
    /// With --cases: the longest partition the partition profile draws, in ms
    /// (`explore --max-partition-ms`).
    #[arg(long, value_name = "MS", requires = "cases")]
    max_partition_ms: Option<u64>,
    /// With --cases: count only safety violations (`explore --safety-only`).
    #[arg(long, requires = "cases")]
    safety_only: bool,
    /// Clients stop acquiring after this many ms [profile default: 30000].
    #[arg(long, value_name = "MS")]
    duration_ms: Option<u64>,
    /// Number of clients [profile default: 3].
    #[arg(long, value_name = "N")]
    clients: Option<u32>,
    /// Lease length in ms: the TTL, or a ZooKeeper lock's session timeout [profile default:
    /// 2000, ZooKeeper 4000 (two ticks, the shortest a server grants), failover 8000, short so that a run
    /// takes seconds].
    #[arg(long, value_name = "MS")]
    ttl_ms: Option<u64>,
    /// Number of servers (redlock: an odd number ≥ 3, default 5).
    #[arg(long, value_name = "N")]
    nodes: Option<u32>,
    /// Use servers you already run (containers included) instead of starting them:
    /// HOST:PORT, comma-separated, one per server in order (redlock: one per master).
    /// lockcheck only connects to them, so faults that need a server's process (crash,
    /// restart, server pause, server clock) are refused; client faults stay real. Everything
    /// the run writes is named after --key (a fresh name per run by default); a run refuses to
    /// start when something by those names exists, applies the server settings the scenario
    /// relies on to its own sessions (or reads them back and refuses), and removes what it
    /// created at the end unless --keep. docs/real-mode.md lists what is created.
    #[arg(long, value_name = "ADDRS", value_delimiter = ',')]
    endpoints: Option<Vec<String>>,
    /// The lock's name: the Redis key (and its derived keys), the ZooKeeper node /KEY, the etcd
    /// prefix /KEY/, the MariaDB database KEY. Letters, digits and '_' [default: `lock` on
    /// servers lockcheck starts; with --endpoints a fresh `lockcheck_XXXXXXXX` per run].
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// With --endpoints: the user to log in as (a Redis ACL user, a MariaDB account, a ZooKeeper
    /// digest user); the password comes from the environment variable LOCKCHECK_PASSWORD (a
    /// Redis `requirepass` password alone needs no --user). [default: none; MariaDB: root]
    #[arg(long, value_name = "NAME", requires = "endpoints")]
    user: Option<String>,
    /// With --endpoints: speak TLS to every server, verifying its certificate against the
    /// Mozilla roots (or --tls-ca) for the name the endpoint was given by (or --tls-server-name).
    /// Redis, ZooKeeper's secure port and etcd: lockcheck's proxies speak it; MariaDB: its client.
    #[arg(long, requires = "endpoints")]
    tls: bool,
    /// With --endpoints: the PEM file of the CA certificate(s) the servers' certificates are
    /// verified against, instead of the Mozilla roots (implies --tls).
    #[arg(long, value_name = "FILE", requires = "endpoints")]
    tls_ca: Option<PathBuf>,
    /// With --endpoints: the PEM client certificate (chain) to present, for servers that ask for
    /// one (Redis's tls-auth-clients, ZooKeeper's ssl.clientAuth, etcd's --client-cert-auth);
    /// with --tls-key (implies --tls).
    #[arg(long, value_name = "FILE", requires_all = ["endpoints", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// With --endpoints: the PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires_all = ["endpoints", "tls_cert"])]
    tls_key: Option<PathBuf>,
    /// With --endpoints: the name every server's certificate must carry [default: the host each
    /// endpoint is given by: its name, or its IP address] (implies --tls).
    #[arg(long, value_name = "NAME", requires = "endpoints")]
    tls_server_name: Option<String>,
    /// With --endpoints: leave what the run created on the servers (to look at it afterwards).
    #[arg(long, requires = "endpoints")]
    keep: bool,
    /// Check your own lock library instead of lockcheck's rendition of the algorithm: start one
    /// process per client (and one for the liveness probe) as `sh -c COMMAND`, tell it who it is
    /// and where the servers are (environment variables LOCKCHECK_*), and drive it over the
    /// JSON-lines protocol of docs/check-your-lock.md. --algorithm (or the scenario)
    /// still says which servers to start and the lease to give the clients. A client pause is
    /// SIGSTOP/SIGCONT of its process group, a crash kill -9.
    /// With --cases, every case starts fresh client processes (and fresh servers).
    #[arg(long, value_name = "COMMAND")]
    client: Option<String>,
    /// With --client: the names your library writes beside the lock, comma-separated patterns
    /// in which {key} stands for the run's lock name (LOCKCHECK_KEY) and a trailing `*` makes a
    /// prefix: python-redis-lock's `lock:{key},lock-signal:{key}`. Redis: keys (a prefix: every
    /// key starting with it, found by SCAN); etcd: keys (a prefix: a range); ZooKeeper: paths,
    /// each node with its subtree (`/locks/{key}`); not for MariaDB. With --endpoints they are
    /// checked free before the run (it is refused when one exists) and removed after it, as
    /// lockcheck's own names are (--keep leaves them). A pattern without {key} is refused: it
    /// would name your own data, not the run's.
    #[arg(
        long,
        value_name = "PATTERN",
        value_delimiter = ',',
        requires = "client"
    )]
    client_keys: Option<Vec<String>>,
    /// With --client: the lease your library really uses, in ms, when it is not the one
    /// lockcheck gives it (LOCKCHECK_TTL_MS: --ttl-ms, the session timeout, the lease TTL). The
    /// liveness checks judge by it (a waiter is STUCK after twice it on a free lock) and the
    /// probe at the end waits twice it. Positive, at most 365 days.
    #[arg(long, value_name = "MS", requires = "client")]
    client_lease_ms: Option<u64>,
    /// Write a report (JSON with the full history, marked as a real run, and its scenario
    /// beside it) into this directory [with --cases: default reports/runs].
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// The scenario parameters, as `explore` takes them; they change a profile's story or a
    /// scenario file's params (e.g. `--fencing`, `--persistence always`). The setting that ends
    /// a silent holder's lock (`--session-timeout-ms`, `--lease-ttl-s`, `mysql-for-update-held`'s
    /// `--wait-timeout-ms`) is the story's TTL, as `--ttl-ms` is.
    #[command(flatten)]
    params: ParamArgs,
}

/// Runs `lockcheck real`.
pub fn real(args: RealArgs) -> anyhow::Result<u8> {
    let RealArgs {
        algorithm,
        faults,
        scenario,
        duration_ms,
        clients,
        ttl_ms,
        nodes,
        endpoints,
        key,
        user,
        tls,
        tls_ca,
        tls_cert,
        tls_key,
        tls_server_name,
        keep,
        report,
        client,
        client_keys,
        client_lease_ms,
        params: flags,
        cases,
        seed,
        max_drift,
        max_partition_ms,
        safety_only,
        margin_ms,
    } = args;
    if let Some(cases) = cases {
        let algorithm = parse_algorithm(algorithm.as_deref().unwrap_or_default())?;
        let mut params = search_params(algorithm, ttl_ms, nodes, &flags)?;
        params.key = key;
        let mut template = Scenario::new(algorithm);
        template.params = params.clone();
        let profiles = super::real_search::profiles(faults.as_deref()).map_err(usage)?;
        return super::real_search::search(super::real_search::RealSearch {
            options: ExploreOptions {
                params,
                max_drift: max_drift.unwrap_or(lockcheck_core::profile::DEFAULT_MAX_DRIFT),
                max_partition_ms,
                safety_only,
                ..ExploreOptions::new(algorithm, profiles, cases, seed.unwrap_or(0))
            },
            margin_ms: margin_ms.unwrap_or(super::real_search::DEFAULT_MARGIN_MS),
            out: report.unwrap_or_else(|| PathBuf::from(super::RUNS_DIR)),
            topology: topology_text(&template),
            client: client.map(|c| client_command(c, client_keys, client_lease_ms)),
        });
    }
    let servers = match endpoints {
        None => Servers::Launched,
        Some(list) => {
            let addrs: Vec<SocketAddr> = list
                .iter()
                .map(|e| resolve(e))
                .collect::<anyhow::Result<_>>()?;
            // One server given as two would count twice in a quorum (Redlock's majority of
            // three masters, one of them three times) and its verdict would be about a
            // topology that does not exist.
            for (i, addr) in addrs.iter().enumerate() {
                if let Some(j) = addrs[..i].iter().position(|a| a == addr) {
                    return Err(usage(format!(
                        "--endpoints: '{}' and '{}' are the same server ({addr}); give each \
                         server once",
                        lockcheck_core::input::clip(&list[j]),
                        lockcheck_core::input::clip(&list[i])
                    )));
                }
            }
            let tls_files = TlsFiles {
                ca: tls_ca,
                cert: tls_cert,
                key: tls_key,
                server_name: tls_server_name,
            };
            let tls = if tls || tls_files != TlsFiles::default() {
                // Each server's certificate names the host it was given by.
                let hosts = list.iter().zip(&addrs).map(|(e, &a)| (a, host_of(e)));
                Some(
                    Tls::load(tls_files)
                        .map_err(|e| usage(e.to_string()))?
                        .with_hosts(hosts),
                )
            } else {
                None
            };
            Servers::Endpoints(Endpoints {
                addrs,
                login: Login {
                    user,
                    password: std::env::var(PASSWORD_VAR).ok(),
                    tls,
                },
                keep,
            })
        }
    };
    // On the user's servers, never a name the user may have: a fresh one unless they chose.
    let key = match (&servers, key) {
        (_, Some(key)) => Some(key),
        (Servers::Endpoints(_), None) => Some(lockcheck_real::endpoints::fresh_key()),
        (Servers::Launched, None) => None,
    };
    let scenario = match scenario {
        Some(file) => {
            let mut s = read_scenario_with(&file, flags.script.as_deref(), None)?;
            if let Some(name) = algorithm.filter(|name| name != s.algorithm.name()) {
                return Err(usage(format!(
                    "--algorithm {name} contradicts {}, which runs {}",
                    file.display(),
                    s.algorithm.name()
                )));
            }
            s.duration_ms = duration_ms.unwrap_or(s.duration_ms);
            s.clients = clients.unwrap_or(s.clients);
            if let Some(ms) = lease(s.algorithm, ttl_ms, &flags)? {
                lockcheck_real::profile::set_lease(&mut s, ms);
            }
            s.params.nodes = nodes.or(s.params.nodes);
            s.params.key = key.or(s.params.key);
            flags.apply(s.algorithm, &mut s.params)?;
            s.validate().map_err(|e| usage(e.to_string()))?;
            s
        }
        None => {
            let algorithm = parse_algorithm(algorithm.as_deref().unwrap_or_default())?;
            lockcheck_real::support::check_algorithm(algorithm)
                .map_err(|e| usage(e.to_string()))?;
            let profile = story(faults.as_deref().unwrap_or("none"))?;
            let defaults = Shape::for_story(algorithm, profile);
            let shape = Shape {
                seed: seed.unwrap_or(defaults.seed),
                clients: clients.unwrap_or(defaults.clients),
                ttl_ms: lease(algorithm, ttl_ms, &flags)?.unwrap_or(defaults.ttl_ms),
                duration_ms: duration_ms.unwrap_or(defaults.duration_ms),
                nodes,
            };
            let mut params = lockcheck_core::scenario::Params::default();
            if let Some(file) = &flags.script {
                super::params::apply_script_file(file, &mut params)?;
            }
            let mut s = lockcheck_real::profile::scenario_scripted(
                algorithm,
                profile,
                &shape,
                params.redis.script,
            )
            .map_err(|e| usage(e.to_string()))?;
            // The user's settings win over the story's (a restart story with `--persistence
            // always` asks whether the lock survives a restart that keeps its data), but for
            // the topology a story is told on: another replica count is another story.
            let told_on = lockcheck_real::profile::story_replicas(profile);
            if let (Some(story), Some(flag)) =
                (told_on, flags.replicas.filter(|&n| Some(n) != told_on))
            {
                return Err(usage(format!(
                    "--replicas {flag} contradicts the {} story, which is told on a primary and \
                     {story} replicas (redis-0 primary, redis-1..{story} replicas, sentinel); \
                     drop --replicas, or give your own topology with --scenario FILE or a \
                     search with --cases",
                    profile.name()
                )));
            }
            s.params.key = key;
            flags.apply(algorithm, &mut s.params)?;
            lockcheck_real::profile::fit_story(profile, &mut s);
            s.validate().map_err(|e| usage(e.to_string()))?;
            s
        }
    };
    let client = client.map(|c| client_command(c, client_keys, client_lease_ms));
    run(&scenario, &servers, client.as_ref(), report.as_deref())
}

/// The client of `--client COMMAND`, with what `--client-keys` and `--client-lease-ms` declare
/// of its library (checked with the scenario, by `client_process::check`).
fn client_command(
    command: String,
    keys: Option<Vec<String>>,
    lease_ms: Option<u64>,
) -> lockcheck_real::ClientCommand {
    let mut client = lockcheck_real::ClientCommand::new(command);
    client.keys = keys.unwrap_or_default();
    client.lease_ms = lease_ms;
    client
}

/// The story `faults` names (`real --faults` without `--cases`): one of [`Profile::ALL`] or an
/// alias of one. A family `explore` draws from that has no story, or a list, is refused with the
/// way to search it.
fn story(faults: &str) -> anyhow::Result<Profile> {
    if let Some(profile) = Profile::from_name(faults) {
        return Ok(profile);
    }
    let stories: Vec<&str> = Profile::ALL.iter().map(|(_, n)| *n).collect();
    let shown = lockcheck_core::input::clip(faults);
    let searchable = lockcheck_core::profile::FaultProfile::parse_list(faults).is_ok();
    Err(usage(if searchable {
        format!(
            "--faults {shown}: real mode tells one story per profile ({}); {shown} is searched \
             instead: add --cases N to draw N schedules from it",
            stories.join(", ")
        )
    } else {
        format!(
            "unknown fault profile '{shown}' for real runs (stories: {}; with --cases, explore's \
             profiles)",
            stories.join(", ")
        )
    }))
}

/// The servers `scenario` runs on and their roles, for a run's header: `redis-0 (one server)`,
/// `redis-0 primary, redis-1..2 replicas, sentinel`, `redis-0..2: 3 Redlock masters`,
/// `zk-0..2 ensemble`, `etcd-0..2 cluster`.
pub(super) fn topology_text(scenario: &Scenario) -> String {
    let topology = scenario.topology();
    let servers: Vec<&str> = topology
        .with_role(lockcheck_core::topology::Role::Server)
        .into_iter()
        .map(|i| topology.name(i))
        .collect();
    let span = |names: &[&str]| match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [first, .., last] => {
            let prefix = scenario.algorithm.server_prefix();
            let number = |n: &str| {
                n.strip_prefix(prefix)
                    .unwrap_or(n)
                    .trim_start_matches('-')
                    .to_string()
            };
            format!("{first}..{}", number(last))
        }
    };
    let replicas = scenario.params.redis.replicas as usize;
    if replicas > 0 && servers.len() > replicas {
        let primaries = servers.len() - replicas;
        return format!(
            "{} primary, {} replica{}, sentinel",
            span(&servers[..primaries]),
            span(&servers[primaries..]),
            if replicas == 1 { "" } else { "s" }
        );
    }
    if servers.len() == 1 {
        return format!("{} (one server)", servers[0]);
    }
    let all = span(&servers);
    if scenario.is_zookeeper_ensemble() {
        format!("{all} ensemble")
    } else if scenario.is_etcd_cluster() {
        format!("{all} cluster")
    } else if scenario.algorithm.backend() == lockcheck_core::scenario::Backend::Redis {
        // Several Redis servers without replicas: independent masters, as Redlock has them.
        format!("{all}: {} Redlock masters", servers.len())
    } else {
        format!("{all}: {} servers", servers.len())
    }
}

/// The parameters of a search of real runs of `algorithm` (`real --cases`, `differential`): the
/// lease real mode's short default unless a flag gives one (so that a case takes seconds), the
/// servers `nodes`, and the other flags. Refuses an algorithm real mode does not run.
pub(super) fn search_params(
    algorithm: Algorithm,
    ttl_ms: Option<u64>,
    nodes: Option<u32>,
    flags: &ParamArgs,
) -> anyhow::Result<lockcheck_core::scenario::Params> {
    lockcheck_real::support::check_algorithm(algorithm).map_err(|e| usage(e.to_string()))?;
    let mut s = Scenario::new(algorithm);
    let ttl = lease(algorithm, ttl_ms, flags)?.unwrap_or(Shape::for_algorithm(algorithm).ttl_ms);
    lockcheck_real::profile::check_lease(algorithm, ttl).map_err(|e| usage(e.to_string()))?;
    lockcheck_real::profile::set_lease(&mut s, ttl);
    s.params.nodes = nodes;
    flags.apply(algorithm, &mut s.params)?;
    Ok(s.params)
}

/// The lease of the run in ms: `--ttl-ms`, or the flag that is `algorithm`'s lease
/// (`--session-timeout-ms`, …); both given, they must agree.
fn lease(
    algorithm: Algorithm,
    ttl_ms: Option<u64>,
    flags: &ParamArgs,
) -> anyhow::Result<Option<u64>> {
    match (ttl_ms, flags.lease_ms(algorithm)) {
        (Some(a), Some(b)) if a != b => Err(usage(format!(
            "--ttl-ms {a} contradicts the lease the other flags give {} ({b} ms); give one of them",
            algorithm.name()
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

/// `HOST:PORT` as one socket address (a name is resolved; its first address is taken).
/// The host part of `HOST:PORT` (`[::1]:6379` gives `::1`).
fn host_of(endpoint: &str) -> String {
    let host = endpoint.rsplit_once(':').map_or(endpoint, |(host, _)| host);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

fn resolve(endpoint: &str) -> anyhow::Result<SocketAddr> {
    endpoint
        .to_socket_addrs()
        .map_err(|e| {
            usage(format!(
                "--endpoints: '{endpoint}': {e} (expected HOST:PORT)"
            ))
        })?
        .next()
        .ok_or_else(|| usage(format!("--endpoints: '{endpoint}' resolves to no address")))
}

/// Runs `scenario` against `servers`, and prints the verdict.
fn run(
    scenario: &Scenario,
    servers: &Servers,
    client: Option<&lockcheck_real::ClientCommand>,
    report_dir: Option<&Path>,
) -> anyhow::Result<u8> {
    if let Some(client) = client {
        lockcheck_real::client_process::check(scenario, client)
            .map_err(|e| usage(e.to_string()))?;
    }
    lockcheck_real::preflight_on(scenario, servers).map_err(|e| usage(e.to_string()))?;
    let against = match servers {
        Servers::Launched => "servers lockcheck starts".to_string(),
        Servers::Endpoints(e) => e
            .addrs
            .iter()
            .map(SocketAddr::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    };
    let lease = match lockcheck_search::cell::lease(scenario) {
        Some((name, ms)) => format!("{name} {ms} ms"),
        None => "no lease".to_string(),
    };
    say!(
        "real run: {} on {} with {} client(s), {lease}, against {against}",
        scenario.algorithm.name(),
        topology_text(scenario),
        scenario.clients,
    );
    if let Some(client) = client {
        say!(
            "  clients: processes of `{}` (protocol v{}), not lockcheck's rendition of {}",
            client.command,
            lockcheck_real::protocol::VERSION,
            scenario.algorithm.name()
        );
        if !client.keys.is_empty() {
            let names: Vec<String> = lockcheck_real::declared::names(scenario, &client.keys)
                .iter()
                .map(|n| lockcheck_core::input::clip(&n.shown()))
                .collect();
            say!(
                "  the library's own names (--client-keys): {}{}",
                names.join(", "),
                match servers {
                    Servers::Endpoints(_) => ", checked free before and removed after",
                    Servers::Launched => "",
                }
            );
        }
        if let Some(ms) = client.lease_ms {
            say!("  the library's lease (--client-lease-ms): {ms} ms; liveness is judged by it");
        }
    }
    for fault in &scenario.faults {
        say!("  {}", fault.describe());
    }
    let real = match lockcheck_real::run_with(scenario, servers, client) {
        Ok(real) => real,
        Err(e @ RealError::Interrupted(signal)) => {
            eprintln!("lockcheck: {e}");
            return Ok(signal.exit_code());
        }
        Err(e) => return Err(usage(e.to_string())),
    };
    let outcome = &real.outcome;
    let mut report = Report::of_real_run(scenario, outcome);
    report.client = real.client.clone();
    print_outcome(&report, outcome);
    if let Some(dir) = report_dir {
        let path = report.write(dir, &format!("real-{}", scenario.algorithm.name()))?;
        say!("report: {}", path.display());
        say!("timeline: {}", Report::timeline_path(&path).display());
        say!("rerun: {}", report.replay_command);
    }
    if let Servers::Endpoints(_) = servers {
        say!("lock name: {}", scenario.params.lock_key());
        for gone in &real.removed {
            say!("removed {gone}");
        }
        for kept in &real.left {
            say!("left {kept}");
        }
        if real.left.is_empty() {
            say!("nothing of the run's is left on the servers");
        }
    }
    say!(
        "{} history entries in {:.1} s; {} server process(es) started and stopped",
        outcome.history.entries.len(),
        real.elapsed.as_secs_f64(),
        real.server_pids.len()
    );
    if client.is_some() {
        say!(
            "{} client process(es) started and killed",
            real.client_pids.len()
        );
    }
    // One line: saved to a file, it reruns here (`lockcheck real --scenario FILE`, with the
    // same `--client`) or in the simulation (`lockcheck run FILE`); the run itself is not
    // byte-replayable.
    let rerun = match &real.client {
        Some(c) => format!(", with{}", c.flags()),
        None => String::new(),
    };
    say!(
        "scenario (a real run is not byte-replayable; its scenario is{rerun}): {}",
        serde_json::to_string(scenario)?
    );
    Ok(super::run::exit_code(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology_of(algorithm: Algorithm, nodes: Option<u32>, replicas: u32) -> String {
        let mut s = Scenario::new(algorithm);
        s.params.nodes = nodes;
        s.params.redis.replicas = replicas;
        topology_text(&s)
    }

    #[test]
    fn a_runs_header_names_its_servers_and_their_roles() {
        assert_eq!(
            topology_of(Algorithm::SingleRedis, None, 0),
            "redis-0 (one server)"
        );
        assert_eq!(
            topology_of(Algorithm::SingleRedis, None, 2),
            "redis-0 primary, redis-1..2 replicas, sentinel"
        );
        assert_eq!(
            topology_of(Algorithm::SingleRedis, None, 1),
            "redis-0 primary, redis-1 replica, sentinel"
        );
        assert_eq!(
            topology_of(Algorithm::Redlock, Some(3), 0),
            "redis-0..2: 3 Redlock masters"
        );
        assert_eq!(
            topology_of(Algorithm::Redlock, None, 0),
            "redis-0..4: 5 Redlock masters"
        );
        assert_eq!(
            topology_of(Algorithm::ZkSequential, Some(3), 0),
            "zk-0..2 ensemble"
        );
        assert_eq!(
            topology_of(Algorithm::EtcdMutex, Some(3), 0),
            "etcd-0..2 cluster"
        );
        assert_eq!(
            topology_of(Algorithm::MysqlRow, None, 0),
            "mysql-0 (one server)"
        );
    }
}
