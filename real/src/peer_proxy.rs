//! One front door per cluster member for its peers' connections, which tells who dialled each
//! one and sends it on to the link of that pair.
//!
//! Why a front door and not a proxy per pair, as [`crate::ensemble`] gives a ZooKeeper ensemble:
//! an etcd member dials its peers at the URLs named in `--initial-cluster`, and every member
//! must name the same URLs (member ids are derived from them), so member `i` cannot be given an
//! address of its own for member `j`. And etcd is Go, which makes its system calls itself, so
//! the peer-link preload ([`crate::peerlink`]) cannot redirect its connects. So each member is
//! reached at one address, its [`PeerFront`], and the front finds out who dialled through the
//! kernel ([`dialler`]): the accepted connection's peer address is the dialler's local address;
//! `/proc/net/tcp` gives the inode of the socket with that local address and the front as its
//! remote; and the member process whose `/proc/PID/fd` holds `socket:[INODE]` dialled it. The
//! PIDs are asked for at each accept, so a member restarted under a new PID is known at once.
//!
//! A connection is then relayed, byte for byte, to the address its dialler is routed to (the
//! pair's own [`crate::proxy::Proxy`], whose link the cluster cuts and heals); one whose dialler
//! cannot be told goes to the front's `unknown` route, and is logged.

use std::cell::Cell;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The PIDs the members run as now, in member order (`None`: down). Asked at each accept.
pub type MemberPids = Rc<dyn Fn() -> Vec<Option<u32>>>;

/// Which member dialled the connection that a listener at `listener` accepted from `peer`
/// (index into `pids`), by the kernel's tables: `None` when no member holds the dialling socket
/// (someone else dialled, or the dialler closed it already).
pub fn dialler(peer: SocketAddr, listener: SocketAddr, pids: &[Option<u32>]) -> Option<usize> {
    let inode = match socket_inode(peer, listener) {
        Ok(Some(inode)) => inode,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(%peer, "peer proxy: cannot read /proc/net/tcp: {e}");
            return None;
        }
    };
    let wanted = format!("socket:[{inode}]");
    pids.iter()
        .position(|pid| pid.is_some_and(|pid| holds(pid, &wanted)))
}

/// The inode of the socket whose local address is `local` and whose remote address is
/// `remote`, from `/proc/net/tcp` (and `tcp6`, for a dialler on a dual-stack socket).
fn socket_inode(local: SocketAddr, remote: SocketAddr) -> io::Result<Option<u64>> {
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(text) => text,
            // A kernel without IPv6 has no tcp6.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 10 {
                continue;
            }
            let (Some(l), Some(r)) = (parse_address(fields[1]), parse_address(fields[2])) else {
                continue;
            };
            // 0: a socket no process holds any more (TIME_WAIT).
            let inode: u64 = fields[9].parse().unwrap_or(0);
            if inode != 0 && same(l, local) && same(r, remote) {
                return Ok(Some(inode));
            }
        }
    }
    Ok(None)
}

/// Whether two addresses are the same, an IPv4-mapped IPv6 address being its IPv4 address.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && plain(a.ip()) == plain(b.ip())
}

/// An address as `/proc/net/tcp` writes it: the address's 32-bit words each printed as the
/// host reads them (so byte-swapped on a little-endian host), a colon, the port.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for k in (0..ip.len()).step_by(8) {
        let word = u32::from_str_radix(ip.get(k..k + 8)?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether process `pid` has a file descriptor that is `wanted` (`socket:[INODE]`). The members
/// run as this user, so their descriptors are readable; one that went meanwhile is skipped.
fn holds(pid: u32, wanted: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| target.as_os_str().as_encoded_bytes() == wanted.as_bytes())
    })
}

/// Where a front sends what it accepts.
#[derive(Clone, Debug)]
pub struct Routes {
    /// By dialler (member order): the address a connection from that member is relayed to.
    pub by_member: Vec<SocketAddr>,
    /// Where a connection whose dialler is not a member goes.
    pub unknown: SocketAddr,
}

/// A member's front door: listens on a loopback port and relays each accepted connection to its
/// dialler's route. Dropping it closes the port and every connection it relays.
#[derive(Debug)]
pub struct PeerFront {
    addr: SocketAddr,
    accept: JoinHandle<()>,
    counts: Rc<Counts>,
}

/// What a front has accepted so far.
#[derive(Debug, Default)]
struct Counts {
    accepted: Cell<u64>,
    unidentified: Cell<u64>,
}

impl PeerFront {
    /// A front on a free port of `127.0.0.1`, routing by `routes` the connections of the members
    /// `pids` names. Its tasks are local: it must be started within a [`tokio::task::LocalSet`].
    pub async fn start(routes: Routes, pids: MemberPids) -> io::Result<PeerFront> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let counts = Rc::new(Counts::default());
        let accept =
            tokio::task::spawn_local(accept_loop(listener, addr, routes, pids, counts.clone()));
        Ok(PeerFront {
            addr,
            accept,
            counts,
        })
    }

    /// How many connections it has accepted.
    pub fn accepted(&self) -> u64 {
        self.counts.accepted.get()
    }

    /// How many of them no member was found to have dialled (each took the unknown route).
    pub fn unidentified(&self) -> u64 {
        self.counts.unidentified.get()
    }

    /// Where the members dial this member.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for PeerFront {
    fn drop(&mut self) {
        // The accept task owns the relays (a `JoinSet`): aborting it aborts them.
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    addr: SocketAddr,
    routes: Routes,
    pids: MemberPids,
    counts: Rc<Counts>,
) {
    let mut relays = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Looked up before anything else: the dialler still holds its socket while
                    // it waits for the answer to its first request.
                    let who = dialler(peer, addr, &pids());
                    counts.accepted.set(counts.accepted.get() + 1);
                    let to = match who {
                        Some(member) => routes.by_member[member],
                        None => {
                            counts.unidentified.set(counts.unidentified.get() + 1);
                            tracing::warn!(
                                front = %addr, %peer,
                                "peer proxy: no member holds this connection's socket; it takes \
                                 the unknown route"
                            );
                            routes.unknown
                        }
                    };
                    tracing::trace!(front = %addr, %peer, ?who, %to, "peer proxy: accepted");
                    relays.spawn_local(relay(stream, to));
                }
                Err(e) => {
                    tracing::debug!(front = %addr, "peer proxy accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = relays.join_next(), if !relays.is_empty() => {}
        }
    }
}

/// Relays `stream` to `to` until both sides have closed; a reset (or a refusal) on one side is
/// passed on as a reset of the other, so a dialler sees what the pair's link did.
async fn relay(mut stream: TcpStream, to: SocketAddr) {
    let mut upstream = match TcpStream::connect(to).await {
        Ok(upstream) => upstream,
        Err(e) => {
            tracing::debug!(%to, "peer proxy: route refused: {e}");
            return reset(&stream);
        }
    };
    let _ = stream.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    if tokio::io::copy_bidirectional(&mut stream, &mut upstream)
        .await
        .is_err()
    {
        reset(&stream);
        reset(&upstream);
    }
}

/// Closes `stream` with a reset rather than a FIN once it is dropped.
fn reset(stream: &TcpStream) {
    if let Err(e) = stream.set_zero_linger() {
        tracing::debug!("peer proxy: SO_LINGER 0: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::process::{Child, Command, Stdio};

    /// A process that dials `port` on loopback, says `name` on the connection and keeps it open
    /// until the other side closes it (bash's `/dev/tcp`).
    fn dialling(name: &str, port: u16) -> Child {
        Command::new("bash")
            .arg("-c")
            .arg(format!(
                "exec 3<>/dev/tcp/127.0.0.1/{port}; echo {name} >&3; read -u 3 _; exit 0"
            ))
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Two processes dial one listener; each accepted connection is told to be the one of the
    /// process that says its name on it, and a connection this process dials is told to be
    /// nobody's of the two.
    #[test]
    fn each_connection_is_told_to_be_its_dialling_processes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut children = [
            dialling("first", addr.port()),
            dialling("second", addr.port()),
        ];
        let pids = [Some(children[0].id()), None, Some(children[1].id())];
        for _ in 0..2 {
            let (stream, peer) = listener.accept().unwrap();
            // Both still hold their connection: each waits for this side to close it.
            let who = dialler(peer, addr, &pids);
            let mut said = String::new();
            BufReader::new(&stream).read_line(&mut said).unwrap();
            let expected = match said.trim() {
                "first" => Some(0),
                "second" => Some(2),
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(who, expected, "{said:?} from {peer}");
            drop(stream);
        }
        for child in &mut children {
            assert!(child.wait().unwrap().success());
        }
        let own = std::net::TcpStream::connect(addr).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(dialler(peer, addr, &pids), None);
        let me = Some(std::process::id());
        assert_eq!(dialler(peer, addr, &[None, me]), Some(1));
        drop(own);
    }

    #[test]
    fn proc_net_tcp_addresses_are_read_in_host_order() {
        let v4 = parse_address("0100007F:1F90").unwrap();
        assert_eq!(v4, "127.0.0.1:8080".parse().unwrap());
        let mapped = parse_address("0000000000000000FFFF00000100007F:0050").unwrap();
        assert!(same(mapped, "127.0.0.1:80".parse().unwrap()));
        assert!(!same(mapped, "127.0.0.1:81".parse().unwrap()));
    }
}
