//! Ready-made scenarios for `lockcheck real --faults F`: a fault profile as one concrete story,
//! timed from the lease so that its verdict does not hang on the machine's timing.
//!
//! The lease (TTL below) is the TTL of a Redis lock, the session timeout of a ZooKeeper lock
//! (which has no TTL: its node lives as long as the holder's session) and the session lease's TTL
//! of the etcd lock (whole seconds).
//!
//! A real run cannot search fault schedules the way `explore` does (each case takes real seconds),
//! so each profile is the one schedule that tells its story. The stories are named as `explore`
//! names the fault families they come from (`real --cases` draws from those families with the
//! same names); the families with no story of their own (`clock-drift`, `crash-delayed-restart`,
//! `delay`) are searched with `real --cases`:
//!
//! - `none`: the clients contend for the lock, each holding it for a quarter of the TTL, with no
//!   fault. Any violation is a bug.
//! - `pause`: the holder is paused past its lease. `client-0` gets the lock first: every other
//!   client is held back (paused) for the first TTL/10. At TTL/5, inside its critical section
//!   (it works for TTL/2), `client-0` is paused for 1.05 × TTL, until 1.25 × TTL: the lease ends at
//!   TTL on the server, another client takes the lock and enters, and `client-0` wakes up and
//!   touches the resource while that client is still inside (it works for TTL/2 as well).
//!   The retry delay is TTL/10 at most, so the next client is in well before `client-0` wakes.
//!   ZooKeeper: the server ends a silent session between its timeout and a tick (2 s) later,
//!   counted from when it last heard from the client, which was at TTL/5 at the latest; the next
//!   client in the queue is woken by its watch on the holder's node at once. So `client-0` is
//!   paused from TTL/5 until `free + TTL/4`, where `free = TTL/5 + TTL + tick` is the latest the
//!   lock can come free, and everyone works for as long as it takes the next holder (in from TTL
//!   on) to still be inside when `client-0` wakes: `free + TTL/4 − TTL + TTL/4`.
//!   etcd: the same, with `free = TTL/5 + TTL + 500 ms`: the member counts the lease from the
//!   last keep-alive it answered (at TTL/5 at the latest) and its lessor looks every 500 ms.
//! - `partition`, for the session locks (ZooKeeper, etcd): the holder is cut off from everything
//!   (its server and the resource) at TTL/5 until `free + TTL/4`, and keeps working without
//!   knowing: it works TTL/4 past the heal, so its last access reaches the resource after the
//!   heal, while the next holder, in since the session expired, is still inside.
//!   For the other locks (Redis, MySQL), whose holder finishes within its lease, the story is
//!   late delivery: the holder is cut off from everything at TTL/5 until 1.25 × TTL (the pause
//!   story's times) by a partition that holds messages, as TCP does. Its last access, sent at
//!   TTL/2 inside its lease, waits in the network and reaches the resource at the heal, while
//!   the next holder (in since the lease ended at TTL) is inside. A fencing token older than the
//!   next holder's is refused there.
//! - `clock-jump`: for the Redis locks, the wall clock of a server that holds `client-0`'s key jumps
//!   forward by 2 × TTL at 3 TTL/10, while `client-0` works (until 3 TTL/4); the server expires
//!   the key at once, and another client takes the lock. For Redlock (3 masters) this is
//!   Kleppmann's story: `redis-2` is down while `client-0` acquires (crashed at 0, restarted
//!   empty at TTL/5), so `client-0`'s quorum is `redis-0` + `redis-1`; `redis-1`'s clock jumps,
//!   and the next client's quorum is `redis-1` + `redis-2`. For the other locks, the one
//!   server's wall clock jumps forward by two leases at 3 TTL/10, while `client-0` is inside:
//!   `mysql-row`'s lease is judged by the database's clock (UNSAFE), a ZooKeeper session and
//!   MariaDB's `wait_timeout` by monotonic clocks (safe). An etcd member's clock cannot be moved
//!   in real mode (`support::check` refuses it).
//! - `crash-restart` (Redis locks, no persistence; `restart`, its old name, is still read): a
//!   server that holds `client-0`'s key is killed and started again at once, empty, at
//!   3 TTL/10. For Redlock (3 masters) this is seed 002's story: `redis-0` is down while
//!   `client-0` acquires (crashed at 0, restarted at TTL/5), so its quorum is `redis-1` +
//!   `redis-2`; `redis-1` restarts empty, and the next client's quorum is `redis-0` + `redis-1`.
//! - `failover` (the Redis locks that run on a primary with replicas: `single-redis`,
//!   `redis-reentrant`, `redis-fair`): seed 001's high-availability story on a primary and two
//!   replicas under Sentinel, whose replication links lag by [`FAILOVER_LAG_MS`]. `client-0`
//!   takes the lock at once; at a third of the lag, before any replica can have the key, the
//!   primary `redis-0` is killed, and 100 ms later Sentinel is asked to promote `redis-1` (it
//!   takes about a second; the simulation's failover is instantaneous, and real mode's later
//!   actions wait for Sentinel's). The other clients are held back until just after the
//!   failover, then take the lock from the new primary, which never had `client-0`'s key, while
//!   `client-0` works on (it works 3/4 of the TTL, within its lease): two holders, UNSAFE. With
//!   `wait_replicas` ([`fit_story`] gives `WAIT` a timeout the lagging link can answer in),
//!   `client-0` never believes it holds a lock no replica has: safe. The lease must outlast the
//!   real failover: the story's default TTL is [`FAILOVER_TTL_MS`].
//!
//! In each story but `none`, `client-0` takes the lock first: every other client is held back
//! (paused) for the first TTL/10.
//!
//! The "TTL" of a story is the time after which the server ends a lock its holder no longer
//! talks about: the lease (`ttl_ms`) of the Redis locks and of `mysql-row`, and for
//! `mysql-for-update-held` the server's `wait_timeout` (`wait_timeout_ms`): the holder's
//! connection sits idle from its acquisition, so the server closes it, rolls its transaction back
//! and hands the row to the waiter whose `SELECT … FOR UPDATE` has been blocked on it — the
//! holder's pause of 1.05 × TTL from TTL/5 keeps its connection idle past that. `mysql-unique` has
//! no lease at all: its stories run with the TTL only as their time scale (and the pause, which
//! nothing expires, breaks nothing).

use lockcheck_algorithms::describe::{Backend, Lease, Servers};
use lockcheck_core::scenario::DEFAULT_TICK_TIME_MS;
use lockcheck_core::scenario::{Algorithm, Fault, Persistence, Scenario, ScenarioError, Workload};

/// A fault profile of `lockcheck real`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// No fault.
    None,
    /// The first holder is paused longer than the lease while inside its critical section.
    Pause,
    /// The first holder is cut off longer than the lease while inside its critical section.
    Partition,
    /// A server's wall clock jumps forward past the first holder's lease.
    ClockJump,
    /// A server restarts empty under the first holder.
    Restart,
    /// The primary dies before its replicas have the first holder's key, and Sentinel promotes
    /// one.
    Failover,
}

impl Profile {
    /// Every profile, by name: `explore`'s name of the fault family whose story it tells.
    pub const ALL: &'static [(Profile, &'static str)] = &[
        (Profile::None, "none"),
        (Profile::Pause, "pause"),
        (Profile::Partition, "partition"),
        (Profile::ClockJump, "clock-jump"),
        (Profile::Restart, "crash-restart"),
        (Profile::Failover, "failover"),
    ];

    /// Older names still read, with the name each stands for: `restart` was the restart story's
    /// name before real mode took explore's (`crash-restart`).
    pub const ALIASES: &'static [(&'static str, &'static str)] = &[("restart", "crash-restart")];

    /// The profile called `name` (or an alias of it, [`Profile::ALIASES`]).
    pub fn from_name(name: &str) -> Option<Profile> {
        let name = canonical_name(name).unwrap_or(name);
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(p, _)| *p)
    }

    /// The profile's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .expect("every profile is named")
    }
}

/// The name an alias stands for ([`Profile::ALIASES`]): `restart` is `crash-restart`, in a story
/// (`real --faults`) and in a search (`real --cases --faults`) alike. `None` for any other name.
pub fn canonical_name(name: &str) -> Option<&'static str> {
    Profile::ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map(|(_, canonical)| *canonical)
}

/// The size of a run built from a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Clients, `client-0` … (the pause story needs at least 2).
    pub clients: u32,
    /// The lock's TTL in ms: its lease, or for `mysql-for-update-held` the server's
    /// `wait_timeout` (a whole number of seconds against a real MariaDB).
    pub ttl_ms: u64,
    /// Clients stop acquiring after this long, in ms.
    pub duration_ms: u64,
    /// Servers (Redlock masters); `None`: the algorithm's default.
    pub nodes: Option<u32>,
    /// Seed of the clients' randomness (tokens, retry jitter).
    pub seed: u64,
}

impl Default for Shape {
    /// Three clients, a 2 s TTL (short, so a real run takes seconds), at most 30 s.
    fn default() -> Self {
        Shape {
            clients: 3,
            ttl_ms: 2_000,
            duration_ms: 30_000,
            nodes: None,
            seed: 0,
        }
    }
}

impl Shape {
    /// The default shape for `algorithm`: a ZooKeeper lock's lease is the shortest session
    /// timeout a server with the default tick grants (4 s, two ticks).
    pub fn for_algorithm(algorithm: Algorithm) -> Shape {
        let mut shape = Shape::default();
        if algorithm.backend() == Backend::ZooKeeper {
            shape.ttl_ms = 2 * DEFAULT_TICK_TIME_MS;
        }
        shape
    }

    /// The default shape for `profile`'s story of `algorithm`: [`Shape::for_algorithm`], with a
    /// lease that outlasts a real failover for the `failover` story.
    pub fn for_story(algorithm: Algorithm, profile: Profile) -> Shape {
        let mut shape = Shape::for_algorithm(algorithm);
        if profile == Profile::Failover {
            shape.ttl_ms = FAILOVER_TTL_MS;
        }
        shape
    }
}

/// The `failover` story's replicas: a primary and two replicas, one of which Sentinel promotes.
/// The story is told with these; `real` refuses a `--replicas` that contradicts them rather than
/// tell another story under its name.
pub const FAILOVER_REPLICAS: u32 = 2;

/// The replicas `profile`'s story is told with, when it sets them (`failover`); the other stories
/// run with what the parameters say (none unless `--replicas` is given).
pub fn story_replicas(profile: Profile) -> Option<u32> {
    (profile == Profile::Failover).then_some(FAILOVER_REPLICAS)
}

/// The `failover` story's replication lag: the delay of each replication link, each way.
pub const FAILOVER_LAG_MS: u64 = 300;
/// The `failover` story's default TTL: `client-0` works 3/4 of it, which must outlast the
/// failover Sentinel performs (about a second, a few on a busy machine) and the next client's
/// acquisition.
pub const FAILOVER_TTL_MS: u64 = 8_000;

/// Gives the `failover` story's lock a `WAIT` it can succeed with, once `wait_replicas` is set
/// (by a flag, after the story was built): a timeout of twice the lag (a replica hears of the
/// write after the lag, and its acknowledgement takes as long back) and 400 ms more, unless one
/// was given. Other stories are left as they are.
pub fn fit_story(profile: Profile, scenario: &mut Scenario) {
    let redis = &mut scenario.params.redis;
    if profile == Profile::Failover && redis.wait_replicas > 0 && redis.wait_timeout_ms.is_none() {
        redis.wait_timeout_ms = Some(2 * redis.replication_lag_ms() + 400);
    }
}

/// How late after its deadline etcd's lessor may find a lease expired: it looks every 500 ms.
const ETCD_EXPIRY_CHECK_MS: u64 = 500;

/// The latest time after the start at which the lock of a holder that went silent at TTL/5
/// comes free (before the next holder enters), in ms. A session lock's server counts from the
/// last it heard of the holder (at TTL/5 at the latest) and ends the session at its next check
/// (ZooKeeper's tick, etcd's lessor loop); a lease counts from the acquisition.
fn free_by(algorithm: Algorithm, lease: u64, retry_delay: u64) -> u64 {
    match algorithm.backend() {
        Backend::ZooKeeper => lease / 5 + lease + DEFAULT_TICK_TIME_MS,
        Backend::Etcd => lease / 5 + lease + ETCD_EXPIRY_CHECK_MS,
        Backend::Redis | Backend::Mysql => lease + retry_delay,
    }
}

/// One critical section per client, `hold_ms` long.
fn story_workload(hold_ms: u64) -> Workload {
    Workload {
        acquisitions_per_client: 1,
        hold_ms,
        think_ms: 100,
        ..Workload::default()
    }
}

/// Every client but `client-0` paused for the first TTL/10, so that `client-0` holds the lock
/// first; a story needs at least one other client to take the lock meanwhile.
fn hold_back_others(shape: &Shape, story: &str) -> Result<Vec<Fault>, ScenarioError> {
    if shape.clients < 2 {
        return Err(ScenarioError::Invalid(format!(
            "clients: the {story} story needs at least 2 clients (one to hold the lock, one to \
             take it meanwhile)"
        )));
    }
    Ok(Fault::hold_backs(shape.clients, (shape.ttl_ms / 10).max(1)))
}

/// Sets what ends a silent holder's lock in `scenario` to `ms`: the lease (`ttl_ms`) of the Redis
/// locks and of `mysql-row`, the session timeout of the ZooKeeper locks, the session lease of
/// the etcd lock (in whole seconds, rounded up: what etcd takes), the server's `wait_timeout`
/// for `mysql-for-update-held`. `mysql-unique` has none, and is left alone. (What `--ttl-ms`
/// means, for a profile and for a scenario file alike.)
pub fn set_lease(scenario: &mut Scenario, ms: u64) {
    let p = &mut scenario.params;
    match scenario.algorithm.lease() {
        Lease::Session if scenario.algorithm.backend() == Backend::Etcd => {
            p.etcd.lease_ttl_s = Some(ms.div_ceil(1_000))
        }
        Lease::Session => p.zookeeper.session_timeout_ms = Some(ms),
        Lease::IdleConnection => p.mysql.wait_timeout_ms = Some(ms),
        Lease::None => {}
        Lease::Ttl { .. } => p.ttl_ms = Some(ms),
    }
}

/// Whether `ttl_ms` can be `algorithm`'s lease against real servers: etcd grants leases in
/// whole seconds.
pub fn check_lease(algorithm: Algorithm, ttl_ms: u64) -> Result<(), ScenarioError> {
    if algorithm.backend() == Backend::Etcd && !ttl_ms.is_multiple_of(1_000) {
        return Err(ScenarioError::Invalid(format!(
            "--ttl-ms: etcd grants leases in whole seconds; {ttl_ms} ms is not (give a multiple \
             of 1000)"
        )));
    }
    Ok(())
}

/// The scenario telling `profile`'s story for `algorithm` at `shape`, validated.
pub fn scenario(
    algorithm: Algorithm,
    profile: Profile,
    shape: &Shape,
) -> Result<Scenario, ScenarioError> {
    scenario_scripted(algorithm, profile, shape, None)
}

/// [`scenario`], for a lock that runs the user's scripts (`redis-script`): `script` is
/// embedded before the scenario is validated, which refuses such a lock without them.
pub fn scenario_scripted(
    algorithm: Algorithm,
    profile: Profile,
    shape: &Shape,
    script: Option<lockcheck_core::scenario::UserScript>,
) -> Result<Scenario, ScenarioError> {
    // The stories do arithmetic on the TTL: bound it (and the run) before any of it.
    use lockcheck_core::limits;
    let invalid = ScenarioError::Invalid;
    limits::positive_ms("--ttl-ms", shape.ttl_ms).map_err(invalid)?;
    limits::positive_ms("--duration-ms", shape.duration_ms).map_err(invalid)?;
    let ttl = shape.ttl_ms;
    check_lease(algorithm, ttl)?;
    let mut s = Scenario::new(algorithm);
    s.params.redis.script = script;
    s.clients = shape.clients;
    s.duration_ms = shape.duration_ms;
    s.seed = shape.seed;
    set_lease(&mut s, ttl);
    s.params.nodes = shape.nodes;
    s.params.retry_delay_ms = (ttl / 10).clamp(1, 200);
    let free = free_by(algorithm, ttl, s.params.retry_delay_ms);
    match profile {
        Profile::None => {
            s.workload = Workload {
                acquisitions_per_client: 3,
                hold_ms: ttl / 4,
                think_ms: 100,
                ..Workload::default()
            };
        }
        Profile::Pause => {
            let (wake, hold) = if algorithm.lease() == Lease::Session {
                let wake = free + ttl / 4;
                (wake, wake - ttl + ttl / 4)
            } else {
                (ttl * 5 / 4, ttl / 2)
            };
            s.workload = story_workload(hold);
            s.faults = hold_back_others(shape, "pause")?;
            s.faults.push(Fault::Pause {
                at_ms: ttl / 5,
                node: "client-0".into(),
                for_ms: wake - ttl / 5,
            });
        }
        Profile::Partition if algorithm.lease() == Lease::Session => {
            let heal = free + ttl / 4;
            s.workload = story_workload(heal + ttl / 4);
            s.faults = hold_back_others(shape, "partition")?;
            s.faults.push(Fault::Partition {
                at_ms: ttl / 5,
                isolate: vec!["client-0".into()],
                for_ms: heal - ttl / 5,
                hold: false,
                from: None,
            });
        }
        Profile::Partition => {
            // The pause story's times, with the network holding client-0's messages instead of
            // its process stopping: its last access, sent inside its lease, arrives at the heal.
            s.workload = story_workload(ttl / 2);
            s.faults = hold_back_others(shape, "partition")?;
            s.faults.push(Fault::Partition {
                at_ms: ttl / 5,
                isolate: vec!["client-0".into()],
                for_ms: ttl * 5 / 4 - ttl / 5,
                hold: true,
                from: None,
            });
        }
        Profile::Failover => {
            if !algorithm.description().replicas {
                let told: Vec<&str> = Algorithm::ALL
                    .iter()
                    .filter(|a| a.description().replicas)
                    .map(|a| a.name())
                    .collect();
                return Err(ScenarioError::Invalid(format!(
                    "the failover story is told for the locks on a Redis primary with replicas \
                     ({}), not {}",
                    told.join(", "),
                    algorithm.name()
                )));
            }
            let lag = FAILOVER_LAG_MS;
            s.params.redis.replicas = FAILOVER_REPLICAS;
            s.params.redis.replication_lag_ms = Some(lag);
            // Room for a WAIT of twice the lag (`fit_story`), on the same scenario with or
            // without it.
            s.params.request_timeout_ms = 2 * lag + 1_000;
            let crash = lag / 3;
            let failover = crash + 100;
            s.workload = story_workload(ttl * 3 / 4);
            s.faults = hold_back_others(shape, "failover")?;
            for fault in &mut s.faults {
                if let Fault::Pause { for_ms, .. } = fault {
                    *for_ms = failover + 50;
                }
            }
            s.faults.push(Fault::Crash {
                at_ms: crash,
                node: "redis-0".into(),
                scope: lockcheck_core::scenario::CrashScope::Process,
            });
            s.faults.push(Fault::Failover {
                at_ms: failover,
                node: "redis-1".into(),
            });
        }
        Profile::ClockJump if algorithm.backend() != Backend::Redis => {
            // One server: its wall clock jumps two leases forward while client-0 is inside.
            s.workload = story_workload(ttl * 3 / 4);
            s.faults = hold_back_others(shape, profile.name())?;
            s.faults.push(Fault::ClockJump {
                at_ms: ttl * 3 / 10,
                node: format!("{}-0", algorithm.server_prefix()),
                by_ms: 2 * ttl as i64,
            });
        }
        Profile::ClockJump | Profile::Restart => {
            let story = profile.name();
            if algorithm.backend() != Backend::Redis {
                return Err(ScenarioError::Invalid(format!(
                    "the {story} story is told for the Redis locks (not {})",
                    algorithm.name()
                )));
            }
            s.workload = story_workload(ttl * 3 / 4);
            s.faults = hold_back_others(shape, story)?;
            // The server that loses client-0's key, and for Redlock the one that is down while
            // client-0 acquires (so that it is empty for the next client).
            let (victim, absent) =
                if matches!(algorithm.description().servers, Servers::Masters { .. }) {
                    if shape.nodes.is_some_and(|n| n != 3) {
                        return Err(ScenarioError::Invalid(format!(
                            "nodes: the Redlock {story} story is told with 3 masters"
                        )));
                    }
                    s.params.nodes = Some(3);
                    let absent = if profile == Profile::ClockJump {
                        "redis-2"
                    } else {
                        "redis-0"
                    };
                    ("redis-1", Some(absent))
                } else {
                    ("redis-0", None)
                };
            if let Some(absent) = absent {
                s.faults.push(Fault::Crash {
                    at_ms: 0,
                    node: absent.into(),
                    scope: lockcheck_core::scenario::CrashScope::Process,
                });
                s.faults.push(Fault::Restart {
                    at_ms: ttl / 5,
                    node: absent.into(),
                });
            }
            let at_ms = ttl * 3 / 10;
            if profile == Profile::ClockJump {
                s.faults.push(Fault::ClockJump {
                    at_ms,
                    node: victim.into(),
                    by_ms: 2 * ttl as i64,
                });
            } else {
                s.params.persistence = Some(Persistence::None);
                s.params.restart_delay_ms = 0;
                s.faults.push(Fault::Crash {
                    at_ms,
                    node: victim.into(),
                    scope: lockcheck_core::scenario::CrashScope::Process,
                });
                s.faults.push(Fault::Restart {
                    at_ms,
                    node: victim.into(),
                });
            }
        }
    }
    s.validate()?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_outlasts_the_lease_and_ends_inside_the_next_holders_section() {
        let s = scenario(Algorithm::SingleRedis, Profile::Pause, &Shape::default()).unwrap();
        let Some(Fault::Pause { at_ms, for_ms, .. }) = s.faults.last() else {
            panic!("the holder's pause comes last: {:?}", s.faults);
        };
        let ttl = s.algorithm.lease_ms(&s.params);
        assert!(*for_ms > ttl, "the pause outlasts the TTL");
        let wakes = at_ms + for_ms;
        let next_enters_by = ttl + s.params.retry_delay_ms;
        let next_leaves_after = ttl + s.workload.hold_ms;
        assert!(next_enters_by < wakes && wakes < next_leaves_after);
    }

    #[test]
    fn the_redlock_stories_need_three_masters_and_a_redis_lock() {
        let mut shape = Shape::default();
        let s = scenario(Algorithm::Redlock, Profile::ClockJump, &shape).unwrap();
        assert_eq!(s.params.nodes, Some(3));
        shape.nodes = Some(5);
        assert!(scenario(Algorithm::Redlock, Profile::Restart, &shape).is_err());
        let e = scenario(Algorithm::MysqlRow, Profile::Restart, &Shape::default()).unwrap_err();
        assert!(e.to_string().contains("Redis"), "{e}");
    }

    #[test]
    fn a_zookeeper_holder_wakes_after_its_session_can_have_ended_and_inside_the_next_section() {
        let shape = Shape::for_algorithm(Algorithm::ZkSequential);
        let s = scenario(Algorithm::ZkSequential, Profile::Pause, &shape).unwrap();
        let session = s.params.zookeeper.session_timeout_ms();
        assert_eq!(session, 4_000);
        assert_eq!(s.params.ttl_ms, None, "a ZooKeeper lock has no TTL");
        let Some(Fault::Pause { at_ms, for_ms, .. }) = s.faults.last() else {
            panic!("the holder's pause comes last: {:?}", s.faults);
        };
        let wakes = at_ms + for_ms;
        // Its last word to the server was at the pause at the latest; the server ends the
        // session within a tick after the timeout.
        let latest_expiry = at_ms + session + DEFAULT_TICK_TIME_MS;
        assert!(latest_expiry < wakes);
        // The next holder enters after the session timeout at the earliest and is still inside.
        assert!(wakes < session + s.workload.hold_ms);
        assert!(
            s.workload.hold_ms > *at_ms,
            "the holder is inside when paused"
        );
    }

    #[test]
    fn a_partitioned_holder_touches_the_resource_after_the_heal_while_the_next_is_inside() {
        let s = scenario(
            Algorithm::SingleRedis,
            Profile::Partition,
            &Shape::for_algorithm(Algorithm::SingleRedis),
        )
        .unwrap();
        let Some(Fault::Partition {
            at_ms,
            for_ms,
            hold,
            ..
        }) = s.faults.last()
        else {
            panic!("the partition comes last: {:?}", s.faults);
        };
        // A TTL lock's holder sends its last access inside its lease; the network holds it past
        // the lease, into the next holder's section.
        let ttl = s.algorithm.lease_ms(&s.params);
        assert!(*hold && s.workload.hold_ms < ttl);
        let heal = at_ms + for_ms;
        assert!(ttl + s.params.retry_delay_ms < heal && heal < ttl + s.workload.hold_ms);
        for algorithm in [Algorithm::ZkSequential, Algorithm::ZkHerd] {
            let shape = Shape::for_algorithm(algorithm);
            let s = scenario(algorithm, Profile::Partition, &shape).unwrap();
            let lease = s.algorithm.lease_ms(&s.params);
            let Some(Fault::Partition { at_ms, for_ms, .. }) = s.faults.last() else {
                panic!("the partition comes last: {:?}", s.faults);
            };
            let heal = at_ms + for_ms;
            let free = free_by(algorithm, lease, s.params.retry_delay_ms);
            assert!(free < heal, "{algorithm:?}");
            // client-0 entered at once; its last access comes after the heal…
            assert!(s.workload.hold_ms > heal);
            // …while the next holder (in between the lease and `free`) is still inside.
            assert!(free < s.workload.hold_ms, "{algorithm:?}");
        }
    }

    #[test]
    fn the_mysql_stories_use_the_servers_own_timeout_as_their_ttl() {
        for algorithm in [
            Algorithm::MysqlRow,
            Algorithm::MysqlUnique,
            Algorithm::MysqlForUpdateHeld,
        ] {
            for profile in [Profile::None, Profile::Pause] {
                let s = scenario(algorithm, profile, &Shape::default()).unwrap();
                assert_eq!(
                    s.algorithm.lease_ms(&s.params) == 2_000,
                    algorithm != Algorithm::MysqlUnique
                );
            }
        }
        let s = scenario(
            Algorithm::MysqlForUpdateHeld,
            Profile::Pause,
            &Shape::default(),
        )
        .unwrap();
        assert_eq!(s.params.mysql.wait_timeout_ms, Some(2_000));
        assert_eq!(s.params.ttl_ms, None);
    }

    #[test]
    fn profiles_round_trip_by_name() {
        for &(p, name) in Profile::ALL {
            assert_eq!(Profile::from_name(name), Some(p));
            assert_eq!(p.name(), name);
        }
        assert_eq!(Profile::from_name("clock-drift"), None);
        // explore's name of the family, and the story's old name.
        assert_eq!(Profile::from_name("crash-restart"), Some(Profile::Restart));
        assert_eq!(Profile::from_name("restart"), Some(Profile::Restart));
        assert_eq!(canonical_name("restart"), Some("crash-restart"));
        for &(p, name) in Profile::ALL {
            if p != Profile::None {
                assert!(
                    lockcheck_core::profile::FaultProfile::parse_list(name).is_ok(),
                    "{name} is a name explore takes too"
                );
            }
        }
    }

    #[test]
    fn the_failover_story_kills_the_primary_before_its_replicas_can_have_the_key() {
        let shape = Shape::for_story(Algorithm::SingleRedis, Profile::Failover);
        let mut s = scenario(Algorithm::SingleRedis, Profile::Failover, &shape).unwrap();
        let lag = s.params.redis.replication_lag_ms();
        let crash = s.faults.iter().find_map(|f| match f {
            Fault::Crash { at_ms, node, .. } if node == "redis-0" => Some(*at_ms),
            _ => None,
        });
        assert!(crash.is_some_and(|c| c < lag), "{:?}", s.faults);
        // client-0 works well past the failover, within its lease.
        let ttl = s.algorithm.lease_ms(&s.params);
        assert!(s.workload.hold_ms < ttl && s.workload.hold_ms > 4_000);
        fit_story(Profile::Failover, &mut s);
        assert_eq!(s.params.redis.wait_timeout_ms, None, "no WAIT, no timeout");
        s.params.redis.wait_replicas = 1;
        fit_story(Profile::Failover, &mut s);
        let wait = s.params.redis.wait_timeout_ms.unwrap();
        assert!(wait > 2 * lag && wait < s.params.request_timeout_ms);
        s.validate().unwrap();
        let e = scenario(Algorithm::Redlock, Profile::Failover, &shape).unwrap_err();
        assert!(e.to_string().contains("single-redis"), "{e}");
    }
}
