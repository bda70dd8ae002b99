//! The request body as the guest reads it: any body whose errors are wasi-http's,
//! within the app's size limit.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::metrics::AppMetrics;

/// A request body the host can hand a guest: its errors are wasi-http's.
pub trait IncomingBody:
    Body<Data = Bytes, Error: Into<wasmtime_wasi_http::Error>> + Send + Unpin + 'static
{
}

impl<B> IncomingBody for B where
    B: Body<Data = Bytes, Error: Into<wasmtime_wasi_http::Error>> + Send + Unpin + 'static
{
}

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

impl<B: IncomingBody> Body for LimitedBody<B> {
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
