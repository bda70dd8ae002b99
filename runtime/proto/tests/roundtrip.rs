//! Property-style tests over the public API, driven by a small seeded generator so any
//! failure replays: random header lists through Encoder → HEADERS/CONTINUATION → Decoder,
//! and random octets into the decoders, which must answer without panicking.

use wedge_proto::h2::StreamId;
use wedge_proto::h2::frame::FrameHead;
use wedge_proto::h2::frame::{Frame, encode_headers};
use wedge_proto::h2::hpack::{Decoder, Encoder};

/// xorshift64*: deterministic, no dependencies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }
}

const NAMES: [&str; 12] = [
    ":status",
    "content-type",
    "content-length",
    "cache-control",
    "set-cookie",
    "date",
    "server",
    "vary",
    "x-request-id",
    "authorization",
    "location",
    "etag",
];

fn random_field(rng: &mut Rng, recent: &[(Vec<u8>, Vec<u8>)]) -> (Vec<u8>, Vec<u8>) {
    let printable: Vec<u8> = (0x20..0x7f).collect();
    let any: Vec<u8> = (0..=255).collect();
    match rng.below(10) {
        // Repeats make the dynamic table matter.
        0..=2 if !recent.is_empty() => recent[rng.below(recent.len())].clone(),
        3 => (b":status".to_vec(), rng.bytes(3, b"0123456789")),
        4 => {
            let (name_len, value_len) = (1 + rng.below(20), rng.below(40));
            (
                rng.bytes(name_len, b"abcdefghijklmnopqrstuvwxyz-"),
                rng.bytes(value_len, &any),
            )
        }
        // Now and then a value too big to index, or to fit the table at all.
        5 => {
            let len = 1000 + rng.below(5000);
            (b"x-big".to_vec(), rng.bytes(len, &printable))
        }
        _ => {
            let name = NAMES[rng.below(NAMES.len())].as_bytes().to_vec();
            let len = rng.below(60);
            (name, rng.bytes(len, &printable))
        }
    }
}

/// Splits a block into frames as the peer would, then reassembles the fragments.
fn through_frames(block: &[u8], max_frame_size: u32) -> Vec<u8> {
    let mut wire = Vec::new();
    encode_headers(&mut wire, StreamId::new(1), block, true, max_frame_size);
    let (mut rest, mut assembled) = (&wire[..], Vec::new());
    while let Some((frame, used)) = Frame::parse(rest, max_frame_size).unwrap() {
        match frame {
            Frame::Headers(h) => assembled.extend_from_slice(h.fragment),
            Frame::Continuation(c) => assembled.extend_from_slice(c.fragment),
            other => panic!("unexpected {other:?}"),
        }
        rest = &rest[used..];
    }
    assert!(rest.is_empty());
    assembled
}

#[test]
fn random_header_lists_round_trip() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(4096, 1 << 20);
        let mut recent: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut block = Vec::new();
        for round in 0..60 {
            if rng.below(8) == 0 {
                // Our SETTINGS_HEADER_TABLE_SIZE changes (as acknowledged) and the encoder,
                // capped at 4096, follows it.
                let size = [0, 1, 64, 256, 4096, 65_536][rng.below(6)];
                decoder.set_max_table_size(size);
                encoder.set_peer_max_table_size(size);
            }
            let fields: Vec<(Vec<u8>, Vec<u8>)> = (0..rng.below(25))
                .map(|_| random_field(&mut rng, &recent))
                .collect();
            block.clear();
            encoder.encode(fields.iter().map(|(n, v)| (&n[..], &v[..])), &mut block);
            let max_frame_size = [16_384, 100, 1][rng.below(3)];
            let assembled = through_frames(&block, max_frame_size);
            let mut decoded = Vec::new();
            decoder
                .decode(&assembled, &mut |n: &[u8], v: &[u8]| {
                    decoded.push((n.to_vec(), v.to_vec()))
                })
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            assert_eq!(decoded, fields, "seed {seed} round {round}");
            recent.extend(fields);
            let keep = recent.len().saturating_sub(30);
            recent.drain(..keep);
        }
    }
}

#[test]
fn random_octets_never_panic_the_hpack_decoder() {
    let mut rng = Rng(0x5eed);
    let any: Vec<u8> = (0..=255).collect();
    let mut decoder = Decoder::new(256, 1024);
    for _ in 0..20_000 {
        let len = rng.below(64);
        let block = rng.bytes(len, &any);
        let mut count = 0usize;
        if decoder
            .decode(&block, &mut |_: &[u8], _: &[u8]| count += 1)
            .is_err()
        {
            // A connection would be gone after a compression error; start afresh.
            decoder = Decoder::new(256, 1024);
        }
    }
}

#[test]
fn random_octets_never_panic_the_frame_decoder() {
    let mut rng = Rng(0xf4a3e);
    let any: Vec<u8> = (0..=255).collect();
    for _ in 0..50_000 {
        let len = rng.below(40);
        let mut buf = rng.bytes(len, &any);
        // Mostly plausible headers: small lengths and known types.
        if buf.len() >= FrameHead::SIZE && rng.below(4) != 0 {
            let payload = (buf.len() - FrameHead::SIZE) as u32;
            buf[..3].copy_from_slice(&payload.to_be_bytes()[1..]);
            buf[3] %= 12;
        }
        if let Ok(Some((_, used))) = Frame::parse(&buf, 16_384) {
            assert!(used <= buf.len());
        }
    }
}
