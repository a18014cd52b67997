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

use lockcheck_algorithms::describe::{Backend, Description, Lease, Registered, Settings};
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
            /// `algorithm` for one client, from `settings`, over `stores` (a scenario's
            /// settings are made in [`crate::workload`], which knows scenarios; this list does
            /// not).
            pub fn build_with(
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

    /// What ends a silent holder's lock.
    pub fn lease(self) -> Lease {
        self.description().lease
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
}
