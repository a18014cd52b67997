//! The protected resource, in-process: the checker's eye in a real run.
//!
//! It applies the simulator's rule ([`lockcheck_core::resource::Admission`]: with fencing, an access
//! whose token is below the highest accepted is rejected; readers are measured against writers)
//! and records every access in the order it really happened. Being in the same process as the
//! clients, it sees accesses at the moment they are made, with no network in between; a client's
//! pause gate is passed before and after each access, by the client.

use crate::recorder::Recorder;
use lockcheck_core::history::Kind;
use lockcheck_core::resource::AccessRequest;
use lockcheck_core::resource::Admission;
use std::cell::RefCell;
use std::rc::Rc;

/// The protected resource of a run.
pub struct Resource {
    recorder: Rc<Recorder>,
    node: usize,
    admission: RefCell<Admission>,
}

impl Resource {
    /// The resource of a run, recording as node `node`, enforcing fencing tokens if `fencing`.
    pub fn new(recorder: Rc<Recorder>, node: usize, fencing: bool) -> Resource {
        Resource {
            recorder,
            node,
            admission: RefCell::new(Admission::new(fencing)),
        }
    }

    /// Client `client` (a node index) touches the resource; true when the access is accepted.
    pub fn access(&self, client: usize, access: AccessRequest) -> bool {
        let name = self.recorder.topology().name(client).to_string();
        let (accepted, op) = self.admission.borrow_mut().admit(&name, access);
        self.recorder.record(self.node, Kind::Observe, op);
        accepted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_core::topology::Topology;

    #[test]
    fn a_fencing_resource_rejects_a_lower_token_and_accepts_an_equal_one() {
        let topology = Topology::new(2, 1, "redis");
        let recorder = Rc::new(Recorder::new(topology.clone()));
        let resource = Resource::new(recorder.clone(), topology.resource(), true);
        let touch = |client, fence| {
            resource.access(
                client,
                AccessRequest {
                    phase: lockcheck_core::history::Phase::Enter,
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
