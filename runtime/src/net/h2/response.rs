//! A response on its way out (DESIGN 4.1): the head as soon as the handler answers, then
//! the body, taken from the handler only while the stream and connection windows are
//! open. Between the body and the wire sits one chunk: with the wasm host's own one-chunk
//! buffer that is about two DATA frames per stream, whatever the guest does.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use wedge_proto::h2::{Connection, ErrorCode, StreamId};

use super::write_queue::{Staged, TurnWaiter, WriteQueue};
use crate::log_text::{ERROR_TEXT, Shown};
use crate::net::handler::ResponseStream;
use crate::net::response_fields::fields;

/// Stages the response head; with `end` it is the whole response.
pub(super) fn send_head(
    conn: &mut Connection,
    id: StreamId,
    parts: &http::response::Parts,
    end: bool,
    out: &mut Vec<u8>,
) {
    conn.send_head(id, parts.status.as_u16(), fields(&parts.headers), end, out);
}

/// How far a body got this pass.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Progress {
    /// Waiting: on the handler, on flow credit, or on the next turn.
    Parked,
    /// The response ended (END_STREAM or a reset went out).
    Done,
}

/// A response body and the chunk taken from it but not yet all sent.
pub(super) struct Outgoing<B> {
    body: B,
    pending: Bytes,
    pub(super) waiter: TurnWaiter,
    /// The stream's last DATA frame: while it waits unwritten, the body's end goes on it.
    last_data: Option<Staged>,
}

impl<B: ResponseStream> Outgoing<B> {
    pub(super) fn new(body: B) -> Self {
        Outgoing {
            body,
            pending: Bytes::new(),
            waiter: TurnWaiter::default(),
            last_data: None,
        }
    }

    /// Whether a chunk taken from the body waits to be staged: on flow credit or on the
    /// next turn, which only the connection tells.
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether the body waits on flow credit: a zero window, however much is pending.
    pub(super) fn is_stalled(&self, conn: &mut Connection, id: StreamId) -> bool {
        conn.send_credit(id) == 0
    }

    /// A chunk waits on flow credit: parked, unless the request is over by now (its
    /// wall time, its guest's failure), which resets the stream however slowly the
    /// peer grants credit.
    fn unless_cut_off(
        &mut self,
        conn: &mut Connection,
        id: StreamId,
        queue: &mut WriteQueue,
        cx: &mut Context<'_>,
    ) -> Progress {
        if self.body.poll_cut_off(cx).is_pending() {
            return Progress::Parked;
        }
        tracing::debug!(
            "stream {}: the request ended while its response waited on credit",
            id.get()
        );
        conn.reset(id, ErrorCode::InternalError, queue.stage());
        Progress::Done
    }

    /// Moves as much of the body as credit and the turn allow into the write queue.
    pub(super) fn pump(
        &mut self,
        conn: &mut Connection,
        id: StreamId,
        queue: &mut WriteQueue,
        bound: usize,
        cx: &mut Context<'_>,
    ) -> Progress {
        loop {
            let allowance = queue.allowance(&self.waiter, bound);
            let credit = conn.send_credit(id).min(allowance);
            if credit == 0 {
                if !conn.is_sending(id) {
                    return Progress::Done;
                }
                if !self.pending.is_empty() {
                    return self.unless_cut_off(conn, id, queue, cx);
                }
                // Nothing pending: the body is still looked at, so that its end (or its
                // trailers), which needs no credit, goes out now. A chunk it gives waits
                // in `pending`, the one chunk a stream may hold.
            }
            if !self.pending.is_empty() {
                let n = credit.min(self.pending.len());
                let end = n == self.pending.len() && self.body.is_end_stream();
                self.last_data = Some(queue.next_frame());
                conn.send_data(id, &self.pending[..n], end, queue.stage());
                queue.staged(&mut self.waiter, n);
                self.pending.advance(n);
                if end {
                    return Progress::Done;
                }
                continue;
            }
            // Only now, with credit or nothing pending, is the next chunk taken (DESIGN 4.1).
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Pending => return Progress::Parked,
                Poll::Ready(None) => return self.end(conn, id, queue),
                Poll::Ready(Some(Err(err))) => {
                    // The error may carry a guest's text, of any length.
                    let err = Shown(&err, ERROR_TEXT);
                    tracing::debug!("stream {}: response body failed: {err}", id.get());
                    conn.reset(id, ErrorCode::InternalError, queue.stage());
                    return Progress::Done;
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.pending = data,
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            conn.send_trailers(id, fields(&trailers), queue.stage());
                        }
                        return Progress::Done;
                    }
                },
            }
            if self.pending.is_empty() && self.body.is_end_stream() {
                return self.end(conn, id, queue);
            }
        }
    }

    /// The body ended after its last chunk was staged (a guest's body learns its end
    /// only once the call returns): END_STREAM goes on that chunk's DATA frame if no
    /// write has taken it yet, else on an empty DATA frame of its own.
    fn end(&mut self, conn: &mut Connection, id: StreamId, queue: &mut WriteQueue) -> Progress {
        let unwritten = self.last_data.take().and_then(|at| queue.unwritten(at));
        let ended = unwritten.is_some_and(|(stage, at)| conn.end_stream_on_staged(id, stage, at));
        if !ended {
            conn.send_data(id, &[], true, queue.stage());
        }
        Progress::Done
    }
}
