//! The 9-octet header every frame starts with (RFC 9113 §4.1).

use crate::h2::StreamId;
use crate::h2::error::{ErrorCode, H2Error};

/// A frame type (RFC 9113 §6); other values are extension frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    /// DATA (§6.1).
    Data = 0x0,
    /// HEADERS (§6.2).
    Headers = 0x1,
    /// PRIORITY (§6.3).
    Priority = 0x2,
    /// RST_STREAM (§6.4).
    RstStream = 0x3,
    /// SETTINGS (§6.5).
    Settings = 0x4,
    /// PUSH_PROMISE (§6.6).
    PushPromise = 0x5,
    /// PING (§6.7).
    Ping = 0x6,
    /// GOAWAY (§6.8).
    GoAway = 0x7,
    /// WINDOW_UPDATE (§6.9).
    WindowUpdate = 0x8,
    /// CONTINUATION (§6.10).
    Continuation = 0x9,
}

impl FrameType {
    /// The type for a wire value; `None` for extension types, which are ignored (§5.5).
    pub fn from_u8(value: u8) -> Option<Self> {
        use FrameType::*;
        const ALL: [FrameType; 10] = [
            Data,
            Headers,
            Priority,
            RstStream,
            Settings,
            PushPromise,
            Ping,
            GoAway,
            WindowUpdate,
            Continuation,
        ];
        ALL.get(usize::from(value)).copied()
    }
}

/// The largest payload the 24-bit length field can describe.
pub const MAX_FRAME_LEN: u32 = (1 << 24) - 1;

/// A decoded frame header (RFC 9113 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// Payload length in octets, excluding these 9.
    pub len: u32,
    /// Raw type: see [`FrameHead::frame_type`].
    pub kind: u8,
    /// Raw flags; undefined flags must be ignored (§4.1).
    pub flags: u8,
    /// The stream, reserved bit masked.
    pub stream_id: StreamId,
}

impl FrameHead {
    /// Octets in a frame header.
    pub const SIZE: usize = 9;

    /// A header for `len` payload octets; panics past 2^24-1, which cannot be framed.
    pub fn new(kind: FrameType, flags: u8, stream_id: StreamId, len: usize) -> Self {
        let len = u32::try_from(len)
            .ok()
            .filter(|&l| l <= MAX_FRAME_LEN)
            .expect("frame payload longer than 2^24-1 octets");
        FrameHead {
            len,
            kind: kind as u8,
            flags,
            stream_id,
        }
    }

    /// Reads the header at the start of `buf`; `None` until 9 octets are there.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let b: &[u8; Self::SIZE] = buf.get(..Self::SIZE)?.try_into().ok()?;
        Some(FrameHead {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream_id: StreamId::new(u32::from_be_bytes([b[5], b[6], b[7], b[8]])),
        })
    }

    /// Appends the 9 octets; the reserved bit is sent as 0.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let [_, l0, l1, l2] = self.len.to_be_bytes();
        let [s0, s1, s2, s3] = self.stream_id.get().to_be_bytes();
        buf.extend_from_slice(&[l0, l1, l2, self.kind, self.flags, s0, s1, s2, s3]);
    }

    /// The known frame type, or `None` for an extension frame.
    pub fn frame_type(&self) -> Option<FrameType> {
        FrameType::from_u8(self.kind)
    }

    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Rejects a payload longer than our SETTINGS_MAX_FRAME_SIZE (§4.2) before it is read.
    ///
    /// §4.2 makes this a connection error for frames that carry a field block or touch the
    /// connection, and allows a stream error otherwise; we always close (§5.4.1 permits it),
    /// because a peer that ignores our advertised limit is broken or hostile and skipping up
    /// to 16 MiB to save one of its streams buys nothing.
    pub fn check_len(&self, max_frame_size: u32) -> Result<(), H2Error> {
        if self.len > max_frame_size {
            return Err(H2Error::Connection(ErrorCode::FrameSizeError));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_each_field() {
        let b = [0x01, 0x02, 0x03, 0x08, 0x29, 0x00, 0x00, 0x01, 0x05];
        let head = FrameHead::decode(&b).unwrap();
        assert_eq!(head.len, 0x010203);
        assert_eq!(head.kind, 0x08);
        assert_eq!(head.frame_type(), Some(FrameType::WindowUpdate));
        assert_eq!(head.flags, 0x29);
        assert!(head.has(0x20) && head.has(0x08) && head.has(0x01) && !head.has(0x04));
        assert_eq!(head.stream_id, StreamId::new(0x105));
    }

    #[test]
    fn needs_nine_octets_and_ignores_what_follows() {
        let b = [0, 0, 0, 4, 1, 0, 0, 0, 0, 0xaa];
        assert_eq!(FrameHead::decode(&b[..8]), None);
        assert_eq!(FrameHead::decode(&[]), None);
        let head = FrameHead::decode(&b).unwrap();
        assert_eq!((head.len, head.kind, head.flags), (0, 4, 1));
        assert!(head.stream_id.is_connection());
    }

    #[test]
    fn reserved_bit_is_masked_on_receipt() {
        let b = [0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(FrameHead::decode(&b).unwrap().stream_id, StreamId::MAX);
        let b = [0, 0, 0, 0, 0, 0x80, 0, 0, 0];
        assert_eq!(
            FrameHead::decode(&b).unwrap().stream_id,
            StreamId::CONNECTION
        );
        assert_eq!(StreamId::new(0x8000_0007).get(), 7);
    }

    #[test]
    fn encodes_byte_for_byte() {
        let mut buf = vec![0xee];
        FrameHead::new(
            FrameType::Headers,
            0x05,
            StreamId::new(0x8000_0003),
            0x00ab_cdef,
        )
        .encode(&mut buf);
        assert_eq!(
            buf,
            [0xee, 0xab, 0xcd, 0xef, 0x01, 0x05, 0x00, 0x00, 0x00, 0x03]
        );
    }

    #[test]
    fn largest_length_round_trips() {
        let mut buf = Vec::new();
        let head = FrameHead::new(FrameType::Data, 0, StreamId::MAX, MAX_FRAME_LEN as usize);
        head.encode(&mut buf);
        assert_eq!(buf, [0xff, 0xff, 0xff, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(FrameHead::decode(&buf), Some(head));
    }

    #[test]
    #[should_panic(expected = "2^24-1")]
    fn refuses_to_frame_more_than_24_bits() {
        FrameHead::new(FrameType::Data, 0, StreamId::new(1), 1 << 24);
    }

    #[test]
    fn frame_types_are_the_rfc_values() {
        for value in 0..=9u8 {
            assert_eq!(FrameType::from_u8(value).unwrap() as u8, value);
        }
        assert_eq!(FrameType::from_u8(0x0a), None);
        assert_eq!(FrameType::from_u8(0xff), None);
    }

    #[test]
    fn length_above_our_max_frame_size_is_a_connection_frame_size_error() {
        let head = FrameHead::decode(&[0, 0x40, 0x01, 0, 0, 0, 0, 0, 1]).unwrap();
        assert_eq!(head.check_len(16_385), Ok(()));
        assert_eq!(
            head.check_len(16_384),
            Err(H2Error::Connection(ErrorCode::FrameSizeError))
        );
    }
}
