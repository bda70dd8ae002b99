//! The HTTP/2 engine with native handlers: the contracts of DESIGN 4.1-4.3 measured where
//! the wasm side cannot blur them — writes counted on a test transport, bytes buffered
//! read from the connection's counters, allocations counted by a counting allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body_util::BodyExt;
use support::engine::TestServer;
use support::h2::raw::Raw;
use support::h2::{get, post, read_body, send_body};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::sync::{oneshot, watch};
use wedge::host::ResponseBody;
use wedge::net::h2::{BodyGone, ConnStats, H2Config, Handler, RequestBody, ResponseStream};
use wedge_proto::h2::frame::flags;
use wedge_proto::head::RequestHead;

// ---- counting allocator (per thread) ----

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    /// Octets allocated and not yet freed by this thread (frees from other threads
    /// are not seen: measure on a current-thread runtime).
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn live(delta: isize) {
    let _ = LIVE.try_with(|n| n.set(n.get() + delta));
}

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        live(layout.size() as isize);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        live(-(layout.size() as isize));
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        live(new_size as isize - layout.size() as isize);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// ---- a native handler ----

type Boxed = Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>;

/// A response now (no allocation) or later.
#[allow(clippy::large_enum_variant)] // boxing `Now` would allocate per request
enum Answer {
    Now(Option<Response<ResponseBody>>),
    Later(Boxed),
}

impl Future for Answer {
    type Output = Response<ResponseBody>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Answer::Now(response) => Poll::Ready(response.take().expect("polled once")),
            Answer::Later(future) => future.as_mut().poll(cx),
        }
    }
}

type Route = dyn Fn(&RequestHead, RequestBody) -> Answer + Send + Sync;

#[derive(Clone)]
struct Native(Arc<Route>);

impl Handler for Native {
    type Body = ResponseBody;
    type Future = Answer;

    fn call(&self, head: &RequestHead, body: RequestBody) -> Answer {
        (self.0)(head, body)
    }
}

fn native(route: impl Fn(&RequestHead, RequestBody) -> Answer + Send + Sync + 'static) -> Native {
    Native(Arc::new(route))
}

fn text(body: &'static [u8]) -> Answer {
    Answer::Now(Some(Response::new(ResponseBody::Full(Some(
        Bytes::from_static(body),
    )))))
}

// ---- a transport that counts writes and fails on demand ----

#[derive(Clone, Default)]
struct Wire {
    writes: Arc<AtomicUsize>,
    broken: Arc<AtomicBool>,
}

struct TestIo {
    inner: DuplexStream,
    wire: Wire,
}

impl AsyncRead for TestIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TestIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.wire.broken.load(Ordering::Relaxed) {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(_))) {
            self.wire.writes.fetch_add(1, Ordering::Relaxed);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A connection served over an in-memory pipe; the client end is raw frames.
fn pipe<H: Handler>(
    handler: H,
    config: H2Config,
) -> (Raw<DuplexStream>, Wire, watch::Sender<bool>) {
    pipe_of(1 << 20, handler, config)
}

/// [`pipe`] holding at most `octets` the client has not read.
fn pipe_of<H: Handler>(
    octets: usize,
    handler: H,
    config: H2Config,
) -> (Raw<DuplexStream>, Wire, watch::Sender<bool>) {
    let (client, server) = tokio::io::duplex(octets);
    let wire = Wire::default();
    let io = TestIo {
        inner: server,
        wire: wire.clone(),
    };
    let (shutdown, rx) = watch::channel(false);
    tokio::spawn(wedge::net::h2::serve_with(
        io,
        handler,
        rx,
        Arc::new(config),
        Arc::new(ConnStats::default()),
    ));
    (Raw::new(client), wire, shutdown)
}

/// Sends the handshake and reads until the server acknowledged our SETTINGS.
async fn handshake(raw: &mut Raw<DuplexStream>) {
    raw.flush().await;
    loop {
        let frame = raw.next().await.expect("the server's SETTINGS");
        if frame.kind == 0x4 && frame.flags & flags::ACK != 0 {
            return;
        }
    }
}

#[tokio::test]
async fn n_synchronous_responses_in_one_read_leave_in_one_write() {
    let (mut raw, wire, _shutdown) = pipe(native(|_, _| text(b"hi")), H2Config::default());
    handshake(&mut raw).await;
    let before = wire.writes.load(Ordering::Relaxed);
    const N: u32 = 16;
    raw.settings_ack();
    for i in 0..N {
        raw.get(1 + 2 * i, "/");
    }
    raw.flush().await;
    raw.responses_end(N as usize).await;
    assert_eq!(wire.writes.load(Ordering::Relaxed) - before, 1);
}

/// Issue 20: a connection polls a stream's handler when that handler is woken, not
/// whenever any stream of the connection moves. 16 parked handlers answered one by one
/// were polled 3, 5, … 33 times each (every pass polled every stream: O(N) polls per
/// request); now each is polled twice, once as it starts and once when answered.
#[tokio::test]
async fn a_parked_handler_is_polled_only_when_woken() {
    const N: usize = 16;
    let gates = Arc::new(Mutex::new(Vec::new()));
    let polls: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
    let handler = native({
        let (gates, polls) = (gates.clone(), polls.clone());
        move |_, _| {
            let (go, mut told) = oneshot::channel::<()>();
            let mut gates = gates.lock().unwrap();
            let stream = gates.len();
            gates.push(go);
            let polls = polls.clone();
            Answer::Later(Box::pin(std::future::poll_fn(move |cx| {
                polls[stream].fetch_add(1, Ordering::Relaxed);
                let _ = std::task::ready!(Pin::new(&mut told).poll(cx));
                Poll::Ready(Response::new(ResponseBody::Full(Some(Bytes::from_static(
                    b"hi",
                )))))
            })))
        }
    });
    let (mut raw, _wire, _shutdown) = pipe(handler, H2Config::default());
    handshake(&mut raw).await;
    raw.settings_ack();
    for i in 0..N as u32 {
        raw.get(1 + 2 * i, "/");
    }
    raw.flush().await;
    while gates.lock().unwrap().len() < N {
        tokio::task::yield_now().await;
    }
    let gates = std::mem::take(&mut *gates.lock().unwrap());
    for go in gates {
        go.send(()).unwrap();
        raw.responses_end(1).await;
    }
    let polls: Vec<usize> = polls.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    assert_eq!(polls, [2; N], "polls of each stream's handler");
}

/// Issue 20: a response staged while other streams' handlers still run waits one turn
/// of the worker, so one answered by another task in that turn shares its write (as a
/// WASI 0.3 guest's instance answers requests from its own task). Without the hold the
/// two responses below left in two writes.
#[tokio::test]
async fn responses_answered_by_other_tasks_in_one_turn_share_a_write() {
    let gates = Arc::new(Mutex::new(Vec::new()));
    let handler = native({
        let gates = gates.clone();
        move |_, _| {
            let (go, told) = oneshot::channel::<()>();
            gates.lock().unwrap().push(go);
            Answer::Later(Box::pin(async move {
                let _ = told.await;
                Response::new(ResponseBody::Full(Some(Bytes::from_static(b"hi"))))
            }))
        }
    });
    let (mut raw, wire, _shutdown) = pipe(handler, H2Config::default());
    handshake(&mut raw).await;
    raw.settings_ack();
    raw.get(1, "/").get(3, "/");
    raw.flush().await;
    while gates.lock().unwrap().len() < 2 {
        tokio::task::yield_now().await;
    }
    let mut gates = std::mem::take(&mut *gates.lock().unwrap()).into_iter();
    let (first, second) = (gates.next().unwrap(), gates.next().unwrap());
    let before = wire.writes.load(Ordering::Relaxed);
    // The first is answered now; the second by a task that runs after the
    // connection's next poll (this runtime runs its tasks in the order they woke).
    first.send(()).unwrap();
    tokio::spawn(async move { second.send(()).unwrap() });
    raw.responses_end(2).await;
    assert_eq!(wire.writes.load(Ordering::Relaxed) - before, 1);
}

#[tokio::test]
async fn a_failed_write_tells_a_parked_body_reader_the_peer_is_gone() {
    let (told_tx, told_rx) = oneshot::channel();
    let told = Arc::new(Mutex::new(Some(told_tx)));
    let handler = native(move |_, body| {
        // Like the wasm bridge: the body is read by another task, which outlives the
        // stream's future when the connection drops it.
        let told = told.lock().unwrap().take().unwrap();
        tokio::spawn(async move {
            let _ = told.send(body.collect().await.map(|_| ()));
        });
        Answer::Later(Box::pin(std::future::pending()))
    });
    let (mut raw, wire, _shutdown) = pipe(handler, H2Config::default());
    handshake(&mut raw).await;
    raw.post(1, "/").data(1, b"part", false);
    raw.flush().await;
    // The body reader has had the chunk and parks for more; now the wire breaks, and
    // the next thing the server writes (a PING answer) fails.
    wire.broken.store(true, Ordering::Relaxed);
    raw.ping();
    raw.flush().await;
    // A bound, not a synchronisation: a reader left parked fails here.
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), told_rx)
        .await
        .expect("the body reader was left parked")
        .expect("the reader task ended without reporting");
    assert_eq!(outcome, Err(BodyGone::PeerGone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mib_upload_to_a_slow_reader_buffers_at_most_one_window() {
    let handler = native(|_, mut body| {
        Answer::Later(Box::pin(async move {
            let mut total = 0usize;
            while let Some(frame) = body.frame().await {
                total += frame.unwrap().into_data().unwrap().len();
                // A slow reader: yields between chunks, so the client gets far ahead.
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
            Response::new(ResponseBody::text(total.to_string()))
        }))
    });
    let server = TestServer::native(move || handler.clone(), H2Config::default()).await;
    let mut client = server.client().await;
    let (response, mut send) = client.send_request(post("/"), false).unwrap();
    let upload = tokio::spawn(async move {
        send_body(&mut send, &vec![9u8; 50 * 1024 * 1024]).await;
    });
    let response = response.await.unwrap();
    let body = read_body(response.into_body()).await;
    upload.await.unwrap();
    assert_eq!(body, (50 * 1024 * 1024).to_string().as_bytes());
    let peak = server.stats.peak_buffered.load(Ordering::Relaxed);
    assert!(peak > 0);
    assert!(
        peak <= 65_535,
        "buffered {peak} octets: more than one stream window"
    );
    assert_eq!(server.stats.buffered.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_mib_response_flows_through_a_65535_octet_window() {
    static MIB: [u8; 1024 * 1024] = [b'z'; 1024 * 1024];
    let handler = native(|_, _| text(&MIB));
    let server = TestServer::native(move || handler.clone(), H2Config::default()).await;
    let builder = h2::client::Builder::new()
        .initial_window_size(65_535)
        .initial_connection_window_size(65_535)
        .clone();
    let mut client = support::h2::client_with(server.addr, builder).await;
    let (response, _) = client.send_request(get("/"), true).unwrap();
    let body = read_body(response.await.unwrap().into_body()).await;
    assert_eq!(body.len(), MIB.len());
    assert!(body == MIB);
}

#[tokio::test]
async fn the_next_stream_gets_a_clean_request() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let handler = native(move |head, _| {
        log.lock().unwrap().push((
            head.authority().map(<[u8]>::to_vec),
            head.content_length(),
            head.fields().count(),
        ));
        text(b"ok")
    });
    let (mut raw, _wire, _shutdown) = pipe(handler, H2Config::default());
    handshake(&mut raw).await;
    raw.headers(
        1,
        &[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/"),
            ("content-length", "2"),
        ],
        false,
    )
    .data(1, b"hi", true);
    raw.flush().await;
    raw.response_end(1).await;
    raw.headers(
        3,
        &[(":method", "GET"), (":scheme", "http"), (":path", "/")],
        true,
    );
    raw.flush().await;
    raw.response_end(3).await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], (Some(b"example.com".to_vec()), Some(2), 1));
    assert_eq!(seen[1], (None, None, 0), "nothing of the stream before");
}

/// What the requests of a pass are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Requests {
    /// GETs.
    Get,
    /// POSTs whose bodies end (an empty DATA with END_STREAM) only in the next pass,
    /// after their responses: finished streams, judged then closed.
    PostEndedAfterResponse,
}

/// Builds the pass of `n` requests from stream `first` on.
fn a_pass(raw: &mut Raw<DuplexStream>, requests: Requests, first: u32, n: u32) {
    for id in (first..first + 2 * n).step_by(2) {
        match requests {
            Requests::Get => raw.get(id, "/"),
            Requests::PostEndedAfterResponse if id > 2 * n => {
                raw.data(id - 2 * n, b"", true).post(id, "/")
            }
            Requests::PostEndedAfterResponse => raw.post(id, "/"),
        };
    }
}

/// After three passes of `n` requests that warm the connection up, one more pass: the
/// allocations and writes it took (the client's own frames built before counting).
async fn a_warm_pass(
    raw: &mut Raw<DuplexStream>,
    wire: &Wire,
    n: u32,
    requests: Requests,
) -> (usize, usize) {
    for pass in 0..3 {
        a_pass(raw, requests, 1 + 2 * n * pass, n);
        raw.flush().await;
        raw.responses_end(n as usize).await;
    }
    a_pass(raw, requests, 1 + 2 * n * 3, n);
    let (allocated, written) = (allocations(), wire.writes.load(Ordering::Relaxed));
    raw.flush().await;
    raw.responses_end(n as usize).await;
    (
        allocations() - allocated,
        wire.writes.load(Ordering::Relaxed) - written,
    )
}

#[test]
fn a_warm_connection_allocates_none_of_the_engines_objects() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (mut raw, wire, _shutdown) = pipe(native(|_, _| text(b"hi")), H2Config::default());
        handshake(&mut raw).await;
        raw.settings_ack();
        const N: u32 = 16;
        let (during, _) = a_warm_pass(&mut raw, &wire, N, Requests::Get).await;
        assert_eq!(
            during, 0,
            "{during} allocations for {N} requests on a warm connection"
        );
    });
}

/// Issue 18, DESIGN 4.3: a stream whose request outlives its response keeps only its
/// entry in the bounded stream table while it is judged, and leaves it when the request
/// ends: requests ended after their responses allocate nothing on a warm connection
/// either, and never hold more places than a pass's two sets of streams.
#[test]
fn finished_streams_allocate_nothing_on_a_warm_connection() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        const N: u32 = 16;
        let mut config = H2Config::default();
        config.core.max_concurrent_streams = 2 * N;
        let (mut raw, wire, _shutdown) = pipe(native(|_, _| text(b"hi")), config);
        handshake(&mut raw).await;
        raw.settings_ack();
        let (during, _) = a_warm_pass(&mut raw, &wire, N, Requests::PostEndedAfterResponse).await;
        assert_eq!(
            during, 0,
            "{during} allocations for {N} finished streams on a warm connection"
        );
    });
}

/// Eight chunks of 1 KiB, each one turn of the connection's task after the one
/// before (`Pending`, woken at once), as a guest's body arrives: each chunk is a
/// separate flush of the stream.
struct ChunkByChunk {
    sent: usize,
    yielded: bool,
}

static KIB: [u8; 1024] = [b't'; 1024];

impl ResponseStream for ChunkByChunk {}

impl http_body::Body for ChunkByChunk {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if self.sent == 8 {
            return Poll::Ready(None);
        }
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        self.sent += 1;
        Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(&KIB)))))
    }
}

struct Chunked;

impl Handler for Chunked {
    type Body = ChunkByChunk;
    type Future = std::future::Ready<Response<ChunkByChunk>>;

    fn call(&self, _: &RequestHead, _: RequestBody) -> Self::Future {
        std::future::ready(Response::new(ChunkByChunk {
            sent: 0,
            yielded: false,
        }))
    }
}

#[test]
fn a_warm_connection_streams_chunk_by_chunk_without_allocating() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (mut raw, wire, _shutdown) = pipe(Chunked, H2Config::default());
        handshake(&mut raw).await;
        // Credit for every pass: the connection's window is not what is measured.
        raw.settings_ack().window_update(0, 1 << 30);
        const N: u32 = 4;
        let (during, writes) = a_warm_pass(&mut raw, &wire, N, Requests::Get).await;
        // Each chunk left in a write of its own turn (the streams' chunks coalesce
        // across streams, not within one): the flushes being measured happened.
        assert!(writes >= 8, "{writes} writes for {N} streams of 8 chunks");
        assert_eq!(
            during, 0,
            "{during} allocations for {N} streamed responses ({writes} writes) on a warm connection"
        );
    });
}

/// A response body fed by a producer task through a one-slot channel, as wasmtime feeds
/// a guest's body.
struct ChannelBody(tokio::sync::mpsc::Receiver<Bytes>);

impl ResponseStream for ChannelBody {}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(http_body::Frame::data(c))))
    }
}

/// Answers with a body a producer task writes 16 KiB at a time, forever, reporting the
/// error its write finally gets.
struct Producer(Arc<Mutex<Option<oneshot::Sender<&'static str>>>>);

impl Handler for Producer {
    type Body = ChannelBody;
    type Future = std::future::Ready<Response<ChannelBody>>;

    fn call(&self, _: &RequestHead, _: RequestBody) -> Self::Future {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let told = self.0.lock().unwrap().take().unwrap();
        tokio::spawn(async move {
            while tx
                .send(Bytes::from_static(&[b'p'; 16 * 1024]))
                .await
                .is_ok()
            {}
            let _ = told.send("closed");
        });
        std::future::ready(Response::new(ChannelBody(rx)))
    }
}

#[tokio::test]
async fn a_failed_write_tells_a_producer_parked_on_credit_the_peer_is_gone() {
    let (told_tx, told_rx) = oneshot::channel();
    let (client, server) = tokio::io::duplex(1 << 20);
    let wire = Wire::default();
    let io = TestIo {
        inner: server,
        wire: wire.clone(),
    };
    let (_shutdown, rx) = watch::channel(false);
    tokio::spawn(wedge::net::h2::serve_with(
        io,
        Producer(Arc::new(Mutex::new(Some(told_tx)))),
        rx,
        Arc::new(H2Config::default()),
        Arc::new(ConnStats::default()),
    ));
    let mut raw = Raw::new(client);
    handshake(&mut raw).await;
    raw.get(1, "/");
    raw.flush().await;
    // Read the stream's whole window: the producer then parks on credit.
    let mut received = 0;
    while received < 65_535 {
        let frame = raw.next().await.unwrap();
        if frame.kind == 0x0 {
            received += frame.payload.len();
        }
    }
    assert_eq!(received, 65_535);
    wire.broken.store(true, Ordering::Relaxed);
    raw.ping();
    raw.flush().await;
    // A bound, not a synchronisation: a producer left parked fails here.
    let told = tokio::time::timeout(std::time::Duration::from_secs(30), told_rx)
        .await
        .expect("the producer was left parked on credit")
        .unwrap();
    assert_eq!(told, "closed");
}

/// A body that is always ready with another 16 KiB and never ends: a producer that
/// never awaits anything of its own.
enum Endless {
    Forever,
    Done(Option<Bytes>),
}

impl ResponseStream for Endless {}

impl http_body::Body for Endless {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(match self.get_mut() {
            Endless::Forever => Some(Ok(http_body::Frame::data(Bytes::from_static(
                &[b'e'; 16 * 1024],
            )))),
            Endless::Done(chunk) => chunk.take().map(|c| Ok(http_body::Frame::data(c))),
        })
    }
}

/// `/forever` streams an endless body; anything else is answered at once.
struct EndlessOrNot;

impl Handler for EndlessOrNot {
    type Body = Endless;
    type Future = std::future::Ready<Response<Endless>>;

    fn call(&self, head: &RequestHead, _: RequestBody) -> Self::Future {
        std::future::ready(Response::new(if head.path() == b"/forever" {
            Endless::Forever
        } else {
            Endless::Done(Some(Bytes::from_static(b"quick")))
        }))
    }
}

#[tokio::test]
async fn a_body_that_never_waits_still_lets_the_connection_write_and_serve_others() {
    use wedge_proto::h2::frame::Setting;
    let (client, server) = tokio::io::duplex(64 * 1024);
    let max_write = Arc::new(AtomicUsize::new(0));
    let io = Recording {
        inner: server,
        max_write: max_write.clone(),
    };
    let (_shutdown, rx) = watch::channel(false);
    tokio::spawn(wedge::net::h2::serve_with(
        io,
        EndlessOrNot,
        rx,
        Arc::new(H2Config::default()),
        Arc::new(ConnStats::default()),
    ));
    let mut raw = Raw::new(client);
    // All the credit in the world: only the staging bound stops the endless body.
    raw.settings(&[Setting::InitialWindowSize(0x7fff_ffff)])
        .window_update(0, 0x7fff_0000);
    handshake(&mut raw).await;
    raw.get(1, "/forever");
    raw.flush().await;
    let mut endless = 0;
    while endless < 1024 * 1024 {
        let frame = raw.next().await.unwrap();
        if frame.stream == 1 && frame.kind == 0x0 {
            endless += frame.payload.len();
        }
    }
    raw.get(3, "/quick");
    raw.flush().await;
    loop {
        let frame = raw.next().await.unwrap();
        if frame.stream == 3 && frame.flags & flags::END_STREAM != 0 {
            break;
        }
    }
    let max = max_write.load(Ordering::Relaxed);
    assert!(
        max <= 64 * 1024,
        "one write carried {max} octets: the endless body was not bounded per turn"
    );
}

/// A transport that remembers the largest single write.
struct Recording {
    inner: DuplexStream,
    max_write: Arc<AtomicUsize>,
}

impl AsyncRead for Recording {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Recording {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.max_write.fetch_max(buf.len(), Ordering::Relaxed);
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_body_a_handler_still_holds_is_not_handed_to_the_next_stream() {
    let (held_tx, held_rx) = oneshot::channel::<RequestBody>();
    let held = Arc::new(Mutex::new(Some(held_tx)));
    let handler = native(move |head, body| {
        if head.path() == b"/keep" {
            // Answers at once but keeps its body, as a handler that reads it later.
            if let Some(tx) = held.lock().unwrap().take() {
                let _ = tx.send(body);
            }
        }
        text(b"ok")
    });
    let (mut raw, _wire, _shutdown) = pipe(handler, H2Config::default());
    handshake(&mut raw).await;
    raw.post(1, "/keep").data(1, b"one", false);
    raw.flush().await;
    raw.response_end(1).await;
    let kept = held_rx.await.unwrap();
    // The next stream's body arrives while the first handler still holds its own.
    raw.post(3, "/other").data(3, b"three", true);
    raw.flush().await;
    raw.response_end(3).await;
    // A bound, not a synchronisation: a body handed to another stream never ends here.
    let read = tokio::time::timeout(std::time::Duration::from_secs(30), kept.collect())
        .await
        .expect("the kept body was reset under its reader and left parked");
    // "one" may or may not have been read before the stream ended; "three" never is.
    match read {
        Ok(collected) => assert_eq!(collected.to_bytes(), &b"one"[..]),
        Err(gone) => assert_eq!(gone, BodyGone::PeerGone),
    }
}

/// A transport that counts the driver's write attempts: each is one pass of its loop.
struct PollCounting {
    inner: DuplexStream,
    polls: Arc<AtomicUsize>,
}

impl AsyncRead for PollCounting {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for PollCounting {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_peer_that_stops_reading_is_closed_without_spinning() {
    // 16 octets of pipe: the server's first SETTINGS already cannot leave.
    let (client, server) = tokio::io::duplex(16);
    let polls = Arc::new(AtomicUsize::new(0));
    let io = PollCounting {
        inner: server,
        polls: polls.clone(),
    };
    let (_shutdown, rx) = watch::channel(false);
    let config = H2Config {
        idle_timeout: std::time::Duration::from_millis(200),
        write_timeout: std::time::Duration::from_millis(300),
        ..H2Config::default()
    };
    let served = tokio::spawn(wedge::net::h2::serve_with(
        io,
        native(|_, _| text(b"hi")),
        rx,
        Arc::new(config),
        Arc::new(ConnStats::default()),
    ));
    let mut raw = Raw::new(client);
    // The handshake goes in; nothing the server writes is ever read.
    raw.flush().await;
    // A bound, not a synchronisation: a connection left open (or spinning) fails here.
    tokio::time::timeout(std::time::Duration::from_secs(20), served)
        .await
        .expect("the connection to a peer that never reads was never closed")
        .unwrap();
    let polls = polls.load(Ordering::Relaxed);
    assert!(
        polls < 100,
        "{polls} write attempts: the timer spun instead of waiting"
    );
    drop(raw);
}

#[tokio::test]
async fn a_slow_download_that_keeps_moving_is_not_cut_by_the_zero_window_timeout() {
    use wedge_proto::h2::frame::Setting;
    static BODY: [u8; 64 * 1024] = [b's'; 64 * 1024];
    let config = H2Config {
        zero_window_timeout: std::time::Duration::from_millis(1000),
        ..H2Config::default()
    };
    let (mut raw, _wire, _shutdown) = pipe(native(|_, _| text(&BODY)), config);
    raw.settings(&[Setting::InitialWindowSize(1000)]);
    handshake(&mut raw).await;
    raw.get(1, "/");
    raw.flush().await;
    // Credit 1000 octets at a time, each well inside the timeout, for longer than the
    // timeout in all: the window is at zero between rounds, but the download moves.
    let mut received = 0;
    for round in 1..=12 {
        while received < 1000 * round {
            let frame = raw
                .next()
                .await
                .expect("the server closed a moving download");
            assert_ne!(frame.kind, 0x7, "GOAWAY on a moving download: {frame:?}");
            if frame.kind == 0x0 {
                received += frame.payload.len();
            }
        }
        // Pacing the client, not synchronising with the server.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        raw.window_update(1, 1000);
        raw.flush().await;
    }
    assert_eq!(received, 12_000);
}

#[tokio::test]
async fn a_peer_that_never_reads_cannot_grow_what_is_queued_for_it() {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let stats = Arc::new(ConnStats::default());
    let (_shutdown, rx) = watch::channel(false);
    let config = H2Config {
        write_timeout: std::time::Duration::from_millis(300),
        ..H2Config::default()
    };
    let served = tokio::spawn(wedge::net::h2::serve_with(
        client_never_reads(server),
        native(|_, mut body| {
            // Reads its body as it comes, and never answers.
            Answer::Later(Box::pin(async move {
                while let Some(Ok(_)) = body.frame().await {}
                std::future::pending().await
            }))
        }),
        rx,
        Arc::new(config),
        stats.clone(),
    ));
    // 4 MiB of PINGs, each after a 1-octet DATA that earns the PING budget back: every
    // PING owes the client an answer it never reads.
    let writer = tokio::spawn(async move {
        let mut raw = Raw::new(client);
        raw.post(1, "/");
        for _ in 0..64 {
            while raw.out.len() < 64 * 1024 {
                raw.data(1, b"x", false).ping();
            }
            raw.flush().await;
        }
        raw
    });
    // A bound, not a synchronisation: the server drops a peer that takes nothing.
    tokio::time::timeout(std::time::Duration::from_secs(30), served)
        .await
        .expect("the connection to a peer that never reads was never closed")
        .unwrap();
    drop(writer.await.unwrap());
    let peak = stats.peak_queued.load(Ordering::Relaxed);
    assert!(
        peak <= 256 * 1024,
        "{peak} octets queued for a peer that reads nothing"
    );
}

fn client_never_reads(server: DuplexStream) -> Recording {
    Recording {
        inner: server,
        max_write: Arc::new(AtomicUsize::new(0)),
    }
}

#[tokio::test]
async fn a_panicking_handler_gets_a_500_not_a_reset() {
    let handler = native(|head, _| {
        if head.path() == b"/in-call" {
            panic!("the handler panicked in call");
        }
        Answer::Later(Box::pin(async {
            panic!("the handler panicked when polled")
        }))
    });
    let (mut raw, _wire, _shutdown) = pipe(handler, H2Config::default());
    handshake(&mut raw).await;
    for (id, path) in [(1, "/in-call"), (3, "/in-poll")] {
        raw.get(id, path);
        raw.flush().await;
        let frame = loop {
            let frame = raw.next().await.expect("the server closed");
            if frame.stream == id && (frame.kind == 0x1 || frame.kind == 0x3) {
                break frame;
            }
        };
        assert_eq!(
            frame.kind, 0x1,
            "{path}: a reset instead of a 500: {frame:?}"
        );
        assert_ne!(frame.flags & flags::END_STREAM, 0, "{path}: {frame:?}");
        assert_eq!(raw.status(&frame), "500", "{path}");
    }
}

#[tokio::test]
async fn tiny_data_frames_to_a_handler_that_never_reads_pin_no_read_buffers() {
    let (held_tx, held_rx) = oneshot::channel::<RequestBody>();
    let held = Arc::new(Mutex::new(Some(held_tx)));
    let handler = native(move |_, body| {
        // Keeps its body unread, and never answers.
        if let Some(tx) = held.lock().unwrap().take() {
            let _ = tx.send(body);
        }
        Answer::Later(Box::pin(std::future::pending()))
    });
    let (mut raw, _wire, _shutdown) = pipe(handler, H2Config::default());
    handshake(&mut raw).await;
    raw.post(1, "/");
    let one_data_frame = async |raw: &mut Raw<DuplexStream>| {
        raw.data(1, b"x", false);
        raw.flush().await;
        // Each in its own read: the connection window update says it was taken.
        loop {
            let frame = raw.next().await.expect("the server closed");
            if frame.kind == 0x8 && frame.stream == 0 {
                break;
            }
        }
    };
    one_data_frame(&mut raw).await;
    let body = held_rx.await.unwrap();
    let before = LIVE.with(Cell::get);
    const N: usize = 1000;
    for _ in 0..N {
        one_data_frame(&mut raw).await;
    }
    let grown = LIVE.with(Cell::get) - before;
    assert!(
        grown < 256 * 1024,
        "{grown} octets held for {N} buffered octets"
    );
    drop(body);
}

/// A body whose end is only seen by polling it (as a guest's): `is_end_stream` stays false.
struct EndsWhenPolled(Option<Bytes>);

impl ResponseStream for EndsWhenPolled {}

impl http_body::Body for EndsWhenPolled {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(
            self.get_mut()
                .0
                .take()
                .map(|c| Ok(http_body::Frame::data(c))),
        )
    }
}

struct SixteenOctets;

impl Handler for SixteenOctets {
    type Body = EndsWhenPolled;
    type Future = std::future::Ready<Response<EndsWhenPolled>>;

    fn call(&self, _: &RequestHead, _: RequestBody) -> Self::Future {
        let body = EndsWhenPolled(Some(Bytes::from_static(b"sixteen octets!!")));
        std::future::ready(Response::new(body))
    }
}

#[tokio::test]
async fn a_body_that_exactly_fills_the_window_ends_without_more_credit() {
    use wedge_proto::h2::frame::Setting;
    let (client, server) = tokio::io::duplex(1 << 20);
    let (_shutdown, rx) = watch::channel(false);
    tokio::spawn(wedge::net::h2::serve_with(
        server,
        SixteenOctets,
        rx,
        Arc::new(H2Config::default()),
        Arc::new(ConnStats::default()),
    ));
    let mut raw = Raw::new(client);
    raw.settings(&[Setting::InitialWindowSize(16)]);
    handshake(&mut raw).await;
    raw.get(1, "/");
    raw.flush().await;
    // No WINDOW_UPDATE is ever sent: the end needs no credit. A bound, not a
    // synchronisation: a response left waiting for credit fails here.
    let frames = tokio::time::timeout(std::time::Duration::from_secs(20), raw.response_end(1))
        .await
        .expect("the response did not end without a WINDOW_UPDATE");
    let data: usize = frames
        .iter()
        .filter(|f| f.kind == 0x0)
        .map(|f| f.payload.len())
        .sum();
    assert_eq!(data, 16);
}

/// A transport that, once `trickle` is set, takes one octet per 20 ms: a peer that keeps
/// reading, just never enough to matter.
struct Trickle {
    inner: DuplexStream,
    trickle: Arc<AtomicBool>,
    pace: Pin<Box<tokio::time::Sleep>>,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Trickle {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.trickle.load(Ordering::Relaxed) {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        if self.pace.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let next = tokio::time::Instant::now() + std::time::Duration::from_millis(20);
        self.pace.as_mut().reset(next);
        Pin::new(&mut self.inner).poll_write(cx, &buf[..buf.len().min(1)])
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_closing_connection_is_not_held_open_by_a_trickling_reader() {
    static BIG: [u8; 60_000] = [b'b'; 60_000];
    let (client, server) = tokio::io::duplex(1024);
    let trickle = Arc::new(AtomicBool::new(false));
    let io = Trickle {
        inner: server,
        trickle: trickle.clone(),
        pace: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
    };
    let (_shutdown, rx) = watch::channel(false);
    let config = H2Config {
        write_timeout: std::time::Duration::from_millis(300),
        ..H2Config::default()
    };
    let served = tokio::spawn(wedge::net::h2::serve_with(
        io,
        native(|_, _| text(&BIG)),
        rx,
        Arc::new(config),
        Arc::new(ConnStats::default()),
    ));
    let mut raw = Raw::new(client);
    handshake(&mut raw).await;
    raw.get(1, "/");
    raw.flush().await;
    loop {
        let frame = raw.next().await.expect("the response");
        if frame.kind == 0x0 {
            break;
        }
    }
    // From now on the client reads a trickle; then its PUSH_PROMISE is a connection
    // error, and the connection has only its queue left to flush.
    trickle.store(true, Ordering::Relaxed);
    raw.frame(0x5, 0x4, 1, &[0, 0, 0, 2]);
    raw.flush().await;
    let drain = tokio::spawn(async move { while raw.next().await.is_some() {} });
    // A bound, not a synchronisation: tens of KiB at 50 octets a second take minutes.
    tokio::time::timeout(std::time::Duration::from_secs(20), served)
        .await
        .expect("a closing connection was held open by a trickling reader")
        .unwrap();
    drain.await.unwrap();
}

#[tokio::test]
async fn an_unbounded_stream_limit_still_serves() {
    let config = H2Config {
        core: wedge_proto::h2::ConnConfig {
            max_concurrent_streams: u32::MAX,
            ..Default::default()
        },
        ..H2Config::default()
    };
    let (mut raw, _wire, _shutdown) = pipe(native(|_, _| text(b"hi")), config);
    handshake(&mut raw).await;
    raw.get(1, "/");
    raw.flush().await;
    raw.response_end(1).await;
}

/// The DATA frames of `stream` among `frames`, as (payload length, END_STREAM).
fn data_frames(frames: &[support::h2::raw::Received], stream: u32) -> Vec<(usize, bool)> {
    frames
        .iter()
        .filter(|f| f.kind == 0x0 && f.stream == stream)
        .map(|f| (f.payload.len(), f.flags & flags::END_STREAM != 0))
        .collect()
}

/// Issue 18: a body whose end shows only when polled after its last chunk (as a
/// guest's does) ends on that chunk's DATA frame, not on an empty one of its own.
#[tokio::test]
async fn a_body_that_ends_right_after_its_last_chunk_ends_on_that_data_frame() {
    let (mut raw, _wire, _shutdown) = pipe(SixteenOctets, H2Config::default());
    handshake(&mut raw).await;
    raw.get(1, "/");
    raw.flush().await;
    let frames = raw.response_end(1).await;
    assert_eq!(data_frames(&frames, 1), [(16, true)]);
}

/// `/big` is 8 KiB at once; anything else a chunk, then the end once the connection has
/// taken the chunk (a guest whose call returns after its last write).
struct LateEnd;

impl Handler for LateEnd {
    type Body = ResponseBody;
    type Future = std::future::Ready<Response<ResponseBody>>;

    fn call(&self, head: &RequestHead, _: RequestBody) -> Self::Future {
        static BIG: [u8; 8 * 1024] = [b'b'; 8 * 1024];
        if head.path() == b"/big" {
            return std::future::ready(Response::new(ResponseBody::text(&BIG[..])));
        }
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            tx.send(Bytes::from_static(b"last chunk")).await.unwrap();
            // Capacity comes back once the connection took the chunk, which it stages
            // there and then: the end follows a chunk already staged.
            let _ = tx.reserve().await;
        });
        let body = ChannelBody(rx).map_err(|never| match never {});
        std::future::ready(Response::new(ResponseBody::Stream(body.boxed_unsync())))
    }
}

/// Issue 18: the end of a body that comes after its last chunk was staged, while a write
/// still in flight holds that chunk's DATA frame back, goes on that frame.
#[tokio::test]
async fn a_body_that_ends_while_its_last_chunk_waits_to_be_written_ends_on_that_data_frame() {
    // A pipe of 1 KiB: the 8 KiB answer to /big stays in flight until the client reads.
    let (mut raw, _wire, _shutdown) = pipe_of(1024, LateEnd, H2Config::default());
    handshake(&mut raw).await;
    raw.settings_ack().get(1, "/big").get(3, "/late");
    raw.flush().await;
    let frames = raw.response_end(3).await;
    assert_eq!(data_frames(&frames, 3), [(10, true)]);
}
