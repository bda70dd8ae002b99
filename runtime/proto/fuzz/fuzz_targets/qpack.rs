//! The QPACK decoder and encoder-side instruction reader: encoder stream octets, field
//! sections on a few streams, cancellations and the peer's decoder stream, in any order,
//! succeed or fail cleanly; decoded sections stay within the field section limit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wedge_proto::h3::qpack::{Decoder, Encoder, QpackError};
use wedge_proto_fuzz::records;

/// Small limits so the fuzzer reaches eviction, blocking and the size limit quickly.
const MAX_SECTION: usize = 1024;
const MAX_TABLE: usize = 256;
const MAX_BLOCKED: usize = 2;

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::new(MAX_SECTION, MAX_TABLE, MAX_BLOCKED);
    let mut encoder = Encoder::default();
    let mut instructions = Vec::new();
    for (tag, payload) in records(data) {
        // Four request streams: 0, 4, 8, 12.
        let stream = u64::from(tag >> 2 & 3) * 4;
        let fatal = match tag & 3 {
            0 => decoder.on_encoder_stream(payload).is_err(),
            1 => {
                let mut size = 0;
                let result = decoder.decode(stream, payload, &mut |n: &[u8], v: &[u8]| {
                    size += n.len() + v.len() + 32;
                });
                assert!(size <= MAX_SECTION, "{size} octets decoded past the limit");
                matches!(result, Err(QpackError::Decompression(_)))
            }
            2 => {
                decoder.cancel_stream(stream);
                decoder.take_instructions(&mut instructions);
                false
            }
            _ => encoder.on_decoder_stream(payload).is_err(),
        };
        if fatal {
            // A connection error: nothing more is read.
            return;
        }
    }
});
