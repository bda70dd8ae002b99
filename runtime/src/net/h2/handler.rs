//! What the engine dispatches requests to: the wasm host in production, a native
//! handler in tests that count the engine's own allocations.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use wedge_proto::h2::conn::RequestHead;

use super::request_body::RequestBody;
use crate::host::{App, RequestScheme, ResponseBody, plain};

/// Answers requests. `call` sees the pooled head only while it runs: whatever it needs
/// later it copies, so the head can serve the next stream at once.
pub trait Handler: Send + 'static {
    /// The response body; polled by the connection only while flow credit allows.
    type Body: Body<Data = Bytes, Error: std::fmt::Display> + Send + Unpin + 'static;
    /// The response, polled by the connection's task: one that parks holds up no one.
    type Future: Future<Output = Response<Self::Body>> + Send + Unpin + 'static;

    fn call(&self, head: &RequestHead, body: RequestBody) -> Self::Future;
}

/// Dispatches to a wasm app through the host bridge.
pub struct AppHandler {
    app: Arc<App>,
    scheme: RequestScheme,
}

impl AppHandler {
    pub fn new(app: Arc<App>, scheme: RequestScheme) -> Self {
        AppHandler { app, scheme }
    }
}

type AppFuture = Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>;

impl Handler for AppHandler {
    type Body = ResponseBody;
    type Future = AppFuture;

    fn call(&self, head: &RequestHead, body: RequestBody) -> AppFuture {
        let request = match to_http(head, body, self.scheme) {
            Ok(request) => request,
            Err(err) => {
                let response = plain(StatusCode::BAD_REQUEST, format!("bad request: {err}\n"));
                return Box::pin(std::future::ready(response));
            }
        };
        let app = self.app.clone();
        let scheme = self.scheme;
        Box::pin(async move { app.handle(request, scheme).await })
    }
}

/// The head as the host bridge takes it: an absolute URI from the pseudo-headers.
fn to_http(
    head: &RequestHead,
    body: RequestBody,
    scheme: RequestScheme,
) -> Result<Request<RequestBody>, http::Error> {
    let scheme = match head.scheme() {
        b"" => match scheme {
            RequestScheme::Http => &b"http"[..],
            RequestScheme::Https => &b"https"[..],
        },
        given => given,
    };
    let authority = head.authority().or_else(|| {
        head.fields()
            .find(|(name, _)| *name == b"host")
            .map(|(_, host)| host)
    });
    // Without an authority the URI is origin-form, as an HTTP/1.1 request without Host.
    let uri = match authority {
        Some(authority) => http::Uri::builder().scheme(scheme).authority(authority),
        None => http::Uri::builder(),
    };
    let uri = uri.path_and_query(head.path()).build()?;
    let mut request = Request::builder().method(head.method()).uri(uri);
    for (name, value) in head.fields() {
        request = request.header(name, value);
    }
    request.body(body)
}
