//! PING (RFC 9113 §6.7): round-trip measurement and liveness.

use super::{FrameHead, FrameType, StreamId, flags, require_connection};
use crate::h2::error::{ErrorCode, H2Error};

/// A PING frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ping {
    /// ACK: this answers our PING.
    pub ack: bool,
    /// Opaque data, echoed in the answer.
    pub payload: [u8; 8],
}

impl Ping {
    /// Decodes a PING payload: a stream other than 0 is a connection PROTOCOL_ERROR, a
    /// length other than 8 a connection FRAME_SIZE_ERROR (§6.7).
    pub fn decode(head: &FrameHead, payload: &[u8]) -> Result<Self, H2Error> {
        require_connection(head)?;
        let payload = payload
            .try_into()
            .map_err(|_| H2Error::Connection(ErrorCode::FrameSizeError))?;
        Ok(Ping {
            ack: head.has(flags::ACK),
            payload,
        })
    }
}

/// Appends a PING frame; an answer (`ack`) echoes the payload it answers.
pub fn encode_ping(buf: &mut Vec<u8>, payload: [u8; 8], ack: bool) {
    let flags = if ack { flags::ACK } else { 0 };
    FrameHead::new(FrameType::Ping, flags, StreamId::CONNECTION, 8).encode(buf);
    buf.extend_from_slice(&payload);
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn decodes() {
        let buf = [0, 0, 8, 0x6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let ping = Ping {
            ack: false,
            payload: [1, 2, 3, 4, 5, 6, 7, 8],
        };
        assert_eq!(parse(&buf), Ok(Frame::Ping(ping)));
        let buf = [0, 0, 8, 0x6, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        let ping = Ping {
            ack: true,
            payload: [0, 0, 0, 0, 0, 0, 0, 9],
        };
        assert_eq!(parse(&buf), Ok(Frame::Ping(ping)));
    }

    #[test]
    fn on_a_stream_is_a_connection_protocol_error() {
        let buf = [0, 0, 8, 0x6, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn wrong_length_is_a_connection_frame_size_error() {
        let buf = [0, 0, 7, 0x6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
        let buf = [0, 0, 9, 0x6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
        let buf = [0, 0, 0, 0x6, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn encodes_ping_and_ack() {
        let mut buf = Vec::new();
        encode_ping(&mut buf, *b"wedge!!!", false);
        encode_ping(&mut buf, *b"wedge!!!", true);
        let mut expected = vec![0, 0, 8, 0x6, 0, 0, 0, 0, 0];
        expected.extend_from_slice(b"wedge!!!");
        expected.extend_from_slice(&[0, 0, 8, 0x6, 1, 0, 0, 0, 0]);
        expected.extend_from_slice(b"wedge!!!");
        assert_eq!(buf, expected);
    }
}
