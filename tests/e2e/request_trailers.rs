//! Issue 18: request trailers reach guests. Clients send a body and trailers to the real
//! binary over HTTP/1.1 (hyper's client, chunked with a trailer section), HTTP/2 (the
//! `h2` crate and nghttp, h2c) and HTTP/3 (the `h3` crate); `echo`'s `/trailers` (WASI
//! 0.2, on a fresh instance and on a reused one) and `p3-probe`'s `…/trailers` (WASI
//! 0.3) answer the body's length and the trailers they read. A request without
//! trailers still ends as before, and malformed trailers are still refused, never
//! handed on.

use std::convert::Infallible;
use std::process::Command;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper_util::rt::TokioIo;
use support::h2::raw::Raw;
use support::h3::{H3Server, read_response, request, start};
use tokio::net::TcpStream;
use wedge_proto::h2::ErrorCode;
use wedge_proto::h2::frame::FrameType;

const BODY: &[u8] = b"hello world";
/// What `/trailers` answers for `BODY` followed by [`trailers`]...
const SEEN: &str = "body: 11 bytes\nx-checksum: abc\nx-tag: 1\nx-tag: 2\n";
/// ...and for `BODY` alone.
const SEEN_NONE: &str = "body: 11 bytes\n";

/// Three fields, one name twice: order and repeats must survive.
fn trailers() -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", HeaderValue::from_static("abc"));
    trailers.append("x-tag", HeaderValue::from_static("1"));
    trailers.append("x-tag", HeaderValue::from_static("2"));
    trailers
}

/// `POST /trailers` over HTTP/1.1 with `BODY` chunked, then `trailers` if any: the
/// response's status and body.
async fn over_h1(server: &H3Server, trailers: Option<HeaderMap>) -> (u16, String) {
    let tcp = TcpStream::connect(server.server.authority()).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::post("/trailers").header("host", "localhost");
    let mut frames = vec![Frame::data(Bytes::from_static(BODY))];
    if let Some(trailers) = trailers {
        // hyper sends the trailers the head announces (RFC 9110 §6.6.2), no others.
        request = request.header("trailer", "x-checksum, x-tag");
        frames.push(Frame::trailers(trailers));
    }
    let frames = futures_util::stream::iter(frames.into_iter().map(Ok::<_, Infallible>));
    let response = sender
        .send_request(request.body(StreamBody::new(frames)).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The same over h2c with the `h2` crate.
async fn over_h2(server: &H3Server, trailers: Option<HeaderMap>) -> (u16, String) {
    let addr = server.server.authority().parse().unwrap();
    let mut client = support::h2::client_with(addr, h2::client::Builder::new()).await;
    let (response, mut upload) = client
        .send_request(support::h2::post("/trailers"), false)
        .unwrap();
    upload
        .send_data(Bytes::from_static(BODY), trailers.is_none())
        .unwrap();
    if let Some(trailers) = trailers {
        upload.send_trailers(trailers).unwrap();
    }
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    let body = support::h2::read_body(response.into_body()).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The same over HTTP/3 with the `h3` crate.
async fn over_h3(server: &H3Server, trailers: Option<HeaderMap>) -> (u16, String) {
    let mut requests = server.connect().await;
    let stream = requests
        .send_request(request("POST", "/trailers"))
        .await
        .unwrap();
    let (mut upload, mut download) = stream.split();
    let send = async move {
        upload.send_data(Bytes::from_static(BODY)).await.unwrap();
        if let Some(trailers) = trailers {
            upload.send_trailers(trailers).await.unwrap();
        }
        upload.finish().await.unwrap();
    };
    let ((), (status, body)) = tokio::join!(send, read_response(&mut download));
    (status.as_u16(), String::from_utf8_lossy(&body).into_owned())
}

/// The same over h2c with nghttp (`--trailer`, Debian `nghttp2-client`): the body.
fn over_nghttp(server: &H3Server) -> String {
    let input = support::temp_dir("trailers").join("body");
    std::fs::write(&input, BODY).unwrap();
    let out = Command::new("nghttp")
        .arg("--data")
        .arg(&input)
        .args(["--trailer", "x-checksum: abc"])
        .args(["--trailer", "x-tag: 1", "--trailer", "x-tag: 2"])
        .arg(format!("{}/trailers", server.server.url))
        .output()
        .expect("nghttp (apt-get install nghttp2-client)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every protocol, with and without trailers, against `server`'s guest.
async fn reads_trailers_over_every_protocol(server: &H3Server) {
    let with = (200, SEEN.to_owned());
    let without = (200, SEEN_NONE.to_owned());
    assert_eq!(over_h1(server, Some(trailers())).await, with, "HTTP/1.1");
    assert_eq!(over_h1(server, None).await, without, "HTTP/1.1, none");
    assert_eq!(over_h2(server, Some(trailers())).await, with, "HTTP/2");
    assert_eq!(over_h2(server, None).await, without, "HTTP/2, none");
    assert_eq!(over_h3(server, Some(trailers())).await, with, "HTTP/3");
    assert_eq!(over_h3(server, None).await, without, "HTTP/3, none");
    assert_eq!(over_nghttp(server), SEEN, "nghttp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasi_0_2_guest_on_a_fresh_instance_reads_the_trailers() {
    reads_trailers_over_every_protocol(&start("echo", &[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasi_0_2_guest_on_a_reused_instance_reads_the_trailers() {
    reads_trailers_over_every_protocol(&start("echo", &["--instance-reuse", "4"])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasi_0_3_guest_reads_the_trailers() {
    reads_trailers_over_every_protocol(&start("p3_probe", &[])).await;
}

#[test]
fn a_malformed_or_oversized_http1_trailer_section_fails_the_body() {
    use std::io::{Read, Write};
    let server = start("echo", &[]);
    let big = format!("x-big: {}", "v".repeat(16 * 1024));
    // A pseudo-header is no field name in HTTP/1.1, and hyper takes 16 KiB of
    // trailers at most: it refuses the section. Connection-specific fields hyper
    // lets through, and wedge refuses them as HTTP/2 and HTTP/3 do (attack review).
    // Either way the guest's read of its body fails (`echo` answers that with a
    // 500), never seeing a field of the section.
    let refused = [
        ":path: /x",
        big.as_str(),
        "connection: close",
        "keep-alive: 5",
        "proxy-connection: x",
        "transfer-encoding: chunked",
        "upgrade: h2c",
        "te: gzip",
    ];
    for section in refused {
        let mut tcp = std::net::TcpStream::connect(server.server.authority()).unwrap();
        // A bound, not a synchronisation: the answer closes the connection.
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let request = format!(
            "POST /trailers HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\
             transfer-encoding: chunked\r\n\r\nb\r\nhello world\r\n0\r\n{section}\r\n\r\n"
        );
        tcp.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 500 "), "{answer}");
        let (_, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(!body.contains(section), "{answer}");
    }
}

/// Trailers no client library sends, each answered by RST_STREAM with the code the
/// HTTP/2 core gives it (RFC 9113 §8.1, §8.2): malformed ones PROTOCOL_ERROR, one past
/// `--h2-max-header-list-size` ENHANCE_YOUR_CALM (it cannot be answered 431 once the
/// handler runs, and is not handed on cut short).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_oversized_trailers_reset_the_http2_stream() {
    let server = start("echo", &[]);
    let mut raw = Raw::new(TcpStream::connect(server.server.authority()).await.unwrap());
    let big = "v".repeat(16 * 1024);
    let cases = [
        ("a pseudo-header", (":path", "/"), ErrorCode::ProtocolError),
        (
            "a connection-specific field",
            ("connection", "close"),
            ErrorCode::ProtocolError,
        ),
        ("TE but trailers", ("te", "gzip"), ErrorCode::ProtocolError),
        (
            "a control character in a value",
            ("x-a", "a\x01b"),
            ErrorCode::ProtocolError,
        ),
        (
            "past the header list limit",
            ("x-big", big.as_str()),
            ErrorCode::EnhanceYourCalm,
        ),
    ];
    let mut stream = 1;
    for (case, field, code) in cases {
        raw.post(stream, "/trailers")
            .data(stream, BODY, false)
            .headers(stream, &[field], true);
        raw.flush().await;
        assert_eq!(raw.reset_of(stream).await, code, "{case}");
        stream += 2;
    }
    // The connection serves on, and well-formed trailers on it reach the guest.
    let good = [("x-checksum", "abc"), ("x-tag", "1"), ("x-tag", "2")];
    raw.post(stream, "/trailers")
        .data(stream, BODY, false)
        .headers(stream, &good, true);
    raw.flush().await;
    let mut status = String::new();
    let mut body = Vec::new();
    for frame in raw.response_end(stream).await {
        if frame.kind == FrameType::Headers as u8 {
            // Every head, in order: HPACK is connection state.
            let seen = raw.status(&frame);
            if frame.stream == stream {
                status = seen;
            }
        } else if frame.kind == FrameType::Data as u8 && frame.stream == stream {
            body.extend_from_slice(&frame.payload);
        }
    }
    assert_eq!(
        (status.as_str(), String::from_utf8(body).unwrap().as_str()),
        ("200", SEEN)
    );
}

/// A request stream's octets: `POST /trailers` with `BODY`, then a HEADERS frame of
/// `trailers` (static table only).
fn h3_post_with_trailers(trailers: &[(&str, &str)]) -> Vec<u8> {
    use wedge_proto::h3::frame::{encode_data_head, encode_headers};
    let headers = |fields: &[(&str, &str)], wire: &mut Vec<u8>| {
        let mut section = Vec::new();
        wedge_proto::h3::qpack::Encoder::default().encode(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut section,
        );
        encode_headers(&section, wire);
    };
    let mut wire = Vec::new();
    let head = [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", "/trailers"),
    ];
    headers(&head, &mut wire);
    encode_data_head(BODY.len() as u64, &mut wire);
    wire.extend_from_slice(BODY);
    headers(trailers, &mut wire);
    wire
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_oversized_trailers_reset_the_http3_stream() {
    const H3_MESSAGE_ERROR: u64 = 0x10e;
    const H3_EXCESSIVE_LOAD: u64 = 0x107;
    let server = start("echo", &[]);
    let quic = server.connect_quic().await;
    let big = "v".repeat(16 * 1024);
    let cases: [(&str, (&str, &str), u64); 5] = [
        ("a pseudo-header", (":path", "/"), H3_MESSAGE_ERROR),
        (
            "a connection-specific field",
            ("connection", "close"),
            H3_MESSAGE_ERROR,
        ),
        ("TE but trailers", ("te", "gzip"), H3_MESSAGE_ERROR),
        (
            "a control character in a value",
            ("x-a", "a\x01b"),
            H3_MESSAGE_ERROR,
        ),
        (
            "past the field section limit",
            ("x-big", big.as_str()),
            H3_EXCESSIVE_LOAD,
        ),
    ];
    let exchange = |wire: Vec<u8>| {
        let quic = quic.clone();
        async move {
            let (mut send, mut recv) = quic.open_bi().await.unwrap();
            send.write_all(&wire).await.unwrap();
            let _ = send.finish();
            recv.read_to_end(1 << 20).await
        }
    };
    for (case, field, code) in cases {
        match exchange(h3_post_with_trailers(&[field])).await {
            Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(got))) => {
                assert_eq!(got.into_inner(), code, "{case}")
            }
            other => panic!("{case}: expected a reset, got {other:?}"),
        }
    }
    // A stream error each: the connection serves on, and well-formed trailers reach
    // the guest.
    let good = [("x-checksum", "abc"), ("x-tag", "1"), ("x-tag", "2")];
    let answer = exchange(h3_post_with_trailers(&good)).await.unwrap();
    assert!(
        answer.windows(SEEN.len()).any(|w| w == SEEN.as_bytes()),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}
