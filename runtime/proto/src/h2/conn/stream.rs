//! Stream states (RFC 9113 §5.1) as a server sees them, and the table of live streams.
//!
//! A client stream is idle until its HEADERS, then open; END_STREAM from the peer makes it
//! half-closed (remote). Our END_STREAM closes a half-closed (remote) stream; on an open
//! one it leaves the stream finished, half-closed (local): nothing more to send, but the
//! rest of the request is still judged (and discarded) until it ends or runs past its
//! bound. A closed or reset stream leaves the table. Closed streams are told apart from
//! idle ones by their id, since ids only grow.

use crate::h2::StreamId;

use super::flow::Window;

/// A stream that is open or half-closed.
#[derive(Debug)]
pub(super) struct Stream {
    pub id: StreamId,
    /// END_STREAM received: half-closed (remote).
    pub recv_closed: bool,
    /// A response head was sent.
    pub head_sent: bool,
    /// Credit we may still spend sending DATA.
    pub send: Window,
    /// Credit the peer may still spend sending DATA.
    pub recv: Window,
    /// Octets the handler consumed (or padding) not yet given back by WINDOW_UPDATE.
    pub recv_unacked: u32,
    /// The declared content-length, checked against the DATA sum (§8.1.1).
    pub content_length: Option<u64>,
    pub received: u64,
    /// `Some` once our response ended before the request did: the frames the peer may
    /// still send on the stream before it is reset with NO_ERROR.
    pub finished: Option<u32>,
}

impl Stream {
    pub fn new(id: StreamId, send: u32, recv: u32, content_length: Option<u64>) -> Self {
        Stream {
            id,
            recv_closed: false,
            head_sent: false,
            send: Window::new(send),
            recv: Window::new(recv),
            recv_unacked: 0,
            content_length,
            received: 0,
            finished: None,
        }
    }

    /// Whether our response ended (half-closed local): the stream only judges and
    /// discards what the peer still sends.
    pub fn is_finished(&self) -> bool {
        self.finished.is_some()
    }
}

/// The live streams; at most max-concurrent-streams of them, so a linear scan is cheap and
/// the table allocates once.
#[derive(Debug, Default)]
pub(super) struct Streams {
    live: Vec<Stream>,
}

impl Streams {
    pub fn with_capacity(n: usize) -> Self {
        Streams {
            live: Vec::with_capacity(n),
        }
    }

    /// Streams open or half-closed: what counts against the concurrency limit (§5.1.2).
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Streams whose response has not ended.
    pub fn responding(&self) -> usize {
        self.live.iter().filter(|s| !s.is_finished()).count()
    }

    pub fn get(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.live.iter_mut().find(|s| s.id == id)
    }

    /// The stream, if its response is still under way.
    pub fn responding_on(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.get(id).filter(|s| !s.is_finished())
    }

    pub fn insert(&mut self, stream: Stream) {
        self.live.push(stream);
    }

    pub fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let i = self.live.iter().position(|s| s.id == id)?;
        Some(self.live.swap_remove(i))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.live.iter_mut()
    }
}

/// The fewest closed streams a [`ClosedRing`] remembers.
const MIN_REMEMBERED: usize = 64;
/// The most: past this many concurrent streams, the oldest are forgotten sooner.
const MAX_REMEMBERED: usize = 8192;

/// The last streams closed a given way. Frames the peer sent before it saw our
/// RST_STREAM must be ignored (§5.4.2); frames on a stream the peer itself ended are
/// STREAM_CLOSED errors, where an id it never used is a PROTOCOL_ERROR (§5.1, §5.1.1).
/// Sized to twice the concurrent streams, so that ending every stream at once (and
/// then some) forgets none whose frames may still be in flight.
#[derive(Debug)]
pub(super) struct ClosedRing {
    ids: Vec<u32>,
    next: usize,
}

impl ClosedRing {
    pub fn for_streams(max_concurrent_streams: u32) -> Self {
        let n = (max_concurrent_streams as usize)
            .saturating_mul(2)
            .clamp(MIN_REMEMBERED, MAX_REMEMBERED);
        ClosedRing {
            ids: vec![0; n],
            next: 0,
        }
    }

    pub fn remember(&mut self, id: StreamId) {
        self.ids[self.next] = id.get();
        self.next = (self.next + 1) % self.ids.len();
    }

    pub fn contains(&self, id: StreamId) -> bool {
        id.get() != 0 && self.ids.contains(&id.get())
    }
}
