//! The listeners: cleartext TCP (HTTP/1.1, or h2c by its preface), TLS (HTTP/1.1 or
//! h2 by ALPN) and, on the TLS port number over UDP, HTTP/3 (QUIC). Each accepted
//! connection is handed to its protocol driver; on shutdown the listeners close and
//! connections drain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::frontend::Frontend;
use super::h2::H2Config;
use super::h3::H3Config;
use super::response_hook::ResponseHook;
use super::reuseport::{self, Share};
use super::rewind::Rewind;
use super::sniff::{Cleartext, sniff};
use super::tls::{self, Negotiated};
use crate::host::RequestScheme;
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
    /// HTTP/1.1 request body frames (chunks) beyond what their octets pay for
    /// ([`super::h1::ChunkBudget`]): past it the connection is closed.
    pub h1_chunk_budget: u32,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            handshake: HANDSHAKE_TIMEOUT,
            h1_header_read: super::h1::HEADER_READ_TIMEOUT,
            h1_chunk_budget: super::h1::DEFAULT_CHUNK_BUDGET,
        }
    }
}

/// One worker's bound listeners, not yet accepting. Plain sockets, so they can be
/// bound on one thread and served on a worker's: `serve` registers them with the
/// runtime it runs on.
pub struct Listeners {
    plain: Option<std::net::TcpListener>,
    tls: Option<std::net::TcpListener>,
    /// HTTP/3's socket: the TLS address, over UDP.
    quic: Option<std::net::UdpSocket>,
    limits: ConnLimits,
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
struct Shared {
    /// Cleartext's way to the app; TLS connections add their response hook.
    frontend: Frontend,
    h2: Arc<H2Config>,
    limits: ConnLimits,
    shutdown: watch::Receiver<bool>,
}

fn bind(addr: SocketAddr, share: Share) -> Result<std::net::TcpListener> {
    reuseport::tcp(addr, share).with_context(|| format!("cannot listen on {addr}"))
}

fn bind_udp(addr: SocketAddr, share: Share) -> Result<std::net::UdpSocket> {
    reuseport::udp(addr, share)
        .with_context(|| format!("cannot listen on {addr} (UDP, for HTTP/3)"))
}

impl Listeners {
    /// Binds the cleartext and TLS addresses that are given, and with `h3` the TLS
    /// listener's address (port 0 resolved) over UDP; errors name the address (e.g.
    /// port in use). Other workers join these addresses with [`Listeners::join`].
    pub fn bind(plain: Option<SocketAddr>, tls: Option<SocketAddr>, h3: bool) -> Result<Listeners> {
        let plain = plain.map(|addr| bind(addr, Share::Open)).transpose()?;
        let tls = tls.map(|addr| bind(addr, Share::Open)).transpose()?;
        let quic = match &tls {
            Some(tls) if h3 => Some(bind_udp(tls.local_addr()?, Share::Open)?),
            _ => None,
        };
        Ok(Listeners {
            plain,
            tls,
            quic,
            limits: ConnLimits::default(),
        })
    }

    /// Another worker's listeners on the same addresses (ports as bound): the kernel
    /// spreads new connections across them (`SO_REUSEPORT`).
    pub fn join(&self) -> Result<Listeners> {
        Ok(Listeners {
            plain: self
                .plain_addr()
                .map(|a| bind(a, Share::Join))
                .transpose()?,
            tls: self.tls_addr().map(|a| bind(a, Share::Join)).transpose()?,
            quic: self
                .h3_addr()
                .map(|a| bind_udp(a, Share::Join))
                .transpose()?,
            limits: self.limits,
        })
    }

    /// The same listeners, closing connections past `limits`.
    pub fn with_limits(self, limits: ConnLimits) -> Listeners {
        Listeners { limits, ..self }
    }

    /// The cleartext address actually bound (port 0 resolved).
    pub fn plain_addr(&self) -> Option<SocketAddr> {
        self.plain.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The TLS address actually bound.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The UDP address HTTP/3 is served on.
    pub fn h3_addr(&self) -> Option<SocketAddr> {
        self.quic.as_ref().and_then(|s| s.local_addr().ok())
    }

    /// Accepts until `stop` resolves, then lets connections finish their
    /// requests in flight for at most `drain`. `acceptor` terminates TLS on
    /// the TLS listener and is required when there is one; `h3` is required when
    /// HTTP/3 was bound. Runs on the runtime that is to own the connections.
    pub async fn serve(
        self,
        frontend: Frontend,
        h2: Arc<H2Config>,
        acceptor: Option<TlsAcceptor>,
        h3: Option<H3Server>,
        stop: impl Future<Output = ()>,
        drain: Duration,
    ) -> Result<Drained> {
        anyhow::ensure!(
            self.tls.is_none() || acceptor.is_some(),
            "a TLS listener needs a certificate"
        );
        let plain = self.plain.map(TcpListener::from_std).transpose()?;
        let tls = self.tls.map(TcpListener::from_std).transpose()?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        // What TLS responses get on the way out; cleartext ones get nothing.
        let mut tls_hook = ResponseHook::none();
        let mut quic = None;
        if let Some(socket) = self.quic {
            let h3 = h3.context("HTTP/3 needs its server config")?;
            let port = socket.local_addr()?.port();
            let endpoint = quinn::Endpoint::new(
                quinn::EndpointConfig::default(),
                Some(h3.quinn),
                socket,
                Arc::new(quinn::TokioRuntime),
            )
            .context("starting HTTP/3")?;
            quic = Some(endpoint.clone());
            connections.spawn(super::h3::serve(
                endpoint,
                frontend.clone(),
                h3.config,
                shutdown_rx.clone(),
            ));
            tls_hook = ResponseHook::advertise_h3(port);
        }
        let shared = Shared {
            frontend,
            h2,
            limits: self.limits,
            shutdown: shutdown_rx,
        };
        let tls_shared = Shared {
            frontend: shared.frontend.with_hook(tls_hook),
            ..shared.clone()
        };
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = accept(plain.as_ref()) => {
                    if let Some(stream) = accepted {
                        let open = shared.frontend.accepted();
                        let serving = plain_connection(stream, shared.clone());
                        connections.spawn(async move {
                            let _open = open;
                            serving.await
                        });
                    }
                }
                accepted = accept(tls.as_ref()) => {
                    if let (Some(stream), Some(acceptor)) = (accepted, &acceptor) {
                        let open = shared.frontend.accepted();
                        let serving = tls_connection(stream, acceptor.clone(), tls_shared.clone());
                        connections.spawn(async move {
                            let _open = open;
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
            refuse_quic_until(quic.as_ref(), finished).await;
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
    quic: Option<quinn::Endpoint>,
}

impl Drained {
    /// Keeps refusing new QUIC connections until `others` resolves.
    pub async fn refuse_until(self, others: impl Future<Output = ()>) {
        refuse_quic_until(self.quic.as_ref(), others).await;
    }
}

/// Refuses every new QUIC connection on `quic` (if any) until `done` resolves.
async fn refuse_quic_until(quic: Option<&quinn::Endpoint>, done: impl Future<Output = ()>) {
    let refusing = async {
        match quic {
            Some(endpoint) => super::h3::refuse_all(endpoint).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = done => {}
        () = refusing => {}
    }
}

/// Accepts one connection; pends forever when there is no listener. Accept
/// errors (e.g. out of file descriptors) are logged and yield `None` after a
/// short pause, so serving goes on.
async fn accept(listener: Option<&TcpListener>) -> Option<TcpStream> {
    let Some(listener) = listener else {
        return std::future::pending().await;
    };
    match listener.accept().await {
        Ok((stream, _peer)) => {
            let _ = stream.set_nodelay(true);
            Some(stream)
        }
        Err(err) => {
            tracing::warn!("accept failed: {err}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            None
        }
    }
}

/// The peer fault an IO error on a connection shows, if it shows one: a reset (or a
/// write to a peer gone), or TLS that failed (bad records, an alert). A TLS peer that
/// closes without `close_notify` is not one: many clients end connections so.
pub(crate) fn io_fault(err: &std::io::Error) -> Option<CloseReason> {
    use std::io::ErrorKind;
    match err.kind() {
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            Some(CloseReason::Reset)
        }
        ErrorKind::InvalidData => Some(CloseReason::TlsError),
        _ => None,
    }
}

/// Runs `step` (`what` a connection does before its protocol is known) unless
/// shutdown begins or the handshake timeout passes first; a timeout or a failure is
/// logged and counted.
async fn before_shutdown<T>(
    shared: &mut Shared,
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
    shared.frontend.closed(failed);
    None
}

async fn plain_connection(mut stream: TcpStream, mut shared: Shared) {
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

async fn tls_connection(stream: TcpStream, acceptor: TlsAcceptor, mut shared: Shared) {
    let accepted = before_shutdown(&mut shared, "TLS handshake", acceptor.accept(stream)).await;
    let Some(tls) = accepted else {
        return;
    };
    match tls::negotiated(tls.get_ref().1) {
        Negotiated::H1 => serve_h1(tls, shared, RequestScheme::Https).await,
        Negotiated::H2 => serve_h2(tls, shared, RequestScheme::Https).await,
    }
}

async fn serve_h1<IO>(io: IO, shared: Shared, scheme: RequestScheme)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _open = shared.frontend.connection(Protocol::H1);
    let limits = shared.limits;
    super::h1::serve(io, shared.frontend, scheme, shared.shutdown, limits).await
}

async fn serve_h2<IO>(io: IO, shared: Shared, scheme: RequestScheme)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _open = shared.frontend.connection(Protocol::H2);
    super::h2::serve(io, shared.frontend, scheme, shared.shutdown, shared.h2).await
}
