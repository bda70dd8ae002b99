//! The HPACK decoder (RFC 7541 §3, §6) with the limits a server needs (RFC 9113 §6.5.2).

use super::static_table::{FIRST_DYNAMIC, STATIC_TABLE, field};
use super::{CompressionError, HpackError};
use crate::field_coding::FieldSink;
use crate::field_coding::dynamic_table::{DynamicTable, entry_size};
use crate::field_coding::integer;
use crate::field_coding::string::{Decoded, Literal};

/// SETTINGS_MAX_HEADER_LIST_SIZE we enforce unless told otherwise: 16 KiB.
pub const DEFAULT_MAX_HEADER_LIST_SIZE: usize = 16 * 1024;

/// Decodes field blocks for one connection; keep it for the connection's life.
///
/// Fields reach the sink as slices into the block, the dynamic table or a scratch buffer
/// the decoder reuses, so once the table and scratch have grown to their working size a
/// block decodes without allocating.
pub struct Decoder {
    table: DynamicTable,
    /// Our SETTINGS_HEADER_TABLE_SIZE: the largest table the peer may ask for.
    max_table_size: usize,
    /// Set when our limit fell below the table's size: the next block must open with a
    /// size update (§4.2).
    size_update_due: bool,
    max_header_list_size: usize,
    /// Huffman-decoded strings and copied names of the field being decoded.
    scratch: Vec<u8>,
}

impl Default for Decoder {
    /// A decoder for the default 4096-octet table and a 16 KiB header list limit.
    fn default() -> Self {
        Decoder::new(4096, DEFAULT_MAX_HEADER_LIST_SIZE)
    }
}

impl Decoder {
    /// A decoder whose table starts at `max_table_size` (the SETTINGS_HEADER_TABLE_SIZE in
    /// effect, 4096 until the peer acknowledges ours), with a header list limit.
    pub fn new(max_table_size: usize, max_header_list_size: usize) -> Self {
        Decoder {
            table: DynamicTable::new(max_table_size),
            max_table_size,
            size_update_due: false,
            max_header_list_size,
            scratch: Vec::new(),
        }
    }

    /// Applies a new SETTINGS_HEADER_TABLE_SIZE of ours, once the peer has acknowledged it.
    /// Below the current table size, the peer's next block must shrink the table first.
    pub fn set_max_table_size(&mut self, max_table_size: usize) {
        self.max_table_size = max_table_size;
        self.size_update_due = max_table_size < self.table.max_size();
    }

    /// Decodes one complete field block (all of a HEADERS' and its CONTINUATIONs'
    /// fragments), handing each field to `sink` in order.
    ///
    /// A block whose fields pass the header list limit is still decoded to its end to keep
    /// the dynamic table in step with the peer; fields from the one that crossed the limit
    /// on are not delivered and the result is [`HpackError::HeaderListTooLarge`].
    pub fn decode<S: FieldSink + ?Sized>(
        &mut self,
        block: &[u8],
        sink: &mut S,
    ) -> Result<(), HpackError> {
        let mut input = Input { block, pos: 0 };
        let mut list = ListBudget {
            used: 0,
            max: self.max_header_list_size,
            exceeded: false,
        };
        let mut at_start = true;
        while let Some(&first) = block.get(input.pos) {
            if first & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3), only before the first field (§4.2).
                if !at_start {
                    return Err(CompressionError::TableSizeUpdateNotAtStart.into());
                }
                let size = input.integer(5)?;
                if size > self.max_table_size {
                    return Err(CompressionError::TableSizeUpdateTooLarge.into());
                }
                self.table.set_max_size(size);
                self.size_update_due = false;
                continue;
            }
            if self.size_update_due {
                return Err(CompressionError::MissingTableSizeUpdate.into());
            }
            at_start = false;
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = input.integer(7)?;
                let (name, value) =
                    field(&self.table, index).ok_or(CompressionError::InvalidIndex)?;
                list.deliver(sink, name, value);
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing (§6.2.1).
                self.literal(&mut input, 6, true, &mut list, sink)?;
            } else {
                // Literal without indexing (§6.2.2) or never indexed (§6.2.3): for a server
                // that does not forward fields over HPACK the two decode alike.
                self.literal(&mut input, 4, false, &mut list, sink)?;
            }
        }
        if list.exceeded {
            return Err(HpackError::HeaderListTooLarge);
        }
        Ok(())
    }

    /// Decodes a literal field representation whose name index has `prefix_bits` bits.
    fn literal<S: FieldSink + ?Sized>(
        &mut self,
        input: &mut Input<'_>,
        prefix_bits: u8,
        indexing: bool,
        list: &mut ListBudget,
        sink: &mut S,
    ) -> Result<(), CompressionError> {
        // No string can be part of an acceptable list past this, nor fit in the table.
        let cap = self.max_header_list_size.max(self.max_table_size);
        let Decoder { table, scratch, .. } = self;
        scratch.clear();
        let name = match input.integer(prefix_bits)? {
            0 => input.string(scratch, cap)?.map(Name::Decoded),
            index if index < FIRST_DYNAMIC => Some(Name::Static(STATIC_TABLE[index - 1].0)),
            index => {
                // Copied: inserting this field may evict the entry it names (§4.4).
                let (name, _) = field(table, index).ok_or(CompressionError::InvalidIndex)?;
                scratch.extend_from_slice(name);
                Some(Name::Decoded(Decoded::Scratch(0..name.len())))
            }
        };
        let value = input.string(scratch, cap)?;
        let (Some(name), Some(value)) = (name, value) else {
            // Too long to keep: the list is over its limit and the field, bigger than the
            // table, would have emptied it.
            list.exceeded = true;
            if indexing {
                table.clear();
            }
            return Ok(());
        };
        let (name, value) = (name.resolve(scratch), value.resolve(scratch));
        list.deliver(sink, name, value);
        if indexing {
            table.insert(name, value);
        }
        Ok(())
    }
}

/// The unread rest of a block.
struct Input<'a> {
    block: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn integer(&mut self, prefix_bits: u8) -> Result<usize, CompressionError> {
        Ok(integer::read(self.block, &mut self.pos, prefix_bits)?)
    }

    /// Reads a string literal (§5.2): `None` if it is longer than `cap`, and not kept.
    fn string(
        &mut self,
        scratch: &mut Vec<u8>,
        cap: usize,
    ) -> Result<Option<Decoded<'a>>, CompressionError> {
        let literal = Literal::read(self.block, &mut self.pos, 7)?;
        Ok(literal.decode(scratch, cap)?)
    }
}

/// Where a field's name is: a decoded string, or the static table's.
enum Name<'a> {
    Static(&'static [u8]),
    Decoded(Decoded<'a>),
}

impl<'a> Name<'a> {
    fn resolve<'s>(&self, scratch: &'s [u8]) -> &'s [u8]
    where
        'a: 's,
    {
        match self {
            Name::Static(s) => s,
            Name::Decoded(d) => d.resolve(scratch),
        }
    }
}

/// Counts the header list size (RFC 9113 §6.5.2) and stops delivery once it is exceeded.
struct ListBudget {
    used: usize,
    max: usize,
    exceeded: bool,
}

impl ListBudget {
    fn deliver<S: FieldSink + ?Sized>(&mut self, sink: &mut S, name: &[u8], value: &[u8]) {
        if self.exceeded {
            return;
        }
        self.used += entry_size(name, value);
        if self.used > self.max {
            self.exceeded = true;
            return;
        }
        sink.field(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field_coding::huffman;
    use crate::h2::hpack::test_util::decode_all;
    use crate::test_util::hex;

    /// Decodes `block` and checks the fields and the table afterwards, newest entry first.
    fn check(
        d: &mut Decoder,
        block: &str,
        fields: &[(&str, &str)],
        table: &[(&str, &str)],
        size: usize,
    ) {
        assert_eq!(
            decode_all(d, &hex(block)),
            Ok(fields.iter().map(|&(n, v)| (n.into(), v.into())).collect())
        );
        let entries: Vec<(&[u8], &[u8])> = (0..d.table.len())
            .map(|i| d.table.get(i).unwrap())
            .collect();
        let expected: Vec<(&[u8], &[u8])> = table
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        assert_eq!(entries, expected);
        assert_eq!(d.table.size(), size);
    }

    #[test]
    fn rfc_c_2_1_literal_with_indexing() {
        let mut d = Decoder::default();
        let block = "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572";
        let field = [("custom-key", "custom-header")];
        check(&mut d, block, &field, &field, 55);
    }

    #[test]
    fn rfc_c_2_2_literal_without_indexing() {
        let mut d = Decoder::default();
        check(
            &mut d,
            "040c 2f73 616d 706c 652f 7061 7468",
            &[(":path", "/sample/path")],
            &[],
            0,
        );
    }

    #[test]
    fn rfc_c_2_3_literal_never_indexed() {
        let mut d = Decoder::default();
        check(
            &mut d,
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            &[("password", "secret")],
            &[],
            0,
        );
    }

    #[test]
    fn rfc_c_2_4_indexed() {
        let mut d = Decoder::default();
        check(&mut d, "82", &[(":method", "GET")], &[], 0);
    }

    const REQ1: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
    ];
    const REQ2: [(&str, &str); 5] = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
        ("cache-control", "no-cache"),
    ];
    const REQ3: [(&str, &str); 5] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ];

    #[test]
    fn rfc_c_3_requests_without_huffman() {
        let mut d = Decoder::default();
        let t1 = [(":authority", "www.example.com")];
        check(
            &mut d,
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            &REQ1,
            &t1,
            57,
        );
        let t2 = [
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ];
        check(
            &mut d,
            "8286 84be 5808 6e6f 2d63 6163 6865",
            &REQ2,
            &t2,
            110,
        );
        let t3 = [
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ];
        let block = "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65";
        check(&mut d, block, &REQ3, &t3, 164);
    }

    #[test]
    fn rfc_c_4_requests_with_huffman() {
        let mut d = Decoder::default();
        let t1 = [(":authority", "www.example.com")];
        check(
            &mut d,
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            &REQ1,
            &t1,
            57,
        );
        let t2 = [
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ];
        check(&mut d, "8286 84be 5886 a8eb 1064 9cbf", &REQ2, &t2, 110);
        let t3 = [
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ];
        let block = "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf";
        check(&mut d, block, &REQ3, &t3, 164);
    }

    const RESP1: [(&str, &str); 4] = [
        (":status", "302"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    const RESP1_TABLE: [(&str, &str); 4] = [
        ("location", "https://www.example.com"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("cache-control", "private"),
        (":status", "302"),
    ];
    const RESP2: [(&str, &str); 4] = [
        (":status", "307"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    const RESP2_TABLE: [(&str, &str); 4] = [
        (":status", "307"),
        ("location", "https://www.example.com"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("cache-control", "private"),
    ];
    const RESP3: [(&str, &str); 6] = [
        (":status", "200"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ("location", "https://www.example.com"),
        ("content-encoding", "gzip"),
        (
            "set-cookie",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
    ];
    const RESP3_TABLE: [(&str, &str); 3] = [
        (
            "set-cookie",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
        ("content-encoding", "gzip"),
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
    ];

    #[test]
    fn rfc_c_5_responses_without_huffman() {
        let mut d = Decoder::new(256, DEFAULT_MAX_HEADER_LIST_SIZE);
        let block =
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
                     2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
                     6c65 2e63 6f6d";
        check(&mut d, block, &RESP1, &RESP1_TABLE, 222);
        check(&mut d, "4803 3330 37c1 c0bf", &RESP2, &RESP2_TABLE, 222);
        let block =
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
                     54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
                     5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
                     3d31";
        check(&mut d, block, &RESP3, &RESP3_TABLE, 215);
    }

    #[test]
    fn rfc_c_6_responses_with_huffman() {
        let mut d = Decoder::new(256, DEFAULT_MAX_HEADER_LIST_SIZE);
        let block =
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
                     2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3";
        check(&mut d, block, &RESP1, &RESP1_TABLE, 222);
        check(&mut d, "4883 640e ffc1 c0bf", &RESP2, &RESP2_TABLE, 222);
        let block =
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
                     77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
                     9587 3160 65c0 03ed 4ee5 b106 3d50 07";
        check(&mut d, block, &RESP3, &RESP3_TABLE, 215);
    }

    fn error(d: &mut Decoder, block: &str) -> HpackError {
        decode_all(d, &hex(block)).unwrap_err()
    }

    const fn compression(e: CompressionError) -> HpackError {
        HpackError::Compression(e)
    }

    #[test]
    fn invalid_indexes() {
        let mut d = Decoder::default();
        assert_eq!(
            error(&mut d, "80"),
            compression(CompressionError::InvalidIndex)
        );
        assert_eq!(
            error(&mut d, "be"),
            compression(CompressionError::InvalidIndex)
        );
        // A literal naming a missing entry, with and without indexing.
        assert_eq!(
            error(&mut d, "7e 01 61"),
            compression(CompressionError::InvalidIndex)
        );
        assert_eq!(
            error(&mut d, "0f 2f 01 61"),
            compression(CompressionError::InvalidIndex)
        );
        check(&mut d, "40 01 61 01 62", &[("a", "b")], &[("a", "b")], 34);
        check(&mut d, "be", &[("a", "b")], &[("a", "b")], 34);
        assert_eq!(
            error(&mut d, "bf"),
            compression(CompressionError::InvalidIndex)
        );
    }

    #[test]
    fn truncated_blocks() {
        let mut d = Decoder::default();
        for block in [
            "ff",
            "40",
            "40 05 61",
            "40 01 61",
            "40 01 61 81",
            "04 0c 2f73",
            "0f",
        ] {
            assert_eq!(
                error(&mut d, block),
                compression(CompressionError::Truncated),
                "{block}"
            );
        }
    }

    #[test]
    fn huffman_errors_are_compression_errors() {
        let mut d = Decoder::default();
        assert_eq!(
            error(&mut d, "04 84 ffff ffff"),
            compression(CompressionError::HuffmanEos)
        );
        assert_eq!(
            error(&mut d, "04 81 ff"),
            compression(CompressionError::HuffmanPaddingTooLong)
        );
        assert_eq!(
            error(&mut d, "04 81 18"),
            compression(CompressionError::HuffmanPaddingNotOnes)
        );
    }

    #[test]
    fn size_updates_at_block_start_only() {
        let mut d = Decoder::default();
        check(&mut d, "40 01 61 01 62", &[("a", "b")], &[("a", "b")], 34);
        // Two updates then a field: shrink to 0 (evicting), grow back to 100.
        check(
            &mut d,
            "20 3f 45 40 01 63 01 64",
            &[("c", "d")],
            &[("c", "d")],
            34,
        );
        assert_eq!(d.table.max_size(), 100);
        assert_eq!(
            error(&mut d, "82 3f e1 1f"),
            compression(CompressionError::TableSizeUpdateNotAtStart)
        );
    }

    #[test]
    fn size_update_above_our_setting_is_an_error() {
        let mut d = Decoder::default();
        check(&mut d, "3f e1 1f", &[], &[], 0); // exactly 4096
        assert_eq!(
            error(&mut d, "3f e2 1f"),
            compression(CompressionError::TableSizeUpdateTooLarge)
        );
        d.set_max_table_size(8192);
        check(&mut d, "3f e1 3f", &[], &[], 0); // 8192
        assert_eq!(d.table.max_size(), 8192);
    }

    #[test]
    fn lowering_our_setting_requires_the_peer_to_shrink_first() {
        let mut d = Decoder::default();
        check(&mut d, "40 01 61 01 62", &[("a", "b")], &[("a", "b")], 34);
        d.set_max_table_size(64);
        assert_eq!(
            error(&mut d, "82"),
            compression(CompressionError::MissingTableSizeUpdate)
        );
        let mut d = Decoder::default();
        d.set_max_table_size(64);
        assert_eq!(
            error(&mut d, "3f 22 82"),
            compression(CompressionError::TableSizeUpdateTooLarge)
        );
        check(&mut d, "3f 21 82", &[(":method", "GET")], &[], 0); // 64
        check(&mut d, "82", &[(":method", "GET")], &[], 0);
        // Raising it needs nothing from the peer.
        d.set_max_table_size(4096);
        check(&mut d, "82", &[(":method", "GET")], &[], 0);
    }

    #[test]
    fn header_list_limit_counts_32_octets_per_field() {
        // ":method: GET" counts 7 + 3 + 32 = 42.
        let mut d = Decoder::new(4096, 84);
        check(
            &mut d,
            "82 82",
            &[(":method", "GET"), (":method", "GET")],
            &[],
            0,
        );
        let mut seen = Vec::new();
        let result = d.decode(&hex("82 82 82"), &mut |n: &[u8], _: &[u8]| {
            seen.push(n.to_vec())
        });
        assert_eq!(result, Err(HpackError::HeaderListTooLarge));
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn header_list_overflow_keeps_decoding_to_stay_in_sync() {
        let mut d = Decoder::new(4096, 100);
        // A 75-octet field, then two literals with indexing past the limit.
        let mut block = vec![0x00, 0x01, b'x', 42];
        block.extend_from_slice(&[b'x'; 42]);
        block.extend_from_slice(&hex("40 01 61 01 62  40 01 63 01 64"));
        let mut seen = 0;
        let result = d.decode(&block, &mut |_: &[u8], _: &[u8]| seen += 1);
        assert_eq!(result, Err(HpackError::HeaderListTooLarge));
        assert_eq!(seen, 1);
        // Both entries made it into the table, so the next block can refer to them.
        check(
            &mut d,
            "be bf",
            &[("c", "d"), ("a", "b")],
            &[("c", "d"), ("a", "b")],
            68,
        );
    }

    #[test]
    fn hpack_bomb_is_stopped_by_the_header_list_limit() {
        // One 4000-octet entry, then 100 000 one-octet references to it: 400 MB if expanded.
        let mut d = Decoder::default();
        let mut block = vec![0x40, 0x01, b'x'];
        integer::encode(&mut block, 0, 7, 4000);
        block.extend(std::iter::repeat_n(b'y', 4000));
        block.extend(std::iter::repeat_n(0xbe, 100_000));
        let mut delivered = 0usize;
        let result = d.decode(&block, &mut |n: &[u8], v: &[u8]| {
            delivered += n.len() + v.len()
        });
        assert_eq!(result, Err(HpackError::HeaderListTooLarge));
        assert!(delivered <= DEFAULT_MAX_HEADER_LIST_SIZE, "{delivered}");
        assert_eq!(d.table.len(), 1);
    }

    #[test]
    fn huffman_string_past_the_bound_is_dropped_and_empties_the_table_it_would_have_filled() {
        // List limit 64 and table 64: strings are bounded at 64 octets.
        let mut d = Decoder::new(64, 64);
        check(&mut d, "40 01 61 01 62", &[("a", "b")], &[("a", "b")], 34);
        // A Huffman value of 80 '0's (5 bits each: 50 octets) with incremental indexing.
        let mut block = vec![0x40, 0x01, b'k'];
        let mut value = Vec::new();
        huffman::encode(&[b'0'; 80], &mut value);
        integer::encode(&mut block, 0x80, 7, value.len());
        block.extend_from_slice(&value);
        assert_eq!(
            decode_all(&mut d, &block),
            Err(HpackError::HeaderListTooLarge)
        );
        assert_eq!(d.table.len(), 0);
        assert!(
            d.scratch.capacity() <= 2 * 65 + 16,
            "{}",
            d.scratch.capacity()
        );
        // Still in sync: the next block decodes.
        check(&mut d, "82", &[(":method", "GET")], &[], 0);
    }

    #[test]
    fn literal_may_name_the_entry_its_insertion_evicts() {
        // Table of 34 + 33: inserting ("a", "cc") needs the ("a", "b") entry it names evicted.
        let mut d = Decoder::new(68, DEFAULT_MAX_HEADER_LIST_SIZE);
        check(&mut d, "40 01 61 01 62", &[("a", "b")], &[("a", "b")], 34);
        check(
            &mut d,
            "40 01 78 01 79",
            &[("x", "y")],
            &[("x", "y"), ("a", "b")],
            68,
        );
        check(&mut d, "7f 00 02 6363", &[("a", "cc")], &[("a", "cc")], 35);
    }

    #[test]
    fn warm_decoder_reuses_its_buffers() {
        let mut d = Decoder::default();
        // Indexes, Huffman strings copied to scratch, and an insertion every time.
        let block = hex("8287 85be 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
        let _ = decode_all(&mut d, &hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"));
        let _ = decode_all(&mut d, &block);
        let scratch = (d.scratch.as_ptr(), d.scratch.capacity());
        for _ in 0..100 {
            d.decode(&block, &mut |_: &[u8], _: &[u8]| {}).unwrap();
        }
        assert_eq!((d.scratch.as_ptr(), d.scratch.capacity()), scratch);
    }
}
