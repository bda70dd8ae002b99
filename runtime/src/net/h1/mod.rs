//! HTTP/1.1 connections, served by hyper and dispatched to a [`Service`].

mod chunk_budget;
mod fail_after_flush;
mod host_field;
mod request_body;
mod stall_watch;

use std::convert::Infallible;
use std::time::Duration;

use http::{HeaderValue, Response, StatusCode, Uri, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

pub use chunk_budget::{ChunkBudget, DEFAULT_CHUNK_BUDGET};
use fail_after_flush::FailAfterFlush;
use request_body::BodyReader;
use stall_watch::{StallWatch, Stalled};

use super::io_fault::io_fault;
use super::service::Service;
use super::tcp_socket::ResetOnClose;
use super::uri::{self, RequestScheme};
use crate::metrics::CloseReason;

/// How long a client may take to send a request head, by default.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client may take none of what waits to be written to it, by default (as
/// HTTP/2's `--h2-write-timeout`).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest HTTP/1.1 request head, in octets, by default: hyper's read buffer
/// (its own default is ~400 KiB); a head still incomplete when it is full gets
/// `431` (hyper tries to parse after each read, so one completed by the read that
/// crosses the bound passes).
/// Body reads share the buffer, so it is kept at a size that still reads a body
/// in large pieces.
pub const DEFAULT_MAX_HEAD_SIZE: u32 = 64 << 10;

/// hyper refuses (panics on) a read buffer below this.
pub const MIN_MAX_HEAD_SIZE: u32 = 8192;

/// What an HTTP/1.1 connection may take (the listener's `ConnLimits` hold them).
#[derive(Debug, Clone, Copy)]
pub struct H1Limits {
    /// A request head, from when wedge starts waiting for it to its last octet.
    pub header_read: Duration,
    /// The largest request head, in octets (at least [`MIN_MAX_HEAD_SIZE`]).
    pub max_head_size: u32,
    /// Request body frames beyond what their octets pay for ([`ChunkBudget`]).
    pub chunk_budget: u32,
    /// A client that takes none of what waits to be written for this long is reset.
    pub write_timeout: Duration,
}

/// Serves one HTTP/1.1 connection until the peer closes it or shutdown is
/// signalled, in which case the request in flight finishes first. A request head
/// not whole within `limits.header_read` (counted from when wedge waits for it), or
/// request bodies past `limits.chunk_budget`, close the connection; a head past
/// `limits.max_head_size` octets is answered `431` and closes it.
///
/// A client may half-close (shut down its sending side once its request is sent) and
/// still gets its response. So a client that went away altogether is noticed only
/// when its response is written: a handler that writes nothing runs on until it
/// answers or its wall-time limit. A client that stops reading holds its connection
/// no longer than its response lasts, nor than `limits.write_timeout` without taking
/// anything: while a write waits on the socket, the connection is reset once the
/// response is cut off (its wall time, its guest's failure) or the timeout passes.
pub(crate) async fn serve<IO, S>(
    io: IO,
    service: S,
    scheme: RequestScheme,
    mut shutdown: watch::Receiver<bool>,
    limits: H1Limits,
) where
    IO: AsyncRead + AsyncWrite + ResetOnClose + Unpin + Send + 'static,
    S: Service,
{
    let header_read = limits.header_read;
    let service = service.for_connection();
    let counted = service.counters().clone();
    let bodies = BodyReader::new(limits.chunk_budget);
    let flooded = bodies.flooded();
    let (mut watch, responses) = StallWatch::new(limits.write_timeout);
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let service = service.clone();
        let responses = responses.clone();
        let fault = host_field::host_fault(request.version(), request.headers());
        let expects_continue = request
            .headers()
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let (mut parts, incoming) = request.into_parts();
        parts.uri = absolute(parts.uri, &parts.headers, scheme);
        let started = match fault {
            None => Ok(bodies.start(incoming, expects_continue)),
            Some(fault) => Err(fault),
        };
        async move {
            let response = match started {
                Ok(started) => {
                    let request = hyper::Request::from_parts(parts, started.body);
                    let response = service.call(request, scheme).await;
                    if let Some(first_read) = started.first_read {
                        first_read.settled().await;
                    }
                    response
                }
                Err(fault) => bad_request(&service, fault),
            };
            Ok::<_, Infallible>(response.map(|body| FailAfterFlush::new(responses.watched(body))))
        }
    });
    let connection = http1::Builder::new()
        .keep_alive(true)
        .half_close(true)
        .timer(TokioTimer::new())
        .header_read_timeout(header_read)
        .max_buf_size(limits.max_head_size.max(MIN_MAX_HEAD_SIZE) as usize)
        .serve_connection(TokioIo::new(watch.io(io)), service);
    tokio::pin!(connection);
    let served = async {
        let finished = tokio::select! {
            result = connection.as_mut() => Some(result),
            _ = shutdown.wait_for(|stop| *stop) => None,
        };
        match finished {
            Some(result) => result,
            None => {
                connection.as_mut().graceful_shutdown();
                connection.as_mut().await
            }
        }
    };
    let write_timeout = limits.write_timeout;
    let stalled = std::future::poll_fn(|cx| watch.poll_stalled(cx));
    let result = tokio::select! {
        // The connection first: the watch looks at what its poll left.
        biased;
        result = served => result,
        // The client's framing cost more than it may: closed at once, whatever is in
        // flight (its handler is stopped, not blamed), also while draining.
        () = flooded.notified() => {
            counted.closed(CloseReason::ChunkFlood);
            return;
        }
        // What hyper holds for a client that is not reading would wait for it
        // forever, also while draining.
        stalled = stalled => {
            match stalled {
                // The response is over (its fault reported), and so is the connection.
                Stalled::CutOff => tracing::debug!(
                    "http/1.1 connection reset: its response was cut off while a write to the client waited"
                ),
                Stalled::WriteTimeout => {
                    tracing::debug!(
                        "http/1.1 connection reset: the client took nothing written for {write_timeout:?}"
                    );
                    counted.closed(CloseReason::WriteTimeout);
                }
            }
            return;
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

/// An origin-form target made absolute from the connection's scheme and the Host
/// field, as HTTP/2 and HTTP/3 heads are. A target already absolute, or a request
/// without a Host that makes an authority, keeps its target.
fn absolute(target: Uri, fields: &http::HeaderMap, scheme: RequestScheme) -> Uri {
    if target.scheme().is_some() {
        return target;
    }
    let Some(host) = fields.get(header::HOST) else {
        return target;
    };
    let path = target.path_and_query().map_or("/", |p| p.as_str());
    uri::absolute(scheme.as_str().as_bytes(), host.as_bytes(), path.as_bytes()).unwrap_or(target)
}

/// `400` for a request that is not dispatched, closing the connection: what follows
/// a malformed request is not trusted either.
fn bad_request<S: Service>(service: &S, fault: &str) -> Response<S::Body> {
    service.counters().closed(CloseReason::ProtocolError);
    let text = format!("400 Bad Request: {fault}\n");
    let mut response = service.refuse(StatusCode::BAD_REQUEST, text);
    let close = HeaderValue::from_static("close");
    response.headers_mut().insert(header::CONNECTION, close);
    response
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
