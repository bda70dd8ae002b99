//! Where every engine (HTTP/1.1, HTTP/2, HTTP/3) hands a request: the site's routes
//! to its apps, what the listener adds to responses, the access log and the metrics.
//! The engines see it as a [`Service`].

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response, StatusCode, header};

use super::access_log::AccessLog;
use super::response_hook::ResponseHook;
use super::tally::{InFlight, TalliedBody, Tally};
use crate::host::admission::Abandoned;
use crate::host::{BASE_PATH, ClientAddr, DevOverlay, ResponseBody, plain};
use crate::metrics::{Metrics, Protocol};
use crate::net::request_body::RequestBody;
use crate::net::{Counters, RequestScheme, Service};
use crate::tenancy::Site;

/// One listener's way to the apps; cheap to clone per connection.
#[derive(Clone)]
pub struct Frontend {
    site: Arc<Site>,
    hook: ResponseHook,
    /// `wedge dev`'s build state: its paths, and what its responses get.
    overlay: Option<Arc<DevOverlay>>,
    access_log: AccessLog,
    /// Counts connections and requests, when the metrics are on.
    counters: Counters,
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
            counters: Counters::default(),
            abandoned: Abandoned::default(),
            client: None,
        }
    }

    /// The same way to the apps, counting connections and requests in `metrics`.
    pub fn with_metrics(self, metrics: Arc<Metrics>) -> Self {
        Frontend {
            counters: Counters::new(metrics),
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
            counters: self.counters.for_worker(index),
            ..self
        }
    }

    /// Answers `request` with the app its host and path route to (its version
    /// current now), or 404 when no route matches.
    pub async fn respond(
        &self,
        mut request: Request<RequestBody>,
        scheme: RequestScheme,
    ) -> Response<TalliedBody> {
        if let Some(worker) = self.counters.worker() {
            worker.request();
        }
        // Until its response is done: what a forced exit would cut off.
        let in_flight = InFlight::begin();
        let metrics = self.counters.metrics();
        let mut tally = Tally::begin(self.access_log, metrics, &request);
        if let Some(answer) = self.overlay.as_ref().and_then(|o| o.answer(&request)) {
            return self.finish(answer, tally);
        }
        let host = authority(&request);
        let Some(mount) = self.site.route(host, request.uri().path()) else {
            if let Some(metrics) = metrics {
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
        let response = serving
            .handle(request, scheme.into(), &self.abandoned)
            .await;
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

impl Service for Frontend {
    type Body = TalliedBody;

    fn call(
        &self,
        request: Request<RequestBody>,
        scheme: RequestScheme,
    ) -> impl Future<Output = Response<TalliedBody>> + Send + 'static {
        let frontend = self.clone();
        async move { frontend.respond(request, scheme).await }
    }

    fn refuse(&self, status: StatusCode, text: String) -> Response<TalliedBody> {
        self.finish(plain(status, text), None)
    }

    /// One connection counts the requests its client abandons on its own.
    fn for_connection(&self) -> Self {
        Frontend {
            abandoned: Abandoned::default(),
            ..self.clone()
        }
    }

    /// Each request carries `client` (a WAGI program's `REMOTE_ADDR`).
    fn for_client(&self, client: SocketAddr) -> Self {
        Frontend {
            client: Some(client),
            ..self.clone()
        }
    }

    fn with_h3_on(&self, port: u16) -> Self {
        Frontend {
            hook: ResponseHook::advertise_h3(port),
            ..self.clone()
        }
    }

    fn counters(&self) -> &Counters {
        &self.counters
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
