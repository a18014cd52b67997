//! A simulated single-member etcd: the [`EtcdModel`] behind the network as a [`Server`]. Leases
//! expire on the member's monotonic clock, every acknowledged write is on disk (etcd fsyncs its
//! WAL before it answers), and a watch for a key's deletion is answered by a push to the
//! watching client, at once when the deletion already happened at or after the watch's revision.

use super::model::{EtcdModel, KeyEffect, Now, Renewal, Snapshot};
use crate::net::{push, Handled, Peer};
use crate::server::{KeyEvent, Node, Server};
use crate::signal::Signal;
use crate::world::World;
use lockcheck_algorithms::etcd::{EtcdError, KeyValue, LeaseId, Range, Revision, Txn, TxnResult};
use lockcheck_core::history::{KeyChange, Kind, Op};
use lockcheck_core::scenario::Persistence;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// What an etcd client sends.
#[derive(Clone, Debug)]
pub enum EtcdRequest {
    /// `LeaseGrant`.
    Grant {
        /// The TTL asked for, in seconds.
        ttl_s: i64,
    },
    /// One `LeaseKeepAlive`.
    KeepAlive {
        /// The lease.
        lease: LeaseId,
    },
    /// `LeaseRevoke`.
    Revoke {
        /// The lease.
        lease: LeaseId,
    },
    /// `Txn`.
    Txn(Txn),
    /// `Range`.
    Range(Range),
    /// `DeleteRange` of one key.
    Delete {
        /// The key.
        key: String,
    },
    /// A watch for the deletion of `key` from revision `from`, pushed on the connection it came
    /// on.
    Watch {
        /// The key.
        key: String,
        /// The first revision it looks at.
        from: Revision,
    },
}

/// What an etcd member answers.
#[derive(Debug)]
pub enum EtcdResponse {
    /// The lease granted, with its TTL in seconds.
    Granted {
        /// Its id.
        lease: LeaseId,
        /// Its TTL.
        ttl_s: i64,
    },
    /// A keep-alive's answer: the lease's TTL, 0 when the member does not have it.
    KeptAlive {
        /// The TTL.
        ttl_s: i64,
    },
    /// A revocation's answer.
    Revoked(Result<(), EtcdError>),
    /// A transaction's answer.
    Txn(Result<TxnResult, EtcdError>),
    /// The keys read, with the header's revision.
    Range(Vec<KeyValue>, Revision),
    /// How many keys a delete removed, with the header's revision.
    Deleted(i64, Revision),
    /// The watch is registered.
    Watching,
    /// A cluster member's error: no leader, or a request that did not commit within its
    /// timeout. `maybe_applied`: it reached a leader, which may still commit it.
    Unavailable {
        /// etcd's message.
        reason: &'static str,
        /// Whether it may have been (or may yet be) applied.
        maybe_applied: bool,
    },
}

/// A watched key's deletion, pushed to the watching client.
#[derive(Clone, Debug)]
pub struct EtcdPush {
    /// The key.
    pub key: String,
    /// The revision of its deletion.
    pub revision: Revision,
}

/// A watch waiting for a deletion.
struct Watcher {
    client: usize,
    addr: SocketAddr,
    key: String,
    from: Revision,
}

/// One etcd member process, shared by the tasks of its node.
pub struct EtcdServer {
    node: Node<EtcdServer>,
    /// The endpoint pushed events leave from.
    pusher: crate::net::Port,
    model: RefCell<EtcdModel>,
    watchers: RefCell<Vec<Watcher>>,
    /// What was last written to disk (`None`: nothing written by this process), as
    /// `EtcdModel::logged` counts it.
    persisted: std::cell::Cell<Option<(Revision, u64)>>,
    /// Counts the lessor's checks: what a keep-alive of a lease past its TTL waits on.
    revocations: Signal,
}

impl Server for EtcdServer {
    type Request = EtcdRequest;
    type Durable = Snapshot;
    type Kept = ();

    /// etcd fsyncs its write-ahead log before it answers.
    fn persistence(_: &World, _: usize) -> Persistence {
        Persistence::Always
    }

    /// Nothing acknowledged is lost; every lease runs its full TTL and the election timeout
    /// again from the restart (`lessor.Promote`).
    fn start(node: Node<Self>, recovered: Option<Snapshot>) -> Self {
        let now = clocks(&node);
        let (model, persisted) = match recovered {
            Some(snapshot) => {
                let model = EtcdModel::restore(snapshot, now);
                let logged = model.logged();
                (model, Some(logged))
            }
            None => (EtcdModel::new(), None),
        };
        let pusher = crate::net::bind_pusher(node.world.clone(), node.me);
        EtcdServer {
            node,
            pusher,
            model: RefCell::new(model),
            watchers: RefCell::new(Vec::new()),
            persisted: std::cell::Cell::new(persisted),
            revocations: Signal::default(),
        }
    }

    fn node(&self) -> &Node<Self> {
        &self.node
    }

    fn handle(self: &Rc<Self>, peer: Peer, request: EtcdRequest) -> Handled {
        let from = peer.node;
        let now = clocks(&self.node);
        let mut effects = Vec::new();
        let response = {
            let mut model = self.model.borrow_mut();
            match request {
                EtcdRequest::Grant { ttl_s } => {
                    let (lease, ttl_s) = model.grant(ttl_s, now);
                    EtcdResponse::Granted { lease, ttl_s }
                }
                EtcdRequest::KeepAlive { lease } => match model.renew(lease, now) {
                    Renewal::Renewed(ttl_s) => EtcdResponse::KeptAlive { ttl_s },
                    Renewal::Gone => EtcdResponse::KeptAlive { ttl_s: 0 },
                    Renewal::Expiring => {
                        // `lessor.Renew` waits for the revocation of a lease past its TTL, then
                        // says it is gone.
                        drop(model);
                        let server = self.clone();
                        return Handled::later(async move {
                            loop {
                                let seen = server.revocations.changes();
                                if !server.model.borrow().has_lease(lease) {
                                    break;
                                }
                                server.revocations.after(seen).await;
                            }
                            EtcdResponse::KeptAlive { ttl_s: 0 }
                        });
                    }
                },
                EtcdRequest::Revoke { lease } => {
                    EtcdResponse::Revoked(model.revoke(lease, &mut effects))
                }
                EtcdRequest::Txn(txn) => EtcdResponse::Txn(model.txn(&txn, &mut effects)),
                EtcdRequest::Range(range) => {
                    EtcdResponse::Range(model.range(&range), model.revision())
                }
                EtcdRequest::Delete { key } => {
                    let (deleted, revision) = model.delete(&key, &mut effects);
                    EtcdResponse::Deleted(deleted, revision)
                }
                EtcdRequest::Watch { key, from: rev } => {
                    self.watchers.borrow_mut().push(Watcher {
                        client: from,
                        addr: peer.addr,
                        key,
                        from: rev,
                    });
                    EtcdResponse::Watching
                }
            }
        };
        self.node.due.offer(self.model.borrow().next_expiry_ms(now));
        self.settle(Some(from), effects);
        Handled::now(response)
    }

    /// A client's watches go with its connection.
    fn connection_closed(&self, from: Peer) {
        self.watchers.borrow_mut().retain(|w| w.addr != from.addr);
    }

    /// The lessor's next look that finds a lease due by the wall clock (a wall-clock step wakes
    /// the timer to look again).
    fn next_due(&self) -> Option<(u64, Duration)> {
        let now = clocks(&self.node);
        self.model.borrow().next_expiry_ms(now).map(|at| {
            let left = at.saturating_sub(now.mono_ms).max(1);
            (at, Duration::from_millis(left))
        })
    }

    fn on_due(&self) {
        let mut effects = Vec::new();
        let now = clocks(&self.node);
        self.model.borrow_mut().expire_due(now, &mut effects);
        self.settle(None, effects);
    }
}

/// The server's two clocks now.
fn clocks(node: &Node<EtcdServer>) -> Now {
    Now {
        mono_ms: node.mono_ms(),
        wall_ms: node.wall_ms(),
    }
}

impl EtcdServer {
    /// Records what a request by `by` (or the lessor) did, writes it to disk, and answers the
    /// watches it satisfied.
    fn settle(&self, by: Option<usize>, effects: Vec<KeyEffect>) {
        for effect in &effects {
            let (key, change, by) = match effect {
                KeyEffect::Put(key) => (key, KeyChange::Set, by),
                KeyEffect::Deleted(key) => (key, KeyChange::Deleted, by),
                KeyEffect::Expired(key) => (key, KeyChange::Expired, None),
            };
            // A lock key's name is its identity, as a ZooKeeper node's path is.
            let value = Some(key.clone());
            self.node.record(KeyEvent::new(key, change, value, by));
        }
        let logged = self.model.borrow().logged();
        if self.persisted.replace(Some(logged)) != Some(logged) {
            self.node.disk.sync(self.model.borrow().snapshot());
            // A revocation (by the lessor or a `LeaseRevoke`) is such a change: keep-alives
            // waiting for one look again. (A renewal is not, and leaves them asleep.)
            self.revocations.notify();
        }
        self.answer_watches();
    }

    /// Pushes the deletions the waiting watches look for, and forgets those watches.
    fn answer_watches(&self) {
        let model = self.model.borrow();
        let mut fired = Vec::new();
        self.watchers
            .borrow_mut()
            .retain(|w| match model.deleted_since(&w.key, w.from) {
                Some(revision) => {
                    fired.push((w.client, w.addr, w.key.clone(), revision));
                    false
                }
                None => true,
            });
        drop(model);
        let world = &self.node.world;
        for (client, addr, key, revision) in fired {
            world.record(
                self.node.me,
                Kind::Observe,
                Op::Watch {
                    path: key.clone(),
                    event: "node_deleted".to_string(),
                    to: world.topology.name(client).to_string(),
                },
            );
            let event = Box::new(EtcdPush { key, revision });
            push(world, &self.pusher, self.node.me, addr, event);
        }
    }
}
