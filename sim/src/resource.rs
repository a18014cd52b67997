//! The simulated protected resource: a node that judges every access by
//! [`lockcheck_core::resource::Admission`] and records it.
//!
//! It is the checker's eye. It runs on true time, so the order in which it sees accesses is the
//! real one.

use crate::net::{serve, Handled, Incoming};
use crate::world::World;
use lockcheck_core::history::Kind;
use lockcheck_core::resource::Admission;
use std::sync::Arc;

/// Runs the resource on node `me` until the node is stopped.
pub async fn run_resource(world: Arc<World>, me: usize) {
    let mut admission = Admission::new(world.scenario.params.fencing);
    let recorder = world.clone();
    // It answers whether it accepted the access.
    serve(world, me, move |from, incoming| {
        let Incoming::Request(access) = incoming else {
            return Handled::NoReply; // a client's connection closed: it keeps nothing per client
        };
        let (accepted, op) = admission.admit(recorder.topology.name(from.node), access);
        recorder.record(me, Kind::Observe, op);
        Handled::now(accepted)
    })
    .await
}
