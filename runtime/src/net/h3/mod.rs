//! wedge's HTTP/3 engine: quinn carries QUIC on the TLS listener's port number (UDP);
//! each connection is driven by the sans-IO core in `wedge_proto::h3` and dispatches
//! to the same [`Handler`](crate::net::handler::Handler) as HTTP/2.

mod config;
mod connection;
mod own_stream;
mod response;

use std::sync::Arc;

use quinn::VarInt;
use tokio::sync::watch;
use tokio::task::JoinSet;
use wedge_proto::h3::ErrorCode;

pub use config::H3Config;

use crate::metrics::Protocol;
use crate::net::request_body::ConnStats;
use crate::net::service::Service;
use crate::net::service::ToService;
use crate::net::uri::RequestScheme;

/// Accepts QUIC connections on `endpoint` until `shutdown`; then takes no new ones,
/// lets each connection send GOAWAY and finish its requests, and waits for the
/// endpoint to fall idle.
pub async fn serve<S: Service>(
    endpoint: quinn::Endpoint,
    service: S,
    config: Arc<H3Config>,
    mut shutdown: watch::Receiver<bool>,
) {
    let connection_shutdown = shutdown.clone();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                // Alt-Svc is for the TCP listener's clients (this service does not
                // advertise HTTP/3): HTTP/3 ones have found it.
                let connection = service.for_client(incoming.remote_address()).for_connection();
                let handler = ToService::new(connection, RequestScheme::Https, http::Version::HTTP_3);
                let counters = service.counters();
                let open = (counters.accepted(), counters.connection(Protocol::H3));
                let serving = connection::serve(
                    incoming,
                    handler,
                    config.clone(),
                    connection_shutdown.clone(),
                    Arc::new(ConnStats::default()),
                );
                connections.spawn(async move {
                    let _open = open;
                    serving.await
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    // New connections are refused by `refuse_all` while the server drains.
    while connections.join_next().await.is_some() {}
    endpoint.wait_idle().await;
}

/// Refuses every new QUIC connection with CONNECTION_REFUSED (RFC 9000 §10.2.3) for as
/// long as it runs, so a client of a draining server learns at once. Dropping the server
/// config instead makes quinn answer a stateless reset, which a client mid-handshake
/// ignores: it hangs until its own timeout.
pub async fn refuse_all(endpoint: &quinn::Endpoint) {
    while let Some(incoming) = endpoint.accept().await {
        incoming.refuse();
    }
    // The endpoint closed: nothing more can arrive.
    std::future::pending().await
}

/// An HTTP/3 error code as QUIC carries it.
fn quic_code(code: ErrorCode) -> VarInt {
    VarInt::from_u64(code as u64).expect("HTTP/3 error codes are QUIC varints")
}
