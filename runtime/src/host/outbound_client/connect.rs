//! Opening a connection to an origin for an app: resolve the name ourselves,
//! keep only the addresses the app's policy lets it reach (no loopback,
//! private, ... unless the allow-list names them), connect to one of exactly
//! those (no second resolution a DNS rebinding could change), then TLS with
//! ALPN for `https`.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::host::outbound::{Outbound, Refused};

/// The hyper-util connector of one app's client.
#[derive(Clone)]
pub(super) struct Connector {
    pub(super) policy: Arc<Outbound>,
    pub(super) tls: TlsConnector,
}

/// Why no connection was opened; the client turns it into the guest's error
/// code and one log line.
#[derive(Debug)]
pub(super) enum ConnectError {
    /// Every address the name resolved to is special and not named by the
    /// allow-list.
    Refused(Refused),
    Dns(io::Error),
    Timeout(Duration),
    Connect(SocketAddr, io::Error),
    Tls(io::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Refused(refused) => {
                let Refused { address, class } = refused;
                let why = if refused.never_allowed() {
                    "which is never a destination (a connection to it reaches this host)"
                } else {
                    "which --allow-outbound does not name"
                };
                write!(f, "it resolves to {address} ({class}), {why}")
            }
            ConnectError::Dns(err) => write!(f, "cannot resolve the name: {err}"),
            ConnectError::Timeout(after) => {
                write!(
                    f,
                    "no connection within {}",
                    humantime::format_duration(*after)
                )
            }
            ConnectError::Connect(addr, err) => write!(f, "connecting to {addr}: {err}"),
            ConnectError::Tls(err) => write!(f, "TLS: {err}"),
        }
    }
}

impl std::error::Error for ConnectError {}

/// The port a request for `uri` goes to.
pub(super) fn port_of(uri: &Uri) -> u16 {
    let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    uri.port_u16().unwrap_or(if https { 443 } else { 80 })
}

/// `uri`'s host without IPv6 brackets.
pub(super) fn host_of(uri: &Uri) -> &str {
    let host = uri.host().unwrap_or_default();
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

impl Connector {
    async fn connect(self, uri: Uri) -> Result<TokioIo<Stream>, ConnectError> {
        let (host, port) = (host_of(&uri), port_of(&uri));
        let resolved = tokio::net::lookup_host((host, port))
            .await
            .map_err(ConnectError::Dns)?;
        let addresses = self
            .policy
            .reachable(host, port, resolved)
            .map_err(ConnectError::Refused)?;
        let tcp = connect_any(&addresses).await?;
        // Requests are written whole or streamed by the guest: no batching.
        let _ = tcp.set_nodelay(true);
        if uri.scheme() != Some(&http::uri::Scheme::HTTPS) {
            return Ok(TokioIo::new(Stream::Plain(tcp)));
        }
        let name = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => ServerName::from(ip),
            Err(_) => ServerName::try_from(host.to_owned())
                .map_err(|err| ConnectError::Tls(io::Error::other(err)))?,
        };
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(ConnectError::Tls)?;
        Ok(TokioIo::new(Stream::Tls(Box::new(tls))))
    }
}

/// Connects to the first of `addresses` that accepts; the last error if none does.
async fn connect_any(addresses: &[SocketAddr]) -> Result<TcpStream, ConnectError> {
    let mut last = None;
    for &addr in addresses {
        match TcpStream::connect(addr).await {
            Ok(tcp) => return Ok(tcp),
            Err(err) => last = Some(ConnectError::Connect(addr, err)),
        }
    }
    Err(last.unwrap_or_else(|| {
        ConnectError::Dns(io::Error::new(
            io::ErrorKind::NotFound,
            "the name has no addresses",
        ))
    }))
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<Stream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    /// Resolving, connecting and the TLS handshake together take at most the
    /// app's connect timeout (a request may wait less: see the client).
    fn call(&mut self, uri: Uri) -> Self::Future {
        let limit = self.policy.connect_timeout;
        let connect = self.clone().connect(uri);
        Box::pin(async move {
            tokio::time::timeout(limit, connect)
                .await
                .map_err(|_| ConnectError::Timeout(limit))?
        })
    }
}

/// A connection to an origin, in the clear or over TLS.
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection for Stream {
    /// HTTP/2 when the origin chose it by ALPN; the pool then shares the
    /// connection between requests instead of holding one per request.
    fn connected(&self) -> Connected {
        match self {
            Stream::Tls(tls) if tls.get_ref().1.alpn_protocol() == Some(b"h2") => {
                Connected::new().negotiated_h2()
            }
            _ => Connected::new(),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(tls).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(tls).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(tls).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(tls).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(tls).poll_shutdown(cx),
        }
    }
}
