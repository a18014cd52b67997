//! The protected resource: the node clients touch inside their critical section.
//!
//! It is the checker's eye. It sees every access in true order (it runs on true time, so its
//! order is the real one) and records it. With fencing on it also enforces Kleppmann's rule: an
//! access whose fencing token is below the highest it has accepted comes from a stale holder and
//! is rejected. Equal tokens are accepted, because a holder touches twice with the same token.
//! Readers of a read/write lock hold different tokens at once, so a reader is measured only
//! against the writers: it is stale when a writer with a higher token got in after its lock was
//! granted. A writer is measured against everyone.

use crate::history::{Kind, Op};
use crate::net::{serve, Handled, Request, Response};
use crate::world::World;
use std::sync::Arc;

/// Runs the resource on node `me` until the node is stopped.
pub async fn run_resource(world: Arc<World>, me: usize) {
    let fencing = world.scenario.params.fencing;
    // The highest fencing token accepted from anyone, and from a writer.
    let mut highest: Option<u64> = None;
    let mut highest_write: Option<u64> = None;
    let recorder = world.clone();
    serve(world, me, move |from, request| {
        let Request::Access(access) = request else {
            return Handled::Now(Response::Access(false));
        };
        let bar = if access.shared {
            highest_write
        } else {
            highest
        };
        let accepted = if fencing {
            // No token, no access: a resource that demands fencing cannot judge a client without one.
            match (access.fence, bar) {
                (Some(f), Some(h)) => f >= h,
                (Some(_), None) => true,
                (None, _) => false,
            }
        } else {
            true
        };
        if accepted && fencing {
            highest = highest.max(access.fence);
            if !access.shared {
                highest_write = highest_write.max(access.fence);
            }
        }
        recorder.record(
            me,
            Kind::Observe,
            Op::Resource {
                client: recorder.topology.name(from).to_string(),
                phase: access.phase,
                token: access.token,
                fence: access.fence,
                accepted,
                shared: access.shared,
            },
        );
        Handled::Now(Response::Access(accepted))
    })
    .await
}
