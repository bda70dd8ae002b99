//! Huffman coding of string literals (RFC 7541 §5.2, Appendix B).

use super::CodingError;

/// (code, length in bits) for symbols 0..=255 and EOS (256), from RFC 7541 Appendix B.
#[rustfmt::skip]
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), // 0 1 2 3
    (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28), // 4 5 6 7
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28), // 8 9 10 11
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28), // 12 13 14 15
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28), // 16 17 18 19
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28), // 20 21 22 23
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), // 24 25 26 27
    (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28), // 28 29 30 31
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12), // 32 '!' '"' '#'
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11), // '$' '%' '&' "'"
    (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11), // '(' ')' '*' '+'
    (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6), // ',' '-' '.' '/'
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6), // '0' '1' '2' '3'
    (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6), // '4' '5' '6' '7'
    (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8), // '8' '9' ':' ';'
    (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10), // '<' '=' '>' '?'
    (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7), // '@' 'A' 'B' 'C'
    (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7), // 'D' 'E' 'F' 'G'
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7), // 'H' 'I' 'J' 'K'
    (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7), // 'L' 'M' 'N' 'O'
    (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7), // 'P' 'Q' 'R' 'S'
    (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7), // 'T' 'U' 'V' 'W'
    (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13), // 'X' 'Y' 'Z' '['
    (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6), // '\' ']' '^' '_'
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), // '`' 'a' 'b' 'c'
    (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6), // 'd' 'e' 'f' 'g'
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7), // 'h' 'i' 'j' 'k'
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5), // 'l' 'm' 'n' 'o'
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5), // 'p' 'q' 'r' 's'
    (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7), // 't' 'u' 'v' 'w'
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), // 'x' 'y' 'z' '{'
    (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28), // '|' '}' '~' 127
    (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20), // 128 129 130 131
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23), // 132 133 134 135
    (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23), // 136 137 138 139
    (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23), // 140 141 142 143
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23), // 144 145 146 147
    (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23), // 148 149 150 151
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23), // 152 153 154 155
    (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24), // 156 157 158 159
    (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22), // 160 161 162 163
    (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21), // 164 165 166 167
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24), // 168 169 170 171
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23), // 172 173 174 175
    (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21), // 176 177 178 179
    (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23), // 180 181 182 183
    (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22), // 184 185 186 187
    (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23), // 188 189 190 191
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19), // 192 193 194 195
    (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25), // 196 197 198 199
    (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27), // 200 201 202 203
    (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25), // 204 205 206 207
    (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27), // 208 209 210 211
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24), // 212 213 214 215
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26), // 216 217 218 219
    (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27), // 220 221 222 223
    (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21), // 224 225 226 227
    (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23), // 228 229 230 231
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25), // 232 233 234 235
    (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23), // 236 237 238 239
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26), // 240 241 242 243
    (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27), // 244 245 246 247
    (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27), // 248 249 250 251
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26), // 252 253 254 255
    (0x3fffffff, 30), // EOS
];

/// The end-of-string symbol; its code's high bits are the padding (§5.2).
const EOS: u16 = 256;

/// Appendix B is a canonical code (a test checks it): the codes of one length are
/// consecutive and numerically follow every shorter code extended to that length. So a
/// decoder needs, per length, only the first code and where that length's symbols start
/// in the symbols sorted by (length, symbol), instead of a tree.
struct Canonical {
    first_code: [u32; 31],
    first_index: [u16; 31],
    count: [u16; 31],
    symbols: [u16; 257],
}

const CANONICAL: Canonical = canonical();

const fn canonical() -> Canonical {
    let mut c = Canonical {
        first_code: [0; 31],
        first_index: [0; 31],
        count: [0; 31],
        symbols: [0; 257],
    };
    let (mut next, mut code, mut len) = (0, 0u32, 1);
    while len <= 30 {
        c.first_code[len] = code;
        c.first_index[len] = next as u16;
        let mut sym = 0;
        while sym < CODES.len() {
            if CODES[sym].1 as usize == len {
                c.symbols[next] = sym as u16;
                next += 1;
                c.count[len] += 1;
            }
            sym += 1;
        }
        code = (code + c.count[len] as u32) << 1;
        len += 1;
    }
    c
}

/// The symbol whose code starts `window` (the next 32 bits, left-aligned) and its length.
/// Every 30-bit pattern starts with some code: the code is complete.
fn lookup(window: u32) -> (u16, u32) {
    let c = &CANONICAL;
    let mut len = 5;
    loop {
        let offset = (window >> (32 - len)).wrapping_sub(c.first_code[len]);
        if offset < u32::from(c.count[len]) || len == 30 {
            return (
                c.symbols[usize::from(c.first_index[len]) + offset as usize],
                len as u32,
            );
        }
        len += 1;
    }
}

/// Octets `src` takes Huffman-coded.
pub(crate) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-coded, padded with the high bits of EOS.
pub(crate) fn encode(src: &[u8], dst: &mut Vec<u8>) {
    // Bits not yet written sit in the low `pending` bits of `acc`; at most 7 + 30.
    let (mut acc, mut pending) = (0u64, 0u32);
    for &b in src {
        let (code, len) = CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        pending += u32::from(len);
        while pending >= 8 {
            pending -= 8;
            dst.push((acc >> pending) as u8);
        }
    }
    if pending > 0 {
        dst.push(((acc << (8 - pending)) as u8) | (0xff >> pending));
    }
}

/// Appends the decoding of `src`. Stops early, without checking the rest, once more than
/// `limit` octets were produced: the caller sees `dst` grew past `limit` and drops the string.
pub(crate) fn decode(src: &[u8], dst: &mut Vec<u8>, limit: usize) -> Result<(), CodingError> {
    let start = dst.len();
    // Unread bits sit in the low `avail` bits of `acc`, at most 31 + 8.
    let (mut acc, mut avail, mut input) = (0u64, 0u32, src.iter());
    loop {
        while avail < 32 {
            let Some(&b) = input.next() else { break };
            acc = (acc << 8) | u64::from(b);
            avail += 8;
        }
        if avail == 0 {
            return Ok(());
        }
        // The next 32 bits, left-aligned; past the end they read as zeros.
        let window = if avail >= 32 {
            (acc >> (avail - 32)) as u32
        } else {
            (acc << (32 - avail)) as u32
        };
        let (sym, len) = lookup(window);
        if len > avail {
            // No whole code left: what remains is padding, at most 7 bits of EOS's 1s.
            if avail > 7 {
                return Err(CodingError::HuffmanPaddingTooLong);
            }
            if acc != (1 << avail) - 1 {
                return Err(CodingError::HuffmanPaddingNotOnes);
            }
            return Ok(());
        }
        if sym == EOS {
            return Err(CodingError::HuffmanEos);
        }
        dst.push(sym as u8);
        if dst.len() - start > limit {
            return Ok(());
        }
        avail -= len;
        acc &= (1 << avail) - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    fn decoded(src: &[u8]) -> Result<Vec<u8>, CodingError> {
        let mut dst = Vec::new();
        decode(src, &mut dst, usize::MAX).map(|()| dst)
    }

    /// Every Huffman string in RFC 7541 Appendix C.4 and C.6, with its coding.
    const RFC_EXAMPLES: [(&str, &str); 12] = [
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("private", "aec3 771a 4b"),
        (
            "Mon, 21 Oct 2013 20:13:21 GMT",
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
        ),
        (
            "https://www.example.com",
            "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
        ),
        ("307", "640e ff"),
        (
            "Mon, 21 Oct 2013 20:13:22 GMT",
            "d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff",
        ),
        ("gzip", "9bd9 ab"),
        (
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ];

    #[test]
    fn rfc_appendix_c_strings_encode_byte_for_byte() {
        for (text, coded) in RFC_EXAMPLES {
            let mut dst = Vec::new();
            encode(text.as_bytes(), &mut dst);
            assert_eq!(dst, hex(coded), "{text}");
            assert_eq!(encoded_len(text.as_bytes()), dst.len(), "{text}");
        }
    }

    #[test]
    fn rfc_appendix_c_strings_decode_byte_for_byte() {
        for (text, coded) in RFC_EXAMPLES {
            assert_eq!(decoded(&hex(coded)), Ok(text.as_bytes().to_vec()), "{text}");
        }
    }

    #[test]
    fn table_is_the_canonical_complete_code_the_decoder_assumes() {
        // Kraft equality: sum of 2^-len over all symbols is exactly 1 (in units of 2^-30).
        let kraft: u64 = CODES.iter().map(|&(_, len)| 1u64 << (30 - len)).sum();
        assert_eq!(kraft, 1 << 30);
        // Each transcribed code is the one the canonical construction assigns it.
        let c = &CANONICAL;
        for len in 1..=30 {
            let first = usize::from(c.first_index[len]);
            for (rank, &sym) in c.symbols[first..first + usize::from(c.count[len])]
                .iter()
                .enumerate()
            {
                assert_eq!(
                    CODES[usize::from(sym)],
                    (c.first_code[len] + rank as u32, len as u8),
                    "symbol {sym}"
                );
            }
        }
        assert_eq!(c.count.iter().map(|&n| usize::from(n)).sum::<usize>(), 257);
        // Spot checks against Appendix B: '/' is 011000, EOS is thirty 1s.
        assert_eq!(CODES[usize::from(b'/')], (0x18, 6));
        assert_eq!(CODES[usize::from(EOS)], (0x3fff_ffff, 30));
    }

    #[test]
    fn every_octet_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut dst = Vec::new();
        encode(&all, &mut dst);
        assert_eq!(dst.len(), encoded_len(&all));
        assert_eq!(decoded(&dst), Ok(all));
        for b in 0..=255u8 {
            let mut dst = Vec::new();
            encode(&[b, b, b], &mut dst);
            assert_eq!(decoded(&dst), Ok(vec![b, b, b]), "octet {b}");
        }
    }

    #[test]
    fn empty_string() {
        assert_eq!(encoded_len(b""), 0);
        assert_eq!(decoded(&[]), Ok(vec![]));
    }

    #[test]
    fn eos_in_the_string_is_an_error() {
        // EOS (30 ones) padded with two ones.
        assert_eq!(
            decoded(&[0xff, 0xff, 0xff, 0xff]),
            Err(CodingError::HuffmanEos)
        );
        // 'a' (00011), then EOS, then padding: 5 + 30 + 5 bits.
        let eos_after_a = [0b0001_1111, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(decoded(&eos_after_a), Err(CodingError::HuffmanEos));
    }

    #[test]
    fn padding_longer_than_7_bits_is_an_error() {
        assert_eq!(decoded(&[0xff]), Err(CodingError::HuffmanPaddingTooLong));
        // 'a' then 11 one bits.
        assert_eq!(
            decoded(&[0b0001_1111, 0xff]),
            Err(CodingError::HuffmanPaddingTooLong)
        );
        // A whole padding octet after a string that ended on an octet boundary.
        let mut dst = Vec::new();
        encode(b"0a", &mut dst); // 5 + 5 bits, then 6 bits of padding
        assert_eq!(dst, [0b0000_0000, 0b1111_1111]);
        assert_eq!(
            decoded(&[0x00, 0x7f, 0xff]),
            Err(CodingError::HuffmanPaddingTooLong)
        );
    }

    #[test]
    fn padding_not_all_ones_is_an_error() {
        // 'a' (00011) then 000.
        assert_eq!(
            decoded(&[0b0001_1000]),
            Err(CodingError::HuffmanPaddingNotOnes)
        );
        // 'a' then 110.
        assert_eq!(
            decoded(&[0b0001_1110]),
            Err(CodingError::HuffmanPaddingNotOnes)
        );
        assert_eq!(decoded(&[0b0001_1111]), Ok(b"a".to_vec()));
    }

    #[test]
    fn stops_once_past_the_limit() {
        let text = [b'a'; 100];
        let mut coded = Vec::new();
        encode(&text, &mut coded);
        let mut dst = vec![b'x'];
        assert_eq!(decode(&coded, &mut dst, 10), Ok(()));
        assert_eq!(dst.len(), 1 + 11);
        let mut dst = Vec::new();
        assert_eq!(decode(&coded, &mut dst, 100), Ok(()));
        assert_eq!(dst, text);
    }
}
