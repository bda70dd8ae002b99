//! An HTTP/2 client for the tests: connections and requests through the `h2` crate,
//! bodies read and sent under flow control, uploads that stall on a full window; and
//! raw frames written by hand ([`raw`]).

use std::net::SocketAddr;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::net::TcpStream;

pub mod raw;

pub async fn client_with(addr: SocketAddr, builder: h2::client::Builder) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, connection) = builder.handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

pub fn get(path: &str) -> http::Request<()> {
    http::Request::get(format!("http://localhost{path}"))
        .body(())
        .unwrap()
}

pub fn post(path: &str) -> http::Request<()> {
    http::Request::post(format!("http://localhost{path}"))
        .body(())
        .unwrap()
}

/// Reads a whole body, releasing flow credit as it goes.
pub async fn read_body(mut body: h2::RecvStream) -> Vec<u8> {
    let mut all = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        all.extend_from_slice(&chunk);
    }
    all
}

/// Sends `body` under flow control, ending the stream.
pub async fn send_body(send: &mut h2::SendStream<Bytes>, body: &[u8]) {
    let mut rest = Bytes::copy_from_slice(body);
    while !rest.is_empty() {
        send.reserve_capacity(rest.len().min(64 * 1024));
        let granted = std::future::poll_fn(|cx| send.poll_capacity(cx))
            .await
            .expect("the stream stays open")
            .unwrap();
        let chunk = rest.split_to(granted.min(rest.len()));
        send.send_data(chunk, false).unwrap();
    }
    send.send_data(Bytes::new(), true).unwrap();
}

/// POSTs `body` to `path` on `client` while reading the response, as an echo needs (its
/// response flows back under flow control while the upload goes on): the status and
/// the response body.
pub async fn post_while_reading(
    client: &mut SendRequest<Bytes>,
    path: &str,
    body: &[u8],
) -> (http::StatusCode, Vec<u8>) {
    let (response, mut upload) = client.send_request(post(path), false).unwrap();
    let sent = body.to_vec();
    let uploading = tokio::spawn(async move { send_body(&mut upload, &sent).await });
    let response = response.await.unwrap();
    let status = response.status();
    let received = read_body(response.into_body()).await;
    uploading.await.unwrap();
    (status, received)
}

/// Sends on `upload` until the server stops granting credit at exactly one window.
pub async fn fill_one_window(upload: &mut h2::SendStream<Bytes>) {
    upload.reserve_capacity(1024 * 1024);
    let mut granted = 0;
    while granted < 65_535 {
        let n = std::future::poll_fn(|cx| upload.poll_capacity(cx))
            .await
            .unwrap()
            .unwrap();
        upload.send_data(Bytes::from(vec![0u8; n]), false).unwrap();
        granted += n;
    }
    assert_eq!(granted, 65_535, "exactly one stream window");
}

/// A request whose upload waits: its response to come, and its body still open.
pub type Stalled = (h2::client::ResponseFuture, h2::SendStream<Bytes>);

/// Posts `count` uploads to `path` (a route whose guest never reads its body), each
/// filling its stream's window. More windows than the connection's fit only if the
/// connection window is credited as bytes are buffered: the wait is bounded, and
/// running dry fails the test.
pub async fn stall_uploads(
    client: &mut SendRequest<Bytes>,
    path: &str,
    count: usize,
) -> Vec<Stalled> {
    let mut stalled = Vec::new();
    for _ in 0..count {
        let (response, mut upload) = client.send_request(post(path), false).unwrap();
        tokio::time::timeout(
            std::time::Duration::from_secs(60),
            fill_one_window(&mut upload),
        )
        .await
        .expect("the connection window ran dry: it was not credited on buffering");
        stalled.push((response, upload));
    }
    stalled
}
