//! Shared pieces of the HTTP/2 tests: a test-local listener that hands accepted sockets
//! to `wedge::net::h2`, apps loaded from the example components, and an `h2` client.

#![allow(dead_code)] // each test binary uses its own subset

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use wedge::host::{
    App, ArtifactCache, Executor, Limits, PoolConfig, RequestScheme, Serving, Site, Tenant,
    build_engine,
};
use wedge::net::h2::{ConnStats, H2Config, Handler};
use wedge::net::{AccessLog, Frontend};

pub mod raw;

use crate::support::{example, temp_dir};

/// The one engine of this test binary (`build_engine` may run once per process).
pub fn engine() -> &'static wasmtime::Engine {
    static ENGINE: OnceLock<wasmtime::Engine> = OnceLock::new();
    ENGINE.get_or_init(|| build_engine(&PoolConfig::default()).expect("engine"))
}

/// An app from an example component.
pub fn app(name: &str) -> Arc<App> {
    let wasm = std::fs::read(example(name)).unwrap();
    let cache = ArtifactCache::new(std::env::temp_dir().join("wedge-h2-test-cache"));
    let executor = Executor::default();
    Arc::new(App::load(engine(), &cache, name, &wasm, executor, Limits::default()).unwrap())
}

/// A site of `app` alone.
fn site(app: &Arc<App>) -> Site {
    Site::single(Arc::new(Tenant::new(app.name(), Serving::App(app.clone()))))
}

/// A listener on 127.0.0.1 serving every connection with `wedge::net::h2`.
pub struct TestServer {
    pub addr: SocketAddr,
    pub shutdown: watch::Sender<bool>,
    pub stats: Arc<ConnStats>,
}

impl TestServer {
    /// Serves `app` with `config`.
    pub async fn app(app: Arc<App>, config: H2Config) -> TestServer {
        Self::start(config, move |io, shutdown, config, _stats| {
            tokio::spawn(wedge::net::h2::serve(
                io,
                Frontend::new(Arc::new(site(&app)), AccessLog::Off),
                RequestScheme::Http,
                shutdown,
                config,
            ));
        })
        .await
    }

    /// Serves a native handler made per connection.
    pub async fn native<H: Handler>(
        make: impl Fn() -> H + Send + 'static,
        config: H2Config,
    ) -> TestServer {
        Self::start(config, move |io, shutdown, config, stats| {
            tokio::spawn(wedge::net::h2::serve_with(
                io,
                make(),
                shutdown,
                config,
                stats,
            ));
        })
        .await
    }

    async fn start(
        config: H2Config,
        serve: impl Fn(TcpStream, watch::Receiver<bool>, Arc<H2Config>, Arc<ConnStats>) + Send + 'static,
    ) -> TestServer {
        let _ = temp_dir("h2");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, rx) = watch::channel(false);
        let config = Arc::new(config);
        let stats = Arc::new(ConnStats::default());
        let conn_stats = stats.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                stream.set_nodelay(true).unwrap();
                serve(stream, rx.clone(), config.clone(), conn_stats.clone());
            }
        });
        TestServer {
            addr,
            shutdown,
            stats,
        }
    }

    /// An `h2` client connection.
    pub async fn client(&self) -> SendRequest<Bytes> {
        client_with(self.addr, h2::client::Builder::new()).await
    }
}

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
