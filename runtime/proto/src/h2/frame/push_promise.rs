//! PUSH_PROMISE (RFC 9113 §6.6). A server never accepts one (§8.4: a connection
//! PROTOCOL_ERROR, for the connection to raise); it is decoded so the rule can be checked
//! after its field block is consumed, and so test clients can read it. We never send it.

use super::{FrameHead, StreamId, be_u32, flags, require_stream, strip_padding};
use crate::h2::error::H2Error;

/// A PUSH_PROMISE frame, padding removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PushPromise<'a> {
    /// The stream the promise is associated with.
    pub stream_id: StreamId,
    /// The stream the pushed response will use.
    pub promised_stream_id: StreamId,
    /// END_HEADERS: the field block is complete.
    pub end_headers: bool,
    /// The field block fragment.
    pub fragment: &'a [u8],
}

impl<'a> PushPromise<'a> {
    /// Decodes a PUSH_PROMISE payload: stream 0 is a connection PROTOCOL_ERROR (§6.6); size
    /// and padding errors are connection errors (field block, §4.2).
    pub fn decode(head: &FrameHead, payload: &'a [u8]) -> Result<Self, H2Error> {
        require_stream(head)?;
        let body = strip_padding(head, payload, 4)?;
        Ok(PushPromise {
            stream_id: head.stream_id,
            promised_stream_id: StreamId::new(be_u32(body)),
            end_headers: head.has(flags::END_HEADERS),
            fragment: &body[4..],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    fn promise(stream: u32, promised: u32, end_headers: bool, fragment: &[u8]) -> Frame<'_> {
        Frame::PushPromise(PushPromise {
            stream_id: StreamId::new(stream),
            promised_stream_id: StreamId::new(promised),
            end_headers,
            fragment,
        })
    }

    #[test]
    fn decodes() {
        let buf = [0, 0, 6, 0x5, 0x4, 0, 0, 0, 1, 0x80, 0, 0, 2, 0x82, 0x84];
        assert_eq!(parse(&buf), Ok(promise(1, 2, true, &[0x82, 0x84])));
    }

    #[test]
    fn padded() {
        let buf = [0, 0, 8, 0x5, 0x8, 0, 0, 0, 1, 2, 0, 0, 0, 4, 0x82, 0, 0];
        assert_eq!(parse(&buf), Ok(promise(1, 4, false, &[0x82])));
    }

    #[test]
    fn padding_past_the_fragment_is_a_connection_protocol_error() {
        let buf = [0, 0, 7, 0x5, 0x8, 0, 0, 0, 1, 3, 0, 0, 0, 4, 0x82, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn too_short_is_a_connection_frame_size_error() {
        let buf = [0, 0, 3, 0x5, 0x4, 0, 0, 0, 1, 0, 0, 2];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
        let buf = [0, 0, 4, 0x5, 0xc, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn stream_zero_is_a_connection_protocol_error() {
        let buf = [0, 0, 4, 0x5, 0x4, 0, 0, 0, 0, 0, 0, 0, 2];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }
}
