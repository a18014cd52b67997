//! Request/reply messaging between simulated nodes, with the nemesis's message faults.
//!
//! Built on madsim's raw endpoints: messages are Rust values (no serialization), latency and
//! partitions (clogged links) come from madsim's network, and a paused node's messages queue up
//! until it resumes. On top, this layer drops and delays messages for `loss` and `delay` faults.
//! Randomness is drawn only while such a fault is active, so a schedule without them leaves the
//! seed's random stream untouched (shrinking stays stable).

use crate::redis::Snapshot;
use crate::topology::Topology;
use crate::world::World;
use lockcheck_algorithms::redis::{Command, Reply};
use lockcheck_algorithms::StoreError;
use madsim::net::Endpoint;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The tag requests are sent with; replies use per-call tags above it.
const REQUEST_TAG: u64 = 0;
/// The tag of messages a server pushes to a client unasked (ZooKeeper watch events).
const PUSH_TAG: u64 = u64::MAX;

/// A request to a server or to the resource.
#[derive(Debug)]
pub enum Request {
    /// A Redis command.
    Redis(Command),
    /// An access to the protected resource.
    Access(AccessRequest),
    /// A replica asks its primary for the data set (asynchronous replication, pulled).
    Sync,
    /// A ZooKeeper request, with the address the client receives pushed events on.
    Zk(crate::zookeeper::node::ZkRequest, SocketAddr),
    /// A MySQL client's request.
    Mysql(crate::mysql::node::MysqlRequest),
    /// A replica tells its primary it has applied everything up to `offset`.
    Ack {
        /// The primary's write offset the replica's data set reflects.
        offset: u64,
    },
}

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

/// A reply.
#[derive(Debug)]
pub enum Response {
    /// A Redis reply.
    Redis(Reply),
    /// Whether the resource accepted the access.
    Access(bool),
    /// The primary's data set, as of its write `offset`.
    Sync {
        /// The data set.
        snapshot: Snapshot,
        /// How many writes it reflects.
        offset: u64,
    },
    /// An acknowledgement.
    Ack,
    /// A ZooKeeper answer.
    Zk(crate::zookeeper::node::ZkResponse),
    /// A MySQL server's answer.
    Mysql(crate::mysql::node::MysqlResponse),
}

/// How a server answers a request: at once, or later (a blocking command such as `WAIT`)
/// without holding up the requests behind it.
pub enum Handled {
    /// The reply, now.
    Now(Response),
    /// A reply that a task on the server's node will produce.
    Later(Pin<Box<dyn Future<Output = Response>>>),
}

struct Envelope {
    reply_tag: u64,
    /// Position in the sender's stream of requests to this server (see [`serve`]).
    seq: u64,
    request: Request,
}

/// Whether a message from node `from` to node `to` is lost: the link is cut by a partition, or a
/// `loss` fault drops it. Decided before a request is numbered, so a lost request leaves no gap in
/// its connection's sequence.
fn lost(world: &World, from: usize, to: usize) -> bool {
    if world.is_cut(from, to) {
        return true;
    }
    let (loss, _) = world.message_faults(from, to);
    // madsim's seeded generator: the draw is part of the run's replayable randomness.
    loss > 0.0 && madsim::rand::random::<f64>() < loss
}

/// Transmits `payload` from node `from` to `to`, after any extra delay of a `delay` fault.
async fn transmit(
    world: &World,
    ep: &Endpoint,
    from: usize,
    to: SocketAddr,
    tag: u64,
    payload: Box<dyn Any + Send + Sync>,
) {
    let to_node = Topology::index_of_addr(to).expect("simulated addresses are IPv4");
    let (_, delay) = world.message_faults(from, to_node);
    if delay.is_zero() {
        // A send error means the destination is gone; the sender's timeout covers it.
        let _ = ep.send_to_raw(to, tag, payload).await;
    } else {
        let ep = ep.clone();
        madsim::task::spawn_local(async move {
            madsim::time::sleep(delay).await;
            let _ = ep.send_to_raw(to, tag, payload).await;
        });
    }
}

/// Pushes an unasked message (a watch event) from node `from`'s endpoint `ep` to the client at
/// `to`, unless it is lost.
pub async fn push(
    world: &World,
    ep: &Endpoint,
    from: usize,
    to: SocketAddr,
    payload: Box<dyn Any + Send + Sync>,
) {
    let to_node = Topology::index_of_addr(to).expect("simulated addresses are IPv4");
    if !lost(world, from, to_node) {
        transmit(world, ep, from, to, PUSH_TAG, payload).await;
    }
}

/// Sends a reply, unless it is lost.
async fn reply(
    world: &World,
    ep: &Endpoint,
    from: usize,
    to: SocketAddr,
    tag: u64,
    response: Response,
) {
    let to_node = Topology::index_of_addr(to).expect("simulated addresses are IPv4");
    if !lost(world, from, to_node) {
        transmit(world, ep, from, to, tag, Box::new(response)).await;
    }
}

/// A node's client side: sends requests and waits for their replies.
pub struct RpcClient {
    world: Arc<World>,
    me: usize,
    ep: Endpoint,
    next_tag: Cell<u64>,
    /// Next sequence number per server: one connection each, as a Redis client has.
    next_seq: RefCell<BTreeMap<usize, u64>>,
}

impl RpcClient {
    /// Opens node `me`'s client endpoint. Call on that node.
    pub async fn bind(world: Arc<World>, me: usize) -> RpcClient {
        let ip = Topology::addr(me).ip();
        let ep = Endpoint::bind(SocketAddr::new(ip, 0))
            .await
            .expect("a fresh node can bind an ephemeral port");
        RpcClient {
            world,
            me,
            ep,
            next_tag: Cell::new(REQUEST_TAG + 1),
            next_seq: RefCell::new(BTreeMap::new()),
        }
    }

    /// The address servers reply and push to.
    pub fn local_addr(&self) -> SocketAddr {
        self.ep
            .local_addr()
            .expect("a bound endpoint has an address")
    }

    /// Waits for the next message a server pushed to this client.
    pub async fn next_push(&self) -> Option<Box<dyn Any + Send + Sync>> {
        self.ep
            .recv_from_raw(PUSH_TAG)
            .await
            .ok()
            .map(|(payload, _)| payload)
    }

    /// Sends `request` to node `to` and waits up to `timeout` of this node's monotonic clock.
    pub async fn call(
        &self,
        to: usize,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, StoreError> {
        let reply_tag = self.next_tag.get();
        self.next_tag.set(reply_tag + 1);
        if !lost(&self.world, self.me, to) {
            let seq = {
                let mut seqs = self.next_seq.borrow_mut();
                let next = seqs.entry(to).or_insert(0);
                *next += 1;
                *next - 1
            };
            let envelope = Envelope {
                reply_tag,
                seq,
                request,
            };
            let to = Topology::addr(to);
            transmit(
                &self.world,
                &self.ep,
                self.me,
                to,
                REQUEST_TAG,
                Box::new(envelope),
            )
            .await;
        }
        let wait = self.world.clock(self.me).true_duration(timeout);
        match madsim::time::timeout(wait, self.ep.recv_from_raw(reply_tag)).await {
            Ok(Ok((payload, _))) => Ok(*payload
                .downcast::<Response>()
                .expect("replies are Responses")),
            Ok(Err(e)) => Err(StoreError::Unreachable(e.to_string())),
            Err(_) => Err(StoreError::Timeout),
        }
    }
}

/// Serves requests on node `me` forever, one at a time (as a single-threaded server does):
/// `handle(from, request)` computes each reply, or a future of it.
pub async fn serve(
    world: Arc<World>,
    me: usize,
    mut handle: impl FnMut(usize, Request) -> Handled,
) {
    let ep = Endpoint::bind(Topology::addr(me))
        .await
        .expect("a fresh node can bind its service port");
    // Each client connection's requests are served in the order sent, as TCP delivers them:
    // madsim's mailbox hands out queued messages in no particular order (a paused server finds a
    // backlog), so requests that arrive early wait for their predecessors. A connection's first
    // request seen by this (possibly restarted) server process sets where its sequence starts.
    let mut next: BTreeMap<SocketAddr, u64> = BTreeMap::new();
    let mut early: BTreeMap<(SocketAddr, u64), Envelope> = BTreeMap::new();
    loop {
        let Ok((payload, from)) = ep.recv_from_raw(REQUEST_TAG).await else {
            return;
        };
        let envelope = *payload
            .downcast::<Envelope>()
            .expect("requests are Envelopes");
        let Some(from_node) = Topology::index_of_addr(from) else {
            continue;
        };
        let expected = *next.entry(from).or_insert(envelope.seq);
        let mut ready = Vec::new();
        if envelope.seq < expected {
            // Behind a request already served (overtaken in flight): serve it now.
            ready.push(envelope);
        } else {
            early.insert((from, envelope.seq), envelope);
            let cursor = next.get_mut(&from).expect("inserted above");
            while let Some(envelope) = early.remove(&(from, *cursor)) {
                ready.push(envelope);
                *cursor += 1;
            }
        }
        for envelope in ready {
            match handle(from_node, envelope.request) {
                Handled::Now(response) => {
                    reply(&world, &ep, me, from, envelope.reply_tag, response).await
                }
                Handled::Later(response) => {
                    let (world, ep) = (world.clone(), ep.clone());
                    madsim::task::spawn_local(async move {
                        let response = response.await;
                        reply(&world, &ep, me, from, envelope.reply_tag, response).await;
                    });
                }
            }
        }
    }
}
