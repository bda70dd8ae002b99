//! What the host answers with: a body wedge wrote itself, one it streams itself, or
//! one bound to its request's life (a guest's), which an engine whose stream stalls
//! asks whether it was cut off. Each producer boxes its own body: none is named here.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;

use super::fault::Fault;

/// Why a response body did not end cleanly.
#[derive(Debug)]
pub enum BodyError {
    /// The guest failed after the response head was sent.
    Aborted(Fault),
    /// The guest's body stream reported an error.
    Guest(wasmtime_wasi_http::Error),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Aborted(fault) => write!(f, "response aborted: {fault}"),
            BodyError::Guest(err) => write!(f, "response body failed: {err}"),
        }
    }
}

impl std::error::Error for BodyError {}

/// A response body whose request can end while the body waits on the peer: its wall
/// time runs out, or its guest fails.
pub trait BoundBody: Body<Data = Bytes, Error = BodyError> + Send + Unpin + 'static {
    /// Ready once the response can no longer complete.
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}

/// What the protocol engines send back.
pub enum ResponseBody {
    /// A body wedge wrote itself.
    Full(Option<Bytes>),
    /// A body wedge streams itself (`wedge dev`'s build events), as long as it likes.
    Stream(UnsyncBoxBody<Bytes, BodyError>),
    /// A body bound to its request's life: a guest's, or one wrapping it.
    Bound(Box<dyn BoundBody>),
}

impl ResponseBody {
    pub fn text(text: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Some(text.into()))
    }

    /// `body`, bound to its request's life.
    pub fn bound(body: impl BoundBody) -> Self {
        ResponseBody::Bound(Box::new(body))
    }

    /// Ready once the response can no longer complete (its request's time is up, or
    /// its guest failed); asked by an engine whose stream is stalled on the peer's
    /// flow control, which then resets the stream.
    pub fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            ResponseBody::Full(_) | ResponseBody::Stream(_) => Poll::Pending,
            ResponseBody::Bound(body) => body.poll_cut_off(cx),
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            ResponseBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Stream(body) => Pin::new(body).poll_frame(cx),
            ResponseBody::Bound(body) => Pin::new(&mut **body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::Stream(body) => body.is_end_stream(),
            ResponseBody::Bound(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            ResponseBody::Full(None) => SizeHint::with_exact(0),
            ResponseBody::Stream(body) => body.size_hint(),
            ResponseBody::Bound(body) => body.size_hint(),
        }
    }
}
