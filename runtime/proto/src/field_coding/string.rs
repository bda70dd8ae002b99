//! String literals (RFC 7541 §5.2, RFC 9204 §4.1.2): an H bit, a length with an N-bit
//! prefix, then the octets, Huffman-coded when H is set. HPACK's length prefix is always 7
//! bits; QPACK's varies with the representation around it.

use core::ops::Range;

use super::{CodingError, huffman, integer};

/// A string literal as sent, borrowed from its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Literal<'a> {
    /// Whether `octets` are Huffman-coded.
    pub huffman: bool,
    /// The octets as sent.
    pub octets: &'a [u8],
}

impl<'a> Literal<'a> {
    /// Reads the literal at `*pos` whose length has a `prefix_bits`-bit prefix; the H bit is
    /// the bit above it.
    pub(crate) fn read(
        buf: &'a [u8],
        pos: &mut usize,
        prefix_bits: u8,
    ) -> Result<Self, CodingError> {
        let first = *buf.get(*pos).ok_or(CodingError::Truncated)?;
        let huffman = first & (1 << prefix_bits) != 0;
        let len = integer::read(buf, pos, prefix_bits)?;
        let end = pos
            .checked_add(len)
            .filter(|&end| end <= buf.len())
            .ok_or(CodingError::Truncated)?;
        let octets = &buf[*pos..end];
        *pos = end;
        Ok(Literal { huffman, octets })
    }

    /// Decodes the string: raw octets stay in place, Huffman ones go onto `scratch`.
    /// `None` when it is longer than `cap`, and nothing is kept.
    pub(crate) fn decode(
        self,
        scratch: &mut Vec<u8>,
        cap: usize,
    ) -> Result<Option<Decoded<'a>>, CodingError> {
        if !self.huffman {
            return Ok((self.octets.len() <= cap).then_some(Decoded::Raw(self.octets)));
        }
        let from = scratch.len();
        huffman::decode(self.octets, scratch, cap)?;
        if scratch.len() - from > cap {
            scratch.truncate(from);
            return Ok(None);
        }
        Ok(Some(Decoded::Scratch(from..scratch.len())))
    }
}

/// A decoded string: in place, or at a range of the decoder's scratch.
#[derive(Clone, Debug)]
pub(crate) enum Decoded<'a> {
    Raw(&'a [u8]),
    Scratch(Range<usize>),
}

impl<'a> Decoded<'a> {
    pub(crate) fn resolve<'s>(&self, scratch: &'s [u8]) -> &'s [u8]
    where
        'a: 's,
    {
        match self {
            Decoded::Raw(s) => s,
            Decoded::Scratch(r) => &scratch[r.clone()],
        }
    }
}

/// How a string goes when Huffman coding leaves its length unchanged; RFC 7541 §5.2
/// leaves the choice to the encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tie {
    /// Huffman-coded, as in RFC 7541's examples (Appendix C.4): HPACK's choice, so its
    /// output matches them byte for byte.
    Huffman,
    /// Raw, sparing the peer a decode that gains nothing: QPACK's choice.
    Raw,
}

/// Appends `s` as a literal whose length has a `prefix_bits`-bit prefix after `flags`:
/// Huffman-coded when that is shorter, and on a tie as `tie` says.
pub(crate) fn encode(s: &[u8], flags: u8, prefix_bits: u8, tie: Tie, dst: &mut Vec<u8>) {
    let coded_len = huffman::encoded_len(s);
    if coded_len < s.len() || (coded_len == s.len() && tie == Tie::Huffman) {
        integer::encode(dst, flags | (1 << prefix_bits), prefix_bits, coded_len);
        huffman::encode(s, dst);
    } else {
        integer::encode(dst, flags, prefix_bits, s.len());
        dst.extend_from_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(s: &[u8], flags: u8, prefix_bits: u8) -> Vec<u8> {
        let mut buf = Vec::new();
        encode(s, flags, prefix_bits, Tie::Raw, &mut buf);
        let mut pos = 0;
        let literal = Literal::read(&buf, &mut pos, prefix_bits).unwrap();
        assert_eq!(pos, buf.len());
        let mut scratch = Vec::new();
        let decoded = literal.decode(&mut scratch, usize::MAX).unwrap().unwrap();
        assert_eq!(decoded.resolve(&scratch), s);
        buf
    }

    #[test]
    fn huffman_when_shorter() {
        // "www.example.com" is 12 octets Huffman-coded, 15 raw.
        let buf = round_trip(b"www.example.com", 0, 7);
        assert_eq!(buf[0], 0x80 | 12);
        // Binary octets grow under Huffman: sent raw.
        let buf = round_trip(&[0, 1, 2], 0, 7);
        assert_eq!(buf, [3, 0, 1, 2]);
    }

    #[test]
    fn a_tie_goes_as_asked() {
        // "431" is 6 + 6 + 5 bits: 3 octets either way.
        let mut buf = Vec::new();
        encode(b"431", 0, 7, Tie::Raw, &mut buf);
        assert_eq!(buf, [3, b'4', b'3', b'1']);
        buf.clear();
        encode(b"431", 0, 7, Tie::Huffman, &mut buf);
        assert_eq!(buf[0], 0x80 | 3);
        assert_eq!(buf.len(), 4);
    }

    #[test]
    fn the_h_bit_sits_above_any_prefix() {
        // The instruction bits above each prefix: literal name (001), insert with literal
        // name (01), and none for a value.
        for (flags, prefix_bits) in [(0x20, 3), (0x40, 5), (0x00, 7)] {
            let buf = round_trip(b"custom-key", flags, prefix_bits);
            assert_eq!(
                buf[0] & !(0xff >> (8 - prefix_bits)),
                flags | (1 << prefix_bits)
            );
            // A long raw string spills past the prefix.
            let buf = round_trip(&[0xff; 300], flags, prefix_bits);
            assert_eq!(buf[0], flags | (0xff >> (8 - prefix_bits)), "raw, all ones");
        }
    }

    #[test]
    fn truncated_and_too_long() {
        let mut pos = 0;
        assert_eq!(
            Literal::read(&[0x05, b'a'], &mut pos, 7),
            Err(CodingError::Truncated)
        );
        let mut pos = 0;
        assert_eq!(Literal::read(&[], &mut pos, 7), Err(CodingError::Truncated));
        let mut buf = Vec::new();
        encode(b"aaaaaaaaaa", 0, 7, Tie::Raw, &mut buf);
        let mut pos = 0;
        let literal = Literal::read(&buf, &mut pos, 7).unwrap();
        let mut scratch = vec![b'x'];
        assert_eq!(literal.decode(&mut scratch, 9).unwrap().map(|_| ()), None);
        assert_eq!(scratch, b"x", "a string past the cap leaves nothing behind");
        let raw = Literal {
            huffman: false,
            octets: b"abc",
        };
        assert!(raw.decode(&mut scratch, 2).unwrap().is_none());
    }
}
