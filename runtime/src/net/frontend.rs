//! Where every engine (HTTP/1.1, HTTP/2, HTTP/3) hands a request: the site's routes
//! to its apps, what the listener adds to responses, the access log and the metrics.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body::Body;

use super::access_log::AccessLog;
use super::response_hook::ResponseHook;
use super::tally::{InFlight, TalliedBody, Tally};
use crate::host::admission::Abandoned;
use crate::host::{BASE_PATH, ClientAddr, DevOverlay, RequestScheme, ResponseBody, Site, plain};
use crate::metrics::{CloseReason, Metrics, Open, Protocol, WorkerMetrics};

/// One listener's way to the apps; cheap to clone per connection.
#[derive(Clone)]
pub struct Frontend {
    site: Arc<Site>,
    hook: ResponseHook,
    /// `wedge dev`'s build state: its paths, and what its responses get.
    overlay: Option<Arc<DevOverlay>>,
    access_log: AccessLog,
    metrics: Option<Arc<Metrics>>,
    /// The worker serving this listener's connections, when counting.
    worker: Option<WorkerMetrics>,
    /// The requests this frontend's connection abandoned that still run (one
    /// connection's: see [`Frontend::for_connection`]).
    abandoned: Abandoned,
    /// Where the connection comes from, when it is one connection's: each request
    /// carries it (a WAGI program's `REMOTE_ADDR`).
    client: Option<SocketAddr>,
}

impl Frontend {
    pub fn new(site: Arc<Site>, access_log: AccessLog) -> Self {
        Frontend {
            site,
            hook: ResponseHook::none(),
            overlay: None,
            access_log,
            metrics: None,
            worker: None,
            abandoned: Abandoned::default(),
            client: None,
        }
    }

    /// The same way to the apps for a connection from `client`.
    pub fn for_client(&self, client: SocketAddr) -> Self {
        Frontend {
            client: Some(client),
            ..self.clone()
        }
    }

    /// The same way to the apps for one new connection, which counts the requests
    /// its client abandons on its own.
    pub fn for_connection(&self) -> Self {
        Frontend {
            abandoned: Abandoned::default(),
            ..self.clone()
        }
    }

    /// The same way to the apps, counting connections and requests in `metrics`.
    pub fn with_metrics(self, metrics: Arc<Metrics>) -> Self {
        Frontend {
            metrics: Some(metrics),
            ..self
        }
    }

    /// The same way to the apps, with `overlay` answering its paths and marking
    /// every response.
    pub fn with_overlay(self, overlay: Arc<DevOverlay>) -> Self {
        Frontend {
            overlay: Some(overlay),
            ..self
        }
    }

    /// The same way to the apps, counting the connections worker `index` accepts.
    pub fn for_worker(self, index: usize) -> Self {
        Frontend {
            worker: self.metrics.as_ref().map(|m| m.worker(index)),
            ..self
        }
    }

    /// Counts a connection this worker accepted, open until the guard is dropped.
    pub fn accepted(&self) -> Option<Open> {
        self.worker.as_ref().map(WorkerMetrics::accepted)
    }

    /// Counts a connection over `protocol` as open until the guard is dropped.
    pub fn connection(&self, protocol: Protocol) -> Option<Open> {
        self.metrics.as_ref().map(|m| m.connection(protocol))
    }

    /// Counts a connection ended for a peer fault.
    pub fn closed(&self, reason: CloseReason) {
        if let Some(metrics) = &self.metrics {
            metrics.closed(reason);
        }
    }

    /// The same way to the apps, with `hook` applied to every response.
    pub fn with_hook(&self, hook: ResponseHook) -> Self {
        Frontend {
            hook,
            ..self.clone()
        }
    }

    /// Answers `request` with the app its host and path route to (its version
    /// current now), or 404 when no route matches.
    pub async fn respond<B>(
        &self,
        mut request: Request<B>,
        scheme: RequestScheme,
    ) -> Response<TalliedBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        if let Some(worker) = &self.worker {
            worker.request();
        }
        // Until its response is done: what a forced exit would cut off.
        let in_flight = InFlight::begin();
        let mut tally = Tally::begin(self.access_log, self.metrics.as_ref(), &request);
        if let Some(answer) = self.overlay.as_ref().and_then(|o| o.answer(&request)) {
            return self.finish(answer, tally);
        }
        let host = authority(&request);
        let Some(mount) = self.site.route(host, request.uri().path()) else {
            if let Some(metrics) = &self.metrics {
                metrics.unrouted(Protocol::of(request.version()));
            }
            let text = format!(
                "404 Not Found: no app serves {}{}\n",
                host.unwrap_or(""),
                request.uri().path()
            );
            return self.finish(plain(StatusCode::NOT_FOUND, text), tally);
        };
        let tenant = mount.tenant;
        if let Some(client) = self.client {
            request.extensions_mut().insert(ClientAddr(client));
        }
        // Only wedge says where an app is mounted: a client's own value is dropped.
        let fields = request.headers_mut();
        fields.remove(BASE_PATH);
        if let Some(base_path) = mount.base_path {
            fields.insert(BASE_PATH, base_path);
        }
        let serving = tenant.slot().current();
        if let Some(tally) = &mut tally {
            tally.set_app(&tenant, &serving);
        }
        let response = serving.handle(request, scheme, &self.abandoned).await;
        self.finish(response, tally)
            .map(|body| body.in_flight(in_flight))
    }

    /// A response on its way out: the overlay's and the listener's additions
    /// applied, its body counted into `tally`.
    pub fn finish(
        &self,
        response: Response<ResponseBody>,
        tally: Option<Box<Tally>>,
    ) -> Response<TalliedBody> {
        let mut response = match &self.overlay {
            Some(overlay) => overlay.decorate(response),
            None => response,
        };
        self.hook.apply(&mut response);
        let (head, body) = response.into_parts();
        let body = TalliedBody::new(body, &head, tally);
        Response::from_parts(head, body)
    }
}

/// The host a request was sent to: the URI's authority (HTTP/2 and HTTP/3, or an
/// absolute-form HTTP/1.1 target), else the Host field.
fn authority<B>(request: &Request<B>) -> Option<&str> {
    request.uri().host().or_else(|| {
        request
            .headers()
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
    })
}
