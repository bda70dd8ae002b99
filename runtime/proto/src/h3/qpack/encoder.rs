//! The QPACK encoder for responses (RFC 9204 §4.5): static table and literals only, so a
//! response never references an entry the peer might not have yet and never blocks.

use super::instruction::{Carry, DecoderInstruction};
use super::prefix::SectionPrefix;
use super::{Malformed, QpackError, static_table};
use crate::field_coding::integer;
use crate::field_coding::string::{self, Tie};

/// Encodes field sections for one connection and reads the peer's decoder stream.
#[derive(Debug, Default)]
pub struct Encoder {
    /// A decoder stream instruction cut short by the end of a read.
    decoder_stream: Carry,
}

impl Encoder {
    /// Appends the encoded field section for `fields` (names lowercase, as HTTP/3
    /// requires): a full static match is one indexed line, a static name match a literal
    /// with name reference, anything else a literal name; strings are Huffman-coded when
    /// that is shorter.
    pub fn encode<'f>(
        &self,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        dst: &mut Vec<u8>,
    ) {
        SectionPrefix::encode_static_only(dst);
        for (name, value) in fields {
            match static_table::find(name, value) {
                // Indexed Field Line, T=1 (§4.5.2).
                Some((index, true)) => integer::encode(dst, 0xc0, 6, index),
                // Literal Field Line with Name Reference, N=0, T=1 (§4.5.4).
                Some((index, false)) => {
                    integer::encode(dst, 0x50, 4, index);
                    string::encode(value, 0x00, 7, Tie::Raw, dst);
                }
                // Literal Field Line with Literal Name, N=0 (§4.5.6).
                None => {
                    string::encode(name, 0x20, 3, Tie::Raw, dst);
                    string::encode(value, 0x00, 7, Tie::Raw, dst);
                }
            }
        }
    }

    /// Applies what arrived on the peer's decoder stream (§4.4). We never reference the
    /// dynamic table, so there is nothing to acknowledge or to count as received; only
    /// Stream Cancellation is acceptable, and needs nothing from us.
    pub fn on_decoder_stream(&mut self, input: &[u8]) -> Result<(), QpackError> {
        // We insert nothing, so the only acceptable instruction is Stream Cancellation:
        // at most 6 octets for a stream id below 2^32.
        self.decoder_stream
            .feed(input, 16, |buf| {
                let Some((instruction, used)) = DecoderInstruction::parse(buf)? else {
                    return Ok(None);
                };
                match instruction {
                    DecoderInstruction::StreamCancellation(_) => Ok(Some(used)),
                    DecoderInstruction::SectionAcknowledgment(_) => {
                        Err(Malformed::SectionAcknowledgment)
                    }
                    DecoderInstruction::InsertCountIncrement(_) => {
                        Err(Malformed::InsertCountIncrement)
                    }
                }
            })
            .map_err(QpackError::DecoderStream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::qpack::Decoder;
    use crate::test_util::hex;

    fn encode(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut dst = Vec::new();
        Encoder::default().encode(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut dst,
        );
        dst
    }

    #[test]
    fn status_200_is_one_octet_after_the_prefix() {
        assert_eq!(encode(&[(":status", "200")]), [0x00, 0x00, 0xd9]);
        // 503 is entry 28; 500 is entry 71, past the 6-bit prefix.
        assert_eq!(encode(&[(":status", "503")]), [0x00, 0x00, 0xdc]);
        assert_eq!(encode(&[(":status", "500")]), [0x00, 0x00, 0xff, 0x08]);
    }

    #[test]
    fn a_value_huffman_would_not_shorten_goes_raw() {
        // :status 431 is a literal with static name 24 (":status 103"); "431" is 3
        // octets Huffman-coded too.
        assert_eq!(
            encode(&[(":status", "431")]),
            [0x00, 0x00, 0x5f, 0x09, 0x03, b'4', b'3', b'1']
        );
    }

    #[test]
    fn rfc_b_1_field_line_shape() {
        // B.1 sends :path=/index.html as a literal with static name 1; its value is raw
        // there, Huffman-coded here because that is shorter.
        let section = encode(&[(":path", "/index.html")]);
        assert_eq!(&section[..3], [0x00, 0x00, 0x51]);
        assert_ne!(section[3] & 0x80, 0, "Huffman");
        let mut fields = Vec::new();
        Decoder::default()
            .decode(0, &section, &mut |n: &[u8], v: &[u8]| {
                fields.push((n.to_vec(), v.to_vec()))
            })
            .unwrap();
        assert_eq!(fields, [(b":path".to_vec(), b"/index.html".to_vec())]);
    }

    #[test]
    fn round_trips_through_the_decoder() {
        let response = [
            (":status", "201"),
            ("content-type", "application/json"),
            ("content-length", "12345"),
            ("x-request-id", "req-00000042"),
            ("server", "wedge"),
            ("set-cookie", "a=b; Secure"),
            ("x-binary", "\u{1}\u{2}"),
            ("x-long-name-that-spills-past-the-three-bit-prefix", ""),
        ];
        let section = encode(&response);
        let mut decoded = Vec::new();
        Decoder::default()
            .decode(0, &section, &mut |n: &[u8], v: &[u8]| {
                decoded.push((
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                ))
            })
            .unwrap();
        let expected: Vec<(String, String)> = response
            .iter()
            .map(|&(n, v)| (n.into(), v.into()))
            .collect();
        assert_eq!(decoded, expected);
    }

    #[test]
    fn decoder_stream_without_a_table() {
        let mut e = Encoder::default();
        // RFC B.4's Stream Cancellation (stream 8), split over reads.
        assert_eq!(e.on_decoder_stream(&hex("48 7f")), Ok(()));
        assert_eq!(e.on_decoder_stream(&hex("8101")), Ok(()));
        // B.2's Section Acknowledgment and B.3's Insert Count Increment: we sent
        // nothing they could acknowledge.
        assert_eq!(
            Encoder::default().on_decoder_stream(&hex("84")),
            Err(QpackError::DecoderStream(Malformed::SectionAcknowledgment))
        );
        for increment in ["01", "00"] {
            assert_eq!(
                Encoder::default().on_decoder_stream(&hex(increment)),
                Err(QpackError::DecoderStream(Malformed::InsertCountIncrement))
            );
        }
    }
}
