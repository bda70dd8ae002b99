//! The connection driven byte by byte: every error RFC 9114 and RFC 9204 give a server
//! to detect, with its code and scope.

use super::*;
use crate::h3::frame::{FrameHead, FrameType, encode_data_head, encode_headers};
use crate::h3::qpack::Encoder;
use crate::head::MAX_POOLED_ARENA;
use crate::test_util::{Rng, hex};

const CONTROL_ID: u64 = 2;

/// A client's control stream opening: type 0, then SETTINGS with a grease entry.
fn client_control() -> Vec<u8> {
    let mut out = vec![0x00];
    frame::encode_settings(
        &[
            Setting::MaxFieldSectionSize(8192),
            Setting::Unknown { id: 0x21, value: 1 },
        ],
        &mut out,
    );
    out
}

/// A frame of any type with `payload`.
fn frame_of(ty: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    FrameHead {
        ty: FrameType::from_u64(ty),
        len: payload.len() as u64,
    }
    .encode(&mut out);
    out.extend_from_slice(payload);
    out
}

/// HEADERS carrying `fields` as a client's encoder would send them.
fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut section = Vec::new();
    Encoder::default().encode(
        fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut section,
    );
    let mut out = Vec::new();
    encode_headers(&section, &mut out);
    out
}

fn data(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_data_head(body.len() as u64, &mut out);
    out.extend_from_slice(body);
    out
}

const GET: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":authority", "example.com"),
    (":path", "/"),
];

/// A connection and what it reported, rendered as text.
struct Client {
    conn: Connection,
    seen: Vec<String>,
}

impl Client {
    fn new() -> Self {
        Client {
            conn: Connection::new(Config::default()),
            seen: Vec::new(),
        }
    }

    /// A client whose control stream is open.
    fn ready() -> Self {
        let mut c = Client::new();
        c.send(CONTROL_ID, &client_control(), false).unwrap();
        c
    }

    /// Feeds `wire` to `stream` whole.
    fn send(&mut self, stream: u64, wire: &[u8], fin: bool) -> Result<(), ConnectionError> {
        let mut events = Vec::new();
        let result = self.conn.recv(stream, wire, fin, &mut events);
        self.record(wire, events);
        result
    }

    /// Feeds `wire` one octet at a time, FIN with the last (or alone, when empty).
    fn send_bytewise(
        &mut self,
        stream: u64,
        wire: &[u8],
        fin: bool,
    ) -> Result<(), ConnectionError> {
        if wire.is_empty() {
            return self.send(stream, wire, fin);
        }
        for (i, octet) in wire.iter().enumerate() {
            self.send(
                stream,
                core::slice::from_ref(octet),
                fin && i == wire.len() - 1,
            )?;
        }
        Ok(())
    }

    fn record(&mut self, input: &[u8], events: Vec<Event>) {
        for event in events {
            let text = match event {
                Event::Request { stream, head } => {
                    let mut s = format!(
                        "request {stream} {} {}",
                        String::from_utf8_lossy(head.method()),
                        String::from_utf8_lossy(head.path())
                    );
                    for (n, v) in head.fields() {
                        s += &format!(
                            " {}={}",
                            String::from_utf8_lossy(n),
                            String::from_utf8_lossy(v)
                        );
                    }
                    self.conn.give_back(head);
                    s
                }
                Event::Data { stream, range } => {
                    format!("data {stream} {}", String::from_utf8_lossy(&input[range]))
                }
                Event::Trailers { stream, trailers } => {
                    let s = format!("trailers {stream} {}", trailers.fields().len());
                    self.conn.give_back(trailers);
                    s
                }
                Event::End { stream } => format!("end {stream}"),
                Event::HeadTooLarge { stream } => format!("head too large {stream}"),
                Event::Blocked { stream, consumed } => format!("blocked {stream} at {consumed}"),
                Event::StreamError { stream, code } => format!("stream error {stream} {code}"),
                Event::StopSending { stream, code } => format!("stop sending {stream} {code}"),
                Event::PeerGoaway { id } => format!("goaway {id}"),
            };
            self.seen.push(text);
        }
    }

    /// Data events joined per stream, so that splits do not matter.
    fn seen_joined(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.seen {
            match (out.last_mut(), s.strip_prefix("data ")) {
                (Some(last), Some(more)) if last.starts_with("data ") => {
                    let (_, octets) = more.split_once(' ').unwrap();
                    last.push_str(octets);
                }
                _ => out.push(s.clone()),
            }
        }
        out
    }
}

fn connection_error(code: ErrorCode) -> Result<(), ConnectionError> {
    Err(ConnectionError(code))
}

// --- Our side of the wire ---

#[test]
fn our_control_stream_opens_with_settings() {
    let conn = Connection::new(Config::default());
    let mut out = Vec::new();
    conn.open_control_stream(&mut out);
    // Type 0, SETTINGS (4) of 5 octets: MAX_FIELD_SECTION_SIZE (6) = 16384.
    assert_eq!(out, hex("00 04 05 06 80004000"));
}

#[test]
fn a_response_head_is_one_headers_frame() {
    let mut conn = Connection::new(Config::default());
    let mut out = Vec::new();
    conn.send_headers([(&b":status"[..], &b"200"[..])], &mut out);
    assert_eq!(out, hex("01 03 0000 d9"));
}

// --- The control stream ---

#[test]
fn control_stream_byte_by_byte() {
    let mut c = Client::new();
    let mut wire = client_control();
    wire.extend_from_slice(&frame_of(0x21, b"grease"));
    wire.extend_from_slice(&frame_of(0x0d, &[0x08]));
    wire.extend_from_slice(&frame_of(0x07, &[0x04]));
    assert_eq!(c.send_bytewise(CONTROL_ID, &wire, false), Ok(()));
    assert_eq!(c.seen, ["goaway 4"]);
}

#[test]
fn the_clients_field_section_limit_is_known_once_its_settings_arrive() {
    let mut c = Client::new();
    assert_eq!(
        c.conn.peer_max_field_section_size(),
        u64::MAX,
        "unlimited by default"
    );
    assert_eq!(c.send(CONTROL_ID, &client_control(), false), Ok(()));
    assert_eq!(c.conn.peer_max_field_section_size(), 8192);
}

#[test]
fn the_first_control_frame_must_be_settings() {
    for first in [
        frame_of(0x07, &[0]),
        frame_of(0x21, b""),
        frame_of(0x0d, &[1]),
    ] {
        let mut c = Client::new();
        let mut wire = vec![0x00];
        wire.extend_from_slice(&first);
        assert_eq!(
            c.send_bytewise(CONTROL_ID, &wire, false),
            connection_error(ErrorCode::MissingSettings),
            "{first:?}"
        );
    }
}

#[test]
fn settings_twice_is_frame_unexpected() {
    let mut c = Client::ready();
    assert_eq!(
        c.send(CONTROL_ID, &frame_of(0x04, &[]), false),
        connection_error(ErrorCode::FrameUnexpected)
    );
}

#[test]
fn http2_settings_are_settings_errors() {
    for id in [0x00, 0x02, 0x03, 0x04, 0x05] {
        let mut c = Client::new();
        let mut wire = vec![0x00];
        wire.extend_from_slice(&frame_of(0x04, &[id, 0x01]));
        assert_eq!(
            c.send(CONTROL_ID, &wire, false),
            connection_error(ErrorCode::SettingsError),
            "{id}"
        );
    }
}

#[test]
fn request_frames_on_the_control_stream_are_frame_unexpected() {
    for ty in [0x00, 0x01, 0x05, 0x02, 0x06, 0x08, 0x09] {
        let mut c = Client::ready();
        assert_eq!(
            c.send(CONTROL_ID, &frame_of(ty, &[0]), false),
            connection_error(ErrorCode::FrameUnexpected),
            "{ty}"
        );
    }
}

#[test]
fn a_malformed_control_frame_is_a_frame_error() {
    let mut c = Client::ready();
    assert_eq!(
        c.send(CONTROL_ID, &frame_of(0x07, &[0x04, 0x00]), false),
        connection_error(ErrorCode::FrameError)
    );
}

#[test]
fn an_oversized_control_frame_is_excessive_load() {
    let mut c = Client::ready();
    let mut head = Vec::new();
    FrameHead {
        ty: FrameType::Goaway,
        len: 1 << 20,
    }
    .encode(&mut head);
    assert_eq!(
        c.send(CONTROL_ID, &head, false),
        connection_error(ErrorCode::ExcessiveLoad)
    );
}

#[test]
fn goaway_ids_must_not_increase() {
    let mut c = Client::ready();
    assert_eq!(c.send(CONTROL_ID, &frame_of(0x07, &[8]), false), Ok(()));
    assert_eq!(c.send(CONTROL_ID, &frame_of(0x07, &[4]), false), Ok(()));
    assert_eq!(c.seen, ["goaway 8", "goaway 4"]);
    assert_eq!(
        c.send(CONTROL_ID, &frame_of(0x07, &[5]), false),
        connection_error(ErrorCode::IdError)
    );
}

#[test]
fn push_ids() {
    // MAX_PUSH_ID may not shrink.
    let mut c = Client::ready();
    assert_eq!(c.send(CONTROL_ID, &frame_of(0x0d, &[5]), false), Ok(()));
    assert_eq!(c.send(CONTROL_ID, &frame_of(0x0d, &[5]), false), Ok(()));
    assert_eq!(
        c.send(CONTROL_ID, &frame_of(0x0d, &[4]), false),
        connection_error(ErrorCode::IdError)
    );
    // CANCEL_PUSH may only name a push a PUSH_PROMISE announced; we announce none,
    // so it is an id error even within MAX_PUSH_ID (§7.2.3).
    let mut c = Client::ready();
    assert_eq!(
        c.send(CONTROL_ID, &frame_of(0x03, &[0]), false),
        connection_error(ErrorCode::IdError),
        "no MAX_PUSH_ID yet"
    );
    let mut c = Client::ready();
    assert_eq!(c.send(CONTROL_ID, &frame_of(0x0d, &[5]), false), Ok(()));
    assert_eq!(
        c.send(CONTROL_ID, &frame_of(0x03, &[5]), false),
        connection_error(ErrorCode::IdError),
        "never promised"
    );
}

// --- Unidirectional streams ---

#[test]
fn a_second_control_stream_is_a_creation_error() {
    let mut c = Client::ready();
    assert_eq!(
        c.send(6, &client_control(), false),
        connection_error(ErrorCode::StreamCreationError)
    );
}

#[test]
fn a_client_push_stream_is_a_creation_error() {
    let mut c = Client::ready();
    assert_eq!(
        c.send(6, &[0x01, 0x00], false),
        connection_error(ErrorCode::StreamCreationError)
    );
}

#[test]
fn a_second_qpack_stream_is_a_creation_error() {
    for ty in [0x02, 0x03] {
        let mut c = Client::ready();
        assert_eq!(c.send(6, &[ty], false), Ok(()));
        assert_eq!(
            c.send_bytewise(10, &[ty], false),
            connection_error(ErrorCode::StreamCreationError),
            "{ty}"
        );
    }
}

#[test]
fn closing_a_critical_stream_is_closed_critical_stream() {
    let mut c = Client::ready();
    assert_eq!(
        c.send(CONTROL_ID, &[], true),
        connection_error(ErrorCode::ClosedCriticalStream)
    );
    let mut c = Client::ready();
    assert_eq!(
        c.conn.reset(CONTROL_ID),
        connection_error(ErrorCode::ClosedCriticalStream)
    );
    for ty in [0x02, 0x03] {
        let mut c = Client::ready();
        assert_eq!(
            c.send(6, &[ty], true),
            connection_error(ErrorCode::ClosedCriticalStream)
        );
        let mut c = Client::ready();
        assert_eq!(c.send(6, &[ty], false), Ok(()));
        assert_eq!(
            c.conn.reset(6),
            connection_error(ErrorCode::ClosedCriticalStream)
        );
    }
}

#[test]
fn unknown_stream_types_are_stopped_and_the_connection_goes_on() {
    let mut c = Client::ready();
    // Reserved type 0x21 in two octets (0x4021), split across reads.
    assert_eq!(c.send(6, &[0x40], false), Ok(()));
    assert_eq!(c.send(6, &[0x21, 1, 2, 3], false), Ok(()));
    assert_eq!(c.seen, ["stop sending 6 H3_STREAM_CREATION_ERROR"]);
    // A stream closed before its type is tolerated (§6.2).
    assert_eq!(c.send(10, &[0x40], true), Ok(()));
    assert_eq!(c.send(0, &headers(&GET), true), Ok(()));
    assert_eq!(c.seen[1..], ["request 0 GET /", "end 0"]);
}

#[test]
fn qpack_stream_errors() {
    // Set Dynamic Table Capacity 220 past our 0 (RFC 9204 B.2).
    let mut c = Client::ready();
    assert_eq!(
        c.send_bytewise(6, &hex("02 3fbd01"), false),
        connection_error(ErrorCode::QpackEncoderStreamError)
    );
    // Capacity 0 is fine; an insert is not.
    let mut c = Client::ready();
    assert_eq!(c.send(6, &hex("02 20"), false), Ok(()));
    assert_eq!(
        c.send(
            6,
            &hex("4a637573746f6d2d6b65790c637573746f6d2d76616c7565"),
            false
        ),
        connection_error(ErrorCode::QpackEncoderStreamError)
    );
    // Insert Count Increment on the decoder stream: we inserted nothing.
    let mut c = Client::ready();
    assert_eq!(
        c.send(6, &hex("03 48"), false),
        Ok(()),
        "Stream Cancellation"
    );
    assert_eq!(
        c.send(6, &hex("01"), false),
        connection_error(ErrorCode::QpackDecoderStreamError)
    );
}

#[test]
fn a_stream_the_client_cannot_open_is_a_creation_error() {
    for id in [1, 3] {
        let mut c = Client::ready();
        assert_eq!(
            c.send(id, &[0], false),
            connection_error(ErrorCode::StreamCreationError)
        );
    }
}

#[test]
fn a_failed_connection_stays_failed() {
    let mut c = Client::ready();
    let failed = connection_error(ErrorCode::FrameUnexpected);
    assert_eq!(c.send(CONTROL_ID, &frame_of(0x04, &[]), false), failed);
    assert_eq!(c.send(0, &headers(&GET), true), failed);
    assert_eq!(c.conn.reset(0), failed);
    assert!(c.seen.is_empty());
}

// --- Request streams ---

#[test]
fn a_get_byte_by_byte() {
    let mut c = Client::ready();
    let mut wire = headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/items?id=1"),
        ("accept", "*/*"),
        ("user-agent", "curl/8.5.0"),
    ]);
    wire.extend_from_slice(&frame_of(0x21, b"grease"));
    assert_eq!(c.send_bytewise(0, &wire, true), Ok(()));
    assert_eq!(
        c.seen,
        [
            "request 0 GET /items?id=1 accept=*/* user-agent=curl/8.5.0",
            "end 0"
        ]
    );
}

#[test]
fn a_post_with_body_and_trailers_in_any_split() {
    let mut wire = headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/upload"),
        ("content-length", "11"),
    ]);
    wire.extend_from_slice(&data(b"hello "));
    wire.extend_from_slice(&data(b""));
    wire.extend_from_slice(&data(b"world"));
    wire.extend_from_slice(&headers(&[("x-checksum", "abc")]));
    let expected = [
        "request 4 POST /upload content-length=11",
        "data 4 hello world",
        "trailers 4 1",
        "end 4",
    ];
    let mut c = Client::ready();
    assert_eq!(c.send(4, &wire, true), Ok(()));
    assert_eq!(c.seen_joined(), expected);
    let mut c = Client::ready();
    assert_eq!(c.send_bytewise(4, &wire, true), Ok(()));
    assert_eq!(c.seen_joined(), expected);
    // FIN alone, after everything else.
    let mut c = Client::ready();
    assert_eq!(c.send(4, &wire, false), Ok(()));
    assert_eq!(c.send(4, &[], true), Ok(()));
    assert_eq!(c.seen_joined(), expected);
}

#[test]
fn requests_need_no_control_stream_yet() {
    // The client's control stream may arrive after its first request.
    let mut c = Client::new();
    assert_eq!(c.send(0, &headers(&GET), true), Ok(()));
    assert_eq!(c.seen, ["request 0 GET /", "end 0"]);
}

#[test]
fn data_before_headers_is_frame_unexpected() {
    let mut c = Client::ready();
    assert_eq!(
        c.send(0, &data(b"x"), false),
        connection_error(ErrorCode::FrameUnexpected)
    );
}

#[test]
fn frames_after_trailers_are_frame_unexpected() {
    for after in [data(b"x"), headers(&[("x-more", "1")])] {
        let mut c = Client::ready();
        let mut wire = headers(&GET);
        wire.extend_from_slice(&headers(&[("x-checksum", "abc")]));
        // Unknown frames may still come.
        wire.extend_from_slice(&frame_of(0x21, b""));
        assert_eq!(c.send(0, &wire, false), Ok(()));
        assert_eq!(
            c.send(0, &after, false),
            connection_error(ErrorCode::FrameUnexpected)
        );
    }
}

#[test]
fn control_and_push_frames_on_a_request_stream_are_frame_unexpected() {
    // CANCEL_PUSH, SETTINGS, PUSH_PROMISE, GOAWAY, MAX_PUSH_ID, and HTTP/2's types.
    for ty in [0x03, 0x04, 0x05, 0x07, 0x0d, 0x02, 0x06, 0x08, 0x09] {
        let mut c = Client::ready();
        let mut wire = headers(&GET);
        wire.extend_from_slice(&frame_of(ty, &[0]));
        assert_eq!(
            c.send(0, &wire, false),
            connection_error(ErrorCode::FrameUnexpected),
            "{ty}"
        );
    }
}

#[test]
fn malformed_requests_are_message_errors_and_never_passed_on() {
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut fields = GET.to_vec();
        fields.extend_from_slice(extra);
        fields
    };
    let without = |name: &str| {
        GET.iter()
            .copied()
            .filter(|f| f.0 != name)
            .collect::<Vec<_>>()
    };
    let mut late_pseudo = GET.to_vec();
    late_pseudo.insert(1, ("accept", "*/*"));
    let mut empty_path = GET.to_vec();
    empty_path[3].1 = "";
    let cases = [
        with(&[("Accept", "*/*")]),
        with(&[("connection", "close")]),
        with(&[("keep-alive", "5")]),
        with(&[("proxy-connection", "x")]),
        with(&[("transfer-encoding", "chunked")]),
        with(&[("upgrade", "h2c")]),
        with(&[("te", "gzip")]),
        late_pseudo,
        with(&[(":protocol", "websocket")]),
        with(&[(":path", "/again")]),
        without(":method"),
        without(":scheme"),
        without(":path"),
        empty_path,
        with(&[("content-length", "x")]),
    ];
    for fields in cases {
        let mut c = Client::ready();
        assert_eq!(c.send_bytewise(0, &headers(&fields), true), Ok(()));
        assert_eq!(c.seen, ["stream error 0 H3_MESSAGE_ERROR"], "{fields:?}");
    }
}

#[test]
fn malformed_trailers_are_message_errors_and_never_passed_on() {
    for trailer in [
        (":path", "/"),
        ("X-Upper", "1"),
        ("connection", "close"),
        ("te", "gzip"),
        ("x-ctl", "a\x01b"),
    ] {
        let mut c = Client::ready();
        let mut wire = headers(&GET);
        wire.extend_from_slice(&headers(&[trailer]));
        assert_eq!(c.send(0, &wire, true), Ok(()));
        assert_eq!(
            c.seen[1..],
            ["stream error 0 H3_MESSAGE_ERROR"],
            "{trailer:?}"
        );
    }
}

#[test]
fn a_body_unlike_its_content_length_is_a_message_error() {
    let post = |len: &'static str| {
        headers(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "example.com"),
            (":path", "/"),
            ("content-length", len),
        ])
    };
    // Too short: found at the end.
    let mut c = Client::ready();
    let mut wire = post("5");
    wire.extend_from_slice(&data(b"abcd"));
    assert_eq!(c.send(0, &wire, true), Ok(()));
    assert_eq!(c.seen_joined()[2..], ["stream error 0 H3_MESSAGE_ERROR"]);
    // Too long: found as soon as the DATA head announces it, before its payload.
    let mut c = Client::ready();
    let mut wire = post("3");
    encode_data_head(4, &mut wire);
    assert_eq!(c.send(0, &wire, false), Ok(()));
    assert_eq!(c.seen[1..], ["stream error 0 H3_MESSAGE_ERROR"]);
}

#[test]
fn the_end_of_a_stream_before_its_request_is_request_incomplete() {
    let mut c = Client::ready();
    assert_eq!(c.send(0, &frame_of(0x21, b"x"), true), Ok(()));
    assert_eq!(c.seen, ["stream error 0 H3_REQUEST_INCOMPLETE"]);
}

#[test]
fn the_end_of_a_stream_inside_a_frame_is_a_frame_error() {
    let wire = headers(&GET);
    for cut in [1, wire.len() - 1] {
        let mut c = Client::ready();
        assert_eq!(
            c.send(0, &wire[..cut], true),
            connection_error(ErrorCode::FrameError),
            "cut at {cut}"
        );
    }
}

#[test]
fn a_dynamic_table_reference_is_decompression_failed() {
    let mut c = Client::ready();
    // RFC 9204 B.4's section: Required Insert Count 4.
    assert_eq!(
        c.send(0, &frame_of(0x01, &hex("0500 80 c1 81")), false),
        connection_error(ErrorCode::QpackDecompressionFailed)
    );
    let mut c = Client::ready();
    assert_eq!(
        c.send(0, &frame_of(0x01, &hex("0000 80")), false),
        connection_error(ErrorCode::QpackDecompressionFailed)
    );
}

#[test]
fn a_head_past_the_field_section_limit_gets_a_431_and_the_connection_goes_on() {
    let mut c = Client::ready();
    let big = "v".repeat(DEFAULT_MAX_FIELD_SECTION_SIZE);
    let mut fields = GET.to_vec();
    fields.push(("x-big", &big));
    assert_eq!(c.send(0, &headers(&fields), true), Ok(()));
    assert_eq!(c.seen, ["head too large 0"]);
    // A HEADERS frame whose announced length is past the limit, before any payload.
    let mut head = Vec::new();
    FrameHead {
        ty: FrameType::Headers,
        len: 1 << 30,
    }
    .encode(&mut head);
    assert_eq!(c.send(4, &head, false), Ok(()));
    assert_eq!(c.seen[1..], ["head too large 4"]);
    assert_eq!(c.send(8, &headers(&GET), true), Ok(()));
    assert_eq!(c.seen[2..], ["request 8 GET /", "end 8"]);
}

#[test]
fn trailers_past_the_field_section_limit_are_excessive_load() {
    let mut c = Client::ready();
    let mut wire = headers(&GET);
    let big = "v".repeat(DEFAULT_MAX_FIELD_SECTION_SIZE);
    wire.extend_from_slice(&headers(&[("x-big", &big)]));
    assert_eq!(c.send(0, &wire, true), Ok(()));
    assert_eq!(c.seen[1..], ["stream error 0 H3_EXCESSIVE_LOAD"]);
}

#[test]
fn after_our_goaway_new_requests_are_rejected() {
    let mut c = Client::ready();
    assert_eq!(c.send(0, &headers(&GET), false), Ok(()));
    let mut out = Vec::new();
    c.conn.goaway(&mut out);
    assert_eq!(out, hex("07 01 04"), "GOAWAY(4)");
    assert_eq!(c.send(4, &headers(&GET), true), Ok(()));
    // Stream 0 is still served.
    assert_eq!(c.send(0, &[], true), Ok(()));
    assert_eq!(
        c.seen,
        [
            "request 0 GET /",
            "stream error 4 H3_REQUEST_REJECTED",
            "end 0"
        ]
    );
    // A second GOAWAY never raises the id.
    out.clear();
    c.conn.goaway(&mut out);
    assert_eq!(out, hex("07 01 04"));
}

#[test]
fn a_reset_request_is_forgotten() {
    let mut c = Client::ready();
    assert_eq!(c.send(0, &headers(&GET)[..3], false), Ok(()));
    assert_eq!(c.conn.reset(0), Ok(()));
    assert!(c.conn.requests.is_empty());
    assert_eq!(c.conn.pools.streams(), 1, "its state went back to the pool");
}

// --- Pooled request state ---

#[test]
fn a_reused_head_holds_nothing_of_the_request_before() {
    let mut c = Client::ready();
    let mut events = Vec::new();
    let mut post = headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "api.example.com"),
        (":path", "/a"),
        ("content-length", "2"),
        ("x-one", "1"),
        ("x-two", "2"),
    ]);
    post.extend_from_slice(&data(b"{}"));
    c.conn.recv(0, &post, true, &mut events).unwrap();
    let Some(Event::Request { head, .. }) = events.drain(..).next() else {
        panic!("no request")
    };
    let arena = head.arena.as_ptr();
    c.conn.give_back(head);
    // A GET that names its authority in host (RFC 9114 §4.3.1 allows either).
    let get = headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/b"),
        ("host", "api.example.com"),
    ]);
    c.conn.recv(4, &get, true, &mut events).unwrap();
    let Some(Event::Request { head, .. }) = events.drain(..).next() else {
        panic!("no request")
    };
    assert_eq!(head.arena.as_ptr(), arena, "the same head came back");
    assert_eq!(head.authority(), None, "no stale :authority");
    assert_eq!(head.content_length(), None, "no stale content-length");
    assert_eq!(head.path(), b"/b");
    assert_eq!(head.fields().len(), 1);
    c.conn.give_back(head);
    // And a second POST's content-length is its own, not a repeat of the first.
    let mut post = headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "api.example.com"),
        (":path", "/c"),
        ("content-length", "3"),
    ]);
    post.extend_from_slice(&data(b"abc"));
    c.conn.recv(8, &post, true, &mut events).unwrap();
    assert!(matches!(events[0], Event::Request { .. }));
    assert!(matches!(events.last(), Some(Event::End { stream: 8 })));
}

#[test]
fn a_stream_whose_frame_buffer_grew_past_4_kib_is_not_kept() {
    let mut fields = GET.to_vec();
    let small = "v".repeat(100);
    // Huffman-coded at 7 bits an octet: still past 4 KiB on the wire.
    let big = "v".repeat(2 * MAX_POOLED_ARENA);
    for (value, kept) in [(&small, 1), (&big, 0)] {
        let mut c = Client::ready();
        fields.truncate(4);
        fields.push(("x-value", value));
        let wire = headers(&fields);
        // Split so the section is gathered in the stream's buffer.
        let (a, b) = wire.split_at(wire.len() / 2);
        assert_eq!(c.send(0, a, false), Ok(()));
        assert_eq!(c.send(0, b, true), Ok(()));
        assert_eq!(c.seen.len(), 2, "{:?}", c.seen);
        assert_eq!(c.conn.pools.streams(), kept, "value of {}", value.len());
    }
}

// --- Hostile input ---

#[test]
fn garbage_on_any_stream_never_panics_and_failure_sticks() {
    // Pieces a hostile client might string together: valid frames, truncated ones,
    // odd types, and noise.
    let pieces: Vec<Vec<u8>> = vec![
        client_control(),
        headers(&GET),
        headers(&[("x-a", "b")]),
        data(b"body"),
        frame_of(0x21, b"grease"),
        frame_of(0x07, &[4]),
        frame_of(0x0d, &[9]),
        frame_of(0x03, &[1]),
        frame_of(0x01, &hex("0000 80")),
        frame_of(0x01, &hex("0000 ff")),
        vec![0x00],
        vec![0x02, 0x20],
        hex("02 3fbd01"),
        hex(INSERT_AUTHORITY),
        hex("4a637573746f6d2d6b65790c637573746f6d2d76616c7565 02"),
        get_with_dynamic_authority(),
        frame_of(0x01, &hex("0500 80 c1 81")),
        vec![0x03, 0x48],
        vec![0x40, 0x21],
        vec![0xff; 9],
        hex("c2197c5eff14e88c"),
    ];
    let with_table = Config {
        qpack_max_table_capacity: 220,
        qpack_blocked_streams: 2,
        ..Config::default()
    };
    for seed in 1..600u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let config = if seed % 2 == 0 {
            with_table
        } else {
            Config::default()
        };
        let mut conn = Connection::new(config);
        let mut decoder_stream = Vec::new();
        let mut events = Vec::new();
        let mut failed = None;
        for _ in 0..40 {
            let stream = [0, 4, 8, 2, 6, 10, 14][rng.below(7)];
            let mut wire = pieces[rng.below(pieces.len())].clone();
            if rng.below(3) == 0 {
                wire.truncate(rng.below(wire.len() + 1));
            }
            if rng.below(4) == 0 {
                let noise = (0..rng.below(20)).map(|_| rng.next() as u8);
                wire.extend(noise);
            }
            let fin = rng.below(6) == 0;
            let result = if rng.below(10) == 0 {
                conn.reset(stream)
            } else {
                conn.recv(stream, &wire, fin, &mut events)
            };
            conn.poll_decoder_stream(&mut decoder_stream);
            match (failed, result) {
                (Some(code), result) => assert_eq!(result, Err(code), "seed {seed}"),
                (None, Err(code)) => failed = Some(code),
                (None, Ok(())) => {}
            }
            for event in events.drain(..) {
                match event {
                    Event::Request { head, .. } | Event::Trailers { trailers: head, .. } => {
                        conn.give_back(head)
                    }
                    Event::Data { range, .. } => assert!(range.end <= wire.len()),
                    _ => {}
                }
            }
        }
    }
}

// --- With a QPACK dynamic table ---

fn with_table(blocked_streams: u64) -> Client {
    let mut c = Client {
        conn: Connection::new(Config {
            qpack_max_table_capacity: 220,
            qpack_blocked_streams: blocked_streams,
            ..Config::default()
        }),
        seen: Vec::new(),
    };
    c.send(CONTROL_ID, &client_control(), false).unwrap();
    // The client's encoder stream: type 2, Set Dynamic Table Capacity 220 (RFC 9204 B.2).
    c.send(6, &hex("02 3fbd01"), false).unwrap();
    c
}

/// Insert With Name Reference, static :authority = www.example.com (RFC 9204 B.2).
const INSERT_AUTHORITY: &str = "c00f7777772e6578616d706c652e636f6d";

/// A GET whose :authority is dynamic entry 0, as a post-base reference: Required Insert
/// Count 1 (encoded 2), Base 0 (sign 1, delta 0).
fn get_with_dynamic_authority() -> Vec<u8> {
    frame_of(0x01, &hex("0280 d1 d7 c1 10"))
}

fn decoder_stream(c: &mut Client) -> Vec<u8> {
    let mut out = Vec::new();
    c.conn.poll_decoder_stream(&mut out);
    out
}

#[test]
fn our_settings_carry_the_qpack_limits_when_set() {
    let conn = Connection::new(Config {
        qpack_max_table_capacity: 4096,
        qpack_blocked_streams: 16,
        ..Config::default()
    });
    let mut out = Vec::new();
    conn.open_control_stream(&mut out);
    assert_eq!(out, hex("00 04 0a 06 80004000 01 5000 07 10"));
}

#[test]
fn a_blocked_request_waits_for_the_encoder_stream() {
    let mut c = with_table(1);
    let mut wire = get_with_dynamic_authority();
    let headers_len = wire.len();
    wire.extend_from_slice(&frame_of(0x21, b"after"));
    assert_eq!(c.send(0, &wire, true), Ok(()));
    assert_eq!(c.seen, [format!("blocked 0 at {headers_len}")]);
    assert_eq!(decoder_stream(&mut c), [], "nothing to say yet");
    // Fed again before it is unblocked: still nothing read.
    assert_eq!(c.send(0, &wire[headers_len..], true), Ok(()));
    assert_eq!(c.seen[1..], ["blocked 0 at 0"]);
    // The insert arrives: the request is decoded and acknowledged.
    assert_eq!(c.send(6, &hex(INSERT_AUTHORITY), false), Ok(()));
    assert_eq!(c.seen[2..], ["request 0 GET /"]);
    assert_eq!(
        decoder_stream(&mut c),
        hex("03 80"),
        "type, Section Acknowledgment(0)"
    );
    // The driver feeds what it held back.
    assert_eq!(c.send(0, &wire[headers_len..], true), Ok(()));
    assert_eq!(c.seen[3..], ["end 0"]);
    // An entry no section acknowledged is counted in an Insert Count Increment.
    assert_eq!(c.send(6, &hex(INSERT_AUTHORITY), false), Ok(()));
    assert_eq!(decoder_stream(&mut c), [0x01], "no second stream type");
}

#[test]
fn blocked_streams_past_our_setting_are_decompression_failed() {
    let mut c = with_table(1);
    assert_eq!(c.send(0, &get_with_dynamic_authority(), true), Ok(()));
    assert_eq!(
        c.send(4, &get_with_dynamic_authority(), true),
        connection_error(ErrorCode::QpackDecompressionFailed)
    );
    let mut c = with_table(0);
    assert_eq!(
        c.send(0, &get_with_dynamic_authority(), true),
        connection_error(ErrorCode::QpackDecompressionFailed)
    );
}

#[test]
fn an_abandoned_blocked_stream_is_cancelled_and_frees_its_slot() {
    let mut c = with_table(1);
    assert_eq!(c.send(0, &get_with_dynamic_authority(), false), Ok(()));
    assert_eq!(c.conn.reset(0), Ok(()));
    assert_eq!(
        decoder_stream(&mut c),
        hex("03 40"),
        "Stream Cancellation(0)"
    );
    assert_eq!(c.send(4, &get_with_dynamic_authority(), true), Ok(()));
    assert_eq!(c.seen[1..], ["blocked 4 at 8"]);
    // A malformed request found once unblocked is a stream error, and cancelled too.
    let mut c = with_table(1);
    assert_eq!(
        c.send(0, &frame_of(0x01, &hex("0280 d1 c1 10")), true),
        Ok(())
    );
    assert_eq!(c.send(6, &hex(INSERT_AUTHORITY), false), Ok(()));
    assert_eq!(
        c.seen[1..],
        ["stream error 0 H3_MESSAGE_ERROR"],
        "no :scheme"
    );
    // Its section was decoded (acknowledged), then the stream abandoned (cancelled).
    assert_eq!(decoder_stream(&mut c), hex("03 80 40"));
}

#[test]
fn unblocking_many_streams_at_once() {
    let mut c = with_table(3);
    for id in [0, 4, 8] {
        assert_eq!(c.send(id, &get_with_dynamic_authority(), true), Ok(()));
    }
    assert_eq!(c.send(6, &hex(INSERT_AUTHORITY), false), Ok(()));
    let mut requests: Vec<_> = c.seen[3..].to_vec();
    requests.sort();
    assert_eq!(
        requests,
        ["request 0 GET /", "request 4 GET /", "request 8 GET /"]
    );
    for id in [0, 4, 8] {
        assert_eq!(c.send(id, &[], true), Ok(()));
    }
    assert_eq!(c.seen[6..], ["end 0", "end 4", "end 8"]);
    assert!(c.conn.requests.is_empty());
}

// --- Budgets (DESIGN 4.5) ---

fn with_budgets(peer: u32, server: u32, empty: u32) -> Client {
    let mut c = Client {
        conn: Connection::new(Config {
            peer_reset_budget: peer,
            server_reset_budget: server,
            empty_frame_flood_budget: empty,
            ..Config::default()
        }),
        seen: Vec::new(),
    };
    c.send(CONTROL_ID, &client_control(), false).unwrap();
    c
}

#[test]
fn rapid_reset_exhausts_the_peer_reset_budget() {
    let mut c = with_budgets(3, 100, 100);
    for _ in 0..3 {
        assert_eq!(c.conn.peer_cancelled(), Ok(()));
    }
    assert_eq!(
        c.conn.peer_cancelled(),
        connection_error(ErrorCode::ExcessiveLoad)
    );
    // Failed for good.
    assert_eq!(
        c.send(0, &headers(&GET), true),
        connection_error(ErrorCode::ExcessiveLoad)
    );
}

#[test]
fn completed_responses_earn_the_reset_budgets_back() {
    let mut c = with_budgets(2, 100, 100);
    for _ in 0..50 {
        assert_eq!(c.conn.peer_cancelled(), Ok(()));
        c.conn.response_completed();
    }
    assert_eq!(c.conn.peer_cancelled(), Ok(()));
    assert_eq!(c.conn.peer_cancelled(), Ok(()));
    assert!(c.conn.peer_cancelled().is_err());
}

/// A POST declaring 1 octet of body, then 2: reset after the request was handed out.
fn made_you_reset(c: &mut Client, id: u64) -> Result<(), ConnectionError> {
    let mut wire = headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/"),
        ("content-length", "1"),
    ]);
    wire.extend_from_slice(&data(b"xy"));
    c.send(id, &wire, true)
}

#[test]
fn made_you_reset_exhausts_the_server_reset_budget() {
    let mut c = with_budgets(100, 3, 100);
    for i in 0..3 {
        assert_eq!(made_you_reset(&mut c, 4 * i), Ok(()));
    }
    assert_eq!(
        made_you_reset(&mut c, 12),
        connection_error(ErrorCode::ExcessiveLoad)
    );
}

#[test]
fn a_malformed_head_spends_no_server_reset_budget() {
    let mut c = with_budgets(100, 1, 100);
    for i in 0..5 {
        assert_eq!(c.send(4 * i, &headers(&[(":method", "GET")]), true), Ok(()));
    }
    assert_eq!(made_you_reset(&mut c, 20), Ok(()));
    c.conn.response_completed();
    assert_eq!(made_you_reset(&mut c, 24), Ok(()));
}

#[test]
fn empty_data_floods_exhaust_their_budget() {
    let mut c = with_budgets(100, 100, 10);
    c.send(0, &headers(&GET), false).unwrap();
    let empty = data(b"");
    for _ in 0..10 {
        assert_eq!(c.send(0, &empty, false), Ok(()));
    }
    assert_eq!(
        c.send(0, &empty, false),
        connection_error(ErrorCode::ExcessiveLoad)
    );
}

#[test]
fn unknown_frame_floods_exhaust_their_budget_on_request_and_control_streams() {
    for stream in [0, CONTROL_ID] {
        let mut c = with_budgets(100, 100, 10);
        let grease = frame_of(0x21, b"");
        for _ in 0..10 {
            assert_eq!(c.send(stream, &grease, false), Ok(()));
        }
        assert_eq!(
            c.send(stream, &grease, false),
            connection_error(ErrorCode::ExcessiveLoad),
            "on stream {stream}"
        );
    }
}

#[test]
fn body_octets_and_requests_earn_the_empty_frame_budget_back() {
    let mut c = with_budgets(100, 100, 2);
    c.send(0, &headers(&GET), false).unwrap();
    for _ in 0..50 {
        assert_eq!(c.send(0, &data(b""), false), Ok(()));
        assert_eq!(c.send(0, &data(b"x"), false), Ok(()));
    }
    // A grease frame before each request head, as some clients send.
    for i in 1..50 {
        let mut wire = frame_of(0x21, b"");
        wire.extend_from_slice(&headers(&GET));
        assert_eq!(c.send(4 * i, &wire, true), Ok(()));
    }
}
