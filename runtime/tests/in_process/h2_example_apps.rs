//! HTTP/2 through wedge's own engine, in process: example components (WASI 0.2 and
//! 0.3) served by `wedge::net::h2::serve` on a test-local listener, driven by the `h2`
//! crate.

use support::engine::{TestServer, app};
use support::h2::{get, post_while_reading, read_body, stall_uploads};
use support::{pattern, sha256, streamed};
use wedge::net::h2::H2Config;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_answers_200_with_the_exact_body() {
    let server = TestServer::app(app("hello"), H2Config::default()).await;
    let mut client = server.client().await;
    let (response, _) = client.send_request(get("/"), true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; charset=utf-8"
    );
    assert_eq!(read_body(response.into_body()).await, b"Hello, world!\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_answered_with_the_head_alone() {
    let server = TestServer::app(app("hello"), H2Config::default()).await;
    let mut client = server.client().await;
    let head = http::Request::head("http://localhost/").body(()).unwrap();
    let (response, _) = client.send_request(head, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-length"], "14");
    assert!(response.body().is_end_stream(), "END_STREAM on the HEADERS");
    assert_eq!(read_body(response.into_body()).await, b"");
    // The connection is still good.
    let (response, _) = client.send_request(get("/"), true).unwrap();
    assert_eq!(
        read_body(response.await.unwrap().into_body()).await,
        b"Hello, world!\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_arrives_as_8192_exact_bytes() {
    let server = TestServer::app(app("stream"), H2Config::default()).await;
    let mut client = server.client().await;
    let (response, _) = client.send_request(get("/"), true).unwrap();
    let body = read_body(response.await.unwrap().into_body()).await;
    let expected: Vec<u8> = (0..8u8).flat_map(|i| [b'a' + i; 1024]).collect();
    assert_eq!(body, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_returns_10_mib_byte_identical() {
    let server = TestServer::app(app("echo"), H2Config::default()).await;
    let mut client = server.client().await;
    let body = pattern(10 * 1024 * 1024, 7);
    let (status, echoed) = post_while_reading(&mut client, "/", &body).await;
    assert_eq!(status, 200);
    assert_eq!(echoed.len(), body.len());
    assert_eq!(sha256(&echoed), sha256(&body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_handler_holds_up_nobody_on_its_connection() {
    let server = TestServer::app(app("faults"), H2Config::default()).await;
    let mut client = server.client().await;
    // The first handler parks for a minute: far longer than the test runs, so the
    // second response can only come first if dispatch never waits on the first.
    let (slow, _) = client.send_request(get("/sleep?ms=60000"), true).unwrap();
    let (fast, _) = client.send_request(get("/stdout"), true).unwrap();
    let mut slow = Box::pin(slow);
    // Order, not time: the second stream's response must come first.
    tokio::select! {
        biased;
        _ = &mut slow => panic!("the parked stream answered before the other"),
        fast = fast => assert_eq!(fast.unwrap().status(), 200),
    }
    // The parked one is still parked.
    assert!(futures_poll_once(&mut slow).await.is_none());
}

/// Polls a future once: `Some` if it is ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut *future).poll(cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_that_never_read_stall_only_their_own_streams() {
    let server = TestServer::app(app("faults"), H2Config::default()).await;
    let mut client = server.client().await;
    // `/sleep` never reads its body. Twenty full windows are more than the 1 MiB
    // connection window: they fit only because it is credited as bytes are buffered.
    let stalled = stall_uploads(&mut client, "/sleep?ms=60000", 20).await;
    // Other streams on the same connection keep flowing.
    for _ in 0..3 {
        let (other, _) = client.send_request(get("/stdout"), true).unwrap();
        assert_eq!(other.await.unwrap().status(), 200);
    }
    // By then, had a stalled stream been credited, the client would know.
    for (_, upload) in &stalled {
        assert_eq!(
            upload.capacity(),
            0,
            "no WINDOW_UPDATE for an unread stream"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_goaway_and_lets_the_request_in_flight_finish() {
    use wedge_proto::h2::frame::FrameType;
    let server = TestServer::app(app("faults"), H2Config::default()).await;
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut raw = support::h2::raw::Raw::new(tcp);
    raw.settings_ack()
        .get(1, "/sleep?ms=2000")
        .get(3, "/stdout");
    raw.flush().await;
    // Stream 3's answer means the server has taken streams 1 and 3.
    raw.response_end(3).await;
    server.shutdown.send(true).unwrap();
    // GOAWAY names stream 3, the last one taken, with NO_ERROR; stream 1 still ends
    // with its full body.
    let mut goaway = None;
    let mut body = Vec::new();
    let mut ended = false;
    while !(ended && goaway.is_some()) {
        let Some(frame) = raw.next().await else { break };
        if frame.kind == FrameType::GoAway as u8 {
            let last = u32::from_be_bytes(frame.payload[..4].try_into().unwrap()) & 0x7fff_ffff;
            goaway = Some((last, frame.code()));
        }
        if frame.stream == 1 && frame.kind == FrameType::Data as u8 {
            body.extend_from_slice(&frame.payload);
            ended = frame.flags & wedge_proto::h2::frame::flags::END_STREAM != 0;
        }
    }
    assert_eq!(goaway, Some((3, wedge_proto::h2::ErrorCode::NoError)));
    assert!(ended, "stream 1 did not end cleanly");
    assert_eq!(body, b"slept 2000\n");
    // Then the server closes the connection.
    assert!(raw.next().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_p3_guest_that_never_reads_stalls_only_its_own_stream() {
    let server = TestServer::app(support::engine::app("p3_probe"), H2Config::default()).await;
    let mut client = server.client().await;
    // `…/sleep` never reads its body: wasmtime polls a p3 request body only as the
    // guest reads it, so its stream window is never opened again.
    let stalled = stall_uploads(&mut client, "/sleep?ms=60000", 20).await;
    // Other streams on the same connection keep flowing, on the same instances.
    for _ in 0..3 {
        let (other, _) = client
            .send_request(support::h2::get("/stream"), true)
            .unwrap();
        let other = other.await.unwrap();
        assert_eq!(other.status(), 200);
        assert_eq!(read_body(other.into_body()).await, streamed());
    }
    for (_, upload) in &stalled {
        assert_eq!(
            upload.capacity(),
            0,
            "no WINDOW_UPDATE for an unread stream"
        );
    }
}
