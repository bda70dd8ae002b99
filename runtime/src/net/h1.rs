//! HTTP/1.1 connections, served by hyper and dispatched to the host.

use std::convert::Infallible;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use super::frontend::Frontend;
use super::listener::io_fault;
use crate::host::RequestScheme;
use crate::metrics::CloseReason;

/// How long a client may take to send a request head, by default.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one HTTP/1.1 connection until the peer closes it or shutdown is
/// signalled, in which case the request in flight finishes first. A request head
/// not whole within `header_read` (counted from when wedge waits for it) closes the
/// connection.
///
/// A client may half-close (shut down its sending side once its request is sent) and
/// still gets its response. So a client that went away altogether is noticed only
/// when its response is written: a handler that writes nothing runs on until it
/// answers or its wall-time limit.
pub async fn serve<IO>(
    io: IO,
    frontend: Frontend,
    scheme: RequestScheme,
    mut shutdown: watch::Receiver<bool>,
    header_read: Duration,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let frontend = frontend.for_connection();
    let counted = frontend.clone();
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let frontend = frontend.clone();
        async move { Ok::<_, Infallible>(frontend.respond(request, scheme).await) }
    });
    let connection = http1::Builder::new()
        .keep_alive(true)
        .half_close(true)
        .timer(TokioTimer::new())
        .header_read_timeout(header_read)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let stopping = tokio::select! {
        result = connection.as_mut() => Some(result),
        _ = shutdown.wait_for(|stop| *stop) => None,
    };
    let result = match stopping {
        Some(result) => result,
        None => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(err) = result {
        let reason = peer_fault(&err);
        match reason {
            Some(CloseReason::HeaderTimeout) => tracing::debug!(
                "http/1.1 connection closed: no whole request head within {header_read:?}"
            ),
            _ => tracing::debug!("http/1.1 connection ended: {err}"),
        }
        if let Some(reason) = reason {
            counted.closed(reason);
        }
    }
}

/// The peer fault that ended a connection, if it was one (not, say, a response body
/// the guest aborted).
fn peer_fault(err: &hyper::Error) -> Option<CloseReason> {
    if err.is_timeout() {
        return Some(CloseReason::HeaderTimeout);
    }
    if err.is_parse() || err.is_parse_too_large() {
        return Some(CloseReason::ProtocolError);
    }
    if err.is_incomplete_message() {
        return Some(CloseReason::Incomplete);
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_fault(io);
        }
        source = cause.source();
    }
    None
}
