//! The backends: one module per kind of server, registered once in [`backends!`]'s list.
//!
//! Everything core knows of one backend sits in its module, so that adding one (PostgreSQL's
//! advisory locks next) is a file here and a line in the list, not an edit of every rule:
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

use crate::registry::Algorithm;
use crate::scenario::{Params, Persistence};
pub use lockcheck_algorithms::describe::Backend;
use lockcheck_algorithms::describe::Lease;
use serde::Serialize;

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

    /// Its group within a scenario's parameters.
    fn params(params: &Params) -> &Self::Params;

    /// Its group's numbers within their documented ranges ([`crate::limits`]), checked for
    /// every scenario whatever its backend, before anything else is judged.
    fn check_ranges(_group: &Self::Params) -> Result<(), String> {
        Ok(())
    }

    /// Its group's settings against the algorithm (checked right after a foreign group is
    /// refused, so only for an algorithm on this backend).
    fn check_group(_algorithm: Algorithm, _params: &Params) -> Result<(), String> {
        Ok(())
    }

    /// `params.nodes` of `n` (not 1) for an algorithm that runs against one service
    /// (`Servers::One`): how many of its servers make one service, if any.
    fn check_nodes(name: &str, n: u32) -> Result<(), String>;

    /// The servers' own settings beyond their number (Redis's replicas), checked after it.
    fn check_servers(_algorithm: Algorithm, _params: &Params) -> Result<(), String> {
        Ok(())
    }

    /// What its servers can be configured to do on a crash (`params.persistence`, each
    /// `per_node` one) and their timing settings, checked after the per-node names.
    fn check_server_settings(_params: &Params) -> Result<(), String> {
        Ok(())
    }

    /// How long, in ms, its servers keep a silent client's `lease` (a session, an idle
    /// connection's transaction); `None` for a kind of lease it does not hold. A lease the
    /// client sets (a TTL) is the scenario's, not the backend's.
    fn server_lease_ms(_lease: Lease, _params: &Params) -> Option<u64> {
        None
    }

    /// The thresholds of its servers and clients a verdict may turn on besides the lease
    /// ([`crate::margin`]), each given to `add` with its name; `servers` is how many run.
    fn thresholds(
        _algorithm: Algorithm,
        _params: &Params,
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

/// The names of `M`'s settings `params` gives, `None` when its group is not given at all.
fn given<M: Module>(params: &Params) -> Option<Vec<String>> {
    let group = M::params(params);
    (*group != M::Params::default()).then(|| given_fields(group))
}

/// Every persistence `params` asks for: each `per_node` one, then the scenario's.
fn policies(params: &Params) -> impl Iterator<Item = Persistence> + '_ {
    params
        .per_node
        .values()
        .filter_map(|n| n.persistence)
        .chain(params.persistence)
}

/// For a server that logs every change before it answers (`why` it does): it keeps all of it,
/// so only `always` applies, to the whole scenario and to each server alike.
fn logs_first(params: &Params, why: &str) -> Result<(), String> {
    if policies(params).any(|policy| policy != Persistence::Always) {
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

/// Registers the backends: `Variant => module::Type;`, one line each. Generates [`ALL`] and,
/// for each question core asks of a backend, one exhaustive `match` from [`Backend`] to the
/// module's answer.
macro_rules! backends {
    ($( $variant:ident => $module:ident :: $module_type:ident ; )*) => {
        /// Every backend, in registration order: the order their groups are checked in.
        pub const ALL: &[Backend] = &[$(Backend::$variant),*];

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

            fn given(self, params: &Params) -> Option<Vec<String>> {
                match self { $( Backend::$variant => given::<$module::$module_type>(params), )* }
            }

            fn check_group(self, algorithm: Algorithm, params: &Params) -> Result<(), String> {
                match self {
                    $( Backend::$variant =>
                        <$module::$module_type as Module>::check_group(algorithm, params), )*
                }
            }

            fn check_nodes(self, name: &str, n: u32) -> Result<(), String> {
                match self {
                    $( Backend::$variant =>
                        <$module::$module_type as Module>::check_nodes(name, n), )*
                }
            }

            fn check_servers(self, algorithm: Algorithm, params: &Params) -> Result<(), String> {
                match self {
                    $( Backend::$variant =>
                        <$module::$module_type as Module>::check_servers(algorithm, params), )*
                }
            }

            fn check_server_settings(self, params: &Params) -> Result<(), String> {
                match self {
                    $( Backend::$variant =>
                        <$module::$module_type as Module>::check_server_settings(params), )*
                }
            }

            fn server_lease_ms(self, lease: Lease, params: &Params) -> Option<u64> {
                match self {
                    $( Backend::$variant =>
                        <$module::$module_type as Module>::server_lease_ms(lease, params), )*
                }
            }

            fn thresholds(
                self,
                algorithm: Algorithm,
                params: &Params,
                servers: u64,
                add: &mut dyn FnMut(&str, u64),
            ) {
                match self {
                    $( Backend::$variant => <$module::$module_type as Module>::thresholds(
                        algorithm, params, servers, add,
                    ), )*
                }
            }
        }

        /// Every group's numbers within their ranges, the backends in registration order.
        pub(crate) fn check_ranges(params: &Params) -> Result<(), String> {
            $( <$module::$module_type as Module>::check_ranges(
                <$module::$module_type as Module>::params(params),
            )?; )*
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
    /// The settings of its group that `params` gives, `None` when it gives none.
    fn given(self, params: &Params) -> Option<Vec<String>>;
    /// [`Module::check_group`].
    fn check_group(self, algorithm: Algorithm, params: &Params) -> Result<(), String>;
    /// [`Module::check_nodes`].
    fn check_nodes(self, name: &str, n: u32) -> Result<(), String>;
    /// [`Module::check_servers`].
    fn check_servers(self, algorithm: Algorithm, params: &Params) -> Result<(), String>;
    /// [`Module::check_server_settings`].
    fn check_server_settings(self, params: &Params) -> Result<(), String>;
    /// [`Module::server_lease_ms`].
    fn server_lease_ms(self, lease: Lease, params: &Params) -> Option<u64>;
    /// [`Module::thresholds`].
    fn thresholds(
        self,
        algorithm: Algorithm,
        params: &Params,
        servers: u64,
        add: &mut dyn FnMut(&str, u64),
    );
}

backends! {
    Redis => redis::Redis;
    ZooKeeper => zookeeper::ZooKeeper;
    Mysql => mysql::Mysql;
    Etcd => etcd::Etcd;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lease the servers hold (a session, an idle connection) is one the algorithm's backend
    /// gives a length for: no backend's length is borrowed for another's.
    #[test]
    fn every_server_held_lease_has_its_backends_length() {
        for &a in Algorithm::ALL {
            if let lease @ (Lease::Session | Lease::IdleConnection) = a.lease() {
                assert!(
                    a.backend()
                        .server_lease_ms(lease, &Params::default())
                        .is_some(),
                    "{}: {lease:?} on {}",
                    a.name(),
                    a.backend().name()
                );
            }
        }
    }

    /// Each backend's servers have a prefix of their own, so a node name says its backend.
    #[test]
    fn server_prefixes_and_names_are_distinct() {
        for (i, a) in ALL.iter().enumerate() {
            for b in &ALL[i + 1..] {
                assert_ne!(a.server_prefix(), b.server_prefix());
                assert_ne!(a.name(), b.name());
            }
        }
    }
}
