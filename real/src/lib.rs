//! The same lock algorithms against real servers, with real faults.
//!
//! The simulator (`lockcheck-sim`) runs the algorithms of `lockcheck-algorithms` against simulated
//! servers on simulated time. This crate runs the very same algorithm code against real
//! `redis-server`, ZooKeeper, MariaDB and etcd processes that it starts itself, on the host's real clocks, with
//! faults that really happen, and judges the result with the simulator's own pure checker. A
//! verdict that agrees in both worlds is evidence that the simulation models the servers
//! faithfully.
//!
//! The parts, in Jepsen's split:
//! - [`launcher`] (Jepsen's db): starts, kills, restarts, stops and continues server processes
//!   on loopback ports, each in a temp dir, in its own process group; stops them all on success,
//!   error, drop and Ctrl-C. [`backend`] says which kind of server an algorithm runs against.
//!   [`ensemble`] starts a ZooKeeper ensemble: its members, their proxies to each other, and a
//!   leader known before the run.
//!   [`etcd_cluster`] starts an etcd cluster whose members reach each other through
//!   [`peer_proxy`]'s front doors (which tell each connection's dialling member through the
//!   kernel), so partitions between members are real.
//! - [`redis_store`], [`zk_store`] and [`mysql_store`] (the clients): [`redis_store::RealRedis`]
//!   implements the algorithms' `RedisStore` over the `redis` crate, reply for reply as the
//!   simulated Redis answers; [`zk_store::RealZk`] their `ZkStore` over the `zookeeper-client`
//!   crate, a session with its notices as the simulated ZooKeeper client has one;
//!   [`mysql_store::RealMysql`] their `SqlStore` over `mysql_async`, prepared statements with
//!   the model's error codes.
//! - [`proxy`] (the network): every client reaches every server through a TCP relay of its own
//!   that can pass, blackhole, reset or delay its connections; partitions and client pauses act
//!   on these.
//! - [`env`](mod@env): [`env::RealEnv`] implements the algorithms' `Env` on real time, with a
//!   [`gate::PauseGate`] per client that freezes it, which is how a client pause is real here.
//! - [`client`]: a real client for the simulation's own workload loop
//!   (`lockcheck_core::workload`); [`world`]: the run's shared
//!   state; [`resource`]: the protected resource, in-process, recording every access in real
//!   order; [`recorder`]: the history.
//! - [`replication`]: Redis replicas under a real Sentinel, which performs the scenario's
//!   failovers; clients find the primary by asking it.
//! - [`nemesis`]: the scenario's faults at their times; [`support`]: which faults and algorithms
//!   real mode can run so far; [`profile`]: ready-made scenarios for `lockcheck real`.
//! - [`client_process`] and [`protocol`]: `--client`, the user's lock library in processes of
//!   its own, driven over a line protocol, paused and killed for real.
//! - [`runner`]: one run, start to verdict.
//!
//! # What is real, and what is not
//!
//! Real: the servers (Debian's `redis-server`, its Lua, its expiry on its own wall clock;
//! Debian's ZooKeeper 3.8, its sessions expiring on its own clock; MariaDB 10.11 and InnoDB),
//! the TCP connections and their timeouts, `kill -9` and a restart from the same data dir,
//! SIGSTOP/SIGCONT of a server, a partition (the proxies across it hold every byte), a client
//! killed with its connections, a server's clocks moved by [`timeshift`]'s preloaded library,
//! message delay and loss through the proxies (loss as TCP makes it: a retransmission's stall),
//! time itself.
//!
//! Not (yet) real, or different from the simulation:
//! - A client pause (of lockcheck's own clients; a client process of `--client` is stopped for
//!   real with `SIGSTOP`) is a gate the client's task waits at, at its next await point (every sleep,
//!   every store call, every touch of the resource), not a frozen OS process: the lock algorithms
//!   and the workload run as tasks in this process. A frozen process also stops at exactly such
//!   points from the outside world's view (it sends nothing, receives nothing), so a pause inside a
//!   critical section is faithful; what a task does between two await points (pure computation) is
//!   not interrupted. The client's proxies are blackholed for the pause too, so what a client
//!   library sends on its own (ZooKeeper pings) reaches nobody, as from a frozen process; the
//!   library itself keeps running, so it notices the silence during the pause rather than on
//!   waking (see [`gate`]).
//! - A partition holds bytes on the way to a server (as TCP does across a partition that heals
//!   in time), where the simulation loses messages unless the partition says `hold`: a request
//!   sent during a partition may be applied after the heal. On the way to the in-process
//!   resource a partition does what the scenario says, as in the simulation: it loses the
//!   client's accesses, or holds them and delivers them at the heal.
//! - `kill -9` kills the process, not the machine: what Redis wrote to its append-only file is in
//!   the page cache and survives, so `everysec` loses nothing acknowledged here, while the
//!   simulation's `everysec` models a machine crash that loses the last second.
//! - A crashed server refuses connections at once ([`lockcheck_algorithms::StoreError::Unreachable`]),
//!   where the simulation's crashed node swallows messages until the timeout.
//! - Server key changes are not observed (no `Key` entries), so foreign releases are not checked.
//! - A machine crash (what was not fsynced is lost, peers are not told), a clock fault on an etcd
//!   member (Go reads its clocks through the vDSO), and, with Redis replicas, a partition, loss
//!   or delay between two servers are refused before anything starts ([`support`]).
//! - A failover is Sentinel's: it takes about a second where the simulation's is instantaneous,
//!   and a replica lags by a delay on its replication link rather than by periodic pulls (see
//!   [`replication`]).
//!
//! A real run is not byte-replayable: scheduling, latencies and the interleaving of clients come
//! from the real machine. Its *scenario* is replayable, in both worlds: `lockcheck real --scenario`
//! runs it again here, `lockcheck run` runs it in the simulator.

pub mod backend;
pub mod client;
pub mod client_process;
pub mod declared;
pub mod endpoints;
pub mod ensemble;
pub mod env;
pub mod error;
pub mod etcd_cluster;
pub mod etcd_gateway;
pub mod etcd_store;
pub mod gate;
pub mod launcher;
pub mod mysql_store;
pub mod nemesis;
pub mod peer_proxy;
pub mod peerlink;
pub mod preload;
pub mod private_dir;
pub mod profile;
pub mod protocol;
pub mod proxy;
pub mod recorder;
pub mod redis_store;
pub mod replication;
pub mod resource;
pub mod runner;
pub mod signals;
pub mod support;
pub mod timeshift;
pub mod tls;
pub mod world;
pub mod zk_store;

pub use client_process::ClientCommand;
pub use endpoints::{Endpoints, Login};
pub use error::RealError;
pub use runner::{preflight, preflight_on, run, run_on, run_with, RealRun, Servers};
pub use tls::{Tls, TlsFiles};
