//! Pooled request state (DESIGN.md §4.3): a finished request's head — pseudo-headers,
//! field list and the arena their octets live in — and a finished stream's frame state go
//! back to their connection, are reset, and serve the next stream, so a warm connection
//! takes a request without allocating.

use crate::h3::frame::FrameReader;

pub(super) use crate::head::RequestHead;
use crate::head::{HeadPool, MAX_POOLED, MAX_POOLED_ARENA};

/// The receiving half of a request stream: where it is in the request (RFC 9114 §4.1)
/// and its frame state.
#[derive(Debug, Default)]
pub(super) struct RequestStream {
    pub(super) id: u64,
    pub(super) phase: Phase,
    pub(super) reader: FrameReader,
    pub(super) content_length: Option<u64>,
    /// DATA payload octets announced so far.
    pub(super) received: u64,
    /// A field section waiting for the encoder stream (RFC 9204 §2.1.2); the stream is
    /// blocked while it is not empty.
    pub(super) blocked_section: Vec<u8>,
}

/// Where a request stream is in the message (§4.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Phase {
    #[default]
    Head,
    Body,
    /// Trailers arrived: only the end of the stream may follow.
    Trailers,
}

impl RequestStream {
    fn reset(&mut self) {
        self.id = 0;
        self.phase = Phase::Head;
        self.reader.reset();
        self.content_length = None;
        self.received = 0;
        self.blocked_section.clear();
    }

    fn too_big_to_keep(&self) -> bool {
        self.reader.buffer_capacity() > MAX_POOLED_ARENA
            || self.blocked_section.capacity() > MAX_POOLED_ARENA
    }
}

/// A connection's pools. Only the connection rents and returns: a head is owned by
/// whoever holds it, so one a handler still reads cannot be here.
#[derive(Debug, Default)]
pub(super) struct Pools {
    heads: HeadPool,
    streams: Vec<RequestStream>,
}

impl Pools {
    /// A clean head, reused when one is pooled.
    pub(super) fn rent_head(&mut self) -> RequestHead {
        self.heads.rent()
    }

    /// Takes a head back, reset, unless the pool is full or the head grew too big.
    pub(super) fn give_back_head(&mut self, head: RequestHead) {
        self.heads.give_back(head);
    }

    /// A clean stream state for `id`, reused when one is pooled.
    pub(super) fn rent_stream(&mut self, id: u64) -> RequestStream {
        let mut stream = self.streams.pop().unwrap_or_default();
        stream.id = id;
        stream
    }

    /// Takes a finished stream's state back, reset, unless a buffer grew past 4 KiB.
    pub(super) fn give_back_stream(&mut self, mut stream: RequestStream) {
        if stream.too_big_to_keep() {
            return;
        }
        stream.reset();
        keep(&mut self.streams, stream);
    }

    #[cfg(test)]
    pub(super) fn heads(&self) -> usize {
        self.heads.len()
    }

    #[cfg(test)]
    pub(super) fn streams(&self) -> usize {
        self.streams.len()
    }
}

/// Pools `item` unless `MAX_POOLED` wait already; the pool's own array is sized once.
fn keep<T>(pool: &mut Vec<T>, item: T) {
    if pool.len() >= MAX_POOLED {
        return;
    }
    if pool.capacity() == 0 {
        pool.reserve_exact(MAX_POOLED);
    }
    pool.push(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_32_of_each() {
        let mut pools = Pools::default();
        for i in 0..MAX_POOLED as u64 + 5 {
            pools.give_back_head(RequestHead::default());
            pools.give_back_stream(RequestStream {
                id: i * 4,
                ..RequestStream::default()
            });
        }
        assert_eq!(pools.heads(), MAX_POOLED);
        assert_eq!(pools.streams(), MAX_POOLED);
        assert_eq!(pools.rent_stream(8).id, 8);
    }
}
