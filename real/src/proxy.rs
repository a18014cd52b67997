//! An in-process TCP relay in front of one server: how real mode cuts, freezes, resets and slows a
//! client's network link without touching the host's firewall.
//!
//! Every real client reaches every server through a [`Proxy`] of its own (one per client and
//! server), so a fault can act on exactly one link. The proxy listens on a loopback port the
//! kernel picks, opens one upstream connection per accepted connection, and relays bytes both
//! ways according to its [`Mode`], which can be changed at any time through a [`Link`]:
//!
//! - [`Mode::Pass`]: bytes flow as they come.
//! - [`Mode::Blackhole`]: connections stay open and nothing is forwarded in either direction.
//!   Bytes already read are held, the rest wait in the kernel's socket buffers, and all of it
//!   flows, in order, once the link passes again: what TCP's retransmissions do across a
//!   partition that heals before the connection gives up, and what a frozen peer looks like. A
//!   connection accepted while blackholed is held too: its upstream connection is opened only
//!   when the link passes again, and not at all if its client closed it meanwhile (across a
//!   real partition, a handshake the client gave up on never reaches the server).
//! - [`Mode::Reset`]: every open connection is closed with a TCP RST on both sides
//!   (`SO_LINGER` 0), and every new one is accepted and reset at once.
//!
//! A link that passes can also be impaired ([`Link::impair`], the `delay` and `loss` faults):
//! each chunk is forwarded once the delay has passed since it was read, in order; and each
//! transmission of a chunk is lost with the loss probability. A byte stream cannot lose a
//! message the way the simulator's datagrams do: TCP hides a lost segment behind its
//! retransmission, so a lost chunk is sent again after the sender's retransmission timeout
//! (200 ms at first, Linux's minimum, doubling with each loss in a row, at most 120 s), and
//! everything behind it waits, in order. What the application sees of loss on a real network is
//! exactly that: stalls, and the timeouts they cause.
//!
//! Causes of a blackhole are counted ([`Link::cut`] / [`Link::heal`]): a client's pause and any
//! number of overlapping partitions can hold the same link, and it passes again only when the
//! last of them ends. While cut, the link is a blackhole whatever [`Link::set_mode`] said; the
//! mode set applies again after the last heal.
//!
//! An upstream that refuses the connection (a crashed server) is answered with a reset of the
//! accepted connection, the nearest a relay can come to "connection refused" once the kernel
//! has completed the client's handshake.
//!
//! A proxy can speak TLS to its server ([`Proxy::start_tls`], for `--endpoints … --tls`; see
//! [`crate::tls`]): it opens the TLS session when it opens the upstream connection, and relays
//! plaintext to its client. A handshake the server refuses (a certificate that does not
//! verify) resets the client, as a refused connection does, and is kept
//! ([`Proxy::tls_refusal`]) so that the run ends in an error rather than a verdict about a lock
//! that never reached its server.
//!
//! Every task of a proxy (its accept loop and one task per connection) is aborted when the
//! [`Proxy`] is dropped, which closes its sockets; dropping the runtime ends them too.

use crate::tls::{HandshakeError, Tls};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// What a proxy does with the bytes of its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything as it comes.
    Pass,
    /// Forward nothing in either direction; hold it until the link passes again.
    Blackhole,
    /// Reset every connection, open or new.
    Reset,
}

/// What a slow or lossy network does to a link that passes (see the module's docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairment {
    /// Each chunk is forwarded this long after it was read.
    pub delay: Duration,
    /// The probability that one transmission of a chunk is lost, in [0, 1].
    pub loss: f64,
}

/// TCP's first retransmission timeout after a loss (Linux's `TCP_RTO_MIN`).
const MIN_RTO: Duration = Duration::from_millis(200);
/// TCP's longest retransmission timeout (Linux's `TCP_RTO_MAX`).
const MAX_RTO: Duration = Duration::from_secs(120);

/// The state a proxy's tasks follow.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Control {
    /// The mode set with [`Link::set_mode`].
    mode: Mode,
    /// Causes of a blackhole in force ([`Link::cut`] minus [`Link::heal`]).
    cuts: u32,
    /// Delay and loss while the link passes.
    impairment: Impairment,
    /// Drop what is still delayed from the server when the server's side ends.
    lose_in_flight: bool,
}

impl Control {
    /// The mode in force: a blackhole while cut, the mode set otherwise.
    fn effective(self) -> Mode {
        if self.cuts > 0 {
            Mode::Blackhole
        } else {
            self.mode
        }
    }
}

/// A handle on a proxy's mode. Cloning gives another handle on the same proxy. A handle does not
/// keep the proxy's tasks alive: once the [`Proxy`] is dropped, changing its mode does nothing.
#[derive(Clone, Debug)]
pub struct Link {
    control: Arc<watch::Sender<Control>>,
}

impl Link {
    /// Sets the mode; it takes effect at once on every connection (while the link is cut, after
    /// the last heal).
    pub fn set_mode(&self, mode: Mode) {
        self.control.send_modify(|c| c.mode = mode);
    }

    /// Delays and loses what the link passes from now on ([`Impairment::default`]: neither).
    pub fn impair(&self, impairment: Impairment) {
        self.control.send_modify(|c| c.impairment = impairment);
    }

    /// From now on, what the link still holds from the server when the server's side of a
    /// connection ends (a crash) is lost, and the connection is reset, rather than delivered.
    pub fn lose_in_flight_when_upstream_closes(&self) {
        self.control.send_modify(|c| c.lose_in_flight = true);
    }

    /// The mode in force now.
    pub fn mode(&self) -> Mode {
        self.control.borrow().effective()
    }

    /// Adds one cause of a blackhole (a pause, a partition): nothing flows until each cut is
    /// healed.
    pub fn cut(&self) {
        self.control.send_modify(|c| c.cuts += 1);
    }

    /// Ends one cause of a blackhole. A heal without a cut does nothing.
    pub fn heal(&self) {
        self.control
            .send_modify(|c| c.cuts = c.cuts.saturating_sub(1));
    }
}

/// A TCP relay from a loopback port to `upstream`. Dropping it ends its tasks and closes their
/// sockets.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    link: Link,
    accept: JoinHandle<()>,
    refusal: Refusal,
}

/// The first TLS handshake a proxy's server refused, shared with its connections.
type Refusal = Arc<Mutex<Option<String>>>;

/// How a proxy reaches its server.
#[derive(Clone)]
struct Upstream {
    addr: SocketAddr,
    tls: Option<Tls>,
    refusal: Refusal,
    /// How long a refused upstream connection is tried again before the client is reset
    /// ([`Proxy::start_patient`]).
    patience: Duration,
}

impl Proxy {
    /// A proxy to `upstream`, listening on a free port of `127.0.0.1`, in [`Mode::Pass`]. Which
    /// transmissions a loss drops is drawn from `seed` (per connection and direction, in the
    /// order they are read). Must be called within a tokio runtime (its tasks are spawned on it).
    pub async fn start(upstream: SocketAddr, seed: u64) -> io::Result<Proxy> {
        Proxy::start_tls(upstream, seed, None).await
    }

    /// As [`Proxy::start`], speaking `tls` (when given) to `upstream`.
    pub async fn start_tls(upstream: SocketAddr, seed: u64, tls: Option<Tls>) -> io::Result<Proxy> {
        Proxy::open(upstream, seed, tls, Duration::ZERO).await
    }

    /// As [`Proxy::start`], but an upstream that refuses a connection is tried again every
    /// 20 ms for `patience` before the client is reset.
    ///
    /// For a peer that retries refused connections itself, quickly: its connect completes at
    /// the proxy whatever the upstream does, so a refusal can only reach it as a reset of an
    /// open connection, which it may treat as something else. A ZooKeeper follower does: it
    /// retries a refused connection to its new leader (whose port opens a moment after the
    /// election) five times, 100 ms apart, but gives the leader up on a reset, and the
    /// ensemble stayed without a quorum for `initLimit` ticks on a race no real link has.
    pub async fn start_patient(
        upstream: SocketAddr,
        seed: u64,
        patience: Duration,
    ) -> io::Result<Proxy> {
        Proxy::open(upstream, seed, None, patience).await
    }

    async fn open(
        upstream: SocketAddr,
        seed: u64,
        tls: Option<Tls>,
        patience: Duration,
    ) -> io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (control, watcher) = watch::channel(Control {
            mode: Mode::Pass,
            cuts: 0,
            impairment: Impairment::default(),
            lose_in_flight: false,
        });
        let refusal = Refusal::default();
        let to = Upstream {
            addr: upstream,
            tls,
            refusal: refusal.clone(),
            patience,
        };
        let accept = tokio::spawn(accept_loop(listener, to, watcher, seed));
        Ok(Proxy {
            addr,
            upstream,
            link: Link {
                control: Arc::new(control),
            },
            accept,
            refusal,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server it relays to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// A handle on its mode.
    pub fn link(&self) -> Link {
        self.link.clone()
    }

    /// Why its server refused a TLS handshake, if it ever did.
    pub fn tls_refusal(&self) -> Option<String> {
        self.refusal.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Sets its mode (see [`Link::set_mode`]).
    pub fn set_mode(&self, mode: Mode) {
        self.link.set_mode(mode);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept task owns the connection tasks (a `JoinSet`): dropping it aborts them.
        self.accept.abort();
    }
}

/// Accepts connections until aborted, each served by a task it owns.
async fn accept_loop(
    listener: TcpListener,
    upstream: Upstream,
    control: watch::Receiver<Control>,
    seed: u64,
) {
    let mut connections = JoinSet::new();
    let mut accepted_count = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Two generators per connection (one per direction), each its own stream.
                    let seed = seed ^ accepted_count.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    accepted_count += 1;
                    connections.spawn(relay(stream, upstream.clone(), control.clone(), seed));
                }
                Err(e) => {
                    // Out of file descriptors or an aborted handshake: try again shortly.
                    tracing::debug!(upstream = %upstream.addr, "proxy accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            // Reaps finished connections, so the set does not grow with the run.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Closes `stream` with a reset rather than a FIN once it is dropped.
fn reset(stream: &TcpStream) {
    if let Err(e) = stream.set_zero_linger() {
        tracing::debug!("proxy: SO_LINGER 0: {e}");
    }
}

/// Waits until the link is not a blackhole and returns what is in force then.
async fn flowing(control: &mut watch::Receiver<Control>) -> io::Result<Control> {
    match control.wait_for(|c| c.effective() != Mode::Blackhole).await {
        Ok(c) => Ok(*c),
        Err(_) => Err(io::Error::other("proxy dropped")),
    }
}

/// Serves one accepted connection until either side closes it or the link resets it.
async fn relay(
    mut client: TcpStream,
    to: Upstream,
    mut control: watch::Receiver<Control>,
    seed: u64,
) {
    let upstream = to.addr;
    // A connection made during a blackhole is held before anything reaches the server.
    let held = control.borrow().effective() == Mode::Blackhole;
    match flowing(&mut control).await.map(|c| c.effective()) {
        Ok(Mode::Reset) | Err(_) => return reset(&client),
        Ok(_) => {}
    }
    let mut early = Vec::new();
    if held && abandoned(&client, &mut early) {
        tracing::debug!(%upstream, "proxy: a connection given up while held is dropped");
        return;
    }
    let patient_until = tokio::time::Instant::now() + to.patience;
    let mut server = loop {
        match TcpStream::connect(upstream).await {
            Ok(server) => break server,
            Err(e)
                if e.kind() == io::ErrorKind::ConnectionRefused
                    && tokio::time::Instant::now() < patient_until =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => {
                tracing::debug!(%upstream, "proxy: upstream refused: {e}");
                return reset(&client);
            }
        }
    };
    // The relay adds no batching of its own: small requests (pings, commands) go out at once.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let Some(tls) = &to.tls else {
        if exchange(&mut client, &mut server, &early, &control, seed).await {
            reset(&client);
            reset(&server);
        }
        return;
    };
    let mut server = match tls.handshake(upstream, server).await {
        Ok(server) => server,
        Err(e) => {
            tracing::debug!(%upstream, "proxy: {e}");
            if let HandshakeError::Refused(why) = e {
                if let Ok(mut refusal) = to.refusal.lock() {
                    refusal.get_or_insert(why);
                }
            }
            return reset(&client);
        }
    };
    if exchange(&mut client, &mut server, &early, &control, seed).await {
        reset(&client);
        reset(server.get_ref().0);
    }
}

/// Relays between `client` and `server` (after what the client sent while held, `early`) until
/// either side closes or the link resets; whether both are to be reset.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut TcpStream,
    server: &mut S,
    early: &[u8],
    control: &watch::Receiver<Control>,
    seed: u64,
) -> bool {
    if server.write_all(early).await.is_err() {
        return true;
    }
    let (client_read, client_write) = client.split();
    let (server_read, server_write) = tokio::io::split(server);
    let mut resets = control.clone();
    tokio::select! {
        biased;
        _ = resets.wait_for(|c| c.effective() == Mode::Reset) => true,
        result = async {
            tokio::try_join!(
                pump(client_read, server_write, control.clone(), seed, false),
                pump(server_read, client_write, control.clone(), !seed, true),
            )
        } => {
            // A side that failed (reset by its peer) is passed on as a reset of the other.
            result.is_err()
        }
    }
}

/// Whether the client of a held connection has closed it (or it broke); what it sent meanwhile is
/// appended to `early`, to be forwarded first.
fn abandoned(client: &TcpStream, early: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match client.try_read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => early.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Forwards one direction until its end of stream (passed on as a FIN) or an error. Reading and
/// writing run concurrently, joined by a queue, so a delayed chunk does not hold up the reading
/// of the next one and order is kept. From the server (`from_server`), on a link that loses
/// what is in flight when the server closes, the end of the stream is an error instead: what
/// the queue still holds is dropped, and the relay resets the connection.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    control: watch::Receiver<Control>,
    seed: u64,
    from_server: bool,
) -> io::Result<()> {
    // An empty chunk marks the end of the stream.
    let (queue, mut chunks) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut read_control = control.clone();
    let read = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            flowing(&mut read_control).await?;
            let n = match from.read(&mut buf).await {
                // A TLS server that closes without a close_notify: the end of its stream, as
                // the same server's FIN is without TLS.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
                n => n?,
            };
            if n == 0 && from_server && read_control.borrow().lose_in_flight {
                return Err(io::Error::other(
                    "the server closed; what was in flight is lost",
                ));
            }
            // The writer ends only after the end marker, so it is still there to receive.
            let _ = queue.send((Instant::now(), buf[..n].to_vec()));
            if n == 0 {
                return Ok::<(), io::Error>(());
            }
        }
    };
    let mut write_control = control;
    let mut losses = StdRng::seed_from_u64(seed);
    let write = async move {
        while let Some((read_at, chunk)) = chunks.recv().await {
            let mut rto = MIN_RTO;
            loop {
                // Look again after every wait: the link may have been cut or changed meanwhile.
                let impairment = flowing(&mut write_control).await?.impairment;
                let due = read_at + impairment.delay;
                if Instant::now() < due {
                    tokio::time::sleep_until(due).await;
                } else if impairment.loss > 0.0 && losses.gen::<f64>() < impairment.loss {
                    tokio::time::sleep(rto).await;
                    rto = (rto * 2).min(MAX_RTO);
                } else {
                    break;
                }
            }
            if chunk.is_empty() {
                to.shutdown().await?;
                return Ok(());
            }
            to.write_all(&chunk).await?;
        }
        Ok(())
    };
    tokio::try_join!(read, write).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback server that echoes every connection's bytes back until its end of stream.
    async fn echo_server() -> (SocketAddr, JoinHandle<()>) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                connections.spawn(async move {
                    let (mut r, mut w) = stream.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (addr, task)
    }

    /// Generous bound for what must happen: only a hang fails on it, never slowness.
    const EVENTUALLY: Duration = Duration::from_secs(10);

    /// Asserts that `stream` is reset by the proxy soon.
    async fn assert_reset(stream: &mut TcpStream) {
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(EVENTUALLY, stream.read(&mut buf))
            .await
            .expect("the reset arrives");
        assert_eq!(
            read.map_err(|e| e.kind()),
            Err(io::ErrorKind::ConnectionReset)
        );
    }

    async fn read_exactly(stream: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        tokio::time::timeout(EVENTUALLY, stream.read_exact(&mut buf))
            .await
            .expect("the bytes arrive")
            .expect("the connection stays up");
        buf
    }

    /// Whether anything arrives on `stream` within `wait`: used only to show that nothing is
    /// forwarded (a slow machine can only make it pass, never fail).
    async fn arrives_within(stream: &mut TcpStream, wait: Duration) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(wait, stream.read(&mut buf)).await,
            Ok(Ok(n)) if n > 0
        )
    }

    #[tokio::test(flavor = "current_thread")]
    async fn pass_relays_both_ways_to_the_upstream() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 0).await.unwrap();
        assert_eq!(proxy.upstream(), echo);
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        stream.write_all(b"hello").await.unwrap();
        assert_eq!(read_exactly(&mut stream, 5).await, b"hello");
        assert_eq!(proxy.link().mode(), Mode::Pass);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn blackhole_holds_bytes_of_open_and_new_connections_until_the_link_passes() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 0).await.unwrap();
        let mut open = TcpStream::connect(proxy.addr()).await.unwrap();
        open.write_all(b"up").await.unwrap();
        assert_eq!(read_exactly(&mut open, 2).await, b"up");

        proxy.set_mode(Mode::Blackhole);
        open.write_all(b"held").await.unwrap();
        let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
        new.write_all(b"new").await.unwrap();
        assert!(!arrives_within(&mut open, Duration::from_millis(300)).await);
        assert!(!arrives_within(&mut new, Duration::from_millis(50)).await);

        proxy.set_mode(Mode::Pass);
        assert_eq!(read_exactly(&mut open, 4).await, b"held");
        assert_eq!(read_exactly(&mut new, 3).await, b"new");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_given_up_during_a_blackhole_never_reaches_the_upstream() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let upstream = listener.local_addr().unwrap();
        let proxy = Proxy::start(upstream, 0).await.unwrap();
        proxy.set_mode(Mode::Blackhole);
        let mut abandoned = TcpStream::connect(proxy.addr()).await.unwrap();
        abandoned.write_all(b"stale").await.unwrap();
        drop(abandoned);
        let mut kept = TcpStream::connect(proxy.addr()).await.unwrap();
        kept.write_all(b"fresh").await.unwrap();
        // Let the proxy see the first connection's end before the link passes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        proxy.set_mode(Mode::Pass);
        let (mut accepted, _) = tokio::time::timeout(EVENTUALLY, listener.accept())
            .await
            .expect("the kept connection reaches the upstream")
            .unwrap();
        assert_eq!(read_exactly(&mut accepted, 5).await, b"fresh");
        // The abandoned one never comes (a slow machine can only make this pass).
        assert!(
            tokio::time::timeout(Duration::from_millis(300), listener.accept())
                .await
                .is_err()
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn cuts_are_counted_and_outrank_the_mode_set() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 0).await.unwrap();
        let link = proxy.link();
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        link.cut();
        link.cut();
        link.set_mode(Mode::Reset);
        assert_eq!(link.mode(), Mode::Blackhole);
        stream.write_all(b"x").await.unwrap();
        link.heal();
        assert_eq!(link.mode(), Mode::Blackhole, "one cut is still in force");
        assert!(!arrives_within(&mut stream, Duration::from_millis(200)).await);
        link.heal();
        link.set_mode(Mode::Pass);
        link.heal(); // one too many: does nothing
        assert_eq!(link.mode(), Mode::Pass);
        assert_eq!(read_exactly(&mut stream, 1).await, b"x");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn reset_closes_open_connections_and_resets_new_ones() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 0).await.unwrap();
        let mut open = TcpStream::connect(proxy.addr()).await.unwrap();
        open.write_all(b"a").await.unwrap();
        assert_eq!(read_exactly(&mut open, 1).await, b"a");

        proxy.set_mode(Mode::Reset);
        assert_reset(&mut open).await;

        let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_reset(&mut new).await;

        proxy.set_mode(Mode::Pass);
        let mut again = TcpStream::connect(proxy.addr()).await.unwrap();
        again.write_all(b"b").await.unwrap();
        assert_eq!(read_exactly(&mut again, 1).await, b"b");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn delay_forwards_each_chunk_after_the_delay_in_order() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 0).await.unwrap();
        let delay = Duration::from_millis(150);
        proxy.link().impair(Impairment { delay, loss: 0.0 });
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        let sent = Instant::now();
        for chunk in [&b"one,"[..], b"two,", b"three"] {
            stream.write_all(chunk).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(read_exactly(&mut stream, 4).await, b"one,");
        // Delayed on the way there and on the way back.
        assert!(sent.elapsed() >= 2 * delay, "{:?}", sent.elapsed());
        assert_eq!(read_exactly(&mut stream, 9).await, b"two,three");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lost_chunk_is_retransmitted_after_the_loss_ends_and_nothing_overtakes_it() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 0).await.unwrap();
        let link = proxy.link();
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        link.impair(Impairment {
            delay: Duration::ZERO,
            loss: 1.0,
        });
        let sent = Instant::now();
        stream.write_all(b"first").await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        stream.write_all(b",second").await.unwrap();
        // Every transmission is lost while the loss lasts (a slow machine only makes it pass).
        assert!(!arrives_within(&mut stream, Duration::from_millis(300)).await);
        link.impair(Impairment::default());
        // The next retransmission gets through, with everything behind it, in order.
        assert_eq!(read_exactly(&mut stream, 12).await, b"first,second");
        assert!(sent.elapsed() >= MIN_RTO, "{:?}", sent.elapsed());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lossy_link_delivers_every_byte_in_order() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 7).await.unwrap();
        proxy.link().impair(Impairment {
            delay: Duration::from_millis(1),
            loss: 0.3,
        });
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut expected = Vec::new();
        for i in 0..8u8 {
            let chunk = [b'a' + i; 3];
            stream.write_all(&chunk).await.unwrap();
            expected.extend_from_slice(&chunk);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(read_exactly(&mut stream, expected.len()).await, expected);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn what_a_lagging_link_holds_when_its_server_dies_is_lost() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let proxy = Proxy::start(listener.local_addr().unwrap(), 0)
            .await
            .unwrap();
        proxy.link().impair(Impairment {
            delay: Duration::from_millis(300),
            loss: 0.0,
        });
        proxy.link().lose_in_flight_when_upstream_closes();
        let mut replica = TcpStream::connect(proxy.addr()).await.unwrap();
        let (mut primary, _) = tokio::time::timeout(EVENTUALLY, listener.accept())
            .await
            .expect("the proxy connects upstream")
            .unwrap();
        primary.write_all(b"unreplicated").await.unwrap();
        drop(primary);
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(EVENTUALLY, replica.read(&mut buf))
            .await
            .expect("the connection ends");
        assert!(!matches!(read, Ok(n) if n > 0), "{read:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_refused_upstream_resets_the_client() {
        // A port nobody listens on (the kernel's pick, released).
        let dead = TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let proxy = Proxy::start(dead, 0).await.unwrap();
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_reset(&mut stream).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_server_that_does_not_speak_tls_resets_the_client_and_the_refusal_is_kept() {
        // An echo server answers a ClientHello with a ClientHello: no TLS server would.
        let (echo, _server) = echo_server().await;
        let tls = Tls::load(crate::tls::TlsFiles::default()).unwrap();
        let proxy = Proxy::start_tls(echo, 0, Some(tls)).await.unwrap();
        assert_eq!(proxy.tls_refusal(), None);
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_reset(&mut stream).await;
        assert!(proxy.tls_refusal().is_some(), "the refusal is kept");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_the_proxy_closes_its_connections_and_its_port() {
        let (echo, _server) = echo_server().await;
        let proxy = Proxy::start(echo, 0).await.unwrap();
        let addr = proxy.addr();
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"a").await.unwrap();
        assert_eq!(read_exactly(&mut stream, 1).await, b"a");
        let link = proxy.link();
        drop(proxy);
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(EVENTUALLY, stream.read(&mut buf))
            .await
            .expect("the connection is closed");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        // The listener is gone with the accept task.
        assert!(TcpStream::connect(addr).await.is_err());
        // A handle that outlived its proxy changes nothing and does not panic.
        link.set_mode(Mode::Reset);
    }
}
