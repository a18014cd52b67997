//! Settings every ZooKeeper lock shares.

use crate::env::Env;
use std::time::Duration;

/// Settings of a ZooKeeper lock (`zk-sequential`, `zk-rwlock`, `zk-herd`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkLockConfig {
    /// The lock's node (e.g. `/lock`); created, with its ancestors, as persistent nodes when
    /// missing. The sequential locks queue their nodes under it; the herd lock IS this node.
    pub path: String,
    /// Base delay before retrying a request that got no reply, jittered in `[d/2, d]` (Curator's
    /// retry policy sleeps between retries too).
    pub retry_delay: Duration,
    /// How many failures (requests without a reply, sessions lost while waiting) one blocking
    /// acquire tolerates before giving up; `None`: until the wait runs out.
    pub retry_count: Option<u32>,
    /// Treat a disconnected session as a lost lock (Curator's advice for code that cannot
    /// tolerate doubt), instead of as a suspended one that may come back on reconnection.
    pub suspended_is_lost: bool,
}

impl ZkLockConfig {
    /// The settings of a ZooKeeper lock named `settings.key`: its node is `/KEY`.
    pub fn of(settings: &crate::describe::Settings) -> ZkLockConfig {
        ZkLockConfig {
            path: format!("/{}", settings.key),
            retry_delay: settings.retry.delay,
            retry_count: settings.retry.count,
            suspended_is_lost: settings.suspended_is_lost,
        }
    }

    /// Counts a failure and sleeps the jittered retry delay; false (without sleeping) when the
    /// retries are spent or the pause would pass `deadline` (client monotonic time).
    pub(crate) async fn back_off<E: Env>(
        &self,
        env: &E,
        deadline: Duration,
        failures: &mut u32,
    ) -> bool {
        *failures += 1;
        if self.retry_count.is_some_and(|n| *failures > n) {
            return false;
        }
        let delay = self.retry_delay;
        let pause = env.random_between(delay / 2, delay);
        if env.mono_now().saturating_add(pause) >= deadline {
            return false;
        }
        env.sleep(pause).await;
        true
    }
}
