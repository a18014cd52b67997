//! Strings (Redis's `t_string.c`): `SET` with its options and its older forms (`SETNX`,
//! `SETEX`, `PSETEX`, `GETSET`), `GET`, `GETDEL` and the counters (`INCR`, `INCRBY`, `DECR`,
//! `DECRBY`), the commands a plain lock and its fencing counter are made of.

use lockcheck_algorithms::redis::command::{Reply, SetOptions};

use super::expiry::deadline_after;
use super::{Entry, KeyEffect, Keyspace, Value, WRONGTYPE};
use crate::redis::parse::parse_integer;

const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

impl Keyspace {
    /// `SET`, in the order of Redis's `setGenericCommand`: the expiry is validated first, then
    /// `GET` reads the old value (and fails on a non-string), then NX/XX decide. With `GET` the
    /// reply is the old value even when NX/XX stop the write. `command` names the command in
    /// the expiry's error (`SETEX` and `PSETEX` are `SET`s too).
    pub(super) fn set(
        &mut self,
        key: &str,
        value: &str,
        options: &SetOptions,
        command: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        // Redis's parseExtendedStringArgumentsOrReply refuses NX with XX, and two expiries or one
        // with KEEPTTL, before anything else (found by the conformance test against
        // redis-server); only a hand-built command gets here with them.
        let expiries = usize::from(options.px.is_some())
            + usize::from(options.pxat.is_some())
            + usize::from(options.keep_ttl);
        if (options.nx && options.xx) || expiries > 1 {
            return Reply::Error("ERR syntax error".into());
        }
        let invalid = || Reply::Error(format!("ERR invalid expire time in '{command}' command"));
        let deadline = match (options.px, options.pxat) {
            (Some(px), _) => match deadline_after(now_ms, px) {
                Some(when) => Some(when),
                None => return invalid(),
            },
            (None, Some(at)) if at > 0 && i64::try_from(at).is_ok() => Some(at),
            (None, Some(_)) => return invalid(),
            (None, None) => None,
        };
        let old = self.live(key, now_ms, effects);
        let found = old.is_some();
        // KEEPTTL keeps the deadline of whatever the key held, of any type (`setKey`).
        let kept = old.as_ref().and_then(|entry| entry.expires_at_ms);
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
        // Without an expiry option the new value is a new key as far as expiry goes: any
        // previous deadline is dropped, unless KEEPTTL keeps it.
        let expires_at_ms = if options.keep_ttl { kept } else { deadline };
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
        // An instant already past (`PXAT`/`EXAT`): the key is written and gone at once, as it is
        // for every command after it on a real server; the history says so rather than let the
        // key stand until something touches it.
        if expires_at_ms.is_some_and(|when| now_ms > when) {
            self.live(key, now_ms, effects);
        }
        get_reply.unwrap_or_else(|| Reply::Status("OK".into()))
    }

    /// `SETNX`: `SET … NX`, replying 1 when it wrote and 0 when the key existed.
    pub(super) fn setnx(
        &mut self,
        key: &str,
        value: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let options = SetOptions {
            nx: true,
            ..SetOptions::default()
        };
        match self.set(key, value, &options, "setnx", now_ms, effects) {
            Reply::Status(_) => Reply::Int(1),
            Reply::Nil => Reply::Int(0),
            other => other,
        }
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

    /// `GETDEL`: `GET`, then the key is deleted if it held a string.
    pub(super) fn getdel(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        let reply = self.get(key, now_ms, effects);
        if let Reply::Bulk(value) = &reply {
            self.data.remove(key);
            effects.push(KeyEffect::Deleted {
                key: key.to_owned(),
                value: Some(value.clone()),
            });
        }
        reply
    }

    /// `INCR`, `INCRBY`, `DECR`, `DECRBY` (Redis's `incrDecrCommand`): a missing key counts as 0;
    /// the key keeps its deadline, because Redis replaces the value in place rather than
    /// re-creating the key.
    pub(super) fn incr_by(
        &mut self,
        key: &str,
        by: Option<i64>,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let overflow = || Reply::Error("ERR increment or decrement would overflow".into());
        // Only a hand-built DECRBY of i64::MIN has no increment (the parser refuses it).
        let Some(by) = by else {
            return Reply::Error("ERR decrement would overflow".into());
        };
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
        let Some(next) = current.checked_add(by) else {
            return overflow();
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

    #[test]
    fn set_keepttl_keeps_the_deadline_of_what_the_key_held() {
        let mut m = RedisModel::new();
        reply(&mut m, "SET k a PX 100", 0);
        let (r, effects) = run(&mut m, "SET k b KEEPTTL", 10);
        assert_eq!(r, ok());
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "k".into(),
                value: "b".into(),
                expires_at_ms: Some(100)
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 10), Reply::Int(90));
        // Of any type, as setKey keeps it; a missing key gets none.
        reply(&mut m, "DEL k", 10);
        reply(&mut m, "RPUSH k x", 10);
        reply(&mut m, "PEXPIRE k 50", 10);
        assert_eq!(reply(&mut m, "SET k c KEEPTTL", 20), ok());
        assert_eq!(reply(&mut m, "PTTL k", 20), Reply::Int(40));
        assert_eq!(reply(&mut m, "SET other c KEEPTTL", 20), ok());
        assert_eq!(reply(&mut m, "PTTL other", 20), Reply::Int(-1));
    }

    #[test]
    fn set_pxat_and_exat_are_instants_and_one_already_past_is_gone_at_once() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "SET k v PXAT 1500", 1_000);
        assert_eq!(r, ok());
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "k".into(),
                value: "v".into(),
                expires_at_ms: Some(1_500)
            }]
        );
        assert_eq!(reply(&mut m, "SET k v EXAT 2", 1_000), ok());
        assert_eq!(reply(&mut m, "PTTL k", 1_000), Reply::Int(1_000));
        let (r, effects) = run(&mut m, "SET k w PXAT 999", 1_000);
        assert_eq!(r, ok());
        assert_eq!(
            effects,
            vec![
                KeyEffect::Set {
                    key: "k".into(),
                    value: "w".into(),
                    expires_at_ms: Some(999)
                },
                KeyEffect::Expired {
                    key: "k".into(),
                    value: Some("w".into())
                },
            ]
        );
        assert!(m.is_empty());
        // At the instant itself the key is still there, as for every deadline.
        assert_eq!(reply(&mut m, "SET k v PXAT 1000", 1_000), ok());
        assert_eq!(reply(&mut m, "GET k", 1_000), bulk("v"));
    }

    #[test]
    fn setnx_setex_and_psetex_are_sets_with_their_own_replies() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "SETNX k a", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "SETNX k b", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "GET k", 0), bulk("a"));
        // SETNX finds a key of any type.
        reply(&mut m, "HSET h f v", 0);
        assert_eq!(reply(&mut m, "SETNX h b", 0), Reply::Int(0));
        let (r, effects) = run(&mut m, "SETEX k 2 b", 100);
        assert_eq!(r, ok());
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "k".into(),
                value: "b".into(),
                expires_at_ms: Some(2_100)
            }]
        );
        assert_eq!(reply(&mut m, "PSETEX k 50 c", 100), ok());
        assert_eq!(reply(&mut m, "PTTL k", 100), Reply::Int(50));
        assert_eq!(reply(&mut m, "GET k", 151), Reply::Nil);
        let late = Command::SetEx {
            key: "k".into(),
            seconds: i64::MAX as u64 / 1000,
            value: "v".into(),
        };
        assert_eq!(
            m.apply(&late, 1_000, &mut Vec::new()),
            Reply::Error("ERR invalid expire time in 'setex' command".into())
        );
    }

    #[test]
    fn getset_replies_the_old_value_and_drops_the_deadline() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "GETSET k a", 0), Reply::Nil);
        reply(&mut m, "SET k a PX 100", 0);
        let (r, effects) = run(&mut m, "GETSET k b", 10);
        assert_eq!(r, bulk("a"));
        assert_eq!(
            effects,
            vec![KeyEffect::Set {
                key: "k".into(),
                value: "b".into(),
                expires_at_ms: None
            }]
        );
        assert_eq!(reply(&mut m, "PTTL k", 10), Reply::Int(-1));
    }

    #[test]
    fn getdel_replies_the_string_and_deletes_it() {
        let mut m = RedisModel::new();
        assert_eq!(run(&mut m, "GETDEL k", 0), (Reply::Nil, vec![]));
        reply(&mut m, "SET k a", 0);
        let (r, effects) = run(&mut m, "GETDEL k", 0);
        assert_eq!(r, bulk("a"));
        assert_eq!(
            effects,
            vec![KeyEffect::Deleted {
                key: "k".into(),
                value: Some("a".into())
            }]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn incrby_decr_and_decrby_count_as_incr_does() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "INCRBY n 5", 0), Reply::Int(5));
        assert_eq!(reply(&mut m, "DECR n", 0), Reply::Int(4));
        assert_eq!(reply(&mut m, "DECRBY n 10", 0), Reply::Int(-6));
        assert_eq!(reply(&mut m, "INCRBY n -4", 0), Reply::Int(-10));
        assert_eq!(reply(&mut m, "DECR missing", 0), Reply::Int(-1));
        reply(&mut m, &format!("SET n {}", i64::MIN), 0);
        let overflow = Reply::Error("ERR increment or decrement would overflow".into());
        assert_eq!(reply(&mut m, "DECR n", 0), overflow);
        assert_eq!(reply(&mut m, "INCRBY n -1", 0), overflow);
        assert_eq!(
            reply(&mut m, &format!("INCRBY n {}", i64::MAX), 0),
            Reply::Int(-1)
        );
        reply(&mut m, "SET n 3 PX 100", 0);
        assert_eq!(reply(&mut m, "DECRBY n 1", 0), Reply::Int(2));
        assert_eq!(reply(&mut m, "PTTL n", 0), Reply::Int(100));
    }
}
