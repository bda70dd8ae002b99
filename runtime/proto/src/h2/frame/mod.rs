//! HTTP/2 frames (RFC 9113 §4, §6).
//!
//! Decoding is zero-copy: a frame is a view borrowing the input, padding stripped and
//! every size and value rule checked, each failure scoped and coded as RFC 9113 says.
//! Encoders append to a caller's buffer and allocate only if it lacks capacity.

mod continuation;
mod data;
mod goaway;
mod head;
mod headers;
mod ping;
mod priority;
mod push_promise;
mod rst_stream;
mod settings;
mod window_update;

pub use continuation::Continuation;
pub use data::{Data, encode_data_head, set_end_stream};
pub use goaway::{GoAway, encode_goaway};
pub use head::{FrameHead, FrameType};
pub use headers::{Headers, encode_headers};
pub use ping::{Ping, encode_ping};
pub use priority::{Priority, PrioritySpec};
pub use push_promise::PushPromise;
pub use rst_stream::{RstStream, encode_rst_stream};
pub use settings::{
    DEFAULT_HEADER_TABLE_SIZE, DEFAULT_INITIAL_WINDOW_SIZE, DEFAULT_MAX_FRAME_SIZE,
    MAX_MAX_FRAME_SIZE, MAX_WINDOW_SIZE, Setting, Settings, encode_settings, encode_settings_ack,
};
pub use window_update::{WindowUpdate, encode_window_update};

use crate::h2::StreamId;
use crate::h2::error::{ErrorCode, H2Error};

/// Frame flags (RFC 9113 §6); each is defined only for some frame types.
pub mod flags {
    /// DATA, HEADERS: the last frame the sender will send on this stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: this frame acknowledges the peer's.
    pub const ACK: u8 = 0x1;
    /// HEADERS, PUSH_PROMISE, CONTINUATION: the field block ends in this frame.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS, PUSH_PROMISE: a Pad Length octet and padding are present.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: the deprecated priority fields are present.
    pub const PRIORITY: u8 = 0x20;
}

/// A frame of a type RFC 9113 does not define: extensions are ignored (§4.1, §5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unknown<'a> {
    /// The raw frame type.
    pub kind: u8,
    /// The raw flags.
    pub flags: u8,
    /// The stream it was sent on.
    pub stream_id: StreamId,
    /// The opaque payload.
    pub payload: &'a [u8],
}

/// One decoded frame, borrowing its payload from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// DATA (§6.1).
    Data(Data<'a>),
    /// HEADERS (§6.2).
    Headers(Headers<'a>),
    /// PRIORITY (§6.3).
    Priority(Priority),
    /// RST_STREAM (§6.4).
    RstStream(RstStream),
    /// SETTINGS (§6.5).
    Settings(Settings<'a>),
    /// PUSH_PROMISE (§6.6).
    PushPromise(PushPromise<'a>),
    /// PING (§6.7).
    Ping(Ping),
    /// GOAWAY (§6.8).
    GoAway(GoAway<'a>),
    /// WINDOW_UPDATE (§6.9).
    WindowUpdate(WindowUpdate),
    /// CONTINUATION (§6.10).
    Continuation(Continuation<'a>),
    /// An extension frame, to be ignored (§5.5).
    Unknown(Unknown<'a>),
}

impl<'a> Frame<'a> {
    /// Decodes the frame `head` describes; `payload` must be exactly its `head.len` octets.
    pub fn decode(head: &FrameHead, payload: &'a [u8]) -> Result<Self, H2Error> {
        debug_assert_eq!(
            payload.len(),
            head.len as usize,
            "payload must match the header"
        );
        let Some(kind) = head.frame_type() else {
            return Ok(Frame::Unknown(Unknown {
                kind: head.kind,
                flags: head.flags,
                stream_id: head.stream_id,
                payload,
            }));
        };
        Ok(match kind {
            FrameType::Data => Frame::Data(Data::decode(head, payload)?),
            FrameType::Headers => Frame::Headers(Headers::decode(head, payload)?),
            FrameType::Priority => Frame::Priority(Priority::decode(head, payload)?),
            FrameType::RstStream => Frame::RstStream(RstStream::decode(head, payload)?),
            FrameType::Settings => Frame::Settings(Settings::decode(head, payload)?),
            FrameType::PushPromise => Frame::PushPromise(PushPromise::decode(head, payload)?),
            FrameType::Ping => Frame::Ping(Ping::decode(head, payload)?),
            FrameType::GoAway => Frame::GoAway(GoAway::decode(head, payload)?),
            FrameType::WindowUpdate => Frame::WindowUpdate(WindowUpdate::decode(head, payload)?),
            FrameType::Continuation => Frame::Continuation(Continuation::decode(head, payload)?),
        })
    }

    /// Decodes the first frame of `buf` with the octets it used, or `Ok(None)` until all of
    /// it has arrived. An oversized frame fails as soon as its header is in (§4.2).
    #[cfg(any(test, feature = "internals"))]
    pub fn parse(buf: &'a [u8], max_frame_size: u32) -> Result<Option<(Self, usize)>, H2Error> {
        let Some(head) = FrameHead::decode(buf) else {
            return Ok(None);
        };
        head.check_len(max_frame_size)?;
        let end = FrameHead::SIZE + head.len as usize;
        let Some(payload) = buf.get(FrameHead::SIZE..end) else {
            return Ok(None);
        };
        Ok(Some((Self::decode(&head, payload)?, end)))
    }
}

/// A big-endian u32 from the first 4 octets; callers have checked the length.
fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The frames that must name a stream reject stream 0 as a connection PROTOCOL_ERROR.
fn require_stream(head: &FrameHead) -> Result<(), H2Error> {
    if head.stream_id.is_connection() {
        return Err(H2Error::Connection(ErrorCode::ProtocolError));
    }
    Ok(())
}

/// The connection-wide frames reject any stream but 0 as a connection PROTOCOL_ERROR.
fn require_connection(head: &FrameHead) -> Result<(), H2Error> {
    if !head.stream_id.is_connection() {
        return Err(H2Error::Connection(ErrorCode::ProtocolError));
    }
    Ok(())
}

/// Removes the Pad Length octet and the padding of a DATA, HEADERS or PUSH_PROMISE payload
/// (§6.1, §6.2, §6.6) when PADDED is set. `fixed` is how many mandatory octets follow the
/// Pad Length octet (priority fields, promised stream id); they stay in the result.
///
/// Too short to hold those octets: FRAME_SIZE_ERROR (§4.2). Padding longer than what is left
/// after them: PROTOCOL_ERROR. Both are connection errors: a field block frame cannot be
/// skipped without desynchronising HPACK, and a DATA frame's whole length counts against
/// the connection window.
fn strip_padding<'a>(
    head: &FrameHead,
    payload: &'a [u8],
    fixed: usize,
) -> Result<&'a [u8], H2Error> {
    let pad_octet = usize::from(head.has(flags::PADDED));
    if payload.len() < pad_octet + fixed {
        return Err(H2Error::Connection(ErrorCode::FrameSizeError));
    }
    if pad_octet == 0 {
        return Ok(payload);
    }
    let pad = usize::from(payload[0]);
    let body = &payload[1..];
    if pad > body.len() - fixed {
        return Err(H2Error::Connection(ErrorCode::ProtocolError));
    }
    Ok(&body[..body.len() - pad])
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    /// A frame from its header fields and payload, as a peer would send it.
    pub fn wire(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        let len = (payload.len() as u32).to_be_bytes();
        buf.extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
        buf.extend_from_slice(&stream.to_be_bytes());
        buf.extend_from_slice(payload);
        buf
    }

    /// Parses one whole frame under the default max frame size, checking it used all of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Frame<'_>, H2Error> {
        Frame::parse(buf, DEFAULT_MAX_FRAME_SIZE).map(|parsed| {
            let (frame, used) = parsed.expect("a whole frame");
            assert_eq!(used, buf.len());
            frame
        })
    }

    pub const CONN_PROTOCOL: Result<Frame<'static>, H2Error> =
        Err(H2Error::Connection(ErrorCode::ProtocolError));
    pub const CONN_FRAME_SIZE: Result<Frame<'static>, H2Error> =
        Err(H2Error::Connection(ErrorCode::FrameSizeError));
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;

    #[test]
    fn waits_for_a_whole_frame() {
        let buf = wire(0x6, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
        for cut in 0..buf.len() {
            assert_eq!(
                Frame::parse(&buf[..cut], DEFAULT_MAX_FRAME_SIZE),
                Ok(None),
                "cut {cut}"
            );
        }
        let (frame, used) = Frame::parse(&buf, DEFAULT_MAX_FRAME_SIZE).unwrap().unwrap();
        assert_eq!(used, 17);
        assert_eq!(
            frame,
            Frame::Ping(Ping {
                ack: false,
                payload: [1, 2, 3, 4, 5, 6, 7, 8]
            })
        );
    }

    #[test]
    fn consumes_one_frame_of_many() {
        let mut buf = wire(0x8, 0, 1, &[0, 0, 0, 9]);
        buf.extend_from_slice(&wire(0x6, 1, 0, &[0; 8]));
        let (first, used) = Frame::parse(&buf, DEFAULT_MAX_FRAME_SIZE).unwrap().unwrap();
        assert_eq!(used, 13);
        assert_eq!(
            first,
            Frame::WindowUpdate(WindowUpdate {
                stream_id: StreamId::new(1),
                increment: 9
            })
        );
        let (second, used) = Frame::parse(&buf[13..], DEFAULT_MAX_FRAME_SIZE)
            .unwrap()
            .unwrap();
        assert_eq!(used, 17);
        assert_eq!(
            second,
            Frame::Ping(Ping {
                ack: true,
                payload: [0; 8]
            })
        );
    }

    #[test]
    fn oversized_frame_fails_before_its_payload_arrives() {
        let mut buf = wire(0x0, 0, 1, &[]);
        buf[..3].copy_from_slice(&[0x00, 0x40, 0x01]); // 16385 octets announced
        assert_eq!(
            Frame::parse(&buf, DEFAULT_MAX_FRAME_SIZE),
            Err(H2Error::Connection(ErrorCode::FrameSizeError))
        );
        assert_eq!(Frame::parse(&buf, 16_385), Ok(None));
    }

    #[test]
    fn exactly_max_frame_size_is_accepted() {
        let payload = vec![7u8; DEFAULT_MAX_FRAME_SIZE as usize];
        let buf = wire(0x0, 0, 1, &payload);
        let Frame::Data(data) = parse(&buf).unwrap() else {
            panic!()
        };
        assert_eq!(data.payload.len(), 16_384);
    }

    #[test]
    fn unknown_types_decode_as_ignorable_frames() {
        let buf = wire(0xfa, 0xff, 0x8000_0005, b"ext");
        assert_eq!(
            parse(&buf),
            Ok(Frame::Unknown(Unknown {
                kind: 0xfa,
                flags: 0xff,
                stream_id: StreamId::new(5),
                payload: b"ext"
            }))
        );
        // Even on stream 0 and empty: nothing is defined about them, so nothing is wrong.
        let buf = wire(0x0a, 0, 0, &[]);
        assert!(matches!(
            parse(&buf),
            Ok(Frame::Unknown(Unknown { kind: 0x0a, .. }))
        ));
    }

    #[test]
    fn padding_helper_bounds() {
        let head = |flags| FrameHead {
            len: 0,
            kind: 0,
            flags,
            stream_id: StreamId::new(1),
        };
        let padded = head(flags::PADDED);
        // Not padded: untouched, but the fixed octets must be there.
        assert_eq!(strip_padding(&head(0), b"abc", 3), Ok(&b"abc"[..]));
        assert_eq!(
            strip_padding(&head(0), b"ab", 3),
            Err(H2Error::Connection(ErrorCode::FrameSizeError))
        );
        // Padded: the pad octet plus the fixed octets are the minimum.
        assert_eq!(
            strip_padding(&padded, &[0, 1], 2),
            Err(H2Error::Connection(ErrorCode::FrameSizeError))
        );
        assert_eq!(strip_padding(&padded, &[0, 1, 2], 2), Ok(&[1, 2][..]));
        // Padding may use everything after the fixed octets, but no more.
        assert_eq!(strip_padding(&padded, &[2, 1, 2, 0, 0], 2), Ok(&[1, 2][..]));
        assert_eq!(
            strip_padding(&padded, &[3, 1, 2, 0, 0], 2),
            Err(H2Error::Connection(ErrorCode::ProtocolError))
        );
    }
}
