//! A world's connections to its servers, as the algorithms' store traits.
//!
//! The simulator implements it over its simulated servers, real mode over connections to real
//! ones; an algorithm asks for the stores it needs, once, when it is built
//! ([`crate::describe::Registered::build`]). A new backend adds its store trait here.

use crate::etcd::store::EtcdStore;
use crate::mysql::store::SqlStore;
use crate::redis::store::RedisStore;
use crate::zookeeper::store::ZkStore;

/// A world's connections to its servers.
pub trait Stores {
    /// A connection to a Redis server.
    type Redis: RedisStore;
    /// A ZooKeeper session.
    type Zk: ZkStore;
    /// A MySQL connection.
    type Sql: SqlStore;
    /// A connection to an etcd member, with its session lease.
    type Etcd: EtcdStore;

    /// The Redis server a one-server algorithm talks to (the primary; after a failover, whoever
    /// the clients take for the primary).
    fn redis_primary(&self) -> Self::Redis;
    /// One connection per Redis master, in server order (Redlock's masters).
    fn redis_masters(&self) -> Vec<Self::Redis>;
    /// A new session with the ZooKeeper server.
    fn zookeeper(&self) -> Self::Zk;
    /// A connection to the MySQL server.
    fn mysql(&self) -> Self::Sql;
    /// A connection to the etcd member, with a session of its own.
    fn etcd(&self) -> Self::Etcd;
}
