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
use crate::host::RequestScheme;

/// How long a client may take to send a request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one HTTP/1.1 connection until the peer closes it or shutdown is
/// signalled, in which case the request in flight finishes first.
pub async fn serve<IO>(
    io: IO,
    frontend: Frontend,
    scheme: RequestScheme,
    mut shutdown: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let frontend = frontend.clone();
        async move { Ok::<_, Infallible>(frontend.respond(request, scheme).await) }
    });
    let connection = http1::Builder::new()
        .keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
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
        tracing::debug!("http/1.1 connection ended: {err}");
    }
}
