//! HPACK field compression (RFC 7541).
//!
//! Hand-written rather than borrowed because the engine needs a decoder that hands out
//! slices into buffers it owns and reuses, so a warm connection decodes a request without
//! allocating: the decoder's scratch and dynamic table are allocated once per connection.

//!
//! Integers, Huffman strings and the dynamic table's entries are [`crate::field_coding`]'s,
//! shared with QPACK; this module owns the static table, the representations (§6) and
//! their limits.

mod decoder;
mod encoder;
mod static_table;

use core::fmt;

pub use decoder::{DEFAULT_MAX_HEADER_LIST_SIZE, Decoder};
pub use encoder::Encoder;

use crate::field_coding::CodingError;
use crate::h2::error::{ErrorCode, H2Error};

/// A field block that cannot be decoded: HPACK state is lost, so this is a connection
/// COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionError {
    /// The block ended inside a representation.
    Truncated,
    /// An integer above 2^32-1 (RFC 7541 §5.1 lets decoders bound them).
    IntegerOverflow,
    /// Index 0, or past the end of the static and dynamic tables (§2.3.3).
    InvalidIndex,
    /// A Huffman string contained the EOS symbol (§5.2).
    HuffmanEos,
    /// Huffman padding of more than 7 bits (§5.2).
    HuffmanPaddingTooLong,
    /// Huffman padding that is not the high bits of EOS, all ones (§5.2).
    HuffmanPaddingNotOnes,
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE (§6.3).
    TableSizeUpdateTooLarge,
    /// A dynamic table size update after the first field of a block (§4.2).
    TableSizeUpdateNotAtStart,
    /// We lowered SETTINGS_HEADER_TABLE_SIZE below the table size and the block did not
    /// start with the size update the encoder owes us (§4.2).
    MissingTableSizeUpdate,
}

/// Why [`Decoder::decode`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The field list passed the decoder's max header list size (RFC 9113 §6.5.2). The block
    /// was still decoded to its end, so the dynamic table is in sync and the connection can
    /// go on; fields from the one that crossed the limit on were not delivered. The engine
    /// chooses the answer (a 431 response, or RST_STREAM).
    HeaderListTooLarge,
    /// The block is malformed: a connection COMPRESSION_ERROR.
    Compression(CompressionError),
}

impl From<CodingError> for CompressionError {
    fn from(e: CodingError) -> Self {
        match e {
            CodingError::Truncated => CompressionError::Truncated,
            CodingError::IntegerOverflow => CompressionError::IntegerOverflow,
            CodingError::HuffmanEos => CompressionError::HuffmanEos,
            CodingError::HuffmanPaddingTooLong => CompressionError::HuffmanPaddingTooLong,
            CodingError::HuffmanPaddingNotOnes => CompressionError::HuffmanPaddingNotOnes,
        }
    }
}

impl From<CompressionError> for HpackError {
    fn from(e: CompressionError) -> Self {
        HpackError::Compression(e)
    }
}

impl From<CompressionError> for H2Error {
    fn from(_: CompressionError) -> Self {
        H2Error::Connection(ErrorCode::CompressionError)
    }
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HpackError::HeaderListTooLarge => f.write_str("header list too large"),
            HpackError::Compression(e) => write!(f, "HPACK compression error: {e:?}"),
        }
    }
}

impl std::error::Error for HpackError {}

#[cfg(test)]
pub(crate) mod test_util {
    use super::{Decoder, HpackError};

    /// Decodes a block into owned (name, value) strings.
    pub fn decode_all(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut fields = Vec::new();
        d.decode(block, &mut |n: &[u8], v: &[u8]| {
            fields.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })?;
        Ok(fields)
    }
}
