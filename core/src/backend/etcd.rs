//! etcd: its parameter group (`params.etcd`), the rules an etcd lock's scenario follows, its
//! session lease as the lease, and its servers' names (`etcd-0`, or a cluster's members
//! `etcd-0..etcd-{n-1}`).

use super::{Common, Module};
use crate::persistence::Persistence;
use crate::registry::Algorithm;
use lockcheck_algorithms::describe::Lease;
use serde::{Deserialize, Serialize};

/// The session lease of an etcd lock when a scenario gives none, in seconds.
pub const DEFAULT_ETCD_LEASE_TTL_S: u64 = 10;
pub use crate::limits::{MAX_ETCD_LEASE_TTL_S, MIN_ETCD_LEASE_TTL_S};

/// How long etcd's lessor waits between two looks for expired leases (`revokeExpiredLeases`
/// every 500 ms in `lessor.runLoop`).
pub const ETCD_LESSOR_LOOP_MS: u64 = 500;

/// `params.etcd`: settings of the etcd sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdParams {
    /// The TTL of a client's session lease in seconds, etcd's unit (`concurrency.WithTTL`;
    /// default 10, where the Go client's is 60, so that faults are measured on the scale of the
    /// other locks' leases). The lock dies with the lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ttl_s: Option<u64>,
}

impl EtcdParams {
    /// The session lease's TTL in seconds, or its default.
    pub fn lease_ttl_s(&self) -> u64 {
        self.lease_ttl_s.unwrap_or(DEFAULT_ETCD_LEASE_TTL_S)
    }
}

/// The etcd backend, as [`Module`] asks.
pub struct Etcd;

impl Module for Etcd {
    const NAME: &'static str = "etcd";
    const SERVER_PREFIX: &'static str = "etcd";
    // etcd fsyncs its write-ahead log before it answers.
    const PERSISTENCE: Persistence = Persistence::Always;
    type Params = EtcdParams;

    // One member (1, the default) or a cluster of `etcd-0..etcd-{n-1}`.
    fn check_nodes(_name: &str, n: u32) -> Result<(), String> {
        super::check_odd(n, &format!("a cluster of {n} etcd members"), "one member")
    }

    fn check_server_settings(e: &EtcdParams, common: &Common) -> Result<(), String> {
        super::logs_first(common, "etcd fsyncs its write-ahead log")?;
        let ttl = e.lease_ttl_s();
        if !(MIN_ETCD_LEASE_TTL_S..=MAX_ETCD_LEASE_TTL_S).contains(&ttl) {
            return Err(format!(
                "params.etcd.lease_ttl_s must be within {MIN_ETCD_LEASE_TTL_S}..={MAX_ETCD_LEASE_TTL_S} \
                 (etcd grants at least {MIN_ETCD_LEASE_TTL_S} s with its default timing, and \
                 would silently raise a shorter TTL), got {ttl}"
            ));
        }
        Ok(())
    }

    fn server_lease_ms(lease: Lease, e: &EtcdParams) -> Option<u64> {
        (lease == Lease::Session).then(|| e.lease_ttl_s() * 1_000)
    }

    fn thresholds(e: &EtcdParams, _: Algorithm, _servers: u64, add: &mut dyn FnMut(&str, u64)) {
        let lease = e.lease_ttl_s() * 1_000;
        add("lease TTL + lessor loop", lease + ETCD_LESSOR_LOOP_MS);
        add("keep-alive interval (a third of the lease)", lease / 3);
    }
}
