//! Each attack of DESIGN 4.5 against the HTTP/2 engine serving the `faults` example:
//! refused as specified, while a well-behaved client on another connection is still
//! served. All run against the real `wedge` binary (h2c through the listener's preface
//! sniff); the timeouts with short `--h2-*-timeout` flags.

use std::net::SocketAddr;

use support::h2::raw::Raw;
use support::h2::{client_with, get, read_body};
use support::{Server, example};
use tokio::net::TcpStream;
use wedge_proto::h2::ErrorCode;
use wedge_proto::h2::frame::{FrameType, Setting};

/// A server under attack, kept alive while the test runs.
struct Target {
    addr: SocketAddr,
    _server: Box<dyn std::any::Any + Send>,
}

/// The real binary serving `faults` on cleartext HTTP/1.1 and h2c, with `args`.
async fn binary_with(args: &'static [&'static str]) -> Target {
    let server = tokio::task::spawn_blocking(move || {
        // The engine's limits are under test, not the app's: room for every stream
        // an attacker parks plus the well-behaved client's.
        let mut all = vec!["--no-tls", "--max-concurrent", "1000"];
        all.extend_from_slice(args);
        Server::start(&example("faults"), &all)
    })
    .await
    .unwrap();
    Target {
        addr: server.authority().parse().unwrap(),
        _server: Box::new(server),
    }
}

async fn binary() -> Target {
    binary_with(&[]).await
}

async fn attacker(server: &Target) -> Raw<TcpStream> {
    Raw::new(TcpStream::connect(server.addr).await.unwrap())
}

/// A well-behaved client on its own connection gets its answer.
async fn still_serves(server: &Target) {
    let mut client = client_with(server.addr, h2::client::Builder::new()).await;
    let (response, _) = client.send_request(get("/stdout"), true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    read_body(response.into_body()).await;
}

fn sleep_get(raw: &mut Raw<TcpStream>, stream: u32) {
    raw.get(stream, "/sleep?ms=30000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_is_answered_enhance_your_calm() {
    let server = binary().await;
    let mut raw = attacker(&server).await;
    for i in 0..=200 {
        sleep_get(&mut raw, 1 + 2 * i);
        raw.rst(1 + 2 * i, ErrorCode::Cancel);
    }
    raw.flush().await;
    assert_eq!(raw.goaway().await, ErrorCode::EnhanceYourCalm);
    still_serves(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_you_reset_is_answered_enhance_your_calm() {
    let server = binary().await;
    let mut raw = attacker(&server).await;
    // Each zero WINDOW_UPDATE makes the server reset a stream (CVE-2025-8671).
    for i in 0..=100 {
        sleep_get(&mut raw, 1 + 2 * i);
        raw.window_update(1 + 2 * i, 0);
    }
    raw.flush().await;
    assert_eq!(raw.goaway().await, ErrorCode::EnhanceYourCalm);
    still_serves(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_limit_are_refused() {
    let server = binary().await;
    let mut raw = attacker(&server).await;
    for i in 0..100 {
        sleep_get(&mut raw, 1 + 2 * i);
    }
    sleep_get(&mut raw, 201);
    raw.flush().await;
    assert_eq!(raw.reset_of(201).await, ErrorCode::RefusedStream);
    // The refused block was decoded: HPACK is in step for the next one.
    raw.get(203, "/stdout");
    raw.flush().await;
    assert_eq!(raw.reset_of(203).await, ErrorCode::RefusedStream);
    still_serves(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_flood_is_answered_enhance_your_calm() {
    let server = binary().await;
    let mut raw = attacker(&server).await;
    raw.frame(0x1, 0, 1, &[0x82]);
    for _ in 0..100 {
        raw.frame(0x9, 0, 1, &[]);
    }
    raw.flush().await;
    assert_eq!(raw.goaway().await, ErrorCode::EnhanceYourCalm);
    still_serves(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_list_over_16_kib_is_answered_431() {
    let server = binary().await;
    let mut raw = attacker(&server).await;
    let big = "x".repeat(17 * 1024);
    raw.headers(
        1,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("x-big", &big),
        ],
        true,
    );
    raw.flush().await;
    let frames = raw.response_end(1).await;
    let head = frames.iter().find(|f| f.kind == 0x1).unwrap();
    assert_eq!(raw.status(head), "431");
    still_serves(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpack_bomb_is_answered_431_without_growing() {
    let server = binary().await;
    let mut raw = attacker(&server).await;
    // One 1 KiB field in the dynamic table, then referenced 1000 times in one block:
    // 1 KiB on the wire, 1 MiB decoded.
    let big = "y".repeat(1000);
    raw.headers(
        1,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "localhost"),
            (":path", "/"),
            ("x-bomb", &big),
        ],
        true,
    );
    raw.flush().await;
    let frames = raw.response_end(1).await;
    let head = frames.iter().find(|f| f.kind == 0x1).unwrap();
    assert_eq!(raw.status(head), "200");
    // GET, http, /, and the authority the client's encoder indexed (now at 63).
    let mut block = vec![0x82, 0x86, 0x84, 0xbf];
    block.extend(std::iter::repeat_n(0xbe, 1000)); // index 62: the newest entry
    raw.frame(0x1, 0x5, 3, &block);
    raw.flush().await;
    let frames = raw.response_end(3).await;
    let head = frames.iter().find(|f| f.kind == 0x1).unwrap();
    assert_eq!(raw.status(head), "431");
    still_serves(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_ping_empty_data_and_ignored_frame_floods_are_answered_enhance_your_calm() {
    let server = binary().await;
    let mut settings = attacker(&server).await;
    for _ in 0..200 {
        settings.settings(&[Setting::EnablePush(false)]);
    }
    settings.flush().await;
    let mut pings = attacker(&server).await;
    for _ in 0..200 {
        pings.ping();
    }
    pings.flush().await;
    let mut empty = attacker(&server).await;
    empty.post(1, "/sleep?ms=30000");
    for _ in 0..200 {
        empty.data(1, &[], false);
    }
    empty.flush().await;
    // PRIORITY frames (wedge does not prioritise), then frames of an unknown type.
    let mut ignored = attacker(&server).await;
    for _ in 0..200 {
        ignored.frame(0x2, 0, 1, &[0, 0, 0, 0, 16]);
    }
    ignored.flush().await;
    let mut unknown = attacker(&server).await;
    for _ in 0..200 {
        unknown.frame(0x42, 0, 0, &[0; 64]);
    }
    unknown.flush().await;
    assert_eq!(settings.goaway().await, ErrorCode::EnhanceYourCalm);
    assert_eq!(ignored.goaway().await, ErrorCode::EnhanceYourCalm);
    assert_eq!(unknown.goaway().await, ErrorCode::EnhanceYourCalm);
    assert_eq!(pings.goaway().await, ErrorCode::EnhanceYourCalm);
    assert_eq!(empty.goaway().await, ErrorCode::EnhanceYourCalm);
    still_serves(&server).await;
}

/// Reads until the server closes, returning the GOAWAY code if one came.
async fn closed(raw: &mut Raw<TcpStream>) -> Option<ErrorCode> {
    let mut code = None;
    while let Some(frame) = raw.next().await {
        if frame.kind == 0x7 {
            code = Some(frame.code());
        }
    }
    code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_peers_are_closed_after_their_timeouts() {
    let server = binary_with(&[
        "--h2-handshake-timeout=300ms",
        "--h2-header-read-timeout=300ms",
        "--h2-idle-timeout=300ms",
        "--h2-zero-window-timeout=300ms",
    ])
    .await;
    // Handshake: the preface and nothing more.
    let mut handshake = Raw::new(TcpStream::connect(server.addr).await.unwrap());
    handshake.out.truncate(24);
    handshake.acks_settings = false;
    handshake.flush().await;
    // Header read: a HEADERS without END_HEADERS, never continued (slowloris). It
    // does not acknowledge the server's SETTINGS: an ACK read later would be a frame
    // inside the open header block, a PROTOCOL_ERROR if it beat the timeout (the
    // settings timeout, 10 s, is far off).
    let mut head = attacker(&server).await;
    head.acks_settings = false;
    head.frame(0x1, 0, 1, &[0x82]);
    head.flush().await;
    // Idle: a connection that never asks for anything.
    let mut idle = attacker(&server).await;
    idle.flush().await;
    // Zero window: a response the client never makes room for.
    let mut zero = attacker(&server).await;
    zero.settings(&[Setting::InitialWindowSize(0)]);
    zero.get(1, "/stdout");
    zero.flush().await;
    assert_eq!(closed(&mut handshake).await, Some(ErrorCode::NoError));
    assert_eq!(closed(&mut head).await, Some(ErrorCode::NoError));
    assert_eq!(closed(&mut idle).await, Some(ErrorCode::NoError));
    assert_eq!(closed(&mut zero).await, Some(ErrorCode::NoError));
    still_serves(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_guest_costs_its_stream_nothing_else() {
    let server = binary().await;
    let mut client = client_with(server.addr, h2::client::Builder::new()).await;
    let (trap, _) = client.send_request(get("/trap-before-head"), true).unwrap();
    assert_eq!(trap.await.unwrap().status(), 500);
    let (ok, _) = client.send_request(get("/stdout"), true).unwrap();
    assert_eq!(ok.await.unwrap().status(), 200);
}

/// DESIGN 4.6, streams die with their request: a response stalled on a window the
/// client never opens is reset when its request's wall time is up, whether its guest
/// still writes (`stream`, blocked on a full stream) or has finished (`hello`, its
/// last octets waiting), on fresh and reused instances; the stream's state is freed
/// (with one stream allowed, the next request is served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_stalled_past_its_wall_time_is_reset() {
    let cases: [(&str, &[&str]); 4] = [
        ("stream", &[]),
        ("hello", &[]),
        ("stream", &["--instance-reuse", "4"]),
        ("hello_p3", &[]),
    ];
    for (name, extra) in cases {
        let mut args = vec![
            "--no-tls",
            "--wall-time",
            "1s",
            // Only the wall time may end the stalled stream, not the engine's own
            // zero-window defence.
            "--h2-zero-window-timeout",
            "300s",
            "--h2-max-concurrent-streams",
            "1",
        ];
        args.extend_from_slice(extra);
        let server = tokio::task::spawn_blocking(move || Server::start(&example(name), &args))
            .await
            .unwrap();
        let addr: SocketAddr = server.authority().parse().unwrap();
        let mut raw = Raw::new(TcpStream::connect(addr).await.unwrap());
        // One octet of window per stream, never opened further.
        raw.settings(&[Setting::InitialWindowSize(1)]).get(1, "/");
        raw.flush().await;
        // Heads are decoded as they come (HPACK is connection state).
        let code = loop {
            let frame = raw.next().await.expect("the connection stays open");
            assert_ne!(frame.kind, FrameType::GoAway as u8, "{name}: {frame:?}");
            if frame.kind == FrameType::Headers as u8 {
                assert_eq!(raw.status(&frame), "200", "{name} {extra:?}");
            }
            if frame.kind == FrameType::RstStream as u8 && frame.stream == 1 {
                break frame.code();
            }
        };
        assert_eq!(code, ErrorCode::InternalError, "{name} {extra:?}");
        // The window opened for good: the stream slot is free again.
        raw.settings(&[Setting::InitialWindowSize(1 << 20)])
            .get(3, "/");
        raw.flush().await;
        loop {
            let frame = raw.next().await.expect("the connection stays open");
            assert_ne!(frame.kind, FrameType::RstStream as u8, "{name}: {frame:?}");
            if frame.kind == FrameType::Headers as u8 && frame.stream == 3 {
                assert_eq!(raw.status(&frame), "200", "{name} {extra:?}");
                break;
            }
        }
    }
}

/// Issue 18: RFC 9113 §5.3.1, a stream cannot depend on itself; on an idle stream,
/// which cannot be reset (§6.4), it ends the connection. Sent only after a response
/// was read whole, so it does not matter when it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_making_an_idle_stream_depend_on_itself_ends_the_connection() {
    let server = binary().await;
    let mut raw = attacker(&server).await;
    raw.get(1, "/stdout");
    raw.flush().await;
    let frames = raw.response_end(1).await;
    let head = frames.iter().find(|f| f.kind == FrameType::Headers as u8);
    assert_eq!(raw.status(head.expect("a response head")), "200");
    raw.frame(FrameType::Priority as u8, 0, 3, &[0, 0, 0, 3, 16]);
    raw.flush().await;
    assert_eq!(raw.goaway().await, ErrorCode::ProtocolError);
    still_serves(&server).await;
}

/// Issue 18: on the cleartext port, a connection that starts the HTTP/2 preface
/// (`PRI ` is reserved for it) and then goes wrong is refused as HTTP/2 (GOAWAY
/// PROTOCOL_ERROR), never answered as HTTP/1.1; `PRIX` is an HTTP/1.1 method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_preface_on_the_cleartext_port_gets_goaway_not_an_http1_answer() {
    let server = binary().await;
    for wire in [
        &b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"[..],
        b"PRI * HTTP/1.1\r\n\r\n",
    ] {
        let mut raw = attacker(&server).await;
        raw.out.clear();
        raw.out.extend_from_slice(wire);
        raw.flush().await;
        assert_eq!(raw.goaway().await, ErrorCode::ProtocolError);
    }
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    std::io::Write::write_all(&mut stream, b"PRIX / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut answer = [0u8; 12];
    std::io::Read::read_exact(&mut stream, &mut answer).unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 "), "{answer:?}");
    still_serves(&server).await;
}

/// Issue 18: a POST to `faults` (answered without reading its body) with `extra`
/// fields, its response read whole: from here on the stream is finished (half-closed
/// local), whatever the timing, and what the client still sends on it is judged.
async fn finished_stream(server: &Target, extra: &[(&str, &str)]) -> Raw<TcpStream> {
    let mut raw = attacker(server).await;
    let mut fields = vec![
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/"),
    ];
    fields.extend_from_slice(extra);
    raw.headers(1, &fields, false);
    raw.flush().await;
    let frames = raw.response_end(1).await;
    let head = frames.iter().find(|f| f.kind == FrameType::Headers as u8);
    assert_eq!(raw.status(head.expect("a response head")), "200");
    raw
}

/// How a server must answer a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Reset(ErrorCode),
    GoAway(ErrorCode),
}

type AfterResponse = (
    &'static str,
    &'static [(&'static str, &'static str)],
    fn(&mut Raw<TcpStream>),
    Answer,
);

fn trailers(raw: &mut Raw<TcpStream>, fields: &[(&str, &str)]) {
    raw.headers(1, fields, true);
}

/// Issue 18: every error a client can make on a request still arriving, sent only
/// once its response was read whole, gets the RFC 9113 answer: the result does not
/// depend on whether the bad frame raced the response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_sent_after_the_whole_response_are_still_judged() {
    let cases: [AfterResponse; 10] = [
        (
            "DATA past the stream window (§6.9.1)",
            &[],
            |raw| {
                for _ in 0..4 {
                    raw.data(1, &[0; 16_384], false);
                }
            },
            Answer::Reset(ErrorCode::FlowControlError),
        ),
        (
            "a pseudo-header in trailers (§8.1)",
            &[],
            |raw| trailers(raw, &[(":path", "/")]),
            Answer::Reset(ErrorCode::ProtocolError),
        ),
        (
            "an uppercase name in trailers (§8.2.1)",
            &[],
            |raw| trailers(raw, &[("X-Sum", "1")]),
            Answer::Reset(ErrorCode::ProtocolError),
        ),
        (
            "a connection-specific field in trailers (§8.2.2)",
            &[],
            |raw| trailers(raw, &[("connection", "close")]),
            Answer::Reset(ErrorCode::ProtocolError),
        ),
        (
            "a second HEADERS without END_STREAM (§8.1)",
            &[],
            |raw| {
                raw.headers(1, &[("x-sum", "1")], false);
            },
            Answer::Reset(ErrorCode::ProtocolError),
        ),
        (
            "fewer octets than content-length (§8.1.1)",
            &[("content-length", "10")],
            |raw| {
                raw.data(1, b"abc", true);
            },
            Answer::Reset(ErrorCode::ProtocolError),
        ),
        (
            "more octets than content-length (§8.1.1)",
            &[("content-length", "2")],
            |raw| {
                raw.data(1, b"abc", false);
            },
            Answer::Reset(ErrorCode::ProtocolError),
        ),
        (
            "a zero WINDOW_UPDATE (§6.9)",
            &[],
            |raw| {
                raw.window_update(1, 0);
            },
            Answer::Reset(ErrorCode::ProtocolError),
        ),
        (
            "DATA after END_STREAM (§5.1)",
            &[],
            |raw| {
                raw.data(1, b"", true).data(1, b"x", false);
            },
            Answer::Reset(ErrorCode::StreamClosed),
        ),
        (
            "HEADERS after END_STREAM (§5.1)",
            &[],
            |raw| {
                raw.data(1, b"", true);
                trailers(raw, &[("x-sum", "1")]);
            },
            Answer::GoAway(ErrorCode::StreamClosed),
        ),
    ];
    let server = binary().await;
    for (name, extra, script, answer) in cases {
        let mut raw = finished_stream(&server, extra).await;
        script(&mut raw);
        raw.flush().await;
        let got = match answer {
            Answer::Reset(_) => Answer::Reset(raw.reset_of(1).await),
            Answer::GoAway(_) => Answer::GoAway(raw.goaway().await),
        };
        assert_eq!(got, answer, "{name}");
    }
    still_serves(&server).await;
}

/// Reads until the answer to our PING: the frames before it, all of which the server
/// sent for frames we sent before the PING.
async fn until_ping_ack(raw: &mut Raw<TcpStream>) -> Vec<support::h2::raw::Received> {
    raw.ping();
    raw.flush().await;
    let mut frames = Vec::new();
    loop {
        let frame = raw.next().await.expect("the connection stays open");
        if frame.kind == FrameType::Ping as u8 {
            return frames;
        }
        frames.push(frame);
    }
}

/// Issue 18: a finished stream is judged for `--h2-finished-stream-frames` frames, then
/// reset with NO_ERROR and forgotten; until then it holds its place among the
/// concurrent streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_stream_is_reset_at_its_bound_and_frees_its_place() {
    let server = binary_with(&[
        "--h2-finished-stream-frames",
        "3",
        "--h2-max-concurrent-streams",
        "1",
    ])
    .await;
    let mut raw = finished_stream(&server, &[]).await;
    raw.data(1, b"more", false).data(1, b"more", false);
    let frames = until_ping_ack(&mut raw).await;
    assert!(
        frames.iter().all(|f| f.kind != FrameType::RstStream as u8),
        "{frames:?}"
    );
    // Stream 1 still holds the one place.
    raw.get(3, "/");
    raw.flush().await;
    assert_eq!(raw.reset_of(3).await, ErrorCode::RefusedStream);
    // The third frame is its last.
    raw.data(1, b"more", false);
    raw.flush().await;
    assert_eq!(raw.reset_of(1).await, ErrorCode::NoError);
    // Its place is free.
    raw.get(5, "/");
    raw.flush().await;
    let frames = raw.response_end(5).await;
    let head = frames.iter().find(|f| f.kind == FrameType::Headers as u8);
    assert_eq!(raw.status(head.expect("a response head")), "200");
}

/// Issue 18, RFC 9113 §6.5.3: a client that never acknowledges wedge's SETTINGS is
/// served meanwhile, then sent GOAWAY SETTINGS_TIMEOUT; one that did is not, though it
/// connected first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_never_acknowledged_end_the_connection_with_settings_timeout() {
    let server = binary_with(&["--h2-settings-timeout", "500ms"]).await;
    // Acknowledges the server's SETTINGS as it reads them, before its request's answer.
    let mut acked = attacker(&server).await;
    acked.get(1, "/");
    acked.flush().await;
    acked.response_end(1).await;
    // Answered after the ACK it follows: the server has taken the ACK.
    until_ping_ack(&mut acked).await;
    let mut never = attacker(&server).await;
    never.acks_settings = false;
    never.get(1, "/");
    never.flush().await;
    never.response_end(1).await;
    assert_eq!(never.goaway().await, ErrorCode::SettingsTimeout);
    // The first client's deadline has passed too: its ACK took it away.
    acked.get(3, "/");
    acked.flush().await;
    let frames = acked.response_end(3).await;
    assert!(
        frames.iter().all(|f| f.kind != FrameType::GoAway as u8),
        "{frames:?}"
    );
}
