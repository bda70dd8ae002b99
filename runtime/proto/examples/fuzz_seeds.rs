//! Writes the seed corpus of each fuzz target (`fuzz/`) into `DIR/<target>/`: the
//! exchanges the unit tests drive (RFC 7541 and RFC 9204 examples, requests with bodies
//! and trailers, control frames), built with wedge-proto's own encoders. `fuzz/run.sh`
//! calls it before fuzzing; it lives here, not in the fuzz crate, to build without the
//! fuzzing instrumentation (and with the test suite, which keeps it compiling).
//!
//! cargo run -p wedge-proto --example fuzz_seeds -- DIR

use std::path::Path;

use wedge_proto::h2::StreamId;
use wedge_proto::h2::frame::{self, Setting};
use wedge_proto::h2::{ErrorCode, hpack};
use wedge_proto::h3::frame::{self as h3frame, FrameHead, FrameType};
use wedge_proto::h3::{qpack, varint};

const GET: [(&[u8], &[u8]); 4] = [
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":authority", b"example.com"),
    (b":path", b"/"),
];
const POST: [(&[u8], &[u8]); 5] = [
    (b":method", b"POST"),
    (b":scheme", b"https"),
    (b":authority", b"example.com"),
    (b":path", b"/echo"),
    (b"content-length", b"5"),
];
const TRAILERS: [(&[u8], &[u8]); 1] = [(b"x-checksum", b"abc")];

/// Appends `payload` as records `[tag, len, payload]` with `tag`, the framing the targets
/// that take a sequence of operations read (`wedge_proto_fuzz::records`).
fn record(tag: u8, payload: &[u8], out: &mut Vec<u8>) {
    if payload.is_empty() {
        out.extend_from_slice(&[tag, 0]);
    }
    for piece in payload.chunks(usize::from(u8::MAX)) {
        out.extend_from_slice(&[tag, piece.len() as u8]);
        out.extend_from_slice(piece);
    }
}

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// An HTTP/2 frame of any type, flags and stream.
fn h2_wire(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn h2_block(encoder: &mut hpack::Encoder, fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut block = Vec::new();
    encoder.encode(fields.iter().copied(), &mut block);
    block
}

/// HTTP/2 frames a client sends after its preface: the exchanges of the conn tests, each
/// with its own HPACK encoder as each connection has.
fn h2_exchanges() -> Vec<Vec<u8>> {
    let settings = || {
        let mut out = Vec::new();
        frame::encode_settings(&mut out, &[Setting::InitialWindowSize(1 << 20)]);
        out
    };
    let stream = StreamId::new;
    let mut enc = hpack::Encoder::default();
    let mut get = settings();
    frame::encode_headers(&mut get, stream(1), &h2_block(&mut enc, &GET), true, 16_384);
    let mut enc = hpack::Encoder::default();
    let mut post = settings();
    frame::encode_headers(
        &mut post,
        stream(3),
        &h2_block(&mut enc, &POST),
        false,
        16_384,
    );
    frame::encode_data_head(&mut post, stream(3), 5, false);
    post.extend_from_slice(b"hello");
    frame::encode_headers(
        &mut post,
        stream(3),
        &h2_block(&mut enc, &TRAILERS),
        true,
        16_384,
    );
    let mut enc = hpack::Encoder::default();
    let mut control = settings();
    frame::encode_settings_ack(&mut control);
    frame::encode_ping(&mut control, [1; 8], false);
    frame::encode_window_update(&mut control, StreamId::CONNECTION, 1000);
    frame::encode_headers(
        &mut control,
        stream(5),
        &h2_block(&mut enc, &POST),
        false,
        16_384,
    );
    control.extend(h2_wire(0x2, 0, 5, &[0, 0, 0, 1, 16]));
    frame::encode_window_update(&mut control, stream(5), 1000);
    frame::encode_rst_stream(&mut control, stream(5), ErrorCode::Cancel);
    frame::encode_goaway(&mut control, stream(0), ErrorCode::NoError, b"bye");
    // A head split over HEADERS and CONTINUATION, a padded DATA, an unknown type.
    let mut enc = hpack::Encoder::default();
    let block = h2_block(&mut enc, &POST);
    let mut split = settings();
    split.extend(h2_wire(0x1, 0, 9, &block[..3]));
    split.extend(h2_wire(0x9, 0x4, 9, &block[3..]));
    split.extend(h2_wire(
        0x0,
        0x9,
        9,
        &[2, b'h', b'e', b'l', b'l', b'o', 0, 0],
    ));
    split.extend(h2_wire(0xbb, 0, 0, b"grease"));
    vec![get, post, control, split]
}

/// HPACK blocks from RFC 7541 Appendix C, one table across each example's requests.
fn hpack_seeds() -> Vec<Vec<u8>> {
    let c3 = [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ];
    let c4 = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ];
    let c5 = [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
    ];
    let sizes = ["3f e1 1f", "3f 21 82", "20"];
    [&c3[..], &c4[..], &c5[..], &sizes[..]]
        .iter()
        .map(|blocks| {
            let mut out = Vec::new();
            for block in blocks.iter() {
                record(0, &hex(block), &mut out);
            }
            out
        })
        .collect()
}

fn h3_frame_of(ty: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let head = FrameHead {
        ty: FrameType::from_u64(ty),
        len: payload.len() as u64,
    };
    head.encode(&mut out);
    out.extend_from_slice(payload);
    out
}

fn h3_headers(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut section = Vec::new();
    qpack::Encoder::default().encode(fields.iter().copied(), &mut section);
    let mut out = Vec::new();
    h3frame::encode_headers(&section, &mut out);
    out
}

/// A client's control stream opening: its type, then SETTINGS with a grease entry.
fn h3_control() -> Vec<u8> {
    let mut out = vec![0x00];
    h3frame::encode_settings(
        &[
            h3frame::Setting::MaxFieldSectionSize(8192),
            h3frame::Setting::Unknown { id: 0x21, value: 1 },
        ],
        &mut out,
    );
    out
}

/// A request stream: HEADERS, DATA, trailers.
fn h3_post() -> Vec<u8> {
    let mut out = h3_headers(&POST);
    h3frame::encode_data_head(5, &mut out);
    out.extend_from_slice(b"hello");
    out.extend(h3_headers(&TRAILERS));
    out
}

/// RFC 9204 Appendix B: encoder stream instructions and the sections that use them.
const B_ENCODER: &str = "3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468";
const B_SECTION: &str = "0381 10 11";
const B3_INSERT: &str = "4a637573746f6d2d6b65790c637573746f6d2d76616c7565";

fn h3_frame_seeds() -> Vec<Vec<u8>> {
    let mut all = vec![0];
    all.extend(h3_control()[1..].iter());
    all.extend(h3_post());
    all.extend(h3_frame_of(0x7, &[0x04]));
    all.extend(h3_frame_of(0xd, &[0x40, 0x10]));
    all.extend(h3_frame_of(0x3, &[0x01]));
    all.extend(h3_frame_of(0x5, &hex("01 0000 d1")));
    all.extend(h3_frame_of(0x21, b"grease"));
    let mut small = vec![3];
    small.extend(h3_post());
    let mut varint_only = vec![0];
    varint::encode(varint::MAX, &mut varint_only);
    vec![all, small, varint_only]
}

fn qpack_seeds() -> Vec<Vec<u8>> {
    let mut walk = Vec::new();
    record(1, &hex("0000 510b 2f69 6e64 6578 2e68 746d 6c"), &mut walk);
    record(0, &hex(B_ENCODER), &mut walk);
    record(1 | 1 << 2, &hex(B_SECTION), &mut walk);
    record(0, &hex(B3_INSERT), &mut walk);
    record(1 | 2 << 2, &hex("0500 80 c1 81"), &mut walk);
    record(2 | 2 << 2, &[], &mut walk);
    record(3, &[0x84, 0x01], &mut walk);
    let mut statics = Vec::new();
    let mut section = Vec::new();
    qpack::Encoder::default().encode(POST.iter().copied(), &mut section);
    record(1, &section, &mut statics);
    vec![walk, statics]
}

fn h3_conn_seeds() -> Vec<Vec<u8>> {
    // Tags: stream index 0 = request stream 0, 1 = stream 4, 3 = uni stream 2,
    // 4 = uni stream 6; 0x08 = FIN.
    let mut plain = Vec::new();
    record(3, &h3_control(), &mut plain);
    let mut get = h3_headers(&GET);
    get.extend(h3_frame_of(0x21, b""));
    record(0x08, &get, &mut plain);
    record(1 | 0x08, &h3_post(), &mut plain);
    // The client's encoder stream (type 2) fills the table; a section then refers to it,
    // first arriving before the inserts it needs (blocked), then after.
    let mut dynamic = Vec::new();
    record(3, &h3_control(), &mut dynamic);
    // B.2's section, with the static :method GET and :scheme https a request needs.
    let section = hex(&format!("{B_SECTION} d1 d7"));
    let mut blocked = Vec::new();
    h3frame::encode_headers(&section, &mut blocked);
    record(0x08, &blocked, &mut dynamic);
    let mut encoder_stream = vec![0x02];
    encoder_stream.extend(hex(B_ENCODER));
    record(4, &encoder_stream, &mut dynamic);
    let mut after = Vec::new();
    h3frame::encode_headers(&section, &mut after);
    record(1 | 0x08, &after, &mut dynamic);
    vec![plain, dynamic]
}

fn write(dir: &Path, target: &str, seeds: &[Vec<u8>]) {
    let dir = dir.join(target);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, seed) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), seed).unwrap();
    }
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: fuzz_seeds DIR");
    let dir = Path::new(&dir);
    let h2 = h2_exchanges();
    // Frame parsing sees the exchanges alone; the connection sees them after the preface
    // (which it is given), in pieces of 1, 7 and 256 octets.
    let frames: Vec<Vec<u8>> = h2.iter().map(|e| [&[1][..], e].concat()).collect();
    let conn: Vec<Vec<u8>> = h2
        .iter()
        .zip([0, 6, 255, 255])
        .map(|(e, piece)| [&[piece][..], e].concat())
        .collect();
    write(dir, "h2_frame", &frames);
    write(dir, "h2_conn", &conn);
    write(dir, "hpack", &hpack_seeds());
    write(dir, "h3_frame", &h3_frame_seeds());
    write(dir, "qpack", &qpack_seeds());
    write(dir, "h3_conn", &h3_conn_seeds());
}
