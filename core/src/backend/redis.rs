//! Redis: its parameter group (`params.redis`), the rules a Redis lock's scenario follows, and
//! its servers' names (`redis-0`, its replicas `redis-1`, …, or Redlock's masters).

use super::{Common, Module};
use crate::persistence::Persistence;
use lockcheck_algorithms::describe::{Order, Servers};
use lockcheck_algorithms::redis::script_spec::{Expect, UserScript};
use serde::{Deserialize, Serialize};

/// `WAIT`'s timeout when a scenario gives none.
pub const DEFAULT_WAIT_REPLICAS_TIMEOUT_MS: u64 = 50;
/// A replica pulls its primary's data set this often when a scenario gives no
/// `params.redis.replication_lag_ms`.
pub const DEFAULT_REPLICATION_LAG_MS: u64 = 100;
/// redis-fair: how long a waiter keeps its place without polling, when a scenario gives none.
pub const DEFAULT_QUEUE_TIMEOUT_MS: u64 = 5_000;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `params.redis`: settings of the Redis servers and of the Redis locks' clients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisParams {
    /// Asynchronous replicas of the one server (`redis-1`, …; the single-server locks only;
    /// default 0). Clients always talk to the current primary; `failover` promotes a replica.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: u32,
    /// A replica pulls the primary's data set this often (default 100): writes younger than
    /// that are lost if the primary dies and a replica is promoted. Only with replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_lag_ms: Option<u64>,
    /// After acquiring, `WAIT` for this many replicas to acknowledge the lock, as Redisson can;
    /// fewer within `wait_timeout_ms` and the client gives the lock back (default 0: no WAIT).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wait_replicas: u32,
    /// `WAIT`'s timeout (default 50). Only with `wait_replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_timeout_ms: Option<u64>,
    /// How long a waiter keeps its place in a fair lock's queue without polling again, judged
    /// by the clients' wall clocks (default 5000). Only for a fair lock (redis-fair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_timeout_ms: Option<u64>,
    /// The user's scripts, for `redis-script` (and only for it): embedded whole, so that a
    /// report replays without the file they came from (`lockcheck … --script FILE` reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<UserScript>,
}

impl RedisParams {
    /// `replication_lag_ms`, or its default.
    pub fn replication_lag_ms(&self) -> u64 {
        self.replication_lag_ms
            .unwrap_or(DEFAULT_REPLICATION_LAG_MS)
    }

    /// `WAIT`'s timeout, or its default.
    pub fn wait_timeout_ms(&self) -> u64 {
        self.wait_timeout_ms
            .unwrap_or(DEFAULT_WAIT_REPLICAS_TIMEOUT_MS)
    }

    /// `queue_timeout_ms`, or its default.
    pub fn queue_timeout_ms(&self) -> u64 {
        self.queue_timeout_ms.unwrap_or(DEFAULT_QUEUE_TIMEOUT_MS)
    }
}

/// The Redis backend, as [`Module`] asks.
pub struct Redis;

impl Module for Redis {
    const NAME: &'static str = "redis";
    const SERVER_PREFIX: &'static str = "redis";
    // Redis keeps its data set in memory unless told otherwise.
    const PERSISTENCE: Persistence = Persistence::None;
    type Params = RedisParams;

    fn check_ranges(r: &RedisParams) -> Result<(), String> {
        use crate::limits::{self, positive_ms, within};
        within("params.redis.replicas", r.replicas, 0, limits::MAX_REPLICAS)?;
        let given_ms = [
            ("params.redis.replication_lag_ms", r.replication_lag_ms),
            ("params.redis.wait_timeout_ms", r.wait_timeout_ms),
            ("params.redis.queue_timeout_ms", r.queue_timeout_ms),
        ];
        for (name, ms) in given_ms {
            if let Some(ms) = ms {
                positive_ms(name, ms)?;
            }
        }
        Ok(())
    }

    fn check_group(r: &RedisParams, common: &Common) -> Result<(), String> {
        let name = common.algorithm.name();
        check_script(r, common)?;
        if r.queue_timeout_ms.is_some() && common.algorithm.description().order != Order::Fifo {
            return Err(format!(
                "params.redis.queue_timeout_ms: {name} has no queue of waiters; it applies to a \
                 fair lock"
            ));
        }
        if r.replication_lag_ms.is_some() && r.replicas == 0 {
            return Err(
                "params.redis.replication_lag_ms: there is no replica to lag (params.redis.replicas \
                 is 0)"
                    .into(),
            );
        }
        if r.wait_timeout_ms.is_some() && r.wait_replicas == 0 {
            return Err(
                "params.redis.wait_timeout_ms: WAIT's timeout, but nothing waits \
                 (params.redis.wait_replicas is 0)"
                    .into(),
            );
        }
        Ok(())
    }

    fn check_nodes(name: &str, n: u32) -> Result<(), String> {
        Err(format!(
            "params.nodes: {name} runs against exactly 1 server, got {n}"
        ))
    }

    fn check_servers(r: &RedisParams, common: &Common) -> Result<(), String> {
        let name = common.algorithm.name();
        let description = common.algorithm.description();
        if r.replicas > 0 || r.wait_replicas > 0 {
            if !description.replicas {
                return Err(match description.servers {
                    Servers::Masters { .. } => format!(
                        "params.redis.replicas: {name}'s masters are independent by design; \
                         replicas are modelled for the single-server locks"
                    ),
                    Servers::One => format!("params.redis.replicas: not modelled for {name}"),
                });
            }
            if r.wait_replicas > r.replicas {
                return Err(format!(
                    "params.redis.wait_replicas: {} replicas cannot acknowledge when there are {}",
                    r.wait_replicas, r.replicas
                ));
            }
        }
        Ok(())
    }
}

/// `params.redis.script` given exactly to the algorithm that runs it, in a shape it can run: a
/// renewal to run when the watchdog is on, an integer to read as the fencing token when fencing
/// is. (Whether the Lua compiles is checked where Lua is: the simulator's `script_file`, when
/// the CLI reads the user's file.)
fn check_script(r: &RedisParams, common: &Common) -> Result<(), String> {
    let name = common.algorithm.name();
    let scripted = common.algorithm.description().scripted;
    let Some(script) = &r.script else {
        return match scripted {
            true => Err(format!(
                "params.redis.script: {name} runs your Lua scripts and none are given \
                 (lockcheck: --script FILE)"
            )),
            false => Ok(()),
        };
    };
    if !scripted {
        return Err(format!(
            "params.redis.script: {name} runs its own scripts; a user's scripts are for an \
             algorithm that runs them (redis-script)"
        ));
    }
    script
        .check()
        .map_err(|e| format!("params.redis.script: {e}"))?;
    if common.watchdog && script.extend.is_none() {
        return Err(
            "params.watchdog: the scripts have no extend script to renew the lock with".into(),
        );
    }
    let last = script.acquire.last().map(|s| s.success);
    if common.fencing && last != Some(Expect::Positive) {
        return Err(format!(
            "params.fencing: the fencing token is the last acquire script's integer reply, so \
             that script's reply must be read as integer>0 (it is read as {})",
            last.map_or_else(|| "nothing".to_string(), |e| e.to_string())
        ));
    }
    Ok(())
}
