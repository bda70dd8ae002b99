//! The driver in process, over a real quinn connection on 127.0.0.1, with a native
//! handler and the `h3` crate as the client. The test polls the driver itself, so
//! between requests it can look into the driver's pools and the core, and it counts
//! what the driver's own polls allocate (not quinn's tasks, nor the client's).

#[path = "../../../../proto/tests/counting_alloc/mod.rs"]
mod counting_alloc;

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;

use bytes::{BufMut, Bytes};
use h3::client::{RequestStream, SendRequest};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tokio::sync::watch;
use wedge_proto::head::RequestHead;

use super::Driver;
use crate::net::h3::H3Config;
use crate::net::h3::response::tests::pair;
use crate::net::handler::{Handler, ResponseStream};
use crate::net::request_body::{ConnStats, RequestBody};
use counting_alloc::allocations;

/// Answers every request at once with `hello`, reading none of its body.
struct Hello;

impl Handler<RequestHead> for Hello {
    type Body = Full<Bytes>;
    type Future = std::future::Ready<Response<Full<Bytes>>>;

    fn call(&self, _: &RequestHead, _: RequestBody) -> Self::Future {
        std::future::ready(Response::new(Full::new(Bytes::from_static(b"hello"))))
    }
}

/// A body in full: never cut off.
impl ResponseStream for Full<Bytes> {}

type Requests = SendRequest<h3_quinn::OpenStreams, Bytes>;

/// A driver serving `Hello` on one end of a quinn pair, and an `h3` client on the
/// other; the last two keep the connection up.
async fn served(
    config: &H3Config,
) -> (
    Driver<Hello>,
    Requests,
    (Vec<quinn::Endpoint>, watch::Sender<bool>),
) {
    let (server, client, endpoints) = pair(config).await;
    let (shutdown, stop) = watch::channel(false);
    let driver = Driver::new(server, Hello, config, stop, Arc::new(ConnStats::default()));
    let (mut connection, requests) = h3::client::new(h3_quinn::Connection::new(client))
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = poll_fn(|cx| connection.poll_close(cx)).await;
    });
    (driver, requests, (endpoints, shutdown))
}

/// Runs `client` to its end with the driver polled beside it: its output, and the
/// allocations made inside the driver's polls.
async fn beside<T>(driver: &mut Driver<Hello>, client: impl Future<Output = T>) -> (T, usize) {
    let mut client = pin!(client);
    let mut allocated = 0;
    let out = poll_fn(|cx| {
        let before = allocations();
        let ended = driver.poll(cx).is_ready();
        allocated += allocations() - before;
        assert!(!ended, "the connection ended");
        client.as_mut().poll(cx)
    })
    .await;
    (out, allocated)
}

fn request(method: &str) -> Request<()> {
    Request::builder()
        .method(method)
        .uri("https://localhost/")
        .body(())
        .unwrap()
}

/// The response's status and whole body.
async fn response<S: h3::quic::RecvStream>(
    stream: &mut RequestStream<S, Bytes>,
) -> (StatusCode, Vec<u8>) {
    let status = stream.recv_response().await.unwrap().status();
    let mut body = Vec::new();
    while let Some(chunk) = stream.recv_data().await.unwrap() {
        body.put(chunk);
    }
    (status, body)
}

/// `n` GETs, one after the other, each answered `hello`.
async fn gets(requests: &mut Requests, n: usize) {
    for _ in 0..n {
        let mut stream = requests.send_request(request("GET")).await.unwrap();
        stream.finish().await.unwrap();
        assert_eq!(
            response(&mut stream).await,
            (StatusCode::OK, b"hello".to_vec())
        );
    }
}

/// Where each pooled response staging buffer lives.
fn staging(driver: &Driver<Hello>) -> Vec<*const u8> {
    driver.send_buffers.iter().map(|b| b.as_ptr()).collect()
}

#[tokio::test]
async fn a_warm_connection_stages_every_response_in_the_same_buffer_and_allocates_no_state() {
    let config = H3Config::default();
    let (mut driver, mut requests, _alive) = served(&config).await;
    beside(&mut driver, gets(&mut requests, 20)).await;
    let warm = staging(&driver);
    assert_eq!(warm.len(), 1, "one request at a time, one staging buffer");
    const N: usize = 100;
    let ((), allocated) = beside(&mut driver, gets(&mut requests, N)).await;
    assert_eq!(staging(&driver), warm, "a staging buffer was made anew");
    // None of them is the driver's. quinn makes five per response: the stream's send
    // state, its send queue, and a copy of each of the three writes (HEADERS, the DATA
    // head, the chunk); a little more now and then as its connection tables grow. A
    // request head, stream state, inbox or staging buffer made per request would add
    // at least one more each.
    const QUINN_PER_RESPONSE: usize = 5;
    assert!(
        allocated <= QUINN_PER_RESPONSE * N + N / 20,
        "{allocated} allocations in the driver for {N} requests on a warm connection"
    );
}

#[tokio::test]
async fn streams_answered_before_their_requests_ended_leave_nothing_in_the_core() {
    let config = H3Config::default();
    let (mut driver, mut requests, _alive) = served(&config).await;
    let posts = async {
        for _ in 0..10 {
            let mut stream = requests.send_request(request("POST")).await.unwrap();
            stream
                .send_data(Bytes::from_static(b"never read"))
                .await
                .unwrap();
            // Not finished: `Hello` answers first, and the driver retires the stream.
            assert_eq!(
                response(&mut stream).await,
                (StatusCode::OK, b"hello".to_vec())
            );
        }
    };
    beside(&mut driver, posts).await;
    assert!(driver.requests.is_empty());
    assert_eq!(
        driver.core.open_requests(),
        0,
        "the core still keeps streams the driver retired"
    );
}

/// Writes to `send` until quinn takes no more (the peer's flow control): how much it took.
async fn write_until_blocked(send: &mut quinn::SendStream) -> usize {
    let chunk = [7u8; 16 * 1024];
    let mut taken = 0;
    poll_fn(|cx| {
        loop {
            match Pin::new(&mut *send).poll_write(cx, &chunk) {
                Poll::Ready(Ok(n)) => taken += n,
                Poll::Ready(Err(err)) => panic!("write failed: {err}"),
                Poll::Pending => return Poll::Ready(taken),
            }
        }
    })
    .await
}

#[tokio::test]
async fn quinn_buffers_no_more_unread_body_than_the_stream_and_connection_windows() {
    let small = H3Config {
        stream_receive_window: 64 * 1024,
        connection_receive_window: 1024 * 1024,
        ..H3Config::default()
    };
    for config in [H3Config::default(), small] {
        let per_stream = config.stream_receive_window as usize;
        let per_connection = config.connection_receive_window as usize;
        // The server reads nothing: what the client may send is what quinn buffers.
        let (_server, client, _endpoints) = pair(&config).await;
        let mut streams = Vec::new();
        let mut taken = Vec::new();
        for _ in 0..per_connection / per_stream + 4 {
            let (mut send, recv) = client.open_bi().await.unwrap();
            taken.push(write_until_blocked(&mut send).await);
            streams.push((send, recv));
        }
        assert_eq!(taken[0], per_stream, "{config:?}");
        assert!(taken.iter().all(|&n| n <= per_stream), "{taken:?}");
        assert_eq!(taken.iter().sum::<usize>(), per_connection, "{taken:?}");
    }
}
