//! QUIC variable-length integers (RFC 9000 §16): the two high bits of the first octet give
//! the length (1, 2, 4 or 8 octets), the rest is the value, big-endian, up to 2^62-1.

/// The largest value a varint holds.
pub const MAX: u64 = (1 << 62) - 1;

/// Decodes the varint at the start of `buf`: the value and the octets it took, or `None`
/// when `buf` ends inside it (more octets are needed).
pub fn decode(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1 << (first >> 6);
    let octets = buf.get(..len)?;
    let value = octets[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |v, &b| (v << 8) | u64::from(b));
    Some((value, len))
}

/// The octets `value` takes encoded (its shortest encoding).
pub fn encoded_len(value: u64) -> usize {
    match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Appends `value` in its shortest encoding.
///
/// # Panics
/// If `value` is above [`MAX`]: every value we send (frame types and lengths, settings,
/// stream ids) is far below it, so a larger one is a bug.
pub fn encode(value: u64, dst: &mut Vec<u8>) {
    assert!(value <= MAX, "varint out of range: {value}");
    let len = encoded_len(value);
    let tag = (len.trailing_zeros() as u64) << (8 * len - 2);
    dst.extend_from_slice(&(value | tag).to_be_bytes()[8 - len..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    /// RFC 9000 Appendix A.1's examples.
    const RFC_EXAMPLES: [(&str, u64); 4] = [
        ("c2197c5eff14e88c", 151_288_809_941_952_652),
        ("9d7f3e7d", 494_878_333),
        ("7bbd", 15_293),
        ("25", 37),
    ];

    #[test]
    fn rfc_9000_a_1_examples_decode_and_encode() {
        for (coded, value) in RFC_EXAMPLES {
            let coded = hex(coded);
            assert_eq!(decode(&coded), Some((value, coded.len())), "{value}");
            let mut dst = Vec::new();
            encode(value, &mut dst);
            assert_eq!(dst, coded, "{value}");
        }
        // 37 in two octets is still 37: decoders accept non-shortest encodings.
        assert_eq!(decode(&hex("4025")), Some((37, 2)));
    }

    #[test]
    fn every_length_boundary_round_trips() {
        for value in [0, 0x3f, 0x40, 0x3fff, 0x4000, 0x3fff_ffff, 0x4000_0000, MAX] {
            let mut dst = vec![0xaa];
            encode(value, &mut dst);
            assert_eq!(dst.len() - 1, encoded_len(value));
            assert_eq!(decode(&dst[1..]), Some((value, encoded_len(value))));
        }
    }

    #[test]
    fn a_truncated_varint_needs_more() {
        assert_eq!(decode(&[]), None);
        let coded = hex("c2197c5eff14e88c");
        for end in 0..coded.len() {
            assert_eq!(decode(&coded[..end]), None, "{end} octets");
        }
    }

    #[test]
    #[should_panic(expected = "varint out of range")]
    fn values_past_2_62_are_refused() {
        encode(MAX + 1, &mut Vec::new());
    }
}
