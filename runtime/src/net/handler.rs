//! What the engines dispatch requests to: the wasm host in production, a native
//! handler in tests that count the engine's own allocations. HTTP/2 and HTTP/3 heads
//! both reach the host through [`AppHandler`], converted in one place ([`to_http`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use wedge_proto::head::RequestHead;

use super::frontend::Frontend;
use super::request_body::RequestBody;
use super::tally::TalliedBody;
use crate::host::{RequestScheme, ResponseBody, plain};

/// A request head as an engine's core decoded it: pseudo-headers and fields.
pub trait RequestHeadView {
    fn method(&self) -> &[u8];
    /// Empty when the request carried none (the connection's scheme applies).
    fn scheme(&self) -> &[u8];
    fn authority(&self) -> Option<&[u8]>;
    fn path(&self) -> &[u8];
    /// Regular fields in order, names lowercase.
    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])>;
}

/// HTTP/2 and HTTP/3 decode into the same pooled head.
impl RequestHeadView for wedge_proto::head::RequestHead {
    fn method(&self) -> &[u8] {
        wedge_proto::head::RequestHead::method(self)
    }
    fn scheme(&self) -> &[u8] {
        wedge_proto::head::RequestHead::scheme(self)
    }
    fn authority(&self) -> Option<&[u8]> {
        wedge_proto::head::RequestHead::authority(self)
    }
    fn path(&self) -> &[u8] {
        wedge_proto::head::RequestHead::path(self)
    }
    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        wedge_proto::head::RequestHead::fields(self)
    }
}

/// Answers requests whose heads are `Head`s (HTTP/2's unless said otherwise). `call`
/// sees the pooled head only while it runs: whatever it needs later it copies, so the
/// head can serve the next stream at once.
pub trait Handler<Head = RequestHead>: Send + 'static {
    /// The response body; polled by the connection only while flow credit allows.
    type Body: ResponseStream;
    /// The response, polled by the connection's task: one that parks holds up no one.
    type Future: Future<Output = Response<Self::Body>> + Send + Unpin + 'static;

    fn call(&self, head: &Head, body: RequestBody) -> Self::Future;
}

/// A response body whose request can end while the body waits on the peer: its wall
/// time ran out, or its guest failed. A body the engine can poll shows its own end; one
/// stalled on flow control is not polled, so while a stream is stalled the engine asks
/// this instead and resets the stream once it is cut off (DESIGN 4.6: streams die with
/// their request, however slowly the peer reads).
pub trait ResponseStream:
    Body<Data = Bytes, Error: std::fmt::Display> + Send + Unpin + 'static
{
    /// Ready once the response can no longer complete. A body that cannot be cut off
    /// keeps the default, which never is.
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let _ = cx;
        Poll::Pending
    }
}

impl ResponseStream for ResponseBody {
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        ResponseBody::poll_cut_off(self, cx)
    }
}

/// Dispatches to a wasm app through the host bridge.
pub struct AppHandler {
    frontend: Frontend,
    scheme: RequestScheme,
    /// HTTP/2 or HTTP/3: what the request says it arrived over (the access log shows it).
    version: http::Version,
}

impl AppHandler {
    pub fn new(frontend: Frontend, scheme: RequestScheme, version: http::Version) -> Self {
        AppHandler {
            frontend,
            scheme,
            version,
        }
    }
}

type AppFuture = Pin<Box<dyn Future<Output = Response<TalliedBody>> + Send>>;

impl<Head: RequestHeadView> Handler<Head> for AppHandler {
    type Body = TalliedBody;
    type Future = AppFuture;

    fn call(&self, head: &Head, body: RequestBody) -> AppFuture {
        let request = match to_http(head, body, self.scheme, self.version) {
            Ok(request) => request,
            Err(err) => {
                let response = plain(StatusCode::BAD_REQUEST, format!("bad request: {err}\n"));
                return Box::pin(std::future::ready(self.frontend.finish(response, None)));
            }
        };
        let frontend = self.frontend.clone();
        let scheme = self.scheme;
        Box::pin(async move { frontend.respond(request, scheme).await })
    }
}

/// The head as the host bridge takes it: an absolute URI from the pseudo-headers (or
/// the Host field).
fn to_http(
    head: &impl RequestHeadView,
    body: RequestBody,
    scheme: RequestScheme,
    version: http::Version,
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

/// Request trailers as the host bridge takes them. The cores pass only fields `http` can
/// carry (token names, values without control characters: `wedge_proto`'s trailer
/// rules), within their header list limit. `None` when there are more fields than a
/// `HeaderMap` holds (only with a limit raised past ~790 KiB): the caller fails the body
/// rather than hand the guest trailers cut short.
pub(in crate::net) fn trailer_map(head: &impl RequestHeadView) -> Option<http::HeaderMap> {
    let mut map = http::HeaderMap::new();
    for (name, value) in head.fields() {
        let name = http::HeaderName::from_bytes(name).ok()?;
        let value = http::HeaderValue::from_bytes(value).ok()?;
        map.try_append(name, value).ok()?;
    }
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let fields = pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
        let request = with_fields(Request::builder(), fields).body(()).unwrap();
        request.headers().clone()
    }

    struct Trailers(Vec<(Vec<u8>, Vec<u8>)>);

    impl RequestHeadView for Trailers {
        fn method(&self) -> &[u8] {
            b""
        }
        fn scheme(&self) -> &[u8] {
            b""
        }
        fn authority(&self) -> Option<&[u8]> {
            None
        }
        fn path(&self) -> &[u8] {
            b""
        }
        fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
            self.0.iter().map(|(n, v)| (&n[..], &v[..]))
        }
    }

    /// Attack review of trailers: with the header list limit raised past ~790 KiB,
    /// 40,000 distinct trailer names were handed on cut short at 24,576; now they are
    /// not handed on at all (the caller fails the body).
    #[test]
    fn trailers_a_header_map_cannot_hold_are_not_handed_on_cut_short() {
        let many = (0..40_000).map(|i| (format!("x-{i}").into_bytes(), b"1".to_vec()));
        assert!(trailer_map(&Trailers(many.collect())).is_none());
        let few = Trailers(vec![(b"x-a".to_vec(), b"1".to_vec()); 3]);
        assert_eq!(trailer_map(&few).unwrap().get_all("x-a").iter().count(), 3);
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
