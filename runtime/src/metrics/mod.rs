//! Prometheus metrics: one registry per wedge process, encoded in the Prometheus text
//! format (0.0.4) for the admin listener's `GET /metrics`.
//!
//! Built on `prometheus-client` (the Prometheus project's own Rust client): explicit
//! registries rather than a process-global recorder, so tests own theirs; metrics are
//! cheap handles onto shared atomics. Every label set is created ahead of the requests
//! that record into it — an app's when it is loaded ([`Metrics::app`]), a protocol's
//! with the registry — so recording a request is atomic adds (and one histogram
//! observation), never a label lookup or an allocation.

mod app;
#[cfg(test)]
mod parse_text;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, prometheus_text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use app::{AppMetrics, FaultKind, KvOperation, KvOutcome};

/// The `Content-Type` of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// The protocol a connection or request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    H1,
    H2,
    H3,
}

impl Protocol {
    const ALL: [Protocol; 3] = [Protocol::H1, Protocol::H2, Protocol::H3];

    /// What a request's version says it arrived over (HTTP/1.0 and 0.9 count as h1).
    pub fn of(version: http::Version) -> Protocol {
        match version {
            http::Version::HTTP_2 => Protocol::H2,
            http::Version::HTTP_3 => Protocol::H3,
            _ => Protocol::H1,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabels {
    protocol: &'static str,
}

/// Why wedge ended a TCP connection other than in an orderly way (a peer fault), as
/// `wedge_connections_closed_total` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// No protocol within the handshake timeout: the TLS handshake, or the first bytes
    /// on the cleartext port (or HTTP/2's preface and SETTINGS, or its ACK of ours),
    /// did not arrive in time.
    HandshakeTimeout,
    /// The TLS handshake failed (not TLS, no shared version or cipher, ...).
    TlsError,
    /// A request head not whole within the header read timeout (slowloris).
    HeaderTimeout,
    /// HTTP/2: no streams for the idle timeout.
    IdleTimeout,
    /// HTTP/2: every response blocked on a zero window for the zero-window timeout.
    ZeroWindowTimeout,
    /// The peer took none of what was written for the write timeout (HTTP/1.1,
    /// HTTP/2).
    WriteTimeout,
    /// The peer reset the connection (or it broke) while wedge read or wrote; on
    /// HTTP/2, with requests in flight.
    Reset,
    /// The peer closed its side in the middle of a request.
    Incomplete,
    /// The peer broke the protocol (an HTTP/2 connection error, an HTTP/1.1 message
    /// that does not parse).
    ProtocolError,
    /// HTTP/1.1: request bodies in chunks too small for what decoding them costs
    /// (past the chunk budget).
    ChunkFlood,
    /// Closed on arrival: past --max-connections or --max-connections-per-client.
    ConnectionLimit,
}

impl CloseReason {
    const ALL: [CloseReason; 11] = [
        CloseReason::HandshakeTimeout,
        CloseReason::TlsError,
        CloseReason::HeaderTimeout,
        CloseReason::IdleTimeout,
        CloseReason::ZeroWindowTimeout,
        CloseReason::WriteTimeout,
        CloseReason::Reset,
        CloseReason::Incomplete,
        CloseReason::ProtocolError,
        CloseReason::ChunkFlood,
        CloseReason::ConnectionLimit,
    ];

    fn label(self) -> &'static str {
        match self {
            CloseReason::HandshakeTimeout => "handshake_timeout",
            CloseReason::TlsError => "tls_error",
            CloseReason::HeaderTimeout => "header_timeout",
            CloseReason::IdleTimeout => "idle_timeout",
            CloseReason::ZeroWindowTimeout => "zero_window_timeout",
            CloseReason::WriteTimeout => "write_timeout",
            CloseReason::Reset => "reset",
            CloseReason::Incomplete => "incomplete",
            CloseReason::ProtocolError => "protocol_error",
            CloseReason::ChunkFlood => "chunk_flood",
            CloseReason::ConnectionLimit => "connection_limit",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    worker: String,
}

/// One worker's handles: connections it accepted and has open now, requests it
/// answered (each stream of a connection on the worker that accepted it).
#[derive(Clone, Debug)]
pub struct WorkerMetrics {
    connections: Counter,
    connections_open: Gauge,
    requests: Counter,
}

impl WorkerMetrics {
    /// Counts a connection the worker accepted, open until the guard is dropped.
    pub fn accepted(&self) -> Open {
        self.connections.inc();
        Open::new(&self.connections_open)
    }

    /// Counts a request the worker began to answer.
    pub fn request(&self) {
        self.requests.inc();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CloseLabels {
    reason: &'static str,
}

/// One protocol's handles.
struct ProtocolMetrics {
    connections: Counter,
    connections_open: Gauge,
    streams_open: Gauge,
    unrouted: Counter,
}

/// The process's metrics.
pub struct Metrics {
    registry: Registry,
    apps: app::Families,
    protocols: [ProtocolMetrics; 3],
    closed: [Counter; CloseReason::ALL.len()],
    workers: Family<WorkerLabels, Counter>,
    workers_open: Family<WorkerLabels, Gauge>,
    worker_requests: Family<WorkerLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric wedge records, all under the `wedge_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("wedge");
        let apps = app::Families::register(&mut registry);
        let connections = Family::<ProtocolLabels, Counter>::default();
        let connections_open = Family::<ProtocolLabels, Gauge>::default();
        let streams_open = Family::<ProtocolLabels, Gauge>::default();
        let unrouted = Family::<ProtocolLabels, Counter>::default();
        registry.register(
            "connections",
            "Connections served (counted once their protocol is known), by protocol",
            connections.clone(),
        );
        registry.register(
            "connections_open",
            "Connections open now, by protocol",
            connections_open.clone(),
        );
        registry.register(
            "streams_open",
            "Requests being answered now (head received, response body not yet done), by protocol",
            streams_open.clone(),
        );
        registry.register(
            "unrouted_requests",
            "Requests no app's route matched (answered 404 by wedge), by protocol",
            unrouted.clone(),
        );
        let protocols = Protocol::ALL.map(|protocol| {
            let labels = ProtocolLabels {
                protocol: protocol.label(),
            };
            ProtocolMetrics {
                connections: connections.get_or_create_owned(&labels),
                connections_open: connections_open.get_or_create_owned(&labels),
                streams_open: streams_open.get_or_create_owned(&labels),
                unrouted: unrouted.get_or_create_owned(&labels),
            }
        });
        let closed = Family::<CloseLabels, Counter>::default();
        registry.register(
            "connections_closed",
            "TCP connections wedge ended for a peer fault (a timeout, a failed TLS handshake, \
             a reset, a protocol error), by reason",
            closed.clone(),
        );
        let closed = CloseReason::ALL.map(|reason| {
            closed.get_or_create_owned(&CloseLabels {
                reason: reason.label(),
            })
        });
        let workers = Family::<WorkerLabels, Counter>::default();
        registry.register(
            "worker_connections",
            "Connections each worker accepted (TCP, and QUIC connections coming in), by worker",
            workers.clone(),
        );
        let workers_open = Family::<WorkerLabels, Gauge>::default();
        registry.register(
            "worker_connections_open",
            "Connections each worker has open now, by worker",
            workers_open.clone(),
        );
        let worker_requests = Family::<WorkerLabels, Counter>::default();
        registry.register(
            "worker_requests",
            "Requests each worker began to answer (routed or not), by worker",
            worker_requests.clone(),
        );
        Metrics {
            registry,
            apps,
            protocols,
            closed,
            workers,
            workers_open,
            worker_requests,
        }
    }

    /// The handles of worker `index` (its series start at 0 when it starts).
    pub fn worker(&self, index: usize) -> WorkerMetrics {
        let labels = WorkerLabels {
            worker: index.to_string(),
        };
        WorkerMetrics {
            connections: self.workers.get_or_create_owned(&labels),
            connections_open: self.workers_open.get_or_create_owned(&labels),
            requests: self.worker_requests.get_or_create_owned(&labels),
        }
    }

    /// The handles of the app named `name`, created on first use. Versions of one
    /// app (and a redeployed app) record into the same series.
    pub fn app(&self, name: &str) -> Arc<AppMetrics> {
        self.apps.app(name)
    }

    /// Counts a connection accepted over `protocol`, open until the guard is dropped.
    pub fn connection(&self, protocol: Protocol) -> Open {
        let handles = self.protocol(protocol);
        handles.connections.inc();
        Open::new(&handles.connections_open)
    }

    /// Counts a request being answered over `protocol` until the guard is dropped.
    pub(crate) fn stream(&self, protocol: Protocol) -> Open {
        Open::new(&self.protocol(protocol).streams_open)
    }

    /// Counts a connection ended for `reason`.
    pub fn closed(&self, reason: CloseReason) {
        self.closed[reason as usize].inc();
    }

    /// Counts a request no route matched.
    pub(crate) fn unrouted(&self, protocol: Protocol) {
        self.protocol(protocol).unrouted.inc();
    }

    fn protocol(&self, protocol: Protocol) -> &ProtocolMetrics {
        &self.protocols[protocol as usize]
    }

    /// Everything recorded so far, in the Prometheus text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail, nor can wedge's metrics' encoders.
        prometheus_text::encode(&mut text, &self.registry).expect("encoding metrics into a String");
        text
    }
}

/// One thing open (a connection, a stream), counted in its gauge until dropped.
#[derive(Debug)]
pub struct Open(Gauge);

impl Open {
    fn new(gauge: &Gauge) -> Open {
        gauge.inc();
        Open(gauge.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}
