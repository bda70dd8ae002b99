//! A warm connection's codec allocates nothing per request (DESIGN.md §4.3): decoding a
//! request's frames and field block, then encoding the response's head, counted with a
//! counting global allocator on this thread.

use wedge_proto::h2::StreamId;
use wedge_proto::h2::frame::{Frame, encode_data_head, encode_headers};
use wedge_proto::h2::hpack::{Decoder, Encoder};

mod counting_alloc;

use counting_alloc::allocations;

/// What a connection keeps for its whole life.
struct Connection {
    decoder: Decoder,
    encoder: Encoder,
    /// The request's fields, as the engine's pooled per-stream arena would hold them.
    arena: Vec<u8>,
    block: Vec<u8>,
    out: Vec<u8>,
}

impl Connection {
    /// Serves one request arriving as `wire` (HEADERS + CONTINUATION + DATA), returning the
    /// number of request fields.
    fn serve(&mut self, wire: &[u8], status: &[u8], request_id: &[u8]) -> usize {
        let (mut rest, mut fields) = (wire, 0);
        self.block.clear();
        while let Some((frame, used)) = Frame::parse(rest, 16_384).unwrap() {
            let end_headers = match frame {
                Frame::Headers(h) => {
                    self.block.extend_from_slice(h.fragment);
                    h.end_headers
                }
                Frame::Continuation(c) => {
                    self.block.extend_from_slice(c.fragment);
                    c.end_headers
                }
                Frame::Data(d) => {
                    assert!(d.end_stream);
                    false
                }
                other => panic!("{other:?}"),
            };
            if end_headers {
                self.arena.clear();
                let arena = &mut self.arena;
                self.decoder
                    .decode(&self.block, &mut |n: &[u8], v: &[u8]| {
                        arena.extend_from_slice(n);
                        arena.extend_from_slice(v);
                        fields += 1;
                    })
                    .unwrap();
            }
            rest = &rest[used..];
        }
        self.block.clear();
        let response: [(&[u8], &[u8]); 4] = [
            (b":status", status),
            (b"content-type", b"application/json"),
            (b"x-request-id", request_id),
            (b"server", b"wedge"),
        ];
        self.encoder.encode(response, &mut self.block);
        self.out.clear();
        encode_headers(&mut self.out, StreamId::new(1), &self.block, false, 16_384);
        encode_data_head(&mut self.out, StreamId::new(1), 2, true);
        self.out.extend_from_slice(b"{}");
        fields
    }
}

/// A request as a client's HPACK encoder would send it, split over two frames.
fn request(client: &mut Encoder, path: &str, id: &str) -> Vec<u8> {
    let fields: [(&[u8], &[u8]); 6] = [
        (b":method", b"POST"),
        (b":scheme", b"https"),
        (b":authority", b"api.example.com"),
        (b":path", path.as_bytes()),
        (b"x-request-id", id.as_bytes()),
        (b"user-agent", b"curl/8.5.0"),
    ];
    let mut block = Vec::new();
    client.encode(fields, &mut block);
    let mut wire = Vec::new();
    encode_headers(
        &mut wire,
        StreamId::new(1),
        &block,
        false,
        (block.len() / 2).max(1) as u32,
    );
    encode_data_head(&mut wire, StreamId::new(1), 0, true);
    wire
}

#[test]
fn a_warm_connection_decodes_and_encodes_without_allocating() {
    let mut client = Encoder::default();
    let requests: Vec<Vec<u8>> = (0..400)
        .map(|i| {
            request(
                &mut client,
                &format!("/items/{}", i % 37),
                &format!("req-{i:08}"),
            )
        })
        .collect();
    let mut conn = Connection {
        decoder: Decoder::default(),
        encoder: Encoder::default(),
        arena: Vec::with_capacity(4096),
        block: Vec::new(),
        out: Vec::new(),
    };
    // Warm-up: tables fill and start evicting, buffers reach their working size.
    for (i, wire) in requests[..200].iter().enumerate() {
        conn.serve(
            wire,
            if i % 2 == 0 { b"200" } else { b"201" },
            format!("{i:08}").as_bytes(),
        );
    }
    let ids: Vec<String> = (200..400).map(|i| format!("{i:08}")).collect();
    let before = allocations();
    let mut fields = 0;
    for (i, wire) in requests[200..].iter().enumerate() {
        fields += conn.serve(
            wire,
            if i % 2 == 0 { b"200" } else { b"201" },
            ids[i].as_bytes(),
        );
    }
    let allocated = allocations() - before;
    assert_eq!(fields, 200 * 6, "every request was decoded");
    assert_eq!(
        allocated, 0,
        "a warm connection allocated {allocated} times for 200 requests"
    );
}
