//! QPACK field compression (RFC 9204) for a server.
//!
//! The [`Decoder`] keeps the dynamic table the client's encoder fills, up to our
//! SETTINGS_QPACK_MAX_TABLE_CAPACITY, and holds at most SETTINGS_QPACK_BLOCKED_STREAMS
//! streams blocked on it; with capacity 0 (the default) no field section ever blocks and
//! we owe nothing on a decoder stream (§4.2 lets us skip opening one). Our [`Encoder`]
//! uses only the static table and literals, so responses never wait on the client and we
//! never open an encoder stream; the client's decoder stream is still read and held to
//! the RFC.
//!
//! Strings use HPACK's Huffman code and prefix integers (RFC 9204 §4.1.1, §4.1.2), and
//! the dynamic table is HPACK's FIFO addressed QPACK's way: [`crate::field_coding`]
//! serves both.

mod decoder;
mod dynamic_table;
mod encoder;
mod instruction;
mod prefix;
mod static_table;

use core::fmt;

pub use decoder::{DEFAULT_MAX_FIELD_SECTION_SIZE, Decoder, SectionStatus};
pub use encoder::Encoder;
#[cfg(feature = "internals")]
pub use instruction::{DecoderInstruction, EncoderInstruction};

use crate::field_coding::{CodingError, integer};
use crate::h3::error::{ErrorCode, H3Error};

/// What was wrong with QPACK input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// An integer or string ran past the end of its field section.
    Truncated,
    /// An integer above 2^32-1: no index, length or capacity of ours comes near it.
    Integer,
    /// A Huffman string with EOS, or padding that is too long or not all ones.
    Huffman,
    /// A static table index past its 99 entries.
    StaticIndex,
    /// A reference to a dynamic entry that was evicted, is at or past the Required Insert
    /// Count (§2.2.3), or was never inserted (an encoder instruction's, §4.3).
    DynamicReference,
    /// More blocked streams than our SETTINGS_QPACK_BLOCKED_STREAMS (§2.1.2).
    TooManyBlockedStreams,
    /// A Required Insert Count our table could not reach (§4.5.1.1).
    RequiredInsertCount,
    /// A Base below zero (§4.5.1.2).
    Base,
    /// Set Dynamic Table Capacity above our SETTINGS_QPACK_MAX_TABLE_CAPACITY (§4.3.1).
    TableCapacity,
    /// An entry larger than the table's capacity (§3.2.2).
    Insert,
    /// A Section Acknowledgment with no outstanding section that referenced the dynamic
    /// table (§4.4.1).
    SectionAcknowledgment,
    /// An Insert Count Increment of zero or past what we inserted (§4.4.3).
    InsertCountIncrement,
    /// An instruction longer than any acceptable one: an insert too large for our table,
    /// or garbage.
    InstructionTooLong,
}

impl From<CodingError> for Malformed {
    fn from(e: CodingError) -> Self {
        match e {
            CodingError::Truncated => Malformed::Truncated,
            CodingError::IntegerOverflow => Malformed::Integer,
            CodingError::HuffmanEos
            | CodingError::HuffmanPaddingTooLong
            | CodingError::HuffmanPaddingNotOnes => Malformed::Huffman,
        }
    }
}

/// Why QPACK input was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpackError {
    /// The decoded field section passed SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114 §4.2.2).
    /// Without a dynamic table nothing is lost: only this message is refused.
    FieldSectionTooLarge,
    /// A field section could not be decoded: QPACK_DECOMPRESSION_FAILED.
    Decompression(Malformed),
    /// The peer's encoder stream broke the rules: QPACK_ENCODER_STREAM_ERROR.
    EncoderStream(Malformed),
    /// The peer's decoder stream broke the rules: QPACK_DECODER_STREAM_ERROR.
    DecoderStream(Malformed),
}

impl QpackError {
    /// The HTTP/3 error to signal: every QPACK error is a connection error (§2.2.3); a
    /// field section past our limit only aborts its request stream (H3_EXCESSIVE_LOAD),
    /// though a request head past it is better answered 431, as the connection does.
    pub fn to_h3(self) -> H3Error {
        match self {
            QpackError::FieldSectionTooLarge => H3Error::Stream(ErrorCode::ExcessiveLoad),
            QpackError::Decompression(_) => {
                H3Error::Connection(ErrorCode::QpackDecompressionFailed)
            }
            QpackError::EncoderStream(_) => H3Error::Connection(ErrorCode::QpackEncoderStreamError),
            QpackError::DecoderStream(_) => H3Error::Connection(ErrorCode::QpackDecoderStreamError),
        }
    }
}

impl fmt::Display for QpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QpackError::FieldSectionTooLarge => f.write_str("field section too large"),
            QpackError::Decompression(m) => write!(f, "QPACK decompression failed: {m:?}"),
            QpackError::EncoderStream(m) => write!(f, "QPACK encoder stream error: {m:?}"),
            QpackError::DecoderStream(m) => write!(f, "QPACK decoder stream error: {m:?}"),
        }
    }
}

impl std::error::Error for QpackError {}

/// Reads a prefix integer (RFC 7541 §5.1, as RFC 9204 §4.1.1 uses it) at `*pos`.
fn read_integer(buf: &[u8], pos: &mut usize, prefix_bits: u8) -> Result<usize, Malformed> {
    Ok(integer::read(buf, pos, prefix_bits)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_codes() {
        assert_eq!(
            QpackError::FieldSectionTooLarge.to_h3(),
            H3Error::Stream(ErrorCode::ExcessiveLoad)
        );
        assert_eq!(
            QpackError::Decompression(Malformed::Huffman).to_h3(),
            H3Error::Connection(ErrorCode::QpackDecompressionFailed)
        );
        assert_eq!(
            QpackError::EncoderStream(Malformed::Insert).to_h3(),
            H3Error::Connection(ErrorCode::QpackEncoderStreamError)
        );
        assert_eq!(
            QpackError::DecoderStream(Malformed::InsertCountIncrement).to_h3(),
            H3Error::Connection(ErrorCode::QpackDecoderStreamError)
        );
    }
}
