//! Lists (Redis's `t_list.c`): the queue a fair lock keeps its waiters in.

use lockcheck_algorithms::redis::command::Reply;

use std::collections::VecDeque;

use super::{count, rank_range, KeyEffect, Keyspace, Value};

/// Which end of a list a push or pop works on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Head,
    Tail,
}

impl Keyspace {
    fn list(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Result<Option<&mut VecDeque<String>>, Reply> {
        self.typed(key, now_ms, effects, Value::list_mut)
    }

    /// `LPUSH`/`RPUSH`: the values are pushed one at a time, so `LPUSH k a b` leaves `b` first.
    pub(super) fn push(
        &mut self,
        key: &str,
        values: &[String],
        end: End,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        if values.is_empty() {
            let name = if end == End::Head { "lpush" } else { "rpush" };
            return Reply::Error(format!(
                "ERR wrong number of arguments for '{name}' command"
            ));
        }
        let list = match self.typed_or_create(key, now_ms, effects, Value::list_mut, empty_list) {
            Ok(list) => list,
            Err(reply) => return reply,
        };
        for value in values {
            match end {
                End::Head => list.push_front(value.clone()),
                End::Tail => list.push_back(value.clone()),
            }
        }
        let len = count(list.len());
        effects.extend(values.iter().map(|value| KeyEffect::ListPushed {
            key: key.to_string(),
            value: value.clone(),
        }));
        Reply::Int(len)
    }

    /// `LPOP`/`RPOP`, as Redis 7's `popGenericCommand`: with a count the reply is an array (empty
    /// for a count of 0; nil, i.e. a null array, for a missing key).
    pub(super) fn pop(
        &mut self,
        key: &str,
        how_many: Option<u64>,
        end: End,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let list = match self.list(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Nil,
            Ok(Some(list)) => list,
        };
        let mut pop_one = || match end {
            End::Head => list.pop_front(),
            End::Tail => list.pop_back(),
        };
        let mut popped = Vec::new();
        for _ in 0..how_many.unwrap_or(1) {
            match pop_one() {
                Some(item) => popped.push(item),
                None => break,
            }
        }
        effects.extend(popped.iter().map(|value| KeyEffect::ListRemoved {
            key: key.to_string(),
            value: value.clone(),
        }));
        let reply = match how_many {
            None => popped.pop().map_or(Reply::Nil, Reply::Bulk),
            Some(_) => Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
        };
        self.delete_if_empty(key, effects);
        reply
    }

    pub(super) fn lindex(
        &mut self,
        key: &str,
        index: i64,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.list(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(None) => Reply::Nil,
            Ok(Some(list)) => {
                let len = count(list.len());
                let index = if index < 0 { len + index } else { index };
                usize::try_from(index)
                    .ok()
                    .and_then(|index| list.get(index))
                    .map_or(Reply::Nil, |item| Reply::Bulk(item.clone()))
            }
        }
    }

    pub(super) fn llen(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.list(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(list) => Reply::Int(count(list.map_or(0, |list| list.len()))),
        }
    }

    pub(super) fn lrange(
        &mut self,
        key: &str,
        start: i64,
        stop: i64,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.list(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(list) => {
                let list = list.map(|list| &*list);
                let items = list.into_iter().flatten();
                let len = list.map_or(0, VecDeque::len);
                Reply::Array(match rank_range(start, stop, len) {
                    None => Vec::new(),
                    Some((first, last)) => items
                        .skip(first)
                        .take(last - first + 1)
                        .map(|item| Reply::Bulk(item.clone()))
                        .collect(),
                })
            }
        }
    }

    /// `LREM`: removes up to `|n|` elements equal to `value`, scanning from the head when `n > 0`
    /// and from the tail when `n < 0`; `n == 0` removes all of them.
    pub(super) fn lrem(
        &mut self,
        key: &str,
        n: i64,
        value: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let list = match self.list(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Int(0),
            Ok(Some(list)) => list,
        };
        let limit = if n == 0 { u64::MAX } else { n.unsigned_abs() };
        let mut removed: u64 = 0;
        let mut kept = VecDeque::with_capacity(list.len());
        if n < 0 {
            while let Some(item) = list.pop_back() {
                if removed < limit && item == value {
                    removed += 1;
                } else {
                    kept.push_front(item);
                }
            }
        } else {
            while let Some(item) = list.pop_front() {
                if removed < limit && item == value {
                    removed += 1;
                } else {
                    kept.push_back(item);
                }
            }
        }
        *list = kept;
        effects.extend((0..removed).map(|_| KeyEffect::ListRemoved {
            key: key.to_string(),
            value: value.to_string(),
        }));
        self.delete_if_empty(key, effects);
        Reply::Int(i64::try_from(removed).unwrap_or(i64::MAX))
    }
}

fn empty_list() -> Value {
    Value::List(VecDeque::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::model::testing::{array, bulk, deleted, reply, run};
    use crate::redis::model::RedisModel;

    #[test]
    fn rpush_then_lpop_is_fifo_and_popping_the_last_element_deletes_the_key() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "RPUSH q a b", 0);
        assert_eq!(r, Reply::Int(2));
        let pushed = |v: &str| KeyEffect::ListPushed {
            key: "q".into(),
            value: v.into(),
        };
        assert_eq!(
            effects,
            vec![pushed("a"), pushed("b")],
            "queue order is reported"
        );
        assert_eq!(reply(&mut m, "RPUSH q c", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LLEN q", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LPOP q", 0), bulk("a"));
        assert_eq!(reply(&mut m, "LPOP q", 0), bulk("b"));
        let (r, effects) = run(&mut m, "LPOP q", 0);
        assert_eq!(r, bulk("c"));
        let popped = KeyEffect::ListRemoved {
            key: "q".into(),
            value: "c".into(),
        };
        assert_eq!(effects, vec![popped, deleted("q")]);
        assert!(m.is_empty());
        assert_eq!(reply(&mut m, "LPOP q", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "RPOP q", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "LLEN q", 0), Reply::Int(0));
    }

    #[test]
    fn lpush_pushes_each_value_to_the_head_in_turn_and_rpop_takes_the_tail() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "LPUSH l a b c", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["c", "b", "a"]));
        assert_eq!(reply(&mut m, "RPOP l", 0), bulk("a"));
    }

    #[test]
    fn pop_with_a_count_replies_with_an_array() {
        let mut m = RedisModel::new();
        // A missing key gives a null array, which is nil here (false in Lua, as with RESP2).
        assert_eq!(reply(&mut m, "LPOP l 2", 0), Reply::Nil);
        reply(&mut m, "RPUSH l a b c d", 0);
        assert_eq!(reply(&mut m, "LPOP l 0", 0), Reply::Array(Vec::new()));
        assert_eq!(reply(&mut m, "LPOP l 2", 0), array(&["a", "b"]));
        let (r, effects) = run(&mut m, "RPOP l 5", 0);
        assert_eq!(r, array(&["d", "c"]));
        let removed = |v: &str| KeyEffect::ListRemoved {
            key: "l".into(),
            value: v.into(),
        };
        assert_eq!(effects, vec![removed("d"), removed("c"), deleted("l")]);
    }

    #[test]
    fn lindex_counts_negative_indices_from_the_tail() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "LINDEX l 0", 0), Reply::Nil);
        reply(&mut m, "RPUSH l a b c", 0);
        assert_eq!(reply(&mut m, "LINDEX l 0", 0), bulk("a"));
        assert_eq!(reply(&mut m, "LINDEX l 2", 0), bulk("c"));
        assert_eq!(reply(&mut m, "LINDEX l 3", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "LINDEX l -1", 0), bulk("c"));
        assert_eq!(reply(&mut m, "LINDEX l -3", 0), bulk("a"));
        assert_eq!(reply(&mut m, "LINDEX l -4", 0), Reply::Nil);
        let min = format!("LINDEX l {}", i64::MIN);
        assert_eq!(reply(&mut m, &min, 0), Reply::Nil);
    }

    #[test]
    fn lrange_clamps_and_counts_from_the_tail_like_redis() {
        let mut m = RedisModel::new();
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), Reply::Array(Vec::new()));
        reply(&mut m, "RPUSH l a b c d", 0);
        assert_eq!(reply(&mut m, "LRANGE l 1 2", 0), array(&["b", "c"]));
        assert_eq!(reply(&mut m, "LRANGE l -2 -1", 0), array(&["c", "d"]));
        assert_eq!(reply(&mut m, "LRANGE l -100 1", 0), array(&["a", "b"]));
        assert_eq!(reply(&mut m, "LRANGE l 2 100", 0), array(&["c", "d"]));
        assert_eq!(reply(&mut m, "LRANGE l 3 1", 0), Reply::Array(Vec::new()));
        assert_eq!(reply(&mut m, "LRANGE l 4 10", 0), Reply::Array(Vec::new()));
        assert_eq!(reply(&mut m, "LRANGE l 0 -5", 0), Reply::Array(Vec::new()));
    }

    #[test]
    fn lrem_removes_from_the_head_the_tail_or_everywhere() {
        let line = "RPUSH l x a x b x";
        let mut m = RedisModel::new();
        reply(&mut m, line, 0);
        assert_eq!(reply(&mut m, "LREM l 2 x", 0), Reply::Int(2));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["a", "b", "x"]));

        let mut m = RedisModel::new();
        reply(&mut m, line, 0);
        assert_eq!(reply(&mut m, "LREM l -2 x", 0), Reply::Int(2));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["x", "a", "b"]));

        let mut m = RedisModel::new();
        reply(&mut m, line, 0);
        assert_eq!(reply(&mut m, "LREM l 0 x", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "LRANGE l 0 -1", 0), array(&["a", "b"]));
        assert_eq!(reply(&mut m, "LREM l 0 nope", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "LREM missing 0 x", 0), Reply::Int(0));

        // Removing every element deletes the key.
        let removed = |v: &str| KeyEffect::ListRemoved {
            key: "l".into(),
            value: v.into(),
        };
        let (r, effects) = run(&mut m, "LREM l 5 a", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![removed("a")]);
        let (r, effects) = run(&mut m, "LREM l -1 b", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![removed("b"), deleted("l")]);
        assert!(m.is_empty());
    }
}
