//! The HTTP client guests' outbound requests go through, one per app:
//! hyper-util's pooling client (keep-alive per origin, bounded idle
//! connections, idle timeout; HTTP/2 shared by all requests when the origin
//! picks it by ALPN) over a connector that reaches only the addresses the
//! app's policy allows. Both bodies stream with hyper's backpressure.

mod body;
mod connect;
mod settings;

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::capture_connection;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

use self::body::ResponseBody;
use self::connect::{ConnectError, Connector, host_of, port_of};
use super::guest_log::GuestOutput;
use super::outbound::Outbound;

pub use settings::{
    ClientSettings, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_IDLE_PER_HOST, configure, root_store,
    tls_config,
};

/// What a guest gets when it sets no timeout of its own (wasmtime's defaults).
const UNSET_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a request may wait for each stage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// Until a connection is ready (a pooled one, or a new one opened).
    connect: Duration,
    /// From then until the response head.
    first_byte: Duration,
    /// Between frames of the response body.
    between_bytes: Duration,
}

impl Timeouts {
    /// The guest's options; its connect timeout may only shorten `max_connect`.
    pub(crate) fn new(options: Option<RequestOptions>, max_connect: Duration) -> Self {
        let options = options.unwrap_or_default();
        Timeouts {
            connect: options
                .connect_timeout
                .map_or(max_connect, |t| t.min(max_connect)),
            first_byte: options.first_byte_timeout.unwrap_or(UNSET_TIMEOUT),
            between_bytes: options.between_bytes_timeout.unwrap_or(UNSET_TIMEOUT),
        }
    }
}

/// One app's client and connection pool.
#[derive(Clone)]
pub(crate) struct OutboundClient {
    client: Client<Connector, WasiBody>,
}

impl OutboundClient {
    pub(crate) fn new(policy: Arc<Outbound>) -> Self {
        let shared = settings::shared();
        let connector = Connector {
            policy,
            tls: tokio_rustls::TlsConnector::from(shared.tls.clone()),
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(shared.idle_timeout)
            .pool_max_idle_per_host(shared.max_idle_per_host)
            .build(connector);
        OutboundClient { client }
    }

    /// Sends `request` (absolute URI) for an app; the response body holds
    /// `in_flight` until it ends. A failure is logged once, in the app's `log`.
    pub(crate) async fn send(
        &self,
        log: &GuestOutput,
        mut request: http::Request<WasiBody>,
        timeouts: Timeouts,
        in_flight: OwnedSemaphorePermit,
    ) -> Result<http::Response<WasiBody>, Error> {
        let target = format!("{}:{}", host_of(request.uri()), port_of(request.uri()));
        let mut connection = capture_connection(&mut request);
        let mut response = std::pin::pin!(self.client.request(request));
        // The connect timeout covers waiting for a pooled connection too; the
        // first-byte one starts once the request has a connection.
        let connecting = tokio::time::timeout(timeouts.connect, async {
            tokio::select! {
                biased;
                done = &mut response => Some(done),
                _ = connection.wait_for_connection_metadata() => None,
            }
        });
        let done = match connecting.await {
            Err(_) => {
                log.warn(format_args!(
                    "outbound connection to {target} failed: no connection within {}",
                    humantime::format_duration(timeouts.connect)
                ));
                return Err(Error::ConnectionTimeout);
            }
            Ok(Some(done)) => done,
            Ok(None) => match tokio::time::timeout(timeouts.first_byte, response).await {
                Ok(done) => done,
                Err(_) => {
                    log.warn(format_args!(
                        "outbound request to {target}: no response within {}",
                        humantime::format_duration(timeouts.first_byte)
                    ));
                    return Err(Error::ConnectionReadTimeout);
                }
            },
        };
        let response = done.map_err(|err| failure(log, &target, &err))?;
        Ok(response.map(|incoming| {
            ResponseBody::new(incoming, timeouts.between_bytes, in_flight).boxed_unsync()
        }))
    }
}

/// The guest's error code for a failed request, logged in the app's `log`.
fn failure(log: &GuestOutput, target: &str, err: &hyper_util::client::legacy::Error) -> Error {
    let connect = std::iter::successors(std::error::Error::source(err), |e| e.source())
        .find_map(|e| e.downcast_ref::<ConnectError>());
    let Some(connect) = connect else {
        log.warn(format_args!(
            "outbound request to {target} failed: {}",
            chain(err)
        ));
        return protocol_error(err);
    };
    match connect {
        ConnectError::Refused(_) => log.warn(format_args!(
            "outbound request to {target} denied: {connect}"
        )),
        _ => log.warn(format_args!(
            "outbound connection to {target} failed: {connect}"
        )),
    }
    match connect {
        ConnectError::Refused(_) => Error::HttpRequestDenied,
        ConnectError::Dns(err) => Error::DnsError {
            rcode: Some(err.to_string()),
            info_code: None,
        },
        ConnectError::Timeout(_) => Error::ConnectionTimeout,
        ConnectError::Connect(_, err) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            Error::ConnectionRefused
        }
        ConnectError::Connect(..) => Error::DestinationUnavailable,
        ConnectError::Tls(err) => match err.get_ref().and_then(|e| e.downcast_ref()) {
            Some(rustls::Error::InvalidCertificate(_)) => Error::TlsCertificateError,
            _ => Error::TlsProtocolError,
        },
    }
}

/// The code for a request that had a connection but failed on it.
fn protocol_error(err: &hyper_util::client::legacy::Error) -> Error {
    let hyper = std::iter::successors(std::error::Error::source(err), |e| e.source())
        .find_map(|e| e.downcast_ref::<hyper::Error>());
    match hyper {
        Some(e) if e.is_incomplete_message() || e.is_closed() => Error::ConnectionTerminated,
        Some(e) if e.is_timeout() => Error::HttpResponseTimeout,
        _ => Error::HttpProtocolError,
    }
}

/// `err` and its sources on one line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
