//! Request/reply messaging between simulated nodes, with the nemesis's message faults.
//!
//! Messages are Rust values (no serialization) handed from one node's [`Port`] to another's
//! inbox. Each takes a random latency (1–10 ms, drawn from madsim's seeded generator) plus the
//! extra delay of any `delay` fault, and waits in the receiver's inbox until it is due: it is in
//! flight in the network, not in a task of its sender, so a sender that stops or crashes does not
//! take its messages with it. A paused node's messages queue up until it resumes; a crashed
//! node's inbox goes with it. On top, this layer drops messages for partitions and `loss`.
//!
//! Connections are what TCP gives a real client: one per client and server, tied to the server
//! process it was opened to (its *incarnation*). A process that dies (`scope: process`) has its
//! sockets closed by its kernel: each peer hears a reset at once (one latency later, unless a
//! partition holds or loses it), so a call in flight fails with
//! [`StoreError::ConnectionLost`] and a server learns that a client is gone. While the process
//! is down, a call is refused at once. A machine that dies says nothing: calls time out, and
//! once it is back, a call on a connection to its previous incarnation is reset. Either way the
//! next call opens a new connection.
//! Randomness beyond the latency is drawn only while such a fault is active, so a schedule
//! without them leaves the seed's random stream as it was (shrinking stays stable).
//!
//! This replaces madsim's endpoints, which format both addresses as strings and hash them for
//! every message: a fifth of a Redlock run went there.

use crate::world::{Power, World};
use lockcheck_algorithms::StoreError;
use lockcheck_core::topology::Topology;
use madsim::rand::Rng;
use madsim::time::Instant;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The tag requests are sent with; replies use per-call tags above it.
const REQUEST_TAG: u64 = 0;
/// The tag of messages a server pushes to a client unasked (ZooKeeper watch events).
const PUSH_TAG: u64 = u64::MAX;

/// What a server's port delivers to it: a request, or the notice that a client's connection
/// closed. The network carries requests and replies as opaque payloads; each backend (and the
/// resource) defines its own request and response types, and [`serve`] hands a server only the
/// requests of its type.
#[derive(Debug)]
pub enum Incoming<R> {
    /// Not a request: the client's connection closed (its process died). Servers with per-
    /// connection state (a MySQL transaction, a ZooKeeper session's watches) let it go; no
    /// reply is sent.
    ConnectionClosed,
    /// A request.
    Request(R),
}

/// Who a request or notice comes from: the client's node, and the address of its connection
/// (its process's port: a restarted process has a new one, so the notice that an earlier
/// process's connection closed, arriving late, is not taken for the new process's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The client's node.
    pub node: usize,
    /// Its connection's address.
    pub addr: SocketAddr,
}

/// A request as it travels: its content is known only to the server it is for.
enum Message {
    /// See [`Incoming::ConnectionClosed`].
    ConnectionClosed,
    /// A request of the server's own type.
    Request(Payload),
}

/// A reply as it travels: a value of the response type of the server's backend.
pub type Reply = Payload;

/// How a server answers a request: at once, or later (a blocking command such as `WAIT`)
/// without holding up the requests behind it; or not at all (a notice, such as
/// [`Incoming::ConnectionClosed`]).
pub enum Handled {
    /// No reply: the request was a notice.
    NoReply,
    /// The reply, now.
    Now(Reply),
    /// A reply that a task on the server's node will produce.
    Later(Pin<Box<dyn Future<Output = Reply>>>),
}

impl Handled {
    /// The reply `response`, now.
    pub fn now<T: Any + Send + Sync>(response: T) -> Handled {
        Handled::Now(Box::new(response))
    }

    /// A reply that `response` will produce, on a task of the server's node.
    pub fn later<T: Any + Send + Sync>(response: impl Future<Output = T> + 'static) -> Handled {
        Handled::Later(Box::pin(async move { Box::new(response.await) as Reply }))
    }
}

/// What a dead process's kernel sends on each of its connections: the connection is gone.
struct ConnectionReset;

struct Envelope {
    reply_tag: u64,
    /// Position in the sender's stream of requests to this server (see [`serve`]).
    seq: u64,
    request: Message,
}

/// What the network does with a message from node `from` to node `to` sent now.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// It goes on its way, with the extra delay of the `delay` faults in force (looked up once
    /// per message, with its `loss`).
    Deliver(Duration),
    /// It is lost: a partition that loses messages cuts the link, or a `loss` fault drops it.
    Lose,
    /// A partition that holds messages cuts the link: it waits for the heal.
    Hold,
}

/// How a message from node `from` to node `to` goes. Decided before a request is numbered, so a
/// lost request leaves no gap in its connection's sequence (a held one is numbered: it arrives).
fn route(world: &World, from: usize, to: usize) -> Route {
    let (loss, delay) = match link(world, from, to) {
        Ok(faults) => faults,
        Err(cut) => return cut,
    };
    // madsim's seeded generator: the draw is part of the run's replayable randomness.
    if loss > 0.0 && madsim::rand::random::<f64>() < loss {
        Route::Lose
    } else {
        Route::Deliver(delay)
    }
}

/// A message waiting for a partition that holds messages to heal.
struct Held {
    from: SocketAddr,
    to: SocketAddr,
    tag: u64,
    payload: Payload,
    /// The incarnation of the destination it was sent to: if that process has died by the heal,
    /// its connection died with it, and the message is lost.
    incarnation: u64,
}

/// Sends `payload` from `from` (on node `from_node`) to `to` the way `route` says.
fn send(
    world: &World,
    route: Route,
    from_node: usize,
    from: SocketAddr,
    to: SocketAddr,
    tag: u64,
    payload: Payload,
) {
    let to_node = Topology::index_of_addr(to).expect("simulated addresses are IPv4");
    match route {
        Route::Lose => {}
        Route::Deliver(delay) => transmit(world, from, to, tag, payload, delay),
        Route::Hold => {
            let incarnation = world.power(to_node).incarnation;
            world
                .network()
                .held
                .entry((from_node, to_node))
                .or_default()
                .push(Held {
                    from,
                    to,
                    tag,
                    payload,
                    incarnation,
                })
        }
    }
}

/// Sends on their way, in the order they were sent, the messages a partition held on the link
/// `from → to`, which has just come back. Each takes the network's latency from now.
pub fn release_held(world: &World, from: usize, to: usize) {
    let held = world.network().held.remove(&(from, to)).unwrap_or_default();
    let incarnation = world.power(to).incarnation;
    let (_, delay) = world.links().message_faults(from, to);
    for letter in held.into_iter().filter(|l| l.incarnation == incarnation) {
        transmit(
            world,
            letter.from,
            letter.to,
            letter.tag,
            letter.payload,
            delay,
        );
    }
}

use lockcheck_core::message_faults::LATENCY_NS;
/// Where a node's ephemeral ports start.
const FIRST_EPHEMERAL_PORT: u16 = 40_000;

/// A message's content.
pub type Payload = Box<dyn Any + Send + Sync>;

/// A message waiting in an inbox.
struct Letter {
    /// When it arrives, then its place in the network's sending order (for letters due at the
    /// same instant).
    due: (Instant, u64),
    from: SocketAddr,
    payload: Payload,
    /// The task a timer will wake when the letter is due, if one was armed for it.
    armed: Option<Waker>,
}

/// The letters of one tag, by when they are due (then by when they were sent), and the task
/// waiting for them. A mailbox rarely holds more than a letter or two, so they are kept in a
/// sorted queue rather than a tree, which allocated a node for every reply.
#[derive(Default)]
struct Mailbox {
    letters: std::collections::VecDeque<Letter>,
    waiter: Option<Waker>,
    /// For a call's reply: the node it awaits, whose connection reset ends the wait.
    peer: Option<usize>,
}

/// A bound port's inbox: a mailbox per open tag. Letters for a tag nobody has open are dropped,
/// as a reply to a request its client stopped waiting for is.
#[derive(Default)]
struct Inbox(Mutex<BTreeMap<u64, Mailbox>>);

/// The simulated network's state: which inbox each bound address leads to.
#[derive(Default)]
pub struct Network {
    inboxes: BTreeMap<SocketAddr, Weak<Inbox>>,
    /// Per node, the next ephemeral port.
    next_port: BTreeMap<usize, u16>,
    /// Letters sent so far: orders letters due at the same instant.
    sent: u64,
    /// Per cut link, the messages a partition that holds them is holding, in the order sent.
    held: BTreeMap<(usize, usize), Vec<Held>>,
    /// Open connections: (client node, client address, server node).
    connections: std::collections::BTreeSet<(usize, SocketAddr, usize)>,
}

/// An address bound on a node, with its inbox. Dropped with its node's tasks (a crash), which
/// loses whatever was queued for it.
pub struct Port {
    world: Arc<World>,
    addr: SocketAddr,
    inbox: Arc<Inbox>,
}

impl Port {
    /// Binds `addr` (a restarted server binds its address again; the newest binding wins).
    fn bind(world: Arc<World>, addr: SocketAddr, tags: &[u64]) -> Port {
        let inbox = Arc::new(Inbox::default());
        {
            let mut mailboxes = inbox.0.lock().expect("never poisoned");
            for &tag in tags {
                mailboxes.insert(tag, Mailbox::default());
            }
        }
        world.network().inboxes.insert(addr, Arc::downgrade(&inbox));
        Port { world, addr, inbox }
    }

    /// Binds an ephemeral port of node `node`.
    fn bind_ephemeral(world: Arc<World>, node: usize, tags: &[u64]) -> Port {
        let port = {
            let mut network = world.network();
            let next = network
                .next_port
                .entry(node)
                .or_insert(FIRST_EPHEMERAL_PORT);
            *next += 1;
            *next - 1
        };
        let addr = SocketAddr::new(Topology::addr(node).ip(), port);
        Port::bind(world, addr, tags)
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts accepting letters for `tag` (a call's reply from node `peer`).
    fn open(&self, tag: u64, peer: usize) {
        self.inbox.0.lock().expect("never poisoned").insert(
            tag,
            Mailbox {
                peer: Some(peer),
                ..Mailbox::default()
            },
        );
    }

    /// Stops accepting letters for `tag`, dropping any still queued.
    fn close(&self, tag: u64) {
        self.inbox.0.lock().expect("never poisoned").remove(&tag);
    }

    /// The next letter for `tag` once it is due: its sender and content.
    fn recv(&self, tag: u64) -> Recv<'_> {
        Recv {
            inbox: &self.inbox,
            tag,
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        let mut network = self.world.network();
        let ours = network
            .inboxes
            .get(&self.addr)
            .is_some_and(|inbox| std::ptr::eq(inbox.as_ptr(), Arc::as_ptr(&self.inbox)));
        if ours {
            network.inboxes.remove(&self.addr);
            // Its connections end with it, silently: a dead process's were reset by
            // `reset_connections`, and a dead machine's peers are told nothing.
            let addr = self.addr;
            network.connections.retain(|(_, a, _)| *a != addr);
        }
    }
}

/// Waits for the next due letter of one tag; see [`Port::recv`].
struct Recv<'a> {
    inbox: &'a Inbox,
    tag: u64,
}

impl Future for Recv<'_> {
    type Output = (Payload, SocketAddr);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut mailboxes = self.inbox.0.lock().expect("never poisoned");
        let mailbox = mailboxes
            .get_mut(&self.tag)
            .expect("a tag is open while someone waits on it");
        if !mailbox
            .waiter
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            mailbox.waiter = Some(cx.waker().clone());
        }
        let Some(first) = mailbox.letters.front_mut() else {
            return Poll::Pending;
        };
        // The clock is read only when there is a letter: it costs as much as a look at the
        // mailbox.
        if first.due.0 <= Instant::now() {
            let letter = mailbox.letters.pop_front().expect("looked at above");
            return Poll::Ready((letter.payload, letter.from));
        }
        // Not due yet: a timer must wake this task when it is. [`transmit`] armed one if this
        // task was waiting when the letter came; otherwise (it came while the task was busy, or
        // an earlier letter was taken since) arm it now.
        if !first
            .armed
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            first.armed = Some(arm(first.due.0, cx.waker()));
        }
        Poll::Pending
    }
}

/// Arms one madsim timer that wakes `waker` at `deadline` (in the future), and returns the
/// waker it will wake. This is madsim's own `Sleep`, polled once: it registers the wake-up and
/// is then dropped, which leaves the timer armed. Whoever is woken looks at its mailbox again; a
/// task that has moved on in the meantime is polled once for nothing.
fn arm(deadline: Instant, waker: &Waker) -> Waker {
    let mut sleep = madsim::time::sleep_until(deadline);
    let _ = Pin::new(&mut sleep).poll(&mut Context::from_waker(waker));
    waker.clone()
}

/// Sends `payload` from `from` to `to`: it arrives after the network's latency plus `delay` (of
/// the `delay` faults in force), unless its destination is gone by then.
fn transmit(
    world: &World,
    from: SocketAddr,
    to: SocketAddr,
    tag: u64,
    payload: Payload,
    delay: Duration,
) {
    // madsim's seeded generator: the draw is part of the run's replayable randomness.
    let latency = Duration::from_nanos(madsim::rand::thread_rng().gen_range(LATENCY_NS));
    let due = Instant::now() + latency + delay;
    let (inbox, seq) = {
        let mut network = world.network();
        network.sent += 1;
        (
            network.inboxes.get(&to).and_then(Weak::upgrade),
            network.sent,
        )
    };
    // Nobody bound there (crashed, or not started): lost; the sender's timeout covers it.
    let Some(inbox) = inbox else {
        return;
    };
    let mut mailboxes = inbox.0.lock().expect("never poisoned");
    let Some(mailbox) = mailboxes.get_mut(&tag) else {
        return;
    };
    let key = (due, seq);
    let at = mailbox.letters.partition_point(|letter| letter.due < key);
    // The receiver is woken once, when the letter is due: if it is waiting, and this letter is
    // now the first, a timer is armed for it here (rather than waking it now to arm its own).
    let armed = match (&mailbox.waiter, at) {
        (Some(waiter), 0) => Some(arm(due, waiter)),
        _ => None,
    };
    mailbox.letters.insert(
        at,
        Letter {
            due: key,
            from,
            payload,
            armed,
        },
    );
}

/// The process of node `dead` died: its kernel resets every connection it had. Each client
/// connected to it hears the reset (a call in flight fails, a push listener is told); each
/// server it was connected to hears that the client is gone. The resets travel like any message
/// (a partition loses or holds them), without a `loss` draw.
pub fn reset_connections(world: &World, dead: usize) {
    let gone: Vec<(usize, SocketAddr, usize)> = {
        let mut network = world.network();
        let gone = network
            .connections
            .iter()
            .filter(|(client, _, server)| *client == dead || *server == dead)
            .copied()
            .collect::<Vec<_>>();
        for c in &gone {
            network.connections.remove(c);
        }
        gone
    };
    for (client, client_addr, server) in gone {
        if server == dead {
            // To the client: every call awaiting this server, and its push listener.
            let tags: Vec<u64> = {
                let network = world.network();
                match network.inboxes.get(&client_addr).and_then(Weak::upgrade) {
                    Some(inbox) => inbox
                        .0
                        .lock()
                        .expect("never poisoned")
                        .iter()
                        .filter(|(tag, mailbox)| **tag == PUSH_TAG || mailbox.peer == Some(dead))
                        .map(|(tag, _)| *tag)
                        .collect(),
                    None => Vec::new(),
                }
            };
            for tag in tags {
                let from = Topology::addr(dead);
                let route = cut_route(world, dead, client);
                let reset = Box::new(ConnectionReset);
                send(world, route, dead, from, client_addr, tag, reset);
            }
        } else {
            // To the server: the client's connection closed.
            let route = cut_route(world, client, server);
            let closed = Box::new(Envelope {
                reply_tag: 0,
                seq: u64::MAX,
                request: Message::ConnectionClosed,
            });
            let to = Topology::addr(server);
            send(world, route, client, client_addr, to, REQUEST_TAG, closed);
        }
    }
}

/// The link `from → to` now, read at once: the route a partition that cuts it gives a message
/// (`Err`), or the `loss` and `delay` of the message faults in force on it.
fn link(world: &World, from: usize, to: usize) -> Result<(f64, Duration), Route> {
    let links = world.links();
    match links.cut_holds(from, to) {
        Some(true) => Err(Route::Hold),
        Some(false) => Err(Route::Lose),
        None => Ok(links.message_faults(from, to)),
    }
}

/// How a message on `from → to` goes now, without drawing for `loss`.
fn cut_route(world: &World, from: usize, to: usize) -> Route {
    link(world, from, to).map_or_else(|cut| cut, |(_, delay)| Route::Deliver(delay))
}

/// Whether `payload` is a connection reset from the server (see [`reset_connections`]).
pub fn is_reset(payload: &Payload) -> bool {
    payload.is::<ConnectionReset>()
}

/// Pushes an unasked message (a watch event) from node `from`'s port to the client at `to`.
///
/// Never lost while its connection lives: TCP retransmits it until it is acknowledged, so a
/// partition holds it until the heal (whatever the partition does to requests and replies) and
/// `loss` does not drop it. A lost request or reply costs its sender a timeout it notices; a
/// lost push would be a wake-up its client never learns it missed, which TCP does not produce
/// (the connection either delivers it late or breaks, and a reconnection re-registers the
/// watch). A push to a process that died meanwhile is dropped with its connection.
pub fn push(world: &World, port: &Port, from: usize, to: SocketAddr, payload: Payload) {
    push_from(world, from, port.addr, to, payload);
}

/// [`push`] from the pusher at `from_addr` on node `from`, without its [`Port`]: what an
/// ensemble's leader uses to hand a commit's watch events to the member that holds each
/// client's connection (that member's pusher address, so the client sees them come from its
/// member, over its member's link).
pub fn push_from(
    world: &World,
    from: usize,
    from_addr: SocketAddr,
    to: SocketAddr,
    payload: Payload,
) {
    let to_node = Topology::index_of_addr(to).expect("simulated addresses are IPv4");
    let route = match cut_route(world, from, to_node) {
        Route::Deliver(delay) => Route::Deliver(delay),
        Route::Lose | Route::Hold => Route::Hold,
    };
    send(world, route, from, from_addr, to, PUSH_TAG, payload);
}

/// Binds node `node`'s port for pushing messages (watch events) to clients.
pub fn bind_pusher(world: Arc<World>, node: usize) -> Port {
    Port::bind_ephemeral(world, node, &[])
}

/// Sends a reply, unless it is lost.
fn reply(world: &World, port: &Port, from: usize, to: SocketAddr, tag: u64, response: Reply) {
    let to_node = Topology::index_of_addr(to).expect("simulated addresses are IPv4");
    let route = route(world, from, to_node);
    send(world, route, from, port.addr, to, tag, response);
}

/// The reply deadlines of one client's calls in flight, and the one madsim timer that wakes the
/// calls whose deadline came. A timer per call cost as much as a message (armed, then popped
/// from madsim's heap long after its call was answered); calls made one after another, or
/// together (Redlock asks every master at once), share one: it is armed for the earliest
/// deadline, and when it goes off it wakes the calls that are due, and the earliest call left,
/// which arms it again for its own deadline (see [`Alarm`]).
#[derive(Default)]
struct Deadlines(Mutex<DeadlinesInner>);

#[derive(Default)]
struct DeadlinesInner {
    /// Each call waiting for its reply, by its deadline and reply tag: the task to wake then.
    pending: BTreeMap<(Instant, u64), Waker>,
    /// The deadline a timer is armed for and has not yet gone off, if any.
    armed: Option<Instant>,
}

impl Deadlines {
    /// Waits for the call `tag` until `deadline`: `waker` is woken then, unless the call
    /// [`Deadlines::forget`]s it first.
    fn wait(self: &Arc<Self>, deadline: Instant, tag: u64, waker: &Waker) {
        let mut inner = self.0.lock().expect("never poisoned");
        let slot = inner
            .pending
            .entry((deadline, tag))
            .or_insert_with(|| waker.clone());
        if !slot.will_wake(waker) {
            *slot = waker.clone();
        }
        let (earliest, _) = *inner.pending.first_key_value().expect("inserted above").0;
        if inner.armed.is_none_or(|armed| earliest < armed) {
            inner.armed = Some(earliest);
            drop(inner);
            let alarm = Alarm {
                deadlines: self.clone(),
                at: earliest,
            };
            arm(earliest, &Waker::from(Arc::new(alarm)));
        }
    }

    /// The call `tag` no longer waits (answered, or given up by its caller). If no timer is
    /// armed, the earliest call left is woken to arm it: the call woken for that may have been
    /// this one, found past its own deadline (its node was paused when the alarm went off, and
    /// ran only later), and without the baton passed on the calls left would wait forever.
    fn forget(&self, deadline: Instant, tag: u64) {
        let mut inner = self.0.lock().expect("never poisoned");
        inner.pending.remove(&(deadline, tag));
        if inner.armed.is_none() {
            if let Some((_, waker)) = inner.pending.first_key_value() {
                waker.wake_by_ref();
            }
        }
    }
}

/// What the timer armed for the deadline `at` wakes.
struct Alarm {
    deadlines: Arc<Deadlines>,
    at: Instant,
}

impl std::task::Wake for Alarm {
    /// The timer went off: wake the calls due by `at`. This runs inside madsim's timer wheel,
    /// which holds its own lock and has not moved the clock on yet, so it can neither read the
    /// time nor arm a timer: when calls are left waiting, the earliest is woken too, looks at
    /// its deadline and arms the timer for it.
    fn wake(self: Arc<Self>) {
        let mut inner = self.deadlines.0.lock().expect("never poisoned");
        if inner.armed == Some(self.at) {
            inner.armed = None;
        }
        while let Some(entry) = inner.pending.first_entry() {
            if entry.key().0 > self.at {
                break;
            }
            // The call sees its deadline passed, and forgets it.
            entry.remove().wake();
        }
        if inner.armed.is_none() {
            if let Some((_, waker)) = inner.pending.first_key_value() {
                waker.wake_by_ref();
            }
        }
    }
}

/// A call's wait for its reply, until its deadline; see [`RpcClient::call`].
struct AwaitReply<'a> {
    recv: Recv<'a>,
    deadlines: &'a Arc<Deadlines>,
    deadline: Instant,
    /// Not polled yet, with a deadline ahead: its first poll need not read the clock.
    fresh: bool,
}

impl Future for AwaitReply<'_> {
    type Output = Option<(Payload, SocketAddr)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(letter) = Pin::new(&mut this.recv).poll(cx) {
            return Poll::Ready(Some(letter));
        }
        if !std::mem::take(&mut this.fresh) && Instant::now() >= this.deadline {
            return Poll::Ready(None);
        }
        this.deadlines
            .wait(this.deadline, this.recv.tag, cx.waker());
        Poll::Pending
    }
}

impl Drop for AwaitReply<'_> {
    fn drop(&mut self) {
        self.deadlines.forget(self.deadline, self.recv.tag);
    }
}

/// A node's client side: sends requests and waits for their replies.
pub struct RpcClient {
    world: Arc<World>,
    me: usize,
    port: Port,
    deadlines: Arc<Deadlines>,
    next_tag: Cell<u64>,
    /// Next sequence number per server: one connection each, as a Redis client has.
    next_seq: RefCell<BTreeMap<usize, u64>>,
    /// Per server, the incarnation of the process its open connection leads to.
    connections: RefCell<BTreeMap<usize, u64>>,
}

impl RpcClient {
    /// Opens node `me`'s client port. Call on that node.
    pub async fn bind(world: Arc<World>, me: usize) -> RpcClient {
        let port = Port::bind_ephemeral(world.clone(), me, &[PUSH_TAG]);
        RpcClient {
            world,
            me,
            port,
            deadlines: Arc::default(),
            next_tag: Cell::new(REQUEST_TAG + 1),
            next_seq: RefCell::new(BTreeMap::new()),
            connections: RefCell::new(BTreeMap::new()),
        }
    }

    /// Forgets the connection to `server` (the next call opens a new one).
    fn drop_connection(&self, server: usize) {
        self.connections.borrow_mut().remove(&server);
    }

    /// Why a packet to `to` would be answered by a reset from its kernel, if it would: its
    /// process is down (refused), or its connection leads to an earlier process (reset). A dead
    /// machine answers nothing; its calls time out. Otherwise the connection is opened if there
    /// is none (to a machine that is down, there is none to open).
    fn connect(&self, to: usize, power: Power) -> Result<(), String> {
        let name = || self.world.topology.name(to);
        if power.refuses() {
            return Err(format!("connection refused: {}'s process is down", name()));
        }
        if power.down {
            return Ok(());
        }
        let opened = self.connections.borrow().get(&to).copied();
        match opened {
            Some(i) if i != power.incarnation => Err(format!(
                "connection reset: {} restarted since it was opened",
                name()
            )),
            Some(_) => Ok(()),
            None => {
                self.connections.borrow_mut().insert(to, power.incarnation);
                self.world
                    .network()
                    .connections
                    .insert((self.me, self.port.addr, to));
                Ok(())
            }
        }
    }

    /// Whether a partition that loses messages cuts this node off from `to` now: a connection
    /// attempt's SYN would be lost (and its kernel send it again after its backoff; see the
    /// ZooKeeper client's connection attempts). Draws nothing.
    pub fn cut_off_from(&self, to: usize) -> bool {
        matches!(cut_route(&self.world, self.me, to), Route::Lose)
    }

    /// The address servers reply and push to.
    pub fn local_addr(&self) -> SocketAddr {
        self.port.addr
    }

    /// Waits for the next message a server pushed to this client.
    pub async fn next_push(&self) -> Payload {
        self.port.recv(PUSH_TAG).await.0
    }

    /// Sends `request` to node `to` and waits up to `timeout` of this node's monotonic clock
    /// for its reply, of the response type `A` of that server's backend.
    pub async fn call<Q: Any + Send + Sync, A: Any>(
        &self,
        to: usize,
        request: Q,
        timeout: Duration,
    ) -> Result<A, StoreError> {
        let reply_tag = self.next_tag.get();
        self.next_tag.set(reply_tag + 1);
        let mut route = route(&self.world, self.me, to);
        if let Err(why) = self.connect(to, self.world.power(to)) {
            self.drop_connection(to);
            if matches!(route, Route::Deliver(_)) {
                // The kernel at the other end answers with a reset: one round trip.
                crate::timer::sleep(Duration::from_nanos(2 * LATENCY_NS.start)).await;
                return Err(StoreError::Unreachable(why));
            }
            // Across a cut neither the request nor the reset gets through, nor a new
            // connection's handshake: the call can only time out.
            route = Route::Lose;
        }
        self.port.open(reply_tag, to);
        // However the wait ends (reply, timeout, or the caller dropping it), a late reply to
        // this call is dropped.
        struct Close<'a>(&'a Port, u64);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                self.0.close(self.1);
            }
        }
        let _close = Close(&self.port, reply_tag);
        if route != Route::Lose {
            let seq = {
                let mut seqs = self.next_seq.borrow_mut();
                let next = seqs.entry(to).or_insert(0);
                *next += 1;
                *next - 1
            };
            let envelope = Envelope {
                reply_tag,
                seq,
                request: Message::Request(Box::new(request)),
            };
            send(
                &self.world,
                route,
                self.me,
                self.port.addr,
                Topology::addr(to),
                REQUEST_TAG,
                Box::new(envelope),
            );
        }
        let wait = self.world.clock(self.me).true_duration(timeout);
        let reply = AwaitReply {
            recv: self.port.recv(reply_tag),
            deadlines: &self.deadlines,
            deadline: Instant::now() + wait,
            fresh: !wait.is_zero(),
        };
        match reply.await {
            Some((payload, _)) if is_reset(&payload) => {
                self.drop_connection(to);
                Err(StoreError::ConnectionLost(format!(
                    "{}'s process died",
                    self.world.topology.name(to)
                )))
            }
            // Each backend's client and server are written together: a reply of another type is
            // a bug in lockcheck, not something a run can bring about.
            Some((payload, _)) => Ok(*payload
                .downcast::<A>()
                .expect("a server answers with its backend's response type")),
            None => Err(StoreError::Timeout),
        }
    }
}

/// Serves requests of type `R` on node `me` forever, one at a time (as a single-threaded server
/// does): `handle(from, request)` computes each reply, or a future of it. A request of another
/// type (sent to the wrong kind of server) is dropped unanswered, as a server drops bytes it
/// cannot parse; its sender times out.
pub async fn serve<R: Any>(
    world: Arc<World>,
    me: usize,
    mut handle: impl FnMut(Peer, Incoming<R>) -> Handled,
) {
    let port = Rc::new(Port::bind(
        world.clone(),
        Topology::addr(me),
        &[REQUEST_TAG],
    ));
    // Each client connection's requests are served in the order sent, as TCP delivers them:
    // Latencies are drawn per message, so a connection's requests can overtake each other in
    // flight; requests that arrive early wait for their predecessors. A connection's first
    // request seen by this (possibly restarted) server process sets where its sequence starts.
    let mut next: BTreeMap<SocketAddr, u64> = BTreeMap::new();
    let mut early: BTreeMap<(SocketAddr, u64), Envelope> = BTreeMap::new();
    loop {
        let (payload, from) = port.recv(REQUEST_TAG).await;
        let envelope = *payload
            .downcast::<Envelope>()
            .expect("requests are Envelopes");
        let Some(from_node) = Topology::index_of_addr(from) else {
            continue;
        };
        if let Message::ConnectionClosed = envelope.request {
            // The client's process is gone: so is its connection and what was queued on it.
            next.remove(&from);
            early.retain(|(addr, _), _| *addr != from);
            let peer = Peer {
                node: from_node,
                addr: from,
            };
            handle(peer, Incoming::ConnectionClosed);
            continue;
        }
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
            let Message::Request(request) = envelope.request else {
                continue; // a notice is handled on arrival, above
            };
            let Ok(request) = request.downcast::<R>() else {
                tracing::warn!(
                    server = world.topology.name(me),
                    "dropped a request of another backend's type"
                );
                continue;
            };
            let peer = Peer {
                node: from_node,
                addr: from,
            };
            match handle(peer, Incoming::Request(*request)) {
                Handled::NoReply => {}
                Handled::Now(response) => {
                    reply(&world, &port, me, from, envelope.reply_tag, response)
                }
                Handled::Later(response) => {
                    let (world, port) = (world.clone(), port.clone());
                    madsim::task::spawn_local(async move {
                        let response = response.await;
                        reply(&world, &port, me, from, envelope.reply_tag, response);
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_core::scenario::{Algorithm, Scenario};
    use lockcheck_core::topology::Role;
    use madsim::runtime::Runtime;

    /// Every call gets its answer or its timeout at its own deadline, whether calls overlap,
    /// come one after another, or are answered before the deadline: the calls of a client share
    /// one timer, armed for the earliest deadline and re-armed when it goes off.
    #[test]
    fn each_call_times_out_at_its_own_deadline_and_an_answered_one_does_not() {
        Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(async {
            let world = Arc::new(World::new(Scenario::new(Algorithm::SingleRedis)));
            let client = world.topology.with_role(Role::Client)[0];
            let server = world.topology.with_role(Role::Server)[0];
            // A server that answers "answer" at once and never answers anything else.
            madsim::task::spawn_local(serve(world.clone(), server, |_, request| match request {
                Incoming::Request("answer") => Handled::now(()),
                _ => Handled::NoReply,
            }));
            let rpc = RpcClient::bind(world.clone(), client).await;
            // Let the server bind its address.
            madsim::time::sleep(Duration::from_millis(1)).await;
            let silent = || "ignore";
            let start = Instant::now();
            let call = |request: &'static str, ms: u64| {
                let rpc = &rpc;
                async move {
                    let result: Result<(), _> =
                        rpc.call(server, request, Duration::from_millis(ms)).await;
                    (result, start.elapsed())
                }
            };
            let within = |elapsed: Duration, ms: u64| {
                elapsed >= Duration::from_millis(ms) && elapsed < Duration::from_millis(ms + 1)
            };
            // Overlapping: the later deadline first, then an earlier one, then an answered one.
            let (late, early, answered) = futures_util::join!(
                call(silent(), 300),
                call(silent(), 100),
                call("answer", 200),
            );
            assert_eq!(late.0, Err(StoreError::Timeout));
            assert!(within(late.1, 300), "{:?}", late.1);
            assert_eq!(early.0, Err(StoreError::Timeout));
            assert!(within(early.1, 100), "{:?}", early.1);
            assert_eq!(answered.0, Ok(()), "{:?}", answered.1);
            assert!(answered.1 < Duration::from_millis(25), "{:?}", answered.1);
            // One after another, each from where the last ended.
            for ms in [50, 500, 20] {
                let before = start.elapsed();
                let (result, after) = call(silent(), ms).await;
                assert_eq!(result, Err(StoreError::Timeout));
                assert!(within(after - before, ms), "{ms} ms: {:?}", after - before);
            }
        });
    }
}
