//! The listeners: cleartext TCP (HTTP/1.1, or h2c by its preface), TLS (HTTP/1.1 or
//! h2 by ALPN) and, on the TLS port number over UDP, HTTP/3 (QUIC). Each kind may
//! listen on several addresses (`localhost` is 127.0.0.1 and ::1) on one port. Each
//! accepted connection is handed to its protocol driver; on shutdown the listeners
//! close and connections drain.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::conn_gate::{
    Admitted, ConnGate, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT, Refused,
};
use super::h1::H1Limits;
use super::h2::H2Config;
use super::h3::H3Config;
use super::io_fault::io_fault;
use super::reuseport::{self, Share};
use super::rewind::Rewind;
use super::service::Service;
use super::sniff::{Cleartext, sniff};
use super::tcp_socket::{self, ResetOnClose};
use super::tls::{self, Negotiated};
use super::uri::RequestScheme;
use crate::metrics::{CloseReason, Protocol};

/// How long a new connection may take to say which protocol it speaks
/// (TLS handshake, or the first bytes on the cleartext port), by default.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a TCP connection may take at the stages before HTTP/2's own limits
/// (`H2Config`) take over, and what an HTTP/1.1 one may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// The TLS handshake, or on the cleartext port the first bytes (enough to tell
    /// HTTP/1.1 from h2c's preface).
    pub handshake: Duration,
    /// An HTTP/1.1 request head, from when wedge starts waiting for it (on a kept-alive
    /// connection: from the end of the previous response) to its last octet.
    pub h1_header_read: Duration,
    /// The largest HTTP/1.1 request head, in octets (at least
    /// [`super::h1::MIN_MAX_HEAD_SIZE`]); a larger one gets `431`.
    pub h1_max_head_size: u32,
    /// HTTP/1.1 request body frames (chunks) beyond what their octets pay for
    /// ([`super::h1::ChunkBudget`]): past it the connection is closed.
    pub h1_chunk_budget: u32,
    /// An HTTP/1.1 client that takes none of what waits to be written for this long
    /// is reset.
    pub h1_write_timeout: Duration,
    /// Octets the kernel may queue unsent on a connection (`TCP_NOTSENT_LOWAT`;
    /// `0`: the kernel's own bound).
    pub tcp_notsent_lowat: u32,
    /// TCP connections open at once, all workers together ([`ConnGate`]).
    pub max_connections: u32,
    /// TCP connections open at once from one client (IPv4 address, IPv6 /64).
    pub max_connections_per_client: u32,
}

impl ConnLimits {
    /// What an HTTP/1.1 connection may take.
    fn h1(&self) -> H1Limits {
        H1Limits {
            header_read: self.h1_header_read,
            max_head_size: self.h1_max_head_size,
            chunk_budget: self.h1_chunk_budget,
            write_timeout: self.h1_write_timeout,
        }
    }

    /// A count of open connections within these limits.
    fn gate(&self) -> Arc<ConnGate> {
        ConnGate::new(self.max_connections, self.max_connections_per_client)
    }
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            handshake: HANDSHAKE_TIMEOUT,
            h1_header_read: super::h1::HEADER_READ_TIMEOUT,
            h1_max_head_size: super::h1::DEFAULT_MAX_HEAD_SIZE,
            h1_chunk_budget: super::h1::DEFAULT_CHUNK_BUDGET,
            h1_write_timeout: super::h1::WRITE_TIMEOUT,
            tcp_notsent_lowat: tcp_socket::DEFAULT_NOTSENT_LOWAT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        }
    }
}

/// One worker's bound listeners, not yet accepting. Plain sockets, so they can be
/// bound on one thread and served on a worker's: `serve` registers them with the
/// runtime it runs on. Each kind's sockets share one port.
pub struct Listeners {
    plain: Vec<std::net::TcpListener>,
    tls: Vec<std::net::TcpListener>,
    /// HTTP/3's sockets: the TLS addresses, over UDP.
    quic: Vec<std::net::UdpSocket>,
    limits: ConnLimits,
    /// The connections open now, all workers' (`join` shares it).
    gate: Arc<ConnGate>,
}

/// HTTP/3 beside the TLS listener: quinn's server config (the TLS listener's
/// certificate, ALPN h3) and the engine's limits.
#[derive(Clone)]
pub struct H3Server {
    pub quinn: quinn::ServerConfig,
    pub config: Arc<H3Config>,
}

/// What every connection task needs.
#[derive(Clone)]
struct Shared<S> {
    /// What answers the requests (TLS connections' may advertise HTTP/3).
    service: S,
    h2: Arc<H2Config>,
    limits: ConnLimits,
    shutdown: watch::Receiver<bool>,
}

impl<S: Service> Shared<S> {
    /// The same, for a connection from `client`.
    fn for_client(&self, client: SocketAddr) -> Shared<S> {
        Shared {
            service: self.service.for_client(client),
            ..self.clone()
        }
    }
}

/// Tries of a set of addresses on port 0 (any port): the port the first address got
/// may be taken on another (another family's loopback, say); then all try another.
const ANY_PORT_TRIES: usize = 16;

/// Binds a socket of one kind.
type BindOne<S> = fn(SocketAddr, Share) -> std::io::Result<S>;

fn tcp(addr: SocketAddr, share: Share) -> std::io::Result<std::net::TcpListener> {
    reuseport::tcp(addr, share)
}

fn udp(addr: SocketAddr, share: Share) -> std::io::Result<std::net::UdpSocket> {
    reuseport::udp(addr, share)
}

/// Binds `addrs` on one port: the first address's (0 resolved by the kernel), so a
/// name's addresses (`localhost`: 127.0.0.1 and ::1) answer on the same port. An
/// address after the first that this host does not have (no IPv6, say) is skipped
/// with a warning; any other failure is an error naming the address (`what` says
/// which socket, e.g. "(UDP, for HTTP/3)").
fn bind_all<S>(
    addrs: &[SocketAddr],
    share: Share,
    bind: BindOne<S>,
    port_of: fn(&S) -> std::io::Result<u16>,
    what: &str,
) -> Result<Vec<S>> {
    let failed = |addr: &SocketAddr, err| {
        anyhow::Error::new(err).context(format!("cannot listen on {addr}{what}"))
    };
    let Some((first, rest)) = addrs.split_first() else {
        return Ok(Vec::new());
    };
    let tries = if first.port() == 0 { ANY_PORT_TRIES } else { 1 };
    let mut taken = None;
    for _ in 0..tries {
        let socket = bind(*first, share).map_err(|err| failed(first, err))?;
        let port = port_of(&socket)?;
        let mut sockets = vec![socket];
        let mut all = true;
        for addr in rest {
            let addr = SocketAddr::new(addr.ip(), port);
            match bind(addr, share) {
                Ok(socket) => sockets.push(socket),
                Err(err) if unavailable(&err) => {
                    tracing::warn!(
                        "not listening on {addr}{what}: {err} (this host has no such address)"
                    );
                }
                Err(err) if first.port() == 0 && err.kind() == ErrorKind::AddrInUse => {
                    taken = Some(failed(&addr, err));
                    all = false;
                    break;
                }
                Err(err) => return Err(failed(&addr, err)),
            }
        }
        if all {
            return Ok(sockets);
        }
    }
    Err(taken.expect("a try failed"))
}

/// An address this host does not have (::1 with IPv6 disabled), as opposed to one
/// in use.
fn unavailable(err: &std::io::Error) -> bool {
    err.kind() == ErrorKind::AddrNotAvailable
}

fn tcp_port(listener: &std::net::TcpListener) -> std::io::Result<u16> {
    listener.local_addr().map(|a| a.port())
}

fn udp_port(socket: &std::net::UdpSocket) -> std::io::Result<u16> {
    socket.local_addr().map(|a| a.port())
}

impl Listeners {
    /// Binds the cleartext and TLS addresses that are given (each kind on one port:
    /// its first address's, port 0 resolved), and with `h3` the TLS listeners'
    /// addresses over UDP; errors name the address (e.g. port in use). Other workers
    /// join these addresses with [`Listeners::join`].
    pub fn bind(
        plain: impl IntoIterator<Item = SocketAddr>,
        tls: impl IntoIterator<Item = SocketAddr>,
        h3: bool,
    ) -> Result<Listeners> {
        let plain: Vec<_> = plain.into_iter().collect();
        let tls: Vec<_> = tls.into_iter().collect();
        let plain = bind_all(&plain, Share::Open, tcp, tcp_port, "")?;
        let tls = bind_all(&tls, Share::Open, tcp, tcp_port, "")?;
        let quic = if h3 {
            let bound = addrs(&tls);
            bind_all(&bound, Share::Open, udp, udp_port, " (UDP, for HTTP/3)")?
        } else {
            Vec::new()
        };
        let limits = ConnLimits::default();
        Ok(Listeners {
            plain,
            tls,
            quic,
            gate: limits.gate(),
            limits,
        })
    }

    /// Another worker's listeners on the same addresses (ports as bound): the kernel
    /// spreads new connections across them (`SO_REUSEPORT`).
    pub fn join(&self) -> Result<Listeners> {
        let udp_addrs: Vec<_> = self
            .quic
            .iter()
            .filter_map(|s| s.local_addr().ok())
            .collect();
        Ok(Listeners {
            plain: bind_all(&addrs(&self.plain), Share::Join, tcp, tcp_port, "")?,
            tls: bind_all(&addrs(&self.tls), Share::Join, tcp, tcp_port, "")?,
            quic: bind_all(&udp_addrs, Share::Join, udp, udp_port, " (UDP, for HTTP/3)")?,
            limits: self.limits,
            // One count of connections for the process: its file descriptors are.
            gate: self.gate.clone(),
        })
    }

    /// The same listeners, closing connections past `limits`.
    pub fn with_limits(self, limits: ConnLimits) -> Listeners {
        Listeners {
            gate: limits.gate(),
            limits,
            ..self
        }
    }

    /// The (first) cleartext address actually bound (port 0 resolved).
    pub fn plain_addr(&self) -> Option<SocketAddr> {
        addrs(&self.plain).first().copied()
    }

    /// The (first) TLS address actually bound.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        addrs(&self.tls).first().copied()
    }

    /// The (first) UDP address HTTP/3 is served on.
    pub fn h3_addr(&self) -> Option<SocketAddr> {
        self.quic.first().and_then(|s| s.local_addr().ok())
    }

    /// Every address bound: cleartext, TLS, then HTTP/3's (UDP).
    pub fn addrs(&self) -> Vec<SocketAddr> {
        let udp = self.quic.iter().filter_map(|s| s.local_addr().ok());
        addrs(&self.plain)
            .into_iter()
            .chain(addrs(&self.tls))
            .chain(udp)
            .collect()
    }

    /// Accepts until `stop` resolves, then lets connections finish their
    /// requests in flight for at most `drain`. `acceptor` terminates TLS on
    /// the TLS listener and is required when there is one; `h3` is required when
    /// HTTP/3 was bound. Runs on the runtime that is to own the connections.
    pub async fn serve<S: Service>(
        self,
        service: S,
        h2: Arc<H2Config>,
        acceptor: Option<TlsAcceptor>,
        h3: Option<H3Server>,
        stop: impl Future<Output = ()>,
        drain: Duration,
    ) -> Result<Drained> {
        anyhow::ensure!(
            self.tls.is_empty() || acceptor.is_some(),
            "a TLS listener needs a certificate"
        );
        let tokio_listeners = |listeners: Vec<std::net::TcpListener>| {
            listeners
                .into_iter()
                .map(TcpListener::from_std)
                .collect::<std::io::Result<Vec<_>>>()
        };
        let plain = tokio_listeners(self.plain)?;
        let tls = tokio_listeners(self.tls)?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        // TLS clients learn of HTTP/3 on the same port number; cleartext ones do not.
        let mut tls_service = service.clone();
        let mut quic = Vec::new();
        if let Some(socket) = self.quic.first() {
            tls_service = service.with_h3_on(socket.local_addr()?.port());
        }
        if !self.quic.is_empty() {
            let h3 = h3.context("HTTP/3 needs its server config")?;
            for socket in self.quic {
                let endpoint = quinn::Endpoint::new(
                    quinn::EndpointConfig::default(),
                    Some(h3.quinn.clone()),
                    socket,
                    Arc::new(quinn::TokioRuntime),
                )
                .context("starting HTTP/3")?;
                quic.push(endpoint.clone());
                connections.spawn(super::h3::serve(
                    endpoint,
                    service.clone(),
                    h3.config.clone(),
                    shutdown_rx.clone(),
                ));
            }
        }
        let shared = Shared {
            service,
            h2,
            limits: self.limits,
            shutdown: shutdown_rx,
        };
        let tls_shared = Shared {
            service: tls_service,
            ..shared.clone()
        };
        tokio::pin!(stop);
        let (mut plain_turn, mut tls_turn) = (0, 0);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = accept(&plain, &mut plain_turn) => {
                    if let Some((stream, peer, admitted)) = admit(accepted, &self.gate, &shared) {
                        let open = shared.service.counters().accepted();
                        let serving = plain_connection(stream, shared.for_client(peer));
                        connections.spawn(async move {
                            let _open = (open, admitted);
                            serving.await
                        });
                    }
                }
                accepted = accept(&tls, &mut tls_turn) => {
                    let admitted = admit(accepted, &self.gate, &shared);
                    if let (Some((stream, peer, admitted)), Some(acceptor)) = (admitted, &acceptor) {
                        let open = shared.service.counters().accepted();
                        let serving = tls_connection(stream, acceptor.clone(), tls_shared.for_client(peer));
                        connections.spawn(async move {
                            let _open = (open, admitted);
                            serving.await
                        });
                    }
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop((plain, tls));
        let _ = shutdown_tx.send(true);
        let in_flight = connections.len();
        if in_flight > 0 {
            tracing::info!("draining {in_flight} connection(s) (at most {drain:?})");
        }
        let drained = tokio::time::timeout(drain, async {
            let finished = async { while connections.join_next().await.is_some() {} };
            // Till the last connection of any protocol is done, QUIC clients are told
            // no at once (TCP ones are, by the closed listeners).
            refuse_quic_until(&quic, finished).await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                "drain deadline passed; closing {} connection(s)",
                connections.len()
            );
            connections.shutdown().await;
        }
        Ok(Drained { quic })
    }
}

/// A worker whose connections are done. Its UDP socket stays open while other
/// workers drain: closing it would change the `SO_REUSEPORT` group, and the kernel
/// would send some of their QUIC clients' datagrams to another worker's socket.
#[must_use = "hold it until every worker has drained"]
pub struct Drained {
    quic: Vec<quinn::Endpoint>,
}

impl Drained {
    /// Keeps refusing new QUIC connections until `others` resolves.
    pub async fn refuse_until(self, others: impl Future<Output = ()>) {
        refuse_quic_until(&self.quic, others).await;
    }
}

/// Refuses every new QUIC connection on `quic` until `done` resolves.
async fn refuse_quic_until(quic: &[quinn::Endpoint], done: impl Future<Output = ()>) {
    // Dropped (aborted) when `done` resolves; refusing never ends on its own.
    let mut refusing = JoinSet::new();
    for endpoint in quic {
        let endpoint = endpoint.clone();
        refusing.spawn(async move { super::h3::refuse_all(&endpoint).await });
    }
    done.await;
}

/// The addresses `listeners` are bound to.
fn addrs(listeners: &[std::net::TcpListener]) -> Vec<SocketAddr> {
    listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect()
}

/// Accepts one connection on any of `listeners`, starting its look at the one after
/// the last that gave one (`turn`), so no listener starves another; pends forever
/// when there is none. Accept errors (e.g. out of file descriptors) are logged and
/// yield `None` after a short pause, so serving goes on.
async fn accept(listeners: &[TcpListener], turn: &mut usize) -> Option<(TcpStream, SocketAddr)> {
    let accepted = std::future::poll_fn(|cx| {
        for i in 0..listeners.len() {
            let index = (*turn + i) % listeners.len();
            if let Poll::Ready(result) = listeners[index].poll_accept(cx) {
                *turn = index + 1;
                return Poll::Ready(result);
            }
        }
        Poll::Pending
    });
    match accepted.await {
        Ok(accepted) => Some(accepted),
        Err(err) => {
            tracing::warn!("accept failed: {err}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            None
        }
    }
}

/// A place for an accepted connection within the connection limits; one past them is
/// closed at once (dropped), counted, and logged at the first and every 1,000th.
fn admit<S: Service>(
    accepted: Option<(TcpStream, SocketAddr)>,
    gate: &Arc<ConnGate>,
    shared: &Shared<S>,
) -> Option<(TcpStream, SocketAddr, Admitted)> {
    let (stream, peer) = accepted?;
    match gate.admit(peer.ip()) {
        Ok(admitted) => {
            tcp_socket::tune_accepted(&stream, shared.limits.tcp_notsent_lowat);
            Some((stream, peer, admitted))
        }
        Err(refused) => {
            shared
                .service
                .counters()
                .closed(CloseReason::ConnectionLimit);
            if gate.refusal() % 1000 == 1 {
                let why = match refused {
                    Refused::Full => format!(
                        "{} connections are open (--max-connections)",
                        shared.limits.max_connections
                    ),
                    Refused::ClientFull => format!(
                        "{} has {} open (--max-connections-per-client)",
                        peer.ip(),
                        shared.limits.max_connections_per_client
                    ),
                };
                tracing::warn!(
                    "connection from {peer} closed on arrival: {why} \
                     ({} refused since start)",
                    gate.refused()
                );
            }
            None
        }
    }
}

/// Runs `step` (`what` a connection does before its protocol is known) unless
/// shutdown begins or the handshake timeout passes first; a timeout or a failure is
/// logged and counted.
async fn before_shutdown<T, S: Service>(
    shared: &mut Shared<S>,
    what: &str,
    step: impl Future<Output = std::io::Result<T>>,
) -> Option<T> {
    let limit = shared.limits.handshake;
    let failed = tokio::select! {
        result = tokio::time::timeout(limit, step) => match result {
            Ok(Ok(value)) => return Some(value),
            Ok(Err(err)) => {
                tracing::debug!("connection closed: {what} failed: {err}");
                // A peer that closes mid-handshake (a TCP health check, say) left it
                // incomplete; anything else the stream says is a fault of its own.
                match err.kind() {
                    std::io::ErrorKind::UnexpectedEof => CloseReason::Incomplete,
                    _ => io_fault(&err).unwrap_or(CloseReason::Reset),
                }
            }
            Err(_) => {
                tracing::debug!("connection closed: no {what} within {limit:?}");
                CloseReason::HandshakeTimeout
            }
        },
        _ = shared.shutdown.wait_for(|stop| *stop) => return None,
    };
    shared.service.counters().closed(failed);
    None
}

async fn plain_connection<S: Service>(mut stream: TcpStream, mut shared: Shared<S>) {
    let sniffed = before_shutdown(&mut shared, "request bytes", sniff(&mut stream)).await;
    let Some((protocol, prefix)) = sniffed else {
        return;
    };
    let io = Rewind::new(prefix, stream);
    match protocol {
        Cleartext::H1 => serve_h1(io, shared, RequestScheme::Http).await,
        Cleartext::H2c => serve_h2(io, shared, RequestScheme::Http).await,
    }
}

async fn tls_connection<S: Service>(
    stream: TcpStream,
    acceptor: TlsAcceptor,
    mut shared: Shared<S>,
) {
    let accepted = before_shutdown(&mut shared, "TLS handshake", acceptor.accept(stream)).await;
    let Some(tls) = accepted else {
        return;
    };
    match tls::negotiated(tls.get_ref().1) {
        Negotiated::H1 => serve_h1(tls, shared, RequestScheme::Https).await,
        Negotiated::H2 => serve_h2(tls, shared, RequestScheme::Https).await,
    }
}

async fn serve_h1<IO, S>(io: IO, shared: Shared<S>, scheme: RequestScheme)
where
    IO: AsyncRead + AsyncWrite + ResetOnClose + Unpin + Send + 'static,
    S: Service,
{
    let _open = shared.service.counters().connection(Protocol::H1);
    let limits = shared.limits.h1();
    super::h1::serve(io, shared.service, scheme, shared.shutdown, limits).await
}

async fn serve_h2<IO, S>(io: IO, shared: Shared<S>, scheme: RequestScheme)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service,
{
    let _open = shared.service.counters().connection(Protocol::H2);
    super::h2::serve(io, shared.service, scheme, shared.shutdown, shared.h2).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_names_addresses_share_the_first_ones_port_and_missing_ones_are_skipped() {
        let loopbacks: Vec<SocketAddr> =
            vec!["127.0.0.1:0".parse().unwrap(), "[::1]:0".parse().unwrap()];
        let listeners = Listeners::bind(None, loopbacks, true).unwrap();
        let addrs = listeners.addrs();
        assert_eq!(addrs.len(), 4, "{addrs:?}");
        let port = addrs[0].port();
        assert!(addrs.iter().all(|a| a.port() == port), "{addrs:?}");
        assert!(addrs[1].is_ipv6() && addrs[3].is_ipv6(), "{addrs:?}");

        // TEST-NET-1 is on no host: it is skipped, the first address still serves.
        let missing: Vec<SocketAddr> = vec![
            "127.0.0.1:0".parse().unwrap(),
            "192.0.2.1:0".parse().unwrap(),
        ];
        assert_eq!(
            Listeners::bind(missing, None, false).unwrap().addrs().len(),
            1
        );
        // The first one is not optional.
        let first_missing: SocketAddr = "192.0.2.1:0".parse().unwrap();
        let err = Listeners::bind(Some(first_missing), None, false)
            .err()
            .unwrap();
        assert!(
            format!("{err:#}").contains("cannot listen on 192.0.2.1:0"),
            "{err:#}"
        );
    }
}
