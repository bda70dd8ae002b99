//! The HPACK encoder (RFC 7541 §6, §7), tuned for responses.

use super::static_table::{FIRST_DYNAMIC, static_find};
use crate::field_coding::dynamic_table::{DynamicTable, entry_size};
use crate::field_coding::integer;
use crate::field_coding::string::{self, Tie};

/// The table size the peer's decoder starts with (RFC 7541 §4.2, RFC 9113 §6.5.2).
const INITIAL_TABLE_SIZE: usize = 4096;

/// Encodes field blocks for one connection; keep it for the connection's life.
pub struct Encoder {
    table: DynamicTable,
    /// The most table we keep for this peer, whatever it allows: memory per connection.
    table_size_limit: usize,
    /// Smallest and latest table size chosen since the last block, owed to the peer as
    /// size updates at the start of the next one (§4.2).
    pending_update: Option<(usize, usize)>,
}

impl Default for Encoder {
    /// An encoder that uses at most the default 4096-octet table.
    fn default() -> Self {
        Encoder::new(INITIAL_TABLE_SIZE)
    }
}

impl Encoder {
    /// An encoder that keeps at most `table_size_limit` octets of dynamic table, even if the
    /// peer allows more.
    pub fn new(table_size_limit: usize) -> Self {
        let mut encoder = Encoder {
            table: DynamicTable::new(INITIAL_TABLE_SIZE),
            table_size_limit,
            pending_update: None,
        };
        encoder.set_peer_max_table_size(INITIAL_TABLE_SIZE);
        encoder
    }

    /// Applies the peer's SETTINGS_HEADER_TABLE_SIZE; the change is signalled at the start
    /// of the next block.
    pub fn set_peer_max_table_size(&mut self, size: usize) {
        let size = size.min(self.table_size_limit);
        self.pending_update = match self.pending_update {
            None if size == self.table.max_size() => None,
            None => Some((size, size)),
            Some((smallest, _)) => Some((smallest.min(size), size)),
        };
    }

    /// Appends the field block for `fields` (names lowercase, as HTTP/2 requires).
    ///
    /// Fields in a table are indexed (`:status: 200` is one octet); others are literals,
    /// added to the table unless unique per response or sensitive (`set-cookie`,
    /// `authorization`, ... are never indexed, here or by intermediaries); strings are
    /// Huffman-coded unless that would be longer.
    pub fn encode<'f>(
        &mut self,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        dst: &mut Vec<u8>,
    ) {
        self.signal_size_updates(dst);
        for (name, value) in fields {
            self.encode_field(name, value, dst);
        }
    }

    /// Emits the owed size updates (§6.3): the smallest size reached, if below the current
    /// one, so the peer evicts as we did, then the final size.
    fn signal_size_updates(&mut self, dst: &mut Vec<u8>) {
        let Some((smallest, latest)) = self.pending_update.take() else {
            return;
        };
        for size in [smallest, latest] {
            if size != self.table.max_size() {
                integer::encode(dst, 0x20, 5, size);
                self.table.set_max_size(size);
            }
        }
    }

    fn encode_field(&mut self, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
        let in_static = static_find(name, value);
        let in_dynamic = self.table.find(name, value);
        let full_match = match (in_static, in_dynamic) {
            (Some((i, true)), _) => Some(i),
            (_, Some((i, true))) => Some(FIRST_DYNAMIC + i),
            _ => None,
        };
        if let Some(index) = full_match {
            integer::encode(dst, 0x80, 7, index);
            return;
        }
        let name_index = in_static
            .map(|(i, _)| i)
            .or(in_dynamic.map(|(i, _)| FIRST_DYNAMIC + i));
        let representation = if is_sensitive(name) {
            Literal::NeverIndexed
        } else if worth_indexing(name) && 2 * entry_size(name, value) <= self.table.max_size() {
            Literal::IncrementalIndexing
        } else {
            Literal::WithoutIndexing
        };
        let (flags, prefix_bits) = match representation {
            Literal::IncrementalIndexing => (0x40, 6),
            Literal::WithoutIndexing => (0x00, 4),
            Literal::NeverIndexed => (0x10, 4),
        };
        integer::encode(dst, flags, prefix_bits, name_index.unwrap_or(0));
        if name_index.is_none() {
            string::encode(name, 0x00, 7, Tie::Huffman, dst);
        }
        string::encode(value, 0x00, 7, Tie::Huffman, dst);
        if representation == Literal::IncrementalIndexing {
            self.table.insert(name, value);
        }
    }
}

/// The literal representations (§6.2).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Literal {
    IncrementalIndexing,
    WithoutIndexing,
    NeverIndexed,
}

/// Fields whose values are secrets: never indexed, so no one sharing the connection's
/// compression context can probe them (§7.1.3).
fn is_sensitive(name: &[u8]) -> bool {
    matches!(
        name,
        b"set-cookie" | b"cookie" | b"authorization" | b"proxy-authorization"
    )
}

/// Fields whose values differ on nearly every message: indexing them only evicts entries
/// that would have been reused. Entries also have to fit in half the table (checked by the
/// caller) so that one large value cannot flush everything else.
fn worth_indexing(name: &[u8]) -> bool {
    !matches!(
        name,
        b":path" | b"content-length" | b"content-range" | b"etag" | b"last-modified" | b"age"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::hpack::Decoder;
    use crate::h2::hpack::test_util::decode_all;
    use crate::test_util::hex;

    fn encode(e: &mut Encoder, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut dst = Vec::new();
        e.encode(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut dst,
        );
        dst
    }

    #[test]
    fn status_200_is_one_octet() {
        let mut e = Encoder::default();
        assert_eq!(encode(&mut e, &[(":status", "200")]), [0x88]);
        assert_eq!(encode(&mut e, &[(":status", "404")]), [0x8d]);
        assert_eq!(
            encode(&mut e, &[(":status", "500"), (":status", "204")]),
            [0x8e, 0x89]
        );
    }

    #[test]
    fn rfc_c_4_requests_byte_for_byte() {
        let mut e = Encoder::default();
        let req1 = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ];
        assert_eq!(
            encode(&mut e, &req1),
            hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")
        );
        let mut req2 = req1.to_vec();
        req2.push(("cache-control", "no-cache"));
        assert_eq!(encode(&mut e, &req2), hex("8286 84be 5886 a8eb 1064 9cbf"));
        let req3 = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ];
        let expected = hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
        assert_eq!(encode(&mut e, &req3), expected);
    }

    #[test]
    fn rfc_c_6_responses_byte_for_byte_except_set_cookie() {
        let mut e = Encoder::default();
        e.set_peer_max_table_size(256);
        let resp1 = [
            (":status", "302"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ];
        // The RFC's first block, after the size update to 256 the new setting requires.
        let expected = hex("3fe1 01
             4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3");
        assert_eq!(encode(&mut e, &resp1), expected);
        let mut resp2 = resp1;
        resp2[0] = (":status", "307");
        assert_eq!(encode(&mut e, &resp2), hex("4883 640e ffc1 c0bf"));
        let resp3 = [
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
        // As C.6.3, but set-cookie is never indexed (1f28: name index 55 on 4 bits).
        let expected = hex(
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             1f28 ad94 e782 1dd7 f2e6 c7b3 35df dfcd 5b39 60d5 af27 087f 3672 c1ab 270f b529
             1f95 8731 6065 c003 ed4e e5b1 063d 5007",
        );
        assert_eq!(encode(&mut e, &resp3), expected);
        assert_eq!(e.table.size(), 52 + 65 + 42 + 63);
    }

    #[test]
    fn sensitive_fields_are_never_indexed() {
        // "[]" is 26 bits Huffman-coded, so it stays raw and the octets are easy to read.
        let mut e = Encoder::default();
        assert_eq!(
            encode(&mut e, &[("authorization", "[]")]),
            [0x1f, 0x08, 0x02, b'[', b']']
        );
        assert_eq!(
            encode(&mut e, &[("cookie", "[]")]),
            [0x1f, 0x11, 0x02, b'[', b']']
        );
        let block = encode(&mut e, &[("proxy-authorization", "[]")]);
        assert_eq!(block, [0x1f, 0x22, 0x02, b'[', b']']);
        let block = encode(&mut e, &[("set-cookie", "[]")]);
        assert_eq!(block, [0x1f, 0x28, 0x02, b'[', b']']);
        assert_eq!(e.table.len(), 0);
        // Sent again, they are still literals.
        assert_eq!(
            encode(&mut e, &[("cookie", "[]")]),
            [0x1f, 0x11, 0x02, b'[', b']']
        );
    }

    #[test]
    fn unique_and_oversized_values_are_not_indexed() {
        let mut e = Encoder::default();
        let block = encode(&mut e, &[("content-length", "1234"), ("etag", "\"abc\"")]);
        assert_eq!(block[0], 0x0f); // literal without indexing, name index 28 on 4 bits
        assert_eq!(block[1], 28 - 15);
        assert_eq!(e.table.len(), 0);
        // 2048 - 32 - 6 octets of value is exactly half the table; one more is not indexed.
        let half = "v".repeat(2048 - 32 - 6);
        encode(&mut e, &[("x-long", &half)]);
        assert_eq!(e.table.len(), 1);
        let more = "v".repeat(2048 - 32 - 6 + 1);
        encode(&mut e, &[("x-long", &more)]);
        assert_eq!(e.table.len(), 1);
    }

    #[test]
    fn repeated_fields_become_one_octet() {
        let mut e = Encoder::default();
        let fields = [
            (":status", "200"),
            ("content-type", "text/plain"),
            ("server", "wedge"),
        ];
        let first = encode(&mut e, &fields);
        assert_eq!(first[0], 0x88);
        assert_eq!(first[1], 0x40 | 31);
        assert_eq!(encode(&mut e, &fields), [0x88, 0xbf, 0xbe]);
    }

    #[test]
    fn literal_names_that_are_not_in_a_table() {
        let mut e = Encoder::default();
        // "x-a" Huffman-coded is 3 octets too: equal goes Huffman.
        let block = encode(&mut e, &[("x-a", "")]);
        let mut name = Vec::new();
        crate::field_coding::huffman::encode(b"x-a", &mut name);
        assert_eq!(name.len(), 3);
        assert_eq!(block[..2], [0x40, 0x83]);
        assert_eq!(block[2..5], name[..]);
        assert_eq!(block[5..], [0x80]); // empty value: zero octets either way
        // A name only in the dynamic table is referenced there.
        let block = encode(&mut e, &[("x-a", "b")]);
        assert_eq!(block[0], 0x40 | 62);
    }

    #[test]
    fn peer_table_size_changes_are_signalled_once_at_the_next_block() {
        let mut e = Encoder::default();
        encode(&mut e, &[("x-a", "1")]);
        // Same as the default: nothing to signal.
        e.set_peer_max_table_size(4096);
        assert_eq!(encode(&mut e, &[(":status", "200")]), [0x88]);
        // Down to 0 then up to 100 between blocks: both are signalled, the entry is gone.
        e.set_peer_max_table_size(0);
        e.set_peer_max_table_size(100);
        let block = encode(&mut e, &[(":status", "200")]);
        assert_eq!(block, [0x20, 0x3f, 0x45, 0x88]);
        assert_eq!((e.table.len(), e.table.max_size()), (0, 100));
        assert_eq!(encode(&mut e, &[(":status", "200")]), [0x88]);
        // Up beyond our limit: capped at it.
        e.set_peer_max_table_size(1 << 20);
        assert_eq!(encode(&mut e, &[]), [0x3f, 0xe1, 0x1f]);
        assert_eq!(e.table.max_size(), 4096);
    }

    #[test]
    fn a_limit_below_the_default_is_signalled_in_the_first_block() {
        let mut e = Encoder::new(0);
        assert_eq!(encode(&mut e, &[("server", "wedge")])[0], 0x20);
        assert_eq!(e.table.max_size(), 0);
        e.set_peer_max_table_size(65_536);
        assert_eq!(encode(&mut e, &[(":status", "200")]), [0x88]);
    }

    #[test]
    fn decoder_reads_what_encoder_writes_across_table_changes() {
        let mut e = Encoder::default();
        let mut d = Decoder::default();
        let fields = [
            (":status", "200"),
            ("content-type", "application/json"),
            ("set-cookie", "session=secret"),
            ("x-request-id", "abc123"),
            ("content-length", "17"),
        ];
        for round in 0..6 {
            if round == 3 {
                e.set_peer_max_table_size(64);
                e.set_peer_max_table_size(300);
            }
            let block = encode(&mut e, &fields);
            let decoded = decode_all(&mut d, &block).unwrap();
            let expected: Vec<(String, String)> =
                fields.iter().map(|&(n, v)| (n.into(), v.into())).collect();
            assert_eq!(decoded, expected, "round {round}");
        }
    }
}
