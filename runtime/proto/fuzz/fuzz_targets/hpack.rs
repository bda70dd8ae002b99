//! The HPACK decoder: field blocks, one per record so one dynamic table lives across
//! several as on a connection, decode or fail cleanly, and the fields delivered stay
//! within the header list limit. An odd tag first lowers or raises the table limit, as
//! our SETTINGS_HEADER_TABLE_SIZE taking effect would.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wedge_proto::h2::hpack::Decoder;
use wedge_proto_fuzz::records;

/// Small limits so the fuzzer reaches eviction and the list limit quickly.
const MAX_TABLE: usize = 256;
const MAX_LIST: usize = 1024;

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::new(MAX_TABLE, MAX_LIST);
    for (tag, block) in records(data) {
        if tag & 1 == 1 {
            decoder.set_max_table_size(usize::from(tag) * 2);
        }
        let mut list = 0;
        let result = decoder.decode(block, &mut |name: &[u8], value: &[u8]| {
            list += name.len() + value.len() + 32;
        });
        assert!(list <= MAX_LIST, "{list} octets delivered past the limit");
        if result.is_err() {
            // A connection fails here: its table is no longer in step with the peer's.
            return;
        }
    }
});
