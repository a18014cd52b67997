//! Sorted sets (Redis's `t_zset.c`): where a fair lock keeps each waiter's deadline.

use lockcheck_algorithms::redis::command::{format_double, Reply, Score, ScoreBound};

use std::collections::BTreeMap;

use super::{count, rank_range, KeyEffect, Keyspace, Value};

/// A sorted set: members ordered by (score, member), with members compared bytewise, which is
/// Redis's order (`zslInsert` ties on score are broken by `sdscmp`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct SortedSet {
    /// Each member's score, for `ZSCORE` and to find a member's place in `ordered`.
    scores: BTreeMap<String, Score>,
    /// The members in rank order.
    ordered: BTreeMap<(Score, String), ()>,
}

impl SortedSet {
    fn len(&self) -> usize {
        self.scores.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// Adds `member` or moves it to `score`; true if it is new. As in Redis's `zsetAdd`, a score
    /// equal to the current one (including `-0` against `0`) leaves the member untouched.
    fn insert(&mut self, score: Score, member: &str) -> bool {
        match self.scores.get(member).copied() {
            Some(old) => {
                if old != score {
                    self.ordered.remove(&(old, member.to_owned()));
                    self.ordered.insert((score, member.to_owned()), ());
                    self.scores.insert(member.to_owned(), score);
                }
                false
            }
            None => {
                self.scores.insert(member.to_owned(), score);
                self.ordered.insert((score, member.to_owned()), ());
                true
            }
        }
    }

    fn remove(&mut self, member: &str) -> bool {
        match self.scores.remove(member) {
            Some(score) => {
                self.ordered.remove(&(score, member.to_owned()));
                true
            }
            None => false,
        }
    }

    /// Members and scores in rank order.
    fn iter(&self) -> impl Iterator<Item = (&str, Score)> {
        self.ordered
            .keys()
            .map(|(score, member)| (member.as_str(), *score))
    }
}

impl Keyspace {
    fn zset(
        &mut self,
        key: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Result<Option<&mut SortedSet>, Reply> {
        self.typed(key, now_ms, effects, Value::zset_mut)
    }

    /// `ZADD` (plain form): pairs are applied in turn, so a member named twice ends with its last
    /// score and counts once as new.
    pub(super) fn zadd(
        &mut self,
        key: &str,
        members: &[(Score, String)],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        if members.is_empty() {
            return Reply::Error("ERR wrong number of arguments for 'zadd' command".into());
        }
        let zset = match self.typed_or_create(key, now_ms, effects, Value::zset_mut, empty_zset) {
            Ok(zset) => zset,
            Err(reply) => return reply,
        };
        let mut added = 0;
        for (score, member) in members {
            if zset.insert(*score, member) {
                added += 1;
            }
        }
        Reply::Int(added)
    }

    pub(super) fn zscore(
        &mut self,
        key: &str,
        member: &str,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.zset(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(zset) => match zset.and_then(|zset| zset.scores.get(member)) {
                None => Reply::Nil,
                Some(score) => Reply::Bulk(format_double(score.get())),
            },
        }
    }

    pub(super) fn zrem(
        &mut self,
        key: &str,
        members: &[String],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let zset = match self.zset(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Int(0),
            Ok(Some(zset)) => zset,
        };
        let removed = members.iter().filter(|member| zset.remove(member)).count();
        self.delete_if_empty(key, effects);
        Reply::Int(count(removed))
    }

    /// `ZREMRANGEBYSCORE`: the members whose scores lie between the bounds removed, how many;
    /// the key deleted if none is left.
    pub(super) fn zremrangebyscore(
        &mut self,
        key: &str,
        min: ScoreBound,
        max: ScoreBound,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let zset = match self.zset(key, now_ms, effects) {
            Err(reply) => return reply,
            Ok(None) => return Reply::Int(0),
            Ok(Some(zset)) => zset,
        };
        let doomed: Vec<String> = zset
            .iter()
            .skip_while(|(_, score)| !min.admits_from_below(*score))
            .take_while(|(_, score)| max.admits_from_above(*score))
            .map(|(member, _)| member.to_owned())
            .collect();
        for member in &doomed {
            zset.remove(member);
        }
        self.delete_if_empty(key, effects);
        Reply::Int(count(doomed.len()))
    }

    pub(super) fn zcard(&mut self, key: &str, now_ms: u64, effects: &mut Vec<KeyEffect>) -> Reply {
        match self.zset(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(zset) => Reply::Int(count(zset.map_or(0, |zset| zset.len()))),
        }
    }

    pub(super) fn zrange(
        &mut self,
        key: &str,
        start: i64,
        stop: i64,
        with_scores: bool,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.zset(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(None) => Reply::Array(Vec::new()),
            Ok(Some(zset)) => match rank_range(start, stop, zset.len()) {
                None => Reply::Array(Vec::new()),
                Some((first, last)) => {
                    scored_members(zset.iter().skip(first).take(last - first + 1), with_scores)
                }
            },
        }
    }

    pub(super) fn zrangebyscore(
        &mut self,
        key: &str,
        min: ScoreBound,
        max: ScoreBound,
        with_scores: bool,
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        match self.zset(key, now_ms, effects) {
            Err(reply) => reply,
            Ok(None) => Reply::Array(Vec::new()),
            Ok(Some(zset)) => scored_members(
                zset.iter()
                    .skip_while(|(_, score)| !min.admits_from_below(*score))
                    .take_while(|(_, score)| max.admits_from_above(*score)),
                with_scores,
            ),
        }
    }
}

fn empty_zset() -> Value {
    Value::ZSet(SortedSet::default())
}

/// A sorted-set range reply: members, each followed by its score when `with_scores` (RESP2 sends
/// scores as bulk strings, formatted as Redis formats doubles).
fn scored_members<'a>(members: impl Iterator<Item = (&'a str, Score)>, with_scores: bool) -> Reply {
    let mut items = Vec::new();
    for (member, score) in members {
        items.push(Reply::Bulk(member.to_owned()));
        if with_scores {
            items.push(Reply::Bulk(format_double(score.get())));
        }
    }
    Reply::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::model::testing::{array, bulk, deleted, reply, run};
    use crate::redis::model::RedisModel;

    #[test]
    fn zadd_counts_new_members_and_moves_existing_ones() {
        let mut m = RedisModel::new();
        let (r, effects) = run(&mut m, "ZADD z 1 a 2 b", 0);
        assert_eq!(r, Reply::Int(2));
        assert!(
            effects.is_empty(),
            "sorted sets report no per-member effects"
        );
        // An updated score is not counted; a member named twice ends with its last score.
        assert_eq!(reply(&mut m, "ZADD z 5 a 3 c 4 c", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "ZSCORE z a", 0), bulk("5"));
        assert_eq!(reply(&mut m, "ZSCORE z c", 0), bulk("4"));
        assert_eq!(reply(&mut m, "ZSCORE z nope", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "ZSCORE missing a", 0), Reply::Nil);
        assert_eq!(reply(&mut m, "ZCARD z", 0), Reply::Int(3));
        assert_eq!(reply(&mut m, "ZCARD missing", 0), Reply::Int(0));
        assert_eq!(reply(&mut m, "ZRANGE z 0 -1", 0), array(&["b", "c", "a"]));
    }

    #[test]
    fn zrange_orders_by_score_then_member_bytes() {
        let mut m = RedisModel::new();
        reply(&mut m, "ZADD z 2 b 1 zz 2 a 2 B 1 y -inf low", 0);
        assert_eq!(
            reply(&mut m, "ZRANGE z 0 -1", 0),
            array(&["low", "y", "zz", "B", "a", "b"])
        );
        assert_eq!(reply(&mut m, "ZRANGE z 1 2", 0), array(&["y", "zz"]));
        assert_eq!(reply(&mut m, "ZRANGE z -2 -1", 0), array(&["a", "b"]));
        assert_eq!(reply(&mut m, "ZRANGE z 5 100", 0), array(&["b"]));
        assert_eq!(reply(&mut m, "ZRANGE z 3 1", 0), Reply::Array(Vec::new()));
        assert_eq!(
            reply(&mut m, "ZRANGE missing 0 -1", 0),
            Reply::Array(Vec::new())
        );
    }

    #[test]
    fn zrange_withscores_formats_scores_as_redis_does() {
        let mut m = RedisModel::new();
        reply(
            &mut m,
            "ZADD z 1.5 a 3 b 1e20 c -inf d 0.1 e 1700000000000 f",
            0,
        );
        assert_eq!(
            reply(&mut m, "ZRANGE z 0 -1 WITHSCORES", 0),
            array(&[
                "d",
                "-inf",
                "e",
                "0.1",
                "a",
                "1.5",
                "b",
                "3",
                "f",
                "1700000000000",
                "c",
                "1e+20"
            ])
        );
        assert_eq!(reply(&mut m, "ZSCORE z d", 0), bulk("-inf"));
    }

    #[test]
    fn zrangebyscore_bounds_are_inclusive_exclusive_or_infinite() {
        let mut m = RedisModel::new();
        assert_eq!(
            reply(&mut m, "ZRANGEBYSCORE z -inf +inf", 0),
            Reply::Array(Vec::new())
        );
        reply(&mut m, "ZADD z 1 a 2 b 2 c 3 d", 0);
        let range = |m: &mut RedisModel, min: &str, max: &str| {
            reply(m, &format!("ZRANGEBYSCORE z {min} {max}"), 0)
        };
        assert_eq!(range(&mut m, "-inf", "+inf"), array(&["a", "b", "c", "d"]));
        assert_eq!(range(&mut m, "2", "3"), array(&["b", "c", "d"]));
        assert_eq!(range(&mut m, "(2", "3"), array(&["d"]));
        assert_eq!(range(&mut m, "1", "(2"), array(&["a"]));
        assert_eq!(range(&mut m, "2", "2"), array(&["b", "c"]));
        assert_eq!(range(&mut m, "(2", "2"), Reply::Array(Vec::new()));
        assert_eq!(range(&mut m, "3", "1"), Reply::Array(Vec::new()));
        assert_eq!(range(&mut m, "1.5", "2.5"), array(&["b", "c"]));
        assert_eq!(range(&mut m, "-inf", "1"), array(&["a"]));
        assert_eq!(range(&mut m, "3", "inf"), array(&["d"]));
        assert_eq!(
            reply(&mut m, "ZRANGEBYSCORE z (1 2 WITHSCORES", 0),
            array(&["b", "2", "c", "2"])
        );
    }

    #[test]
    fn zrem_of_the_last_member_deletes_the_key() {
        let mut m = RedisModel::new();
        reply(&mut m, "ZADD z 1 a 2 b", 0);
        assert_eq!(reply(&mut m, "ZREM z a nope a", 0), Reply::Int(1));
        assert_eq!(reply(&mut m, "ZRANGE z 0 -1", 0), array(&["b"]));
        let (r, effects) = run(&mut m, "ZREM z b", 0);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(effects, vec![deleted("z")]);
        assert!(m.is_empty());
        assert_eq!(reply(&mut m, "ZREM z b", 0), Reply::Int(0));
    }

    #[test]
    fn zadd_treats_minus_zero_as_the_same_score() {
        let mut m = RedisModel::new();
        reply(&mut m, "ZADD z -0 a", 0);
        assert_eq!(reply(&mut m, "ZADD z 0 a", 0), Reply::Int(0));
        // Redis's zsetAdd sees no change and keeps the stored -0.
        assert_eq!(reply(&mut m, "ZSCORE z a", 0), bulk("-0"));
    }

    #[test]
    fn zremrangebyscore_removes_the_range_and_the_key_when_empty() {
        let mut m = RedisModel::new();
        assert_eq!(
            reply(&mut m, "ZREMRANGEBYSCORE z -inf +inf", 0),
            Reply::Int(0)
        );
        reply(&mut m, "ZADD z 1 a 2 b 2 c 3 d", 0);
        let (r, effects) = run(&mut m, "ZREMRANGEBYSCORE z (1 2", 0);
        assert_eq!(r, Reply::Int(2));
        assert!(effects.is_empty());
        assert_eq!(reply(&mut m, "ZRANGE z 0 -1", 0), array(&["a", "d"]));
        assert_eq!(reply(&mut m, "ZREMRANGEBYSCORE z 5 1", 0), Reply::Int(0));
        let (r, effects) = run(&mut m, "ZREMRANGEBYSCORE z -inf +inf", 0);
        assert_eq!(r, Reply::Int(2));
        assert_eq!(effects, vec![deleted("z")]);
        assert!(m.is_empty());
    }
}
