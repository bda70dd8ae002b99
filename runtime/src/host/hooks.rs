//! wedge's choices for wasi:http behaviour (`WasiHttpHooks`): outbound
//! requests go only where the app's [`Outbound`] policy allows, within its
//! connect timeout and concurrency limit, through the app's pooled client.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::guest_log::GuestOutput;
use super::outbound::Outbound;
use super::outbound_client::{OutboundClient, Timeouts};

/// A chunk the guest may hand over in one write. A WASI 0.2 response body queues
/// at most `OUTGOING_BODY_QUEUE + 1` such chunks (80 KiB) before the guest's
/// writes wait for the protocol engine (or hyper) to take them, so memory per
/// response is bounded whatever the guest does; the queued bytes were allocated in
/// the guest's host calls and count in its instance's `host_memory`.
const OUTGOING_BODY_CHUNK: usize = 16 * 1024;

/// Chunks a WASI 0.2 response body holds for the engine beyond the one wasmtime's
/// channel always has room for, at most. With one (wasmtime's default) a guest that
/// streams small flushed writes parks after every second one and hyper writes
/// each pair on its own: the 8×1 KiB stream took ~6.5 `write` calls a response
/// over HTTP/1.1 and 1.36× the CPU of four (BENCHMARKS.md, issue 20 (k)).
const OUTGOING_BODY_QUEUE: usize = 4;

/// The chunks a response body may queue for an instance with `host_memory` bytes
/// of budget: [`OUTGOING_BODY_QUEUE`], fewer where the queue would pass a quarter
/// of the budget, and at least one (wasmtime's default). The queued bytes are
/// charged to the instance: with a small budget a full queue of four would fail a
/// guest that streamed fine with one (the hostile probe: 16 KiB writes to a fast
/// client failed below about 96 KiB of `host_memory`, where one chunk passed).
fn response_body_queue(host_memory: u64) -> usize {
    let chunks = host_memory / 4 / OUTGOING_BODY_CHUNK as u64;
    (chunks.saturating_sub(1) as usize).clamp(1, OUTGOING_BODY_QUEUE)
}

/// An app's outbound policy and its requests in flight, shared by all of the
/// app's stores.
pub(crate) struct OutboundGate {
    policy: Arc<Outbound>,
    in_flight: Arc<Semaphore>,
    client: OutboundClient,
}

impl OutboundGate {
    pub(crate) fn new(policy: Outbound) -> Self {
        let in_flight = Arc::new(Semaphore::new(policy.max_concurrent));
        let policy = Arc::new(policy);
        let client = OutboundClient::new(policy.clone());
        OutboundGate {
            policy,
            in_flight,
            client,
        }
    }

    /// Admits a request to `uri`, or says why not (the guest's error code) in the
    /// app's `log`.
    fn admit(&self, log: &GuestOutput, uri: &http::Uri) -> Result<OwnedSemaphorePermit, Error> {
        let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?;
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        if !self.policy.allows(host, port) {
            log.warn(format_args!(
                "outbound request to {host}:{port} denied (not in --allow-outbound)"
            ));
            return Err(Error::HttpRequestDenied);
        }
        self.in_flight.clone().try_acquire_owned().map_err(|_| {
            log.warn(format_args!(
                "outbound request to {host}:{port} refused: {} already in flight \
                 (--outbound-max-concurrent)",
                self.policy.max_concurrent
            ));
            Error::ConnectionLimitReached
        })
    }
}

/// Hooks installed in every request's store.
pub struct GuestHooks {
    /// Where what the guest's calls make wedge say goes: the app's log budget.
    log: Arc<GuestOutput>,
    outbound: Arc<OutboundGate>,
    /// Chunks a WASI 0.2 response body queues (`response_body_queue`).
    body_queue: usize,
}

impl GuestHooks {
    /// `host_memory`: the instance's budget, which sizes its response bodies' queue.
    pub(crate) fn new(
        log: Arc<GuestOutput>,
        outbound: Arc<OutboundGate>,
        host_memory: u64,
    ) -> Self {
        GuestHooks {
            log,
            outbound,
            body_queue: response_body_queue(host_memory),
        }
    }
}

type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;
type BoxedSendFuture =
    Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), Error>> + Send>;

impl WasiHttpHooks for GuestHooks {
    /// Sends an allowed request through the app's client: both bodies stream
    /// (the request body is pulled from the guest as the connection takes it;
    /// the response body is read as the guest reads), and the request counts
    /// against the in-flight limit until its response body is done.
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> BoxedSendFuture {
        let permit = match self.outbound.admit(&self.log, request.uri()) {
            Ok(permit) => permit,
            Err(err) => return Box::new(async { Err(err) }),
        };
        let timeouts = Timeouts::new(options, self.outbound.policy.connect_timeout);
        let client = self.outbound.client.clone();
        let log = self.log.clone();
        Box::new(async move {
            let response = client.send(&log, request, timeouts, permit).await?;
            // The client's own tasks drive the connection.
            let io: IoFuture = Box::new(async { Ok(()) });
            Ok((response, io))
        })
    }

    // The default hook logs this without saying whose request it was.
    fn p2_error_from_hyper(&mut self, err: &hyper::Error) -> ErrorCode {
        self.log
            .warn(format_args!("outbound request failed: {err}"));
        ErrorCode::HttpProtocolError
    }

    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        self.body_queue
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        OUTGOING_BODY_CHUNK
    }

    // p3: wasmtime copies at most this much out of the guest's body stream per
    // write and holds one such chunk while the engine has no credit to take it.
    fn p3_outgoing_body_chunk_size(&mut self) -> usize {
        OUTGOING_BODY_CHUNK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_body_queues_four_chunks_within_a_quarter_of_the_host_memory() {
        const KIB: u64 = 1024;
        // The default budget, and any from 320 KiB: the full queue (80 KiB).
        assert_eq!(response_body_queue(16 * 1024 * KIB), OUTGOING_BODY_QUEUE);
        assert_eq!(response_body_queue(320 * KIB), OUTGOING_BODY_QUEUE);
        // Smaller ones: what fits a quarter, down to wasmtime's default of one.
        assert_eq!(response_body_queue(256 * KIB), 3);
        assert_eq!(response_body_queue(128 * KIB), 1);
        assert_eq!(response_body_queue(96 * KIB), 1);
        assert_eq!(response_body_queue(0), 1);
    }
}
