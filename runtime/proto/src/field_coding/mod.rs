//! Field coding that HPACK (RFC 7541) and QPACK (RFC 9204) share: QPACK takes HPACK's
//! primitives as they are (RFC 9204 §4.1) and keeps a dynamic table of the same kind.
//!
//! - `integer`: prefix integers (RFC 7541 §5.1, RFC 9204 §4.1.1).
//! - `huffman`: the Huffman code (RFC 7541 §5.2, Appendix B).
//! - [`string`]: string literals, an H bit and a prefix-integer length (RFC 7541 §5.2,
//!   RFC 9204 §4.1.2).
//! - `dynamic_table`: the dynamic table's entries, a FIFO bounded by size (RFC 7541 §4,
//!   RFC 9204 §3.2); each protocol addresses it its own way.
//! - [`FieldSink`]: where a decoder hands the fields it decoded.

pub(crate) mod dynamic_table;
pub(crate) mod huffman;
pub(crate) mod integer;
pub mod string;

/// Receives decoded fields in order. Slices are valid only during the call.
pub trait FieldSink {
    /// One field line; the name is as sent (HTTP/2 and HTTP/3 require lowercase, checked
    /// by the caller).
    fn field(&mut self, name: &[u8], value: &[u8]);
}

impl<F: FnMut(&[u8], &[u8])> FieldSink for F {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        self(name, value)
    }
}

/// A prefix integer or string literal that cannot be decoded. HPACK and QPACK each turn it
/// into their own error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodingError {
    /// The input ended inside the integer or string.
    Truncated,
    /// An integer above 2^32-1 (RFC 7541 §5.1 lets decoders bound them): no index, length
    /// or table size comes near it.
    IntegerOverflow,
    /// A Huffman string contained the EOS symbol (RFC 7541 §5.2).
    HuffmanEos,
    /// Huffman padding of more than 7 bits (RFC 7541 §5.2).
    HuffmanPaddingTooLong,
    /// Huffman padding that is not the high bits of EOS, all ones (RFC 7541 §5.2).
    HuffmanPaddingNotOnes,
}
