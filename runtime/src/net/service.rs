//! The seam between the engines and whatever answers their requests (the apps, in
//! `crate::serve`): a request with an absolute URI and the connection's body go in, a
//! response whose body the engine streams comes out. Like hyper's `Service` and
//! the wasi-http host's hooks: the engines know nothing of what is behind it.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use http_body::Body;

use super::handler::{Handler, RequestHeadView, ResponseStream};
use super::request_body::RequestBody;
use super::uri::{self, RequestScheme};
use crate::metrics::{CloseReason, Metrics, Open, Protocol, WorkerMetrics};

/// Answers the requests of a listener's connections; cheap to clone per connection.
pub trait Service: Clone + Send + Sync + 'static {
    /// The response body; polled by a connection only while flow credit allows. Its
    /// error ends the stream (HTTP/1.1: the connection, as hyper does).
    type Body: ResponseStream + Body<Error: std::error::Error + Send + Sync>;

    /// Answers `request`, whose URI is absolute (origin-form only when the request
    /// named no authority) and which arrived on a connection with `scheme`.
    fn call(
        &self,
        request: Request<RequestBody>,
        scheme: RequestScheme,
    ) -> impl Future<Output = Response<Self::Body>> + Send + 'static;

    /// A response an engine gives itself to a request it does not hand on (one it
    /// cannot read), sent out the way every response is.
    fn refuse(&self, status: StatusCode, text: String) -> Response<Self::Body>;

    /// The same service for one new connection.
    fn for_connection(&self) -> Self;

    /// The same service for connections from `client`.
    fn for_client(&self, client: SocketAddr) -> Self;

    /// The same service for a listener whose clients can also reach it over HTTP/3 on
    /// UDP `port`.
    fn with_h3_on(&self, port: u16) -> Self;

    /// What counts this service's connections.
    fn counters(&self) -> &Counters;
}

/// Counts connections into the metrics, when they are on: the process's, and the
/// worker's serving them.
#[derive(Clone, Default)]
pub struct Counters {
    metrics: Option<Arc<Metrics>>,
    worker: Option<WorkerMetrics>,
}

impl Counters {
    /// Counting into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Counters {
            metrics: Some(metrics),
            worker: None,
        }
    }

    /// The same, counting the connections worker `index` accepts.
    pub fn for_worker(&self, index: usize) -> Self {
        Counters {
            worker: self.metrics.as_ref().map(|m| m.worker(index)),
            ..self.clone()
        }
    }

    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    pub fn worker(&self) -> Option<&WorkerMetrics> {
        self.worker.as_ref()
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
}

/// Hands each request to a [`Service`] as an `http::Request`.
pub struct ToService<S> {
    service: S,
    scheme: RequestScheme,
    /// HTTP/2 or HTTP/3: what the request says it arrived over (the access log shows it).
    version: http::Version,
}

impl<S: Service> ToService<S> {
    pub fn new(service: S, scheme: RequestScheme, version: http::Version) -> Self {
        ToService {
            service,
            scheme,
            version,
        }
    }
}

type ServiceFuture<B> = Pin<Box<dyn Future<Output = Response<B>> + Send>>;

impl<S: Service, Head: RequestHeadView> Handler<Head> for ToService<S> {
    type Body = S::Body;
    type Future = ServiceFuture<S::Body>;

    fn call(&self, head: &Head, body: RequestBody) -> Self::Future {
        let request = match to_http(head, body, self.scheme, self.version) {
            Ok(request) => request,
            Err(err) => {
                let response = self
                    .service
                    .refuse(StatusCode::BAD_REQUEST, format!("bad request: {err}\n"));
                return Box::pin(std::future::ready(response));
            }
        };
        Box::pin(self.service.call(request, self.scheme))
    }
}

/// The head as a service takes it: an absolute URI from the pseudo-headers (or the
/// Host field).
fn to_http(
    head: &impl RequestHeadView,
    body: RequestBody,
    scheme: RequestScheme,
    version: http::Version,
) -> Result<Request<RequestBody>, http::Error> {
    let scheme = match head.scheme() {
        b"" => scheme.as_str().as_bytes(),
        given => given,
    };
    let authority = head.authority().or_else(|| {
        head.fields()
            .find(|(name, _)| *name == b"host")
            .map(|(_, host)| host)
    });
    // Without an authority the URI is origin-form, as an HTTP/1.1 request without Host.
    let uri = match authority {
        Some(authority) => uri::absolute(scheme, authority, head.path())?,
        None => http::Uri::builder().path_and_query(head.path()).build()?,
    };
    let request = Request::builder()
        .method(head.method())
        .uri(uri)
        .version(version);
    with_fields(request, head.fields()).body(body)
}

/// Adds a head's fields to a request. HTTP/2 and HTTP/3 split cookies into one field
/// per crumb; they are joined with "; " before a generic HTTP application sees them
/// (RFC 9113 §8.2.3, RFC 9114 §4.2.1).
fn with_fields<'a>(
    mut request: http::request::Builder,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> http::request::Builder {
    let mut cookie: Option<Vec<u8>> = None;
    for (name, value) in fields {
        if name == b"cookie" {
            match &mut cookie {
                Some(joined) => {
                    joined.extend_from_slice(b"; ");
                    joined.extend_from_slice(value);
                }
                None => cookie = Some(value.to_vec()),
            }
        } else {
            request = request.header(name, value);
        }
    }
    match cookie {
        Some(joined) => request.header(http::header::COOKIE, joined),
        None => request,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let fields = pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
        let request = with_fields(Request::builder(), fields).body(()).unwrap();
        request.headers().clone()
    }

    #[test]
    fn cookie_crumbs_are_joined_into_one_field() {
        let headers = fields(&[("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")]);
        let cookies: Vec<_> = headers.get_all("cookie").iter().collect();
        assert_eq!(cookies, ["a=1; b=2"]);
        assert_eq!(headers["accept"], "*/*");
    }

    #[test]
    fn other_repeated_fields_stay_separate() {
        let headers = fields(&[("x-tag", "1"), ("x-tag", "2")]);
        assert_eq!(headers.get_all("x-tag").iter().count(), 2);
        assert!(headers.get("cookie").is_none());
    }
}
