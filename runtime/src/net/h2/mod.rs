//! wedge's own HTTP/2 engine: the tokio driver around the sans-IO core in
//! `wedge_proto::h2::Connection`.
//!
//! One task per connection owns the core, the streams and the transport, so no state is
//! shared but each request body's inbox. Each pass reads what the socket has, lets the
//! core turn it into events, polls the handler and body of every stream that was woken
//! (`stream_wake`), and writes the stage as one turn (DESIGN 4.2). A handler that parks
//! is just a stream whose future is pending: everyone else's responses still leave in
//! the same coalesced write (4.4), and it is not polled again until it is woken.

mod config;
mod response;
mod stream_wake;
mod write_queue;

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use wedge_proto::h2::{Connection, ErrorCode, Event, StreamId};

use crate::net::handler::trailer_map;
pub use crate::net::handler::{Handler, ResponseStream};
pub use crate::net::request_body::{BodyGone, ConnStats, RequestBody};
pub use crate::net::service::ToService;
pub use config::H2Config;

use crate::metrics::CloseReason;
use crate::net::io_fault::io_fault;
use crate::net::request_body::{Inbox, InboxPool};
use crate::net::response_fields::has_content;
use crate::net::service::Service;
use crate::net::uri::RequestScheme;
use response::{Outgoing, Progress};
use stream_wake::{StreamWaker, StreamWakers};
use write_queue::WriteQueue;

/// Serves one HTTP/2 connection (h2c after the preface sniff, or h2 after ALPN) until
/// the peer leaves, a connection error, a timeout, or `shutdown`: then GOAWAY names the
/// last stream taken and the streams in flight finish.
pub async fn serve<IO, S>(
    io: IO,
    service: S,
    scheme: RequestScheme,
    shutdown: watch::Receiver<bool>,
    config: Arc<H2Config>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service,
{
    let stats = Arc::new(ConnStats::default());
    let handler = ToService::new(service.for_connection(), scheme, http::Version::HTTP_2);
    if let Some(reason) = run(io, handler, shutdown, config, stats).await {
        service.counters().closed(reason);
    }
}

/// [`serve`] with any [`Handler`], reporting into `stats`.
pub async fn serve_with<IO, H>(
    io: IO,
    handler: H,
    shutdown: watch::Receiver<bool>,
    config: Arc<H2Config>,
    stats: Arc<ConnStats>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    run(io, handler, shutdown, config, stats).await;
}

/// [`serve_with`], telling the peer fault that ended the connection, if one did.
async fn run<IO, H>(
    io: IO,
    handler: H,
    shutdown: watch::Receiver<bool>,
    config: Arc<H2Config>,
    stats: Arc<ConnStats>,
) -> Option<CloseReason>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let mut driver = Driver::new(io, handler, shutdown, config, stats);
    std::future::poll_fn(|cx| driver.poll(cx)).await;
    driver.fault
}

/// Read at most this much per read call.
const READ_CHUNK: usize = 32 * 1024;
/// Past this many octets queued for the peer (plus each stream's send buffer) the
/// connection stops reading: what the peer's frames owe it (PING and SETTINGS answers,
/// resets, response heads) cannot pile up while it reads nothing, and TCP's own
/// back-pressure reaches it.
const READ_PAUSE: usize = 64 * 1024;
/// Turns one poll may run before handing the thread back to the runtime.
const TURNS_PER_POLL: usize = 16;

/// What a stream is waiting for.
enum Phase<H: Handler> {
    Handling(H::Future),
    Sending(Outgoing<H::Body>),
}

struct Slot<H: Handler> {
    id: StreamId,
    phase: Phase<H>,
    inbox: Option<Arc<Inbox>>,
    /// A HEAD request: the response is its head alone (RFC 9110 §9.3.2), whatever body
    /// the handler gives.
    head_only: bool,
    /// What its handler and body are polled with; marked when the stream is to be polled.
    waker: StreamWaker,
}

/// A handler that panicked before answering gets a bare 500 (DESIGN 4.4); the head is
/// not yet sent, so the stream ends cleanly rather than with a reset.
fn internal_error(conn: &mut Connection, id: StreamId, out: &mut Vec<u8>) {
    conn.send_head(id, 500, [], true, out);
}

/// Why the connection is closing without waiting for its streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    No,
    /// Flush what is staged (a GOAWAY), then end.
    AfterFlush,
    /// The peer takes nothing we write: end without flushing.
    Abandon,
}

struct Driver<IO, H: Handler> {
    io: IO,
    handler: H,
    config: Arc<H2Config>,
    conn: Connection,
    read_buf: BytesMut,
    events: Vec<Event>,
    queue: WriteQueue,
    slots: Vec<Slot<H>>,
    wakers: StreamWakers,
    bodies: InboxPool,
    stats: Arc<ConnStats>,
    shutdown: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    timer: Pin<Box<Sleep>>,
    deadline: Option<Instant>,
    /// When the current wait (handshake, head, idle, zero window) began.
    since: Instant,
    waiting_for: Wait,
    /// The current wait's timeout went off: it is not armed again until the wait
    /// changes or makes progress (a deadline in the past would fire every turn).
    fired: bool,
    /// Since when queued octets wait on a transport that took none of them.
    write_stuck: Option<Instant>,
    /// When our SETTINGS, staged as the connection began, must be acknowledged by
    /// (§6.5.3); `None` once they are.
    settings_due: Option<Instant>,
    /// The write queue's octets written when last looked at.
    last_written: u64,
    /// The core's DATA octets sent when last looked at.
    last_data_sent: u64,
    closing: Closing,
    /// The stage was held back once since the last write (`hold_write`).
    held: bool,
    /// The peer fault the connection is ending for, if any.
    fault: Option<CloseReason>,
}

/// What the connection's one timer is measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Handshake,
    Head,
    Idle,
    ZeroWindow,
    Nothing,
}

impl<IO, H> Driver<IO, H>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    H: Handler,
{
    fn new(
        io: IO,
        handler: H,
        mut shutdown: watch::Receiver<bool>,
        config: Arc<H2Config>,
        stats: Arc<ConnStats>,
    ) -> Self {
        let mut queue = WriteQueue::default();
        let conn = Connection::new(config.core.clone(), queue.stage());
        let now = Instant::now();
        Driver {
            io,
            handler,
            conn,
            read_buf: BytesMut::with_capacity(READ_CHUNK),
            events: Vec::new(),
            queue,
            // Preallocated up to a point: a huge limit must not be a huge allocation.
            slots: Vec::with_capacity((config.core.max_concurrent_streams as usize).min(256)),
            wakers: StreamWakers::new(),
            bodies: InboxPool::new(stats.clone()),
            stats,
            shutdown: Some(Box::pin(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            })),
            timer: Box::pin(tokio::time::sleep_until(now + config.handshake_timeout)),
            deadline: Some(now + config.handshake_timeout),
            since: now,
            waiting_for: Wait::Handshake,
            fired: false,
            write_stuck: None,
            settings_due: Some(now + config.settings_timeout),
            last_written: 0,
            last_data_sent: 0,
            closing: Closing::No,
            held: false,
            fault: None,
            config,
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.wakers.register(cx.waker());
        for _ in 0..TURNS_PER_POLL {
            self.poll_shutdown(cx);
            let mut progress =
                self.closing == Closing::No && !self.backed_up() && self.poll_read(cx);
            if self.closing == Closing::No {
                progress |= self.poll_streams();
            }
            self.stats.queued(self.queue.len());
            if self.hold_write() {
                // Back after whatever else this worker has to run now.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match self.queue.poll_write(&mut self.io, cx) {
                Poll::Ready(Ok(turned)) => {
                    if turned {
                        // A new turn: what a body could not stage in the last one.
                        self.mark_parked_on_connection();
                    }
                    progress |= turned;
                }
                Poll::Ready(Err(err)) => {
                    tracing::debug!("http/2 write failed: {err}");
                    self.fault = self.fault.or(self.io_fault(&err));
                    self.peer_gone();
                    return Poll::Ready(());
                }
                Poll::Pending => {}
            }
            if self.finished() {
                self.peer_gone();
                return Poll::Ready(());
            }
            if self.poll_timer(cx) {
                continue;
            }
            if !progress {
                return Poll::Pending;
            }
        }
        // Busy every turn: let the other connections on this worker run.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The peer fault an IO error shows. A reset counts only with streams in flight: a
    /// client that closes once its responses are in, with our last frames (a SETTINGS
    /// ACK, a WINDOW_UPDATE) unread, resets the connection without any fault.
    fn io_fault(&self, err: &std::io::Error) -> Option<CloseReason> {
        match io_fault(err) {
            Some(CloseReason::Reset) if self.slots.is_empty() => None,
            fault => fault,
        }
    }

    /// Whether so much is queued for the peer that reading more must wait for a write.
    fn backed_up(&self) -> bool {
        let cap = READ_PAUSE + self.slots.len() * self.config.stream_send_buffer;
        self.queue.len() > cap
    }

    fn finished(&self) -> bool {
        let flushed = self.queue.is_empty();
        match self.closing {
            Closing::Abandon => true,
            Closing::AfterFlush => flushed,
            Closing::No => flushed && self.conn.is_done(),
        }
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) {
        if let Some(shutdown) = &mut self.shutdown
            && shutdown.as_mut().poll(cx).is_ready()
        {
            self.shutdown = None;
            self.conn.go_away(self.queue.stage());
        }
    }

    /// Reads once and runs the core over the buffer; `true` if octets came in.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> bool {
        self.read_buf.reserve(READ_CHUNK);
        let spare = self.read_buf.spare_capacity_mut();
        let mut buf = ReadBuf::uninit(&mut spare[..READ_CHUNK]);
        match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
            Poll::Pending => return false,
            Poll::Ready(Err(err)) => {
                tracing::debug!("http/2 read failed: {err}");
                self.fault = self.fault.or(self.io_fault(&err));
                self.close_now();
                return true;
            }
            Poll::Ready(Ok(())) => {}
        }
        let n = buf.filled().len();
        if n == 0 {
            // The peer closed: nothing can reach it any more.
            self.close_now();
            return true;
        }
        // SAFETY: `poll_read` initialised the first `n` octets of the spare capacity.
        unsafe { self.read_buf.set_len(self.read_buf.len() + n) };
        let result = self
            .conn
            .recv(&self.read_buf, self.queue.stage(), &mut self.events);
        // What came in may be flow credit (WINDOW_UPDATE, SETTINGS).
        self.mark_parked_on_connection();
        match result {
            Ok(used) => self.dispatch(used),
            Err(err) => {
                tracing::debug!("http/2 connection error: {:?}", err.0);
                self.fault.get_or_insert(CloseReason::ProtocolError);
                self.close_now();
            }
        }
        true
    }

    /// Hands the events of `used` octets to their streams.
    fn dispatch(&mut self, used: usize) {
        let has_data = self.events.iter().any(|e| matches!(e, Event::Data { .. }));
        // Body chunks are slices of what was read: no copy.
        let read = if has_data {
            Some(self.read_buf.split_to(used).freeze())
        } else {
            self.read_buf.advance(used);
            None
        };
        let mut events = std::mem::take(&mut self.events);
        for event in events.drain(..) {
            match event {
                Event::Request {
                    stream,
                    head,
                    end_stream,
                } => {
                    let inbox = (!end_stream).then(|| self.bodies.rent());
                    let body = match &inbox {
                        Some(inbox) => RequestBody::new(inbox.clone()),
                        None => RequestBody::empty(),
                    };
                    let head_only = head.method() == b"HEAD";
                    let call = catch_unwind(AssertUnwindSafe(|| self.handler.call(&head, body)));
                    self.conn.give_back(head);
                    match call {
                        Ok(future) => self.slots.push(Slot {
                            id: stream,
                            phase: Phase::Handling(future),
                            inbox,
                            head_only,
                            waker: self.wakers.rent(),
                        }),
                        Err(_) => {
                            tracing::error!("stream {}: the handler panicked", stream.get());
                            internal_error(&mut self.conn, stream, self.queue.stage());
                        }
                    }
                }
                Event::Data {
                    stream,
                    range,
                    end_stream,
                } => {
                    match (self.inbox(stream), &read) {
                        (Some(inbox), Some(read)) => inbox.push(read.slice(range), end_stream),
                        // Nobody will read it: give the credit back now.
                        _ => self.conn.release(stream, range.len(), self.queue.stage()),
                    }
                }
                Event::Trailers { stream, trailers } => {
                    if let Some(inbox) = self.inbox(stream) {
                        inbox.trailers(trailer_map(&trailers));
                    }
                    self.conn.give_back(trailers);
                }
                Event::Reset { stream, .. } => {
                    if let Some(i) = self.slots.iter().position(|s| s.id == stream) {
                        let slot = self.slots.swap_remove(i);
                        self.retire(slot, BodyGone::Reset);
                    }
                }
            }
        }
        self.events = events;
    }

    /// The body inbox of `stream`, if it still has a handler that reads one.
    fn inbox(&self, stream: StreamId) -> Option<&Arc<Inbox>> {
        self.slots
            .iter()
            .find(|s| s.id == stream)
            .and_then(|s| s.inbox.as_ref())
    }

    /// Polls every stream that was woken or marked, once; `true` if any finished.
    fn poll_streams(&mut self) -> bool {
        let mut progress = false;
        let mut i = 0;
        while i < self.slots.len() {
            if !self.slots[i].waker.take_mark() {
                i += 1;
                continue;
            }
            let done = self.poll_slot(i);
            progress |= done;
            if done {
                // In order: streams are served first come, first served.
                let slot = self.slots.remove(i);
                self.retire(slot, BodyGone::PeerGone);
            } else {
                i += 1;
            }
        }
        progress
    }

    /// Drives one stream, with its own waker; `true` once its response has ended.
    fn poll_slot(&mut self, i: usize) -> bool {
        let slot = &mut self.slots[i];
        let id = slot.id;
        let cx = &mut Context::from_waker(slot.waker.waker());
        if let Some(inbox) = &slot.inbox {
            let read = inbox.take_consumed(cx.waker());
            if read > 0 {
                self.conn.release(id, read, self.queue.stage());
            }
        }
        if let Phase::Handling(future) = &mut slot.phase {
            let response = match catch_unwind(AssertUnwindSafe(|| Pin::new(future).poll(cx))) {
                Ok(Poll::Pending) => return false,
                Ok(Poll::Ready(response)) => response,
                Err(_) => {
                    tracing::error!("stream {}: the handler panicked", id.get());
                    internal_error(&mut self.conn, id, self.queue.stage());
                    return true;
                }
            };
            let (parts, body) = response.into_parts();
            let end = !has_content(slot.head_only, parts.status) || body.is_end_stream();
            response::send_head(&mut self.conn, id, &parts, end, self.queue.stage());
            if end {
                return true;
            }
            slot.phase = Phase::Sending(Outgoing::new(body));
        }
        let Phase::Sending(outgoing) = &mut slot.phase else {
            return false;
        };
        let bound = self.config.stream_send_buffer;
        let pumped = catch_unwind(AssertUnwindSafe(|| {
            outgoing.pump(&mut self.conn, id, &mut self.queue, bound, cx)
        }));
        match pumped {
            Ok(Progress::Done) => true,
            Ok(Progress::Parked) => false,
            Err(_) => {
                tracing::error!("stream {}: the response body panicked", id.get());
                self.conn
                    .reset(id, ErrorCode::InternalError, self.queue.stage());
                true
            }
        }
    }

    /// A stream is over: its handler and body are dropped (a guest still running is
    /// stopped), and its inbox, once nobody else holds it, and its waker are kept for
    /// the next stream.
    fn retire(&mut self, slot: Slot<H>, why: BodyGone) {
        let Slot {
            phase,
            inbox,
            waker,
            ..
        } = slot;
        drop(phase);
        self.wakers.give_back(waker);
        if let Some(inbox) = inbox {
            self.bodies.give_back(inbox, why);
        }
    }

    /// Whether to hold the stage back for one turn of the worker instead of writing it
    /// now: once, while other streams' handlers still run. Handlers answered by other
    /// tasks of the worker (a guest's instance answers its requests from its own task)
    /// then share the write, rather than each costing a write and a wake-up of the
    /// peer. What is staged waits one turn at most: the next poll writes it.
    fn hold_write(&mut self) -> bool {
        if std::mem::take(&mut self.held) || self.closing != Closing::No || self.queue.is_empty() {
            return false;
        }
        self.held = self
            .slots
            .iter()
            .any(|slot| matches!(slot.phase, Phase::Handling(_)));
        self.held
    }

    /// Marks the streams whose bodies wait on the connection (flow credit, or the next
    /// turn) with a chunk in hand: no waker of theirs tells when that comes.
    fn mark_parked_on_connection(&mut self) {
        for slot in &self.slots {
            if let Phase::Sending(outgoing) = &slot.phase
                && outgoing.has_pending()
            {
                slot.waker.mark();
            }
        }
    }

    /// Ends every stream at once; what is staged (a GOAWAY) is still flushed.
    fn close_now(&mut self) {
        self.closing = Closing::AfterFlush;
        self.peer_gone();
    }

    /// Tells every stream the peer is gone: handlers and bodies dropped, readers woken.
    fn peer_gone(&mut self) {
        while let Some(slot) = self.slots.pop() {
            self.retire(slot, BodyGone::PeerGone);
        }
    }

    /// Re-arms the one timer for what the connection waits on; `true` if it fired.
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let wait = self.current_wait();
        let sent = self.conn.data_sent();
        let moved = std::mem::replace(&mut self.last_data_sent, sent) != sent;
        // A zero window is measured from the last DATA that went out: a slow download
        // that keeps moving is not cut off.
        if wait != self.waiting_for || (wait == Wait::ZeroWindow && moved) {
            self.waiting_for = wait;
            self.since = Instant::now();
            self.fired = false;
        }
        // Separately: octets queued that the transport takes none of (after a write pass,
        // whatever is still queued is what it would not take).
        let written = self.queue.total_written();
        let wrote = std::mem::replace(&mut self.last_written, written) != written;
        // Once only the flush is left (closing, or gone away with every stream done), write
        // progress no longer restarts the clock: a peer trickling its reads cannot hold a
        // closing connection open past the write timeout.
        let flushing_only = self.closing != Closing::No || self.conn.is_done();
        if self.queue.is_empty() {
            self.write_stuck = None;
        } else if (wrote && !flushing_only) || self.write_stuck.is_none() {
            self.write_stuck = Some(Instant::now());
        }
        let limit = match wait {
            _ if self.fired => None,
            Wait::Handshake => Some(self.config.handshake_timeout),
            Wait::Head => Some(self.config.header_read_timeout),
            Wait::Idle => Some(self.config.idle_timeout),
            Wait::ZeroWindow => Some(self.config.zero_window_timeout),
            Wait::Nothing => None,
        };
        let stuck = self
            .write_stuck
            .map(|since| since + self.config.write_timeout);
        if !self.conn.awaiting_settings_ack() {
            self.settings_due = None;
        }
        let waited = limit.map(|limit| self.since + limit);
        let deadline = [waited, stuck, self.settings_due]
            .into_iter()
            .flatten()
            .min();
        if deadline != self.deadline {
            self.deadline = deadline;
            if let Some(deadline) = deadline {
                self.timer.as_mut().reset(deadline);
            }
        }
        if deadline.is_none() || self.timer.as_mut().poll(cx).is_pending() {
            return false;
        }
        self.deadline = None;
        if deadline == stuck {
            tracing::debug!(
                "http/2 connection closed: the peer took nothing written for {:?}",
                self.config.write_timeout
            );
            self.fault.get_or_insert(CloseReason::WriteTimeout);
            // Nothing more can reach the peer, a GOAWAY included.
            self.closing = Closing::Abandon;
            return true;
        }
        if deadline != waited {
            tracing::debug!(
                "http/2 connection closed: our SETTINGS unacknowledged for {:?}",
                self.config.settings_timeout
            );
            self.fault.get_or_insert(CloseReason::HandshakeTimeout);
            self.settings_due = None;
            self.conn.settings_timed_out(self.queue.stage());
            self.close_now();
            return true;
        }
        let (what, reason) = match wait {
            Wait::Handshake => ("no preface and SETTINGS", CloseReason::HandshakeTimeout),
            Wait::Head => ("a header block unfinished", CloseReason::HeaderTimeout),
            Wait::Idle => ("no stream", CloseReason::IdleTimeout),
            Wait::ZeroWindow | Wait::Nothing => (
                "every response on a zero window",
                CloseReason::ZeroWindowTimeout,
            ),
        };
        tracing::debug!(
            "http/2 connection closed: {what} for {:?}",
            limit.unwrap_or_default()
        );
        self.fault.get_or_insert(reason);
        self.fired = true;
        self.conn.go_away(self.queue.stage());
        if wait != Wait::Idle {
            self.close_now();
        }
        true
    }

    fn current_wait(&mut self) -> Wait {
        if self.conn.in_handshake() {
            return Wait::Handshake;
        }
        if self.conn.reading_head() {
            return Wait::Head;
        }
        if self.slots.is_empty() {
            return Wait::Idle;
        }
        let conn = &mut self.conn;
        let all_stalled = self.slots.iter().all(|slot| match &slot.phase {
            Phase::Sending(outgoing) => outgoing.is_stalled(conn, slot.id),
            Phase::Handling(_) => false,
        });
        if all_stalled {
            Wait::ZeroWindow
        } else {
            Wait::Nothing
        }
    }
}
