//! wedge's library in process, without the `wedge` binary: the one wasmtime engine of
//! a test process, apps loaded from the example components, and a test-local listener
//! that hands accepted sockets to `wedge::net::h2`.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use wedge::host::{App, ArtifactCache, Executor, Limits, PoolConfig, build_engine};
use wedge::net::RequestScheme;
use wedge::net::h2::{ConnStats, H2Config, Handler};
use wedge::serve::{AccessLog, Frontend};
use wedge::tenancy::{Serving, Site, Tenant};

use crate::h2::client_with;
use crate::{example, temp_dir};

/// The one engine of this test binary (`build_engine` may run once per process).
pub fn engine() -> &'static wasmtime::Engine {
    static ENGINE: OnceLock<wasmtime::Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        build_engine(&PoolConfig::default(), wedge::host::Compile::Optimized).expect("engine")
    })
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
