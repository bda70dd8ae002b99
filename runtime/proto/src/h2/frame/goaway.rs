//! GOAWAY (RFC 9113 §6.8): starts shutting the connection down.

use super::{FrameHead, FrameType, StreamId, be_u32, require_connection};
use crate::h2::error::{ErrorCode, H2Error};

/// A GOAWAY frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoAway<'a> {
    /// The highest stream the sender may have acted on; later ones were not processed.
    pub last_stream_id: StreamId,
    /// The raw error code; see [`ErrorCode::from_u32`] (unknown codes are legal).
    pub code: u32,
    /// Opaque diagnostic data.
    pub debug_data: &'a [u8],
}

impl<'a> GoAway<'a> {
    /// Decodes a GOAWAY payload: a stream other than 0 is a connection PROTOCOL_ERROR
    /// (§6.8), fewer than 8 octets a connection FRAME_SIZE_ERROR (§4.2).
    pub fn decode(head: &FrameHead, payload: &'a [u8]) -> Result<Self, H2Error> {
        require_connection(head)?;
        if payload.len() < 8 {
            return Err(H2Error::Connection(ErrorCode::FrameSizeError));
        }
        Ok(GoAway {
            last_stream_id: StreamId::new(be_u32(payload)),
            code: be_u32(&payload[4..]),
            debug_data: &payload[8..],
        })
    }
}

/// Appends a GOAWAY frame with optional debug data.
pub fn encode_goaway(
    buf: &mut Vec<u8>,
    last_stream_id: StreamId,
    code: ErrorCode,
    debug_data: &[u8],
) {
    FrameHead::new(
        FrameType::GoAway,
        0,
        StreamId::CONNECTION,
        8 + debug_data.len(),
    )
    .encode(buf);
    buf.extend_from_slice(&last_stream_id.get().to_be_bytes());
    buf.extend_from_slice(&(code as u32).to_be_bytes());
    buf.extend_from_slice(debug_data);
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn decodes_with_and_without_debug_data() {
        let buf = [0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0x80, 0, 0, 5, 0, 0, 0, 0xb];
        let goaway = GoAway {
            last_stream_id: StreamId::new(5),
            code: 0xb,
            debug_data: b"",
        };
        assert_eq!(parse(&buf), Ok(Frame::GoAway(goaway)));
        let buf = [
            0, 0, 10, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, b'h', b'i',
        ];
        let goaway = GoAway {
            last_stream_id: StreamId::new(1),
            code: 0,
            debug_data: b"hi",
        };
        assert_eq!(parse(&buf), Ok(Frame::GoAway(goaway)));
    }

    #[test]
    fn on_a_stream_is_a_connection_protocol_error() {
        let buf = [0, 0, 8, 0x7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn short_is_a_connection_frame_size_error() {
        let buf = [0, 0, 7, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn encodes() {
        let mut buf = Vec::new();
        encode_goaway(
            &mut buf,
            StreamId::new(0x0102_0304),
            ErrorCode::EnhanceYourCalm,
            b"calm",
        );
        #[rustfmt::skip]
        let expected = [
            0, 0, 12, 0x7, 0, 0, 0, 0, 0,
            0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0xb, b'c', b'a', b'l', b'm',
        ];
        assert_eq!(buf, expected);
    }
}
