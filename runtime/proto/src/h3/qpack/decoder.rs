//! The QPACK decoder (RFC 9204 §2.2, §4.5) with no dynamic table, and the limits a server
//! needs (RFC 9114 §4.2.2).

use super::instruction::{Carry, EncoderInstruction};
use super::prefix::SectionPrefix;
use super::static_table::STATIC_TABLE;
use super::string::{Decoded, Literal};
use super::{FieldSink, Malformed, QpackError, read_integer};

/// SETTINGS_MAX_FIELD_SECTION_SIZE we enforce unless told otherwise: 16 KiB.
pub const DEFAULT_MAX_FIELD_SECTION_SIZE: usize = 16 * 1024;

/// Decodes field sections for one connection; keep it for the connection's life.
///
/// Fields reach the sink as slices into the section or a scratch buffer the decoder
/// reuses, so once the scratch has grown to its working size a section decodes without
/// allocating.
#[derive(Debug)]
pub struct Decoder {
    max_field_section_size: usize,
    /// Huffman-decoded strings of the field line being decoded.
    scratch: Vec<u8>,
    /// An encoder stream instruction cut short by the end of a read.
    encoder_stream: Carry,
}

impl Default for Decoder {
    /// A decoder with a 16 KiB field section limit.
    fn default() -> Self {
        Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE)
    }
}

impl Decoder {
    /// A decoder that refuses field sections past `max_field_section_size`: the sum over
    /// fields of name + value + 32 (RFC 9114 §4.2.2).
    pub fn new(max_field_section_size: usize) -> Self {
        Decoder {
            max_field_section_size,
            scratch: Vec::new(),
            encoder_stream: Carry::default(),
        }
    }

    /// Decodes one encoded field section (a HEADERS frame's payload), handing each field to
    /// `sink` in order. On [`QpackError::FieldSectionTooLarge`] the fields delivered so far
    /// are a prefix of the section; the caller drops them.
    pub fn decode<S: FieldSink + ?Sized>(
        &mut self,
        section: &[u8],
        sink: &mut S,
    ) -> Result<(), QpackError> {
        let mut pos = 0;
        let malformed = QpackError::Decompression;
        // No table: MaxEntries is 0 and nothing was ever inserted.
        let prefix = SectionPrefix::read(section, &mut pos, 0, 0).map_err(malformed)?;
        let mut budget = self.max_field_section_size;
        while pos < section.len() {
            self.scratch.clear();
            let (name, value) = self.field_line(section, &mut pos, &prefix, budget)?;
            let (name, value) = (name.resolve(&self.scratch), value.resolve(&self.scratch));
            // Each field costs its octets plus 32 (RFC 9114 §4.2.2).
            budget = budget
                .checked_sub(name.len() + value.len() + 32)
                .ok_or(QpackError::FieldSectionTooLarge)?;
            sink.field(name, value);
        }
        Ok(())
    }

    /// Decodes the field line representation at `*pos` (§4.5.2 - §4.5.6). Strings longer
    /// than `budget` are refused before they are decoded in full.
    fn field_line<'s>(
        &mut self,
        section: &'s [u8],
        pos: &mut usize,
        prefix: &SectionPrefix,
        budget: usize,
    ) -> Result<(Decoded<'s>, Decoded<'s>), QpackError> {
        let malformed = QpackError::Decompression;
        let first = section[*pos];
        let base = prefix.base;
        let name = if first & 0x80 != 0 {
            // Indexed Field Line (§4.5.2).
            let index = read_integer(section, pos, 6).map_err(malformed)?;
            if first & 0x40 == 0 {
                let absolute = base.checked_sub(index as u64 + 1);
                return Err(malformed(dynamic_reference(prefix, absolute)));
            }
            let (name, value) = static_entry(index)?;
            return Ok((Decoded::Raw(name), Decoded::Raw(value)));
        } else if first & 0x40 != 0 {
            // Literal Field Line with Name Reference (§4.5.4); N only binds intermediaries.
            let index = read_integer(section, pos, 4).map_err(malformed)?;
            if first & 0x10 == 0 {
                let absolute = base.checked_sub(index as u64 + 1);
                return Err(malformed(dynamic_reference(prefix, absolute)));
            }
            Decoded::Raw(static_entry(index)?.0)
        } else if first & 0x20 != 0 {
            // Literal Field Line with Literal Name (§4.5.6).
            let name = Literal::read(section, pos, 3).map_err(malformed)?;
            self.string(name, budget)?
        } else {
            // With Post-Base Index (§4.5.3) or Post-Base Name Reference (§4.5.5).
            let prefix_bits = if first & 0x10 != 0 { 4 } else { 3 };
            let index = read_integer(section, pos, prefix_bits).map_err(malformed)?;
            let absolute = base.checked_add(index as u64);
            return Err(malformed(dynamic_reference(prefix, absolute)));
        };
        let value = Literal::read(section, pos, 7).map_err(malformed)?;
        let value = self.string(value, budget)?;
        Ok((name, value))
    }

    fn string<'s>(
        &mut self,
        literal: Literal<'s>,
        budget: usize,
    ) -> Result<Decoded<'s>, QpackError> {
        literal
            .decode(&mut self.scratch, budget)
            .map_err(QpackError::Decompression)?
            .ok_or(QpackError::FieldSectionTooLarge)
    }

    /// Applies what arrived on the peer's encoder stream (§4.3). Without a table only Set
    /// Dynamic Table Capacity 0 is acceptable; an instruction cut short waits for the rest.
    pub fn on_encoder_stream(&mut self, input: &[u8]) -> Result<(), QpackError> {
        self.encoder_stream
            .feed(input, |buf| {
                let Some((instruction, used)) = EncoderInstruction::parse(buf)? else {
                    return Ok(None);
                };
                match instruction {
                    EncoderInstruction::SetCapacity(0) => Ok(Some(used)),
                    EncoderInstruction::SetCapacity(_) => Err(Malformed::TableCapacity),
                    // Every entry counts at least 32 octets: none fits in capacity 0, and
                    // an empty table has nothing to duplicate.
                    _ => Err(Malformed::Insert),
                }
            })
            .map_err(QpackError::EncoderStream)
    }
}

fn static_entry(index: usize) -> Result<(&'static [u8], &'static [u8]), QpackError> {
    STATIC_TABLE
        .get(index)
        .copied()
        .ok_or(QpackError::Decompression(Malformed::StaticIndex))
}

/// Only entries below the Required Insert Count may be referenced (§2.2.3). Without a
/// table that count is 0, so every dynamic reference (or one whose absolute index would
/// be negative) is refused.
fn dynamic_reference(prefix: &SectionPrefix, absolute: Option<u64>) -> Malformed {
    debug_assert!(absolute.is_none_or(|a| a >= prefix.required_insert_count));
    Malformed::DynamicReference
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::hpack::test_util::hex;

    fn decode_all(d: &mut Decoder, section: &[u8]) -> Result<Vec<(String, String)>, QpackError> {
        let mut fields = Vec::new();
        d.decode(section, &mut |n: &[u8], v: &[u8]| {
            fields.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })?;
        Ok(fields)
    }

    fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|&(n, v)| (n.into(), v.into())).collect()
    }

    #[test]
    fn rfc_b_1_literal_field_line_with_name_reference() {
        let mut d = Decoder::default();
        assert_eq!(
            decode_all(&mut d, &hex("0000 510b 2f69 6e64 6578 2e68 746d 6c")),
            Ok(fields(&[(":path", "/index.html")]))
        );
    }

    #[test]
    fn every_static_representation() {
        use crate::h2::hpack::{huffman, integer};
        let mut d = Decoder::default();
        // Indexed static 17 (:method GET) and 98 (index past the 6-bit prefix), literal
        // with static name 1 (:path), literal name (Huffman) with a raw value.
        let mut section = hex("0000 d1 ff23 5103 2f6131");
        let mut name = Vec::new();
        huffman::encode(b"x-custom", &mut name);
        integer::encode(&mut section, 0x20 | 0x08, 3, name.len());
        section.extend_from_slice(&name);
        section.extend_from_slice(b"\x02ok");
        assert_eq!(
            decode_all(&mut d, &section),
            Ok(fields(&[
                (":method", "GET"),
                ("x-frame-options", "sameorigin"),
                (":path", "/a1"),
                ("x-custom", "ok"),
            ]))
        );
    }

    #[test]
    fn the_n_bit_changes_nothing_for_us() {
        let mut d = Decoder::default();
        assert_eq!(
            decode_all(&mut d, &hex("0000 7101 78")),
            Ok(fields(&[(":path", "x")]))
        );
        assert_eq!(
            decode_all(&mut d, &hex("0000 3161 0162")),
            Ok(fields(&[("a", "b")]))
        );
    }

    #[test]
    fn dynamic_references_fail_without_a_table() {
        let mut d = Decoder::default();
        let failed = Err(QpackError::Decompression(Malformed::DynamicReference));
        // RFC B.4's lines: indexed dynamic (0x80), post-base (0x10), and name references.
        for line in ["80", "10", "11", "4f00", "0700", "0000"] {
            let section = hex(&format!("0000 {line}"));
            assert_eq!(decode_all(&mut d, &section), failed, "{line}");
        }
        // B.2's section needs Required Insert Count 2: a table we do not have.
        assert_eq!(
            decode_all(&mut d, &hex("0381 10 11")),
            Err(QpackError::Decompression(Malformed::RequiredInsertCount))
        );
    }

    #[test]
    fn malformed_sections() {
        let mut d = Decoder::default();
        let fail = |m| Err(QpackError::Decompression(m));
        assert_eq!(decode_all(&mut d, &[]), fail(Malformed::Truncated));
        assert_eq!(decode_all(&mut d, &[0x00]), fail(Malformed::Truncated));
        assert_eq!(
            decode_all(&mut d, &hex("0000 ff24")),
            fail(Malformed::StaticIndex)
        );
        assert_eq!(
            decode_all(&mut d, &hex("0000 5f54 00")),
            fail(Malformed::StaticIndex)
        );
        assert_eq!(
            decode_all(&mut d, &hex("0000 5103 2f")),
            fail(Malformed::Truncated)
        );
        // A Huffman value of one EOS-like octet: 8 bits of padding.
        assert_eq!(
            decode_all(&mut d, &hex("0000 5181 ff")),
            fail(Malformed::Huffman)
        );
        assert_eq!(
            decode_all(&mut d, &hex("0000 ff ffffffffff0f")),
            fail(Malformed::Integer)
        );
    }

    #[test]
    fn the_field_section_limit_counts_32_per_field() {
        // ":path" + "/" + 32 = 38 octets.
        let section = hex("0000 c1 c1");
        assert_eq!(
            decode_all(&mut Decoder::new(76), &section).unwrap().len(),
            2
        );
        assert_eq!(
            decode_all(&mut Decoder::new(75), &section),
            Err(QpackError::FieldSectionTooLarge)
        );
        // A long Huffman value is refused once it passes the budget, not decoded whole.
        let mut section = hex("0000 51");
        let mut value = Vec::new();
        crate::h2::hpack::huffman::encode(&[b'a'; 10_000], &mut value);
        crate::h2::hpack::integer::encode(&mut section, 0x80, 7, value.len());
        section.extend_from_slice(&value);
        let mut d = Decoder::new(1000);
        assert_eq!(
            decode_all(&mut d, &section),
            Err(QpackError::FieldSectionTooLarge)
        );
        assert!(d.scratch.capacity() < 2000, "stopped near the limit");
    }

    #[test]
    fn encoder_stream_without_a_table() {
        let mut d = Decoder::default();
        // Set Dynamic Table Capacity 0, twice.
        assert_eq!(d.on_encoder_stream(&[0x20, 0x20]), Ok(()));
        // Capacity 31, split over two reads: past our 0.
        assert_eq!(d.on_encoder_stream(&[0x3f]), Ok(()));
        assert_eq!(
            d.on_encoder_stream(&[0x00]),
            Err(QpackError::EncoderStream(Malformed::TableCapacity))
        );
        // RFC B.2's capacity 220, then its inserts, then B.4's Duplicate.
        for instruction in [
            "3fbd01",
            "c00f7777772e6578616d706c652e636f6d",
            "4a637573746f6d2d6b65790c637573746f6d2d76616c7565",
            "02",
        ] {
            let mut d = Decoder::default();
            assert!(
                matches!(
                    d.on_encoder_stream(&hex(instruction)),
                    Err(QpackError::EncoderStream(
                        Malformed::TableCapacity | Malformed::Insert
                    ))
                ),
                "{instruction}"
            );
        }
    }

    #[test]
    fn random_sections_never_panic() {
        let mut rng = crate::h3::test_util::Rng(0x5eed);
        let mut d = Decoder::new(512);
        for _ in 0..20_000 {
            let len = rng.below(40);
            let mut section: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            // Mostly a valid prefix, so the field lines get exercised.
            if rng.below(4) != 0 && section.len() >= 2 {
                section[..2].copy_from_slice(&[0, 0]);
            }
            let _ = d.decode(&section, &mut |_: &[u8], _: &[u8]| {});
            let _ = d.on_encoder_stream(&section);
        }
    }
}
