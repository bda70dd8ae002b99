//! RST_STREAM (RFC 9113 §6.4): ends one stream immediately.

use super::{FrameHead, FrameType, StreamId, be_u32, require_stream};
use crate::h2::error::{ErrorCode, H2Error};

/// A RST_STREAM frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RstStream {
    /// The stream being reset.
    pub stream_id: StreamId,
    /// The raw error code; see [`ErrorCode::from_u32`] (unknown codes are legal).
    pub code: u32,
}

impl RstStream {
    /// Decodes a RST_STREAM payload: stream 0 is a connection PROTOCOL_ERROR, a length other
    /// than 4 a connection FRAME_SIZE_ERROR (§6.4).
    pub fn decode(head: &FrameHead, payload: &[u8]) -> Result<Self, H2Error> {
        require_stream(head)?;
        if payload.len() != 4 {
            return Err(H2Error::Connection(ErrorCode::FrameSizeError));
        }
        Ok(RstStream {
            stream_id: head.stream_id,
            code: be_u32(payload),
        })
    }
}

/// Appends a RST_STREAM frame.
pub fn encode_rst_stream(buf: &mut Vec<u8>, stream_id: StreamId, code: ErrorCode) {
    debug_assert!(!stream_id.is_connection(), "RST_STREAM needs a stream");
    FrameHead::new(FrameType::RstStream, 0, stream_id, 4).encode(buf);
    buf.extend_from_slice(&(code as u32).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn decodes() {
        let buf = [0, 0, 4, 0x3, 0xff, 0, 0, 0, 1, 0, 0, 0, 0x8];
        let rst = RstStream {
            stream_id: StreamId::new(1),
            code: 8,
        };
        assert_eq!(parse(&buf), Ok(Frame::RstStream(rst)));
        assert_eq!(ErrorCode::from_u32(rst.code), Some(ErrorCode::Cancel));
    }

    #[test]
    fn unknown_codes_are_kept() {
        let buf = [0, 0, 4, 0x3, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef];
        let rst = RstStream {
            stream_id: StreamId::new(3),
            code: 0xdead_beef,
        };
        assert_eq!(parse(&buf), Ok(Frame::RstStream(rst)));
    }

    #[test]
    fn stream_zero_is_a_connection_protocol_error() {
        let buf = [0, 0, 4, 0x3, 0, 0, 0, 0, 0, 0, 0, 0, 0x8];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn wrong_length_is_a_connection_frame_size_error() {
        let buf = [0, 0, 3, 0x3, 0, 0, 0, 0, 1, 0, 0, 8];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
        let buf = [0, 0, 5, 0x3, 0, 0, 0, 0, 1, 0, 0, 0, 8, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn encodes() {
        let mut buf = Vec::new();
        encode_rst_stream(&mut buf, StreamId::new(7), ErrorCode::RefusedStream);
        assert_eq!(buf, [0, 0, 4, 0x3, 0, 0, 0, 0, 7, 0, 0, 0, 0x7]);
    }
}
