//! A warm HTTP/3 connection takes a request without allocating any of the core's objects
//! (DESIGN.md §4.3): the request's frames and field section decoded into a pooled head,
//! its body handed out, the response head encoded, counted with a counting global
//! allocator on this thread. Same pattern as `alloc.rs` for HTTP/2.

use wedge_proto::h3::frame::{Setting, encode_data_head, encode_headers, encode_settings};
use wedge_proto::h3::qpack::{DecoderInstruction, Encoder};
use wedge_proto::h3::{Config, Connection, Event};

mod counting_alloc;

use counting_alloc::allocations;

/// What a driver keeps for a connection's whole life besides the core.
struct Driver {
    conn: Connection,
    events: Vec<Event>,
    out: Vec<u8>,
    /// Our QPACK decoder stream's octets, sent after each request.
    decoder_stream: Vec<u8>,
}

impl Driver {
    /// Serves one request arriving on `stream` as two reads, returning its field count.
    fn serve(&mut self, stream: u64, wire: &[u8], status: &[u8], request_id: &[u8]) -> usize {
        let (first, second) = wire.split_at(wire.len() / 2);
        let mut fields = 0;
        let mut body = 0;
        for (input, fin) in [(first, false), (second, true)] {
            self.conn
                .recv(stream, input, fin, &mut self.events)
                .unwrap();
            for event in self.events.drain(..) {
                match event {
                    Event::Request { head, .. } => {
                        fields += 4 + head.fields().len();
                        self.conn.give_back(head);
                    }
                    Event::Data { range, .. } => body += range.len(),
                    Event::End { .. } => {}
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(body, 2);
        let response: [(&[u8], &[u8]); 4] = [
            (b":status", status),
            (b"content-type", b"application/json"),
            (b"x-request-id", request_id),
            (b"server", b"wedge"),
        ];
        self.out.clear();
        self.conn.send_headers(response, &mut self.out);
        encode_data_head(2, &mut self.out);
        self.out.extend_from_slice(b"{}");
        self.decoder_stream.clear();
        self.conn.poll_decoder_stream(&mut self.decoder_stream);
        fields
    }

    /// Serves requests `range` of `requests`, request i on stream 4 * i: the number of
    /// fields decoded, and the allocations made meanwhile.
    fn serve_all(
        &mut self,
        requests: &[Vec<u8>],
        range: core::ops::Range<usize>,
    ) -> (usize, usize) {
        let ids: Vec<String> = range.clone().map(|i| format!("{i:08}")).collect();
        let status = |i: usize| {
            if i.is_multiple_of(2) {
                &b"200"[..]
            } else {
                b"201"
            }
        };
        let before = allocations();
        let mut fields = 0;
        for (i, id) in range.zip(&ids) {
            fields += self.serve(4 * i as u64, &requests[i], status(i), id.as_bytes());
        }
        (fields, allocations() - before)
    }
}

fn driver(config: Config) -> Driver {
    let mut driver = Driver {
        conn: Connection::new(config),
        events: Vec::new(),
        out: Vec::new(),
        decoder_stream: Vec::new(),
    };
    let mut control = vec![0x00];
    encode_settings(&[Setting::MaxFieldSectionSize(16_384)], &mut control);
    driver
        .conn
        .recv(2, &control, false, &mut driver.events)
        .unwrap();
    driver
}

/// A request as a client's QPACK encoder would send it: HEADERS and a DATA.
fn request(path: &str, id: &str) -> Vec<u8> {
    let fields: [(&[u8], &[u8]); 7] = [
        (b":method", b"POST"),
        (b":scheme", b"https"),
        (b":authority", b"api.example.com"),
        (b":path", path.as_bytes()),
        (b"x-request-id", id.as_bytes()),
        (b"user-agent", b"curl/8.5.0"),
        (b"content-length", b"2"),
    ];
    let mut section = Vec::new();
    Encoder::default().encode(fields, &mut section);
    let mut wire = Vec::new();
    encode_headers(&section, &mut wire);
    encode_data_head(2, &mut wire);
    wire.extend_from_slice(b"{}");
    wire
}

#[test]
fn h3_a_warm_connection_takes_a_request_without_allocating() {
    let requests: Vec<Vec<u8>> = (0..400)
        .map(|i| request(&format!("/items/{}", i % 37), &format!("req-{i:08}")))
        .collect();
    let mut driver = driver(Config::default());
    // Warm-up: pools fill, buffers reach their working size.
    driver.serve_all(&requests, 0..200);
    let (fields, allocated) = driver.serve_all(&requests, 200..400);
    assert_eq!(fields, 200 * 7, "every request was decoded");
    assert_eq!(
        allocated, 0,
        "a warm connection allocated {allocated} times for 200 requests"
    );
}

/// A request whose :authority and user-agent are the client's dynamic table entries 0
/// and 1: Required Insert Count 2 (encoded 3 with 4096 octets of table), Base 2.
fn request_with_dynamic_references(path: &str, id: &str) -> Vec<u8> {
    let fields: [(&[u8], &[u8]); 5] = [
        (b":method", b"POST"),
        (b":scheme", b"https"),
        (b":path", path.as_bytes()),
        (b"x-request-id", id.as_bytes()),
        (b"content-length", b"2"),
    ];
    let mut literal = Vec::new();
    Encoder::default().encode(fields, &mut literal);
    // Prefix, :authority (relative 1), the static and literal lines, user-agent
    // (relative 0).
    let mut section = vec![0x03, 0x00, 0x81];
    section.extend_from_slice(&literal[2..]);
    section.push(0x80);
    let mut wire = Vec::new();
    encode_headers(&section, &mut wire);
    encode_data_head(2, &mut wire);
    wire.extend_from_slice(b"{}");
    wire
}

#[test]
fn h3_a_warm_connection_with_a_qpack_dynamic_table_takes_a_request_without_allocating() {
    let requests: Vec<Vec<u8>> = (0..400)
        .map(|i| {
            request_with_dynamic_references(&format!("/items/{}", i % 37), &format!("req-{i:08}"))
        })
        .collect();
    let mut driver = driver(Config {
        qpack_max_table_capacity: 4096,
        qpack_blocked_streams: 16,
        ..Config::default()
    });
    // The client's encoder stream: capacity 4096, :authority and user-agent.
    let mut encoder_stream = vec![0x02, 0x3f, 0xe1, 0x1f, 0xc0, 15];
    encoder_stream.extend_from_slice(b"api.example.com");
    encoder_stream.push(0x4a);
    encoder_stream.extend_from_slice(b"user-agent");
    encoder_stream.push(10);
    encoder_stream.extend_from_slice(b"curl/8.5.0");
    driver
        .conn
        .recv(6, &encoder_stream, false, &mut driver.events)
        .unwrap();
    assert!(driver.events.is_empty());
    driver.serve_all(&requests, 0..200);
    // Each request is acknowledged on our decoder stream.
    let mut acknowledgment = Vec::new();
    DecoderInstruction::SectionAcknowledgment(4 * 199).encode(&mut acknowledgment);
    assert_eq!(driver.decoder_stream, acknowledgment);
    let (fields, allocated) = driver.serve_all(&requests, 200..400);
    assert_eq!(fields, 200 * 7, "every request was decoded");
    assert_eq!(
        allocated, 0,
        "a warm connection allocated {allocated} times for 200 requests"
    );
}
