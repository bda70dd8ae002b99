//! What the HTTP/2 and HTTP/3 engines dispatch their pooled heads to: a [`Handler`],
//! which is a [`Service`](super::service::Service) behind
//! [`ToService`](super::service::ToService) in production, or a native handler in
//! tests that count the engine's own allocations.

use std::future::Future;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::Body;
use wedge_proto::head::RequestHead;

use super::request_body::RequestBody;

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

/// Request trailers as a service takes them. The cores pass only fields `http` can
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
}
