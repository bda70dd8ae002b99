//! An origin's response body as the guest reads it: each frame must come
//! within the between-bytes timeout, and the request stops counting against
//! the app's in-flight limit when the body ends, fails or is dropped.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};
use wasmtime_wasi_http::Error;

pub(super) struct ResponseBody {
    incoming: Incoming,
    between_bytes: Duration,
    next_frame_by: Pin<Box<Sleep>>,
    in_flight: Option<OwnedSemaphorePermit>,
}

impl ResponseBody {
    pub(super) fn new(
        incoming: Incoming,
        between_bytes: Duration,
        in_flight: OwnedSemaphorePermit,
    ) -> Self {
        ResponseBody {
            incoming,
            between_bytes,
            next_frame_by: Box::pin(tokio::time::sleep(between_bytes)),
            in_flight: Some(in_flight),
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        let polled = match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let next = Instant::now() + this.between_bytes;
                this.next_frame_by.as_mut().reset(next);
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(err))) => Some(Err(Error::Hyper(err))),
            Poll::Ready(None) => None,
            Poll::Pending => {
                ready!(this.next_frame_by.as_mut().poll(cx));
                Some(Err(Error::ConnectionReadTimeout))
            }
        };
        this.in_flight = None;
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
