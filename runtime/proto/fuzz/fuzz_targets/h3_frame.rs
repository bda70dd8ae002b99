//! The HTTP/3 frame codec and QUIC varints: whole-buffer decoding and the streaming
//! reader (fed in pieces whose size the first octet picks) agree and never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wedge_proto::h3::frame::{Frame, FrameReader, Item};
use wedge_proto::h3::varint;

/// What a caller would let the reader buffer for one frame (it checks heads first).
const MAX_BUFFERED: u64 = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, input)) = data.split_first() else {
        return;
    };
    if let Some((value, used)) = varint::decode(input) {
        // Longer encodings than needed are valid (RFC 9000 §16); ours is the shortest.
        let shortest = varint::encoded_len(value);
        assert!(shortest <= used);
        let mut again = Vec::new();
        varint::encode(value, &mut again);
        assert_eq!(varint::decode(&again), Some((value, shortest)));
    }

    let mut whole = Vec::new();
    let mut buf = input;
    while let Ok(Some((frame, used))) = Frame::decode(buf) {
        whole.push(format!("{frame:?}"));
        buf = &buf[used..];
    }

    // The same octets through the streaming reader, in pieces of 1..=256 octets.
    let mut reader = FrameReader::default();
    let mut streamed = 0;
    for chunk in input.chunks(usize::from(piece) + 1) {
        let mut pos = 0;
        loop {
            match reader.next(chunk, &mut pos) {
                Ok(Some(Item::Head(head))) if head.len > MAX_BUFFERED => return,
                Ok(Some(Item::Frame(_))) => streamed += 1,
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
            assert!(pos <= chunk.len());
        }
    }
    // DATA and unknown frames are streamed, not delivered whole: only the others count.
    let buffered = whole
        .iter()
        .filter(|f| !f.starts_with("Data") && !f.starts_with("Unknown"))
        .count();
    assert_eq!(streamed, buffered);
});
