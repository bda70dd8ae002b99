//! A reused instance's response body: it ends cleanly only while its instance has
//! not failed, and is cut off at its request's deadline.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::futures::OwnedNotified;
use tokio::time::{Instant, Sleep, sleep_until};
use wasmtime_wasi_http::WasiBody;

use super::claim::Caller;
use crate::host::app::App;
use crate::host::fault::Fault;
use crate::host::response_body::{BodyError, BoundBody};

/// A reused instance's response body. wasmtime ends a body cleanly when the instance
/// behind it is dropped, trap or not, so its end counts as one only while the instance
/// has not failed (else the fault is reported for this request, as the fresh path
/// reports a fault after the head). The request's wall-clock deadline still runs:
/// the instance's own expiry counts from its latest request, so a busy instance
/// would let a body stream forever. The claim is held until the body is done.
pub(super) struct ReusedBody {
    inner: WasiBody,
    caller: Caller,
    app: Arc<App>,
    deadline: Pin<Box<Sleep>>,
    /// Over before its end: past its deadline, or failed (its fault reported once).
    expired: bool,
    /// While the body is asked whether it was cut off: notified when its instance is
    /// gone.
    instance_gone: Option<Pin<Box<OwnedNotified>>>,
}

impl ReusedBody {
    pub(super) fn new(inner: WasiBody, caller: Caller, app: Arc<App>, deadline: Instant) -> Self {
        ReusedBody {
            inner,
            caller,
            app,
            deadline: Box::pin(sleep_until(deadline)),
            expired: false,
            instance_gone: None,
        }
    }

    /// The failure of the instance, if it can still cut this body off.
    fn failure(&self) -> Option<Fault> {
        let claim = &self.caller.claim;
        if claim.body_finished.get().is_some() {
            return None;
        }
        claim.instance.get().and_then(|shared| shared.failure())
    }

    /// Ready with the instance's failure once it can cut this body off; the waker
    /// is woken when the instance goes, failed or not.
    fn poll_failure(&mut self, cx: &mut Context<'_>) -> Poll<Fault> {
        let Some(shared) = self.caller.claim.instance.get().cloned() else {
            return Poll::Pending;
        };
        loop {
            let gone = self.instance_gone.get_or_insert_with(|| {
                let mut gone = Box::pin(shared.gone_notify.clone().notified_owned());
                // Made before the fate is looked at, so a fate set after the look
                // still notifies it (enabled: `notify_waiters` wakes only those).
                gone.as_mut().enable();
                gone
            });
            if shared.fate.get().is_none() {
                ready!(gone.as_mut().poll(cx));
                self.instance_gone = None;
                continue;
            }
            // Gone: failed (unless the body was finished first), or ended cleanly.
            return match self.failure() {
                Some(fault) => Poll::Ready(fault),
                None => Poll::Pending,
            };
        }
    }

    /// Ends the body at its deadline, as a fault of this request.
    fn expire(&mut self) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.expired = true;
        self.caller.done = true;
        let fault = Fault::WallTime {
            limit: self.app.limits.wall_time,
            started: true,
        };
        self.app.report(&fault);
        Poll::Ready(Some(Err(BodyError::Aborted(fault))))
    }
}

impl BoundBody for ReusedBody {
    /// Ready once the response cannot complete: its instance failed, or its
    /// deadline passed (counted as this request's wall-time fault).
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.expired {
            return Poll::Ready(());
        }
        if let Poll::Ready(fault) = self.poll_failure(cx) {
            self.expired = true;
            self.caller.done = true;
            self.app.report(&fault);
            return Poll::Ready(());
        }
        ready!(self.deadline.as_mut().poll(cx));
        let _ = self.expire();
        Poll::Ready(())
    }
}

impl Body for ReusedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.expired {
            return Poll::Ready(None);
        }
        if this.deadline.is_elapsed() {
            return this.expire();
        }
        let ended = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => return Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(Err(err))) => Some(err),
            Poll::Ready(None) => None,
            Poll::Pending => {
                ready!(this.deadline.as_mut().poll(cx));
                return this.expire();
            }
        };
        this.caller.done = true;
        let failure = this.failure();
        // A failure returned here is this body's end: were it asked again whether it
        // was cut off (a stalled engine holding the failure), it is, and reported.
        this.expired = ended.is_some() || failure.is_some();
        // An end or an error after the instance failed is the failure's doing.
        match (failure, ended) {
            (Some(fault), _) => {
                this.app.report(&fault);
                Poll::Ready(Some(Err(BodyError::Aborted(fault))))
            }
            (None, Some(err)) => Poll::Ready(Some(Err(BodyError::Guest(err)))),
            (None, None) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        !self.expired && self.inner.is_end_stream() && self.failure().is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ReusedBody {
    fn drop(&mut self) {
        // An engine that saw the end through `is_end_stream` polls no more.
        if self.is_end_stream() {
            self.caller.done = true;
        }
    }
}
