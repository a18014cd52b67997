//! TLS to servers the user runs (`lockcheck real --endpoints … --tls`).
//!
//! Where the TLS is spoken depends on how the server starts it:
//! - **Redis, ZooKeeper (its `secureClientPort`) and etcd** speak TLS from the first byte. The
//!   proxy every client reaches a server through ([`crate::proxy`]) opens the TLS session to the
//!   server and relays plaintext to the client over loopback, inside lockcheck's own process. The
//!   faults act on the proxy's link exactly as without TLS (a cut holds bytes, a loss stalls
//!   them), and the client crates need no TLS of their own. The administrative exchanges of
//!   [`crate::endpoints`] go through such a proxy too.
//! - **MariaDB** switches to TLS inside its protocol (an `SSLRequest` after the server's
//!   greeting), which a relay cannot do for its client: there the client crate (mysql_async)
//!   speaks TLS end to end, through the proxy, with the same roots, client certificate and
//!   server name.
//!
//! Either way the server's certificate is verified: against the CA file given (`--tls-ca`), or
//! else the Mozilla roots (`webpki-roots`); for the name given (`--tls-server-name`), or else the
//! endpoint's IP address. A client certificate (`--tls-cert`, `--tls-key`) is presented when
//! given: Redis (`tls-auth-clients yes`, its default) and ZooKeeper (`ssl.clientAuth=need`, its
//! default) ask for one. There is no option to skip verification: a verdict on a server that
//! might not be the one meant is not worth having.

use crate::error::RealError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// How long a TLS handshake may take before the connection is given up.
pub const HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);

/// The files and name TLS is configured from, as the user gives them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM file of the CA certificate(s) the servers' certificates are verified against; none:
    /// the Mozilla roots.
    pub ca: Option<PathBuf>,
    /// PEM file of the client certificate chain to present.
    pub cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    pub key: Option<PathBuf>,
    /// The name the servers' certificates must carry; none: each endpoint's IP address.
    pub server_name: Option<String>,
}

/// TLS as lockcheck speaks it to the user's servers: loaded once, shared by every connection
/// (cloning it is cheap).
#[derive(Clone)]
pub struct Tls(Arc<Loaded>);

/// What [`Tls`] shares.
#[derive(Clone)]
struct Loaded {
    config: Arc<ClientConfig>,
    files: TlsFiles,
    /// The CA file's PEM, for mysql_async.
    ca_pem: Option<Vec<u8>>,
    /// The client certificate's and its key's PEM, for mysql_async.
    identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The host each server was given by, when the user named it (not its address).
    hosts: BTreeMap<SocketAddr, String>,
}

impl std::fmt::Debug for Tls {
    // The configuration holds keys; the files name everything worth knowing.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("files", &self.0.files)
            .field("hosts", &self.0.hosts)
            .finish()
    }
}

impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        self.0.files == other.0.files && self.0.hosts == other.0.hosts
    }
}

impl Eq for Tls {}

/// Reads a file for TLS, naming the flag it came from when it cannot be read.
/// The largest PEM file read (`--tls-ca`, `--tls-cert`, `--tls-key`).
const MAX_PEM_BYTES: u64 = 4 << 20;

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, RealError> {
    // A PEM file is text, and a CA bundle of a few hundred certificates is well under a MiB:
    // a device (/dev/zero), a FIFO or a huge file is refused rather than read without limit.
    lockcheck_core::input::read_text(path, MAX_PEM_BYTES)
        .map(String::into_bytes)
        .map_err(|e| RealError::Tls(format!("{flag} {}: {e}", path.display())))
}

impl Tls {
    /// Loads the files: every certificate and key is parsed now, so a wrong file is an error
    /// before anything connects.
    pub fn load(files: TlsFiles) -> Result<Tls, RealError> {
        let bad = |message: String| RealError::Tls(message);
        let mut roots = RootCertStore::empty();
        let ca_pem = match &files.ca {
            Some(path) => {
                let pem = read("--tls-ca", path)?;
                let mut found = 0;
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert =
                        cert.map_err(|e| bad(format!("--tls-ca {}: {e}", path.display())))?;
                    roots.add(cert).map_err(|e| {
                        bad(format!(
                            "--tls-ca {}: not a CA certificate: {e}",
                            path.display()
                        ))
                    })?;
                    found += 1;
                }
                if found == 0 {
                    return Err(bad(format!(
                        "--tls-ca {}: no PEM certificate in it",
                        path.display()
                    )));
                }
                Some(pem)
            }
            None => {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                None
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(format!("TLS versions: {e}")))?
            .with_root_certificates(roots);
        let (config, identity) = match (&files.cert, &files.key) {
            (Some(cert_path), Some(key_path)) => {
                let cert_pem = read("--tls-cert", cert_path)?;
                let key_pem = read("--tls-key", key_path)?;
                let chain = CertificateDer::pem_slice_iter(&cert_pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(format!("--tls-cert {}: {e}", cert_path.display())))?;
                if chain.is_empty() {
                    return Err(bad(format!(
                        "--tls-cert {}: no PEM certificate in it",
                        cert_path.display()
                    )));
                }
                let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
                    bad(format!(
                        "--tls-key {}: no private key: {e}",
                        key_path.display()
                    ))
                })?;
                let config = builder.with_client_auth_cert(chain, key).map_err(|e| {
                    bad(format!(
                        "--tls-cert {} with --tls-key {}: {e}",
                        cert_path.display(),
                        key_path.display()
                    ))
                })?;
                (config, Some((cert_pem, key_pem)))
            }
            (None, None) => (builder.with_no_client_auth(), None),
            _ => {
                return Err(bad(
                    "--tls-cert and --tls-key go together: the certificate and its key".into(),
                ))
            }
        };
        if let Some(name) = &files.server_name {
            ServerName::try_from(name.as_str())
                .map_err(|e| bad(format!("--tls-server-name {name:?}: {e}")))?;
        }
        Ok(Tls(Arc::new(Loaded {
            config: Arc::new(config),
            files,
            ca_pem,
            identity,
            hosts: BTreeMap::new(),
        })))
    }

    /// The files it was loaded from.
    pub fn files(&self) -> &TlsFiles {
        &self.0.files
    }

    /// The same TLS, verifying the certificate of the server at each address for the host it
    /// was given by (`redis.example.com:6380`), unless a server name was given for all.
    pub fn with_hosts(mut self, hosts: impl IntoIterator<Item = (SocketAddr, String)>) -> Tls {
        Arc::make_mut(&mut self.0).hosts.extend(hosts);
        self
    }

    /// The same TLS, verifying every server's certificate for `addr`'s name: for a client that
    /// reaches the server at `addr` through a proxy, whose address is not the server's.
    pub fn naming(mut self, addr: SocketAddr) -> Tls {
        let name = self.server_name(addr);
        Arc::make_mut(&mut self.0).files.server_name = Some(name);
        self
    }

    /// The name `addr`'s certificate must carry: the one given for all, or the host it was given
    /// by, or else its IP address.
    pub fn server_name(&self, addr: SocketAddr) -> String {
        self.0
            .files
            .server_name
            .clone()
            .or_else(|| self.0.hosts.get(&addr).cloned())
            .unwrap_or_else(|| addr.ip().to_string())
    }

    /// Opens TLS over `tcp`, a connection to the server at `addr`, within
    /// [`HANDSHAKE_WITHIN`]. The error says why, in words a user can act on.
    pub async fn handshake(
        &self,
        addr: SocketAddr,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, HandshakeError> {
        let name = ServerName::try_from(self.server_name(addr))
            .map_err(|e| HandshakeError::Refused(e.to_string()))?;
        let connector = TlsConnector::from(self.0.config.clone());
        match tokio::time::timeout(HANDSHAKE_WITHIN, connector.connect(name, tcp)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(HandshakeError::from_io(e)),
            Err(_) => Err(HandshakeError::Io(format!(
                "no TLS handshake within {} s",
                HANDSHAKE_WITHIN.as_secs()
            ))),
        }
    }

    /// Connects to `addr` and opens TLS: what [`crate::endpoints::reach`] tries first, so that a
    /// certificate problem is named before the run rather than seen as a dead server during it.
    pub async fn connect(&self, addr: SocketAddr) -> Result<TlsStream<TcpStream>, HandshakeError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| HandshakeError::Io(e.to_string()))?;
        self.handshake(addr, tcp).await
    }

    /// The same TLS for mysql_async, which speaks it itself (see the module's docs).
    pub fn mysql_ssl_opts(&self, addr: SocketAddr) -> mysql_async::SslOpts {
        use mysql_async::{ClientIdentity, SslOpts};
        let mut opts = SslOpts::default();
        if let Some(pem) = &self.0.ca_pem {
            opts = opts
                .with_root_certs(vec![pem.clone().into()])
                .with_disable_built_in_roots(true);
        }
        if let Some((cert, key)) = &self.0.identity {
            opts = opts.with_client_identity(Some(ClientIdentity::new(
                cert.clone().into(),
                key.clone().into(),
            )));
        }
        // mysql_async connects to the proxy (127.0.0.1); the certificate is the server's.
        opts.with_danger_tls_hostname_override(Some(self.server_name(addr)))
    }
}

/// Why a TLS handshake failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// TLS itself refused: a certificate that does not verify, a server that does not speak TLS,
    /// a client certificate the server rejects. The same on every attempt: an error of the run.
    Refused(String),
    /// The connection broke or stalled: what a fault does, not a setting.
    Io(String),
}

impl HandshakeError {
    fn from_io(e: std::io::Error) -> HandshakeError {
        // rustls reports its own errors as `InvalidData`, with the TLS error inside.
        if e.kind() == std::io::ErrorKind::InvalidData {
            HandshakeError::Refused(e.to_string())
        } else {
            HandshakeError::Io(e.to_string())
        }
    }
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::Refused(why) => write!(f, "TLS refused: {why}"),
            HandshakeError::Io(why) => write!(f, "TLS handshake: {why}"),
        }
    }
}
