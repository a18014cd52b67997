//! The protected resource, in-process: the checker's eye in a real run.
//!
//! It behaves as the simulator's resource node does (`lockcheck_sim::resource`): it records every
//! access in the order it really happened and, with fencing on, rejects an access whose fencing
//! token is below the highest it accepted (equal tokens are accepted: a holder touches twice with
//! the same token). Readers of a read/write lock are measured only against writers. Being in the
//! same process as the clients, it sees accesses at the moment they are made, with no network in
//! between; a client's pause gate is passed before and after each access, by the workload.

use crate::recorder::Recorder;
use lockcheck_sim::history::{Kind, Op, Phase};
use std::cell::Cell;
use std::rc::Rc;

/// One access, as a client presents it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// Enter or exit.
    pub phase: Phase,
    /// The lock token the client holds.
    pub token: String,
    /// The fencing token it presents.
    pub fence: Option<u64>,
    /// A reader's access.
    pub shared: bool,
}

/// The protected resource of a run.
pub struct Resource {
    recorder: Rc<Recorder>,
    node: usize,
    fencing: bool,
    highest: Cell<Option<u64>>,
    highest_write: Cell<Option<u64>>,
}

impl Resource {
    /// The resource of a run, recording as node `node`, enforcing fencing tokens if `fencing`.
    pub fn new(recorder: Rc<Recorder>, node: usize, fencing: bool) -> Resource {
        Resource {
            recorder,
            node,
            fencing,
            highest: Cell::new(None),
            highest_write: Cell::new(None),
        }
    }

    /// Client `client` (a node index) touches the resource; true when the access is accepted.
    pub fn access(&self, client: usize, access: Access) -> bool {
        let bar = if access.shared {
            self.highest_write.get()
        } else {
            self.highest.get()
        };
        let accepted = if self.fencing {
            // No token, no access: a resource that demands fencing cannot judge a client without one.
            match (access.fence, bar) {
                (Some(f), Some(h)) => f >= h,
                (Some(_), None) => true,
                (None, _) => false,
            }
        } else {
            true
        };
        if accepted && self.fencing {
            self.highest.set(self.highest.get().max(access.fence));
            if !access.shared {
                self.highest_write
                    .set(self.highest_write.get().max(access.fence));
            }
        }
        let name = self.recorder.topology().name(client).to_string();
        self.recorder.record(
            self.node,
            Kind::Observe,
            Op::Resource {
                client: name,
                phase: access.phase,
                token: access.token,
                fence: access.fence,
                accepted,
                shared: access.shared,
            },
        );
        accepted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_sim::topology::Topology;

    #[test]
    fn a_fencing_resource_rejects_a_lower_token_and_accepts_an_equal_one() {
        let topology = Topology::new(2, 1, "redis");
        let recorder = Rc::new(Recorder::new(topology.clone()));
        let resource = Resource::new(recorder.clone(), topology.resource(), true);
        let touch = |client, fence| {
            resource.access(
                client,
                Access {
                    phase: Phase::Enter,
                    token: format!("t{fence}"),
                    fence: Some(fence),
                    shared: false,
                },
            )
        };
        assert!(touch(1, 2));
        assert!(touch(1, 2));
        assert!(!touch(0, 1));
        assert_eq!(recorder.history().entries.len(), 3);
    }
}
