//! Pooled request state (DESIGN.md §4.3): a finished request's head — pseudo-headers,
//! field list and the arena their octets live in — and a finished stream's frame state go
//! back to their connection, are reset, and serve the next stream, so a warm connection
//! takes a request without allocating.

use crate::h3::frame::FrameReader;

pub use crate::head::{MAX_POOLED, MAX_POOLED_ARENA, MAX_POOLED_FIELDS, RequestHead};

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
    heads: Vec<RequestHead>,
    streams: Vec<RequestStream>,
}

impl Pools {
    /// A clean head, reused when one is pooled.
    pub(super) fn rent_head(&mut self) -> RequestHead {
        self.heads.pop().unwrap_or_default()
    }

    /// Takes a head back, reset, unless the pool is full or the head grew too big.
    pub(super) fn give_back_head(&mut self, mut head: RequestHead) {
        if head.too_big_to_keep() {
            return;
        }
        head.reset();
        keep(&mut self.heads, head);
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
    use crate::head::Pseudo;

    fn head_with(fields: usize, value_len: usize) -> RequestHead {
        let mut head = RequestHead::default();
        head.set_pseudo(Pseudo::Method, b"POST");
        head.set_pseudo(Pseudo::Authority, b"example.com");
        head.set_content_length(7);
        for _ in 0..fields {
            head.push_field(b"x", &vec![b'v'; value_len]);
        }
        head
    }

    #[test]
    fn a_returned_head_comes_back_clean() {
        let mut pools = Pools::default();
        let head = head_with(3, 10);
        let arena = head.arena.as_ptr();
        pools.give_back_head(head);
        let head = pools.rent_head();
        assert_eq!(head.arena.as_ptr(), arena, "the same allocation is reused");
        assert_eq!(head.method(), b"");
        assert_eq!(head.authority(), None);
        assert_eq!(head.content_length(), None);
        assert_eq!(head.fields().len(), 0);
    }

    #[test]
    fn keeps_at_most_32_of_each() {
        let mut pools = Pools::default();
        for i in 0..MAX_POOLED as u64 + 5 {
            pools.give_back_head(head_with(1, 1));
            pools.give_back_stream(RequestStream {
                id: i * 4,
                ..RequestStream::default()
            });
        }
        assert_eq!(pools.heads(), MAX_POOLED);
        assert_eq!(pools.streams(), MAX_POOLED);
        assert_eq!(pools.rent_stream(8).id, 8);
    }

    #[test]
    fn keeps_64_fields_but_not_65() {
        let mut pools = Pools::default();
        let mut head = RequestHead::default();
        head.fields.reserve_exact(MAX_POOLED_FIELDS);
        for _ in 0..MAX_POOLED_FIELDS {
            head.push_field(b"a", b"b");
        }
        pools.give_back_head(head);
        assert_eq!(pools.heads(), 1);
        let mut head = pools.rent_head();
        for _ in 0..=MAX_POOLED_FIELDS {
            head.push_field(b"a", b"b");
        }
        pools.give_back_head(head);
        assert_eq!(pools.heads(), 0);
    }

    #[test]
    fn keeps_a_4_kib_arena_but_not_a_bigger_one() {
        let mut pools = Pools::default();
        let mut head = RequestHead::default();
        head.arena.reserve_exact(MAX_POOLED_ARENA);
        head.push_field(&[b'n'; 10], &vec![b'v'; MAX_POOLED_ARENA - 10]);
        assert_eq!(head.arena.capacity(), MAX_POOLED_ARENA);
        pools.give_back_head(head);
        assert_eq!(pools.heads(), 1);
        let mut head = pools.rent_head();
        head.push_field(b"n", &vec![b'v'; MAX_POOLED_ARENA]);
        pools.give_back_head(head);
        assert_eq!(pools.heads(), 0);
    }
}
