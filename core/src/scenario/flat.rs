//! The flat parameter names of files written before the backends' groups, still read.

use super::params::{default_drift_factor, default_request_timeout_ms, default_retry_delay_ms};
use super::*;

/// `params` as a file may write it: the grouped names, and the flat names that files written
/// before the groups used (`session_timeout_ms` for `zookeeper.session_timeout_ms`, …), so that
/// old scenario files and committed reports still read. A flat name given together with its
/// grouped twin is an error. The flat `wait_timeout_ms` meant Redis's `WAIT` timeout when
/// `wait_replicas` was set and MySQL's `wait_timeout` otherwise. Writers before the groups wrote
/// `session_timeout_ms`, `queue_timeout_ms` and `replication_lag_ms` into every file, at their
/// defaults: a flat one at its default counts as not given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ParamsFile {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    nodes: Option<u32>,
    #[serde(default)]
    allow_even_nodes: bool,
    #[serde(default)]
    ttl_ms: Option<u64>,
    #[serde(default = "default_drift_factor")]
    drift_factor: f64,
    #[serde(default)]
    fencing: bool,
    #[serde(default)]
    watchdog: bool,
    #[serde(default)]
    persistence: Option<Persistence>,
    #[serde(default)]
    restart_delay_ms: u64,
    #[serde(default)]
    per_node: BTreeMap<String, NodeParams>,
    #[serde(default = "default_retry_delay_ms")]
    retry_delay_ms: u64,
    #[serde(default)]
    retry_count: Option<u32>,
    #[serde(default = "default_request_timeout_ms")]
    request_timeout_ms: u64,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    redis: Option<RedisParams>,
    #[serde(default)]
    zookeeper: Option<ZooKeeperParams>,
    #[serde(default)]
    mysql: Option<MysqlParams>,
    #[serde(default)]
    etcd: Option<EtcdParams>,
    // The flat names of before the groups.
    #[serde(default)]
    replicas: Option<u32>,
    #[serde(default)]
    replication_lag_ms: Option<u64>,
    #[serde(default)]
    wait_replicas: Option<u32>,
    #[serde(default)]
    wait_timeout_ms: Option<u64>,
    #[serde(default)]
    queue_timeout_ms: Option<u64>,
    #[serde(default)]
    session_timeout_ms: Option<u64>,
    #[serde(default)]
    suspended_is_lost: Option<bool>,
    #[serde(default)]
    lock_wait_timeout_ms: Option<u64>,
}

impl TryFrom<ParamsFile> for Params {
    type Error = String;

    fn try_from(f: ParamsFile) -> Result<Params, String> {
        let mut redis = f.redis.unwrap_or_default();
        let mut zookeeper = f.zookeeper.unwrap_or_default();
        let mut mysql = f.mysql.unwrap_or_default();
        // Moves a flat name into its group, unless the group gives it too.
        fn flat<T: PartialEq>(
            name: &str,
            group: &str,
            old: Option<T>,
            slot: &mut Option<T>,
        ) -> Result<(), String> {
            match (old, slot.is_some()) {
                (Some(_), true) => Err(format!(
                    "params.{name} and params.{group}.{name} are one setting: give it once, in \
                     params.{group}"
                )),
                (Some(v), false) => {
                    *slot = Some(v);
                    Ok(())
                }
                (None, _) => Ok(()),
            }
        }
        let not_default = |v: Option<u64>, default: u64| v.filter(|&v| v != default);
        let mut replicas = (redis.replicas > 0).then_some(redis.replicas);
        flat(
            "replicas",
            "redis",
            f.replicas.filter(|&n| n > 0),
            &mut replicas,
        )?;
        redis.replicas = replicas.unwrap_or(0);
        let mut wait_replicas = (redis.wait_replicas > 0).then_some(redis.wait_replicas);
        flat(
            "wait_replicas",
            "redis",
            f.wait_replicas.filter(|&n| n > 0),
            &mut wait_replicas,
        )?;
        redis.wait_replicas = wait_replicas.unwrap_or(0);
        flat(
            "replication_lag_ms",
            "redis",
            not_default(f.replication_lag_ms, DEFAULT_REPLICATION_LAG_MS),
            &mut redis.replication_lag_ms,
        )?;
        flat(
            "queue_timeout_ms",
            "redis",
            not_default(f.queue_timeout_ms, DEFAULT_QUEUE_TIMEOUT_MS),
            &mut redis.queue_timeout_ms,
        )?;
        if redis.wait_replicas > 0 {
            flat(
                "wait_timeout_ms",
                "redis",
                f.wait_timeout_ms,
                &mut redis.wait_timeout_ms,
            )?;
        } else {
            flat(
                "wait_timeout_ms",
                "mysql",
                f.wait_timeout_ms,
                &mut mysql.wait_timeout_ms,
            )?;
        }
        flat(
            "session_timeout_ms",
            "zookeeper",
            not_default(f.session_timeout_ms, DEFAULT_SESSION_TIMEOUT_MS),
            &mut zookeeper.session_timeout_ms,
        )?;
        if f.suspended_is_lost == Some(true) {
            if zookeeper.suspended_is_lost {
                return Err(
                    "params.suspended_is_lost and params.zookeeper.suspended_is_lost are \
                            one setting: give it once, in params.zookeeper"
                        .into(),
                );
            }
            zookeeper.suspended_is_lost = true;
        }
        flat(
            "lock_wait_timeout_ms",
            "mysql",
            f.lock_wait_timeout_ms,
            &mut mysql.lock_wait_timeout_ms,
        )?;
        Ok(Params {
            key: f.key,
            nodes: f.nodes,
            allow_even_nodes: f.allow_even_nodes,
            ttl_ms: f.ttl_ms,
            drift_factor: f.drift_factor,
            fencing: f.fencing,
            watchdog: f.watchdog,
            persistence: f.persistence,
            restart_delay_ms: f.restart_delay_ms,
            per_node: f.per_node,
            retry_delay_ms: f.retry_delay_ms,
            retry_count: f.retry_count,
            request_timeout_ms: f.request_timeout_ms,
            variant: f.variant,
            redis,
            zookeeper,
            mysql,
            etcd: f.etcd.unwrap_or_default(),
        })
    }
}
