//! WINDOW_UPDATE (RFC 9113 §6.9): flow-control credit for a stream or the connection.

use super::{FrameHead, FrameType, StreamId, be_u32};
use crate::h2::error::{ErrorCode, H2Error};

/// A WINDOW_UPDATE frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowUpdate {
    /// The stream credited, or stream 0 for the connection window.
    pub stream_id: StreamId,
    /// Octets of credit, 1..=2^31-1.
    pub increment: u32,
}

impl WindowUpdate {
    /// Decodes a WINDOW_UPDATE payload: a length other than 4 is a connection
    /// FRAME_SIZE_ERROR; an increment of 0 a PROTOCOL_ERROR, scoped to the window it names.
    pub fn decode(head: &FrameHead, payload: &[u8]) -> Result<Self, H2Error> {
        if payload.len() != 4 {
            return Err(H2Error::Connection(ErrorCode::FrameSizeError));
        }
        let increment = be_u32(payload) & 0x7fff_ffff;
        if increment == 0 {
            return Err(match head.stream_id {
                StreamId::CONNECTION => H2Error::Connection(ErrorCode::ProtocolError),
                id => H2Error::Stream(id, ErrorCode::ProtocolError),
            });
        }
        Ok(WindowUpdate {
            stream_id: head.stream_id,
            increment,
        })
    }
}

/// Appends a WINDOW_UPDATE frame; `increment` must be 1..=2^31-1.
pub fn encode_window_update(buf: &mut Vec<u8>, stream_id: StreamId, increment: u32) {
    assert!(
        (1..=0x7fff_ffff).contains(&increment),
        "window increment out of range"
    );
    FrameHead::new(FrameType::WindowUpdate, 0, stream_id, 4).encode(buf);
    buf.extend_from_slice(&increment.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    fn update(stream: u32, increment: u32) -> Frame<'static> {
        Frame::WindowUpdate(WindowUpdate {
            stream_id: StreamId::new(stream),
            increment,
        })
    }

    #[test]
    fn decodes_stream_and_connection_updates() {
        let buf = [0, 0, 4, 0x8, 0, 0, 0, 0, 1, 0, 0, 0x10, 0];
        assert_eq!(parse(&buf), Ok(update(1, 4096)));
        let buf = [0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff];
        assert_eq!(parse(&buf), Ok(update(0, 0x7fff_ffff)));
    }

    #[test]
    fn reserved_bit_is_ignored() {
        let buf = [0, 0, 4, 0x8, 0, 0, 0, 0, 1, 0x80, 0, 0, 1];
        assert_eq!(parse(&buf), Ok(update(1, 1)));
    }

    #[test]
    fn zero_increment_is_a_protocol_error_scoped_to_its_window() {
        let buf = [0, 0, 4, 0x8, 0, 0, 0, 0, 3, 0, 0, 0, 0];
        assert_eq!(
            parse(&buf),
            Err(H2Error::Stream(StreamId::new(3), ErrorCode::ProtocolError))
        );
        let buf = [0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
        // Only the reserved bit set is still an increment of 0.
        let buf = [0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0x80, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn wrong_length_is_a_connection_frame_size_error() {
        let buf = [0, 0, 3, 0x8, 0, 0, 0, 0, 1, 0, 0, 1];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
        let buf = [0, 0, 5, 0x8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn encodes() {
        let mut buf = Vec::new();
        encode_window_update(&mut buf, StreamId::CONNECTION, 0x7fff_ffff);
        encode_window_update(&mut buf, StreamId::new(9), 1);
        #[rustfmt::skip]
        let expected = [
            0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff,
            0, 0, 4, 0x8, 0, 0, 0, 0, 9, 0, 0, 0, 1,
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn refuses_to_encode_a_zero_increment() {
        encode_window_update(&mut Vec::new(), StreamId::new(1), 0);
    }
}
