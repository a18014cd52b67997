//! Strings (Redis's `t_string.c`): `SET` with its options, `GET` and `INCR`, the commands a
//! plain lock and its fencing counter are made of.

use lockcheck_algorithms::redis::command::{Reply, SetOptions};

use super::expiry::deadline_after;
use super::{Entry, KeyEffect, Keyspace, Value, WRONGTYPE};
use crate::redis::parse::parse_integer;

const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

impl Keyspace {
    /// `SET`, in the order of Redis's `setGenericCommand`: the expiry is validated first, then
    /// `GET` reads the old value (and fails on a non-string), then NX/XX decide. With `GET` the
    /// reply is the old value even when NX/XX stop the write.
    pub(super) fn set(
        &mut self,
        key: &str,
        value: &str,
        options: &SetOptions,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        // Redis's parseExtendedStringArgumentsOrReply refuses NX with XX before anything else
        // (found by the conformance test against redis-server).
        if options.nx && options.xx {
            return Reply::Error("ERR syntax error".into());
        }
        let expires_at_ms = match options.px {
            None => None,
            Some(px) => match deadline_after(now_ms, px) {
                Some(when) => Some(when),
                None => return Reply::Error("ERR invalid expire time in 'set' command".into()),
            },
        };
        let old = self.live(key, now_ms, effects);
        let found = old.is_some();
        let get_reply = if options.get {
            match old {
                None => Some(Reply::Nil),
                Some(entry) => match entry.value.as_str() {
                    Some(s) => Some(Reply::Bulk(s.to_owned())),
                    None => return Reply::Error(WRONGTYPE.into()),
                },
            }
        } else {
            None
        };
        if (options.nx && found) || (options.xx && !found) {
            return get_reply.unwrap_or(Reply::Nil);
        }
        // A SET without PX drops any previous deadline: the new value is a new key as far as
        // expiry goes (Redis has KEEPTTL to opt out; lock algorithms never use it).
        self.data.insert(
            key.to_owned(),
            Entry {
                value: Value::Str(value.to_owned()),
                expires_at_ms,
            },
        );
        effects.push(KeyEffect::Set {
            key: key.to_owned(),
            value: value.to_owned(),
            expires_at_ms,
        });
        get_reply.unwrap_or_else(|| Reply::Status("OK".into()))
    }

    pub(super) fn get(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.live(key, now_ms, effects) {
            None => Reply::Nil,
            Some(entry) => match entry.value.as_str() {
                Some(s) => Reply::Bulk(s.to_owned()),
                None => Reply::Error(WRONGTYPE.into()),
            },
        }
    }

    /// `INCR`: a missing key counts as 0; the key keeps its deadline, because Redis replaces the
    /// value in place rather than re-creating the key.
    pub(super) fn incr(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        let (current, expires_at_ms) = match self.live(key, now_ms, effects) {
            None => (0, None),
            Some(entry) => {
                let Some(s) = entry.value.as_str() else {
                    return Reply::Error(WRONGTYPE.into());
                };
                match parse_integer(s) {
                    Some(n) => (n, entry.expires_at_ms),
                    None => return Reply::Error(NOT_AN_INTEGER.into()),
                }
            }
        };
        let Some(next) = current.checked_add(1) else {
            return Reply::Error("ERR increment or decrement would overflow".into());
        };
        let value = next.to_string();
        self.data.insert(
            key.to_owned(),
            Entry {
                value: Value::Str(value.clone()),
                expires_at_ms,
            },
        );
        effects.push(KeyEffect::Set {
            key: key.to_owned(),
            value,
            expires_at_ms,
        });
        Reply::Int(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::model::testing::{bulk, ok, reply, run};
    use crate::redis::model::RedisModel;
    use lockcheck_algorithms::redis::command::Command;

    #[test]
    fn set_nx_fails_when_key_exists_and_succeeds_after_expiry() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "SET lock a NX PX 100", 1_000), ok());
        assert_eq!(reply(&mut m, "SET lock b NX PX 100", 1_050), Reply::Nil);
        // At the deadline itself the key is still there (Redis expires at now > when)...
        assert_eq!(reply(&mut m, "SET lock b NX PX 100", 1_100), Reply::Nil);
        assert_eq!(reply(&mut m, "GET lock", 1_100), bulk("a"));
        // ...and one millisecond later it is gone.
        let (r, effects) = run(&mut m, "SET lock b NX PX 100", 1_101);
        assert_eq!(r, ok());
        assert_eq!(
            effects,
            vec![
                KeyEffect::Expired {
                    key: "lock".into(),
                    value: Some("a".into())
                },
                KeyEffect::Set {
                    key: "lock".into(),
                    value: "b".into(),
                    expires_at_ms: Some(1_201)
                },
            ]
        );
        assert_eq!(reply(&mut m, "GET lock", 1_101), bulk("b"));
    }

    #[test]
    fn set_xx_only_overwrites_an_existing_key() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "SET k v XX", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "EXISTS k", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "SET k v", 0), ok());
        assert_eq!(reply(&mut m, "SET k w XX", 0), ok());
        assert_eq!(reply(&mut m, "GET k", 0), bulk("w"));
    }

    #[test]
    fn set_get_returns_the_old_value_even_when_nx_aborts() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "SET k a GET", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "SET k b GET", 0), bulk("a"));
        // Redis 7 replies with the old value, not nil, when NX stops the write.
        let (r, effects) = run(&mut m, "SET k c NX GET", 0);
        assert_eq!(r, bulk("b"));
        assert!(effects.is_empty());
        assert_eq!(reply(&mut m, "SET k d XX GET", 0), bulk("b"));
        assert_eq!(reply(&mut m, "SET other d XX GET", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "EXISTS other", 0), Reply::Int(0));
    }

    #[test]
    fn set_without_px_clears_a_previous_expiry() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k a PX 100", 0);
        assert_eq!(reply(&mut m, "PTTL k", 0), Reply::Int(100));
        let (_, effects) = run(&mut m, "SET k b", 10);
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "k".into(),
                value: "b".into(),
                expires_at_ms: None
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 10), Reply::Int(-1));
        assert_eq!(reply(&mut m, "GET k", 1_000_000), bulk("b"));
    }

    #[test]
    fn set_rejects_an_invalid_expire_time_before_touching_the_key() {
        let mut m = RedisModel::new();
        let zero_px = Command::Set {
            key: "k".into(),
            value: "v".into(),
            options: SetOptions {
                px: Some(0),
                ..Default::default()
            },
        };
        let overflow = Command::Set {
            key: "k".into(),
            value: "v".into(),
            options: SetOptions {
                px: Some(i64::MAX as u64),
                ..Default::default()
            },
        };
        let mut effects = Vec::new();
        for bad in [zero_px, overflow] {
            assert_eq!(
                m.apply(&bad, 5, &mut effects),
                Reply::Error("ERR invalid expire time in 'set' command".into())
            );
        }
        assert!(effects.is_empty());
        assert!(m.is_empty());
    }

    #[test]
    fn get_returns_bulk_or_nil() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "GET k", 0), Reply::Nil);
        reply(&mut m, "SET k v", 0);
        assert_eq!(reply(&mut m, "GET k", 0), bulk("v"));
    }

    #[test]
    fn incr_starts_from_zero_and_keeps_the_expiry() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "INCR n", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "n".into(),
                value: "1".into(),
                expires_at_ms: None
            }]
        );
        reply(&mut m, "SET n 41 PX 100", 0);
        let (r, effects) = run(&mut m, "INCR n", 10);
        assert_eq!(r, Reply::Int(42));
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "n".into(),
                value: "42".into(),
                expires_at_ms: Some(100)
            }]
        );
        assert_eq!(reply(&mut m, "PTTL n", 10), Reply::Int(90));
        assert_eq!(reply(&mut m, "GET n", 10), bulk("42"));
        // After expiry the counter starts again from zero.
        assert_eq!(reply(&mut m, "INCR n", 101), Reply::Int(1));
        reply(&mut m, "SET neg -5", 0);
        assert_eq!(reply(&mut m, "INCR neg", 0), Reply::Int(-4));
    }

    #[test]
    fn incr_rejects_what_redis_does_not_read_as_an_integer() {
        let mut m = RedisModel::new();
        for bad in [
            "abc",
            "",
            "+1",
            "01",
            "-0",
            "-",
            " 1",
            "1 ",
            "1.0",
            "99999999999999999999",
        ] {
            m.apply(
                &Command::Set {
                    key: "n".into(),
                    value: bad.into(),
                    options: SetOptions::default(),
                },
                0,
                &mut Vec::new(),
            );
            let (r, effects) = run(&mut m, "INCR n", 0);
            assert_eq!(r, Reply::Error(NOT_AN_INTEGER.into()), "INCR on {bad:?}");
            assert!(effects.is_empty());
            assert_eq!(reply(&mut m, "GET n", 0), bulk(bad));
        }
        reply(&mut m, &format!("SET n {}", i64::MAX), 0);
        assert_eq!(
            reply(&mut m, "INCR n", 0),
            Reply::Error("ERR increment or decrement would overflow".into())
        );
        reply(&mut m, &format!("SET n {}", i64::MIN), 0);
        assert_eq!(reply(&mut m, "INCR n", 0), Reply::Int(i64::MIN + 1));
        reply(&mut m, "SET n 0", 0);
        assert_eq!(reply(&mut m, "INCR n", 0), Reply::Int(1));
    }
}
