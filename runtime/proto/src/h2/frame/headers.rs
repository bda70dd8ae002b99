//! HEADERS (RFC 9113 §6.2): opens a stream and carries the first fragment of a field block.

use super::{FrameHead, FrameType, PrioritySpec, StreamId, flags, require_stream, strip_padding};
use crate::h2::error::H2Error;

/// A HEADERS frame, padding removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers<'a> {
    /// The stream.
    pub stream_id: StreamId,
    /// END_STREAM: no DATA follows (trailers, or a request/response without content).
    pub end_stream: bool,
    /// END_HEADERS: the field block is complete; otherwise CONTINUATION frames follow.
    pub end_headers: bool,
    /// The deprecated priority fields, if the PRIORITY flag was set.
    pub priority: Option<PrioritySpec>,
    /// The field block fragment, for the HPACK decoder.
    pub fragment: &'a [u8],
}

impl<'a> Headers<'a> {
    /// Decodes a HEADERS payload: stream 0 is a connection PROTOCOL_ERROR (§6.2); size and
    /// padding errors are connection errors since the frame carries a field block (§4.2).
    pub fn decode(head: &FrameHead, payload: &'a [u8]) -> Result<Self, H2Error> {
        require_stream(head)?;
        let has_priority = head.has(flags::PRIORITY);
        let fixed = if has_priority { PrioritySpec::SIZE } else { 0 };
        let body = strip_padding(head, payload, fixed)?;
        Ok(Headers {
            stream_id: head.stream_id,
            end_stream: head.has(flags::END_STREAM),
            end_headers: head.has(flags::END_HEADERS),
            priority: has_priority.then(|| PrioritySpec::decode(body)),
            fragment: &body[fixed..],
        })
    }

    /// A stream error this frame carries, to act on only after its field block has been
    /// decoded (HPACK is connection state): today only a self-dependent priority, a stream
    /// PROTOCOL_ERROR.
    pub fn stream_error(&self) -> Option<H2Error> {
        self.priority?.check(self.stream_id).err()
    }
}

/// Appends `block` as one HEADERS frame, split into HEADERS + CONTINUATION frames of at most
/// `max_frame_size` octets (the peer's SETTINGS_MAX_FRAME_SIZE) when it does not fit.
pub fn encode_headers(
    buf: &mut Vec<u8>,
    stream_id: StreamId,
    block: &[u8],
    end_stream: bool,
    max_frame_size: u32,
) {
    debug_assert!(!stream_id.is_connection(), "HEADERS needs a stream");
    let max = max_frame_size as usize;
    assert!(max > 0, "max frame size must be positive");
    buf.reserve(block.len() + block.len().div_ceil(max).max(1) * FrameHead::SIZE);
    let mut kind = FrameType::Headers;
    let mut frame_flags = if end_stream { flags::END_STREAM } else { 0 };
    let mut rest = block;
    loop {
        let (chunk, tail) = rest.split_at(rest.len().min(max));
        if tail.is_empty() {
            frame_flags |= flags::END_HEADERS;
        }
        FrameHead::new(kind, frame_flags, stream_id, chunk.len()).encode(buf);
        buf.extend_from_slice(chunk);
        if tail.is_empty() {
            return;
        }
        rest = tail;
        kind = FrameType::Continuation;
        frame_flags = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::super::{Continuation, Frame};
    use super::*;
    use crate::h2::error::ErrorCode;

    fn headers(
        stream: u32,
        flags: (bool, bool),
        priority: Option<PrioritySpec>,
        fragment: &[u8],
    ) -> Frame<'_> {
        Frame::Headers(Headers {
            stream_id: StreamId::new(stream),
            end_stream: flags.0,
            end_headers: flags.1,
            priority,
            fragment,
        })
    }

    #[test]
    fn plain() {
        let buf = [0, 0, 3, 0x1, 0x4, 0, 0, 0, 1, 0x82, 0x86, 0x84];
        assert_eq!(
            parse(&buf),
            Ok(headers(1, (false, true), None, &[0x82, 0x86, 0x84]))
        );
        let buf = [0, 0, 1, 0x1, 0x1, 0, 0, 0, 3, 0x88];
        assert_eq!(parse(&buf), Ok(headers(3, (true, false), None, &[0x88])));
    }

    #[test]
    fn padded_and_prioritised() {
        let buf = [
            0, 0, 10, 0x1, 0x2d, 0, 0, 0, 5, // PADDED | PRIORITY | END_HEADERS | END_STREAM
            2, // Pad Length
            0x80, 0, 0, 3, 200, // exclusive on stream 3, weight 200
            0x82, 0x84, // fragment
            0, 0, // padding
        ];
        let spec = PrioritySpec {
            exclusive: true,
            dependency: StreamId::new(3),
            weight: 200,
        };
        assert_eq!(
            parse(&buf),
            Ok(headers(5, (true, true), Some(spec), &[0x82, 0x84]))
        );
        let Ok(Frame::Headers(h)) = parse(&buf) else {
            panic!()
        };
        assert_eq!(h.stream_error(), None);
    }

    #[test]
    fn padding_may_leave_an_empty_fragment() {
        let buf = [0, 0, 8, 0x1, 0x2c, 0, 0, 0, 1, 2, 0, 0, 0, 0, 16, 0, 0];
        let spec = PrioritySpec {
            exclusive: false,
            dependency: StreamId::CONNECTION,
            weight: 16,
        };
        assert_eq!(parse(&buf), Ok(headers(1, (false, true), Some(spec), &[])));
    }

    #[test]
    fn padding_past_the_fragment_is_a_connection_protocol_error() {
        let buf = [0, 0, 3, 0x1, 0xc, 0, 0, 0, 1, 3, 0x82, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
        // With priority fields, padding cannot eat into them either.
        let buf = [0, 0, 7, 0x1, 0x2c, 0, 0, 0, 1, 2, 0, 0, 0, 0, 16, 0];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn too_short_for_its_flags_is_a_connection_frame_size_error() {
        let buf = [0, 0, 0, 0x1, 0xc, 0, 0, 0, 1];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
        let buf = [0, 0, 4, 0x1, 0x24, 0, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
        let buf = [0, 0, 5, 0x1, 0x2c, 0, 0, 0, 1, 0, 0, 0, 0, 0];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn stream_zero_is_a_connection_protocol_error() {
        let buf = [0, 0, 1, 0x1, 0x4, 0, 0, 0, 0, 0x82];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn self_dependency_is_reported_after_the_fragment_is_kept() {
        let buf = [0, 0, 6, 0x1, 0x24, 0, 0, 0, 3, 0, 0, 0, 3, 16, 0x82];
        let Ok(Frame::Headers(h)) = parse(&buf) else {
            panic!()
        };
        assert_eq!(h.fragment, [0x82]);
        assert_eq!(
            h.stream_error(),
            Some(H2Error::Stream(StreamId::new(3), ErrorCode::ProtocolError))
        );
    }

    #[test]
    fn encodes_a_small_block_as_one_frame() {
        let mut buf = Vec::new();
        encode_headers(&mut buf, StreamId::new(1), &[0x88], true, 16_384);
        assert_eq!(buf, [0, 0, 1, 0x1, 0x5, 0, 0, 0, 1, 0x88]);
        buf.clear();
        encode_headers(&mut buf, StreamId::new(3), &[0x88, 0x5f], false, 2);
        assert_eq!(buf, [0, 0, 2, 0x1, 0x4, 0, 0, 0, 3, 0x88, 0x5f]);
    }

    #[test]
    fn encodes_an_empty_block_as_one_frame() {
        let mut buf = Vec::new();
        encode_headers(&mut buf, StreamId::new(7), &[], true, 16_384);
        assert_eq!(buf, [0, 0, 0, 0x1, 0x5, 0, 0, 0, 7]);
    }

    #[test]
    fn splits_into_continuations_at_the_peer_max_frame_size() {
        let mut buf = Vec::new();
        encode_headers(&mut buf, StreamId::new(5), b"abcdefg", true, 3);
        #[rustfmt::skip]
        let expected = [
            0, 0, 3, 0x1, 0x1, 0, 0, 0, 5, b'a', b'b', b'c', // HEADERS, END_STREAM only
            0, 0, 3, 0x9, 0x0, 0, 0, 0, 5, b'd', b'e', b'f', // CONTINUATION
            0, 0, 1, 0x9, 0x4, 0, 0, 0, 5, b'g', // CONTINUATION, END_HEADERS
        ];
        assert_eq!(buf, expected);
        buf.clear();
        encode_headers(&mut buf, StreamId::new(5), b"abcdef", false, 3);
        #[rustfmt::skip]
        let expected = [
            0, 0, 3, 0x1, 0x0, 0, 0, 0, 5, b'a', b'b', b'c',
            0, 0, 3, 0x9, 0x4, 0, 0, 0, 5, b'd', b'e', b'f',
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn split_block_reassembles() {
        let block: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        let mut buf = Vec::new();
        encode_headers(&mut buf, StreamId::new(1), &block, false, 16_384);
        let mut rest = &buf[..];
        let mut assembled = Vec::new();
        let mut frames = 0;
        while let Some((frame, used)) = Frame::parse(rest, 16_384).unwrap() {
            match frame {
                Frame::Headers(h) => {
                    assert!(!h.end_headers && frames == 0);
                    assembled.extend_from_slice(h.fragment);
                }
                Frame::Continuation(Continuation {
                    end_headers,
                    fragment,
                    ..
                }) => {
                    assert_eq!(end_headers, frames == 2);
                    assembled.extend_from_slice(fragment);
                }
                other => panic!("{other:?}"),
            }
            frames += 1;
            rest = &rest[used..];
        }
        assert_eq!((frames, rest.len()), (3, 0));
        assert_eq!(assembled, block);
    }

    #[test]
    fn does_not_allocate_when_capacity_suffices() {
        let mut buf = Vec::with_capacity(3 * 9 + 7);
        let ptr = buf.as_ptr();
        encode_headers(&mut buf, StreamId::new(5), b"abcdefg", true, 3);
        assert_eq!(buf.as_ptr(), ptr);
    }
}
