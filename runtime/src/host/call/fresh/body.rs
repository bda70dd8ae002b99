//! A fresh instance's response body, and how its call's outcome reaches it: the body
//! ends cleanly only if the guest call succeeded.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep, sleep_until};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::CallGuard;
use crate::host::fault::Fault;
use crate::host::response_body::{BodyError, BoundBody};

/// The result of a guest call, sent when the call returns.
pub type Outcome = Result<(), Fault>;

/// What a guest call gave first.
pub(in crate::host::call) enum First<R> {
    /// Its response (`Err`: the outparam was dropped unset), and the call's outcome
    /// when it had already arrived (it must then reach the body's end from here).
    Response(
        Result<R, oneshot::error::RecvError>,
        Option<OutcomeReceived>,
    ),
    /// The end of the call, with no response set.
    Ended(OutcomeReceived),
}

/// A call's outcome as its receiver gave it.
pub(in crate::host::call) type OutcomeReceived = Result<Outcome, oneshot::error::RecvError>;

/// Waits for the guest's response or the end of its call, the response first when both
/// are in. The call sends its response before its outcome, but runs on another worker:
/// it may send both between this select's look at the response (empty) and its look at
/// the outcome (there). So when the outcome comes first, the response is looked at once
/// more: a guest that answered is never taken for one that did not.
pub(in crate::host::call) async fn first<R>(
    response_rx: &mut oneshot::Receiver<R>,
    ended: impl Future<Output = OutcomeReceived>,
) -> First<R> {
    tokio::select! {
        biased;
        response = &mut *response_rx => First::Response(response, None),
        outcome = ended => match response_rx.try_recv() {
            Ok(response) => First::Response(Ok(response), Some(outcome)),
            Err(_) => First::Ended(outcome),
        },
    }
}

/// A receiver that gives `outcome` (a dropped sender if the call never reported).
pub(in crate::host::call) fn delivered(outcome: OutcomeReceived) -> oneshot::Receiver<Outcome> {
    let (tx, rx) = oneshot::channel();
    if let Ok(outcome) = outcome {
        let _ = tx.send(outcome);
    }
    rx
}

/// The guest's response body, held back at its end until the guest call has
/// returned: wasmtime's p2 body looks finished when the store is dropped by a
/// trap, so only an `Ok` outcome may end it cleanly.
pub struct GuestBody {
    inner: HyperOutgoingBody,
    outcome: Option<oneshot::Receiver<Outcome>>,
    /// The outcome, when [`GuestBody::poll_cut_off`] took it before the body's end did.
    early: Option<OutcomeReceived>,
    trailers: Option<HeaderMap>,
    inner_done: bool,
    /// The request's wall-time deadline: what is left of the body waits on the peer
    /// no longer than that.
    deadline: Instant,
    /// Armed only once a stalled stream asks.
    timer: Option<Pin<Box<Sleep>>>,
    /// Kept so that dropping the body (peer gone) stops the guest call.
    call: CallGuard,
}

impl GuestBody {
    pub(in crate::host::call) fn new(
        inner: HyperOutgoingBody,
        outcome: oneshot::Receiver<Outcome>,
        call: CallGuard,
        deadline: Instant,
    ) -> Self {
        GuestBody {
            inner,
            outcome: Some(outcome),
            early: None,
            trailers: None,
            inner_done: false,
            deadline,
            timer: None,
            call,
        }
    }
}

impl BoundBody for GuestBody {
    /// Ready once the response cannot complete: the guest call failed (a trap, its
    /// CPU or wall time, ...), or it succeeded and what is left of its body still
    /// waits on the peer at the request's deadline. A call still running needs no
    /// timer of ours: it is bounded by the same deadline and then fails.
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.early.is_none()
            && let Some(outcome) = &mut self.outcome
        {
            self.early = Some(ready!(Pin::new(outcome).poll(cx)));
        }
        if !matches!(self.early, None | Some(Ok(Ok(())))) {
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(sleep_until(deadline)));
        ready!(timer.as_mut().poll(cx));
        tracing::debug!(
            "app `{}`: response cut off: the client took too little of it within the \
             request's wall time",
            self.call.log.app()
        );
        Poll::Ready(())
    }
}

impl Drop for GuestBody {
    fn drop(&mut self) {
        // Dropping `call` stops a handler still running with no other trace:
        // say so, once, when the body goes before the call has reported.
        if self.early.is_none()
            && let Some(outcome) = &mut self.outcome
            && matches!(outcome.try_recv(), Err(oneshot::error::TryRecvError::Empty))
        {
            // Debug: any client hanging up mid-response causes one (a load
            // generator's connections at its end, a browser leaving a page); at
            // info they were a line per connection.
            tracing::debug!(
                "app `{}`: response body dropped before the handler finished \
                 (client gone or stream reset); handler stopped",
                self.call.log.app()
            );
        }
    }
}

impl Body for GuestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        while !this.inner_done {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_trailers() {
                    Ok(trailers) => this.trailers = Some(trailers),
                    Err(data) => return Poll::Ready(Some(Ok(data))),
                },
                Some(Err(err)) => {
                    this.inner_done = true;
                    this.outcome = None;
                    return Poll::Ready(Some(Err(BodyError::Guest(err))));
                }
                None => this.inner_done = true,
            }
        }
        let result = match (this.early.take(), this.outcome.as_mut()) {
            (_, None) => return Poll::Ready(None),
            (Some(early), Some(_)) => early,
            (None, Some(outcome)) => ready!(Pin::new(outcome).poll(cx)),
        };
        this.outcome = None;
        match result {
            Ok(Ok(())) => Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t)))),
            Ok(Err(fault)) => Poll::Ready(Some(Err(BodyError::Aborted(fault)))),
            Err(_) => Poll::Ready(Some(Err(BodyError::Aborted(Fault::Internal(
                "the guest call ended without reporting".into(),
            ))))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner_done && self.outcome.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_response_sent_just_before_the_call_ended_wins() {
        let (response_tx, mut response_rx) = oneshot::channel::<u32>();
        let mut response_tx = Some(response_tx);
        // The call's end, seen by the select right after the call sent its response:
        // what a guest task on another worker does between the select's two looks.
        let ended = std::future::poll_fn(move |_| {
            if let Some(tx) = response_tx.take() {
                let _ = tx.send(7);
            }
            Poll::Ready(Ok(Ok(())))
        });
        match first(&mut response_rx, ended).await {
            First::Response(Ok(7), Some(Ok(Ok(())))) => {}
            First::Response(..) => panic!("the response without the call's outcome"),
            First::Ended(_) => panic!("a response that was sent taken for none"),
        }
    }

    #[tokio::test]
    async fn a_call_that_ended_without_a_response_is_ended() {
        let (_response_tx, mut response_rx) = oneshot::channel::<u32>();
        let ended = std::future::ready(Ok(Ok(())));
        assert!(matches!(
            first(&mut response_rx, ended).await,
            First::Ended(Ok(Ok(())))
        ));
    }

    #[tokio::test]
    async fn a_handed_on_outcome_reaches_the_body() {
        assert!(matches!(delivered(Ok(Ok(()))).await, Ok(Ok(()))));
        let (tx, rx) = oneshot::channel::<Outcome>();
        drop(tx);
        assert!(delivered(rx.await).await.is_err());
    }
}
