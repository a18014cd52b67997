//! Whether a client could reach the lock service, read from the nemesis entries of a history.
//!
//! Liveness and fairness judgements must not blame a lock for what an outage did: a waiter cut
//! off from the server cannot take a free lock, nor keep its place in a queue by polling. Both
//! [`super::stuck`] and [`super::order`] ask the same question: since when has this client been
//! running and the service up and reachable from it?

use crate::schedule::kind::*;
use crate::topology::Topology;
use std::collections::{BTreeMap, BTreeSet};

/// The outages in force at one point of a history, and when each client last came out of one.
///
/// Deliberately coarse: any partition or message fault counts for every client, and any node
/// other than a client (a server, the resource) paused or down counts as the service down.
/// The checks that use it only stay silent during outages, so coarse errs on the side of
/// finding nothing rather than something false.
#[derive(Default, Debug)]
pub struct Reach<'a> {
    /// Nodes other than clients that are paused or down.
    service_out: BTreeSet<&'a str>,
    /// Partitions and message faults in force.
    network_faults: u32,
    /// When the service last became reachable (true ns).
    service_since: u64,
    /// Clients paused or down.
    clients_out: BTreeSet<&'a str>,
    /// When each client last came back.
    client_since: BTreeMap<&'a str, u64>,
}

impl<'a> Reach<'a> {
    /// Since when (true ns) `client` has been running with the service up and reachable, if it
    /// is now.
    pub fn since(&self, client: &str) -> Option<u64> {
        if !self.service_out.is_empty()
            || self.network_faults > 0
            || self.clients_out.contains(client)
        {
            return None;
        }
        let back = self.client_since.get(client).copied().unwrap_or(0);
        Some(self.service_since.max(back))
    }

    /// Takes in a nemesis entry of `kind` on `target` at true time `t`. Clock faults change
    /// what a lock must cope with, not whether it can be reached: they are ignored.
    pub fn nemesis(&mut self, kind: &str, target: &'a str, t: u64) {
        let client = target.starts_with(Topology::CLIENT_PREFIX);
        match kind {
            PAUSE | CRASH if client => {
                self.clients_out.insert(target);
            }
            RESUME | RESTART if client => {
                self.clients_out.remove(target);
                self.client_since.insert(target, t);
            }
            PAUSE | CRASH => {
                self.service_out.insert(target);
            }
            RESUME | RESTART => {
                self.service_out.remove(target);
                self.service_back(t);
            }
            // A message fault lasts until what it held back has arrived, not only until it
            // stops holding messages back.
            CUT | MESSAGES_START => self.network_faults += 1,
            HEAL | MESSAGES_SETTLED => {
                self.network_faults = self.network_faults.saturating_sub(1);
                self.service_back(t);
            }
            FAILOVER => self.service_since = t,
            _ => {}
        }
    }

    fn service_back(&mut self, at: u64) {
        if self.service_out.is_empty() && self.network_faults == 0 {
            self.service_since = at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_hides_a_client_until_it_ends_and_counts_from_then() {
        let mut r = Reach::default();
        assert_eq!(r.since("client-0"), Some(0));
        r.nemesis(CUT, "client-1", 5);
        assert_eq!(r.since("client-0"), None, "cuts count for everyone");
        r.nemesis(HEAL, "client-1", 9);
        assert_eq!(r.since("client-0"), Some(9));
        r.nemesis(PAUSE, "client-0", 10);
        assert_eq!(r.since("client-0"), None);
        assert_eq!(
            r.since("client-1"),
            Some(9),
            "one client's pause is its own"
        );
        r.nemesis(RESUME, "client-0", 12);
        assert_eq!(r.since("client-0"), Some(12));
        r.nemesis(CRASH, "redis-0", 13);
        r.nemesis(PAUSE, "redis-1", 13);
        r.nemesis(RESTART, "redis-0", 14);
        assert_eq!(r.since("client-1"), None, "redis-1 is still paused");
        r.nemesis(RESUME, "redis-1", 15);
        assert_eq!(r.since("client-1"), Some(15));
        r.nemesis(CLOCK_JUMP, "redis-1", 16);
        assert_eq!(r.since("client-1"), Some(15), "a clock fault is no outage");
    }
}
