//! Ready-made scenarios for `lockcheck real --faults F`: a fault profile as one concrete story,
//! timed from the TTL so that its verdict does not hang on the machine's timing.
//!
//! A real run cannot search fault schedules the way `explore` does (each case takes real seconds),
//! so each profile is the one schedule that tells its story:
//!
//! - `none`: the clients contend for the lock, each holding it for a quarter of the TTL, with no
//!   fault. Any violation is a bug.
//! - `pause`: the holder is paused past its lease. `client-0` gets the lock first: every other
//!   client is held back (paused) for the first TTL/10. At TTL/5, inside its critical section
//!   (it works for TTL/2), `client-0` is paused for 1.05 × TTL, until 1.25 × TTL: the lease ends at
//!   TTL on the server, another client takes the lock and enters, and `client-0` wakes up and
//!   touches the resource while that client is still inside (it works for TTL/2 as well).
//!   The retry delay is TTL/10 at most, so the next client is in well before `client-0` wakes.
//!
//! The "TTL" of a story is the time after which the server ends a lock its holder no longer
//! talks about: the lease (`ttl_ms`) of the Redis locks and of `mysql-row`, and for
//! `mysql-for-update-held` the server's `wait_timeout` (`wait_timeout_ms`): the holder's
//! connection sits idle from its acquisition, so the server closes it, rolls its transaction back
//! and hands the row to the waiter whose `SELECT … FOR UPDATE` has been blocked on it — the
//! holder's pause of 1.05 × TTL from TTL/5 keeps its connection idle past that. `mysql-unique` has
//! no lease at all: its stories run with the TTL only as their time scale (and the pause, which
//! nothing expires, breaks nothing).

use lockcheck_sim::scenario::{Algorithm, Fault, Scenario, ScenarioError, Workload};

/// A fault profile of `lockcheck real`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// No fault.
    None,
    /// The first holder is paused longer than the TTL while inside its critical section.
    Pause,
}

impl Profile {
    /// Every profile, by name.
    pub const ALL: &'static [(Profile, &'static str)] =
        &[(Profile::None, "none"), (Profile::Pause, "pause")];

    /// The profile called `name`.
    pub fn from_name(name: &str) -> Option<Profile> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(p, _)| *p)
    }

    /// The profile's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .expect("every profile is named")
    }
}

/// The size of a run built from a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Clients, `client-0` … (the pause story needs at least 2).
    pub clients: u32,
    /// The lock's TTL in ms: its lease, or for `mysql-for-update-held` the server's
    /// `wait_timeout` (a whole number of seconds against a real MariaDB).
    pub ttl_ms: u64,
    /// Clients stop acquiring after this long, in ms.
    pub duration_ms: u64,
    /// Servers (Redlock masters); `None`: the algorithm's default.
    pub nodes: Option<u32>,
    /// Seed of the clients' randomness (tokens, retry jitter).
    pub seed: u64,
}

impl Default for Shape {
    /// Three clients, a 2 s TTL (short, so a real run takes seconds), at most 30 s.
    fn default() -> Self {
        Shape {
            clients: 3,
            ttl_ms: 2_000,
            duration_ms: 30_000,
            nodes: None,
            seed: 0,
        }
    }
}

/// The scenario telling `profile`'s story for `algorithm` at `shape`, validated.
pub fn scenario(
    algorithm: Algorithm,
    profile: Profile,
    shape: &Shape,
) -> Result<Scenario, ScenarioError> {
    let ttl = shape.ttl_ms;
    let mut s = Scenario::new(algorithm);
    s.clients = shape.clients;
    s.duration_ms = shape.duration_ms;
    s.seed = shape.seed;
    match algorithm {
        Algorithm::MysqlForUpdateHeld => s.params.wait_timeout_ms = Some(ttl),
        // No lease: the TTL is only the story's time scale.
        Algorithm::MysqlUnique => {}
        _ => s.params.ttl_ms = Some(ttl),
    }
    s.params.nodes = shape.nodes;
    s.params.retry_delay_ms = (ttl / 10).clamp(1, 200);
    match profile {
        Profile::None => {
            s.workload = Workload {
                acquisitions_per_client: 3,
                hold_ms: ttl / 4,
                think_ms: 100,
                ..Workload::default()
            };
        }
        Profile::Pause => {
            if shape.clients < 2 {
                return Err(ScenarioError::Invalid(
                    "clients: the pause story needs at least 2 clients (one to pause, one to take \
                     the lock meanwhile)"
                        .into(),
                ));
            }
            s.workload = Workload {
                acquisitions_per_client: 1,
                hold_ms: ttl / 2,
                think_ms: 100,
                ..Workload::default()
            };
            s.faults = (1..shape.clients)
                .map(|c| Fault::Pause {
                    at_ms: 0,
                    node: format!("client-{c}"),
                    for_ms: (ttl / 10).max(1),
                })
                .collect();
            s.faults.push(Fault::Pause {
                at_ms: ttl / 5,
                node: "client-0".into(),
                for_ms: ttl * 5 / 4 - ttl / 5,
            });
        }
    }
    s.validate()?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_outlasts_the_lease_and_ends_inside_the_next_holders_section() {
        let s = scenario(Algorithm::SingleRedis, Profile::Pause, &Shape::default()).unwrap();
        let Some(Fault::Pause { at_ms, for_ms, .. }) = s.faults.last() else {
            panic!("the holder's pause comes last: {:?}", s.faults);
        };
        let ttl = s.algorithm.lease_ms(&s.params);
        assert!(*for_ms > ttl, "the pause outlasts the TTL");
        let wakes = at_ms + for_ms;
        let next_enters_by = ttl + s.params.retry_delay_ms;
        let next_leaves_after = ttl + s.workload.hold_ms;
        assert!(next_enters_by < wakes && wakes < next_leaves_after);
    }

    #[test]
    fn the_mysql_stories_use_the_servers_own_timeout_as_their_ttl() {
        for algorithm in [
            Algorithm::MysqlRow,
            Algorithm::MysqlUnique,
            Algorithm::MysqlForUpdateHeld,
        ] {
            for &(profile, _) in Profile::ALL {
                let s = scenario(algorithm, profile, &Shape::default()).unwrap();
                assert_eq!(
                    s.algorithm.lease_ms(&s.params) == 2_000,
                    algorithm != Algorithm::MysqlUnique
                );
            }
        }
        let s = scenario(
            Algorithm::MysqlForUpdateHeld,
            Profile::Pause,
            &Shape::default(),
        )
        .unwrap();
        assert_eq!(s.params.wait_timeout_ms, Some(2_000));
        assert_eq!(s.params.ttl_ms, None);
    }

    #[test]
    fn profiles_round_trip_by_name() {
        for &(p, name) in Profile::ALL {
            assert_eq!(Profile::from_name(name), Some(p));
            assert_eq!(p.name(), name);
        }
        assert_eq!(Profile::from_name("clock-jump"), None);
    }
}
