//! The request body as the handler sees it (DESIGN 4.1): DATA the connection buffered,
//! handed out as the handler polls. What it takes is reported back to the connection:
//! HTTP/2 re-opens the stream window by that much, HTTP/3 reads the next chunk from
//! quinn only once the inbox is drained — so a handler that never reads holds at most
//! one window and the peer stops sending.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

/// Counters a connection keeps; tests read them to assert on memory, not on time.
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Request body octets buffered and not yet read by handlers, now.
    pub buffered: AtomicUsize,
    /// The most that were ever buffered at once.
    pub peak_buffered: AtomicUsize,
    /// The most octets ever queued to the peer (staged and in flight) at once.
    pub peak_queued: AtomicUsize,
}

impl ConnStats {
    fn add(&self, n: usize) {
        let now = self.buffered.fetch_add(n, Ordering::Relaxed) + n;
        self.peak_buffered.fetch_max(now, Ordering::Relaxed);
    }

    /// The connection has `n` octets queued for the peer.
    pub(in crate::net) fn queued(&self, n: usize) {
        self.peak_queued.fetch_max(n, Ordering::Relaxed);
    }

    fn sub(&self, n: usize) {
        self.buffered.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Why a request body ended before its END_STREAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyGone {
    /// The connection failed or closed.
    PeerGone,
    /// The client reset the stream.
    Reset,
    /// The client sent trailers a guest may not be handed (HTTP/1.1's, which hyper
    /// does not judge; more fields than the host bridge holds).
    Malformed,
}

impl std::fmt::Display for BodyGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BodyGone::PeerGone => "the peer is gone",
            BodyGone::Reset => "the client reset the stream",
            BodyGone::Malformed => "the client sent malformed trailers",
        })
    }
}

impl std::error::Error for BodyGone {}

/// Chunks shorter than this are copied into the inbox's own buffer instead of kept as
/// slices of the connection's read buffer: a 1-octet slice would pin a whole read.
const COPY_BELOW: usize = 4096;
/// An inbox whose chunk queue grew past this many slots is not pooled.
const MAX_POOLED_CHUNKS: usize = 64;
/// An inbox whose copy buffer grew past this is not kept with it when pooled.
const MAX_POOLED_TAIL: usize = 4096;

#[derive(Default)]
struct State {
    chunks: VecDeque<Bytes>,
    /// Small chunks, copied and coalesced; they come after everything in `chunks`.
    tail: BytesMut,
    ended: bool,
    /// The request's trailers, handed out after the last chunk once the body ended.
    trailers: Option<HeaderMap>,
    gone: Option<BodyGone>,
    /// Read by the handler, not yet reported to the connection.
    consumed: usize,
    reader: Option<Waker>,
    connection: Option<Waker>,
    /// The handler has asked for the body at least once.
    asked: bool,
    /// The connection reads ahead ([`Inbox::read_ahead`]), and wants to hear when
    /// the handler first asks.
    reads_ahead: bool,
}

impl State {
    /// The next chunk for the handler, in arrival order.
    fn pop(&mut self) -> Option<Bytes> {
        self.chunks
            .pop_front()
            .or_else(|| (!self.tail.is_empty()).then(|| self.tail.split().freeze()))
    }

    fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.tail.is_empty()
    }

    /// Octets buffered and not yet read.
    fn waiting(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum::<usize>() + self.tail.len()
    }

    /// Drops everything buffered, trailers too; the octets dropped.
    fn drain(&mut self) -> usize {
        let dropped = self.waiting();
        self.chunks.clear();
        self.tail.clear();
        self.trailers = None;
        dropped
    }

    /// The connection asks to be woken when the handler takes a chunk.
    fn listen(&mut self, connection: &Waker) {
        if !self
            .connection
            .as_ref()
            .is_some_and(|w| w.will_wake(connection))
        {
            self.connection = Some(connection.clone());
        }
    }
}

/// What the connection and the handler share for one stream's body. Pooled by the
/// connection, reused only once the handler has dropped its [`RequestBody`].
pub(in crate::net) struct Inbox {
    state: Mutex<State>,
    stats: Arc<ConnStats>,
}

impl Inbox {
    pub(in crate::net) fn new(stats: Arc<ConnStats>) -> Arc<Inbox> {
        Arc::new(Inbox {
            state: Mutex::default(),
            stats,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }

    /// DATA arrived; `end` with END_STREAM.
    pub(in crate::net) fn push(&self, chunk: Bytes, end: bool) {
        let mut state = self.lock();
        if !chunk.is_empty() {
            self.stats.add(chunk.len());
            if chunk.len() < COPY_BELOW {
                state.tail.extend_from_slice(&chunk);
            } else {
                if !state.tail.is_empty() {
                    let small = state.tail.split().freeze();
                    state.chunks.push_back(small);
                }
                state.chunks.push_back(chunk);
            }
        }
        state.ended |= end;
        if let Some(reader) = state.reader.take() {
            reader.wake();
        }
    }

    /// The request's trailers arrived (validated and bounded by the connection's header
    /// list limit); the handler gets them after the last chunk, once the body ended.
    /// `None`: trailers the handler may not be handed, which fail the body.
    pub(in crate::net) fn trailers(&self, trailers: Option<HeaderMap>) {
        match trailers {
            Some(trailers) => self.lock().trailers = Some(trailers),
            None => self.fail(BodyGone::Malformed),
        }
    }

    /// The body will not complete; unread octets are dropped.
    pub(in crate::net) fn fail(&self, why: BodyGone) {
        let mut state = self.lock();
        let dropped = state.drain();
        self.stats.sub(dropped);
        if !state.ended {
            state.gone = Some(why);
        }
        if let Some(reader) = state.reader.take() {
            reader.wake();
        }
    }

    /// Octets the handler read since last asked; the connection registers to hear of more.
    pub(in crate::net) fn take_consumed(&self, connection: &Waker) -> usize {
        let mut state = self.lock();
        state.listen(connection);
        std::mem::take(&mut state.consumed)
    }

    /// Whether the handler has taken all that was pushed, so the connection may read it
    /// more; the connection registers to hear when that becomes so. (HTTP/3's credit: it
    /// reads from quinn only then, and counts nothing.)
    pub(in crate::net) fn wants_more(&self, connection: &Waker) -> bool {
        let mut state = self.lock();
        state.listen(connection);
        state.consumed = 0;
        state.is_empty()
    }

    /// Whether fewer than `window` octets wait unread, and whether the handler has asked
    /// for the body yet (HTTP/1.1's read-ahead); the connection registers to hear when
    /// either changes, or when the handler drops the body.
    pub(in crate::net) fn read_ahead(&self, window: usize, connection: &Waker) -> ReadAhead {
        let mut state = self.lock();
        state.listen(connection);
        state.reads_ahead = true;
        let waiting = state.waiting();
        ReadAhead {
            room: waiting < window,
            asked: state.asked,
        }
    }

    /// Whether the handler has asked for the body.
    pub(in crate::net) fn asked(&self) -> bool {
        self.lock().asked
    }

    /// Forgets everything before the next stream uses it.
    pub(in crate::net) fn reset(&self) {
        let mut state = self.lock();
        let dropped = state.drain();
        if state.tail.capacity() > MAX_POOLED_TAIL {
            state.tail = BytesMut::new();
        }
        self.stats.sub(dropped);
        state.ended = false;
        state.gone = None;
        state.consumed = 0;
        state.reader = None;
        state.connection = None;
        state.asked = false;
        state.reads_ahead = false;
    }
}

/// What [`Inbox::read_ahead`] found.
pub(in crate::net) struct ReadAhead {
    /// Fewer octets wait unread than the connection may read ahead.
    pub room: bool,
    /// The handler has asked for the body.
    pub asked: bool,
}

/// Request body inboxes kept for reuse per connection (DESIGN 4.3).
const MAX_POOLED_INBOXES: usize = 32;

/// A connection's spare inboxes: a finished stream's goes back once its handler let go.
pub(in crate::net) struct InboxPool {
    free: Vec<Arc<Inbox>>,
    stats: Arc<ConnStats>,
}

impl InboxPool {
    pub(in crate::net) fn new(stats: Arc<ConnStats>) -> Self {
        InboxPool {
            free: Vec::new(),
            stats,
        }
    }

    pub(in crate::net) fn rent(&mut self) -> Arc<Inbox> {
        self.free
            .pop()
            .unwrap_or_else(|| Inbox::new(self.stats.clone()))
    }

    /// Ends the body with `why` unless it ended already, and keeps the inbox if nobody
    /// else (a handler still running) holds it. Drop the stream's handler first.
    pub(in crate::net) fn give_back(&mut self, inbox: Arc<Inbox>, why: BodyGone) {
        inbox.fail(why);
        let small = inbox.lock().chunks.capacity() <= MAX_POOLED_CHUNKS;
        if small && Arc::strong_count(&inbox) == 1 && self.free.len() < MAX_POOLED_INBOXES {
            inbox.reset();
            self.free.push(inbox);
        }
    }
}

/// A request body fed by the connection; reading it is what lets the client send more.
pub struct RequestBody {
    inbox: Option<Arc<Inbox>>,
}

impl RequestBody {
    /// A body with nothing in it (the request ended with its HEADERS).
    pub fn empty() -> Self {
        RequestBody { inbox: None }
    }

    pub(in crate::net) fn new(inbox: Arc<Inbox>) -> Self {
        RequestBody { inbox: Some(inbox) }
    }
}

impl Drop for RequestBody {
    /// A connection that reads ahead for this body stops once nobody reads it.
    fn drop(&mut self) {
        let Some(inbox) = self.inbox.take() else {
            return;
        };
        let mut state = inbox.lock();
        let connection = state.connection.take().filter(|_| state.reads_ahead);
        drop(state);
        // Let go first: the connection sees the body unread by anyone.
        drop(inbox);
        if let Some(connection) = connection {
            connection.wake();
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BodyGone;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyGone>>> {
        let Some(inbox) = &self.inbox else {
            return Poll::Ready(None);
        };
        let mut state = inbox.lock();
        if !std::mem::replace(&mut state.asked, true)
            && state.reads_ahead
            && let Some(connection) = state.connection.take()
        {
            connection.wake();
        }
        if let Some(chunk) = state.pop() {
            inbox.stats.sub(chunk.len());
            state.consumed += chunk.len();
            if let Some(connection) = state.connection.take() {
                connection.wake();
            }
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if let Some(gone) = state.gone {
            return Poll::Ready(Some(Err(gone)));
        }
        if state.ended {
            return Poll::Ready(state.trailers.take().map(|t| Ok(Frame::trailers(t))));
        }
        if !state
            .reader
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            state.reader = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        match &self.inbox {
            None => true,
            Some(inbox) => {
                let state = inbox.lock();
                state.ended && state.is_empty() && state.trailers.is_none()
            }
        }
    }

    /// At least what has arrived and waits to be read: the host weighs it against the
    /// app's body limit when the response head comes (`host::body::OverLimit`).
    fn size_hint(&self) -> SizeHint {
        let Some(inbox) = &self.inbox else {
            return SizeHint::with_exact(0);
        };
        let state = inbox.lock();
        let waiting = state.waiting();
        let mut hint = SizeHint::new();
        hint.set_lower(waiting as u64);
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbox_whose_chunk_queue_grew_is_not_pooled() {
        let mut pool = InboxPool::new(Arc::new(ConnStats::default()));
        let small = pool.rent();
        small.push(Bytes::from_static(&[1; COPY_BELOW]), true);
        pool.give_back(small, BodyGone::PeerGone);
        assert_eq!(pool.free.len(), 1, "an ordinary inbox is kept");
        let big = pool.rent();
        for _ in 0..=MAX_POOLED_CHUNKS {
            big.push(Bytes::from_static(&[2; COPY_BELOW]), false);
        }
        pool.give_back(big, BodyGone::PeerGone);
        assert!(
            pool.free.is_empty(),
            "an inbox with a grown chunk queue is dropped"
        );
    }

    /// The next frame of `body`, which must be ready.
    fn next_frame(body: &mut RequestBody) -> Option<Result<Frame<Bytes>, BodyGone>> {
        match Pin::new(body).poll_frame(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(frame) => frame,
            Poll::Pending => panic!("no frame ready"),
        }
    }

    #[test]
    fn trailers_come_after_the_last_chunk_once_the_body_ended() {
        let inbox = Inbox::new(Arc::new(ConnStats::default()));
        let mut body = RequestBody::new(inbox.clone());
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", "abc".parse().unwrap());
        inbox.push(Bytes::from_static(b"data"), false);
        inbox.trailers(Some(trailers.clone()));
        assert_eq!(
            next_frame(&mut body).unwrap().unwrap().into_data().unwrap(),
            "data"
        );
        // Held until the body's end is known (HTTP/3's FIN follows its trailers).
        assert!(
            Pin::new(&mut body)
                .poll_frame(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        inbox.push(Bytes::new(), true);
        assert!(!body.is_end_stream(), "the trailers are still to come");
        let frame = next_frame(&mut body).unwrap().unwrap();
        assert_eq!(frame.into_trailers().unwrap(), trailers);
        assert!(body.is_end_stream());
        assert!(next_frame(&mut body).is_none());
    }

    #[test]
    fn a_body_that_fails_hands_out_no_trailers() {
        let inbox = Inbox::new(Arc::new(ConnStats::default()));
        let mut body = RequestBody::new(inbox.clone());
        inbox.trailers(Some(HeaderMap::new()));
        inbox.fail(BodyGone::Reset);
        assert_eq!(next_frame(&mut body).unwrap().unwrap_err(), BodyGone::Reset);
        // A pooled inbox forgets them with the rest.
        let inbox = Inbox::new(Arc::new(ConnStats::default()));
        inbox.trailers(Some(HeaderMap::new()));
        inbox.reset();
        inbox.push(Bytes::new(), true);
        assert!(next_frame(&mut RequestBody::new(inbox)).is_none());
    }

    #[test]
    fn small_chunks_are_coalesced_in_order_with_large_ones() {
        let inbox = Inbox::new(Arc::new(ConnStats::default()));
        inbox.push(Bytes::from_static(b"a"), false);
        inbox.push(Bytes::from_static(b"b"), false);
        inbox.push(Bytes::from_static(&[b'c'; COPY_BELOW]), false);
        inbox.push(Bytes::from_static(b"d"), true);
        let mut state = inbox.lock();
        assert_eq!(state.pop().unwrap(), &b"ab"[..]);
        assert_eq!(state.pop().unwrap().len(), COPY_BELOW);
        assert_eq!(state.pop().unwrap(), &b"d"[..]);
        assert!(state.pop().is_none());
    }
}
