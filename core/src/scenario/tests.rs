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
    for (i, a) in crate::backend::ALL.iter().enumerate() {
        for b in &crate::backend::ALL[i + 1..] {
            assert_ne!(a.server_prefix(), b.server_prefix());
            assert_ne!(a.name(), b.name());
        }
    }
}

use lockcheck_algorithms::describe::Fencing;

/// What the scenario's validation makes of each description: a default scenario is valid,
/// and each capability the description denies is refused by name.
#[test]
fn validation_follows_each_description() {
    for &a in Algorithm::ALL {
        let d = a.description();
        let valid = |f: &dyn Fn(&mut Scenario)| {
            let mut s = runnable(a);
            f(&mut s);
            s.validate()
        };
        assert_eq!(valid(&|_| {}), Ok(()), "{}", d.name);
        let fencing = valid(&|s| s.params.fencing = true);
        assert_eq!(
            fencing.is_ok(),
            d.fencing == Fencing::Token,
            "{}: {fencing:?}",
            d.name
        );
        let watchdog = valid(&|s| s.params.watchdog = true);
        assert_eq!(watchdog.is_ok(), d.renews, "{}: {watchdog:?}", d.name);
        let replicas = valid(&|s| s.params.redis.replicas = 1);
        assert_eq!(replicas.is_ok(), d.replicas, "{}: {replicas:?}", d.name);
        let readers = valid(&|s| s.workload.read_fraction = Some(0.5));
        assert_eq!(readers.is_ok(), d.readers, "{}: {readers:?}", d.name);
        let nested = valid(&|s| s.workload.reentrant_depth = 2);
        assert_eq!(nested.is_ok(), d.reentrant, "{}: {nested:?}", d.name);
        let ttl = valid(&|s| s.params.ttl_ms = Some(5_000));
        assert_eq!(
            ttl.is_ok(),
            matches!(d.lease, Lease::Ttl { .. }),
            "{}: {ttl:?}",
            d.name
        );
        if let Servers::Masters { min, .. } = d.servers {
            assert!(valid(&|s| s.params.nodes = Some(min - 1)).is_err());
            assert!(valid(&|s| s.params.nodes = Some(min + 1)).is_err(), "even");
        } else if d.backend.check_nodes(d.name, 3).is_ok() {
            // One service of several members, as the backend's module says: a standalone
            // server (one etcd member) or an odd ensemble (cluster).
            assert_eq!(valid(&|s| s.params.nodes = Some(3)), Ok(()), "{}", d.name);
            assert!(valid(&|s| s.params.nodes = Some(2)).is_err(), "{}", d.name);
        } else {
            assert!(valid(&|s| s.params.nodes = Some(3)).is_err(), "{}", d.name);
        }
    }
}

#[test]
fn the_lease_is_what_the_description_says_ends_a_silent_holder() {
    for &a in Algorithm::ALL {
        let p = Params::default();
        let named = a.lease_named(&p).map(|(name, _)| name);
        let expected = match a.lease() {
            Lease::Ttl { optional: false } => Some("TTL"),
            Lease::Session => Some("session timeout"),
            Lease::IdleConnection => Some("wait_timeout"),
            Lease::Ttl { optional: true } | Lease::None => None,
        };
        assert_eq!(named, expected, "{}", a.name());
    }
}

/// The backend an algorithm is matched to is the one its user-facing name promises; a name
/// that says none is an error here, not a Redis lock by default.
#[test]
fn every_algorithm_runs_on_the_backend_its_name_says() {
    for &a in Algorithm::ALL {
        let name = a.name();
        let by_name = if name.starts_with("zk-") {
            Backend::ZooKeeper
        } else if name.starts_with("mysql-") {
            Backend::Mysql
        } else if name.contains("redis") || name == "redlock" {
            Backend::Redis
        } else if name.starts_with("etcd-") {
            Backend::Etcd
        } else {
            panic!("{name}: its name says no backend; name it after its server");
        };
        assert_eq!(a.backend(), by_name, "{name}");
    }
}

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::from_json(text)
}

#[test]
fn a_partition_holds_messages_only_when_it_says_so_and_says_so_only_then() {
    let text = r#"{"algorithm": "redlock", "faults": [
        {"fault": "partition", "at_ms": 0, "isolate": ["redis-0"], "for_ms": 10, "hold": true},
        {"fault": "partition", "at_ms": 20, "isolate": ["redis-1"], "for_ms": 10}]}"#;
    let s = Scenario::from_json(text).unwrap();
    let holds: Vec<bool> = s
        .faults
        .iter()
        .map(|f| matches!(f, Fault::Partition { hold: true, .. }))
        .collect();
    assert_eq!(holds, [true, false]);
    // A losing partition is written as before the option existed, so older reports and
    // their history digests stay as they were.
    let json = serde_json::to_string(&s.faults).unwrap();
    assert_eq!(json.matches("\"hold\"").count(), 1, "{json}");
    let bad = text.replace("\"hold\": true", "\"hold\": \"yes\"");
    assert!(Scenario::from_json(&bad).is_err());
}

#[test]
fn every_algorithm_round_trips_by_name() {
    for &a in Algorithm::ALL {
        assert_eq!(Algorithm::from_name(a.name()), Some(a));
        let doc = runnable(a).to_json();
        assert_eq!(Scenario::from_json(&doc).unwrap().algorithm, a);
    }
}

#[test]
fn defaults_fill_a_minimal_file() {
    let s = parse(r#"{"algorithm": "single-redis"}"#).unwrap();
    assert_eq!(s, Scenario::new(Algorithm::SingleRedis));
    assert_eq!(s.params.ttl_ms_for(s.algorithm), Some(10_000));
    assert_eq!(Scenario::from_json(&s.to_json()).unwrap(), s);
}

#[test]
fn unknown_algorithm_is_named() {
    let e = parse(r#"{"algorithm": "paxos-lock"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("algorithm") && e.contains("paxos-lock"), "{e}");
}

#[test]
fn unknown_keys_are_errors() {
    let e = parse(r#"{"algorithm": "single-redis", "params": {"tll_ms": 5}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tll_ms"), "{e}");
    let e = parse(
        r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "crash", "node": "redis-0", "x": 1}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("faults[0]") && e.contains('x'), "{e}");
}

#[test]
fn each_backend_has_its_group_of_params() {
    let s = parse(
        r#"{"algorithm": "single-redis", "params": {"redis": {"replicas": 1, "wait_replicas": 1, "wait_timeout_ms": 20}}}"#,
    )
    .unwrap();
    assert_eq!(s.params.redis.replicas, 1);
    assert_eq!(s.params.redis.wait_timeout_ms(), 20);
    let s = parse(
        r#"{"algorithm": "zk-sequential", "params": {"zookeeper": {"session_timeout_ms": 8000, "suspended_is_lost": true}}}"#,
    )
    .unwrap();
    assert_eq!(s.params.zookeeper.session_timeout_ms(), 8_000);
    let s = parse(
        r#"{"algorithm": "mysql-for-update-held", "params": {"mysql": {"wait_timeout_ms": 3000, "lock_wait_timeout_ms": 2000}}}"#,
    )
    .unwrap();
    assert_eq!(s.params.mysql.wait_timeout_ms(), 3_000);
    assert_eq!(s.params.mysql.lock_wait_timeout_ms(), 2_000);
    // Written back grouped, and read back the same.
    let json = s.to_json();
    assert!(json.contains("\"mysql\""), "{json}");
    assert_eq!(Scenario::from_json(&json).unwrap(), s);
}

/// The issue's example: a setting of another backend is refused by name, not ignored.
#[test]
fn a_setting_of_another_backend_is_refused() {
    for (text, field) in [
        (
            r#"{"algorithm": "single-redis", "params": {"zookeeper": {"session_timeout_ms": 8000}}}"#,
            "params.zookeeper",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"session_timeout_ms": 8000}}"#,
            "params.zookeeper",
        ),
        (
            r#"{"algorithm": "zk-herd", "params": {"mysql": {"lock_wait_timeout_ms": 1000}}}"#,
            "params.mysql",
        ),
        (
            r#"{"algorithm": "mysql-row", "params": {"redis": {"queue_timeout_ms": 1000}}}"#,
            "params.redis",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"redis": {"queue_timeout_ms": 1000}}}"#,
            "params.redis.queue_timeout_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"redis": {"replication_lag_ms": 50}}}"#,
            "params.redis.replication_lag_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"redis": {"wait_timeout_ms": 50}}}"#,
            "params.redis.wait_timeout_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"allow_even_nodes": true}}"#,
            "params.allow_even_nodes",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(field), "{text}: {e}");
    }
}

#[test]
fn a_zookeeper_lock_runs_against_one_server_or_an_odd_ensemble() {
    for n in [1, 3, 5] {
        let text = format!(r#"{{"algorithm": "zk-sequential", "params": {{"nodes": {n}}}}}"#);
        let scenario = parse(&text).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert_eq!(
            scenario
                .topology()
                .with_role(crate::topology::Role::Server)
                .len(),
            n
        );
    }
    let e = parse(r#"{"algorithm": "zk-herd", "params": {"nodes": 4}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("params.nodes") && e.contains("odd"), "{e}");
}

/// Files written before the groups (scenario files, committed reports) still read, to the
/// same settings; the old writer's defaults, written into every file, count as not given.
#[test]
fn the_flat_names_of_before_the_groups_still_read() {
    let old = parse(
        r#"{"algorithm": "single-redis", "params": {"replicas": 1, "wait_replicas": 1, "wait_timeout_ms": 30, "replication_lag_ms": 100, "queue_timeout_ms": 5000, "session_timeout_ms": 10000}}"#,
    )
    .unwrap();
    assert_eq!(
        old.params.redis,
        RedisParams {
            replicas: 1,
            wait_replicas: 1,
            wait_timeout_ms: Some(30),
            ..RedisParams::default()
        }
    );
    assert_eq!(old.params.zookeeper, ZooKeeperParams::default());
    let old = parse(
        r#"{"algorithm": "mysql-for-update-held", "params": {"wait_timeout_ms": 10000, "lock_wait_timeout_ms": 2000, "session_timeout_ms": 10000, "queue_timeout_ms": 5000, "replication_lag_ms": 100}}"#,
    )
    .unwrap();
    assert_eq!(old.params.mysql.wait_timeout_ms, Some(10_000));
    assert_eq!(old.params.mysql.lock_wait_timeout_ms, Some(2_000));
    assert_eq!(old.params.redis, RedisParams::default());
    let old = parse(
        r#"{"algorithm": "zk-sequential", "params": {"session_timeout_ms": 6000, "suspended_is_lost": true}}"#,
    )
    .unwrap();
    assert_eq!(old.params.zookeeper.session_timeout_ms, Some(6_000));
    assert!(old.params.zookeeper.suspended_is_lost);
    let e = parse(
        r#"{"algorithm": "zk-sequential", "params": {"session_timeout_ms": 6000, "zookeeper": {"session_timeout_ms": 8000}}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("once"), "{e}");
}

#[test]
fn impossible_durations_are_errors() {
    for (doc, needle) in [
        (
            r#"{"algorithm": "single-redis", "params": {"ttl_ms": 0}}"#,
            "ttl_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "params": {"ttl_ms": -5}}"#,
            "params.ttl_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "pause", "node": "client-0"}]}"#,
            "for_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "pause", "node": "client-0", "for_ms": -1}]}"#,
            "for_ms",
        ),
        (
            r#"{"algorithm": "single-redis", "duration_ms": 0}"#,
            "duration_ms",
        ),
    ] {
        let e = parse(doc).unwrap_err().to_string();
        assert!(e.contains(needle), "{doc}: {e}");
    }
}

#[test]
fn nodes_must_exist_and_restarts_follow_crashes() {
    let e = parse(
        r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "crash", "node": "redis-7"}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("redis-7"), "{e}");
    let e = parse(
        r#"{"algorithm": "single-redis", "faults": [{"at_ms": 1, "fault": "restart", "node": "redis-0"}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not crashed"), "{e}");
    parse(
        r#"{"algorithm": "single-redis", "faults": [
            {"at_ms": 5, "fault": "restart", "node": "redis-0"},
            {"at_ms": 5, "fault": "crash", "node": "redis-0"}]}"#,
    )
    .expect_err("a restart listed first at the same time still comes before the crash");
}

#[test]
fn malformed_json_is_an_error() {
    assert!(matches!(
        parse("{\"algorithm\": "),
        Err(ScenarioError::Parse { .. })
    ));
}
