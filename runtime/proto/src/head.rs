//! Pooled request heads (DESIGN 4.3), shared by the HTTP/2 and HTTP/3 cores: a
//! finished stream's head — pseudo-headers, field list and the arena their octets live
//! in — goes back to its connection, is reset, and serves the next stream, so a warm
//! connection decodes a request without allocating.

use core::ops::Range;

pub(crate) mod validate;

/// At most this many heads wait in a connection's pool.
pub const MAX_POOLED: usize = 32;
/// A head whose header list grew past this many fields is not kept (a peer's thousands of
/// header lines must not stay pinned to the connection).
pub const MAX_POOLED_FIELDS: usize = 64;
/// A head whose arena grew past this many octets is not kept.
pub const MAX_POOLED_ARENA: usize = 4 * 1024;

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
    pub(crate) fn reset(&mut self) {
        self.arena.clear();
        self.fields.clear();
        self.method = 0..0;
        self.scheme = 0..0;
        self.authority = None;
        self.path = 0..0;
        self.content_length = None;
    }

    /// Whether keeping it would pin more memory than a typical request needs.
    pub(crate) fn too_big_to_keep(&self) -> bool {
        self.fields.capacity() > MAX_POOLED_FIELDS || self.arena.capacity() > MAX_POOLED_ARENA
    }
}
