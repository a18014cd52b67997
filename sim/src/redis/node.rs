//! A simulated Redis server as a madsim node: the [`RedisModel`] behind the network, reading
//! expiry from the node's own wall clock, with active expiry and a persistence policy.

use super::model::{KeyEffect, RedisModel, Snapshot};
use crate::clock::WALL_ORIGIN_NS;
use crate::disk::Disk;
use crate::history::{KeyChange, Kind, Op};
use crate::net::{serve, Request, Response};
use crate::scenario::Persistence;
use crate::world::World;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Redis runs active expiry `hz` = 10 times a second.
const ACTIVE_EXPIRE_EVERY: Duration = Duration::from_millis(100);
/// `appendfsync everysec`.
const FSYNC_EVERY: Duration = Duration::from_secs(1);

/// The server's wall clock in ms since the Unix epoch: what Redis's `mstime()` returns.
fn server_now_ms(world: &World, me: usize) -> u64 {
    (world.wall_ns(me).max(0) / 1_000_000) as u64
}

fn record_effects(world: &World, me: usize, by: Option<&str>, effects: Vec<KeyEffect>) {
    for effect in effects {
        let (key, change, field, value, expires_at_ms) = match effect {
            KeyEffect::Set {
                key,
                value,
                expires_at_ms,
            } => (key, KeyChange::Set, None, Some(value), expires_at_ms),
            KeyEffect::Deleted { key, value } => (key, KeyChange::Deleted, None, value, None),
            KeyEffect::Expired { key, value } => (key, KeyChange::Expired, None, value, None),
            KeyEffect::ExpiryChanged { key, expires_at_ms } => {
                (key, KeyChange::ExpiryChanged, None, None, expires_at_ms)
            }
            KeyEffect::HashField {
                key,
                field,
                value: Some(value),
            } => (key, KeyChange::FieldSet, Some(field), Some(value), None),
            KeyEffect::HashField {
                key,
                field,
                value: None,
            } => (key, KeyChange::FieldRemoved, Some(field), None, None),
        };
        let by = match change {
            KeyChange::Expired | KeyChange::Lost => None,
            _ => by.map(str::to_string),
        };
        world.record(
            me,
            Kind::Observe,
            Op::Key {
                key,
                change,
                field,
                value,
                by,
                expires_local_ns: expires_at_ms.map(|ms| ms as i64 * 1_000_000 - WALL_ORIGIN_NS),
            },
        );
    }
}

/// Runs a Redis server on node `me` until the node is killed; on (re)start it loads what
/// `disk` kept.
pub async fn run_server(world: Arc<World>, me: usize, disk: Arc<Disk<Snapshot>>) {
    let model = match disk.load() {
        Some(snapshot) => RedisModel::restore(snapshot),
        None => RedisModel::new(),
    };
    let model = Rc::new(RefCell::new(model));

    let expirer = {
        let (world, model) = (world.clone(), model.clone());
        async move {
            loop {
                madsim::time::sleep(world.clock(me).true_duration(ACTIVE_EXPIRE_EVERY)).await;
                let mut effects = Vec::new();
                model
                    .borrow_mut()
                    .expire_due(server_now_ms(&world, me), &mut effects);
                record_effects(&world, me, None, effects);
            }
        }
    };
    madsim::task::spawn_local(expirer);

    if disk.policy() == Persistence::Everysec {
        let (world, model, disk) = (world.clone(), model.clone(), disk.clone());
        madsim::task::spawn_local(async move {
            loop {
                madsim::time::sleep(world.clock(me).true_duration(FSYNC_EVERY)).await;
                disk.sync(model.borrow().snapshot());
            }
        });
    }

    let recorder = world.clone();
    serve(world, me, move |from, request| {
        let Request::Redis(command) = request else {
            return Response::Redis(lockcheck_algorithms::redis::Reply::Error(
                "ERR not a Redis request".into(),
            ));
        };
        let mut effects = Vec::new();
        let mut model = model.borrow_mut();
        let reply = model.apply(&command, server_now_ms(&recorder, me), &mut effects);
        if disk.policy() == Persistence::Always && command.is_write() {
            disk.sync(model.snapshot());
        }
        record_effects(&recorder, me, Some(recorder.topology.name(from)), effects);
        Response::Redis(reply)
    })
    .await
}
