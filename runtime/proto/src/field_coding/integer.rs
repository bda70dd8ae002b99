//! Prefix integers (RFC 7541 §5.1; RFC 9204 §4.1.1 uses them as they are).

use super::CodingError;

/// The largest value we decode. Every HPACK and QPACK integer is a length, an index or a table size,
/// all far below this; bounding it stops overlong encodings early.
const MAX: u64 = u32::MAX as u64;

/// Decodes an integer whose `prefix_bits`-bit prefix (1..=8) is in `buf[0]`; returns the
/// value and the octets used.
pub(crate) fn decode(buf: &[u8], prefix_bits: u8) -> Result<(usize, usize), CodingError> {
    let mask = u8::MAX >> (8 - prefix_bits);
    let first = buf.first().ok_or(CodingError::Truncated)? & mask;
    if first < mask {
        return Ok((usize::from(first), 1));
    }
    let mut value = u64::from(mask);
    let mut shift = 0;
    for (i, &octet) in buf.iter().enumerate().skip(1) {
        value += u64::from(octet & 0x7f) << shift;
        if value > MAX {
            return Err(CodingError::IntegerOverflow);
        }
        if octet & 0x80 == 0 {
            let value = usize::try_from(value).map_err(|_| CodingError::IntegerOverflow)?;
            return Ok((value, i + 1));
        }
        shift += 7;
        // Five continuation octets hold 35 bits; more can only be zero padding.
        if shift > 28 {
            return Err(CodingError::IntegerOverflow);
        }
    }
    Err(CodingError::Truncated)
}

/// Reads the integer at `*pos` whose prefix has `prefix_bits` bits, moving `*pos` past it.
pub(crate) fn read(buf: &[u8], pos: &mut usize, prefix_bits: u8) -> Result<usize, CodingError> {
    let (value, used) = decode(buf.get(*pos..).unwrap_or_default(), prefix_bits)?;
    *pos += used;
    Ok(value)
}

/// Appends `value` with a `prefix_bits`-bit prefix; `flags` fills the first octet's high bits.
pub(crate) fn encode(dst: &mut Vec<u8>, flags: u8, prefix_bits: u8, value: usize) {
    let mask = u8::MAX >> (8 - prefix_bits);
    if value < usize::from(mask) {
        dst.push(flags | value as u8);
        return;
    }
    dst.push(flags | mask);
    let mut rest = value - usize::from(mask);
    while rest >= 0x80 {
        dst.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    dst.push(rest as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(flags: u8, prefix_bits: u8, value: usize) -> Vec<u8> {
        let mut dst = Vec::new();
        encode(&mut dst, flags, prefix_bits, value);
        dst
    }

    #[test]
    fn rfc_c_1_1_ten_in_a_5_bit_prefix() {
        assert_eq!(encoded(0, 5, 10), [0b0000_1010]);
        assert_eq!(encoded(0xe0, 5, 10), [0b1110_1010]);
        assert_eq!(decode(&[0b1110_1010], 5), Ok((10, 1)));
    }

    #[test]
    fn rfc_c_1_2_1337_in_a_5_bit_prefix() {
        assert_eq!(encoded(0, 5, 1337), [0b0001_1111, 0b1001_1010, 0b0000_1010]);
        assert_eq!(
            decode(&[0b1111_1111, 0b1001_1010, 0b0000_1010, 0xff], 5),
            Ok((1337, 3))
        );
    }

    #[test]
    fn rfc_c_1_3_42_in_an_8_bit_prefix() {
        assert_eq!(encoded(0, 8, 42), [0b0010_1010]);
        assert_eq!(decode(&[0b0010_1010], 8), Ok((42, 1)));
    }

    #[test]
    fn prefix_boundaries() {
        for bits in 1..=8u8 {
            let max = (1usize << bits) - 1;
            assert_eq!(encoded(0, bits, max - 1), [(max - 1) as u8], "bits {bits}");
            assert_eq!(encoded(0, bits, max), [max as u8, 0], "bits {bits}");
            assert_eq!(
                encoded(0, bits, max + 127),
                [max as u8, 0x7f],
                "bits {bits}"
            );
            assert_eq!(
                encoded(0, bits, max + 128),
                [max as u8, 0x80, 0x01],
                "bits {bits}"
            );
            for value in [
                0,
                max - 1,
                max,
                max + 127,
                max + 128,
                1 << 20,
                u32::MAX as usize,
            ] {
                let buf = encoded(0, bits, value);
                assert_eq!(
                    decode(&buf, bits),
                    Ok((value, buf.len())),
                    "bits {bits} {value}"
                );
            }
        }
    }

    #[test]
    fn flag_bits_outside_the_prefix_are_ignored() {
        assert_eq!(decode(&[0xff, 0x00], 7), Ok((127, 2)));
        assert_eq!(decode(&[0x82], 7), Ok((2, 1)));
        assert_eq!(
            decode(&[0x3f, 0xe1, 0x1f], 5),
            Ok((31 + 0x61 + (0x1f << 7), 3))
        );
    }

    #[test]
    fn truncated() {
        assert_eq!(decode(&[], 5), Err(CodingError::Truncated));
        assert_eq!(decode(&[0x1f], 5), Err(CodingError::Truncated));
        assert_eq!(decode(&[0x1f, 0x9a], 5), Err(CodingError::Truncated));
    }

    #[test]
    fn values_past_32_bits_overflow() {
        // 2^32 - 1 fits; 2^32 does not.
        let max = encoded(0, 5, u32::MAX as usize);
        assert_eq!(max, [0x1f, 0xe0, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(
            decode(&[0x1f, 0xe1, 0xff, 0xff, 0xff, 0x0f], 5),
            Err(CodingError::IntegerOverflow)
        );
        assert_eq!(
            decode(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], 5),
            Err(CodingError::IntegerOverflow)
        );
    }

    #[test]
    fn endless_zero_continuations_overflow_instead_of_spinning() {
        let mut buf = vec![0x1f];
        buf.extend_from_slice(&[0x80; 1000]);
        buf.push(0);
        assert_eq!(decode(&buf, 5), Err(CodingError::IntegerOverflow));
        // Five continuation octets, the last zero-valued, are still accepted.
        assert_eq!(
            decode(&[0x1f, 0x81, 0x80, 0x80, 0x80, 0x00], 5),
            Ok((32, 6))
        );
    }
}
