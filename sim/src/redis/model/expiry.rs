//! Deadlines (Redis's `expire.c`): the `EXPIRE` family with Redis 7's conditions, `PERSIST`,
//! `TTL` and `PTTL`, lazy expiry (every lookup
//! goes through [`Keyspace::live`]) and active expiry ([`RedisModel::expire_due`], run when the
//! harness chooses).

use lockcheck_algorithms::redis::command::{ExpireCommand, ExpireOptions, Reply};

use super::{Entry, KeyEffect, Keyspace, RedisModel};

impl Entry {
    /// Redis's `keyIsExpired`: a key is still there at its deadline and gone one millisecond
    /// later. (The `EXPIRE` family uses `<=` instead; see [`Keyspace::expire_generic`].)
    fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|when| now_ms > when)
    }
}

impl Keyspace {
    /// The key's entry if it is live. Every access goes through here because Redis expires keys
    /// lazily on access: a key past its deadline is removed (and reported) the moment a command
    /// touches it, whatever the command.
    pub(super) fn live(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Option<&mut Entry> {
        if self.data.get(key)?.is_expired(now_ms) {
            if let Some((key, entry)) = self.data.remove_entry(key) {
                effects.push(KeyEffect::Expired {
                    key,
                    value: entry.value.into_string(),
                });
            }
            return None;
        }
        self.data.get_mut(key)
    }

    /// The `EXPIRE` family (`EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`), following Redis's
    /// `expireGenericCommand`: a deadline that overflows is an error even for a missing key; a
    /// missing key replies 0, and so does a key whose deadline fails the condition (NX: it has
    /// one; XX: it has none; GT: the new one is not later, or it has none, which counts as
    /// infinite; LT: it has one and the new one is not earlier); a deadline at or before now
    /// deletes the key at once and still replies 1 (Redis propagates it as a `DEL` and fires a
    /// `del` event, hence `Deleted`).
    pub(super) fn expire_generic(
        &mut self,
        key: &str,
        command: ExpireCommand,
        time: i64,
        options: ExpireOptions,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let now = signed(now_ms);
        let invalid = || {
            Reply::Error(format!(
                "ERR invalid expire time in '{}' command",
                command.name().to_ascii_lowercase()
            ))
        };
        let time = if command.in_seconds() {
            match time.checked_mul(1000) {
                Some(ms) => ms,
                None => return invalid(),
            }
        } else {
            time
        };
        let base = if command.absolute() { 0 } else { now };
        let Some(when) = time.checked_add(base) else {
            return invalid();
        };
        let Some(entry) = self.live(key, now_ms, effects) else {
            return Reply::Int(0);
        };
        let current = entry.expires_at_ms.map(signed);
        let refused = (options.nx && current.is_some())
            || (options.xx && current.is_none())
            || (options.gt && current.is_none_or(|current| when <= current))
            || (options.lt && current.is_some_and(|current| when >= current));
        if refused {
            return Reply::Int(0);
        }
        if when <= now {
            if let Some((key, entry)) = self.data.remove_entry(key) {
                effects.push(KeyEffect::Deleted {
                    key,
                    value: entry.value.into_string(),
                });
            }
        } else {
            let when = Some(when.unsigned_abs());
            entry.expires_at_ms = when;
            effects.push(KeyEffect::ExpiryChanged {
                key: key.to_owned(),
                expires_at_ms: when,
            });
        }
        Reply::Int(1)
    }

    /// `PERSIST`: the key's deadline removed (an `ExpiryChanged` to none), 1; 0 when it has
    /// none or does not exist.
    pub(super) fn persist(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.live(key, now_ms, effects) {
            Some(entry) if entry.expires_at_ms.is_some() => {
                entry.expires_at_ms = None;
                effects.push(KeyEffect::ExpiryChanged {
                    key: key.to_owned(),
                    expires_at_ms: None,
                });
                Reply::Int(1)
            }
            _ => Reply::Int(0),
        }
    }

    /// `PTTL`: the remaining milliseconds, -1 without a deadline, -2 when the key is missing.
    pub(super) fn pttl(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        Reply::Int(self.remaining_ms(key, now_ms, effects))
    }

    /// `TTL`: as `PTTL`, in seconds rounded to the nearest (`ttlGenericCommand`'s
    /// `(ttl+500)/1000`), so a key with 1.5 s left says 2 and one with 0.4 s left says 0.
    pub(super) fn ttl(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.remaining_ms(key, now_ms, effects) {
            ms if ms < 0 => Reply::Int(ms),
            ms => Reply::Int(ms.saturating_add(500) / 1000),
        }
    }

    fn remaining_ms(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> i64 {
        match self.live(key, now_ms, effects) {
            None => -2,
            Some(Entry {
                expires_at_ms: None,
                ..
            }) => -1,
            // A live key is at or before its deadline, so this is >= 0 (0 at the deadline itself).
            Some(Entry {
                expires_at_ms: Some(when),
                ..
            }) => signed(*when).saturating_sub(signed(now_ms)).max(0),
        }
    }

    fn expire_due(&mut self, now_ms: u64, effects: &mut Vec<KeyEffect>) {
        // Key order, so the effects come out the same on every replay.
        let due: Vec<String> = self
            .data
            .iter()
            .filter(|(_, entry)| entry.is_expired(now_ms))
            .map(|(key, _)| key.clone())
            .collect();
        for key in due {
            if let Some((key, entry)) = self.data.remove_entry(key.as_str()) {
                effects.push(KeyEffect::Expired {
                    key,
                    value: entry.value.into_string(),
                });
            }
        }
    }
}

impl RedisModel {
    /// Active expiry: remove every key whose deadline has passed at `now_ms` (emit `Expired`
    /// effects). Redis does this by sampling in the background; when it runs is the harness's
    /// choice, which is what makes it deterministic here.
    pub fn expire_due(&mut self, now_ms: u64, effects: &mut Vec<KeyEffect>) {
        self.keyspace.expire_due(now_ms, effects);
    }

    /// The earliest deadline of any key (server ms), expired or not: the active expiry cycle has
    /// nothing to do before it.
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.keyspace
            .data
            .values()
            .filter_map(|entry| entry.expires_at_ms)
            .min()
    }
}

/// Redis keeps times as signed 64-bit milliseconds; a clock past that is not a real clock, so
/// saturating is only there to keep the arithmetic total.
fn signed(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The absolute deadline `px` ms after `now_ms`, or `None` where Redis answers "invalid expire
/// time": a non-positive `px` or a deadline past the signed 64-bit range.
pub(super) fn deadline_after(now_ms: u64, px: u64) -> Option<u64> {
    let px = i64::try_from(px).ok().filter(|&px| px > 0)?;
    signed(now_ms).checked_add(px).map(i64::unsigned_abs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::model::testing::{bulk, deleted, ok, reply, run};

    #[test]
    fn pexpire_on_a_missing_key_replies_zero() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "PEXPIRE k 100", 0);
        assert_eq!(r, Reply::Int(0));
        assert!(effects.is_empty());
    }

    #[test]
    fn pexpire_sets_an_absolute_deadline_and_emits_expiry_changed() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k v", 0);
        let (r, effects) = run(&mut m, "PEXPIRE k 100", 50);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "k".into(),
                expires_at_ms: Some(150)
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 100), Reply::Int(50));
        // Extending replaces the deadline (it may also shorten it).
        reply(&mut m, "PEXPIRE k 10", 100);
        assert_eq!(reply(&mut m, "PTTL k", 100), Reply::Int(10));
        assert_eq!(reply(&mut m, "GET k", 111), Reply::Nil);
    }

    #[test]
    fn pexpire_with_non_positive_ms_deletes_the_key_at_once() {
        for ms in ["0", "-5"] {
            let mut m = RedisModel::new();
            reply(&mut m, "SET k v PX 1000", 0);
            let (r, effects) = run(&mut m, &format!("PEXPIRE k {ms}"), 10);
            assert_eq!(r, Reply::Int(1), "PEXPIRE k {ms}");
            assert_eq!(
                effects,
                vec![KeyEffect::Deleted {
                    key: "k".into(),
                    value: Some("v".into())
                }]
            );
            assert!(m.is_empty());
        }
    }

    #[test]
    fn pexpire_rejects_a_deadline_that_overflows_even_for_a_missing_key() {
        let mut m = RedisModel::new();
        let big = format!("PEXPIRE k {}", i64::MAX);
        assert_eq!(
            reply(&mut m, &big, 1),
            Reply::Error("ERR invalid expire time in 'pexpire' command".into())
        );
        reply(&mut m, "SET k v", 1);
        assert!(matches!(reply(&mut m, &big, 1), Reply::Error(_)));
        assert_eq!(reply(&mut m, "PTTL k", 1), Reply::Int(-1));
    }

    #[test]
    fn pttl_reports_minus_two_minus_one_or_the_remaining_ms() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(-2));
        reply(&mut m, "SET k v", 0);
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(-1));
        reply(&mut m, "SET k v PX 100", 1_000);
        assert_eq!(reply(&mut m, "PTTL k", 1_030), Reply::Int(70));
        assert_eq!(reply(&mut m, "PTTL k", 1_100), Reply::Int(0));
        assert_eq!(reply(&mut m, "PTTL k", 1_101), Reply::Int(-2));
    }

    #[test]
    fn expire_takes_seconds_and_rejects_overflow() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "EXPIRE k 10", 0), Reply::Int(0));
        reply(&mut m, "RPUSH k a", 0);
        let (r, effects) = run(&mut m, "EXPIRE k 10", 500);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "k".into(),
                expires_at_ms: Some(10_500)
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 500), Reply::Int(10_000));
        let err = Reply::Error("ERR invalid expire time in 'expire' command".into());
        assert_eq!(
            reply(&mut m, &format!("EXPIRE k {}", i64::MAX / 1000 + 1), 0),
            err
        );
        // Fits in milliseconds, but not once the clock is added.
        assert_eq!(
            reply(&mut m, &format!("EXPIRE k {}", i64::MAX / 1000), 1_000),
            err
        );
        // Zero or negative deletes at once.
        let (r, effects) = run(&mut m, "EXPIRE k 0", 600);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![deleted("k")]);
    }

    #[test]
    fn lazy_expiry_reports_each_key_once() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k v PX 1", 0);
        assert_eq!(m.len(), 1, "nothing expires without an access");
        let (_, first) = run(&mut m, "GET k", 2);
        let (_, second) = run(&mut m, "GET k", 3);
        assert_eq!(first.len(), 1);
        assert!(second.is_empty());
        let mut effects = Vec::new();
        m.expire_due(10, &mut effects);
        assert!(effects.is_empty());
    }

    #[test]
    fn expire_due_removes_only_keys_past_their_deadline_in_key_order() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET b 2 PX 10", 0);
        reply(&mut m, "SET a 1 PX 5", 0);
        reply(&mut m, "SET c 3 PX 20", 0);
        reply(&mut m, "SET d 4", 0);
        let mut effects = Vec::new();
        m.expire_due(10, &mut effects);
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "a".into(),
                value: Some("1".into())
            }]
        );
        effects.clear();
        m.expire_due(100, &mut effects);
        assert_eq!(
            effects,
            vec![
                KeyEffect::Expired {
                    key: "b".into(),
                    value: Some("2".into())
                },
                KeyEffect::Expired {
                    key: "c".into(),
                    value: Some("3".into())
                },
            ]
        );
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn expiry_follows_the_servers_clock_even_when_it_jumps_back() {
        // A server clock that jumps back before anyone touched the key makes it live again, as it
        // would on a real server: deadlines are wall-clock instants.
        let mut m = RedisModel::new();
        reply(&mut m, "SET lock a PX 100", 1_000);
        let mut effects = Vec::new();
        m.expire_due(1_050, &mut effects);
        assert!(effects.is_empty());
        assert_eq!(reply(&mut m, "PTTL lock", 900), Reply::Int(200));
        // A forward jump expires it at once.
        assert_eq!(reply(&mut m, "SET lock b NX PX 100", 60_000), ok());
    }

    #[test]
    fn a_hash_expires_lazily_and_actively_after_pexpire() {
        let mut m = RedisModel::new();
        reply(&mut m, "HINCRBY lock owner 1", 1_000);
        let (r, effects) = run(&mut m, "PEXPIRE lock 100", 1_000);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "lock".into(),
                expires_at_ms: Some(1_100)
            }]
        );
        assert_eq!(reply(&mut m, "HGET lock owner", 1_100), bulk("1"));
        // Lazily: the next access after the deadline finds nothing, and reports the expiry.
        let (r, effects) = run(&mut m, "HEXISTS lock owner", 1_101);
        assert_eq!(r, Reply::Int(0));
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "lock".into(),
                value: None
            }]
        );
        // A new HINCRBY starts a fresh hash without a deadline.
        assert_eq!(reply(&mut m, "HINCRBY lock owner 1", 1_101), Reply::Int(1));
        assert_eq!(reply(&mut m, "PTTL lock", 1_101), Reply::Int(-1));

        // Actively, for every aggregate type.
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h f v", 0);
        reply(&mut m, "RPUSH l a", 0);
        reply(&mut m, "ZADD z 1 a", 0);
        for key in ["h", "l", "z"] {
            reply(&mut m, &format!("PEXPIRE {key} 10"), 0);
        }
        let mut effects = Vec::new();
        m.expire_due(11, &mut effects);
        let expired = |key: &str| KeyEffect::Expired {
            key: key.into(),
            value: None,
        };
        assert_eq!(effects, vec![expired("h"), expired("l"), expired("z")]);
        assert!(m.is_empty());
    }

    #[test]
    fn snapshot_restore_keeps_absolute_deadlines() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET lock owner PX 100", 1_000);
        reply(&mut m, "SET counter 7", 1_000);
        let snap = m.snapshot();
        assert_eq!(RedisModel::restore(snap.clone()).snapshot(), snap);

        // Restarted before the deadline: the remaining time is measured on the same clock.
        let mut early = RedisModel::restore(snap.clone());
        assert_eq!(reply(&mut early, "PTTL lock", 1_060), Reply::Int(40));

        // Restarted after the deadline: the key is still in the data set until it is touched.
        let mut late = RedisModel::restore(snap);
        assert_eq!(late.len(), 2);
        let (r, effects) = run(&mut late, "GET lock", 5_000);
        assert_eq!(r, Reply::Nil);
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "lock".into(),
                value: Some("owner".into())
            }]
        );
        assert_eq!(reply(&mut late, "GET counter", 5_000), bulk("7"));
    }

    #[test]
    fn expire_conditions_follow_redis_7() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k v", 0);
        // Without a deadline: NX sets, XX and GT refuse, LT sets (none counts as infinite).
        assert_eq!(reply(&mut m, "PEXPIRE k 100 XX", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "PEXPIRE k 100 GT", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(-1));
        let (r, effects) = run(&mut m, "PEXPIRE k 100 NX", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "k".into(),
                expires_at_ms: Some(100)
            }]
        );
        // With one: NX refuses; GT only later, LT only earlier; XX GT combined.
        assert_eq!(run(&mut m, "PEXPIRE k 500 NX", 0), (Reply::Int(0), vec![]));
        assert_eq!(reply(&mut m, "PEXPIRE k 100 GT", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "PEXPIRE k 200 XX GT", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "PEXPIRE k 200 LT", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "PEXPIRE k 150 LT", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(150));
        // LT to a time already past deletes the key.
        let (r, effects) = run(&mut m, "EXPIRE k -1 LT", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::Deleted {
                key: "k".into(),
                value: Some("v".into())
            }]
        );
        // A missing key: 0 whatever the condition.
        assert_eq!(reply(&mut m, "EXPIRE k 1 LT", 0), Reply::Int(0));
        reply(&mut m, "SET k v", 0);
        assert_eq!(reply(&mut m, "PEXPIRE k -5 LT", 0), Reply::Int(1));
        assert!(m.is_empty());
    }

    #[test]
    fn expireat_and_pexpireat_take_instants() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k v", 1_000);
        assert_eq!(reply(&mut m, "EXPIREAT k 3", 1_000), Reply::Int(1));
        assert_eq!(reply(&mut m, "PTTL k", 1_000), Reply::Int(2_000));
        assert_eq!(reply(&mut m, "PEXPIREAT k 1200", 1_000), Reply::Int(1));
        assert_eq!(reply(&mut m, "PTTL k", 1_000), Reply::Int(200));
        // At or before now: deleted at once, 1.
        let (r, effects) = run(&mut m, "PEXPIREAT k 1000", 1_000);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects.len(), 1);
        assert!(matches!(effects[0], KeyEffect::Deleted { .. }));
        let err =
            |command: &str| Reply::Error(format!("ERR invalid expire time in '{command}' command"));
        assert_eq!(
            reply(&mut m, &format!("EXPIREAT k {}", i64::MAX / 1000 + 1), 0),
            err("expireat")
        );
        // No clock is added to an instant, so the largest one is fine.
        reply(&mut m, "SET k v", 1_000);
        assert_eq!(
            reply(&mut m, &format!("PEXPIREAT k {}", i64::MAX), 1_000),
            Reply::Int(1)
        );
        assert_eq!(
            reply(&mut m, &format!("PEXPIRE k {} GT", i64::MAX), 1_000),
            err("pexpire")
        );
    }

    #[test]
    fn persist_removes_a_deadline() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "PERSIST k", 0), Reply::Int(0));
        reply(&mut m, "SET k v", 0);
        assert_eq!(run(&mut m, "PERSIST k", 0), (Reply::Int(0), vec![]));
        reply(&mut m, "PEXPIRE k 100", 0);
        let (r, effects) = run(&mut m, "PERSIST k", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "k".into(),
                expires_at_ms: None
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(-1));
    }

    #[test]
    fn ttl_rounds_the_remaining_time_to_the_nearest_second() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "TTL k", 0), Reply::Int(-2));
        reply(&mut m, "SET k v", 0);
        assert_eq!(reply(&mut m, "TTL k", 0), Reply::Int(-1));
        reply(&mut m, "SET k v PX 10000", 0);
        assert_eq!(reply(&mut m, "TTL k", 0), Reply::Int(10));
        assert_eq!(reply(&mut m, "TTL k", 8_501), Reply::Int(1));
        assert_eq!(reply(&mut m, "TTL k", 8_500), Reply::Int(2));
        assert_eq!(reply(&mut m, "TTL k", 9_600), Reply::Int(0));
        assert_eq!(reply(&mut m, "TTL k", 10_001), Reply::Int(-2));
    }
}
