//! Bodies crossing the host boundary: the request body with its size limit,
//! and the response body that ends cleanly only if the guest call succeeded.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep, sleep_until};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::fault::Fault;
use crate::metrics::AppMetrics;

/// A request body that fails once more than `limit` octets were read from it. Whether
/// the guest's response head is sent or replaced by a 413 is [`OverLimit`]'s to say.
pub struct LimitedBody<B>(Arc<Limited<B>>);

/// The host's view of a [`LimitedBody`] the guest owns.
pub struct OverLimit<B>(Arc<Limited<B>>);

struct Limited<B> {
    limit: u64,
    reading: Mutex<Reading<B>>,
    /// Counts what was read, once, when the body is gone.
    metrics: Arc<AppMetrics>,
}

impl<B> Drop for Limited<B> {
    fn drop(&mut self) {
        let read = self
            .reading
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .read;
        self.metrics.request_body_read(read);
    }
}

struct Reading<B> {
    inner: B,
    /// Octets handed to the guest so far.
    read: u64,
    /// A chunk would have taken `read` past the limit: the body failed.
    exceeded: bool,
}

impl<B> Limited<B> {
    fn lock(&self) -> MutexGuard<'_, Reading<B>> {
        crate::sync::lock(&self.reading)
    }
}

impl<B> LimitedBody<B> {
    /// `inner` limited to `limit` octets, and the host's view of it; what the
    /// guest read is counted in `metrics`.
    pub fn new(inner: B, limit: u64, metrics: Arc<AppMetrics>) -> (Self, OverLimit<B>) {
        let limited = Arc::new(Limited {
            limit,
            reading: Mutex::new(Reading {
                inner,
                read: 0,
                exceeded: false,
            }),
            metrics,
        });
        (LimitedBody(limited.clone()), OverLimit(limited))
    }
}

impl<B: Body> OverLimit<B> {
    /// Whether the body is over its limit: the guest read past it, or more has arrived
    /// than the limit leaves (the body's size hint counts what waits to be read). Asked
    /// when the guest's head comes, so a body found too large before the head left
    /// gets a 413 whether or not the guest has read that far: HTTP/2 and HTTP/3 hand
    /// the body over in pieces, and the head may be taken between two of them.
    pub fn get(&self) -> bool {
        let reading = self.0.lock();
        let arrived = reading
            .read
            .saturating_add(reading.inner.size_hint().lower());
        reading.exceeded || arrived > self.0.limit
    }
}

impl<B> Body for LimitedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let limit = self.0.limit;
        let mut reading = self.0.lock();
        let frame = match ready!(Pin::new(&mut reading.inner).poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(err)) => return Poll::Ready(Some(Err(err.into()))),
            Some(Ok(frame)) => frame,
        };
        if let Some(data) = frame.data_ref() {
            let read = reading.read + data.len() as u64;
            if read > limit {
                reading.exceeded = true;
                return Poll::Ready(Some(Err(wasmtime_wasi_http::Error::HttpRequestBodySize(
                    Some(limit),
                ))));
            }
            reading.read = read;
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.0.lock().inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.lock().inner.size_hint()
    }
}

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

/// The result of a guest call, sent when the call returns.
pub type Outcome = Result<(), Fault>;

/// What a guest call gave first.
pub(crate) enum First<R> {
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
pub(crate) type OutcomeReceived = Result<Outcome, oneshot::error::RecvError>;

/// Waits for the guest's response or the end of its call, the response first when both
/// are in. The call sends its response before its outcome, but runs on another worker:
/// it may send both between this select's look at the response (empty) and its look at
/// the outcome (there). So when the outcome comes first, the response is looked at once
/// more: a guest that answered is never taken for one that did not.
pub(crate) async fn first<R>(
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
pub(crate) fn delivered(outcome: OutcomeReceived) -> oneshot::Receiver<Outcome> {
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
    call: super::dispatch::CallGuard,
}

impl GuestBody {
    pub(crate) fn new(
        inner: HyperOutgoingBody,
        outcome: oneshot::Receiver<Outcome>,
        call: super::dispatch::CallGuard,
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
            // A client can cause one per request: within the app's log budget.
            self.call.log.info(format_args!(
                "response body dropped before the handler finished \
                 (client gone or stream reset); handler stopped"
            ));
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
}

/// What the protocol engines send back: a body wedge wrote itself or the
/// guest's streamed body (from a fresh instance, or a reused one).
pub enum ResponseBody {
    Full(Option<Bytes>),
    Guest(GuestBody),
    Reused(super::reuse::ReusedBody),
    /// A page with `wedge dev`'s build banner spliced in.
    Spliced(Box<super::dev_overlay::Spliced>),
    /// A body wedge streams itself (`wedge dev`'s build events).
    Stream(UnsyncBoxBody<Bytes, BodyError>),
}

impl ResponseBody {
    pub fn text(text: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Some(text.into()))
    }

    /// Ready once the response can no longer complete (its request's time is up, or
    /// its guest failed); asked by an engine whose stream is stalled on the peer's
    /// flow control, which then resets the stream.
    pub fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            ResponseBody::Full(_) | ResponseBody::Stream(_) => Poll::Pending,
            ResponseBody::Guest(body) => body.poll_cut_off(cx),
            ResponseBody::Reused(body) => body.poll_cut_off(cx),
            ResponseBody::Spliced(body) => body.poll_cut_off(cx),
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
            ResponseBody::Guest(body) => Pin::new(body).poll_frame(cx),
            ResponseBody::Reused(body) => Pin::new(body).poll_frame(cx),
            ResponseBody::Spliced(body) => Pin::new(&mut **body).poll_frame(cx),
            ResponseBody::Stream(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::Guest(body) => body.is_end_stream(),
            ResponseBody::Reused(body) => body.is_end_stream(),
            ResponseBody::Spliced(body) => body.is_end_stream(),
            ResponseBody::Stream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            ResponseBody::Full(None) => SizeHint::with_exact(0),
            ResponseBody::Guest(body) => body.inner.size_hint(),
            ResponseBody::Reused(body) => body.size_hint(),
            ResponseBody::Spliced(body) => body.size_hint(),
            ResponseBody::Stream(body) => body.size_hint(),
        }
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
