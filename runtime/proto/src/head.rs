//! Pooled request heads (DESIGN 4.3) and the pool that keeps them, shared by the HTTP/2
//! and HTTP/3 cores: a finished stream's head — pseudo-headers, field list and the arena
//! their octets live in — goes back to its connection, is reset, and serves the next
//! stream, so a warm connection decodes a request without allocating.

use core::ops::Range;

pub(crate) mod validate;

pub use validate::is_valid_trailer;

/// At most this many heads wait in a connection's pool.
pub(crate) const MAX_POOLED: usize = 32;
/// A head whose header list grew past this many fields is not kept (a peer's thousands of
/// header lines must not stay pinned to the connection).
pub(crate) const MAX_POOLED_FIELDS: usize = 64;
/// A head whose arena grew past this many octets is not kept.
pub(crate) const MAX_POOLED_ARENA: usize = 4 * 1024;

type Span = Range<u32>;

/// A request's head (or trailers: fields only) as decoded from its field section, its
/// octets in one arena. HTTP/2 and HTTP/3 share it, and one engine-independent view.
#[derive(Debug, Default)]
pub struct RequestHead {
    // Crate-visible so the pools' tests can check what is reused.
    pub(crate) arena: Vec<u8>,
    method: Span,
    scheme: Span,
    authority: Option<Span>,
    path: Span,
    pub(crate) fields: Vec<(Span, Span)>,
    content_length: Option<u64>,
}

/// Which request pseudo-header (RFC 9113 §8.3.1, RFC 9114 §4.3.1) a value belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pseudo {
    Method,
    Scheme,
    Authority,
    Path,
}

impl RequestHead {
    /// `:method`.
    pub fn method(&self) -> &[u8] {
        self.get(&self.method)
    }

    /// `:scheme` (empty for CONNECT).
    pub fn scheme(&self) -> &[u8] {
        self.get(&self.scheme)
    }

    /// `:authority`, if sent.
    pub fn authority(&self) -> Option<&[u8]> {
        self.authority.as_ref().map(|s| self.get(s))
    }

    /// `:path` (empty for CONNECT).
    pub fn path(&self) -> &[u8] {
        self.get(&self.path)
    }

    /// The regular header fields, in order, names lowercase.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|(n, v)| (self.get(n), self.get(v)))
    }

    /// The `content-length` the peer declared, if any.
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    fn get(&self, span: &Span) -> &[u8] {
        &self.arena[span.start as usize..span.end as usize]
    }

    fn push(&mut self, octets: &[u8]) -> Span {
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(octets);
        start..self.arena.len() as u32
    }

    /// Whether this pseudo-header was already given.
    pub(crate) fn has(&self, pseudo: Pseudo) -> bool {
        match pseudo {
            Pseudo::Method => !self.method.is_empty(),
            Pseudo::Scheme => !self.scheme.is_empty(),
            Pseudo::Authority => self.authority.is_some(),
            Pseudo::Path => !self.path.is_empty(),
        }
    }

    pub(crate) fn set_pseudo(&mut self, pseudo: Pseudo, value: &[u8]) {
        let span = self.push(value);
        match pseudo {
            Pseudo::Method => self.method = span,
            Pseudo::Scheme => self.scheme = span,
            Pseudo::Authority => self.authority = Some(span),
            Pseudo::Path => self.path = span,
        }
    }

    pub(crate) fn push_field(&mut self, name: &[u8], value: &[u8]) {
        let name = self.push(name);
        let value = self.push(value);
        self.fields.push((name, value));
    }

    pub(crate) fn set_content_length(&mut self, len: u64) {
        self.content_length = Some(len);
    }

    /// Forgets everything, keeping the allocations.
    fn reset(&mut self) {
        self.arena.clear();
        self.fields.clear();
        self.method = 0..0;
        self.scheme = 0..0;
        self.authority = None;
        self.path = 0..0;
        self.content_length = None;
    }

    /// Whether keeping it would pin more memory than a typical request needs.
    fn too_big_to_keep(&self) -> bool {
        self.fields.capacity() > MAX_POOLED_FIELDS || self.arena.capacity() > MAX_POOLED_ARENA
    }
}

/// A connection's pool of heads. Only the connection rents and returns: a head is owned
/// by whoever holds it, so one a handler or an arriving body still uses cannot be here.
#[derive(Debug, Default)]
pub(crate) struct HeadPool {
    free: Vec<RequestHead>,
}

impl HeadPool {
    /// A clean head, reused when one is pooled.
    pub fn rent(&mut self) -> RequestHead {
        self.free.pop().unwrap_or_default()
    }

    /// Takes a head back, reset, unless the pool is full or the head grew too big.
    pub fn give_back(&mut self, mut head: RequestHead) {
        if self.free.len() >= MAX_POOLED || head.too_big_to_keep() {
            return;
        }
        head.reset();
        if self.free.capacity() == 0 {
            self.free.reserve_exact(MAX_POOLED);
        }
        self.free.push(head);
    }

    /// Heads waiting to be reused.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut pool = HeadPool::default();
        let head = head_with(3, 10);
        let arena = head.arena.as_ptr();
        pool.give_back(head);
        let head = pool.rent();
        assert_eq!(head.arena.as_ptr(), arena, "the same allocation is reused");
        assert_eq!(head.method(), b"");
        assert_eq!(head.authority(), None);
        assert_eq!(head.content_length(), None);
        assert_eq!(head.fields().len(), 0);
    }

    #[test]
    fn keeps_at_most_32() {
        let mut pool = HeadPool::default();
        for _ in 0..MAX_POOLED + 5 {
            pool.give_back(head_with(1, 1));
        }
        assert_eq!(pool.len(), MAX_POOLED);
    }

    #[test]
    fn keeps_64_fields_but_not_65() {
        let mut pool = HeadPool::default();
        let mut head = RequestHead::default();
        head.fields.reserve_exact(MAX_POOLED_FIELDS);
        for _ in 0..MAX_POOLED_FIELDS {
            head.push_field(b"a", b"b");
        }
        pool.give_back(head);
        assert_eq!(pool.len(), 1);
        let mut head = pool.rent();
        for _ in 0..=MAX_POOLED_FIELDS {
            head.push_field(b"a", b"b");
        }
        pool.give_back(head);
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn keeps_a_4_kib_arena_but_not_a_bigger_one() {
        let mut pool = HeadPool::default();
        let mut head = RequestHead::default();
        head.arena.reserve_exact(MAX_POOLED_ARENA);
        head.push_field(&[b'n'; 10], &vec![b'v'; MAX_POOLED_ARENA - 10]);
        assert_eq!(head.arena.capacity(), MAX_POOLED_ARENA);
        pool.give_back(head);
        assert_eq!(pool.len(), 1);
        let mut head = pool.rent();
        head.push_field(b"n", &vec![b'v'; MAX_POOLED_ARENA]);
        pool.give_back(head);
        assert_eq!(pool.len(), 0);
    }
}
