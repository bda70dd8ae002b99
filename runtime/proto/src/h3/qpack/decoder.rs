//! The QPACK decoder (RFC 9204 §2.2, §4.5) with its dynamic table and blocked streams,
//! and the limits a server needs (RFC 9114 §4.2.2).

use super::dynamic_table::DynamicTable;
use super::instruction::{Carry, DecoderInstruction, EncoderInstruction};
use super::prefix::SectionPrefix;
use super::static_table::STATIC_TABLE;
use super::{Malformed, QpackError, read_integer};
use crate::field_coding::FieldSink;
use crate::field_coding::string::{Decoded, Literal};

/// SETTINGS_MAX_FIELD_SECTION_SIZE we enforce unless told otherwise: 16 KiB.
pub const DEFAULT_MAX_FIELD_SECTION_SIZE: usize = 16 * 1024;

/// Whether a field section could be decoded yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionStatus {
    /// Decoded: every field went to the sink.
    Decoded,
    /// Blocked (§2.1.2): it needs entries the encoder stream has not delivered yet. Keep
    /// it, and decode it again after more of the encoder stream arrived; nothing went to
    /// the sink.
    Blocked,
}

/// Decodes field sections for one connection and applies the peer encoder's
/// instructions; keep it for the connection's life.
///
/// Fields reach the sink as slices into the section, the dynamic table or a scratch
/// buffer the decoder reuses, so once those have grown to their working size a section
/// decodes without allocating.
pub struct Decoder {
    max_field_section_size: usize,
    /// Our SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    max_table_capacity: usize,
    /// Our SETTINGS_QPACK_BLOCKED_STREAMS.
    max_blocked_streams: usize,
    table: DynamicTable,
    /// Streams whose field section is blocked.
    blocked: Vec<u64>,
    /// Huffman-decoded strings of the field line or instruction being decoded.
    scratch: Vec<u8>,
    /// An encoder stream instruction cut short by the end of a read.
    encoder_stream: Carry,
    /// Decoder stream instructions owed to the peer's encoder, but Insert Count
    /// Increments, which are worked out when they are taken.
    instructions: Vec<u8>,
    /// The Known Received Count (§2.1.4) as the peer's encoder will see it.
    known_received: u64,
}

impl Default for Decoder {
    /// A decoder with a 16 KiB field section limit and no dynamic table.
    fn default() -> Self {
        Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 0, 0)
    }
}

impl Decoder {
    /// A decoder that refuses field sections past `max_field_section_size` (the sum over
    /// fields of name + value + 32, RFC 9114 §4.2.2), a dynamic table capacity past
    /// `max_table_capacity`, and more than `max_blocked_streams` blocked streams: our
    /// SETTINGS.
    pub fn new(
        max_field_section_size: usize,
        max_table_capacity: usize,
        max_blocked_streams: usize,
    ) -> Self {
        Decoder {
            max_field_section_size,
            max_table_capacity,
            max_blocked_streams,
            table: DynamicTable::new(),
            blocked: Vec::new(),
            scratch: Vec::new(),
            encoder_stream: Carry::default(),
            instructions: Vec::new(),
            known_received: 0,
        }
    }

    /// Decodes one encoded field section (a HEADERS frame's payload) received on
    /// `stream`, handing each field to `sink` in order. On
    /// [`QpackError::FieldSectionTooLarge`] the fields delivered so far are a prefix of
    /// the section; the caller drops them.
    pub fn decode<S: FieldSink + ?Sized>(
        &mut self,
        stream: u64,
        section: &[u8],
        sink: &mut S,
    ) -> Result<SectionStatus, QpackError> {
        let failed = QpackError::Decompression;
        let mut pos = 0;
        let max_entries = (self.max_table_capacity / 32) as u64;
        let prefix = SectionPrefix::read(section, &mut pos, max_entries, self.table.insert_count())
            .map_err(failed)?;
        if prefix.required_insert_count > 0 {
            // Checked before the section may block: an inflated count must not hold a
            // stream for inserts it never needed.
            check_required_insert_count(section, pos, &prefix).map_err(failed)?;
        }
        let was_blocked = self.blocked.iter().position(|&s| s == stream);
        if prefix.required_insert_count > self.table.insert_count() {
            if was_blocked.is_none() {
                // More than we promised to hold (§2.1.2).
                if self.blocked.len() >= self.max_blocked_streams {
                    return Err(failed(Malformed::TooManyBlockedStreams));
                }
                self.blocked.push(stream);
            }
            return Ok(SectionStatus::Blocked);
        }
        if let Some(i) = was_blocked {
            self.blocked.swap_remove(i);
        }
        let mut budget = self.max_field_section_size;
        while pos < section.len() {
            self.scratch.clear();
            let (name, value) = field_line(
                section,
                &mut pos,
                &prefix,
                budget,
                &self.table,
                &mut self.scratch,
            )?;
            let resolve = |part| resolve(part, &self.scratch, &self.table);
            let (Some(name), Some(value)) = (resolve(name), resolve(value)) else {
                return Err(failed(Malformed::DynamicReference));
            };
            // Each field costs its octets plus 32 (RFC 9114 §4.2.2).
            budget = budget
                .checked_sub(name.len() + value.len() + 32)
                .ok_or(QpackError::FieldSectionTooLarge)?;
            sink.field(name, value);
        }
        if prefix.required_insert_count > 0 {
            // Sections that referenced the table are acknowledged (§4.4.1).
            DecoderInstruction::SectionAcknowledgment(stream).encode(&mut self.instructions);
            self.known_received = self.known_received.max(prefix.required_insert_count);
        }
        Ok(SectionStatus::Decoded)
    }

    /// Applies what arrived on the peer's encoder stream (§4.3); an instruction cut short
    /// waits for the rest.
    pub fn on_encoder_stream(&mut self, input: &[u8]) -> Result<(), QpackError> {
        let Decoder {
            max_table_capacity,
            table,
            scratch,
            encoder_stream,
            ..
        } = self;
        let max_table_capacity = *max_table_capacity;
        // An insert, Huffman at its worst (30 bits an octet), fits in this unless its
        // entry could not fit in the table.
        let limit = 4 * max_table_capacity + 64;
        encoder_stream
            .feed(input, limit, |buf| {
                let Some((instruction, used)) = EncoderInstruction::parse(buf)? else {
                    return Ok(None);
                };
                apply(instruction, max_table_capacity, table, scratch)?;
                Ok(Some(used))
            })
            .map_err(QpackError::EncoderStream)
    }

    /// Notes that `stream` was reset or abandoned before its field sections were all
    /// decoded (§2.2.2.2): the encoder may forget its references. A decoder without a
    /// table may skip telling it.
    pub fn cancel_stream(&mut self, stream: u64) {
        if let Some(i) = self.blocked.iter().position(|&s| s == stream) {
            self.blocked.swap_remove(i);
        }
        if self.max_table_capacity > 0 {
            DecoderInstruction::StreamCancellation(stream).encode(&mut self.instructions);
        }
    }

    /// Appends the decoder stream instructions owed to the peer (§4.4): Section
    /// Acknowledgments and Stream Cancellations as they happened, then one Insert Count
    /// Increment for the inserts nothing acknowledged yet.
    pub fn take_instructions(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.instructions);
        let unacknowledged = self.table.insert_count() - self.known_received;
        if unacknowledged > 0 {
            DecoderInstruction::InsertCountIncrement(unacknowledged).encode(out);
            self.known_received = self.table.insert_count();
        }
    }
}

/// Applies one encoder instruction (§4.3) to the table.
fn apply(
    instruction: EncoderInstruction<'_>,
    max_table_capacity: usize,
    table: &mut DynamicTable,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    scratch.clear();
    // A string no entry could hold is refused before it is decoded whole.
    let cap = max_table_capacity;
    let too_long = Malformed::Insert;
    match instruction {
        EncoderInstruction::SetCapacity(capacity) => {
            if capacity > max_table_capacity {
                return Err(Malformed::TableCapacity);
            }
            table.set_capacity(capacity);
            Ok(())
        }
        EncoderInstruction::InsertWithNameReference {
            is_static,
            index,
            value,
        } => {
            // Copied: the insert may evict the entry it names (§3.2.2).
            let name = if is_static {
                STATIC_TABLE.get(index).ok_or(Malformed::StaticIndex)?.0
            } else {
                table.relative(index).ok_or(Malformed::DynamicReference)?.0
            };
            scratch.extend_from_slice(name);
            let name_len = scratch.len();
            let value = value.decode(scratch, cap)?.ok_or(too_long)?;
            table.insert(&scratch[..name_len], value.resolve(scratch))
        }
        EncoderInstruction::InsertWithLiteralName { name, value } => {
            let name = name.decode(scratch, cap)?.ok_or(too_long)?;
            let value = value.decode(scratch, cap)?.ok_or(too_long)?;
            table.insert(name.resolve(scratch), value.resolve(scratch))
        }
        EncoderInstruction::Duplicate(index) => {
            let (name, value) = table.relative(index).ok_or(Malformed::DynamicReference)?;
            let name_len = name.len();
            scratch.extend_from_slice(name);
            scratch.extend_from_slice(value);
            let (name, value) = scratch.split_at(name_len);
            table.insert(name, value)
        }
    }
}

/// Where a field line's name or value is.
enum Part<'s> {
    /// In the section, the static table or the scratch.
    Str(Decoded<'s>),
    /// The name or value of the dynamic entry with this absolute index.
    TableName(u64),
    TableValue(u64),
}

fn resolve<'a>(part: Part<'a>, scratch: &'a [u8], table: &'a DynamicTable) -> Option<&'a [u8]> {
    match part {
        Part::Str(s) => Some(s.resolve(scratch)),
        Part::TableName(absolute) => table.get(absolute).map(|(n, _)| n),
        Part::TableValue(absolute) => table.get(absolute).map(|(_, v)| v),
    }
}

/// Decodes the field line representation at `*pos` (§4.5.2 - §4.5.6). Strings longer
/// than `budget` are refused before they are decoded in full.
fn field_line<'s>(
    section: &'s [u8],
    pos: &mut usize,
    prefix: &SectionPrefix,
    budget: usize,
    table: &DynamicTable,
    scratch: &mut Vec<u8>,
) -> Result<(Part<'s>, Part<'s>), QpackError> {
    fn failed(e: impl Into<Malformed>) -> QpackError {
        QpackError::Decompression(e.into())
    }
    let first = section[*pos];
    let base = prefix.base;
    // Relative to Base for the plain forms, past it for the post-base ones (§3.2.5, §3.2.6).
    let relative = |index: usize| base.checked_sub(index as u64 + 1);
    let post_base = |index: usize| base.checked_add(index as u64);
    let name = if first & 0x80 != 0 {
        // Indexed Field Line (§4.5.2).
        let index = read_integer(section, pos, 6).map_err(failed)?;
        if first & 0x40 != 0 {
            let (name, value) = static_entry(index)?;
            return Ok((
                Part::Str(Decoded::Raw(name)),
                Part::Str(Decoded::Raw(value)),
            ));
        }
        let absolute = dynamic(prefix, table, relative(index))?;
        return Ok((Part::TableName(absolute), Part::TableValue(absolute)));
    } else if first & 0x40 != 0 {
        // Literal Field Line with Name Reference (§4.5.4); N only binds intermediaries.
        let index = read_integer(section, pos, 4).map_err(failed)?;
        if first & 0x10 != 0 {
            Part::Str(Decoded::Raw(static_entry(index)?.0))
        } else {
            Part::TableName(dynamic(prefix, table, relative(index))?)
        }
    } else if first & 0x20 != 0 {
        // Literal Field Line with Literal Name (§4.5.6).
        let name = Literal::read(section, pos, 3).map_err(failed)?;
        Part::Str(string(name, budget, scratch)?)
    } else if first & 0x10 != 0 {
        // Indexed Field Line with Post-Base Index (§4.5.3).
        let index = read_integer(section, pos, 4).map_err(failed)?;
        let absolute = dynamic(prefix, table, post_base(index))?;
        return Ok((Part::TableName(absolute), Part::TableValue(absolute)));
    } else {
        // Literal Field Line with Post-Base Name Reference (§4.5.5).
        let index = read_integer(section, pos, 3).map_err(failed)?;
        Part::TableName(dynamic(prefix, table, post_base(index))?)
    };
    let value = Literal::read(section, pos, 7).map_err(failed)?;
    Ok((name, Part::Str(string(value, budget, scratch)?)))
}

fn string<'s>(
    literal: Literal<'s>,
    budget: usize,
    scratch: &mut Vec<u8>,
) -> Result<Decoded<'s>, QpackError> {
    literal
        .decode(scratch, budget)
        .map_err(|e| QpackError::Decompression(e.into()))?
        .ok_or(QpackError::FieldSectionTooLarge)
}

fn static_entry(index: usize) -> Result<(&'static [u8], &'static [u8]), QpackError> {
    STATIC_TABLE
        .get(index)
        .copied()
        .ok_or(QpackError::Decompression(Malformed::StaticIndex))
}

/// A section's Required Insert Count must be exactly one more than the largest absolute
/// index its field lines reference (RFC 9204 §2.1.2, §4.5.1.1). A count larger than that
/// (§2.2.1), or a nonzero count with no dynamic reference at all, is
/// QPACK_DECOMPRESSION_FAILED. A reference at or past the count is the usual
/// [`Malformed::DynamicReference`]. Only walks the representations (no string is
/// decoded, no entry looked up), so it runs before the section may block.
fn check_required_insert_count(
    section: &[u8],
    mut pos: usize,
    prefix: &SectionPrefix,
) -> Result<(), Malformed> {
    let base = prefix.base;
    let relative = |index: usize| base.checked_sub(index as u64 + 1);
    let post_base = |index: usize| base.checked_add(index as u64);
    let mut largest: Option<u64> = None;
    while pos < section.len() {
        let first = section[pos];
        let absolute = if first & 0x80 != 0 {
            // Indexed Field Line (§4.5.2): static (T set) or dynamic.
            let index = read_integer(section, &mut pos, 6)?;
            if first & 0x40 != 0 {
                continue;
            }
            relative(index)
        } else if first & 0x40 != 0 {
            // Literal Field Line with Name Reference (§4.5.4), then its value.
            let index = read_integer(section, &mut pos, 4)?;
            Literal::read(section, &mut pos, 7)?;
            if first & 0x10 != 0 {
                continue;
            }
            relative(index)
        } else if first & 0x20 != 0 {
            // Literal Field Line with Literal Name (§4.5.6): no reference.
            Literal::read(section, &mut pos, 3)?;
            Literal::read(section, &mut pos, 7)?;
            continue;
        } else if first & 0x10 != 0 {
            // Indexed Field Line with Post-Base Index (§4.5.3).
            post_base(read_integer(section, &mut pos, 4)?)
        } else {
            // Literal Field Line with Post-Base Name Reference (§4.5.5), then its value.
            let index = read_integer(section, &mut pos, 3)?;
            Literal::read(section, &mut pos, 7)?;
            post_base(index)
        };
        let absolute = absolute
            .filter(|&a| a < prefix.required_insert_count)
            .ok_or(Malformed::DynamicReference)?;
        largest = largest.max(Some(absolute));
    }
    match largest {
        Some(a) if a + 1 == prefix.required_insert_count => Ok(()),
        _ => Err(Malformed::RequiredInsertCount),
    }
}

/// Checks a dynamic reference: only entries below the Required Insert Count, and not
/// evicted, may be named (§2.2.3).
fn dynamic(
    prefix: &SectionPrefix,
    table: &DynamicTable,
    absolute: Option<u64>,
) -> Result<u64, QpackError> {
    absolute
        .filter(|&a| a < prefix.required_insert_count && table.get(a).is_some())
        .ok_or(QpackError::Decompression(Malformed::DynamicReference))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    fn decode_all(d: &mut Decoder, section: &[u8]) -> Result<Vec<(String, String)>, QpackError> {
        decode_on(d, 0, section)
    }

    /// Decodes a section that must not block, received on `stream`.
    fn decode_on(
        d: &mut Decoder,
        stream: u64,
        section: &[u8],
    ) -> Result<Vec<(String, String)>, QpackError> {
        let mut fields = Vec::new();
        let status = d.decode(stream, section, &mut |n: &[u8], v: &[u8]| {
            fields.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })?;
        assert_eq!(status, SectionStatus::Decoded);
        Ok(fields)
    }

    fn instructions(d: &mut Decoder) -> Vec<u8> {
        let mut out = Vec::new();
        d.take_instructions(&mut out);
        out
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
        use crate::field_coding::{huffman, integer};
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
            decode_all(&mut Decoder::new(76, 0, 0), &section)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            decode_all(&mut Decoder::new(75, 0, 0), &section),
            Err(QpackError::FieldSectionTooLarge)
        );
        // A long Huffman value is refused once it passes the budget, not decoded whole.
        let mut section = hex("0000 51");
        let mut value = Vec::new();
        crate::field_coding::huffman::encode(&[b'a'; 10_000], &mut value);
        crate::field_coding::integer::encode(&mut section, 0x80, 7, value.len());
        section.extend_from_slice(&value);
        let mut d = Decoder::new(1000, 0, 0);
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
                        Malformed::TableCapacity | Malformed::Insert | Malformed::DynamicReference
                    ))
                ),
                "{instruction}"
            );
        }
    }

    #[test]
    fn random_sections_never_panic() {
        let mut rng = crate::test_util::Rng(0x5eed);
        let mut d = Decoder::new(512, 0, 0);
        for _ in 0..20_000 {
            let len = rng.below(40);
            let mut section: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            // Mostly a valid prefix, so the field lines get exercised.
            if rng.below(4) != 0 && section.len() >= 2 {
                section[..2].copy_from_slice(&[0, 0]);
            }
            let _ = d.decode(0, &section, &mut |_: &[u8], _: &[u8]| {});
            let _ = d.on_encoder_stream(&section);
        }
    }

    /// RFC 9204 Appendix B with capacity 220, from the decoder's side, byte for byte.
    #[test]
    fn rfc_appendix_b_walkthrough() {
        let mut d = Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 220, 1);
        // B.1: no dynamic reference, nothing to acknowledge.
        assert_eq!(
            decode_on(&mut d, 0, &hex("0000 510b 2f69 6e64 6578 2e68 746d 6c")),
            Ok(fields(&[(":path", "/index.html")]))
        );
        assert_eq!(instructions(&mut d), []);
        // B.2: capacity, two inserts, a section of post-base references on stream 4.
        d.on_encoder_stream(&hex(
            "3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468",
        ))
        .unwrap();
        assert_eq!(
            decode_on(&mut d, 4, &hex("0381 10 11")),
            Ok(fields(&[
                (":authority", "www.example.com"),
                (":path", "/sample/path")
            ]))
        );
        assert_eq!(
            instructions(&mut d),
            [0x84],
            "Section Acknowledgment (stream=4)"
        );
        // B.3: a speculative insert, acknowledged by an Insert Count Increment.
        d.on_encoder_stream(&hex("4a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
            .unwrap();
        assert_eq!(instructions(&mut d), [0x01], "Insert Count Increment (1)");
        // B.4: the section on stream 8 arrives before the Duplicate it needs, and the
        // stream is cancelled.
        let b4 = hex("0500 80 c1 81");
        assert_eq!(
            d.decode(8, &b4, &mut |_: &[u8], _: &[u8]| panic!("blocked")),
            Ok(SectionStatus::Blocked)
        );
        d.cancel_stream(8);
        assert_eq!(
            instructions(&mut d),
            [0x48],
            "Stream Cancellation (stream=8)"
        );
        d.on_encoder_stream(&[0x02]).unwrap();
        assert_eq!(
            decode_on(&mut d, 12, &b4),
            Ok(fields(&[
                (":authority", "www.example.com"),
                (":path", "/"),
                ("custom-key", "custom-value"),
            ]))
        );
        assert_eq!(
            instructions(&mut d),
            [0x8c],
            "the Duplicate is acknowledged with it"
        );
        // B.5: an insert with a dynamic name reference evicts entry 0.
        d.on_encoder_stream(&hex("810d637573746f6d2d76616c756532"))
            .unwrap();
        assert_eq!(instructions(&mut d), [0x01]);
        // Required Insert Count 5 (encoded 5 % 12 + 1), Base 5: relative 0 is entry 4.
        assert_eq!(
            decode_on(&mut d, 16, &hex("0600 80")),
            Ok(fields(&[("custom-key", "custom-value2")]))
        );
        // Required Insert Count 1, Base 1: relative 0 is entry 0, evicted.
        assert_eq!(
            decode_on(&mut d, 20, &hex("0200 80")),
            Err(QpackError::Decompression(Malformed::DynamicReference))
        );
        // Naming entry 0 under Required Insert Count 5 is an inflated count, whatever
        // became of the entry.
        assert_eq!(
            decode_on(&mut d, 20, &hex("0600 84")),
            Err(QpackError::Decompression(Malformed::RequiredInsertCount))
        );
    }

    #[test]
    fn references_past_the_required_insert_count_fail() {
        let mut d = Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 220, 1);
        d.on_encoder_stream(&hex(
            "3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468",
        ))
        .unwrap();
        // Required Insert Count 1, Base 1: post-base index 0 is entry 1, not below 1.
        assert_eq!(
            decode_on(&mut d, 0, &hex("0200 10")),
            Err(QpackError::Decompression(Malformed::DynamicReference))
        );
        // Relative index past Base.
        assert_eq!(
            decode_on(&mut d, 0, &hex("0200 81")),
            Err(QpackError::Decompression(Malformed::DynamicReference))
        );
        // A literal with a dynamic name reference (0x40, relative 0): entry 0's name.
        assert_eq!(
            decode_on(&mut d, 0, &hex("0200 40 0178")),
            Ok(fields(&[(":authority", "x")]))
        );
    }

    /// RFC 9204 §2.1.2, §2.2.1, §4.5.1.1: the Required Insert Count is the largest
    /// referenced absolute index + 1, never more; an inflated one is QPACK_DECOMPRESSION_FAILED,
    /// whether the table already holds that many entries or the section would block.
    #[test]
    fn an_inflated_required_insert_count_fails() {
        let error = QpackError::Decompression(Malformed::RequiredInsertCount);
        let inflated = Err(error);
        let mut d = Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 220, 1);
        d.on_encoder_stream(&hex(
            "3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468",
        ))
        .unwrap();
        // Two entries inserted. Required Insert Count 2 (encoded 3), Base 2: relative 0
        // is entry 1, the largest reference: exact, decodes.
        assert_eq!(
            decode_on(&mut d, 0, &hex("0300 80")),
            Ok(fields(&[(":path", "/sample/path")]))
        );
        // Count 2, but only entry 0 (relative 1) is referenced: one too many.
        assert_eq!(decode_on(&mut d, 4, &hex("0300 81")), inflated);
        // Count 2 and no dynamic reference at all (static :path /).
        assert_eq!(decode_on(&mut d, 4, &hex("0300 c1")), inflated);
        // Count 2, with the reference only in a literal's name.
        assert_eq!(decode_on(&mut d, 4, &hex("0300 41 0178")), inflated);
        let mut sink = |_: &[u8], _: &[u8]| panic!("must not decode");
        // Count 3 (encoded 4), Base 3, referencing only entry 1 (relative 1): more than
        // the table holds, so it would have blocked, waiting for an insert it never needs.
        assert_eq!(d.decode(8, &hex("0400 81"), &mut sink), Err(error));
        // The same with post-base references: Count 3, Base 1 (delta 1, sign bit),
        // post-base 0 is entry 1.
        assert_eq!(d.decode(8, &hex("0481 10"), &mut sink), Err(error));
        assert!(d.blocked.is_empty(), "no stream was held");
        // Honest counts still block and decode: Count 3, Base 3, relative 0 is entry 2.
        assert_eq!(
            d.decode(8, &hex("0400 80"), &mut sink),
            Ok(SectionStatus::Blocked)
        );
    }

    #[test]
    fn blocked_streams_are_bounded_by_our_setting() {
        let mut d = Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 220, 1);
        d.on_encoder_stream(&hex("3fbd01")).unwrap();
        let needs_one = hex("0200 80");
        let mut sink = |_: &[u8], _: &[u8]| panic!("blocked");
        assert_eq!(
            d.decode(4, &needs_one, &mut sink),
            Ok(SectionStatus::Blocked)
        );
        // Trying the same stream again does not count twice.
        assert_eq!(
            d.decode(4, &needs_one, &mut sink),
            Ok(SectionStatus::Blocked)
        );
        assert_eq!(
            d.decode(8, &needs_one, &mut sink),
            Err(QpackError::Decompression(Malformed::TooManyBlockedStreams))
        );
        // Once the insert arrives stream 4 decodes, and its slot is free again.
        d.on_encoder_stream(&hex("c00f7777772e6578616d706c652e636f6d"))
            .unwrap();
        assert_eq!(
            decode_on(&mut d, 4, &needs_one),
            Ok(fields(&[(":authority", "www.example.com")]))
        );
        assert_eq!(
            d.decode(8, &hex("0300 80"), &mut sink),
            Ok(SectionStatus::Blocked)
        );
        // Without blocked streams allowed, any blocking section fails.
        let mut d = Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 220, 0);
        d.on_encoder_stream(&hex("3fbd01")).unwrap();
        assert_eq!(
            d.decode(4, &needs_one, &mut sink),
            Err(QpackError::Decompression(Malformed::TooManyBlockedStreams))
        );
    }

    #[test]
    fn encoder_stream_errors_with_a_table() {
        let err = |m| Err(QpackError::EncoderStream(m));
        let with_capacity = || {
            let mut d = Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 220, 1);
            d.on_encoder_stream(&hex("3fbd01")).unwrap();
            d
        };
        // Capacity 221, past our 220.
        assert_eq!(
            with_capacity().on_encoder_stream(&hex("3fbe01")),
            err(Malformed::TableCapacity)
        );
        // Static name index 99 does not exist.
        assert_eq!(
            with_capacity().on_encoder_stream(&hex("ff24 00")),
            err(Malformed::StaticIndex)
        );
        // Dynamic name reference and Duplicate into an empty table.
        assert_eq!(
            with_capacity().on_encoder_stream(&hex("80 00")),
            err(Malformed::DynamicReference)
        );
        assert_eq!(
            with_capacity().on_encoder_stream(&hex("00")),
            err(Malformed::DynamicReference)
        );
        // :authority (10 octets) with a 179-octet value: 221 with its 32, one past.
        let mut insert = hex("c0 7f34");
        insert.extend_from_slice(&[b'a'; 179]);
        assert_eq!(
            with_capacity().on_encoder_stream(&insert),
            err(Malformed::Insert)
        );
        // An insert longer than any that could fit, arriving in pieces.
        let mut d = with_capacity();
        let mut long = hex("c0 7f");
        integer_tail(&mut long, 5000 - 127);
        long.extend_from_slice(&[b'a'; 1000]);
        let result = long
            .chunks(100)
            .try_for_each(|piece| d.on_encoder_stream(piece));
        assert_eq!(result, err(Malformed::InstructionTooLong));
    }

    /// Appends the continuation octets of a prefix integer's `rest` past its prefix.
    fn integer_tail(dst: &mut Vec<u8>, mut rest: usize) {
        while rest >= 0x80 {
            dst.push(0x80 | (rest & 0x7f) as u8);
            rest >>= 7;
        }
        dst.push(rest as u8);
    }

    #[test]
    fn a_warm_table_inserts_without_allocating_more() {
        // The table's buffers are sized to its capacity at the first insert, and the
        // scratch to the largest string: later inserts and lookups reuse them.
        let mut d = Decoder::new(DEFAULT_MAX_FIELD_SECTION_SIZE, 4096, 16);
        d.on_encoder_stream(&hex("3f e1 1f")).unwrap();
        let insert = |i: usize| {
            let mut buf = vec![0x4a];
            buf.extend_from_slice(b"custom-key");
            let value = format!("value-{:04}", i % 1000);
            buf.push(value.len() as u8);
            buf.extend_from_slice(value.as_bytes());
            buf
        };
        for i in 0..500 {
            d.on_encoder_stream(&insert(i)).unwrap();
        }
        let capacity = (d.scratch.capacity(), d.instructions.capacity());
        for i in 500..1000 {
            d.on_encoder_stream(&insert(i)).unwrap();
        }
        assert_eq!((d.scratch.capacity(), d.instructions.capacity()), capacity);
        assert_eq!(d.table.insert_count(), 1000);
    }
}
