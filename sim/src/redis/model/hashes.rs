//! Hashes (Redis's `t_hash.c`): what reentrant locks keep their owner and hold count in, one
//! field per owner.

use lockcheck_algorithms::redis::command::Reply;

use super::{count, KeyEffect, Keyspace, Value};
use crate::redis::parse::parse_integer;

impl Keyspace {
    fn hash(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Result<Option<&mut Vec<(String, String)>>, Reply> {
        self.typed(key, now_ms, effects, Value::hash_mut)
    }

    /// `HSET`: each pair is written in turn (so a field named twice counts once as new and ends
    /// with its last value) and reported; the key keeps its deadline.
    pub(super) fn hset(
        &mut self,
        key: &str,
        fields: &[(String, String)],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        if fields.is_empty() {
            // Only a hand-built command gets here; parsing refuses it the same way.
            return Reply::Error("ERR wrong number of arguments for 'hset' command".into());
        }
        let hash = match self.typed_or_create(key, now_ms, effects, Value::hash_mut, empty_hash) {
            Ok(hash) => hash,
            Err(reply) => return reply,
        };
        let mut created = 0;
        for (field, value) in fields {
            if hash_set(hash, field, value) {
                created += 1;
            }
            effects.push(KeyEffect::HashField {
                key: key.to_owned(),
                field: field.clone(),
                value: Some(value.clone()),
            });
        }
        Reply::Int(created)
    }

    pub(super) fn hget(
        &mut self,
        key: &str,
        field: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.hash(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(hash) => hash
                .and_then(|hash| hash_get(hash, field))
                .map_or(Reply::Nil, |value| Reply::Bulk(value.to_owned())),
        }
    }

    pub(super) fn hexists(
        &mut self,
        key: &str,
        field: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.hash(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(hash) => Reply::Int(i64::from(
                hash.is_some_and(|hash| hash_get(hash, field).is_some()),
            )),
        }
    }

    /// `HINCRBY`, in the order of Redis's `hincrbyCommand`: type check, then the stored value must
    /// read as an integer (`string2ll`), then the sum must not overflow. A missing key or field
    /// counts as 0, and a field that reaches 0 stays (only `HDEL` removes fields), which is why a
    /// reentrant lock's unlock script deletes the key itself when the count reaches 0.
    pub(super) fn hincrby(
        &mut self,
        key: &str,
        field: &str,
        increment: i64,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let current = match self.hash(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(hash) => match hash.and_then(|hash| hash_get(hash, field)) {
                None => 0,
                Some(value) => match parse_integer(value) {
                    Some(n) => n,
                    None => return Reply::Error("ERR hash value is not an integer".into()),
                },
            },
        };
        let Some(next) = current.checked_add(increment) else {
            return Reply::Error("ERR increment or decrement would overflow".into());
        };
        let hash = match self.typed_or_create(key, now_ms, effects, Value::hash_mut, empty_hash) {
            Ok(hash) => hash,
            Err(reply) => return reply,
        };
        let value = next.to_string();
        hash_set(hash, field, &value);
        effects.push(KeyEffect::HashField {
            key: key.to_owned(),
            field: field.to_owned(),
            value: Some(value),
        });
        Reply::Int(next)
    }

    /// `HDEL`: each removed field is reported, then the key's deletion if no field is left.
    pub(super) fn hdel(
        &mut self,
        key: &str,
        fields: &[String],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let hash = match self.hash(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Int(0),
            Ok(Some(hash)) => hash,
        };
        let mut removed = 0;
        for field in fields {
            if let Some(at) = hash.iter().position(|(f, _)| f == field) {
                hash.remove(at);
                removed += 1;
                effects.push(KeyEffect::HashField {
                    key: key.to_owned(),
                    field: field.clone(),
                    value: None,
                });
            }
        }
        self.delete_if_empty(key, effects);
        Reply::Int(removed)
    }

    pub(super) fn hlen(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.hash(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(hash) => Reply::Int(count(hash.map_or(0, |hash| hash.len()))),
        }
    }

    pub(super) fn hgetall(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.hash(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(hash) => Reply::Array(
                hash.into_iter()
                    .flatten()
                    .flat_map(|(field, value)| {
                        [Reply::Bulk(field.clone()), Reply::Bulk(value.clone())]
                    })
                    .collect(),
            ),
        }
    }
}

fn empty_hash() -> Value {
    Value::Hash(Vec::new())
}

fn hash_get<'a>(hash: &'a [(String, String)], field: &str) -> Option<&'a str> {
    hash.iter()
        .find(|(f, _)| f == field)
        .map(|(_, value)| value.as_str())
}

/// Writes `field` in place (an existing field keeps its position, as in a listpack) or appends
/// it; true if it is new.
fn hash_set(hash: &mut Vec<(String, String)>, field: &str, value: &str) -> bool {
    match hash.iter_mut().find(|(f, _)| f == field) {
        Some((_, old)) => {
            value.clone_into(old);
            false
        }
        None => {
            hash.push((field.to_owned(), value.to_owned()));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::model::testing::{array, bulk, deleted, field, reply, run};
    use crate::redis::model::RedisModel;
    use lockcheck_algorithms::redis::command::Command;

    #[test]
    fn hset_counts_only_new_fields_and_reports_every_field_write() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "HSET h a 1 b 2", 0);
        assert_eq!(r, Reply::Int(2));
        assert_eq!(
            effects,
            vec![field("h", "a", Some("1")), field("h", "b", Some("2"))]
        );
        // An update is reported but not counted; a field named twice counts once.
        let (r, effects) = run(&mut m, "HSET h a 9 c 3 c 4", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![
                field("h", "a", Some("9")),
                field("h", "c", Some("3")),
                field("h", "c", Some("4")),
            ]
        );
        assert_eq!(reply(&mut m, "HGET h a", 0), bulk("9"));
        assert_eq!(reply(&mut m, "HGET h c", 0), bulk("4"));
        assert_eq!(reply(&mut m, "HGET h nope", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "HGET missing a", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "HLEN h", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "HLEN missing", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "HEXISTS h b", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "HEXISTS h nope", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "HEXISTS missing b", 0), Reply::Int(0));
    }

    #[test]
    fn hgetall_lists_fields_in_insertion_order_with_updates_in_place() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "HGETALL h", 0), Reply::Array(Vec::new()));
        reply(&mut m, "HSET h z 1 a 2 m 3", 0);
        reply(&mut m, "HSET h a 20", 0);
        assert_eq!(
            reply(&mut m, "HGETALL h", 0),
            array(&["z", "1", "a", "20", "m", "3"])
        );
        // A deleted and re-added field goes to the end, as in a listpack.
        reply(&mut m, "HDEL h z", 0);
        reply(&mut m, "HSET h z 4", 0);
        assert_eq!(
            reply(&mut m, "HGETALL h", 0),
            array(&["a", "20", "m", "3", "z", "4"])
        );
    }

    #[test]
    fn hincrby_creates_the_hash_and_counts_up_and_down_to_zero_without_deleting() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "HINCRBY lock owner 1", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![field("lock", "owner", Some("1"))]);
        assert_eq!(reply(&mut m, "HINCRBY lock owner 1", 0), Reply::Int(2));
        assert_eq!(reply(&mut m, "HINCRBY lock owner -1", 0), Reply::Int(1));
        let (r, effects) = run(&mut m, "HINCRBY lock owner -1", 0);
        assert_eq!(r, Reply::Int(0));
        assert_eq!(effects, vec![field("lock", "owner", Some("0"))]);
        // HINCRBY never removes a field: the hash still holds owner=0.
        assert_eq!(reply(&mut m, "EXISTS lock", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "HGET lock owner", 0), bulk("0"));
        assert_eq!(reply(&mut m, "HINCRBY lock owner -1", 0), Reply::Int(-1));
    }

    #[test]
    fn hash_writes_keep_the_keys_deadline() {
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h f 1", 0);
        reply(&mut m, "PEXPIRE h 100", 0);
        reply(&mut m, "HSET h g 2", 10);
        reply(&mut m, "HINCRBY h f 5", 20);
        reply(&mut m, "HDEL h g", 30);
        assert_eq!(reply(&mut m, "PTTL h", 50), Reply::Int(50));
    }

    #[test]
    fn hincrby_rejects_a_non_integer_field_and_overflow() {
        let mut m = RedisModel::new();
        for bad in ["abc", "01", "+1", "1.5", ""] {
            m.apply(
                &Command::HSet {
                    key: "h".into(),
                    fields: vec![("f".into(), bad.into())],
                },
                0,
                &mut Vec::new(),
            );
            let (r, effects) = run(&mut m, "HINCRBY h f 1", 0);
            assert_eq!(
                r,
                Reply::Error("ERR hash value is not an integer".into()),
                "{bad:?}"
            );
            assert!(effects.is_empty());
        }
        reply(&mut m, &format!("HSET h f {}", i64::MAX), 0);
        assert_eq!(
            reply(&mut m, "HINCRBY h f 1", 0),
            Reply::Error("ERR increment or decrement would overflow".into())
        );
        assert_eq!(reply(&mut m, "HGET h f", 0), bulk(&i64::MAX.to_string()));
    }

    #[test]
    fn hdel_of_the_last_field_deletes_the_key() {
        let mut m = RedisModel::new();
        reply(&mut m, "HSET h a 1 b 2", 0);
        let (r, effects) = run(&mut m, "HDEL h a nope a", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![field("h", "a", None)]);
        let (r, effects) = run(&mut m, "HDEL h b", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![field("h", "b", None), deleted("h")]);
        assert!(m.is_empty());
        assert_eq!(reply(&mut m, "HDEL h b", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "EXISTS h", 0), Reply::Int(0));
    }
}
