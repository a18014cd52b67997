//! The backends: one module per kind of server, registered once in the `backends!` list below.
//!
//! Everything core knows of one backend sits in its module, so that adding one (PostgreSQL's
//! advisory locks next) is a file here, a line in the list and its group's field in the
//! scenario's `Params` (ARCHITECTURE.md, "How to add a backend"), not an edit of every rule:
//! its parameter group (`params.redis`, …), the rules a scenario must follow on it (checked by
//! [`crate::scenario::Scenario::validate`] at fixed points, so messages come in the same order
//! whatever the backend), the lease its servers hold for a client (a session, an idle
//! connection), how its servers are named, and the thresholds its servers decide by.
//!
//! The [`Backend`] enum itself stays in `lockcheck-algorithms`, because an algorithm declares its
//! backend in its `const DESCRIPTION`, and core depends on the algorithms, never the reverse.
//! Core maps each variant to its module here: the list below generates one exhaustive `match`
//! per question, so a new variant in `describe.rs` fails to compile until it is listed.

pub mod etcd;
pub mod mysql;
pub mod redis;
pub mod zookeeper;

use crate::persistence::Persistence;
use crate::registry::Algorithm;
pub use lockcheck_algorithms::describe::Backend;
use lockcheck_algorithms::describe::Lease;
use serde::Serialize;

/// What a backend's rules read of a scenario besides their own group: the algorithm and the
/// settings every backend shares. A view rather than the scenario's `Params`, so that this folder
/// does not depend on the format that holds its groups.
#[derive(Clone, Copy, Debug)]
pub struct Common<'a> {
    /// The algorithm under test.
    pub algorithm: Algorithm,
    /// `params.watchdog`.
    pub watchdog: bool,
    /// `params.fencing`.
    pub fencing: bool,
    /// Every persistence the scenario asks for: each `per_node` one, then `params.persistence`.
    pub policies: &'a [Persistence],
}

/// What a backend's module tells core. Implemented by one unit type per module; every method
/// with a default is a rule most backends do not have, so a module writes only its own.
pub trait Module {
    /// Its name in messages and as its parameter group's key (`params.zookeeper`).
    const NAME: &'static str;
    /// The prefix of its servers' node names (`zk` for `zk-0`, `zk-1`, …).
    const SERVER_PREFIX: &'static str;
    /// What its servers keep across a crash when a scenario does not say.
    const PERSISTENCE: Persistence;
    /// Its parameter group: its default is "not given", and it is written only when set.
    type Params: Serialize + Default + PartialEq;

    /// Its group's numbers within their documented ranges ([`crate::limits`]), checked for
    /// every scenario whatever its backend, before anything else is judged.
    fn check_ranges(_group: &Self::Params) -> Result<(), String> {
        Ok(())
    }

    /// Its group's settings against the algorithm (checked right after a foreign group is
    /// refused, so only for an algorithm on this backend).
    fn check_group(_group: &Self::Params, _common: &Common) -> Result<(), String> {
        Ok(())
    }

    /// `params.nodes` of `n` (not 1) for an algorithm `name` that runs against one service
    /// (`Servers::One`): how many of its servers make one service, if any.
    fn check_nodes(name: &str, n: u32) -> Result<(), String>;

    /// The servers' own settings beyond their number (Redis's replicas), checked after it.
    fn check_servers(_group: &Self::Params, _common: &Common) -> Result<(), String> {
        Ok(())
    }

    /// What its servers can be configured to keep on a crash and their timing settings,
    /// checked after the per-node names.
    fn check_server_settings(_group: &Self::Params, _common: &Common) -> Result<(), String> {
        Ok(())
    }

    /// How long, in ms, its servers keep a silent client's `lease` (a session, an idle
    /// connection's transaction); `None` for a kind of lease it does not hold. A lease the
    /// client sets (a TTL) is the scenario's, not the backend's.
    fn server_lease_ms(_lease: Lease, _group: &Self::Params) -> Option<u64> {
        None
    }

    /// The thresholds of its servers and clients a verdict may turn on besides the lease
    /// ([`crate::margin`]), each given to `add` with its name; `servers` is how many run.
    fn thresholds(
        _group: &Self::Params,
        _algorithm: Algorithm,
        _servers: u64,
        _add: &mut dyn FnMut(&str, u64),
    ) {
    }
}

/// The settings a group gives (those it writes: a setting at its "not given" value is left
/// out), by name, for the message that refuses them.
fn given_fields<T: Serialize>(group: &T) -> Vec<String> {
    match serde_json::to_value(group) {
        Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The names of the settings `group` gives, `None` when it gives none.
fn given<T: Serialize + Default + PartialEq>(group: &T) -> Option<Vec<String>> {
    (*group != T::default()).then(|| given_fields(group))
}

/// For a server that logs every change before it answers (`why` it does): it keeps all of it,
/// so only `always` applies, to the whole scenario and to each server alike.
fn logs_first(common: &Common, why: &str) -> Result<(), String> {
    if common
        .policies
        .iter()
        .any(|&policy| policy != Persistence::Always)
    {
        return Err(format!(
            "params.persistence: {why} before it answers; only always applies"
        ));
    }
    Ok(())
}

/// An odd number of members, for a backend whose servers make one service by quorum (a
/// ZooKeeper ensemble of `what`, an etcd cluster): an even one needs a larger quorum and
/// tolerates no more failures. `one` is what 1 means.
fn check_odd(n: u32, what: &str, one: &str) -> Result<(), String> {
    if n.is_multiple_of(2) {
        return Err(format!(
            "params.nodes: {what} needs a quorum of {} yet tolerates no more failures than {} \
             would; use 1 ({one}) or an odd number (3, 5, …)",
            n / 2 + 1,
            n - 1
        ));
    }
    Ok(())
}

/// Registers the backends: `Variant => module::Type, group;`, one line each (`group` is its
/// key in `params`). Generates [`ALL`], the [`Groups`] a scenario's parameters give the rules,
/// and, for each question core asks of a backend, one exhaustive `match` from [`Backend`] to the
/// module's answer ([`BackendExt`]).
macro_rules! backends {
    ($( $variant:ident => $module:ident :: $module_type:ident , $group:ident ; )*) => {
        /// Every backend, in registration order: the order their groups are checked in.
        pub const ALL: &[Backend] = &[$(Backend::$variant),*];

        /// Each backend's parameter group, as a scenario's parameters hold them
        /// (`params.redis`, …): implemented by the scenario's `Params`, one line a backend.
        pub trait Groups {
            $(
                #[doc = concat!("`params.", stringify!($group), "`.")]
                fn $group(&self) -> &<$module::$module_type as Module>::Params;
            )*
        }

        impl BackendExt for Backend {
            fn name(self) -> &'static str {
                match self { $( Backend::$variant => <$module::$module_type as Module>::NAME, )* }
            }

            fn server_prefix(self) -> &'static str {
                match self {
                    $( Backend::$variant => <$module::$module_type as Module>::SERVER_PREFIX, )*
                }
            }

            fn default_persistence(self) -> Persistence {
                match self {
                    $( Backend::$variant => <$module::$module_type as Module>::PERSISTENCE, )*
                }
            }

            fn given(self, groups: &dyn Groups) -> Option<Vec<String>> {
                match self { $( Backend::$variant => given(groups.$group()), )* }
            }

            fn check_group(self, groups: &dyn Groups, common: &Common) -> Result<(), String> {
                match self {
                    $( Backend::$variant => <$module::$module_type as Module>::check_group(
                        groups.$group(), common,
                    ), )*
                }
            }

            fn check_nodes(self, name: &str, n: u32) -> Result<(), String> {
                match self {
                    $( Backend::$variant =>
                        <$module::$module_type as Module>::check_nodes(name, n), )*
                }
            }

            fn check_servers(self, groups: &dyn Groups, common: &Common) -> Result<(), String> {
                match self {
                    $( Backend::$variant => <$module::$module_type as Module>::check_servers(
                        groups.$group(), common,
                    ), )*
                }
            }

            fn check_server_settings(
                self,
                groups: &dyn Groups,
                common: &Common,
            ) -> Result<(), String> {
                match self {
                    $( Backend::$variant =>
                        <$module::$module_type as Module>::check_server_settings(
                            groups.$group(), common,
                        ), )*
                }
            }

            fn server_lease_ms(self, lease: Lease, groups: &dyn Groups) -> Option<u64> {
                match self {
                    $( Backend::$variant => <$module::$module_type as Module>::server_lease_ms(
                        lease, groups.$group(),
                    ), )*
                }
            }

            fn thresholds(
                self,
                groups: &dyn Groups,
                algorithm: Algorithm,
                servers: u64,
                add: &mut dyn FnMut(&str, u64),
            ) {
                match self {
                    $( Backend::$variant => <$module::$module_type as Module>::thresholds(
                        groups.$group(), algorithm, servers, add,
                    ), )*
                }
            }
        }

        /// Every group's numbers within their ranges, the backends in registration order.
        pub fn check_ranges(groups: &dyn Groups) -> Result<(), String> {
            $( <$module::$module_type as Module>::check_ranges(groups.$group())?; )*
            Ok(())
        }
    };
}

/// A [`Backend`] asked what its module says: the one way core learns anything about a backend,
/// so no code outside `backend/` matches on one. (An extension trait, since the enum is the
/// algorithms crate's.)
pub trait BackendExt: Copy {
    /// Its name in messages and as its parameter group's key.
    fn name(self) -> &'static str;
    /// The prefix of its servers' node names (`redis-0`, `zk-0`, `mysql-0`, `etcd-0`).
    fn server_prefix(self) -> &'static str;
    /// What its servers keep across a crash when a scenario does not say.
    fn default_persistence(self) -> Persistence;
    /// The settings of its group that `groups` gives, `None` when it gives none.
    fn given(self, groups: &dyn Groups) -> Option<Vec<String>>;
    /// [`Module::check_group`].
    fn check_group(self, groups: &dyn Groups, common: &Common) -> Result<(), String>;
    /// [`Module::check_nodes`].
    fn check_nodes(self, name: &str, n: u32) -> Result<(), String>;
    /// [`Module::check_servers`].
    fn check_servers(self, groups: &dyn Groups, common: &Common) -> Result<(), String>;
    /// [`Module::check_server_settings`].
    fn check_server_settings(self, groups: &dyn Groups, common: &Common) -> Result<(), String>;
    /// [`Module::server_lease_ms`].
    fn server_lease_ms(self, lease: Lease, groups: &dyn Groups) -> Option<u64>;
    /// [`Module::thresholds`].
    fn thresholds(
        self,
        groups: &dyn Groups,
        algorithm: Algorithm,
        servers: u64,
        add: &mut dyn FnMut(&str, u64),
    );
}

backends! {
    Redis => redis::Redis, redis;
    ZooKeeper => zookeeper::ZooKeeper, zookeeper;
    Mysql => mysql::Mysql, mysql;
    Etcd => etcd::Etcd, etcd;
}
