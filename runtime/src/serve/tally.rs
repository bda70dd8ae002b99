//! What is known of one request by the time its response is done: app, method, path,
//! status, body bytes sent, duration, protocol and how the body ended. Kept only
//! when something reads it (the access log, the metrics); otherwise a response
//! carries nothing.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Version, header, response};
use http_body::{Body, Frame, SizeHint};
use tokio::time::Instant;

use super::access_log::{AccessLog, Ending, Entry};
use crate::host::{BodyError, ResponseBody};
use crate::metrics::{AppMetrics, Metrics, Open, Protocol};
use crate::net::handler::ResponseStream;
use crate::net::has_content;
use crate::tenancy::{Serving, Tenant};

/// One request's record, finished when its response body is done or dropped.
pub struct Tally {
    log: AccessLog,
    started: Instant,
    method: Method,
    target: String,
    version: Version,
    app: Option<Arc<Tenant>>,
    /// With metrics on: the request counted as a stream open until it is done…
    stream: Option<Open>,
    /// …and, once routed to an app, counted in its series.
    app_metrics: Option<Arc<AppMetrics>>,
    status: u16,
    bytes: u64,
    ending: Ending,
}

impl Tally {
    /// Starts a record for `request` if `log` or `metrics` is on.
    pub fn begin<B>(
        log: AccessLog,
        metrics: Option<&Arc<Metrics>>,
        request: &Request<B>,
    ) -> Option<Box<Tally>> {
        (log.is_on() || metrics.is_some()).then(|| {
            // Only the log shows the path: metrics alone copy nothing of the request.
            // The query stays out of logs: it often carries tokens.
            let target = match log.is_on() {
                true => request.uri().path(),
                false => "",
            };
            Box::new(Tally {
                log,
                started: Instant::now(),
                method: request.method().clone(),
                target: target.to_string(),
                version: request.version(),
                app: None,
                stream: metrics.map(|m| m.stream(Protocol::of(request.version()))),
                app_metrics: None,
                status: 0,
                bytes: 0,
                ending: Ending::Dropped,
            })
        })
    }

    /// The app the request was routed to, and the version that serves it.
    pub fn set_app(&mut self, app: &Arc<Tenant>, serving: &Serving) {
        self.app = Some(app.clone());
        if let (Some(_), Serving::App(app)) = (&self.stream, serving) {
            self.app_metrics = Some(app.metrics.clone());
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        let elapsed = self.started.elapsed();
        if let Some(metrics) = &self.app_metrics {
            let protocol = Protocol::of(self.version);
            metrics.request_done(protocol, self.status, self.bytes, elapsed);
        }
        self.log.record(&Entry {
            app: self.app.as_deref().map(Tenant::name),
            method: &self.method,
            path: &self.target,
            status: self.status,
            bytes: self.bytes,
            elapsed,
            version: self.version,
            ending: self.ending,
        });
    }
}

/// Requests in this process from their arrival at a frontend until their response
/// body is done or dropped, all workers together: what a forced exit cuts off.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Counts one request as in flight until dropped.
pub struct InFlight(());

impl InFlight {
    pub fn begin() -> InFlight {
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        InFlight(())
    }

    /// Requests in flight now.
    pub fn count() -> usize {
        IN_FLIGHT.load(Ordering::Relaxed)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that counts what it sends into its request's tally.
pub struct TalliedBody {
    inner: ResponseBody,
    tally: Option<Box<Tally>>,
    /// Its request, counted in flight until the body is done.
    in_flight: Option<InFlight>,
    /// The body's length as the head declares it (`content-length`, or the body's
    /// exact size): once that much is sent, the body is complete whether or not the
    /// connection polls for its end (HTTP/1.1 drops it after the last byte).
    declared: Option<u64>,
}

impl TalliedBody {
    /// The body of the response with `head`, counted into `tally`.
    pub fn new(inner: ResponseBody, head: &response::Parts, mut tally: Option<Box<Tally>>) -> Self {
        let declared = head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|length| length.to_str().ok()?.parse().ok())
            .or(inner.size_hint().exact());
        if let Some(tally) = &mut tally {
            tally.status = head.status.as_u16();
            // Nothing to send: the response is its head (RFC 9110 §6.4.1).
            let bodiless = !has_content(tally.method == Method::HEAD, head.status)
                || head.status.is_informational();
            if bodiless || declared == Some(0) || inner.is_end_stream() {
                tally.ending = Ending::Complete;
            }
        }
        TalliedBody {
            inner,
            tally,
            in_flight: None,
            declared,
        }
    }

    /// The same body, its request counted in flight until it is done or dropped.
    pub fn in_flight(self, request: InFlight) -> Self {
        TalliedBody {
            in_flight: Some(request),
            ..self
        }
    }
}

impl Body for TalliedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let (Some(tally), Poll::Ready(frame)) = (&mut this.tally, &polled) {
            match frame {
                Some(Ok(frame)) => {
                    tally.bytes += frame.data_ref().map_or(0, |d| d.len() as u64);
                    if this.inner.is_end_stream() || this.declared == Some(tally.bytes) {
                        tally.ending = Ending::Complete;
                    }
                }
                Some(Err(_)) => tally.ending = Ending::Aborted,
                None => tally.ending = Ending::Complete,
            }
        }
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            this.in_flight = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl ResponseStream for TalliedBody {
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let cut_off = self.inner.poll_cut_off(cx);
        if let (Some(tally), Poll::Ready(())) = (&mut self.tally, cut_off) {
            tally.ending = Ending::Aborted;
        }
        cut_off
    }
}
