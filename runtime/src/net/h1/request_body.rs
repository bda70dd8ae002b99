//! HTTP/1.1 request bodies, read from hyper by a task of their own into the same inbox
//! HTTP/2 and HTTP/3 fill (DESIGN 4.1). Decoding the client's framing is that task's
//! work, not a guest's: a guest's read only takes what the inbox holds, so its CPU
//! meter never runs while wedge parses chunks, and small chunks reach it coalesced.
//! The task reads at most `READ_AHEAD` octets ahead of the guest; a request that
//! expects `100 Continue` is read only once the guest asked for its body (hyper sends
//! the `100` then), so a request refused before that never gets one.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::Notify;

use super::chunk_budget::ChunkBudget;
use crate::net::request_body::{BodyGone, ConnStats, Inbox, ReadAhead, RequestBody};

/// Octets read from the client ahead of what the guest took.
const READ_AHEAD: usize = 64 * 1024;

/// What one HTTP/1.1 connection's request bodies share: the client's chunk budget,
/// and the signal that it ran out.
pub(super) struct BodyReader {
    stats: Arc<ConnStats>,
    budget: Arc<Mutex<ChunkBudget>>,
    /// Told once the budget ran out: the connection is then closed.
    flooded: Arc<Notify>,
}

impl BodyReader {
    pub(super) fn new(chunk_budget: u32) -> Self {
        BodyReader {
            stats: Arc::new(ConnStats::default()),
            budget: Arc::new(Mutex::new(ChunkBudget::new(chunk_budget))),
            flooded: Arc::new(Notify::new()),
        }
    }

    /// Completes once a request body spent the connection's chunk budget.
    pub(super) fn flooded(&self) -> Arc<Notify> {
        self.flooded.clone()
    }

    /// The body the guest reads; a task reads `incoming` into it. A request that
    /// `expects_continue` is read once the guest asks for its body, and its response
    /// head must wait for [`FirstRead::settled`].
    pub(super) fn start(&self, incoming: Incoming, expects_continue: bool) -> Started {
        if hyper::body::Body::is_end_stream(&incoming) {
            return Started {
                body: RequestBody::empty(),
                first_read: None,
            };
        }
        let inbox = Inbox::new(self.stats.clone());
        let first_read = expects_continue.then(|| FirstRead {
            inbox: inbox.clone(),
            polled: Arc::new(Notify::new()),
        });
        tokio::spawn(pump(
            incoming,
            inbox.clone(),
            self.budget.clone(),
            self.flooded.clone(),
            first_read.as_ref().map(|first| first.polled.clone()),
        ));
        Started {
            body: RequestBody::new(inbox),
            first_read,
        }
    }
}

/// A request body on its way to the guest.
pub(super) struct Started {
    pub body: RequestBody,
    pub first_read: Option<FirstRead>,
}

/// For a request that expects `100 Continue`: hyper sends the `100` when the body is
/// first read, unless the response head was written before. A guest that asked for
/// its body and then answered at once must still get the body its client sends only
/// after the `100`, so the head waits until the body task has read.
pub(super) struct FirstRead {
    inbox: Arc<Inbox>,
    /// Told once the body task first read `incoming`, or stopped without.
    polled: Arc<Notify>,
}

impl FirstRead {
    /// Completes once the response head may be written.
    pub(super) async fn settled(self) {
        if self.inbox.asked() {
            self.polled.notified().await;
        }
    }
}

/// A notification given once: when told, or when dropped untold (the body task
/// stopped before its first read).
struct TellOnce(Option<Arc<Notify>>);

impl TellOnce {
    fn tell(&mut self) {
        if let Some(notify) = self.0.take() {
            notify.notify_one();
        }
    }
}

impl Drop for TellOnce {
    fn drop(&mut self) {
        self.tell();
    }
}

/// Moves `incoming` into `inbox` as the guest takes it, until the body ends, fails,
/// spends the budget, or its reader is gone (dropping `incoming` then tells hyper,
/// which stops reading the body and closes the connection after the response).
/// With `polled` (the request expects `100 Continue`), reads only once the guest
/// asked, and tells `polled` when it first did (or stopped without).
async fn pump(
    mut incoming: Incoming,
    inbox: Arc<Inbox>,
    budget: Arc<Mutex<ChunkBudget>>,
    flooded: Arc<Notify>,
    polled: Option<Arc<Notify>>,
) {
    let waits_for_ask = polled.is_some();
    let mut polled = TellOnce(polled);
    // The guest dropped its body: nobody reads on, however much room is left (else a
    // client trickling a body nobody wants, or going silent, holds the connection).
    let reader_gone = || Arc::strong_count(&inbox) == 1;
    let mut first_frame = true;
    loop {
        let wanted = poll_fn(|cx| match inbox.read_ahead(READ_AHEAD, cx.waker()) {
            _ if reader_gone() => Poll::Ready(false),
            ReadAhead { room: true, asked } if asked || !waits_for_ask => Poll::Ready(true),
            _ => Poll::Pending,
        })
        .await;
        if !wanted {
            return;
        }
        let mut frame = pin!(incoming.frame());
        let frame = poll_fn(|cx| {
            // Registered again, so the reader's drop wakes us while the client is silent.
            inbox.read_ahead(READ_AHEAD, cx.waker());
            if reader_gone() {
                return Poll::Ready(None);
            }
            let frame = frame.as_mut().poll(cx);
            // hyper has seen the read (and queued its `100 Continue`).
            polled.tell();
            frame.map(Some)
        })
        .await;
        let Some(frame) = frame else { return };
        let data = match frame {
            None => {
                inbox.push(Bytes::new(), true);
                return;
            }
            Some(Err(err)) => {
                tracing::debug!("http/1.1 request body failed: {err}");
                inbox.fail(BodyGone::PeerGone);
                return;
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers, parsed and bounded by hyper (16 KiB, 100 fields), judged by
                // the rules HTTP/2 and HTTP/3 trailers meet (hyper lets connection-specific
                // fields through); the body's end comes next.
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        let valid = trailers.iter().all(|(name, value)| {
                            wedge_proto::head::is_valid_trailer(
                                name.as_str().as_bytes(),
                                value.as_bytes(),
                            )
                        });
                        inbox.trailers(valid.then_some(trailers));
                    }
                    continue;
                }
            },
        };
        let within = crate::sync::lock(&budget).frame(data.len(), std::mem::take(&mut first_frame));
        if !within {
            tracing::debug!(
                "http/1.1 connection closed: its request body came in chunks too small \
                 for what they cost (h1_chunk_budget)"
            );
            inbox.fail(BodyGone::PeerGone);
            flooded.notify_one();
            return;
        }
        inbox.push(data, false);
    }
}
