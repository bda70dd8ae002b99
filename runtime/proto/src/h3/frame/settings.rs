//! The SETTINGS frame (RFC 9114 §7.2.4; RFC 9204 §5): (identifier, value) varint pairs.

use super::{FRAME_ERROR, FrameHead, FrameType};
use crate::h3::error::{ErrorCode, H3Error};
use crate::h3::varint;

/// One setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY (0x01): the decoder's dynamic table limit.
    QpackMaxTableCapacity(u64),
    /// SETTINGS_MAX_FIELD_SECTION_SIZE (0x06): the largest field section accepted.
    MaxFieldSectionSize(u64),
    /// SETTINGS_QPACK_BLOCKED_STREAMS (0x07): streams that may wait on the encoder stream.
    QpackBlockedStreams(u64),
    /// Anything else, reserved (grease) ids included: ignored (§7.2.4).
    Unknown {
        /// The identifier.
        id: u64,
        /// The value.
        value: u64,
    },
}

impl Setting {
    fn new(id: u64, value: u64) -> Self {
        match id {
            0x01 => Setting::QpackMaxTableCapacity(value),
            0x06 => Setting::MaxFieldSectionSize(value),
            0x07 => Setting::QpackBlockedStreams(value),
            _ => Setting::Unknown { id, value },
        }
    }

    fn id_and_value(self) -> (u64, u64) {
        match self {
            Setting::QpackMaxTableCapacity(v) => (0x01, v),
            Setting::MaxFieldSectionSize(v) => (0x06, v),
            Setting::QpackBlockedStreams(v) => (0x07, v),
            Setting::Unknown { id, value } => (id, value),
        }
    }
}

/// A validated SETTINGS payload, read in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings<'a> {
    payload: &'a [u8],
}

impl<'a> Settings<'a> {
    /// Checks a payload: whole pairs (else H3_FRAME_ERROR), no identifier HTTP/2 used
    /// and HTTP/3 reserved (0x00, 0x02..=0x05), and no known identifier twice (both
    /// H3_SETTINGS_ERROR, §7.2.4, §7.2.4.1).
    pub fn parse(payload: &'a [u8]) -> Result<Self, H3Error> {
        let settings = Settings { payload };
        let mut seen = 0u8;
        let mut rest = payload;
        while !rest.is_empty() {
            let (id, _, used) = pair(rest).ok_or(FRAME_ERROR)?;
            rest = &rest[used..];
            if matches!(id, 0x00 | 0x02..=0x05) {
                return Err(SETTINGS_ERROR);
            }
            // The ids we act on are 1, 6 and 7: one bit each.
            let bit = match id {
                0x01 | 0x06 | 0x07 => 1u8 << id,
                _ => continue,
            };
            if seen & bit != 0 {
                return Err(SETTINGS_ERROR);
            }
            seen |= bit;
        }
        Ok(settings)
    }

    /// The settings in order.
    pub fn iter(&self) -> impl Iterator<Item = Setting> + 'a {
        let mut rest = self.payload;
        core::iter::from_fn(move || {
            let (id, value, used) = pair(rest)?;
            rest = &rest[used..];
            Some(Setting::new(id, value))
        })
    }
}

const SETTINGS_ERROR: H3Error = H3Error::Connection(ErrorCode::SettingsError);

fn pair(buf: &[u8]) -> Option<(u64, u64, usize)> {
    let (id, id_len) = varint::decode(buf)?;
    let (value, value_len) = varint::decode(&buf[id_len..])?;
    Some((id, value, id_len + value_len))
}

/// Appends a SETTINGS frame.
pub fn encode_settings(settings: &[Setting], dst: &mut Vec<u8>) {
    let len: usize = settings
        .iter()
        .map(|s| {
            let (id, value) = s.id_and_value();
            varint::encoded_len(id) + varint::encoded_len(value)
        })
        .sum();
    FrameHead {
        ty: FrameType::Settings,
        len: len as u64,
    }
    .encode(dst);
    for s in settings {
        let (id, value) = s.id_and_value();
        varint::encode(id, dst);
        varint::encode(value, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::frame::Frame;

    fn parsed(payload: &[u8]) -> Result<Vec<Setting>, H3Error> {
        Settings::parse(payload).map(|s| s.iter().collect())
    }

    #[test]
    fn round_trip_with_grease() {
        let settings = [
            Setting::MaxFieldSectionSize(16_384),
            Setting::QpackMaxTableCapacity(0),
            Setting::QpackBlockedStreams(0),
            Setting::Unknown {
                id: 0x1f * 7 + 0x21,
                value: 77,
            },
        ];
        let mut buf = Vec::new();
        encode_settings(&settings, &mut buf);
        assert_eq!(&buf[..6], [0x04, 0x0d, 0x06, 0x80, 0x00, 0x40]);
        let (frame, used) = Frame::decode(&buf).unwrap().unwrap();
        assert_eq!(used, buf.len());
        let Frame::Settings(parsed) = frame else {
            panic!("{frame:?}")
        };
        assert_eq!(parsed.iter().collect::<Vec<_>>(), settings);
    }

    #[test]
    fn empty_settings_are_valid() {
        assert_eq!(parsed(&[]), Ok(vec![]));
    }

    #[test]
    fn http2_setting_ids_are_settings_errors() {
        for id in [0x00, 0x02, 0x03, 0x04, 0x05] {
            assert_eq!(parsed(&[id, 0x00]), Err(SETTINGS_ERROR), "{id}");
        }
    }

    #[test]
    fn a_known_id_twice_is_a_settings_error() {
        assert_eq!(parsed(&[0x06, 0x01, 0x06, 0x01]), Err(SETTINGS_ERROR));
        assert_eq!(
            parsed(&[0x01, 0x00, 0x07, 0x00, 0x01, 0x00]),
            Err(SETTINGS_ERROR)
        );
        // Unknown ids may repeat: only the ones we act on are checked.
        assert!(parsed(&[0x21, 0x00, 0x21, 0x01]).is_ok());
    }

    #[test]
    fn a_pair_cut_short_is_a_frame_error() {
        assert_eq!(parsed(&[0x06]), Err(FRAME_ERROR));
        assert_eq!(parsed(&[0x06, 0x40]), Err(FRAME_ERROR));
    }
}
