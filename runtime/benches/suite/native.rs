//! The suite's native servers: this bench binary re-run as `suite serve ENGINE`, one
//! engine per process, answering the three works of the suite from native handlers
//! (no wasm), so that the engines are measured where the sandbox cannot blur them.
//!
//! - `GET /` → `200 Hello, world!\n` (what `examples/hello` answers);
//! - `GET /stream` → 8 chunks of 1 KiB (`aaa…bbb…hhh`), each its own body frame (what
//!   `examples/stream` sends);
//! - `POST /echo` → the request body streamed back as it arrives (`examples/echo`).
//!
//! The process prints its port on the first line of stdout, then answers each line
//! it reads on stdin with the octets and calls its allocator has served so far (a
//! counting allocator wraps the system one), so the orchestrator can read the
//! allocations of one measured run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use wedge::net::h2::{ConnStats, H2Config, Handler, RequestBody, ResponseStream};
use wedge_proto::head::RequestHead;

/// The engines `suite serve` runs.
pub const ENGINES: [&str; 4] = ["wedge-h2", "hyper-h2", "wedge-h1", "hyper-h1"];

const HELLO: &[u8] = b"Hello, world!\n";
const CHUNK_LEN: usize = 1024;
/// `examples/stream`'s chunks: chunk `i` is 1 KiB of `b'a' + i`.
static CHUNKS: [[u8; CHUNK_LEN]; 8] = {
    let mut chunks = [[0; CHUNK_LEN]; 8];
    let mut i = 0;
    while i < 8 {
        chunks[i] = [b'a' + i as u8; CHUNK_LEN];
        i += 1;
    }
    chunks
};

// ---- counting allocator (all threads) ----

static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

pub struct Counting;

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A reallocation counts as an allocation of its new size.
        ALLOCATED.fetch_add(new_size as u64, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

// ---- the handlers ----

/// What a native handler answers; `B` is the engine's request body (echoed).
pub enum Reply<B> {
    Hello(Option<Bytes>),
    /// The next chunk to send.
    Stream(usize),
    Echo(B),
}

impl<B> Reply<B> {
    fn for_path(path: &[u8], body: B) -> Self {
        match path {
            b"/stream" => Reply::Stream(0),
            b"/echo" => Reply::Echo(body),
            _ => Reply::Hello(Some(Bytes::from_static(HELLO))),
        }
    }
}

/// The native handler's bodies end only by themselves.
impl ResponseStream for Reply<RequestBody> {}

impl<B: Body<Data = Bytes> + Unpin> Body for Reply<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.get_mut() {
            Reply::Hello(hello) => Poll::Ready(hello.take().map(|b| Ok(Frame::data(b)))),
            Reply::Stream(next) => Poll::Ready(CHUNKS.get(*next).map(|chunk| {
                *next += 1;
                Ok(Frame::data(Bytes::from_static(chunk)))
            })),
            Reply::Echo(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::Hello(hello) => hello.is_none(),
            Reply::Stream(next) => *next >= CHUNKS.len(),
            Reply::Echo(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Reply::Hello(hello) => {
                SizeHint::with_exact(hello.as_ref().map_or(0, |b| b.len() as u64))
            }
            Reply::Stream(_) => SizeHint::default(),
            Reply::Echo(body) => body.size_hint(),
        }
    }
}

/// The native handler on wedge's HTTP/2 engine.
struct Native;

impl Handler for Native {
    type Body = Reply<RequestBody>;
    type Future = std::future::Ready<Response<Reply<RequestBody>>>;

    fn call(&self, head: &RequestHead, body: RequestBody) -> Self::Future {
        std::future::ready(Response::new(Reply::for_path(head.path(), body)))
    }
}

/// Serves `engine` on a free loopback port until killed.
pub fn serve(engine: &str) {
    assert!(ENGINES.contains(&engine), "unknown engine {engine}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        std::thread::spawn(report_allocations);
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let config = Arc::new(H2Config::default());
        let hyper_service =
            hyper::service::service_fn(|req: hyper::Request<hyper::body::Incoming>| {
                let (head, body) = req.into_parts();
                let reply = Reply::for_path(head.uri.path().as_bytes(), body);
                std::future::ready(Ok::<_, Infallible>(Response::new(reply)))
            });
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            match engine {
                "wedge-h2" => {
                    let stats = Arc::new(ConnStats::default());
                    let conn = wedge::net::h2::serve_with(
                        stream,
                        Native,
                        shutdown.clone(),
                        config.clone(),
                        stats,
                    );
                    tokio::spawn(conn);
                }
                "hyper-h2" => {
                    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), hyper_service);
                    tokio::spawn(conn);
                }
                // wedge's HTTP/1.1 is hyper's server as `net::h1::serve` builds it; that
                // function dispatches to the wasm host only, so this is its builder
                // (keep-alive, tokio timer, 30 s header read timeout) on the native
                // handler.
                "wedge-h1" => {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .timer(TokioTimer::new())
                        .header_read_timeout(wedge::net::h1::HEADER_READ_TIMEOUT)
                        .serve_connection(TokioIo::new(stream), hyper_service);
                    tokio::spawn(conn);
                }
                _ => {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), hyper_service);
                    tokio::spawn(conn);
                }
            }
        }
    });
}

/// Answers each line on stdin with `ALLOCATED ALLOCATIONS`.
fn report_allocations() {
    let stdin = std::io::stdin();
    let mut line = String::new();
    while stdin.lock().read_line(&mut line).is_ok_and(|n| n > 0) {
        line.clear();
        let bytes = ALLOCATED.load(Ordering::Relaxed);
        let calls = ALLOCATIONS.load(Ordering::Relaxed);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{bytes} {calls}");
        let _ = out.flush();
    }
}
