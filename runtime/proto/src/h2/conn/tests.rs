//! The connection driven byte by byte as a client would: every server-side error case of
//! RFC 9113 answered with the scope and code the RFC names.

use super::*;
use crate::h2::frame::test_util::wire;
use crate::h2::frame::{FrameType, flags};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const EH: u8 = flags::END_HEADERS;
const ES: u8 = flags::END_STREAM;

/// A frame the server sent, owned.
#[derive(Debug, PartialEq, Eq)]
struct Sent {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// A scripted client and the connection under test.
struct Peer {
    conn: Connection,
    out: Vec<u8>,
    events: Vec<Event>,
    encoder: Encoder,
    result: Result<(), ConnectionError>,
    pending: Vec<u8>,
}

impl Peer {
    fn with(config: ConnConfig) -> Peer {
        let mut out = Vec::new();
        let conn = Connection::new(config, &mut out);
        let mut peer = Peer {
            conn,
            out,
            events: Vec::new(),
            encoder: Encoder::default(),
            result: Ok(()),
            pending: Vec::new(),
        };
        peer.send(PREFACE);
        peer.send(&wire(SETTINGS, 0, 0, &[]));
        peer.out.clear();
        peer
    }

    fn new() -> Peer {
        Peer::with(ConnConfig::default())
    }

    /// Feeds octets, keeping what the connection did not consume for next time.
    fn send(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let input = core::mem::take(&mut self.pending);
        match self.conn.recv(&input, &mut self.out, &mut self.events) {
            Ok(used) => self.pending = input[used..].to_vec(),
            Err(e) => self.result = Err(e),
        }
    }

    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut block = Vec::new();
        self.encoder.encode(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut block,
        );
        block
    }

    fn get(&mut self, stream: u32, extra: &[(&str, &str)], flags: u8) {
        let mut fields = vec![(":method", "GET"), (":scheme", "http"), (":path", "/")];
        fields.extend_from_slice(extra);
        let block = self.block(&fields);
        self.send(&wire(HEADERS, flags, stream, &block));
    }

    fn post(&mut self, stream: u32, extra: &[(&str, &str)]) {
        let mut fields = vec![(":method", "POST"), (":scheme", "http"), (":path", "/up")];
        fields.extend_from_slice(extra);
        let block = self.block(&fields);
        self.send(&wire(HEADERS, EH, stream, &block));
    }

    /// Ends the response on `stream` with its head, as the driver would once the handler
    /// answered; the frames that took.
    fn respond(&mut self, stream: u32) -> Vec<Sent> {
        self.conn
            .send_head(sid(stream), 200, [], true, &mut self.out);
        self.sent()
    }

    fn sent(&mut self) -> Vec<Sent> {
        let mut frames = Vec::new();
        let mut rest = &self.out[..];
        while let Some(head) = FrameHead::decode(rest) {
            let end = FrameHead::SIZE + head.len as usize;
            frames.push(Sent {
                kind: head.kind,
                flags: head.flags,
                stream: head.stream_id.get(),
                payload: rest[FrameHead::SIZE..end].to_vec(),
            });
            rest = &rest[end..];
        }
        self.out.clear();
        frames
    }

    /// The one RST_STREAM sent, as (stream, code); the connection lives on.
    fn expect_reset(&mut self) -> (u32, ErrorCode) {
        assert_eq!(self.result, Ok(()));
        let resets: Vec<_> = self.sent().into_iter().filter(|f| f.kind == RST).collect();
        assert_eq!(resets.len(), 1, "{resets:?}");
        let code = u32::from_be_bytes(resets[0].payload[..4].try_into().unwrap());
        (resets[0].stream, ErrorCode::from_u32(code).unwrap())
    }

    /// The GOAWAY sent for a connection error: its last stream id and code.
    fn expect_goaway(&mut self) -> (u32, ErrorCode) {
        let code = self.result.expect_err("a connection error").0;
        let goaway = self
            .sent()
            .into_iter()
            .find(|f| f.kind == FrameType::GoAway as u8)
            .expect("a GOAWAY");
        let last = u32::from_be_bytes(goaway.payload[..4].try_into().unwrap());
        let sent = u32::from_be_bytes(goaway.payload[4..8].try_into().unwrap());
        assert_eq!(sent, code as u32);
        (last, code)
    }

    fn requests(&mut self) -> Vec<(u32, RequestHead, bool)> {
        let mut heads = Vec::new();
        for event in self.events.drain(..) {
            if let Event::Request {
                stream,
                head,
                end_stream,
            } = event
            {
                heads.push((stream.get(), head, end_stream));
            }
        }
        heads
    }
}

fn sid(n: u32) -> StreamId {
    StreamId::new(n)
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    wire(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

fn setting(id: u16, value: u32) -> Vec<u8> {
    let mut p = id.to_be_bytes().to_vec();
    p.extend_from_slice(&value.to_be_bytes());
    wire(SETTINGS, 0, 0, &p)
}

#[test]
fn advertises_its_settings_and_connection_window() {
    let mut out = Vec::new();
    Connection::new(ConnConfig::default(), &mut out);
    let (Frame::Settings(s), used) = Frame::parse(&out, 16_384).unwrap().unwrap() else {
        panic!()
    };
    let settings: Vec<_> = s.iter().collect();
    assert!(settings.contains(&Setting::EnablePush(false)));
    assert!(settings.contains(&Setting::MaxConcurrentStreams(100)));
    assert!(settings.contains(&Setting::MaxHeaderListSize(16 * 1024)));
    let (Frame::WindowUpdate(w), _) = Frame::parse(&out[used..], 16_384).unwrap().unwrap() else {
        panic!()
    };
    assert_eq!(w.increment, 1024 * 1024 - 65_535);
}

#[test]
fn a_bad_preface_is_a_protocol_error() {
    let mut out = Vec::new();
    let mut conn = Connection::new(ConnConfig::default(), &mut out);
    out.clear();
    let mut events = Vec::new();
    assert_eq!(
        conn.recv(b"GET / HTTP/1.1\r\n", &mut out, &mut events),
        Err(ConnectionError(ErrorCode::ProtocolError))
    );
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut out = Vec::new();
    let mut conn = Connection::new(ConnConfig::default(), &mut out);
    let mut events = Vec::new();
    let mut input = PREFACE.to_vec();
    input.extend(wire(PING, 0, 0, &[0; 8]));
    assert_eq!(
        conn.recv(&input, &mut out, &mut events),
        Err(ConnectionError(ErrorCode::ProtocolError))
    );
}

#[test]
fn a_request_fed_one_octet_at_a_time_decodes_whole() {
    let mut peer = Peer::new();
    let block = peer.block(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/x?y"),
        ("content-length", "5"),
        ("x-a", "1"),
    ]);
    let mut bytes = wire(HEADERS, 0, 1, &block[..4]);
    bytes.extend(wire(CONTINUATION, EH, 1, &block[4..]));
    bytes.extend(wire(DATA, 0x8, 1, &[2, b'h', b'e', 0, 0])); // padded
    bytes.extend(wire(DATA, ES, 1, b"llo"));
    let mut body = Vec::new();
    let mut heads = Vec::new();
    for b in &bytes {
        let at = peer.pending.len();
        let mut input = core::mem::take(&mut peer.pending);
        input.push(*b);
        let used = peer
            .conn
            .recv(&input, &mut peer.out, &mut peer.events)
            .unwrap();
        for event in peer.events.drain(..) {
            match event {
                Event::Data { range, .. } => body.extend_from_slice(&input[range]),
                Event::Request { head, .. } => heads.push(head),
                Event::Trailers { .. } | Event::Reset { .. } => panic!(),
            }
        }
        peer.pending = input[used..].to_vec();
        let _ = at;
    }
    assert_eq!(body, b"hello");
    let head = &heads[0];
    assert_eq!(head.method(), b"POST");
    assert_eq!(head.scheme(), b"https");
    assert_eq!(head.authority(), Some(&b"example.com"[..]));
    assert_eq!(head.path(), b"/x?y");
    assert_eq!(head.content_length(), Some(5));
    let fields: Vec<_> = head.fields().collect();
    assert_eq!(
        fields,
        [
            (&b"content-length"[..], &b"5"[..]),
            (&b"x-a"[..], &b"1"[..])
        ]
    );
}

#[test]
fn a_response_goes_out_as_headers_and_data() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    assert_eq!(peer.requests().len(), 1);
    let mut out = Vec::new();
    peer.conn
        .send_head(sid(1), 200, [(&b"x"[..], &b"y"[..])], false, &mut out);
    assert_eq!(peer.conn.send_credit(sid(1)), 16_384);
    peer.conn.send_data(sid(1), b"body", true, &mut out);
    peer.out = out;
    let sent = peer.sent();
    assert_eq!(sent[0].kind, HEADERS);
    assert_eq!(sent[0].flags, EH);
    assert_eq!(sent[1].kind, DATA);
    assert_eq!(sent[1].flags, ES);
    assert_eq!(sent[1].payload, b"body");
    assert_eq!(peer.conn.open_streams(), 0);
    assert_eq!(peer.conn.send_credit(sid(1)), 0);
}

#[test]
fn connection_errors_carry_the_rfc_code() {
    type Case = (&'static str, fn(&mut Peer), ErrorCode);
    let cases: &[Case] = &[
        (
            "DATA on an idle stream",
            |p| p.send(&wire(DATA, 0, 1, b"x")),
            ErrorCode::ProtocolError,
        ),
        (
            "HEADERS on an even stream",
            |p| p.get(2, &[], EH | ES),
            ErrorCode::ProtocolError,
        ),
        (
            "a stream id below one used",
            |p| {
                p.get(5, &[], EH | ES);
                p.get(3, &[], EH | ES);
            },
            ErrorCode::ProtocolError,
        ),
        (
            "HEADERS on a stream the peer reset",
            |p| {
                p.get(1, &[], EH);
                p.send(&wire(RST, 0, 1, &[0, 0, 0, 8]));
                p.get(1, &[], EH | ES);
            },
            ErrorCode::StreamClosed,
        ),
        (
            "RST_STREAM on an idle stream",
            |p| p.send(&wire(RST, 0, 1, &[0, 0, 0, 8])),
            ErrorCode::ProtocolError,
        ),
        (
            "WINDOW_UPDATE on an idle stream",
            |p| p.send(&window_update(1, 1)),
            ErrorCode::ProtocolError,
        ),
        (
            "a zero connection WINDOW_UPDATE",
            |p| p.send(&window_update(0, 0)),
            ErrorCode::ProtocolError,
        ),
        (
            "connection window past 2^31-1",
            |p| p.send(&window_update(0, 0x7fff_ffff)),
            ErrorCode::FlowControlError,
        ),
        (
            "PUSH_PROMISE from a client",
            |p| {
                p.get(1, &[], EH);
                p.send(&wire(PUSH_PROMISE, EH, 1, &[0, 0, 0, 2]));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "CONTINUATION without HEADERS",
            |p| p.send(&wire(CONTINUATION, EH, 1, &[0x82])),
            ErrorCode::ProtocolError,
        ),
        (
            "a frame inside a field block",
            |p| {
                p.send(&wire(HEADERS, 0, 1, &[0x82]));
                p.send(&wire(PING, 0, 0, &[0; 8]));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "CONTINUATION on another stream",
            |p| {
                p.send(&wire(HEADERS, 0, 1, &[0x82]));
                p.send(&wire(CONTINUATION, EH, 3, &[0x86]));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "a frame over SETTINGS_MAX_FRAME_SIZE",
            |p| {
                p.get(1, &[], EH);
                p.send(&wire(DATA, 0, 1, &[0; 16_385]));
            },
            ErrorCode::FrameSizeError,
        ),
        (
            "SETTINGS with a partial parameter",
            |p| p.send(&wire(SETTINGS, 0, 0, &[0; 5])),
            ErrorCode::FrameSizeError,
        ),
        (
            "SETTINGS ACK with a payload",
            |p| p.send(&wire(SETTINGS, 1, 0, &[0; 6])),
            ErrorCode::FrameSizeError,
        ),
        (
            "SETTINGS on a stream",
            |p| p.send(&wire(SETTINGS, 0, 1, &[])),
            ErrorCode::ProtocolError,
        ),
        (
            "SETTINGS_ENABLE_PUSH of 2",
            |p| p.send(&setting(0x2, 2)),
            ErrorCode::ProtocolError,
        ),
        (
            "SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1",
            |p| p.send(&setting(0x4, 0x8000_0000)),
            ErrorCode::FlowControlError,
        ),
        (
            "SETTINGS_MAX_FRAME_SIZE below 16384",
            |p| p.send(&setting(0x5, 16_383)),
            ErrorCode::ProtocolError,
        ),
        (
            "PING of 7 octets",
            |p| p.send(&wire(PING, 0, 0, &[0; 7])),
            ErrorCode::FrameSizeError,
        ),
        (
            "PING on a stream",
            |p| p.send(&wire(PING, 0, 1, &[0; 8])),
            ErrorCode::ProtocolError,
        ),
        (
            "GOAWAY on a stream",
            |p| p.send(&wire(0x7, 0, 1, &[0; 8])),
            ErrorCode::ProtocolError,
        ),
        (
            "RST_STREAM of 3 octets",
            |p| {
                p.get(1, &[], EH);
                p.send(&wire(RST, 0, 1, &[0; 3]));
            },
            ErrorCode::FrameSizeError,
        ),
        (
            "WINDOW_UPDATE of 3 octets",
            |p| p.send(&wire(WINDOW_UPDATE, 0, 0, &[0; 3])),
            ErrorCode::FrameSizeError,
        ),
        (
            "DATA on stream 0",
            |p| p.send(&wire(DATA, 0, 0, b"x")),
            ErrorCode::ProtocolError,
        ),
        (
            "HEADERS on stream 0",
            |p| p.send(&wire(HEADERS, EH, 0, &[0x82])),
            ErrorCode::ProtocolError,
        ),
        (
            "an undecodable field block",
            |p| {
                p.send(&wire(
                    HEADERS,
                    EH | ES,
                    1,
                    &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
                ))
            },
            ErrorCode::CompressionError,
        ),
        (
            "padding longer than the frame",
            |p| p.send(&wire(HEADERS, EH | 0x8, 1, &[5, 0x82])),
            ErrorCode::ProtocolError,
        ),
    ];
    for (name, script, code) in cases {
        let mut peer = Peer::new();
        script(&mut peer);
        let (_, got) = peer.expect_goaway();
        assert_eq!(got, *code, "{name}");
    }
}

#[test]
fn data_past_the_connection_window_is_a_connection_flow_control_error() {
    let mut peer = Peer::with(ConnConfig {
        connection_window_size: 65_535,
        ..ConnConfig::default()
    });
    peer.get(1, &[], EH);
    peer.get(3, &[], EH);
    // Credit is given per pass: both frames arrive in one.
    let mut bytes = wire(DATA, 0, 1, &[0; 16_384]);
    for _ in 0..2 {
        bytes.extend(wire(DATA, 0, 1, &[0; 16_384]));
    }
    bytes.extend(wire(DATA, 0, 3, &[0; 16_384]));
    peer.send(&bytes);
    assert_eq!(peer.expect_goaway(), (3, ErrorCode::FlowControlError));
}

#[test]
fn stream_errors_reset_the_stream_with_the_rfc_code() {
    type Case = (&'static str, fn(&mut Peer), ErrorCode);
    let cases: &[Case] = &[
        (
            "stream window past 2^31-1",
            |p| {
                p.get(1, &[], EH | ES);
                p.send(&window_update(1, 0x7fff_ffff));
            },
            ErrorCode::FlowControlError,
        ),
        (
            "a zero stream WINDOW_UPDATE",
            |p| {
                p.get(1, &[], EH | ES);
                p.send(&window_update(1, 0));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "HEADERS after END_STREAM",
            |p| {
                p.get(1, &[], EH | ES);
                let block = p.block(&[("x", "y")]);
                p.send(&wire(HEADERS, EH | ES, 1, &block));
            },
            ErrorCode::StreamClosed,
        ),
        (
            "an uppercase field name",
            |p| p.get(1, &[("X-Up", "1")], EH | ES),
            ErrorCode::ProtocolError,
        ),
        (
            "a connection-specific field",
            |p| p.get(1, &[("connection", "close")], EH | ES),
            ErrorCode::ProtocolError,
        ),
        (
            "TE other than trailers",
            |p| p.get(1, &[("te", "gzip")], EH | ES),
            ErrorCode::ProtocolError,
        ),
        (
            "a :status in a request",
            |p| p.get(1, &[(":status", "200")], EH | ES),
            ErrorCode::ProtocolError,
        ),
        (
            "CR LF in a pseudo-header value (RFC 9113 §8.2.1)",
            |p| {
                let block = p.block(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/a\r\nx-injected: 1"),
                ]);
                p.send(&wire(HEADERS, EH | ES, 1, &block));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "a host that disagrees with :authority (RFC 9113 §8.3.1)",
            |p| {
                p.get(
                    1,
                    &[(":authority", "a.example"), ("host", "b.example")],
                    EH | ES,
                )
            },
            ErrorCode::ProtocolError,
        ),
        (
            "no :path",
            |p| {
                let block = p.block(&[(":method", "GET"), (":scheme", "http")]);
                p.send(&wire(HEADERS, EH | ES, 1, &block));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "END_STREAM on HEADERS with a content-length",
            |p| p.get(1, &[("content-length", "1")], EH | ES),
            ErrorCode::ProtocolError,
        ),
        (
            "a stream depending on itself",
            |p| {
                let block = p.block(&[(":method", "GET"), (":scheme", "http"), (":path", "/")]);
                let mut payload = vec![0, 0, 0, 1, 16];
                payload.extend(block);
                p.send(&wire(HEADERS, EH | ES | flags::PRIORITY, 1, &payload));
            },
            ErrorCode::ProtocolError,
        ),
    ];
    for (name, script, code) in cases {
        let mut peer = Peer::new();
        script(&mut peer);
        assert_eq!(peer.expect_reset(), (1, *code), "{name}");
        // The connection is still usable, and HPACK still in step.
        peer.requests();
        peer.get(11, &[("x-after", "1")], EH | ES);
        let heads = peer.requests();
        assert_eq!(heads.len(), 1, "{name}: no request after the reset");
        assert_eq!(
            heads[0].1.fields().next(),
            Some((&b"x-after"[..], &b"1"[..]))
        );
    }
}

/// An error in what a client sends after its request head: the request's extra fields
/// (a POST, its body still to come), then the frames.
type BodyCase = (
    &'static str,
    &'static [(&'static str, &'static str)],
    fn(&mut Peer),
    ErrorCode,
);

fn trailers(p: &mut Peer, fields: &[(&str, &str)]) {
    let block = p.block(fields);
    p.send(&wire(HEADERS, EH | ES, 1, &block));
}

fn body_errors() -> Vec<BodyCase> {
    vec![
        (
            "DATA past the stream window (§6.9.1)",
            &[],
            |p| {
                for _ in 0..4 {
                    p.send(&wire(DATA, 0, 1, &[0; 16_384]));
                }
            },
            ErrorCode::FlowControlError,
        ),
        (
            "stream window past 2^31-1",
            &[],
            |p| p.send(&window_update(1, 0x7fff_ffff)),
            ErrorCode::FlowControlError,
        ),
        (
            "a zero stream WINDOW_UPDATE",
            &[],
            |p| p.send(&window_update(1, 0)),
            ErrorCode::ProtocolError,
        ),
        (
            "DATA after END_STREAM (§5.1)",
            &[],
            |p| {
                p.send(&wire(DATA, ES, 1, b""));
                p.send(&wire(DATA, 0, 1, b"x"));
            },
            ErrorCode::StreamClosed,
        ),
        (
            "DATA on a stream the peer reset (§5.1)",
            &[],
            |p| {
                p.send(&wire(RST, 0, 1, &[0, 0, 0, 8]));
                p.send(&wire(DATA, 0, 1, b"x"));
            },
            ErrorCode::StreamClosed,
        ),
        (
            "trailers without END_STREAM (§8.1)",
            &[],
            |p| {
                let block = p.block(&[("x", "y")]);
                p.send(&wire(HEADERS, EH, 1, &block));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "a pseudo-header in trailers (§8.1)",
            &[],
            |p| trailers(p, &[(":path", "/")]),
            ErrorCode::ProtocolError,
        ),
        (
            "an uppercase name in trailers (§8.2.1)",
            &[],
            |p| trailers(p, &[("X-Sum", "1")]),
            ErrorCode::ProtocolError,
        ),
        (
            "a connection-specific field in trailers (§8.2.2)",
            &[],
            |p| trailers(p, &[("connection", "close")]),
            ErrorCode::ProtocolError,
        ),
        (
            "CR LF in a trailer value (§8.2.1)",
            &[],
            |p| trailers(p, &[("x-sum", "1\r\nx-injected: 1")]),
            ErrorCode::ProtocolError,
        ),
        (
            "trailers depending on their own stream (§5.3.1)",
            &[],
            |p| {
                let mut payload = vec![0, 0, 0, 1, 16];
                payload.extend(p.block(&[("x-sum", "1")]));
                p.send(&wire(HEADERS, EH | ES | flags::PRIORITY, 1, &payload));
            },
            ErrorCode::ProtocolError,
        ),
        (
            "more DATA than content-length (§8.1.1)",
            &[("content-length", "2")],
            |p| p.send(&wire(DATA, 0, 1, b"abc")),
            ErrorCode::ProtocolError,
        ),
        (
            "less DATA than content-length (§8.1.1)",
            &[("content-length", "4")],
            |p| p.send(&wire(DATA, ES, 1, b"abc")),
            ErrorCode::ProtocolError,
        ),
        (
            "trailers before content-length was reached (§8.1.1)",
            &[("content-length", "4")],
            |p| {
                p.send(&wire(DATA, 0, 1, b"abc"));
                trailers(p, &[("x-sum", "1")]);
            },
            ErrorCode::ProtocolError,
        ),
        (
            "PRIORITY of 4 octets (§6.3)",
            &[],
            |p| p.send(&wire(PRIORITY, 0, 1, &[0; 4])),
            ErrorCode::FrameSizeError,
        ),
    ]
}

/// Issue 18: what a client sends after its request head is judged the same whether it
/// arrives before the response ends or after (the stream is then finished, half-closed
/// local): never only when it happens to race the response. After the response the
/// application hears nothing more of the stream.
#[test]
fn body_errors_reset_the_stream_before_and_after_the_response() {
    for after_response in [false, true] {
        for (name, extra, script, code) in body_errors() {
            let when = if after_response { "after" } else { "before" };
            let mut peer = Peer::new();
            peer.post(1, extra);
            assert_eq!(peer.requests().len(), 1, "{name}");
            if after_response {
                let sent = peer.respond(1);
                assert!(sent.iter().all(|f| f.kind != RST), "{name}: {sent:?}");
            }
            script(&mut peer);
            assert_eq!(
                peer.expect_reset(),
                (1, code),
                "{name}, {when} the response"
            );
            if after_response {
                assert!(peer.events.is_empty(), "{name}: {:?}", peer.events);
            }
            assert_eq!(peer.conn.open_streams(), 0, "{name}: stream 1 forgotten");
            // The connection is still usable, and HPACK still in step.
            peer.events.clear();
            peer.get(11, &[("x-after", "1")], EH | ES);
            let heads = peer.requests();
            assert_eq!(heads.len(), 1, "{name}, {when}: no request after the reset");
            assert_eq!(
                heads[0].1.fields().next(),
                Some((&b"x-after"[..], &b"1"[..]))
            );
        }
    }
}

/// Issue 18: a request still arriving once its response ended is judged, discarded
/// and then ends as it would have: no reset, no event, no credit re-opened.
#[test]
fn a_request_that_ends_after_its_response_closes_the_stream_without_a_reset() {
    let mut peer = Peer::new();
    peer.post(1, &[("content-length", "5")]);
    peer.requests();
    assert!(peer.respond(1).iter().all(|f| f.kind != RST));
    assert!(!peer.conn.is_sending(sid(1)));
    assert_eq!(peer.conn.send_credit(sid(1)), 0);
    assert_eq!(peer.conn.open_streams(), 1, "half-closed (local)");
    peer.send(&wire(DATA, 0, 1, b"abc"));
    let mut out = Vec::new();
    peer.conn.release(sid(1), 65_535, &mut out);
    assert!(
        out.is_empty(),
        "a finished stream's window is never re-opened"
    );
    peer.send(&wire(DATA, 0, 1, b"de"));
    trailers(&mut peer, &[("x-sum", "1")]);
    peer.send(&wire(DATA, 0, 1, b"f")); // to a closed stream (§5.1): STREAM_CLOSED
    assert!(peer.events.is_empty(), "{:?}", peer.events);
    assert_eq!(peer.expect_reset(), (1, ErrorCode::StreamClosed));
    assert_eq!(peer.conn.open_streams(), 0);
}

/// The bound of a finished stream: `finished_stream_frames` frames (DATA and
/// WINDOW_UPDATE alike), then RST_STREAM(NO_ERROR) and the stream is forgotten; until
/// then it holds its place among the concurrent streams (§5.1.2).
#[test]
fn a_finished_stream_is_reset_at_its_bound_and_its_place_freed() {
    let mut peer = Peer::with(ConnConfig {
        finished_stream_frames: 3,
        max_concurrent_streams: 1,
        ..ConnConfig::default()
    });
    peer.post(1, &[]);
    peer.requests();
    assert!(peer.respond(1).iter().all(|f| f.kind != RST));
    peer.send(&wire(DATA, 0, 1, b"more"));
    peer.send(&window_update(1, 10));
    assert!(peer.sent().iter().all(|f| f.kind != RST));
    peer.get(3, &[], EH | ES);
    assert_eq!(peer.expect_reset(), (3, ErrorCode::RefusedStream));
    // The third frame is the last.
    peer.send(&wire(DATA, 0, 1, b"more"));
    assert_eq!(peer.expect_reset(), (1, ErrorCode::NoError));
    assert_eq!(peer.conn.open_streams(), 0);
    // What was in flight is ignored (§5.4.2), and the place is free.
    peer.send(&wire(DATA, 0, 1, b"in flight"));
    peer.get(5, &[], EH | ES);
    assert_eq!(peer.result, Ok(()));
    assert_eq!(peer.requests().len(), 1);
    assert!(peer.sent().iter().all(|f| f.kind != RST));
    assert!(peer.events.is_empty());
}

/// Octets are bounded by the window the stream had when its response ended, which is
/// never re-opened: a peer that used it up can send nothing more, so it is told to stop
/// at once rather than left waiting for credit.
#[test]
fn a_finished_stream_with_no_window_left_is_reset() {
    // Used up after the response...
    let mut peer = Peer::new();
    peer.post(1, &[]);
    peer.requests();
    assert!(peer.respond(1).iter().all(|f| f.kind != RST));
    for _ in 0..3 {
        peer.send(&wire(DATA, 0, 1, &[0; 16_384]));
    }
    assert!(peer.sent().iter().all(|f| f.kind != RST));
    peer.send(&wire(DATA, 0, 1, &[0; 16_383]));
    assert_eq!(peer.expect_reset(), (1, ErrorCode::NoError));
    // ...or before it.
    let mut peer = Peer::new();
    peer.post(1, &[]);
    for _ in 0..3 {
        peer.send(&wire(DATA, 0, 1, &[0; 16_384]));
    }
    peer.send(&wire(DATA, 0, 1, &[0; 16_383]));
    peer.sent();
    let sent = peer.respond(1);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!((sent[1].kind, sent[1].stream), (RST, 1));
    assert_eq!(sent[1].payload, (ErrorCode::NoError as u32).to_be_bytes());
    assert_eq!(peer.conn.open_streams(), 0);
}

#[test]
fn a_peer_reset_of_a_finished_stream_is_no_rapid_reset() {
    let mut peer = Peer::with(ConnConfig {
        peer_reset_budget: 2,
        ..ConnConfig::default()
    });
    for i in 0..10 {
        let id = 1 + 2 * i;
        peer.post(id, &[]);
        peer.respond(id);
        peer.send(&wire(RST, 0, id, &[0, 0, 0, 8]));
        assert_eq!(peer.result, Ok(()), "at {i}");
    }
    assert!(
        peer.events
            .iter()
            .all(|e| matches!(e, Event::Request { .. })),
        "{:?}",
        peer.events
    );
    assert_eq!(peer.conn.open_streams(), 0);
}

#[test]
fn a_request_still_arriving_holds_up_no_shutdown() {
    let mut peer = Peer::new();
    peer.post(1, &[]);
    peer.respond(1);
    let mut out = Vec::new();
    peer.conn.go_away(&mut out);
    assert!(peer.conn.is_done(), "every response has ended");
}

/// After the response, a HEADERS on a stream whose request had ended finds it closed:
/// a connection error (§5.1, closed), where before the response it is a stream error.
#[test]
fn headers_after_end_stream_and_the_response_is_a_connection_error() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    peer.respond(1);
    let block = peer.block(&[("x", "y")]);
    peer.send(&wire(HEADERS, EH | ES, 1, &block));
    assert_eq!(peer.expect_goaway(), (1, ErrorCode::StreamClosed));
}

/// A body whose end is learnt only after its last chunk was staged still ends on that
/// chunk's DATA frame, while the frame has not been written.
#[test]
fn a_staged_last_data_frame_takes_the_end_of_the_stream() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    peer.get(3, &[], EH | ES);
    let mut out = Vec::new();
    peer.conn.send_head(sid(1), 200, [], false, &mut out);
    let at = out.len();
    peer.conn.send_data(sid(1), b"last", false, &mut out);
    assert!(
        !peer.conn.end_stream_on_staged(sid(3), &mut out, at),
        "another stream's"
    );
    assert!(
        !peer.conn.end_stream_on_staged(sid(1), &mut out, 0),
        "not DATA"
    );
    assert!(peer.conn.end_stream_on_staged(sid(1), &mut out, at));
    assert!(
        !peer.conn.end_stream_on_staged(sid(1), &mut out, at),
        "ended already"
    );
    assert!(!peer.conn.is_sending(sid(1)));
    peer.out = out;
    let sent = peer.sent();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        (sent[1].kind, sent[1].flags, &sent[1].payload[..]),
        (DATA, ES, &b"last"[..])
    );
    assert_eq!(peer.conn.open_streams(), 1, "stream 3 alone");
}

/// RFC 9113 §6.5.3: the core keeps no clock; it says whether its SETTINGS still await an
/// ACK, and the driver's timeout ends the connection with SETTINGS_TIMEOUT.
#[test]
fn unacknowledged_settings_can_time_out_with_settings_timeout() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    assert!(peer.conn.awaiting_settings_ack(), "requests are no ACK");
    let err = peer.conn.settings_timed_out(&mut peer.out);
    peer.result = Err(err);
    assert_eq!(peer.expect_goaway(), (1, ErrorCode::SettingsTimeout));
    assert!(!peer.conn.awaiting_settings_ack(), "the connection is over");
    let mut peer = Peer::new();
    peer.send(&wire(SETTINGS, flags::ACK, 0, &[]));
    assert!(!peer.conn.awaiting_settings_ack());
}

/// RFC 9113 §8.3.1 does not make a request without `:authority` or `host` malformed on
/// HTTP/2 (HTTP/3 requires one), and a `host` that agrees with `:authority` is fine.
#[test]
fn h2_requests_may_name_their_authority_either_way_or_not_at_all() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    peer.get(3, &[("host", "a.example")], EH | ES);
    peer.get(
        5,
        &[(":authority", "a.example"), ("host", "a.example")],
        EH | ES,
    );
    assert_eq!(peer.result, Ok(()));
    assert_eq!(peer.requests().len(), 3);
    assert!(peer.sent().iter().all(|f| f.kind != RST));
}

#[test]
fn frames_in_flight_on_a_stream_we_reset_are_ignored() {
    let mut peer = Peer::new();
    peer.get(3, &[("X-Up", "1")], EH);
    assert_eq!(peer.expect_reset(), (3, ErrorCode::ProtocolError));
    peer.send(&wire(DATA, 0, 3, b"late"));
    peer.send(&window_update(3, 5));
    assert_eq!(peer.result, Ok(()));
    let sent = peer.sent();
    assert!(
        sent.iter()
            .all(|f| f.kind == WINDOW_UPDATE && f.stream == 0),
        "{sent:?}"
    );
}

#[test]
fn streams_past_the_limit_are_refused_and_hpack_stays_in_step() {
    let mut peer = Peer::with(ConnConfig {
        max_concurrent_streams: 1,
        ..ConnConfig::default()
    });
    peer.get(1, &[], EH);
    // Indexed by the client's encoder in the refused block, referenced afterwards.
    peer.get(3, &[("x-indexed", "value")], EH | ES);
    assert_eq!(peer.expect_reset(), (3, ErrorCode::RefusedStream));
    assert_eq!(peer.requests().len(), 1);
    peer.send(&wire(DATA, ES, 1, b""));
    let mut out = Vec::new();
    peer.conn.send_head(sid(1), 204, [], true, &mut out);
    peer.get(5, &[("x-indexed", "value")], EH | ES);
    let heads = peer.requests();
    assert_eq!(heads.len(), 1);
    assert_eq!(
        heads[0].1.fields().next(),
        Some((&b"x-indexed"[..], &b"value"[..]))
    );
}

#[test]
fn a_header_list_over_the_limit_is_answered_431_and_the_connection_lives() {
    let mut peer = Peer::with(ConnConfig {
        max_header_list_size: 200,
        ..ConnConfig::default()
    });
    let big = "v".repeat(300);
    peer.get(1, &[("x-big", &big)], EH | ES);
    assert!(peer.requests().is_empty());
    let sent = peer.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].kind, sent[0].flags, sent[0].stream),
        (HEADERS, EH | ES, 1)
    );
    let mut decoder = Decoder::default();
    let mut status = Vec::new();
    decoder
        .decode(&sent[0].payload, &mut |n: &[u8], v: &[u8]| {
            status.push((n.to_vec(), v.to_vec()))
        })
        .unwrap();
    assert_eq!(status, [(b":status".to_vec(), b"431".to_vec())]);
    peer.get(3, &[], EH | ES);
    assert_eq!(peer.requests().len(), 1);
}

#[test]
fn a_continuation_flood_is_enhance_your_calm() {
    let mut peer = Peer::new();
    peer.send(&wire(HEADERS, 0, 1, &[0x82]));
    for _ in 0..32 {
        peer.send(&wire(CONTINUATION, 0, 1, &[]));
    }
    assert_eq!(peer.result, Ok(()));
    peer.send(&wire(CONTINUATION, 0, 1, &[]));
    assert_eq!(peer.expect_goaway(), (0, ErrorCode::EnhanceYourCalm));
}

#[test]
fn an_oversized_encoded_block_is_enhance_your_calm() {
    let mut peer = Peer::new();
    peer.send(&wire(HEADERS, 0, 1, &[0; 16_384]));
    peer.send(&wire(CONTINUATION, 0, 1, &[0; 16_384]));
    assert_eq!(peer.result, Ok(()));
    peer.send(&wire(CONTINUATION, 0, 1, &[0; 2_000]));
    assert_eq!(peer.expect_goaway(), (0, ErrorCode::EnhanceYourCalm));
}

fn budgeted(config: ConnConfig, budget: u32, attack: fn(&mut Peer, u32)) {
    let mut peer = Peer::with(config);
    for i in 0..budget {
        attack(&mut peer, i);
        assert_eq!(peer.result, Ok(()), "within the budget, at {i}");
    }
    attack(&mut peer, budget);
    assert_eq!(peer.expect_goaway().1, ErrorCode::EnhanceYourCalm);
}

#[test]
fn rapid_reset_exhausts_its_budget() {
    let config = ConnConfig {
        peer_reset_budget: 10,
        ..ConnConfig::default()
    };
    budgeted(config, 10, |p, i| {
        p.get(1 + 2 * i, &[], EH | ES);
        p.send(&wire(RST, 0, 1 + 2 * i, &[0, 0, 0, 8]));
    });
}

#[test]
fn completed_responses_earn_the_reset_budget_back() {
    let mut peer = Peer::with(ConnConfig {
        peer_reset_budget: 2,
        ..ConnConfig::default()
    });
    for i in 0..20u32 {
        let id = 1 + 4 * i;
        peer.get(id, &[], EH | ES);
        peer.send(&wire(RST, 0, id, &[0, 0, 0, 8]));
        peer.get(id + 2, &[], EH | ES);
        let mut out = Vec::new();
        peer.conn.send_head(sid(id + 2), 200, [], true, &mut out);
    }
    assert_eq!(peer.result, Ok(()));
}

#[test]
fn made_you_reset_exhausts_its_budget() {
    let config = ConnConfig {
        server_reset_budget: 10,
        ..ConnConfig::default()
    };
    budgeted(config, 10, |p, i| {
        p.get(1 + 2 * i, &[], EH | ES);
        p.send(&window_update(1 + 2 * i, 0));
    });
}

#[test]
fn settings_ping_empty_data_and_ignored_frame_floods_exhaust_their_budgets() {
    budgeted(
        ConnConfig {
            settings_flood_budget: 10,
            ..ConnConfig::default()
        },
        9, // the handshake's SETTINGS spent one
        |p, _| p.send(&wire(SETTINGS, 0, 0, &[])),
    );
    budgeted(
        ConnConfig {
            ping_flood_budget: 10,
            ..ConnConfig::default()
        },
        10,
        |p, _| p.send(&wire(PING, 0, 0, &[0; 8])),
    );
    budgeted(
        ConnConfig {
            empty_data_flood_budget: 10,
            ..ConnConfig::default()
        },
        10,
        |p, i| {
            if i == 0 {
                p.get(1, &[], EH);
            }
            p.send(&wire(DATA, 0, 1, &[]));
        },
    );
    let ignored = || ConnConfig {
        ignored_frame_flood_budget: 10,
        ..ConnConfig::default()
    };
    budgeted(ignored(), 10, |p, _| {
        p.send(&wire(PRIORITY, 0, 1, &[0, 0, 0, 0, 16]))
    });
    budgeted(ignored(), 10, |p, _| p.send(&wire(0x42, 0, 0, &[0; 64])));
}

#[test]
fn ping_is_answered_with_its_payload() {
    let mut peer = Peer::new();
    peer.send(&wire(PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]));
    let sent = peer.sent();
    assert_eq!(
        sent,
        [Sent {
            kind: PING,
            flags: flags::ACK,
            stream: 0,
            payload: vec![1, 2, 3, 4, 5, 6, 7, 8]
        }]
    );
}

#[test]
fn settings_are_acknowledged_and_the_initial_window_moves_open_streams() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    assert_eq!(peer.conn.send_credit(sid(1)), 16_384);
    peer.send(&setting(0x4, 100));
    assert_eq!(
        peer.sent(),
        [Sent {
            kind: SETTINGS,
            flags: flags::ACK,
            stream: 0,
            payload: vec![]
        }]
    );
    assert_eq!(peer.conn.send_credit(sid(1)), 100);
    peer.get(3, &[], EH | ES);
    assert_eq!(
        peer.conn.send_credit(sid(3)),
        100,
        "new streams use the new size"
    );
    peer.send(&setting(0x4, 0));
    assert_eq!(peer.conn.send_credit(sid(1)), 0);
    peer.send(&setting(0x4, 50));
    peer.send(&setting(0x4, 0));
    peer.send(&window_update(1, 30));
    assert_eq!(peer.conn.send_credit(sid(1)), 30);
    // Below zero: a decrease takes the window negative, credit comes back in order.
    peer.conn
        .send_data(sid(1), &[0; 30], false, &mut Vec::new());
    peer.send(&setting(0x4, 0));
    peer.send(&setting(0x4, 0));
    peer.send(&window_update(1, 10));
    peer.send(&setting(0x4, 0));
    assert_eq!(peer.conn.send_credit(sid(1)), 10);
    peer.send(&setting(0x4, 100));
    assert_eq!(peer.conn.send_credit(sid(1)), 110);
}

#[test]
fn an_initial_window_change_that_overflows_an_open_stream_is_a_flow_control_error() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    // Stream 1's send window (the default 65,535) raised to the largest a window may
    // be (RFC 9113 §6.9.1): still fine...
    peer.send(&window_update(1, 0x7fff_ffff - 65_535));
    assert!(peer.sent().is_empty(), "no error yet");
    // ...then SETTINGS_INITIAL_WINDOW_SIZE grows by one: past the maximum (§6.9.2).
    peer.send(&setting(0x4, 65_536));
    assert_eq!(peer.expect_goaway().1, ErrorCode::FlowControlError);
}

#[test]
fn a_response_longer_than_the_windows_waits_for_credit() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    let mut out = Vec::new();
    peer.conn.send_head(sid(1), 200, [], false, &mut out);
    let mut sent = 0;
    while peer.conn.send_credit(sid(1)) > 0 {
        let n = peer.conn.send_credit(sid(1));
        peer.conn.send_data(sid(1), &vec![0; n], false, &mut out);
        sent += n;
    }
    assert_eq!(sent, 65_535);
    peer.send(&window_update(1, 1_000));
    assert_eq!(
        peer.conn.send_credit(sid(1)),
        0,
        "the connection window is empty too"
    );
    peer.send(&window_update(0, 500));
    assert_eq!(peer.conn.send_credit(sid(1)), 500);
}

#[test]
fn the_stream_window_reopens_only_as_the_handler_reads() {
    let mut peer = Peer::new();
    peer.post(1, &[]);
    let mut bytes = wire(DATA, 0, 1, &[7; 16_000]);
    bytes.extend(wire(DATA, 0, 1, &[7; 16_000]));
    bytes.extend(wire(DATA, 0, 1, &[7; 8_000]));
    peer.send(&bytes);
    let sent = peer.sent();
    // The connection is credited at once; the stream is not.
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].kind, sent[0].stream), (WINDOW_UPDATE, 0));
    let mut out = Vec::new();
    peer.conn.release(sid(1), 30_000, &mut out);
    assert!(out.is_empty(), "below half a window: no update yet");
    peer.conn.release(sid(1), 10_000, &mut out);
    peer.out = out;
    let sent = peer.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].kind, sent[0].stream), (WINDOW_UPDATE, 1));
    assert_eq!(sent[0].payload, 40_000u32.to_be_bytes());
}

#[test]
fn trailers_are_handed_on_and_end_the_body() {
    let mut peer = Peer::new();
    peer.post(1, &[]);
    peer.send(&wire(DATA, 0, 1, b"abc"));
    let block = peer.block(&[("x-checksum", "1"), ("x-note", "a\tb")]);
    peer.send(&wire(HEADERS, EH | ES, 1, &block));
    let mut seen = Vec::new();
    for event in peer.events.drain(..) {
        match event {
            Event::Request { .. } => seen.push("request".to_owned()),
            Event::Data { end_stream, .. } => seen.push(format!("data end={end_stream}")),
            Event::Trailers { stream, trailers } => {
                let fields: Vec<_> = trailers
                    .fields()
                    .map(|(n, v)| format!("{}: {}", n.escape_ascii(), v.escape_ascii()))
                    .collect();
                seen.push(format!("trailers {} {}", stream.get(), fields.join(", ")));
                peer.conn.give_back(trailers);
            }
            Event::Reset { .. } => seen.push("reset".to_owned()),
        }
    }
    assert_eq!(
        seen,
        [
            "request",
            "data end=false",
            "trailers 1 x-checksum: 1, x-note: a\\tb",
            "data end=true"
        ]
    );
    // The stream's receiving side is closed: a frame after the trailers is STREAM_CLOSED.
    peer.send(&wire(DATA, 0, 1, b"x"));
    assert_eq!(peer.expect_reset(), (1, ErrorCode::StreamClosed));
}

#[test]
fn trailers_past_the_header_list_limit_reset_the_stream_enhance_your_calm() {
    let mut peer = Peer::with(ConnConfig {
        max_header_list_size: 150,
        ..ConnConfig::default()
    });
    peer.post(1, &[]);
    // Each field costs its octets plus 32 (RFC 7541 §4.1): the head 126, one trailer
    // of 95 fits, two do not.
    let value = "v".repeat(60);
    let block = peer.block(&[("x-a", &value), ("x-b", &value)]);
    peer.send(&wire(HEADERS, EH | ES, 1, &block));
    assert_eq!(peer.expect_reset(), (1, ErrorCode::EnhanceYourCalm));
    assert!(
        !peer
            .events
            .iter()
            .any(|e| matches!(e, Event::Trailers { .. })),
        "no trailers cut short are handed on"
    );
    // Within it, they are.
    peer.post(3, &[]);
    let block = peer.block(&[("x-a", &value)]);
    peer.send(&wire(HEADERS, EH | ES, 3, &block));
    assert!(
        peer.events
            .iter()
            .any(|e| matches!(e, Event::Trailers { stream, .. } if stream.get() == 3))
    );
}

#[test]
fn a_trailer_value_with_a_control_character_is_a_protocol_error() {
    let mut peer = Peer::new();
    peer.post(1, &[]);
    let block = peer.block(&[("x-a", "a\x01b")]);
    peer.send(&wire(HEADERS, EH | ES, 1, &block));
    assert_eq!(peer.expect_reset(), (1, ErrorCode::ProtocolError));
}

#[test]
fn with_no_finished_stream_bound_a_response_before_the_body_ended_stops_the_body() {
    let mut peer = Peer::with(ConnConfig {
        finished_stream_frames: 0,
        ..ConnConfig::default()
    });
    peer.post(1, &[]);
    let mut out = Vec::new();
    peer.conn.send_head(sid(1), 413, [], true, &mut out);
    peer.out = out;
    let sent = peer.sent();
    assert_eq!(sent[1].kind, RST);
    assert_eq!(sent[1].payload, (ErrorCode::NoError as u32).to_be_bytes());
    // What the peer had in flight is ignored.
    peer.send(&wire(DATA, 0, 1, b"late"));
    assert_eq!(peer.result, Ok(()));
    assert!(peer.sent().iter().all(|f| f.kind == WINDOW_UPDATE));
}

#[test]
fn goaway_names_the_last_stream_and_ignores_later_ones() {
    let mut peer = Peer::new();
    peer.get(1, &[], EH | ES);
    peer.get(3, &[], EH | ES);
    let mut out = Vec::new();
    peer.conn.go_away(&mut out);
    peer.out = out;
    let sent = peer.sent();
    assert_eq!(sent[0].kind, FrameType::GoAway as u8);
    assert_eq!(sent[0].payload, [0, 0, 0, 3, 0, 0, 0, 0]);
    peer.requests();
    peer.get(5, &[], EH | ES);
    assert!(peer.requests().is_empty());
    assert!(!peer.conn.is_done());
    let mut out = Vec::new();
    peer.conn.send_head(sid(1), 200, [], true, &mut out);
    peer.conn.send_head(sid(3), 200, [], true, &mut out);
    assert!(peer.conn.is_done());
}

#[test]
fn unknown_frames_and_priority_are_ignored() {
    let mut peer = Peer::new();
    peer.send(&wire(0xfa, 0xff, 1, b"ext"));
    peer.send(&wire(PRIORITY, 0, 9, &[0, 0, 0, 0, 16]));
    peer.get(1, &[], EH | ES);
    assert_eq!(peer.result, Ok(()));
    assert_eq!(peer.requests().len(), 1);
    assert!(peer.sent().is_empty());
}

#[test]
fn settings_ack_then_requests() {
    let mut peer = Peer::new();
    peer.send(&wire(SETTINGS, flags::ACK, 0, &[]));
    peer.get(1, &[], EH | ES);
    assert_eq!(peer.result, Ok(()));
    assert_eq!(peer.requests().len(), 1);
}

/// Hostile input: random frames, mostly well-formed and sometimes not, split at random,
/// never panic the connection, and a connection error sticks. Deterministic (xorshift)
/// so a failure reproduces.
#[test]
fn random_frames_never_panic_and_errors_stick() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let (mut survived, mut failed) = (0, 0);
    for _ in 0..2_000 {
        let mut peer = Peer::with(ConnConfig {
            max_concurrent_streams: 3,
            ..ConnConfig::default()
        });
        let mut bytes = Vec::new();
        let mut opened = 0u32;
        for _ in 0..40 {
            // Mostly streams already opened; ids only grow (§5.1.1).
            let stream = 1 + 2 * next(u64::from(opened.max(1))) as u32;
            // One frame in fifty is anything at all; the rest are well-formed.
            let choice = match (opened, next(50)) {
                (_, 0) => 0,
                (0, _) => 1,
                _ => 1 + next(9),
            };
            let frame = match choice {
                0 => {
                    let payload: Vec<u8> = (0..next(24)).map(|_| next(256) as u8).collect();
                    let kind = next(12) as u8;
                    wire(kind, next(256) as u8, next(8) as u32, &payload)
                }
                1 | 2 => {
                    let block = peer.block(&[
                        (":method", "POST"),
                        (":scheme", "http"),
                        (":path", "/"),
                        ("content-length", "3"),
                    ]);
                    opened += 1;
                    wire(HEADERS, EH | (next(2) as u8), 2 * opened - 1, &block)
                }
                3 => wire(DATA, next(2) as u8, stream, &vec![b'd'; next(4) as usize]),
                4 => wire(RST, 0, stream, &[0, 0, 0, next(14) as u8]),
                5 => wire(PRIORITY, 0, stream, &[0, 0, 0, 0, 16]),
                6 => setting(1 + next(6) as u16, next(70_000) as u32),
                7 => wire(PING, next(2) as u8, 0, &[0; 8]),
                8 => window_update([0, stream][next(2) as usize], 1 + next(70_000) as u32),
                _ => wire(0xfa, 0, stream, b"ext"),
            };
            bytes.extend(frame);
        }
        let mut rest = &bytes[..];
        while !rest.is_empty() && peer.result.is_ok() {
            let cut = (next(64) as usize + 1).min(rest.len());
            peer.send(&rest[..cut]);
            rest = &rest[cut..];
            // The driver's side of the conversation, on whatever streams exist.
            let mut out = Vec::new();
            let id = StreamId::new(1 + 2 * next(20) as u32);
            peer.conn.release(id, next(100_000) as usize, &mut out);
            if peer.conn.send_credit(id) > 0 && next(3) == 0 {
                peer.conn.send_head(id, 200, [], false, &mut out);
                peer.conn.send_data(id, b"x", next(2) == 0, &mut out);
            }
        }
        match peer.result {
            Ok(()) => survived += 1,
            Err(e) => {
                failed += 1;
                let mut out = Vec::new();
                let mut events = Vec::new();
                assert_eq!(
                    peer.conn.recv(PREFACE, &mut out, &mut events),
                    Err(e),
                    "a connection error sticks"
                );
                assert!(out.is_empty(), "and nothing more is sent");
            }
        }
    }
    // Both outcomes are exercised, not just the first frame's error.
    assert!(survived > 100 && failed > 100, "{survived} / {failed}");
}

#[test]
fn a_smaller_header_table_applies_once_acknowledged() {
    let mut peer = Peer::with(ConnConfig {
        header_table_size: 0,
        ..ConnConfig::default()
    });
    // Before the ACK the peer may still use the 4096-octet table.
    peer.get(1, &[("x-a", "1")], EH | ES);
    assert_eq!(peer.requests().len(), 1);
    peer.send(&wire(SETTINGS, flags::ACK, 0, &[]));
    // After it, a block must first shrink the table (RFC 7541 §4.2): the client's
    // encoder does not know, so its next block is a COMPRESSION_ERROR.
    peer.get(3, &[("x-a", "1")], EH | ES);
    assert_eq!(peer.expect_goaway(), (1, ErrorCode::CompressionError));
    // A peer that does shrink it is fine.
    let mut peer = Peer::with(ConnConfig {
        header_table_size: 0,
        ..ConnConfig::default()
    });
    peer.send(&wire(SETTINGS, flags::ACK, 0, &[]));
    peer.encoder.set_peer_max_table_size(0);
    peer.get(1, &[("x-a", "1")], EH | ES);
    assert_eq!(peer.result, Ok(()));
    assert_eq!(peer.requests().len(), 1);
}

#[test]
fn frames_on_streams_ignored_after_goaway_cost_nothing() {
    let mut peer = Peer::with(ConnConfig {
        server_reset_budget: 2,
        ..ConnConfig::default()
    });
    peer.get(1, &[], EH);
    let mut out = Vec::new();
    peer.conn.go_away(&mut out);
    peer.requests();
    // Streams 3.. came after the GOAWAY: ignored, and so is everything the client
    // still sends on them — body and trailers — without resets or a connection error.
    for id in [3, 5, 7, 9] {
        peer.post(id, &[]);
        peer.send(&wire(DATA, 0, id, b"late"));
        let trailers = peer.block(&[("x-sum", "1")]);
        peer.send(&wire(HEADERS, EH | ES, id, &trailers));
    }
    assert_eq!(peer.result, Ok(()));
    assert!(peer.requests().is_empty());
    let sent = peer.sent();
    assert!(sent.iter().all(|f| f.kind == WINDOW_UPDATE), "{sent:?}");
    // Stream 1 still finishes.
    peer.send(&wire(DATA, ES, 1, b""));
    peer.conn.send_head(sid(1), 200, [], true, &mut out);
    assert!(peer.conn.is_done());
}

#[test]
fn a_request_whose_block_ends_after_goaway_is_not_opened() {
    let mut peer = Peer::new();
    let block = peer.block(&[(":method", "GET"), (":scheme", "http"), (":path", "/")]);
    peer.send(&wire(HEADERS, ES, 1, &block[..1]));
    let mut out = Vec::new();
    peer.conn.go_away(&mut out);
    peer.send(&wire(CONTINUATION, EH, 1, &block[1..]));
    assert_eq!(peer.result, Ok(()));
    assert!(
        peer.requests().is_empty(),
        "stream 1 is above the GOAWAY's last id 0"
    );
    assert!(peer.conn.is_done());
}

#[test]
fn data_in_flight_after_we_ended_every_concurrent_stream_is_ignored() {
    // Reset at once, not judged: what is measured is how many resets are remembered.
    let mut peer = Peer::with(ConnConfig {
        finished_stream_frames: 0,
        ..ConnConfig::default()
    });
    let streams: Vec<u32> = (0..100).map(|i| 1 + 2 * i).collect();
    for &id in &streams {
        peer.post(id, &[]);
    }
    assert_eq!(peer.requests().len(), 100);
    // Answered before their bodies ended: each gets RST_STREAM(NO_ERROR).
    let mut out = Vec::new();
    for &id in &streams {
        peer.conn.send_head(sid(id), 413, [], true, &mut out);
    }
    // The bodies' DATA was already in flight: ignored, every one.
    for &id in &streams {
        peer.send(&wire(DATA, 0, id, b"in flight"));
    }
    assert_eq!(peer.result, Ok(()));
    let resets = peer.sent().iter().filter(|f| f.kind == RST).count();
    assert_eq!(resets, 0, "streams we ended were forgotten");
}

#[test]
fn refusing_streams_spends_no_reset_budget() {
    let mut peer = Peer::with(ConnConfig {
        max_concurrent_streams: 1,
        server_reset_budget: 2,
        ..ConnConfig::default()
    });
    peer.get(1, &[], EH);
    for i in 1..=5 {
        peer.get(1 + 2 * i, &[], EH | ES);
        assert_eq!(peer.expect_reset(), (1 + 2 * i, ErrorCode::RefusedStream));
    }
    // The budget is whole: a real stream error still has both resets to spend.
    peer.send(&window_update(1, 0));
    assert_eq!(peer.expect_reset(), (1, ErrorCode::ProtocolError));
}

#[test]
fn a_malformed_priority_on_an_idle_stream_resets_nothing() {
    let mut peer = Peer::new();
    peer.send(&wire(PRIORITY, 0, 9, &[0, 0, 0, 0]));
    assert_eq!(peer.result, Ok(()));
    assert!(
        peer.sent().is_empty(),
        "RST_STREAM on an idle stream (§6.4)"
    );
    // Stream 9 is still idle: its request is served.
    peer.get(9, &[], EH | ES);
    assert_eq!(peer.requests().len(), 1);
}

/// RFC 9113 §5.3.1: a stream cannot depend on itself. On an idle stream there is
/// nothing to reset (§6.4), so it ends the connection, with or without a stream
/// answered before it.
#[test]
fn a_priority_making_an_idle_stream_depend_on_itself_is_a_connection_error() {
    for answered_first in [false, true] {
        let mut peer = Peer::new();
        if answered_first {
            peer.get(1, &[], EH | ES);
            assert_eq!(peer.requests().len(), 1);
            peer.sent();
        }
        peer.send(&wire(PRIORITY, 0, 9, &[0, 0, 0, 9, 16]));
        assert_eq!(peer.expect_goaway().1, ErrorCode::ProtocolError);
    }
}

#[test]
fn a_stream_error_before_the_first_settings_is_a_connection_error() {
    let mut out = Vec::new();
    let mut conn = Connection::new(ConnConfig::default(), &mut out);
    let mut input = PREFACE.to_vec();
    input.extend(wire(PRIORITY, 0, 1, &[0, 0, 0, 0]));
    let result = conn.recv(&input, &mut out, &mut Vec::new());
    assert_eq!(result, Err(ConnectionError(ErrorCode::ProtocolError)));
}

#[test]
fn out_of_range_limits_are_clamped_to_what_the_rfc_allows() {
    for (initial, connection, frame_size) in [(u32::MAX, u32::MAX, 100), (0, 0, u32::MAX)] {
        let mut out = Vec::new();
        Connection::new(
            ConnConfig {
                initial_window_size: initial,
                connection_window_size: connection,
                max_frame_size: frame_size,
                ..ConnConfig::default()
            },
            &mut out,
        );
        // Our SETTINGS decode as valid (§6.5.2), and so does any window increase.
        let head = FrameHead::decode(&out).unwrap();
        let end = FrameHead::SIZE + head.len as usize;
        let settings = frame::Settings::decode(&head, &out[FrameHead::SIZE..end]);
        assert!(settings.is_ok(), "{initial} {connection} {frame_size}");
        if let Some(update) = FrameHead::decode(&out[end..]) {
            let payload = &out[end + FrameHead::SIZE..end + FrameHead::SIZE + 4];
            assert!(frame::WindowUpdate::decode(&update, payload).is_ok());
        }
    }
}

#[test]
fn an_unbounded_stream_limit_preallocates_a_bounded_table() {
    let mut peer = Peer::with(ConnConfig {
        max_concurrent_streams: u32::MAX,
        ..ConnConfig::default()
    });
    peer.get(1, &[], EH | ES);
    assert_eq!(peer.requests().len(), 1);
}
