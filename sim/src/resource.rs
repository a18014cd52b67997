//! The simulated protected resource: a node that judges every access by
//! [`lockcheck_core::resource::Admission`] and records it.
//!
//! It is the checker's eye. It runs on true time, so the order in which it sees accesses is the
//! real one.

use crate::net::{serve, Handled, Request, Response};
use crate::world::World;
use lockcheck_core::history::Kind;
use lockcheck_core::resource::Admission;
use std::sync::Arc;

/// Runs the resource on node `me` until the node is stopped.
pub async fn run_resource(world: Arc<World>, me: usize) {
    let mut admission = Admission::new(world.scenario.params.fencing);
    let recorder = world.clone();
    serve(world, me, move |from, request| {
        let Request::Access(access) = request else {
            return Handled::Now(Response::Access(false));
        };
        let (accepted, op) = admission.admit(recorder.topology.name(from), access);
        recorder.record(me, Kind::Observe, op);
        Handled::Now(Response::Access(accepted))
    })
    .await
}
