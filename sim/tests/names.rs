//! Every name a lock writes on its servers derives from the scenario's key, in the ways real
//! mode knows: `lockcheck real --endpoints` checks those names are free on the user's servers
//! before a run and removes them after (`lockcheck_real::endpoints`). A lock that wrote under
//! another name would escape both, so each algorithm runs here under a key of its own, with
//! fencing where it has it and a holder paused past its lease, and every key its servers
//! changed is checked.

use lockcheck_algorithms::describe::Fencing;
use lockcheck_core::history::Op;
use lockcheck_core::scenario::{Backend, Fault};
use lockcheck_core::{Algorithm, Scenario};

const KEY: &str = "users_orders_1";

/// Whether real mode's clean-up covers `name`, written by a lock of `backend` named [`KEY`].
fn covered(backend: Backend, name: &str) -> bool {
    match backend {
        // Redisson's unlock latches (one per unlock) are named under a prefix rather than
        // listed; each is deleted once its unlock is answered, or expires by itself.
        Backend::Redis => {
            lockcheck_algorithms::redis::keys_of(KEY).contains(&name.to_string())
                || name.starts_with(&lockcheck_algorithms::redis::unlock_latch_prefix(KEY))
        }
        Backend::ZooKeeper => name == format!("/{KEY}") || name.starts_with(&format!("/{KEY}/")),
        Backend::Etcd => name.starts_with(&format!("/{KEY}/")),
        // Rows of the run's own database (named KEY), dropped whole; their resource is the key.
        Backend::Mysql => name == KEY,
    }
}

/// The scripts of `examples/redis-script/NAME`.
fn example_script(name: &str) -> lockcheck_core::scenario::UserScript {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/redis-script")
        .join(name);
    lockcheck_sim::script_file::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .script
}

#[test]
fn every_name_a_lock_writes_derives_from_the_key_as_real_mode_cleans_it_up() {
    for &algorithm in Algorithm::ALL {
        let mut s = Scenario::new(algorithm);
        s.params.key = Some(KEY.into());
        s.params.fencing = algorithm.description().fencing == Fencing::Token;
        s.clients = 3;
        s.workload.acquisitions_per_client = 2;
        if algorithm.description().scripted {
            // A user's scripts write what they are given in KEYS: the key and its fence key.
            s.params.redis.script = Some(example_script("fenced.toml"));
        }
        if algorithm == Algorithm::MysqlForUpdateHeld {
            // Its lease is the server's wait_timeout: 8 hours by default.
            s.params.mysql.wait_timeout_ms = Some(10_000);
        }
        let lease = algorithm.lease_ms(&s.params);
        s.faults = vec![Fault::Pause {
            at_ms: lease / 5,
            node: "client-0".into(),
            for_ms: lease * 3 / 2,
        }];
        s.validate()
            .unwrap_or_else(|e| panic!("{}: {e}", algorithm.name()));
        let outcome = lockcheck_sim::run(&s);
        let names: std::collections::BTreeSet<&str> = outcome
            .history
            .entries
            .iter()
            .filter_map(|e| match &e.op {
                Op::Key { key, .. } => Some(key.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            !names.is_empty(),
            "{}: no key was written",
            algorithm.name()
        );
        let stray: Vec<&&str> = names
            .iter()
            .filter(|n| !covered(algorithm.backend(), n))
            .collect();
        assert!(
            stray.is_empty(),
            "{} writes {stray:?}, which real mode would neither check nor remove",
            algorithm.name()
        );
    }
}
