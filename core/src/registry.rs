//! The algorithm registry: every lock lockcheck knows, one line each.
//!
//! An algorithm lives in its own file in `lockcheck-algorithms`, with its [`Description`] (a
//! `DESCRIPTION` constant) and its [`Registered`] implementation, which builds it from the
//! [`Settings`] every lock shares. The one line below makes it known: the scenario's
//! `algorithm` field, the CLI's values and help, the matrix rows, the checkers, the fault
//! generator and real mode all read its description from here, and both worlds build it through
//! [`AnyLock`].
//!
//! To add an algorithm on an existing backend: write its file (the lock, `DESCRIPTION`, `impl
//! Registered`), then add a line `Variant: module::path, Type<S::Store>;` to `registry!`'s list
//! at the bottom of this file. Nothing else matches on algorithm names.

use crate::scenario::{Params, Scenario};
use lockcheck_algorithms::describe::{Backend, Description, Lease, Registered, Servers, Settings};
use lockcheck_algorithms::retry::{Retry, MAX_BACKOFF};
use lockcheck_algorithms::stores::Stores;
use lockcheck_algorithms::{Env, Guard, Lock, LockError};
use std::cell::RefCell;
use std::time::Duration;

/// Declares the registry: the [`Algorithm`] enum (one variant per line, in the order lines are
/// listed, which is the matrix's row order) and [`AnyLock`], one variant holding each lock.
macro_rules! registry {
    ($s:ident; $( $(#[$doc:meta])* $variant:ident : $($module:ident)::+ , $lock:ty ; )*) => {
        /// The lock algorithm under test. Written as its user-facing name
        /// ([`Description::name`]) in scenario files and on the command line.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Algorithm {
            $( $(#[$doc])* $variant, )*
        }

        impl Algorithm {
            /// Every registered algorithm, in registry order.
            pub const ALL: &'static [Algorithm] = &[$(Algorithm::$variant),*];

            /// Every registered algorithm's name, in registry order.
            pub const NAMES: &'static [&'static str] =
                &[$(lockcheck_algorithms::$($module)::+::DESCRIPTION.name),*];

            /// What the algorithm says about itself.
            pub fn description(self) -> &'static Description {
                match self {
                    $( Algorithm::$variant => &lockcheck_algorithms::$($module)::+::DESCRIPTION, )*
                }
            }
        }

        /// The algorithm under test, built for one client over a world's stores `S`.
        pub enum AnyLock<$s: Stores> {
            $(
                #[doc = concat!("`", stringify!($variant), "`.")]
                $variant($lock),
            )*
        }

        impl<$s: Stores> AnyLock<$s> {
            /// `algorithm` for one client, from `settings`, over `stores`.
            fn build_with(
                algorithm: Algorithm,
                stores: &$s,
                settings: &Settings,
                env: &impl Env,
            ) -> AnyLock<$s> {
                match algorithm {
                    $( Algorithm::$variant => AnyLock::$variant(
                        <$lock as Registered<$s>>::build(stores, settings, env),
                    ), )*
                }
            }

            /// Acquires the lock (its read side when `shared`), waiting at most `wait`.
            pub async fn acquire<E: Env>(
                &self,
                env: &E,
                wait: Duration,
                shared: bool,
            ) -> Result<Option<Guard>, LockError> {
                match self {
                    $( AnyLock::$variant(l) => {
                        Lock::acquire(Registered::<$s>::side(l, shared), env, wait).await
                    } )*
                }
            }

            /// Releases what `guard` holds.
            pub async fn release<E: Env>(
                &self,
                env: &E,
                guard: &Guard,
                shared: bool,
            ) -> Result<bool, LockError> {
                match self {
                    $( AnyLock::$variant(l) => {
                        Lock::release(Registered::<$s>::side(l, shared), env, guard).await
                    } )*
                }
            }

            /// Keeps what `guard` holds alive until it is lost.
            pub async fn keep_alive<E: Env>(&self, env: &E, guard: &RefCell<Guard>, shared: bool) {
                match self {
                    $( AnyLock::$variant(l) => {
                        Lock::keep_alive(Registered::<$s>::side(l, shared), env, guard).await
                    } )*
                }
            }
        }
    };
}

impl Algorithm {
    /// The user-facing name.
    pub fn name(self) -> &'static str {
        self.description().name
    }

    /// The algorithms that run on lockcheck's own code alone: every one but those that need the
    /// user's scripts ([`Description::scripted`]). What the default matrix and the sweeps over
    /// the registry run.
    pub fn built_in() -> Vec<Algorithm> {
        Self::ALL
            .iter()
            .copied()
            .filter(|a| !a.description().scripted)
            .collect()
    }

    /// Looks an algorithm up by its user-facing name.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }

    /// The kind of server it runs against. Every question about the backend (which server model
    /// the simulation starts, which real server the launcher starts, how servers are named)
    /// goes through it, and every match on it is exhaustive, so an algorithm on a new backend
    /// cannot be taken for a Redis one by default.
    pub fn backend(self) -> Backend {
        self.description().backend
    }

    /// How its servers are named: `redis-N`, `zk-N`, `mysql-N`, `etcd-N` (its backend's
    /// module says).
    pub fn server_prefix(self) -> &'static str {
        crate::backend::BackendExt::server_prefix(self.backend())
    }

    /// How many servers the algorithm runs against, given the `nodes` and `replicas` parameters.
    pub fn servers(self, params: &Params) -> usize {
        match self.description().servers {
            Servers::One => params.nodes.unwrap_or(1) as usize + params.redis.replicas as usize,
            Servers::Masters { default, .. } => params.nodes.unwrap_or(default) as usize,
        }
    }

    /// What ends a silent holder's lock.
    pub fn lease(self) -> Lease {
        self.description().lease
    }

    /// How long, in ms, its lock can outlive a holder that stopped talking to the servers: the
    /// lease (`ttl_ms`); for a lease the servers hold (a session, a transaction-held lock's idle
    /// connection), its length as the backend's module says (ZooKeeper's session timeout, etcd's
    /// lease TTL, MariaDB's `wait_timeout`). A lock that never expires (a MySQL row without a
    /// TTL) uses the default TTL as its time scale. Fault spans and the liveness probe's wait are
    /// drawn around it.
    pub fn lease_ms(self, params: &Params) -> u64 {
        let default = || {
            params
                .ttl_ms_for(self)
                .unwrap_or(crate::scenario::DEFAULT_TTL_MS)
        };
        match self.lease() {
            // (A backend that holds no such lease cannot lend another's: the registry's test
            // `every_server_held_lease_has_its_backends_length` pins that each one has its own.)
            lease @ (Lease::Session | Lease::IdleConnection) => {
                crate::backend::BackendExt::server_lease_ms(self.backend(), lease, params)
                    .unwrap_or_else(default)
            }
            Lease::Ttl { .. } | Lease::None => default(),
        }
    }

    /// Whether its lock ends by time whatever the holder does: a lease, or for a transaction-held
    /// lock the server's `wait_timeout` on an idle connection. A holder that wants to keep such a
    /// lock must finish its work within that time. (A session does not: a live holder keeps it.)
    pub fn expires(self, params: &Params) -> bool {
        match self.lease() {
            Lease::IdleConnection => true,
            Lease::Ttl { .. } => params.ttl_ms_for(self).is_some(),
            Lease::Session | Lease::None => false,
        }
    }

    /// Whether the lock of a holder that went silent (crashed, paused, cut off) ends by itself:
    /// it [`expires`](Algorithm::expires), or its session does.
    pub fn ends_when_silent(self, params: &Params) -> bool {
        self.lease() == Lease::Session || self.expires(params)
    }

    /// The name and length in ms of what a fault is measured against, when a silent holder's
    /// lock ends: "TTL", "session timeout", "wait_timeout".
    pub fn lease_named(self, params: &Params) -> Option<(&'static str, u64)> {
        self.ends_when_silent(params)
            .then(|| (self.lease().name(), self.lease_ms(params)))
    }

    /// Whether the client is told how long its lock stays valid (a lease it counts down).
    pub fn reports_validity(self, params: &Params) -> bool {
        params.ttl_ms_for(self).is_some()
    }

    /// Whether clients may take it shared (readers) as well as exclusive (writers).
    pub fn has_readers(self) -> bool {
        self.description().readers
    }

    /// Whether the owner may acquire again while holding (nested acquisitions).
    pub fn reentrant(self) -> bool {
        self.description().reentrant
    }
}

impl serde::Serialize for Algorithm {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Algorithm, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Algorithm::from_name(&name)
            .ok_or_else(|| serde::de::Error::unknown_variant(&name, Algorithm::NAMES))
    }
}

impl<S: Stores> AnyLock<S> {
    /// The lock of `scenario`'s algorithm over `stores`, for the client whose environment is
    /// `env` (its randomness names the owner of the locks that have one: a (re)started client is
    /// a new process, so a new owner).
    pub fn build(scenario: &Scenario, stores: &S, env: &impl Env) -> AnyLock<S> {
        AnyLock::build_with(scenario.algorithm, stores, &settings(scenario), env)
    }
}

/// The settings `scenario`'s lock is built from: one place decides how a scenario's parameters
/// become an algorithm's configuration, so a verdict means the same thing in both worlds.
pub fn settings(scenario: &Scenario) -> Settings {
    let p = &scenario.params;
    let algorithm = scenario.algorithm;
    Settings {
        key: p.lock_key().to_string(),
        ttl: p.ttl_ms_for(algorithm).map(Duration::from_millis),
        drift_factor: p.drift_factor,
        retry: Retry {
            delay: Duration::from_millis(p.retry_delay_ms),
            count: p.retry_count,
            max_delay: max_retry_delay(scenario),
        },
        fencing: p.fencing,
        wait_replicas: (p.redis.wait_replicas > 0).then_some((
            p.redis.wait_replicas,
            Duration::from_millis(p.redis.wait_timeout_ms()),
        )),
        replicas: p.redis.replicas,
        queue_timeout: Duration::from_millis(p.redis.queue_timeout_ms()),
        suspended_is_lost: p.zookeeper.suspended_is_lost,
        script: p.redis.script.clone(),
        variant: p.variant.clone(),
    }
}

/// The longest a client backs off after attempts that got no answer
/// ([`lockcheck_algorithms::retry`]): a connection manager's 30 s, but at most half the lease,
/// so that a waiter does not sit out a free lock for long after an outage ends (the liveness
/// check allows a lease of slack for retries), and never less than the retry delay.
pub fn max_retry_delay(scenario: &Scenario) -> Duration {
    let half_lease = Duration::from_millis(scenario.algorithm.lease_ms(&scenario.params) / 2);
    half_lease
        .min(MAX_BACKOFF)
        .max(Duration::from_millis(scenario.params.retry_delay_ms))
}

registry! { S;
    /// One Redis server, `SET NX PX` + Lua compare-and-delete.
    SingleRedis: redis::single, lockcheck_algorithms::redis::single::SingleRedis<S::Redis>;
    /// Redlock over N independent Redis masters.
    Redlock: redis::redlock, lockcheck_algorithms::redis::redlock::Redlock<S::Redis>;
    /// Redisson's reentrant RLock: a hash `{owner → count}` on one Redis.
    RedisReentrant: redis::reentrant, lockcheck_algorithms::redis::reentrant::RedisReentrant<S::Redis>;
    /// A fair (FIFO) reentrant lock (seed 003; Redisson's RedissonFairLock).
    RedisFair: redis::fair, lockcheck_algorithms::redis::fair::RedisFair<S::Redis>;
    /// `SET NX PX`, released by a plain `DEL` of whatever holds the key (known unsafe).
    RedisPlainDel: redis::plain_del, lockcheck_algorithms::redis::plain_del::RedisPlainDel<S::Redis>;
    /// The user's own lock: acquire, release and extend are Lua scripts from a file.
    RedisScript: redis::script, lockcheck_algorithms::redis::script::RedisScript<S::Redis>;
    /// Curator's InterProcessMutex: ephemeral sequential nodes on one ZooKeeper server.
    ZkSequential: zookeeper::sequential, lockcheck_algorithms::zookeeper::ZkSequential<S::Zk>;
    /// One ephemeral node that every waiter watches (seed 001's herd-effect lock).
    ZkHerd: zookeeper::herd, lockcheck_algorithms::zookeeper::ZkHerd<S::Zk>;
    /// Curator's InterProcessReadWriteLock: readers and writers in one sequential queue.
    ZkRwLock: zookeeper::rwlock, lockcheck_algorithms::zookeeper::ZkReadWriteLock<std::rc::Rc<S::Zk>>;
    /// A reentrant lock row taken in short transactions with `SELECT … FOR UPDATE` (seed 000).
    MysqlRow: mysql::row, lockcheck_algorithms::mysql::MysqlRow<S::Sql>;
    /// Inserting a row under a unique key is the lock, deleting it the unlock (seed 001).
    MysqlUnique: mysql::unique, lockcheck_algorithms::mysql::MysqlUnique<S::Sql>;
    /// The row lock of an open transaction is the lock; it ends at commit.
    MysqlForUpdateHeld: mysql::for_update_held, lockcheck_algorithms::mysql::MysqlForUpdateHeld<S::Sql>;
    /// etcd's concurrency.Mutex: keys under a prefix, the lowest create revision holds.
    EtcdMutex: etcd::mutex, lockcheck_algorithms::etcd::EtcdMutex<S::Etcd>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendExt;
    use lockcheck_algorithms::describe::Fencing;

    #[test]
    fn every_name_is_unique_and_reads_back_as_its_algorithm() {
        for (i, &a) in Algorithm::ALL.iter().enumerate() {
            assert_eq!(Algorithm::NAMES[i], a.name());
            assert_eq!(Algorithm::from_name(a.name()), Some(a));
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.name()));
            assert_eq!(serde_json::from_str::<Algorithm>(&json).unwrap(), a);
        }
        let e = serde_json::from_str::<Algorithm>("\"paxos\"").unwrap_err();
        assert!(e.to_string().contains("paxos") && e.to_string().contains("single-redis"));
    }

    /// What the scenario's validation makes of each description: a default scenario is valid,
    /// and each capability the description denies is refused by name.
    #[test]
    fn validation_follows_each_description() {
        for &a in Algorithm::ALL {
            let d = a.description();
            let valid = |f: &dyn Fn(&mut Scenario)| {
                let mut s = crate::scenario::runnable(a);
                f(&mut s);
                s.validate()
            };
            assert_eq!(valid(&|_| {}), Ok(()), "{}", d.name);
            let fencing = valid(&|s| s.params.fencing = true);
            assert_eq!(
                fencing.is_ok(),
                d.fencing == Fencing::Token,
                "{}: {fencing:?}",
                d.name
            );
            let watchdog = valid(&|s| s.params.watchdog = true);
            assert_eq!(watchdog.is_ok(), d.renews, "{}: {watchdog:?}", d.name);
            let replicas = valid(&|s| s.params.redis.replicas = 1);
            assert_eq!(replicas.is_ok(), d.replicas, "{}: {replicas:?}", d.name);
            let readers = valid(&|s| s.workload.read_fraction = Some(0.5));
            assert_eq!(readers.is_ok(), d.readers, "{}: {readers:?}", d.name);
            let nested = valid(&|s| s.workload.reentrant_depth = 2);
            assert_eq!(nested.is_ok(), d.reentrant, "{}: {nested:?}", d.name);
            let ttl = valid(&|s| s.params.ttl_ms = Some(5_000));
            assert_eq!(
                ttl.is_ok(),
                matches!(d.lease, Lease::Ttl { .. }),
                "{}: {ttl:?}",
                d.name
            );
            if let Servers::Masters { min, .. } = d.servers {
                assert!(valid(&|s| s.params.nodes = Some(min - 1)).is_err());
                assert!(valid(&|s| s.params.nodes = Some(min + 1)).is_err(), "even");
            } else if d.backend.check_nodes(d.name, 3).is_ok() {
                // One service of several members, as the backend's module says: a standalone
                // server (one etcd member) or an odd ensemble (cluster).
                assert_eq!(valid(&|s| s.params.nodes = Some(3)), Ok(()), "{}", d.name);
                assert!(valid(&|s| s.params.nodes = Some(2)).is_err(), "{}", d.name);
            } else {
                assert!(valid(&|s| s.params.nodes = Some(3)).is_err(), "{}", d.name);
            }
        }
    }

    /// Every variant an algorithm lists is accepted by name and reaches its settings; any other
    /// name, and any name for an algorithm that lists none, is refused naming the known ones.
    #[test]
    fn a_variant_is_one_the_description_lists() {
        for &a in Algorithm::ALL {
            let d = a.description();
            let mut s = crate::scenario::runnable(a);
            for v in d.variants {
                s.params.variant = Some(v.name.to_string());
                assert_eq!(s.validate(), Ok(()), "{}: {}", d.name, v.name);
                assert_eq!(settings(&s).variant.as_deref(), Some(v.name));
            }
            s.params.variant = Some("no-such-version".into());
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains("no-such-version"), "{e}");
            if d.variants.is_empty() {
                assert!(e.contains("has no library variants"), "{e}");
            } else {
                assert!(d.variants.iter().all(|v| e.contains(v.name)), "{e}");
            }
            // Not given, the default: nothing written, so older files read the same.
            s.params.variant = None;
            assert!(!serde_json::to_string(&s.params)
                .unwrap()
                .contains("variant"));
        }
    }

    #[test]
    fn the_lease_is_what_the_description_says_ends_a_silent_holder() {
        for &a in Algorithm::ALL {
            let p = Params::default();
            let named = a.lease_named(&p).map(|(name, _)| name);
            let expected = match a.lease() {
                Lease::Ttl { optional: false } => Some("TTL"),
                Lease::Session => Some("session timeout"),
                Lease::IdleConnection => Some("wait_timeout"),
                Lease::Ttl { optional: true } | Lease::None => None,
            };
            assert_eq!(named, expected, "{}", a.name());
        }
    }
}
