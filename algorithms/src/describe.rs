//! What an algorithm says about itself, for lockcheck's registry (`lockcheck_core::registry`):
//! its name, the servers it runs on, what ends a silent holder's lock, what it promises, and how
//! it is built from the settings every lock shares.
//!
//! Each algorithm's own file holds its [`Description`] (a `DESCRIPTION` constant) and its
//! [`Registered`] implementation; the registry lists it with one line. Everything that differs
//! between algorithms outside their own code (the scenario's validation, the lease the checkers
//! and the fault generator measure against, the CLI's list, the matrix rows, real mode) reads the
//! description rather than matching on a name.

use crate::env::Env;
use crate::lock::Lock;
use crate::retry::Retry;
use crate::stores::Stores;
use std::time::Duration;

/// The kind of server a lock algorithm runs against. An algorithm names it in its description;
/// what each one means to lockcheck (its parameter group, its rules, its servers' names) is its
/// module in `lockcheck_core::backend`, which core maps every variant to exhaustively.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Backend {
    /// Redis: one server, a primary with replicas, or independent masters (Redlock).
    Redis,
    /// A ZooKeeper server.
    ZooKeeper,
    /// A MySQL/MariaDB server (InnoDB).
    Mysql,
    /// An etcd member (v3 API).
    Etcd,
}

/// How many servers an algorithm runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Servers {
    /// One server (and, where [`Description::replicas`] says so, its asynchronous replicas).
    /// For ZooKeeper, one service: a standalone server or an ensemble of `params.nodes` (odd)
    /// members that replicate one tree, any of which a client may use.
    One,
    /// Independent masters, every one of which the client talks to (Redlock): `params.nodes`
    /// of them, at least `min`, `default` when not given, an odd number unless
    /// `allow_even_nodes`.
    Masters {
        /// When `params.nodes` is not given.
        default: u32,
        /// The fewest that make sense.
        min: u32,
    },
}

/// What ends a lock whose holder stopped talking to the servers (crashed, paused, cut off): the
/// time every fault is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// A lease the client sets on acquisition (`params.ttl_ms`). `optional`: the lock has none
    /// unless a TTL is given (then it is held until released); otherwise it always has one, the
    /// default when not given.
    Ttl {
        /// Whether the TTL may be left out.
        optional: bool,
    },
    /// The holder's session (ZooKeeper's `session_timeout_ms`, etcd's session lease
    /// `lease_ttl_s`): the lock ends when the server expires it.
    Session,
    /// The server's `wait_timeout`: it closes an idle connection and rolls back the
    /// transaction that holds the lock.
    IdleConnection,
    /// Nothing: the lock is held until it is released.
    None,
}

impl Lease {
    /// How it is called in messages ("a fault longer than the TTL").
    pub fn name(self) -> &'static str {
        match self {
            Lease::Ttl { .. } => "TTL",
            Lease::Session => "session timeout",
            Lease::IdleConnection => "wait_timeout",
            Lease::None => "lease",
        }
    }
}

/// Whether the lock can hand out a fencing token (Kleppmann's remedy for a holder that lost its
/// lock without knowing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fencing {
    /// On request (`params.fencing`), each acquisition draws a token that only grows.
    Token,
    /// It cannot; the text says why (shown when a scenario asks for fencing).
    Unavailable(&'static str),
}

/// An order the lock promises among its waiters, checked beyond mutual exclusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// None.
    None,
    /// First come, first served, through a queue in which a waiter keeps its place for
    /// `queue_timeout_ms` without polling (a fair lock).
    Fifo,
    /// Each waiter's turn follows the sequence number of the node it created (ZooKeeper's
    /// sequential-node recipes).
    Sequence,
}

/// One algorithm, as the registry knows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Description {
    /// The user-facing name (`single-redis`): the scenario's `algorithm`, the CLI's value.
    pub name: &'static str,
    /// One line for `--help` and docs/algorithms.md: what it is and where it comes from.
    pub summary: &'static str,
    /// The servers it runs against.
    pub backend: Backend,
    /// How many.
    pub servers: Servers,
    /// Whether it may run with asynchronous replicas of its one server (`params.replicas`,
    /// `params.wait_replicas`; a `failover` promotes one).
    pub replicas: bool,
    /// What ends a silent holder's lock.
    pub lease: Lease,
    /// Whether it can hand out fencing tokens.
    pub fencing: Fencing,
    /// Whether it renews its lease while held when asked to (`params.watchdog`, Redisson's
    /// watchdog).
    pub renews: bool,
    /// Whether the owner may acquire again while holding (nested acquisitions).
    pub reentrant: bool,
    /// Whether clients may take it shared (readers) as well as exclusive (writers).
    pub readers: bool,
    /// The order it promises among waiters.
    pub order: Order,
    /// Whether its steps are scripts the user gives (`params.redis.script`): it runs only with
    /// them, so it is left out of what sweeps the whole registry by default (the default
    /// matrix, the tests that run every algorithm with default parameters).
    pub scripted: bool,
    /// The versions of the library it follows whose client behaviour differs in ways that change
    /// verdicts (`params.variant`, `--variant`), the first being the default: the current release
    /// of the library the algorithm names. Empty for an algorithm without versions.
    pub variants: &'static [LibraryVariant],
}

impl Description {
    /// The variant named `name`, or the default (the first) when `name` is `None`; `None` when
    /// the name is not one of [`Description::variants`] or the algorithm has no variants.
    pub fn variant(&self, name: Option<&str>) -> Option<&'static LibraryVariant> {
        match name {
            None => self.variants.first(),
            Some(name) => self.variants.iter().find(|v| v.answers_to(name)),
        }
    }

    /// The names of its variants, the default first.
    pub fn variant_names(&self) -> Vec<&'static str> {
        self.variants.iter().map(|v| v.name).collect()
    }
}

/// One version range of the library an algorithm follows, as a named setting of the algorithm
/// (`params.variant`): where that range's client behaves differently enough to change a verdict
/// (a command re-sent after a lost reply, a watchdog that gives up), the lock behaves as it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibraryVariant {
    /// Its name in scenarios and on the command line (`redisson-3.23`).
    pub name: &'static str,
    /// The releases it stands for ("Redisson 3.0–3.23").
    pub versions: &'static str,
    /// The library's source files it follows, as of those releases.
    pub follows: &'static str,
    /// One line on what differs from the other variants.
    pub about: &'static str,
    /// Names it had before its range was split or renamed, still accepted for it (a scenario
    /// or report written then still runs as it did).
    pub formerly: &'static [&'static str],
}

impl LibraryVariant {
    /// Whether `name` names it: its name, or one it had before.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.formerly.contains(&name)
    }
}

/// The settings every lock is built from, worked out once from a scenario's parameters and the
/// algorithm's [`Description`]: each lock takes what applies to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The lock's name: a Redis key, a MySQL resource, a ZooKeeper path's last segment.
    pub key: String,
    /// The lease, for a [`Lease::Ttl`] lock (`None` when an optional TTL was not given).
    pub ttl: Option<Duration>,
    /// Clock drift allowance as a fraction of the TTL.
    pub drift_factor: f64,
    /// How a blocking acquire retries.
    pub retry: Retry,
    /// Whether to draw a fencing token on acquisition.
    pub fencing: bool,
    /// After acquiring, `WAIT` for this many replicas within this long.
    pub wait_replicas: Option<(u32, Duration)>,
    /// Asynchronous replicas of the one server (`params.redis.replicas`): a client that knows
    /// it talks to a replicated Redis (Redisson's Sentinel and replicated configurations) may
    /// follow its writes with `WAIT`; 0 is a single server.
    pub replicas: u32,
    /// How long a waiter keeps its place in a [`Order::Fifo`] queue without polling.
    pub queue_timeout: Duration,
    /// ZooKeeper: treat a disconnected session as a lost lock at once.
    pub suspended_is_lost: bool,
    /// The user's scripts, for a [`Description::scripted`] lock.
    pub script: Option<crate::redis::script_spec::UserScript>,
    /// The library variant the scenario names (`params.variant`), already checked against the
    /// algorithm's [`Description::variants`]; `None`: the default (the first).
    pub variant: Option<String>,
}

impl Settings {
    /// The lease of a lock whose TTL is not optional: the given one, [`DEFAULT_TTL`] otherwise.
    pub fn ttl_or_default(&self) -> Duration {
        self.ttl.unwrap_or(DEFAULT_TTL)
    }

    /// The position in `variants` (an algorithm's [`Description::variants`]) of the variant
    /// these settings name, 0 (the default) when they name none: what a lock with variants
    /// builds its behaviour from, one entry of its own per position.
    ///
    /// # Panics
    /// When the name is not in `variants`: scenario validation refuses it before any lock is
    /// built, so that would be a bug of the caller, not bad input.
    pub fn variant_index(&self, variants: &[LibraryVariant]) -> usize {
        match &self.variant {
            None => 0,
            Some(name) => variants
                .iter()
                .position(|v| v.answers_to(name))
                .unwrap_or_else(|| panic!("variant {name:?} passed validation but is not listed")),
        }
    }
}

/// The lease of a [`Lease::Ttl`] lock when a scenario gives none; also the time scale of a lock
/// that never expires.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// An algorithm built for one client over a world's stores `S`.
pub trait Registered<S: Stores>: Sized {
    /// The lock a critical section uses: the algorithm itself, or for a read/write lock either
    /// of its sides.
    type Side: Lock;

    /// The lock for one client. `env` is the client's environment: its randomness names the
    /// owner of the locks that have one (a restarted client is a new process, so a new owner).
    fn build(stores: &S, settings: &Settings, env: &impl Env) -> Self;

    /// The side a section takes: the read side when `shared`, for a read/write lock.
    fn side(&self, shared: bool) -> &Self::Side;
}
