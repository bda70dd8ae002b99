//! DATA (RFC 9113 §6.1): a piece of a stream's content.

use super::{FrameHead, FrameType, StreamId, flags, require_stream, strip_padding};
use crate::h2::error::H2Error;

/// A DATA frame, padding removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Data<'a> {
    /// The stream the content belongs to.
    pub stream_id: StreamId,
    /// END_STREAM: the sender's last frame on this stream.
    pub end_stream: bool,
    /// The content, without Pad Length octet or padding.
    pub payload: &'a [u8],
    /// The whole payload length, padding included: what counts against flow control (§6.9.1).
    pub flow_len: u32,
}

impl<'a> Data<'a> {
    /// Decodes a DATA payload: stream 0 is a connection PROTOCOL_ERROR (§6.1).
    pub fn decode(head: &FrameHead, payload: &'a [u8]) -> Result<Self, H2Error> {
        require_stream(head)?;
        Ok(Data {
            stream_id: head.stream_id,
            end_stream: head.has(flags::END_STREAM),
            payload: strip_padding(head, payload, 0)?,
            flow_len: head.len,
        })
    }
}

/// Appends the header of an unpadded DATA frame of `len` octets; the caller writes the
/// content after it (or alongside it, vectored).
pub fn encode_data_head(buf: &mut Vec<u8>, stream_id: StreamId, len: usize, end_stream: bool) {
    debug_assert!(!stream_id.is_connection(), "DATA needs a stream");
    let flags = if end_stream { flags::END_STREAM } else { 0 };
    FrameHead::new(FrameType::Data, flags, stream_id, len).encode(buf);
}

/// Sets END_STREAM on the encoded DATA frame at the start of `frame`, flags being the
/// fifth octet of every frame header (§4.1).
pub fn set_end_stream(frame: &mut [u8]) {
    debug_assert_eq!(frame[3], FrameType::Data as u8);
    frame[4] |= flags::END_STREAM;
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    fn data(stream: u32, end_stream: bool, payload: &[u8], flow_len: u32) -> Frame<'_> {
        Frame::Data(Data {
            stream_id: StreamId::new(stream),
            end_stream,
            payload,
            flow_len,
        })
    }

    #[test]
    fn plain() {
        let buf = [0, 0, 5, 0x0, 0x0, 0, 0, 0, 1, b'h', b'e', b'l', b'l', b'o'];
        assert_eq!(parse(&buf), Ok(data(1, false, b"hello", 5)));
    }

    #[test]
    fn end_stream_and_empty() {
        let buf = [0, 0, 0, 0x0, 0x1, 0, 0, 0, 3];
        assert_eq!(parse(&buf), Ok(data(3, true, b"", 0)));
    }

    #[test]
    fn undefined_flags_are_ignored() {
        let buf = [0, 0, 1, 0x0, 0xf6, 0, 0, 0, 3, b'x'];
        assert_eq!(parse(&buf), Ok(data(3, false, b"x", 1)));
    }

    #[test]
    fn padding_is_stripped_but_counts_for_flow_control() {
        let buf = [0, 0, 7, 0x0, 0x9, 0, 0, 0, 1, 3, b'a', b'b', b'c', 0, 0, 0];
        assert_eq!(parse(&buf), Ok(data(1, true, b"abc", 7)));
    }

    #[test]
    fn padding_may_fill_the_rest() {
        let buf = [0, 0, 3, 0x0, 0x8, 0, 0, 0, 1, 2, 0, 0];
        assert_eq!(parse(&buf), Ok(data(1, false, b"", 3)));
        let buf = [0, 0, 1, 0x0, 0x8, 0, 0, 0, 1, 0];
        assert_eq!(parse(&buf), Ok(data(1, false, b"", 1)));
    }

    #[test]
    fn padding_as_long_as_the_payload_is_a_connection_protocol_error() {
        // Pad Length 3 in a 3-octet payload: padding >= payload length (§6.1).
        let buf = [0, 0, 3, 0x0, 0x8, 0, 0, 0, 1, 3, 0, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
        let buf = [0, 0, 1, 0x0, 0x8, 0, 0, 0, 1, 0xff];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn padded_without_a_pad_length_octet_is_a_frame_size_error() {
        let buf = [0, 0, 0, 0x0, 0x8, 0, 0, 0, 1];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn stream_zero_is_a_connection_protocol_error() {
        let buf = [0, 0, 1, 0x0, 0x0, 0, 0, 0, 0, b'x'];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
        let buf = [0, 0, 0, 0x0, 0x0, 0x80, 0, 0, 0]; // only the reserved bit set
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn encodes_the_head_only() {
        let mut buf = Vec::new();
        encode_data_head(&mut buf, StreamId::new(5), 0x1234, false);
        assert_eq!(buf, [0x00, 0x12, 0x34, 0x0, 0x0, 0, 0, 0, 5]);
        buf.clear();
        encode_data_head(&mut buf, StreamId::new(0x0102_0304), 0, true);
        assert_eq!(buf, [0, 0, 0, 0x0, 0x1, 0x01, 0x02, 0x03, 0x04]);
    }

    #[test]
    fn round_trips() {
        let mut buf = Vec::new();
        encode_data_head(&mut buf, StreamId::new(9), 3, true);
        buf.extend_from_slice(b"end");
        assert_eq!(parse(&buf), Ok(data(9, true, b"end", 3)));
    }

    #[test]
    fn end_stream_can_be_set_on_an_encoded_frame() {
        let mut buf = Vec::new();
        encode_data_head(&mut buf, StreamId::new(9), 3, false);
        buf.extend_from_slice(b"end");
        set_end_stream(&mut buf);
        assert_eq!(parse(&buf), Ok(data(9, true, b"end", 3)));
    }

    #[test]
    fn does_not_allocate_when_capacity_suffices() {
        let mut buf = Vec::with_capacity(9);
        let ptr = buf.as_ptr();
        encode_data_head(&mut buf, StreamId::new(1), 10, false);
        assert_eq!(buf.as_ptr(), ptr);
    }
}
