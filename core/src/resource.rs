//! The protected resource's rule: what a client touching it inside its critical section is
//! allowed, the same for the simulated resource node (`lockcheck_sim::resource`) and the real
//! in-process one (`lockcheck_real::resource`).
//!
//! It is the checker's eye. It sees every access in true order (it runs on true time, so its
//! order is the real one) and records it. With fencing on it also enforces Kleppmann's rule: an
//! access whose fencing token is below the highest it has accepted comes from a stale holder and
//! is rejected. Equal tokens are accepted, because a holder touches twice with the same token.
//! Readers of a read/write lock hold different tokens at once, so a reader is measured only
//! against the writers: it is stale when a writer with a higher token got in after its lock was
//! granted. A writer is measured against everyone.

use crate::history::Op;
use std::time::Duration;

/// How long a client waits for the resource to answer an access.
pub const ACCESS_TIMEOUT: Duration = Duration::from_secs(1);

/// A client touching the protected resource.
#[derive(Clone, Debug)]
pub struct AccessRequest {
    /// Enter or exit of a critical section.
    pub phase: crate::history::Phase,
    /// The lock token the client holds.
    pub token: String,
    /// The fencing token it presents.
    pub fence: Option<u64>,
    /// A reader's access (read/write locks), which may share the resource with other readers.
    pub shared: bool,
}

/// The resource's rule, as plain data, for the simulated resource node and the real in-process
/// resource alike.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    fencing: bool,
    /// The highest fencing token accepted from anyone.
    highest: Option<u64>,
    /// The highest fencing token accepted from a writer.
    highest_write: Option<u64>,
}

impl Admission {
    /// A resource that checks fencing tokens if `fencing`, and otherwise accepts everything.
    pub fn new(fencing: bool) -> Admission {
        Admission {
            fencing,
            ..Admission::default()
        }
    }

    /// Judges `client`'s access, remembering its token if accepted: whether it was accepted, and
    /// the history entry that says so.
    pub fn admit(&mut self, client: &str, access: AccessRequest) -> (bool, Op) {
        let bar = if access.shared {
            self.highest_write
        } else {
            self.highest
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
            self.highest = self.highest.max(access.fence);
            if !access.shared {
                self.highest_write = self.highest_write.max(access.fence);
            }
        }
        let op = Op::Resource {
            client: client.to_string(),
            phase: access.phase,
            token: access.token,
            fence: access.fence,
            accepted,
            shared: access.shared,
        };
        (accepted, op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Phase;

    fn access(fence: Option<u64>, shared: bool) -> AccessRequest {
        AccessRequest {
            phase: Phase::Enter,
            token: "t".into(),
            fence,
            shared,
        }
    }

    /// Kleppmann's rule, each clause of which a change could break: a token below the highest
    /// accepted is stale; an equal one is the same holder's second touch; no token, no access.
    #[test]
    fn a_fencing_resource_admits_only_tokens_not_below_the_highest_it_accepted() {
        let mut r = Admission::new(true);
        let mut admit = |fence, shared| r.admit("c", access(fence, shared)).0;
        assert!(admit(Some(33), false), "the first token");
        assert!(admit(Some(33), false), "the same holder's exit");
        assert!(admit(Some(34), false), "a newer holder");
        assert!(!admit(Some(33), false), "the older holder, late: stale");
        assert!(!admit(None, false), "no token");
        // Readers are measured against writers only: a reader granted before writer 34 is
        // stale; two readers may hold any tokens between writers.
        assert!(!admit(Some(30), true));
        assert!(admit(Some(36), true));
        assert!(
            admit(Some(35), true),
            "another reader, older than the first"
        );
        // A writer is measured against everyone, readers included.
        assert!(!admit(Some(35), false));
        assert!(admit(Some(36), false));
    }

    #[test]
    fn without_fencing_everything_is_admitted() {
        let mut r = Admission::new(false);
        for fence in [Some(5), Some(1), None] {
            assert!(r.admit("c", access(fence, false)).0);
        }
    }
}
