//! Where each server's monotonic clock stands when a run starts, and so the phase of its periodic
//! timers.
//!
//! A server's periodic timers count from its own clock, not from the run: ZooKeeper ends silent
//! sessions in buckets one `tickTime` wide, counted on its monotonic clock
//! (`ExpiryQueue.roundToNextInterval`); etcd's lessor looks for expired leases every 500 ms of its
//! own; Redis's `serverCron` removes expired keys (and tells its replicas) every 100 ms from its
//! process's start. (MariaDB has no such timer: `wait_timeout` is the read timeout of each
//! connection's wait for its next statement, `do_command`, counted from that wait's start.)
//! A real server was started at some moment before the run, so its tick falls anywhere within
//! the run's milliseconds; a model whose servers all start their clocks at the run's 0
//! always expires a session at the same phase, and a "not found" then says nothing of the others
//! (a cut just past a session timeout that is not a multiple of the tick is safe at one phase
//! and unsafe at another).
//!
//! So each server's monotonic clock starts at an origin drawn from the scenario's seed and the
//! server's name, anywhere within [`ORIGIN_SPAN_MS`]: every case of a search has its own phases,
//! and a report replays them. A scenario can pin an origin (`"server_clocks": {"pinned":
//! {"zk-0": 1500}}`) or start every server at 0 as lockcheck did before (`"zero"`: what a report
//! written before the field existed replays with). A ZooKeeper ensemble's members share the
//! first member's origin: the simulated ensemble keeps its sessions in one tree on one clock
//! (docs/not-modelled.md).
//!
//! Real mode cannot choose a real server's phase (it is whatever the process's start gave it),
//! so it runs a scenario whatever this says.

use crate::backend::zookeeper::ENSEMBLE_CLOCK;
pub use crate::limits::ORIGIN_SPAN_MS;
use crate::randomness::mix;
use crate::scenario::Scenario;
pub use crate::scenario::ServerClocks;
use crate::topology::Role;

/// The clock origins, in ms, at which a story is run again to see whether its verdict turns on
/// the servers' tick phases (`lockcheck differential`): every 250 ms over 2 s, a ZooKeeper tick
/// (the default `tickTime`) in eight steps, etcd's 500 ms lessor loop four times over, Redis's
/// 100 ms expiry cycle twenty times.
pub const PHASE_SWEEP: [u64; 8] = [0, 250, 500, 750, 1_000, 1_250, 1_500, 1_750];

/// `scenario` with every server's clock origin pinned to `origin_ms`.
pub fn at_phase(scenario: &Scenario, origin_ms: u64) -> Scenario {
    let topology = scenario.topology();
    let origins = topology
        .with_role(Role::Server)
        .into_iter()
        .map(|i| (topology.name(i).to_string(), origin_ms))
        .collect();
    Scenario {
        server_clocks: ServerClocks::Pinned(origins),
        ..scenario.clone()
    }
}

/// The monotonic reading of server `node` (its name) at the start of a run of `scenario`, in ms.
pub fn origin_ms(scenario: &Scenario, node: &str) -> u64 {
    // An ensemble's members read one clock, its first member's (see the module's documentation).
    let node = if scenario.is_zookeeper_ensemble() {
        ENSEMBLE_CLOCK
    } else {
        node
    };
    let drawn = || {
        // A domain of its own, apart from the clients' streams.
        const ORIGINS: u64 = 0x0C10_C0F5_5E7E_0001;
        let name = node
            .bytes()
            .fold(0u64, |h, b| mix(h ^ u64::from(b)).wrapping_add(1));
        mix(mix(scenario.seed ^ ORIGINS) ^ name) % ORIGIN_SPAN_MS
    };
    match &scenario.server_clocks {
        ServerClocks::Drawn => drawn(),
        ServerClocks::Zero => 0,
        ServerClocks::Pinned(origins) => origins.get(node).copied().unwrap_or_else(drawn),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Algorithm;

    /// The validation of pinned origins ([`Scenario::validate`]) on `s`.
    fn check(s: &Scenario) -> Result<(), String> {
        s.validate().map_err(|e| e.to_string())
    }

    #[test]
    fn origins_are_drawn_per_seed_and_server_and_can_be_pinned_or_zero() {
        let mut s = Scenario::new(Algorithm::Redlock);
        s.params.nodes = Some(3);
        let a = origin_ms(&s, "redis-0");
        assert_eq!(a, origin_ms(&s, "redis-0"), "a pure function");
        assert_ne!(a, origin_ms(&s, "redis-1"), "servers differ");
        s.seed = 1;
        assert_ne!(a, origin_ms(&s, "redis-0"), "seeds differ");
        assert!(a < ORIGIN_SPAN_MS);
        s.server_clocks = ServerClocks::Zero;
        assert_eq!(origin_ms(&s, "redis-2"), 0);
        s.server_clocks = ServerClocks::Pinned([("redis-1".to_string(), 1_500)].into());
        assert_eq!(origin_ms(&s, "redis-1"), 1_500);
        s.server_clocks = ServerClocks::Drawn;
        let drawn = origin_ms(&s, "redis-2");
        s.server_clocks = ServerClocks::Pinned([("redis-1".to_string(), 1_500)].into());
        assert_eq!(origin_ms(&s, "redis-2"), drawn, "the others stay drawn");
        check(&s).unwrap();
    }

    #[test]
    fn the_phases_of_many_seeds_cover_the_tick() {
        let mut s = Scenario::new(Algorithm::ZkSequential);
        let mut quarters = [0u32; 4];
        for seed in 0..400 {
            s.seed = seed;
            quarters[(origin_ms(&s, "zk-0") % 2_000 / 500) as usize] += 1;
        }
        assert!(quarters.iter().all(|&n| n > 60), "{quarters:?}");
    }

    #[test]
    fn an_ensembles_members_read_one_clock() {
        let mut s = Scenario::new(Algorithm::ZkSequential);
        s.params.nodes = Some(3);
        assert_eq!(origin_ms(&s, "zk-2"), origin_ms(&s, "zk-0"));
        s.server_clocks = ServerClocks::Pinned([("zk-1".to_string(), 5)].into());
        assert!(check(&s).unwrap_err().contains("pin zk-0"));
        s.server_clocks = ServerClocks::Pinned([("zk-0".to_string(), 5)].into());
        check(&s).unwrap();
        assert_eq!(origin_ms(&s, "zk-2"), 5);
    }

    #[test]
    fn a_pinned_origin_names_a_server_within_the_span() {
        let mut s = Scenario::new(Algorithm::SingleRedis);
        s.server_clocks = ServerClocks::Pinned([("client-0".to_string(), 5)].into());
        assert!(check(&s).unwrap_err().contains("not a server"));
        s.server_clocks = ServerClocks::Pinned([("redis-0".to_string(), ORIGIN_SPAN_MS)].into());
        assert!(check(&s).unwrap_err().contains("below"));
    }

    #[test]
    fn at_phase_pins_every_server_and_only_the_servers() {
        let mut s = Scenario::new(crate::scenario::Algorithm::Redlock);
        s.params.nodes = Some(3);
        let pinned = at_phase(&s, 750);
        for node in ["redis-0", "redis-1", "redis-2"] {
            assert_eq!(origin_ms(&pinned, node), 750, "{node}");
        }
        assert!(check(&pinned).is_ok());
        assert_eq!(PHASE_SWEEP.len(), 8);
    }
}
