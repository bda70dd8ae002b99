//! A response body's failure held back one poll, so that what came before it reaches
//! the client.
//!
//! hyper buffers the head and body chunks and writes them when the body is pending.
//! A body that fails drops the connection at once, buffer and all: a guest that
//! trapped right after writing its head and a chunk left the client an empty reply
//! (98 of 100 `/trap-mid-body` requests) instead of a `200` and a body cut off. Held
//! back, the failure meets hyper after its flush: what the socket took then reaches
//! the client. A failure is never held longer than one poll; if the flush waits on
//! the client then, the connection's stall watch (`stall_watch`) resets it, and what
//! was still queued is lost with the response it belonged to.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

/// `B`, whose failure is reported on the poll after the one that met it.
pub(super) struct FailAfterFlush<B: Body> {
    body: B,
    failure: Option<B::Error>,
}

impl<B: Body> FailAfterFlush<B> {
    pub(super) fn new(body: B) -> Self {
        FailAfterFlush {
            body,
            failure: None,
        }
    }
}

// The failure is only ever moved out, never pinned.
impl<B: Body + Unpin> Unpin for FailAfterFlush<B> {}

impl<B: Body + Unpin> Body for FailAfterFlush<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        if let Some(failure) = this.failure.take() {
            return Poll::Ready(Some(Err(failure)));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Err(failure))) => {
                this.failure = Some(failure);
                // Pending lets hyper flush; the wake brings it straight back here.
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            polled => polled,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failure.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use bytes::Bytes;
    use http_body_util::StreamBody;

    use super::*;

    #[test]
    fn a_failure_comes_one_poll_late_after_the_data_before_it() {
        let frames: Vec<Result<Frame<Bytes>, &str>> =
            vec![Ok(Frame::data(Bytes::from_static(b"x"))), Err("trapped")];
        let mut body = FailAfterFlush::new(StreamBody::new(futures_util::stream::iter(frames)));
        let mut cx = Context::from_waker(Waker::noop());
        let mut poll = || Pin::new(&mut body).poll_frame(&mut cx);
        assert!(matches!(poll(), Poll::Ready(Some(Ok(f))) if f.is_data()));
        assert!(poll().is_pending());
        assert!(matches!(poll(), Poll::Ready(Some(Err("trapped")))));
        assert!(matches!(poll(), Poll::Ready(None)));
    }
}
