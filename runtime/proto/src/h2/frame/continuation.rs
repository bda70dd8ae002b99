//! CONTINUATION (RFC 9113 §6.10): the rest of a field block. Encoded by
//! [`encode_headers`](super::encode_headers), which splits blocks.

use super::{FrameHead, StreamId, flags, require_stream};
use crate::h2::error::H2Error;

/// A CONTINUATION frame. That it follows a HEADERS or PUSH_PROMISE on the same stream
/// without END_HEADERS is for the connection to check (§6.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Continuation<'a> {
    /// The stream of the field block.
    pub stream_id: StreamId,
    /// END_HEADERS: the field block ends here.
    pub end_headers: bool,
    /// The next field block fragment.
    pub fragment: &'a [u8],
}

impl<'a> Continuation<'a> {
    /// Decodes a CONTINUATION payload: stream 0 is a connection PROTOCOL_ERROR (§6.10).
    pub fn decode(head: &FrameHead, payload: &'a [u8]) -> Result<Self, H2Error> {
        require_stream(head)?;
        Ok(Continuation {
            stream_id: head.stream_id,
            end_headers: head.has(flags::END_HEADERS),
            fragment: payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn decodes() {
        let buf = [0, 0, 2, 0x9, 0x4, 0, 0, 0, 1, 0x82, 0x84];
        let cont = Continuation {
            stream_id: StreamId::new(1),
            end_headers: true,
            fragment: &[0x82, 0x84],
        };
        assert_eq!(parse(&buf), Ok(Frame::Continuation(cont)));
        // PADDED is not defined for CONTINUATION: the octet is fragment, not padding.
        let buf = [0, 0, 1, 0x9, 0x8, 0, 0, 0, 1, 0x05];
        let cont = Continuation {
            stream_id: StreamId::new(1),
            end_headers: false,
            fragment: &[5],
        };
        assert_eq!(parse(&buf), Ok(Frame::Continuation(cont)));
        let buf = [0, 0, 0, 0x9, 0, 0, 0, 0, 3];
        let cont = Continuation {
            stream_id: StreamId::new(3),
            end_headers: false,
            fragment: &[],
        };
        assert_eq!(parse(&buf), Ok(Frame::Continuation(cont)));
    }

    #[test]
    fn stream_zero_is_a_connection_protocol_error() {
        let buf = [0, 0, 1, 0x9, 0x4, 0, 0, 0, 0, 0x82];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }
}
