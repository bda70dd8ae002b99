//! The limit on a request body over HTTP/2, against the real binary with raw frames:
//! the app's `--max-body`, not the engine's, whenever the body arrived.

use support::h2::raw::Raw;
use support::{Server, example};
use tokio::net::TcpStream;
use wedge_proto::h2::frame::{FrameType, flags};

/// The status and body of the response on `stream`, read to its end; a reset after the
/// head shows as a body ending in `<reset>`.
async fn response_on(raw: &mut Raw<TcpStream>, stream: u32) -> (String, Vec<u8>) {
    let mut status = String::new();
    let mut body = Vec::new();
    while let Some(frame) = raw.next().await {
        if frame.kind == FrameType::Headers as u8 {
            // Decoded whatever its stream: HPACK state follows every head.
            let decoded = raw.status(&frame);
            if frame.stream == stream {
                status = decoded;
            }
        }
        if frame.stream != stream {
            continue;
        }
        if frame.kind == FrameType::Data as u8 {
            body.extend_from_slice(&frame.payload);
        }
        if frame.kind == FrameType::RstStream as u8 {
            body.extend_from_slice(b"<reset>");
            break;
        }
        if frame.flags & flags::END_STREAM != 0 {
            break;
        }
    }
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_the_apps_limit_that_arrived_before_the_head_gets_413() {
    // The real binary: the limit is the app's (`--max-body`), not the engine's.
    let server = Server::start(&example("echo"), &["--max-body", "6KiB"]);
    let mut raw = Raw::new(TcpStream::connect(server.authority()).await.unwrap());
    raw.settings_ack();
    // No content-length; HEADERS and two DATA frames of 4 KiB in one write, so all of
    // the body is in wedge's hands before the guest answers. The echo sets its head,
    // reads the first 4 KiB (within the limit) and waits for them to go out before it
    // reads on: the head must still become a 413, as on HTTP/1.1, every time.
    for stream in (1..40).step_by(2) {
        raw.post(stream, "/")
            .data(stream, &[b'y'; 4096], false)
            .data(stream, &[b'y'; 4096], true);
        raw.flush().await;
        let (status, body) = response_on(&mut raw, stream).await;
        let cut = if body.ends_with(b"<reset>") {
            ", then a reset"
        } else {
            ""
        };
        assert_eq!(status, "413", "{} octets of body{cut}", body.len());
        assert!(body.starts_with(b"413 Payload Too Large"));
    }
    raw.post(41, "/").data(41, b"small", true);
    raw.flush().await;
    assert_eq!(
        response_on(&mut raw, 41).await,
        ("200".to_string(), b"small".to_vec())
    );
}
