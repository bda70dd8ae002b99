//! SETTINGS (RFC 9113 §6.5): connection parameters, and their acknowledgement.

use super::{FrameHead, FrameType, StreamId, flags, require_connection};
use crate::h2::error::{ErrorCode, H2Error};

/// SETTINGS_HEADER_TABLE_SIZE before the peer says otherwise (§6.5.2).
pub const DEFAULT_HEADER_TABLE_SIZE: u32 = 4096;
/// SETTINGS_INITIAL_WINDOW_SIZE before the peer says otherwise (§6.5.2).
pub const DEFAULT_INITIAL_WINDOW_SIZE: u32 = 65_535;
/// SETTINGS_MAX_FRAME_SIZE before the peer says otherwise, and its smallest legal value.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest legal SETTINGS_MAX_FRAME_SIZE, 2^24-1.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest flow-control window, 2^31-1 (§6.9.1).
pub const MAX_WINDOW_SIZE: u32 = (1 << 31) - 1;

/// Octets per parameter: a 16-bit identifier and a 32-bit value.
const PARAM_LEN: usize = 6;

/// A defined SETTINGS parameter (§6.5.2) with a value already checked against its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// SETTINGS_HEADER_TABLE_SIZE (0x1): the most HPACK table the receiver's encoder may use.
    HeaderTableSize(u32),
    /// SETTINGS_ENABLE_PUSH (0x2).
    EnablePush(bool),
    /// SETTINGS_MAX_CONCURRENT_STREAMS (0x3).
    MaxConcurrentStreams(u32),
    /// SETTINGS_INITIAL_WINDOW_SIZE (0x4), at most 2^31-1.
    InitialWindowSize(u32),
    /// SETTINGS_MAX_FRAME_SIZE (0x5), 2^14..=2^24-1.
    MaxFrameSize(u32),
    /// SETTINGS_MAX_HEADER_LIST_SIZE (0x6), advisory.
    MaxHeaderListSize(u32),
}

impl Setting {
    /// Checks a received parameter; `Ok(None)` for identifiers we do not know, which must be
    /// ignored. Out-of-range values are connection errors: FLOW_CONTROL_ERROR for the
    /// window, PROTOCOL_ERROR otherwise.
    pub fn from_wire(id: u16, value: u32) -> Result<Option<Self>, H2Error> {
        let protocol_error = H2Error::Connection(ErrorCode::ProtocolError);
        Ok(Some(match id {
            0x1 => Setting::HeaderTableSize(value),
            0x2 => Setting::EnablePush(match value {
                0 => false,
                1 => true,
                _ => return Err(protocol_error),
            }),
            0x3 => Setting::MaxConcurrentStreams(value),
            0x4 if value > MAX_WINDOW_SIZE => {
                return Err(H2Error::Connection(ErrorCode::FlowControlError));
            }
            0x4 => Setting::InitialWindowSize(value),
            0x5 if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) => {
                return Err(protocol_error);
            }
            0x5 => Setting::MaxFrameSize(value),
            0x6 => Setting::MaxHeaderListSize(value),
            _ => return Ok(None),
        }))
    }

    /// The identifier and value as sent.
    pub fn to_wire(self) -> (u16, u32) {
        match self {
            Setting::HeaderTableSize(v) => (0x1, v),
            Setting::EnablePush(v) => (0x2, u32::from(v)),
            Setting::MaxConcurrentStreams(v) => (0x3, v),
            Setting::InitialWindowSize(v) => (0x4, v),
            Setting::MaxFrameSize(v) => (0x5, v),
            Setting::MaxHeaderListSize(v) => (0x6, v),
        }
    }
}

/// A SETTINGS frame; its parameters were all validated when it was decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings<'a> {
    /// ACK: the peer acknowledges our SETTINGS; carries no parameters.
    pub ack: bool,
    params: &'a [u8],
}

impl<'a> Settings<'a> {
    /// Decodes a SETTINGS payload: a stream other than 0 is a connection PROTOCOL_ERROR; a
    /// length not a multiple of 6, or any payload on an ACK, a connection FRAME_SIZE_ERROR;
    /// values are checked as [`Setting::from_wire`] says.
    pub fn decode(head: &FrameHead, payload: &'a [u8]) -> Result<Self, H2Error> {
        require_connection(head)?;
        let ack = head.has(flags::ACK);
        if (ack && !payload.is_empty()) || !payload.len().is_multiple_of(PARAM_LEN) {
            return Err(H2Error::Connection(ErrorCode::FrameSizeError));
        }
        for (id, value) in wire_params(payload) {
            Setting::from_wire(id, value)?;
        }
        Ok(Settings {
            ack,
            params: payload,
        })
    }

    /// The defined parameters in the order sent, unknown ones skipped. A parameter may
    /// repeat; the last one wins (§6.5.3), which applying them in order achieves.
    pub fn iter(&self) -> impl Iterator<Item = Setting> + 'a {
        wire_params(self.params).filter_map(|(id, value)| Setting::from_wire(id, value).ok()?)
    }
}

/// The raw (identifier, value) pairs of a payload whose length is a multiple of 6.
fn wire_params(payload: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    payload.chunks_exact(PARAM_LEN).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
        )
    })
}

/// Appends a SETTINGS frame carrying `settings`.
pub fn encode_settings(buf: &mut Vec<u8>, settings: &[Setting]) {
    let len = settings.len() * PARAM_LEN;
    FrameHead::new(FrameType::Settings, 0, StreamId::CONNECTION, len).encode(buf);
    for setting in settings {
        let (id, value) = setting.to_wire();
        buf.extend_from_slice(&id.to_be_bytes());
        buf.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends the empty SETTINGS frame with ACK that acknowledges the peer's.
pub fn encode_settings_ack(buf: &mut Vec<u8>) {
    FrameHead::new(FrameType::Settings, flags::ACK, StreamId::CONNECTION, 0).encode(buf);
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::super::test_util::*;
    use super::*;

    fn settings(buf: &[u8]) -> Result<Vec<Setting>, H2Error> {
        match parse(buf)? {
            Frame::Settings(s) => {
                assert!(!s.ack);
                Ok(s.iter().collect())
            }
            other => panic!("{other:?}"),
        }
    }

    const PROTOCOL: Result<Vec<Setting>, H2Error> =
        Err(H2Error::Connection(ErrorCode::ProtocolError));

    /// A SETTINGS frame with one parameter.
    fn one(id: u16, value: u32) -> Vec<u8> {
        let mut payload = id.to_be_bytes().to_vec();
        payload.extend_from_slice(&value.to_be_bytes());
        wire(0x4, 0, 0, &payload)
    }

    #[test]
    fn decodes_every_defined_parameter() {
        #[rustfmt::skip]
        let buf = [
            0, 0, 36, 0x4, 0, 0, 0, 0, 0,
            0, 1, 0, 0, 0x10, 0,
            0, 2, 0, 0, 0, 0,
            0, 3, 0, 0, 0, 100,
            0, 4, 0x7f, 0xff, 0xff, 0xff,
            0, 5, 0, 0xff, 0xff, 0xff,
            0, 6, 0, 0, 0x40, 0,
        ];
        assert_eq!(
            settings(&buf),
            Ok(vec![
                Setting::HeaderTableSize(4096),
                Setting::EnablePush(false),
                Setting::MaxConcurrentStreams(100),
                Setting::InitialWindowSize(MAX_WINDOW_SIZE),
                Setting::MaxFrameSize(MAX_MAX_FRAME_SIZE),
                Setting::MaxHeaderListSize(16_384),
            ])
        );
    }

    #[test]
    fn empty_and_ack() {
        assert_eq!(settings(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]), Ok(vec![]));
        let Ok(Frame::Settings(s)) = parse(&[0, 0, 0, 0x4, 0x1, 0, 0, 0, 0]) else {
            panic!()
        };
        assert!(s.ack);
        assert_eq!(s.iter().count(), 0);
    }

    #[test]
    fn unknown_parameters_are_ignored_and_repeats_kept_in_order() {
        #[rustfmt::skip]
        let buf = [
            0, 0, 18, 0x4, 0, 0, 0, 0, 0,
            0, 3, 0, 0, 0, 1,
            0xab, 0xcd, 0xff, 0xff, 0xff, 0xff,
            0, 3, 0, 0, 0, 2,
        ];
        assert_eq!(
            settings(&buf),
            Ok(vec![
                Setting::MaxConcurrentStreams(1),
                Setting::MaxConcurrentStreams(2)
            ])
        );
    }

    #[test]
    fn on_a_stream_is_a_connection_protocol_error() {
        let buf = [0, 0, 0, 0x4, 0, 0, 0, 0, 1];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn length_not_a_multiple_of_6_is_a_connection_frame_size_error() {
        for len in [1u8, 5, 7, 11] {
            let mut buf = vec![0, 0, len, 0x4, 0, 0, 0, 0, 0];
            buf.resize(9 + usize::from(len), 0);
            assert_eq!(parse(&buf), CONN_FRAME_SIZE, "len {len}");
        }
    }

    #[test]
    fn ack_with_payload_is_a_connection_frame_size_error() {
        let buf = [0, 0, 6, 0x4, 0x1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1];
        assert_eq!(parse(&buf), CONN_FRAME_SIZE);
    }

    #[test]
    fn enable_push_must_be_0_or_1() {
        assert_eq!(settings(&one(0x2, 1)), Ok(vec![Setting::EnablePush(true)]));
        assert_eq!(settings(&one(0x2, 2)), PROTOCOL);
    }

    #[test]
    fn initial_window_size_above_2_31_minus_1_is_a_flow_control_error() {
        assert_eq!(
            settings(&one(0x4, MAX_WINDOW_SIZE + 1)),
            Err(H2Error::Connection(ErrorCode::FlowControlError))
        );
        assert_eq!(
            settings(&one(0x4, 0)),
            Ok(vec![Setting::InitialWindowSize(0)])
        );
    }

    #[test]
    fn max_frame_size_out_of_range_is_a_protocol_error() {
        assert_eq!(settings(&one(0x5, 16_383)), PROTOCOL);
        assert_eq!(settings(&one(0x5, MAX_MAX_FRAME_SIZE + 1)), PROTOCOL);
        assert_eq!(
            settings(&one(0x5, 16_384)),
            Ok(vec![Setting::MaxFrameSize(16_384)])
        );
    }

    #[test]
    fn a_bad_value_after_good_ones_rejects_the_frame() {
        #[rustfmt::skip]
        let buf = [
            0, 0, 12, 0x4, 0, 0, 0, 0, 0,
            0, 3, 0, 0, 0, 1,
            0, 2, 0, 0, 0, 7,
        ];
        assert_eq!(parse(&buf), CONN_PROTOCOL);
    }

    #[test]
    fn encodes_settings_and_ack() {
        let mut buf = Vec::new();
        encode_settings(
            &mut buf,
            &[
                Setting::MaxConcurrentStreams(100),
                Setting::EnablePush(false),
                Setting::InitialWindowSize(1 << 20),
            ],
        );
        encode_settings_ack(&mut buf);
        #[rustfmt::skip]
        let expected = [
            0, 0, 18, 0x4, 0, 0, 0, 0, 0,
            0, 3, 0, 0, 0, 100,
            0, 2, 0, 0, 0, 0,
            0, 4, 0, 0x10, 0, 0,
            0, 0, 0, 0x4, 0x1, 0, 0, 0, 0,
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn every_setting_round_trips() {
        let all = [
            Setting::HeaderTableSize(0),
            Setting::EnablePush(true),
            Setting::MaxConcurrentStreams(u32::MAX),
            Setting::InitialWindowSize(MAX_WINDOW_SIZE),
            Setting::MaxFrameSize(DEFAULT_MAX_FRAME_SIZE),
            Setting::MaxHeaderListSize(1),
        ];
        let mut buf = Vec::new();
        encode_settings(&mut buf, &all);
        assert_eq!(settings(&buf), Ok(all.to_vec()));
    }
}
