//! The encoded field section prefix (RFC 9204 §4.5.1): Required Insert Count and Base.

use super::{Malformed, read_integer};
use crate::field_coding::integer;

/// A field section's prefix, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SectionPrefix {
    /// The insert count the decoder's table must reach before the section can be decoded.
    pub(super) required_insert_count: u64,
    /// The reference point of relative and post-base indices.
    pub(super) base: u64,
}

impl SectionPrefix {
    /// Decodes the prefix at `*pos` for a decoder whose table holds at most `max_entries`
    /// (our capacity / 32) and has seen `total_inserts` insertions (§4.5.1.1, §4.5.1.2).
    pub(super) fn read(
        buf: &[u8],
        pos: &mut usize,
        max_entries: u64,
        total_inserts: u64,
    ) -> Result<Self, Malformed> {
        let encoded = read_integer(buf, pos, 8)? as u64;
        let required_insert_count = required_insert_count(encoded, max_entries, total_inserts)?;
        let sign = *buf.get(*pos).ok_or(Malformed::Truncated)? & 0x80 != 0;
        let delta = read_integer(buf, pos, 7)? as u64;
        let base = if sign {
            required_insert_count
                .checked_sub(delta + 1)
                .ok_or(Malformed::Base)?
        } else {
            required_insert_count + delta
        };
        Ok(SectionPrefix {
            required_insert_count,
            base,
        })
    }

    /// Appends the prefix of a section that references no dynamic entry: both zero.
    pub(super) fn encode_static_only(dst: &mut Vec<u8>) {
        integer::encode(dst, 0x00, 8, 0);
        integer::encode(dst, 0x00, 7, 0);
    }
}

/// Recovers the Required Insert Count from its encoding modulo 2 * MaxEntries (§4.5.1.1).
fn required_insert_count(
    encoded: u64,
    max_entries: u64,
    total_inserts: u64,
) -> Result<u64, Malformed> {
    if encoded == 0 {
        return Ok(0);
    }
    let full_range = 2 * max_entries;
    if encoded > full_range {
        return Err(Malformed::RequiredInsertCount);
    }
    let max_value = total_inserts + max_entries;
    let max_wrapped = max_value / full_range * full_range;
    let mut count = max_wrapped + encoded - 1;
    if count > max_value {
        if count <= full_range {
            return Err(Malformed::RequiredInsertCount);
        }
        count -= full_range;
    }
    if count == 0 {
        return Err(Malformed::RequiredInsertCount);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(buf: &[u8], max_entries: u64, total_inserts: u64) -> Result<SectionPrefix, Malformed> {
        let mut pos = 0;
        let prefix = SectionPrefix::read(buf, &mut pos, max_entries, total_inserts)?;
        assert_eq!(pos, buf.len());
        Ok(prefix)
    }

    #[test]
    fn static_only_is_two_zero_octets() {
        let mut buf = Vec::new();
        SectionPrefix::encode_static_only(&mut buf);
        assert_eq!(buf, [0x00, 0x00]);
        let prefix = read(&buf, 0, 0).unwrap();
        assert_eq!((prefix.required_insert_count, prefix.base), (0, 0));
    }

    #[test]
    fn rfc_appendix_b_prefixes() {
        // B.2: "0381", Required Insert Count 2, Base 0 (capacity 220: 6 entries).
        let prefix = read(&[0x03, 0x81], 6, 2).unwrap();
        assert_eq!((prefix.required_insert_count, prefix.base), (2, 0));
        // B.4: "0500", Required Insert Count 4, Base 4.
        let prefix = read(&[0x05, 0x00], 6, 4).unwrap();
        assert_eq!((prefix.required_insert_count, prefix.base), (4, 4));
    }

    #[test]
    fn without_a_table_any_nonzero_count_is_refused() {
        assert_eq!(
            read(&[0x01, 0x00], 0, 0),
            Err(Malformed::RequiredInsertCount)
        );
        assert_eq!(
            read(&[0xff, 0x00, 0x00], 0, 0),
            Err(Malformed::RequiredInsertCount)
        );
    }

    #[test]
    fn wrapping_and_its_limits() {
        // MaxEntries 3: FullRange 6. After 10 inserts, encoded 5 means 10 (10 % 6 + 1 = 5).
        assert_eq!(required_insert_count(5, 3, 10), Ok(10));
        assert_eq!(
            required_insert_count(7, 3, 10),
            Err(Malformed::RequiredInsertCount)
        );
        // Encoded 1 with no inserts would be count 0 or 6: neither is reachable.
        assert_eq!(
            required_insert_count(1, 3, 0),
            Err(Malformed::RequiredInsertCount)
        );
    }

    #[test]
    fn a_negative_base_is_refused() {
        // Required Insert Count 2 (encoded 3 of 6 entries), S=1, delta 2: base 2 - 2 - 1.
        assert_eq!(read(&[0x03, 0x82], 6, 2), Err(Malformed::Base));
        assert_eq!(read(&[0x00], 0, 0), Err(Malformed::Truncated));
    }
}
