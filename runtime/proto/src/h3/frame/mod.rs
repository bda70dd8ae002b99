//! HTTP/3 frames (RFC 9114 §7): a type and a length as varints, then the payload.
//!
//! [`FrameHead::decode`] and [`Frame::parse`] decode without copying; [`FrameReader`] feeds
//! them a stream's octets as they arrive. Encoders append to the caller's buffer; DATA gets
//! only its head, so a body can follow in a vectored write.

mod reader;
mod settings;

pub use reader::{FrameReader, Item};
pub use settings::{Setting, Settings, encode_settings};

use super::error::{ErrorCode, H3Error};
use super::varint;

/// A frame's type (§7.2, §11.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameType {
    /// DATA (0x00).
    Data,
    /// HEADERS (0x01).
    Headers,
    /// CANCEL_PUSH (0x03).
    CancelPush,
    /// SETTINGS (0x04).
    Settings,
    /// PUSH_PROMISE (0x05).
    PushPromise,
    /// GOAWAY (0x07).
    Goaway,
    /// MAX_PUSH_ID (0x0d).
    MaxPushId,
    /// An HTTP/2 type with no HTTP/3 counterpart (0x02, 0x06, 0x08, 0x09): receiving one
    /// is a connection H3_FRAME_UNEXPECTED (§7.2.8).
    Http2Only(u64),
    /// A reserved (0x1f * N + 0x21) or unknown type: skipped (§9).
    Unknown(u64),
}

impl FrameType {
    /// The type for a wire value.
    pub fn from_u64(value: u64) -> Self {
        match value {
            0x00 => FrameType::Data,
            0x01 => FrameType::Headers,
            0x03 => FrameType::CancelPush,
            0x04 => FrameType::Settings,
            0x05 => FrameType::PushPromise,
            0x07 => FrameType::Goaway,
            0x0d => FrameType::MaxPushId,
            0x02 | 0x06 | 0x08 | 0x09 => FrameType::Http2Only(value),
            _ => FrameType::Unknown(value),
        }
    }

    /// The wire value.
    pub fn value(self) -> u64 {
        match self {
            FrameType::Data => 0x00,
            FrameType::Headers => 0x01,
            FrameType::CancelPush => 0x03,
            FrameType::Settings => 0x04,
            FrameType::PushPromise => 0x05,
            FrameType::Goaway => 0x07,
            FrameType::MaxPushId => 0x0d,
            FrameType::Http2Only(value) | FrameType::Unknown(value) => value,
        }
    }
}

/// A frame's type and payload length (§7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// The frame type.
    pub ty: FrameType,
    /// The payload length in octets.
    pub len: u64,
}

impl FrameHead {
    /// The longest encoded head: two 8-octet varints.
    pub const MAX_LEN: usize = 16;

    /// Decodes the head at the start of `buf` and the octets it took; `None` if `buf`
    /// ends inside it.
    pub fn decode(buf: &[u8]) -> Option<(FrameHead, usize)> {
        let (ty, ty_len) = varint::decode(buf)?;
        let (len, len_len) = varint::decode(&buf[ty_len..])?;
        let ty = FrameType::from_u64(ty);
        Some((FrameHead { ty, len }, ty_len + len_len))
    }

    /// Appends the head.
    pub fn encode(self, dst: &mut Vec<u8>) {
        varint::encode(self.ty.value(), dst);
        varint::encode(self.len, dst);
    }
}

/// A whole frame, borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// DATA: body octets.
    Data(&'a [u8]),
    /// HEADERS: an encoded field section (QPACK).
    Headers(&'a [u8]),
    /// CANCEL_PUSH: the push id.
    CancelPush(u64),
    /// SETTINGS.
    Settings(Settings<'a>),
    /// PUSH_PROMISE: the push id and the promised request's encoded field section.
    PushPromise {
        /// The push id.
        push_id: u64,
        /// The encoded field section.
        field_section: &'a [u8],
    },
    /// GOAWAY: a stream id (from a server) or push id (from a client).
    Goaway(u64),
    /// MAX_PUSH_ID: the largest push id the client accepts.
    MaxPushId(u64),
    /// A reserved or unknown type, payload ignored.
    Unknown(u64),
}

impl<'a> Frame<'a> {
    /// Decodes one whole frame at the start of `buf` and the octets it took; `Ok(None)` if
    /// `buf` ends inside it.
    #[cfg(any(test, feature = "internals"))]
    pub fn decode(buf: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, H3Error> {
        let Some((head, head_len)) = FrameHead::decode(buf) else {
            return Ok(None);
        };
        let end = usize::try_from(head.len)
            .ok()
            .and_then(|len| head_len.checked_add(len))
            .filter(|&end| end <= buf.len());
        match end {
            Some(end) => Ok(Some((Frame::parse(head.ty, &buf[head_len..end])?, end))),
            None => Ok(None),
        }
    }

    /// Parses the whole payload of a frame of type `ty`.
    pub fn parse(ty: FrameType, payload: &'a [u8]) -> Result<Frame<'a>, H3Error> {
        Ok(match ty {
            FrameType::Data => Frame::Data(payload),
            FrameType::Headers => Frame::Headers(payload),
            FrameType::CancelPush => Frame::CancelPush(single_varint(payload)?),
            FrameType::Settings => Frame::Settings(Settings::parse(payload)?),
            FrameType::PushPromise => {
                let (push_id, used) = varint::decode(payload).ok_or(FRAME_ERROR)?;
                Frame::PushPromise {
                    push_id,
                    field_section: &payload[used..],
                }
            }
            FrameType::Goaway => Frame::Goaway(single_varint(payload)?),
            FrameType::MaxPushId => Frame::MaxPushId(single_varint(payload)?),
            FrameType::Http2Only(_) => {
                return Err(H3Error::Connection(ErrorCode::FrameUnexpected));
            }
            FrameType::Unknown(value) => Frame::Unknown(value),
        })
    }
}

/// A payload that does not match its frame's layout (§7.1).
const FRAME_ERROR: H3Error = H3Error::Connection(ErrorCode::FrameError);

/// The payload of CANCEL_PUSH, GOAWAY and MAX_PUSH_ID: exactly one varint.
fn single_varint(payload: &[u8]) -> Result<u64, H3Error> {
    match varint::decode(payload) {
        Some((value, used)) if used == payload.len() => Ok(value),
        _ => Err(FRAME_ERROR),
    }
}

/// Appends a DATA frame's head for a `len`-octet payload the caller sends next.
pub fn encode_data_head(len: u64, dst: &mut Vec<u8>) {
    FrameHead {
        ty: FrameType::Data,
        len,
    }
    .encode(dst);
}

/// Appends a HEADERS frame carrying `field_section`.
pub fn encode_headers(field_section: &[u8], dst: &mut Vec<u8>) {
    FrameHead {
        ty: FrameType::Headers,
        len: field_section.len() as u64,
    }
    .encode(dst);
    dst.extend_from_slice(field_section);
}

/// Appends a GOAWAY frame carrying `id`.
pub fn encode_goaway(id: u64, dst: &mut Vec<u8>) {
    FrameHead {
        ty: FrameType::Goaway,
        len: varint::encoded_len(id) as u64,
    }
    .encode(dst);
    varint::encode(id, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, H3Error> {
        Frame::decode(buf)
    }

    #[test]
    fn types_map_to_their_wire_values() {
        let known = [
            (0x00, FrameType::Data),
            (0x01, FrameType::Headers),
            (0x03, FrameType::CancelPush),
            (0x04, FrameType::Settings),
            (0x05, FrameType::PushPromise),
            (0x07, FrameType::Goaway),
            (0x0d, FrameType::MaxPushId),
        ];
        for (value, ty) in known {
            assert_eq!(FrameType::from_u64(value), ty);
            assert_eq!(ty.value(), value);
        }
        for value in [0x02, 0x06, 0x08, 0x09] {
            assert_eq!(FrameType::from_u64(value), FrameType::Http2Only(value));
        }
        for n in [0, 1, 1000] {
            let grease = 0x1f * n + 0x21;
            assert_eq!(FrameType::from_u64(grease), FrameType::Unknown(grease));
        }
    }

    #[test]
    fn data_and_headers_borrow_their_payload() {
        let mut buf = Vec::new();
        encode_data_head(3, &mut buf);
        buf.extend_from_slice(b"abc");
        encode_headers(&[0, 0, 0xd1], &mut buf);
        assert_eq!(buf, [0x00, 0x03, b'a', b'b', b'c', 0x01, 0x03, 0, 0, 0xd1]);
        let (frame, used) = decoded(&buf).unwrap().unwrap();
        assert_eq!((frame, used), (Frame::Data(b"abc"), 5));
        let (frame, used) = decoded(&buf[5..]).unwrap().unwrap();
        assert_eq!((frame, used), (Frame::Headers(&[0, 0, 0xd1]), 5));
    }

    #[test]
    fn a_frame_cut_anywhere_needs_more() {
        let mut buf = Vec::new();
        encode_goaway(1 << 20, &mut buf);
        for end in 0..buf.len() {
            assert_eq!(decoded(&buf[..end]), Ok(None), "{end} octets");
        }
        assert_eq!(decoded(&buf), Ok(Some((Frame::Goaway(1 << 20), buf.len()))));
    }

    #[test]
    fn single_varint_frames() {
        assert_eq!(
            decoded(&[0x03, 0x01, 0x05]),
            Ok(Some((Frame::CancelPush(5), 3)))
        );
        assert_eq!(
            decoded(&[0x0d, 0x02, 0x40, 0x40]),
            Ok(Some((Frame::MaxPushId(64), 4)))
        );
        assert_eq!(
            decoded(&[0x07, 0x01, 0x08]),
            Ok(Some((Frame::Goaway(8), 3)))
        );
    }

    #[test]
    fn a_payload_longer_or_shorter_than_its_varint_is_a_frame_error() {
        for ty in [0x03, 0x07, 0x0d] {
            // A trailing octet after the varint.
            assert_eq!(decoded(&[ty, 0x02, 0x05, 0x00]), Err(FRAME_ERROR), "{ty}");
            // A two-octet varint in a one-octet payload.
            assert_eq!(decoded(&[ty, 0x01, 0x40]), Err(FRAME_ERROR), "{ty}");
            // Empty.
            assert_eq!(decoded(&[ty, 0x00]), Err(FRAME_ERROR), "{ty}");
        }
        assert_eq!(decoded(&[0x05, 0x01, 0x40]), Err(FRAME_ERROR));
    }

    #[test]
    fn push_promise_splits_id_and_section() {
        assert_eq!(
            decoded(&[0x05, 0x04, 0x02, 0x00, 0x00, 0xd1]),
            Ok(Some((
                Frame::PushPromise {
                    push_id: 2,
                    field_section: &[0x00, 0x00, 0xd1]
                },
                6
            )))
        );
    }

    #[test]
    fn http2_only_types_are_frame_unexpected() {
        for ty in [0x02, 0x06, 0x08, 0x09] {
            assert_eq!(
                decoded(&[ty, 0x01, 0x00]),
                Err(H3Error::Connection(ErrorCode::FrameUnexpected)),
                "{ty}"
            );
        }
    }

    #[test]
    fn reserved_and_unknown_types_are_skipped_whole() {
        // 0x21 (reserved) with a 3-octet payload, then a two-octet-varint type 0x40.
        assert_eq!(
            decoded(&[0x21, 0x03, 1, 2, 3]),
            Ok(Some((Frame::Unknown(0x21), 5)))
        );
        assert_eq!(
            decoded(&[0x40, 0x40, 0x00]),
            Ok(Some((Frame::Unknown(0x40), 3)))
        );
    }
}
