//! One HTTP/3 connection: the sans-IO core fed from quinn's streams, requests dispatched
//! to the handler, responses written back.
//!
//! One task owns the core, the streams and the handlers' futures, like the HTTP/2
//! driver. Each pass accepts new streams, reads the client's unidirectional streams
//! freely (they carry no body), reads a request stream until its head and afterwards
//! only when its handler has taken all that was read (DESIGN 4.1), polls every handler
//! and writes every response as far as quinn takes it. A handler that parks is just a
//! stream whose future is pending (4.4).

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt, stream};
use http::StatusCode;
use quinn::{ReadError, RecvStream, SendStream, VarInt};
use tokio::io::ReadBuf;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use wedge_proto::h3::{Connection, ConnectionError, ErrorCode, Event};
use wedge_proto::head::RequestHead;

use super::H3Config;
use super::own_stream::{ClosedCritical, OwnStream};
use super::quic_code;
use super::response::{Outgoing, Sent};
use crate::net::handler::{Handler, trailer_map};
use crate::net::request_body::{BodyGone, ConnStats, Inbox, InboxPool, RequestBody};
use crate::net::response_fields::has_content;

/// Read at most this much per read call.
const READ_CHUNK: usize = 16 * 1024;
/// Octets of a request read past what its handler took when its response ends, to
/// see whether the request ended as it must ([`Driver::judge_request_end`]).
const JUDGED_AHEAD: usize = 64 * 1024;
/// Passes one poll may run before handing the thread back to the runtime.
const PASSES_PER_POLL: usize = 16;
/// Response staging buffers kept for reuse (DESIGN 4.3), and the largest kept.
const MAX_POOLED_SEND_BUFFERS: usize = 32;
const MAX_POOLED_SEND_BUFFER: usize = 4 * 1024;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Serves one QUIC connection until the client closes it, it idles out, a connection
/// error, or `shutdown`: then GOAWAY, the requests in flight finish and their responses
/// are acknowledged, and the connection closes with H3_NO_ERROR.
pub(super) async fn serve<H: Handler<RequestHead>>(
    incoming: quinn::Incoming,
    handler: H,
    config: Arc<H3Config>,
    shutdown: watch::Receiver<bool>,
    stats: Arc<ConnStats>,
) {
    let quic = match incoming.await {
        Ok(quic) => quic,
        Err(err) => {
            tracing::debug!("h3 handshake failed: {err}");
            return;
        }
    };
    let mut driver = Driver::new(quic, handler, &config, shutdown, stats);
    std::future::poll_fn(|cx| driver.poll(cx)).await;
}

/// Where a request stream is.
enum Phase<H: Handler<RequestHead>> {
    /// Its head has not arrived whole.
    Head,
    Handling(H::Future),
    Sending(Outgoing<H::Body>),
}

struct RequestStream<H: Handler<RequestHead>> {
    id: u64,
    /// When the client opened it: its head must be whole by `header_read_timeout`.
    opened: Instant,
    /// `None` once the request ended, failed or was stopped.
    recv: Option<RecvStream>,
    send: SendStream,
    /// The body's inbox, from the head on.
    inbox: Option<Arc<Inbox>>,
    /// Read while a field section waited on the client's QPACK encoder stream.
    held: Option<Held>,
    /// Whether the client gave up on the response (STOP_SENDING): watched only once
    /// the handler has parked, so an answer that comes at once costs no watch.
    stopped: Option<Boxed<Result<Option<VarInt>, quinn::StoppedError>>>,
    /// Since when its response has waited on the client's flow control with nothing
    /// taken (reset on every octet taken): past `zero_window_timeout`, it is reset.
    stalled: Option<Instant>,
    /// Octets of its response taken so far, when last looked at.
    written: u64,
    /// The client cancelled it after its handler started: counted once against the
    /// peer reset budget (rapid reset).
    cancelled: bool,
    /// A HEAD request: its response is a head alone.
    head_only: bool,
    phase: Phase<H>,
}

impl<H: Handler<RequestHead>> RequestStream<H> {
    /// Whether the client stopped the response stream (or the connection is gone):
    /// then the parked handler is dropped, as HTTP/2 drops it on RST_STREAM.
    fn poll_cancelled(&mut self, cx: &mut Context<'_>) -> bool {
        let send = &self.send;
        let stopped = self.stopped.get_or_insert_with(|| Box::pin(send.stopped()));
        match stopped.as_mut().poll(cx) {
            Poll::Pending => false,
            Poll::Ready(why) => {
                tracing::debug!("h3 stream {}: the client gave up on it: {why:?}", self.id);
                true
            }
        }
    }
}

/// A request stream's octets after a blocked field section (RFC 9204 §2.1.2).
struct Held {
    input: Bytes,
    fin: bool,
    /// The section was decoded since: feed `input` again.
    unblocked: bool,
}

/// One of the client's unidirectional streams (control, QPACK, or unknown).
struct UniStream {
    id: u64,
    recv: RecvStream,
}

/// Why the connection's task ends.
enum End {
    /// Closed (by the peer, an idle timeout, or us): nothing more to send.
    Closed,
    /// A connection error of ours: close with its code.
    Error(ErrorCode),
}

struct Driver<H: Handler<RequestHead>> {
    quic: quinn::Connection,
    handler: H,
    core: Connection,
    events: Vec<Event>,
    read_buf: BytesMut,
    accept_bi: Accepting<(SendStream, RecvStream)>,
    accept_uni: Accepting<RecvStream>,
    /// SETTINGS, then GOAWAY.
    control: OwnStream,
    /// What our QPACK decoder owes the client's encoder (only with a dynamic table).
    decoder: OwnStream,
    uni: Vec<UniStream>,
    requests: Vec<RequestStream<H>>,
    bodies: InboxPool,
    send_buffers: Vec<Vec<u8>>,
    shutdown: Option<Boxed<()>>,
    /// After GOAWAY: responses finished since, until the client acknowledged them.
    unacked: Option<Vec<Boxed<()>>>,
    /// How long a request head may take to arrive whole (slowloris).
    header_read_timeout: std::time::Duration,
    /// Wakes the connection at the earliest head deadline; one per connection, reset
    /// rather than reallocated.
    head_timer: Pin<Box<Sleep>>,
    /// How long a response may wait on the client's flow control without progress.
    zero_window_timeout: std::time::Duration,
    /// Wakes the connection at the earliest zero-window deadline.
    window_timer: Pin<Box<Sleep>>,
}

/// The streams a client opens, one kind of them. One future per connection, whose
/// state holds each next accept inline: taking a stream allocates nothing of ours.
type Accepting<T> = Pin<Box<dyn Stream<Item = Result<T, quinn::ConnectionError>> + Send>>;

fn accept_bi(quic: &quinn::Connection) -> Accepting<(SendStream, RecvStream)> {
    Box::pin(stream::unfold(quic.clone(), |quic| async move {
        let accepted = quic.accept_bi().await;
        Some((accepted, quic))
    }))
}

fn accept_uni(quic: &quinn::Connection) -> Accepting<RecvStream> {
    Box::pin(stream::unfold(quic.clone(), |quic| async move {
        let accepted = quic.accept_uni().await;
        Some((accepted, quic))
    }))
}

impl<H: Handler<RequestHead>> Driver<H> {
    fn new(
        quic: quinn::Connection,
        handler: H,
        config: &H3Config,
        mut shutdown: watch::Receiver<bool>,
        stats: Arc<ConnStats>,
    ) -> Self {
        let core = Connection::new(config.core);
        let mut control = OwnStream::new();
        core.open_control_stream(&mut control.out);
        Driver {
            accept_bi: accept_bi(&quic),
            accept_uni: accept_uni(&quic),
            control,
            decoder: OwnStream::new(),
            quic,
            handler,
            core,
            events: Vec::new(),
            read_buf: BytesMut::with_capacity(READ_CHUNK),
            uni: Vec::new(),
            requests: Vec::new(),
            bodies: InboxPool::new(stats),
            send_buffers: Vec::new(),
            shutdown: Some(Box::pin(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            })),
            unacked: None,
            header_read_timeout: config.header_read_timeout,
            head_timer: Box::pin(tokio::time::sleep(config.header_read_timeout)),
            zero_window_timeout: config.zero_window_timeout,
            window_timer: Box::pin(tokio::time::sleep(config.zero_window_timeout)),
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        for _ in 0..PASSES_PER_POLL {
            let progress = match self.pass(cx) {
                Ok(progress) => progress,
                Err(End::Closed) => false,
                Err(End::Error(code)) => {
                    tracing::debug!("h3 connection error: {}", code.name());
                    self.quic.close(quic_code(code), b"");
                    false
                }
            };
            if self.quic.close_reason().is_some() {
                self.peer_gone();
                return Poll::Ready(());
            }
            if self.drained(cx) {
                self.quic.close(quic_code(ErrorCode::NoError), b"");
                self.peer_gone();
                return Poll::Ready(());
            }
            if !progress {
                return Poll::Pending;
            }
        }
        // Busy every pass: let the other connections on this worker run.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// One pass over everything; `Ok(true)` if anything moved.
    fn pass(&mut self, cx: &mut Context<'_>) -> Result<bool, End> {
        self.poll_shutdown(cx);
        let mut progress = self.poll_accept(cx)?;
        progress |= self
            .control
            .poll_flush(&self.quic, cx)
            .map_err(closed_critical)?;
        progress |= self
            .decoder
            .poll_flush(&self.quic, cx)
            .map_err(closed_critical)?;
        progress |= self.poll_uni(cx)?;
        progress |= self.poll_head_deadlines(cx);
        progress |= self.poll_requests(cx)?;
        // After the responses were pumped, which is what starts a stall.
        progress |= self.poll_window_deadlines(cx);
        Ok(progress)
    }

    /// Fails, with H3_REQUEST_INCOMPLETE, every request whose head is still not whole
    /// after `header_read_timeout`, and arms the timer for the earliest one left.
    fn poll_head_deadlines(&mut self, cx: &mut Context<'_>) -> bool {
        let now = Instant::now();
        let mut expired = false;
        let mut earliest: Option<Instant> = None;
        for stream in &mut self.requests {
            if !matches!(stream.phase, Phase::Head) || stream.recv.is_none() {
                continue;
            }
            // A timeout too long to represent never fires.
            let Some(deadline) = stream.opened.checked_add(self.header_read_timeout) else {
                continue;
            };
            if deadline <= now {
                tracing::debug!("h3 stream {}: no whole request head in time", stream.id);
                fail_stream(stream, ErrorCode::RequestIncomplete);
                expired = true;
            } else {
                earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
            }
        }
        if let Some(deadline) = earliest {
            self.head_timer.as_mut().reset(deadline);
            // Registers the wake-up; a deadline already passed is handled next pass.
            expired |= self.head_timer.as_mut().poll(cx).is_ready();
        }
        expired
    }

    /// Resets, with H3_REQUEST_CANCELLED, every response that has waited on the
    /// client's flow control without progress for `zero_window_timeout` (its handler is
    /// dropped), and arms the timer for the earliest one left.
    fn poll_window_deadlines(&mut self, cx: &mut Context<'_>) -> bool {
        let now = Instant::now();
        let mut expired = false;
        let mut earliest: Option<Instant> = None;
        for stream in &mut self.requests {
            let Some(since) = stream.stalled else {
                continue;
            };
            let Some(deadline) = since.checked_add(self.zero_window_timeout) else {
                continue;
            };
            if deadline <= now {
                tracing::debug!(
                    "h3 stream {}: the client granted no credit in time",
                    stream.id
                );
                stream.stalled = None;
                fail_stream(stream, ErrorCode::RequestCancelled);
                expired = true;
            } else {
                earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
            }
        }
        if let Some(deadline) = earliest {
            self.window_timer.as_mut().reset(deadline);
            expired |= self.window_timer.as_mut().poll(cx).is_ready();
        }
        expired
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) {
        if let Some(shutdown) = &mut self.shutdown
            && shutdown.as_mut().poll(cx).is_ready()
        {
            self.shutdown = None;
            self.go_away();
        }
    }

    /// GOAWAY, once: the requests in flight finish, later ones are refused, then the
    /// connection closes ([`Driver::drained`]).
    fn go_away(&mut self) {
        if self.unacked.is_none() {
            self.core.goaway(&mut self.control.out);
            self.unacked = Some(Vec::new());
        }
    }

    /// After GOAWAY: whether every request is answered and acknowledged.
    fn drained(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(unacked) = &mut self.unacked else {
            return false;
        };
        unacked.retain_mut(|acked| acked.as_mut().poll(cx).is_pending());
        unacked.is_empty() && self.requests.is_empty() && self.control.is_flushed()
    }

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Result<bool, End> {
        let mut progress = false;
        while let Poll::Ready(Some(accepted)) = self.accept_bi.poll_next_unpin(cx) {
            let (send, recv) = accepted.map_err(|_| End::Closed)?;
            self.requests.push(RequestStream {
                id: recv.id().into(),
                opened: Instant::now(),
                recv: Some(recv),
                send,
                inbox: None,
                held: None,
                stopped: None,
                stalled: None,
                written: 0,
                cancelled: false,
                head_only: false,
                phase: Phase::Head,
            });
            progress = true;
        }
        while let Poll::Ready(Some(accepted)) = self.accept_uni.poll_next_unpin(cx) {
            let recv = accepted.map_err(|_| End::Closed)?;
            self.uni.push(UniStream {
                id: recv.id().into(),
                recv,
            });
            progress = true;
        }
        Ok(progress)
    }

    /// Reads the client's unidirectional streams as fast as they come.
    fn poll_uni(&mut self, cx: &mut Context<'_>) -> Result<bool, End> {
        let mut progress = false;
        let mut i = 0;
        while i < self.uni.len() {
            let stream = &mut self.uni[i];
            let id = stream.id;
            match read(&mut stream.recv, &mut self.read_buf, cx) {
                Read::Pending => {
                    i += 1;
                    continue;
                }
                Read::Octets(input, fin) => {
                    if fin {
                        self.uni.swap_remove(i);
                    } else {
                        i += 1;
                    }
                    self.feed(id, input, fin)?;
                }
                Read::Reset => {
                    self.uni.swap_remove(i);
                    self.reset(id)?;
                }
            }
            progress = true;
        }
        Ok(progress)
    }

    /// Reads, handles and answers every request stream once.
    fn poll_requests(&mut self, cx: &mut Context<'_>) -> Result<bool, End> {
        let mut progress = false;
        let mut i = 0;
        while i < self.requests.len() {
            progress |= self.read_request(i, cx)?;
            let Some(stream) = self.requests.get_mut(i) else {
                break;
            };
            if stream.recv.is_none() && stream.held.is_none() && matches!(stream.phase, Phase::Head)
            {
                // Failed, reset, or ended before its head: nothing to answer. Dropped
                // as it is, quinn would finish the stream as if answered: reset it (a
                // stream that failed keeps the code it was reset with).
                let mut stream = self.requests.remove(i);
                let _ = stream.send.reset(quic_code(ErrorCode::RequestCancelled));
                self.retire(stream, BodyGone::Reset);
                progress = true;
                continue;
            }
            if self.respond(i, cx)? {
                let stream = self.requests.remove(i);
                self.retire(stream, BodyGone::PeerGone);
                progress = true;
            } else {
                i += 1;
            }
        }
        Ok(progress)
    }

    /// Reads a request stream once if it may be read: until its head freely, then only
    /// when the handler has taken all that was read.
    fn read_request(&mut self, i: usize, cx: &mut Context<'_>) -> Result<bool, End> {
        let stream = &mut self.requests[i];
        let id = stream.id;
        let Some(recv) = &mut stream.recv else {
            return Ok(false);
        };
        if stream.held.is_some() {
            return Ok(false);
        }
        if let Some(inbox) = &stream.inbox
            && !inbox.wants_more(cx.waker())
        {
            return Ok(false);
        }
        match read(recv, &mut self.read_buf, cx) {
            Read::Pending => Ok(false),
            Read::Octets(input, fin) => {
                if fin {
                    stream.recv = None;
                }
                self.feed(id, input, fin)?;
                Ok(true)
            }
            Read::Reset => {
                stream.recv = None;
                if let Some(inbox) = &stream.inbox {
                    inbox.fail(BodyGone::Reset);
                }
                if stream.inbox.is_some() && !matches!(stream.phase, Phase::Head) {
                    peer_cancelled(&mut self.core, stream)?;
                }
                self.reset(id)?;
                Ok(true)
            }
        }
    }

    /// Feeds what stream `id` delivered to the core and hands out what it meant; then
    /// feeds again what request streams held while their field sections waited on the
    /// client's encoder stream, for the entries that arrived may have unblocked them.
    fn feed(&mut self, id: u64, input: Bytes, fin: bool) -> Result<(), End> {
        let mut next = Some((id, input, fin));
        while let Some((id, input, fin)) = next.take() {
            self.core
                .recv(id, &input, fin, &mut self.events)
                .map_err(connection_error)?;
            self.dispatch(&input, fin);
            next = self.requests.iter_mut().find_map(|stream| {
                let held = stream.held.take_if(|held| held.unblocked)?;
                Some((stream.id, held.input, held.fin))
            });
        }
        self.core.poll_decoder_stream(&mut self.decoder.out);
        Ok(())
    }

    /// The client reset stream `id`.
    fn reset(&mut self, id: u64) -> Result<(), End> {
        if let Some(stream) = self.request(id) {
            stream.held = None;
        }
        self.core.reset(id).map_err(connection_error)?;
        self.core.poll_decoder_stream(&mut self.decoder.out);
        Ok(())
    }

    /// Hands the core's events about `input` (which ended its stream if `fin`) to their
    /// streams.
    fn dispatch(&mut self, input: &Bytes, fin: bool) {
        let mut events = std::mem::take(&mut self.events);
        for event in events.drain(..) {
            match event {
                Event::Request { stream, head } => {
                    self.unblock(stream);
                    self.start(stream, &head);
                    // The handler copied what it needs: the head serves the next stream.
                    self.core.give_back(head);
                }
                Event::Data { stream, range } => {
                    if let Some(inbox) = self.request(stream).and_then(|s| s.inbox.as_ref()) {
                        inbox.push(input.slice(range), false);
                    }
                }
                // Handed out once `End` ends the body.
                Event::Trailers { stream, trailers } => {
                    self.unblock(stream);
                    if let Some(inbox) = self.request(stream).and_then(|s| s.inbox.as_ref()) {
                        inbox.trailers(trailer_map(&trailers));
                    }
                    self.core.give_back(trailers);
                }
                Event::End { stream } => {
                    if let Some(stream) = self.request(stream) {
                        stream.recv = None;
                        if let Some(inbox) = &stream.inbox {
                            inbox.push(Bytes::new(), true);
                        }
                    }
                }
                Event::HeadTooLarge { stream } => {
                    let staged = self.send_buffer();
                    let outgoing = Outgoing::status(
                        &mut self.core,
                        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                        staged,
                    );
                    if let Some(stream) = self.request(stream) {
                        stop(&mut stream.recv, ErrorCode::NoError);
                        stream.phase = Phase::Sending(outgoing);
                    }
                }
                Event::StreamError { stream, code } => {
                    if let Some(stream) = self.request(stream) {
                        fail_stream(stream, code);
                    }
                }
                Event::StopSending { stream, code } => {
                    if let Some(i) = self.uni.iter().position(|s| s.id == stream) {
                        let mut uni = self.uni.swap_remove(i);
                        let _ = uni.recv.stop(quic_code(code));
                    }
                }
                // The client is done (the `h3` crate's `shutdown`, oha at the end of
                // a run): it waits for us to close, so the connection is not held open
                // until the idle timeout; what it sent before is still answered.
                Event::PeerGoaway { .. } => {
                    tracing::debug!("h3: the client is going away");
                    self.go_away();
                }
                Event::Blocked { stream, consumed } => {
                    if let Some(stream) = self.request(stream) {
                        stream.held = Some(Held {
                            input: input.slice(consumed..),
                            fin,
                            unblocked: false,
                        });
                    }
                }
            }
        }
        self.events = events;
    }

    /// A held stream's field section was decoded: what it held may be fed again.
    fn unblock(&mut self, id: u64) {
        if let Some(held) = self.request(id).and_then(|s| s.held.as_mut()) {
            held.unblocked = true;
        }
    }

    fn request(&mut self, id: u64) -> Option<&mut RequestStream<H>> {
        self.requests.iter_mut().find(|s| s.id == id)
    }

    /// A head arrived: the handler is called, and the head goes back to the core.
    fn start(&mut self, id: u64, head: &RequestHead) {
        let inbox = self.bodies.rent();
        let body = RequestBody::new(inbox.clone());
        let call = catch_unwind(AssertUnwindSafe(|| self.handler.call(head, body)));
        if let Some(stream) = self.requests.iter_mut().find(|s| s.id == id) {
            stream.inbox = Some(inbox);
            stream.head_only = head.method() == b"HEAD";
            match call {
                Ok(future) => stream.phase = Phase::Handling(future),
                Err(_) => {
                    tracing::error!("h3 stream {id}: the handler panicked");
                    fail_stream(stream, ErrorCode::InternalError);
                }
            }
        }
    }

    /// Polls a stream's handler and writes its response; `true` once it is over.
    fn respond(&mut self, i: usize, cx: &mut Context<'_>) -> Result<bool, End> {
        let stream = &mut self.requests[i];
        let id = stream.id;
        if let Phase::Handling(future) = &mut stream.phase {
            let response = match catch_unwind(AssertUnwindSafe(|| Pin::new(future).poll(cx))) {
                Ok(Poll::Pending) => {
                    if !stream.poll_cancelled(cx) {
                        return Ok(false);
                    }
                    peer_cancelled(&mut self.core, stream)?;
                    return Ok(true);
                }
                Ok(Poll::Ready(response)) => response,
                Err(_) => {
                    tracing::error!("h3 stream {id}: the handler panicked");
                    fail_stream(stream, ErrorCode::InternalError);
                    return Ok(true);
                }
            };
            let staged = self.send_buffer();
            let stream = &mut self.requests[i];
            let content = has_content(stream.head_only, response.status());
            stream.phase = Phase::Sending(Outgoing::new(&mut self.core, response, content, staged));
        }
        let stream = &mut self.requests[i];
        let Phase::Sending(outgoing) = &mut stream.phase else {
            // Still reading its head.
            return Ok(false);
        };
        let pumped = catch_unwind(AssertUnwindSafe(|| {
            outgoing.pump(&mut self.core, &mut stream.send, id, cx)
        }));
        match pumped {
            Ok(Poll::Pending) => {
                // Measured from the last octet quinn took, not from when it first
                // blocked: a slow reader that keeps granting credit is not cut off.
                let written = outgoing.written();
                if !outgoing.blocked_on_peer() {
                    stream.stalled = None;
                } else if stream.stalled.is_none() || written != stream.written {
                    stream.stalled = Some(Instant::now());
                }
                stream.written = written;
                Ok(false)
            }
            Ok(Poll::Ready(Sent::Written)) => {
                if !self.judge_request_end(i, cx)? {
                    return Ok(true);
                }
                let stream = &mut self.requests[i];
                if stream.send.finish().is_ok() {
                    self.core.response_completed();
                }
                Ok(true)
            }
            Ok(Poll::Ready(Sent::Stopped)) => {
                peer_cancelled(&mut self.core, stream)?;
                Ok(true)
            }
            Ok(Poll::Ready(Sent::Failed)) => Ok(true),
            Ok(Poll::Ready(Sent::CutOff)) => {
                tracing::debug!(
                    "h3 stream {id}: the request ended while its response waited on credit"
                );
                fail_stream(stream, ErrorCode::InternalError);
                Ok(true)
            }
            Err(_) => {
                tracing::error!("h3 stream {id}: the response body panicked");
                fail_stream(stream, ErrorCode::InternalError);
                Ok(true)
            }
        }
    }

    /// Before a response ends, reads what the client already sent of its request, past
    /// what the handler took (up to `JUDGED_AHEAD` octets), so that an end already
    /// here is judged (a body unlike its content-length, bad trailers: RFC 9114
    /// §4.1.2) whether or not the handler read that far. `false` if that failed
    /// the stream.
    fn judge_request_end(&mut self, i: usize, cx: &mut Context<'_>) -> Result<bool, End> {
        let mut judged = 0;
        while judged < JUDGED_AHEAD {
            let stream = &mut self.requests[i];
            let id = stream.id;
            let Some(recv) = stream.recv.as_mut().filter(|_| stream.held.is_none()) else {
                break;
            };
            let Read::Octets(input, fin) = read(recv, &mut self.read_buf, cx) else {
                // Nothing more here yet, or reset: the usual ending applies.
                break;
            };
            if fin {
                stream.recv = None;
            }
            judged += input.len().max(1);
            self.feed(id, input, fin)?;
        }
        // A stream error fails the stream at once (`fail_stream`).
        Ok(matches!(self.requests[i].phase, Phase::Sending(_)))
    }

    /// A stream is over: its handler and body are dropped (a guest still running is
    /// stopped); its inbox and staging buffer are kept for the next stream.
    fn retire(&mut self, stream: RequestStream<H>, why: BodyGone) {
        // A stream answered (or failed) before its request ended is still open in the
        // core; forget it there too, or its state would outlive it.
        let _ = self.core.reset(stream.id);
        let RequestStream {
            mut recv,
            send,
            inbox,
            phase,
            ..
        } = stream;
        // The response is complete: the rest of the request is not needed (§4.1.1).
        stop(&mut recv, ErrorCode::NoError);
        if let Some(unacked) = &mut self.unacked {
            let acked = send.stopped();
            unacked.push(Box::pin(async move {
                let _ = acked.await;
            }));
        }
        if let Phase::Sending(outgoing) = phase {
            let mut buffer = outgoing.into_buffer();
            if buffer.capacity() <= MAX_POOLED_SEND_BUFFER
                && self.send_buffers.len() < MAX_POOLED_SEND_BUFFERS
            {
                buffer.clear();
                self.send_buffers.push(buffer);
            }
        }
        if let Some(inbox) = inbox {
            self.bodies.give_back(inbox, why);
        }
    }

    /// An empty staging buffer for a response, reused when one is spare.
    fn send_buffer(&mut self) -> Vec<u8> {
        self.send_buffers.pop().unwrap_or_default()
    }

    /// Tells every stream the peer is gone: handlers and bodies dropped, readers woken.
    fn peer_gone(&mut self) {
        self.unacked = None;
        while let Some(stream) = self.requests.pop() {
            self.retire(stream, BodyGone::PeerGone);
        }
    }
}

/// What one read from a stream gave.
enum Read {
    Pending,
    /// Octets, and whether the stream ended there.
    Octets(Bytes, bool),
    /// The peer reset the stream (or it is otherwise unreadable).
    Reset,
}

/// Reads once into `buf`; the octets come back as their own `Bytes` so body chunks are
/// slices of them, not copies.
fn read(recv: &mut RecvStream, buf: &mut BytesMut, cx: &mut Context<'_>) -> Read {
    buf.clear();
    buf.reserve(READ_CHUNK);
    let spare = buf.spare_capacity_mut();
    let mut read = ReadBuf::uninit(&mut spare[..READ_CHUNK]);
    match recv.poll_read_buf(cx, &mut read) {
        Poll::Pending => Read::Pending,
        Poll::Ready(Err(ReadError::Reset(_))) => Read::Reset,
        Poll::Ready(Err(err)) => {
            tracing::debug!("h3 stream {}: read failed: {err}", recv.id());
            Read::Reset
        }
        Poll::Ready(Ok(())) => {
            let n = read.filled().len();
            // SAFETY: `poll_read_buf` initialised the first `n` octets of the spare capacity.
            unsafe { buf.set_len(n) };
            Read::Octets(buf.split().freeze(), n == 0)
        }
    }
}

/// Stops reading a stream with `code`, if still reading it.
fn stop(recv: &mut Option<RecvStream>, code: ErrorCode) {
    if let Some(mut recv) = recv.take() {
        let _ = recv.stop(quic_code(code));
    }
}

/// Ends a stream that cannot be answered: STOP_SENDING and RESET_STREAM with `code`.
/// Its handler is dropped; with nothing left to read or answer, the next pass retires it.
fn fail_stream<H: Handler<RequestHead>>(stream: &mut RequestStream<H>, code: ErrorCode) {
    stop(&mut stream.recv, code);
    stream.held = None;
    let _ = stream.send.reset(quic_code(code));
    stream.phase = Phase::Head;
}

/// The client cancelled `stream` after its handler started: spends the peer reset
/// budget, once per stream; past it, rapid reset closes the connection.
fn peer_cancelled<H: Handler<RequestHead>>(
    core: &mut Connection,
    stream: &mut RequestStream<H>,
) -> Result<(), End> {
    if std::mem::replace(&mut stream.cancelled, true) {
        return Ok(());
    }
    core.peer_cancelled().map_err(connection_error)
}

fn closed_critical(_: ClosedCritical) -> End {
    tracing::debug!("h3: the client closed one of our critical streams");
    End::Error(ErrorCode::ClosedCriticalStream)
}

fn connection_error(err: ConnectionError) -> End {
    End::Error(err.0)
}

#[cfg(test)]
mod tests;
