//! PRIORITY (RFC 9113 §6.3). The scheme is deprecated (§5.3.2) but the frame must still be
//! parsed and checked; we never send it.

use super::{FrameHead, StreamId, be_u32, require_stream};
use crate::h2::error::{ErrorCode, H2Error};

/// The dependency fields shared by PRIORITY and HEADERS with the PRIORITY flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrioritySpec {
    /// E: the dependency is exclusive.
    pub exclusive: bool,
    /// The stream depended on.
    pub dependency: StreamId,
    /// Weight minus one, as on the wire.
    pub weight: u8,
}

impl PrioritySpec {
    /// Octets the fields take.
    pub(super) const SIZE: usize = 5;

    /// Reads the fields from the first 5 octets of `b`.
    pub(super) fn decode(b: &[u8]) -> Self {
        let raw = be_u32(b);
        PrioritySpec {
            exclusive: raw & 0x8000_0000 != 0,
            dependency: StreamId::new(raw),
            weight: b[4],
        }
    }

    /// A stream cannot depend on itself: a stream PROTOCOL_ERROR (RFC 7540 §5.3.1,
    /// still checked by RFC 9113 peers and conformance suites).
    pub(super) fn check(&self, stream_id: StreamId) -> Result<(), H2Error> {
        if self.dependency == stream_id {
            return Err(H2Error::Stream(stream_id, ErrorCode::ProtocolError));
        }
        Ok(())
    }
}

/// A PRIORITY frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    /// The stream being prioritised.
    pub stream_id: StreamId,
    /// Its dependency.
    pub spec: PrioritySpec,
}

impl Priority {
    /// Decodes a PRIORITY payload: stream 0 is a connection PROTOCOL_ERROR, a length other
    /// than 5 a stream FRAME_SIZE_ERROR (§6.3), self-dependency a stream PROTOCOL_ERROR.
    pub fn decode(head: &FrameHead, payload: &[u8]) -> Result<Self, H2Error> {
        require_stream(head)?;
        if payload.len() != PrioritySpec::SIZE {
            return Err(H2Error::Stream(head.stream_id, ErrorCode::FrameSizeError));
        }
        let spec = PrioritySpec::decode(payload);
        spec.check(head.stream_id)?;
        Ok(Priority {
            stream_id: head.stream_id,
            spec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn decodes_fields() {
        let buf = [0, 0, 5, 0x2, 0xff, 0, 0, 0, 3, 0x80, 0, 0, 1, 15];
        let spec = PrioritySpec {
            exclusive: true,
            dependency: StreamId::new(1),
            weight: 15,
        };
        assert_eq!(
            parse(&buf),
            Ok(Frame::Priority(Priority {
                stream_id: StreamId::new(3),
                spec
            }))
        );
        let buf = [0, 0, 5, 0x2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 255];
        let spec = PrioritySpec {
            exclusive: false,
            dependency: StreamId::CONNECTION,
            weight: 255,
        };
        assert_eq!(
            parse(&buf),
            Ok(Frame::Priority(Priority {
                stream_id: StreamId::new(3),
                spec
            }))
        );
    }

    #[test]
    fn allowed_on_any_stream_even_idle_ones() {
        let buf = [0, 0, 5, 0x2, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 9, 0];
        assert!(matches!(parse(&buf), Ok(Frame::Priority(p)) if p.stream_id == StreamId::MAX));
    }

    #[test]
    fn stream_zero_is_a_connection_protocol_error() {
        let buf = [0, 0, 5, 0x2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 15];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn wrong_length_is_a_stream_frame_size_error() {
        let stream_err = Err(H2Error::Stream(StreamId::new(1), ErrorCode::FrameSizeError));
        let buf = [0, 0, 4, 0x2, 0, 0, 0, 0, 1, 0, 0, 0, 3];
        assert_eq!(parse(&buf), stream_err);
        let buf = [0, 0, 6, 0x2, 0, 0, 0, 0, 1, 0, 0, 0, 3, 1, 2];
        assert_eq!(parse(&buf), stream_err);
        let buf = [0, 0, 0, 0x2, 0, 0, 0, 0, 1];
        assert_eq!(parse(&buf), stream_err);
    }

    #[test]
    fn self_dependency_is_a_stream_protocol_error() {
        let buf = [0, 0, 5, 0x2, 0, 0, 0, 0, 7, 0x80, 0, 0, 7, 1];
        assert_eq!(
            parse(&buf),
            Err(H2Error::Stream(StreamId::new(7), ErrorCode::ProtocolError))
        );
    }
}
