//! Our unidirectional streams (the control stream, the QPACK decoder stream): opened
//! when they first have octets to carry, written as quinn takes them, never finished
//! (RFC 9114 §6.2.1, RFC 9204 §4.2).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use quinn::{SendStream, StoppedError, VarInt};

type Opening = Pin<Box<dyn Future<Output = Result<SendStream, quinn::ConnectionError>> + Send>>;
type Stopped = Pin<Box<dyn Future<Output = Result<Option<VarInt>, StoppedError>> + Send>>;

/// The client closed one of our critical streams (STOP_SENDING): the connection must
/// close with H3_CLOSED_CRITICAL_STREAM (RFC 9114 §6.2.1, RFC 9204 §4.2).
#[derive(Debug)]
pub(super) struct ClosedCritical;

enum State {
    Unopened,
    Opening(Opening),
    /// Open, and watched for the client's STOP_SENDING.
    Open(SendStream, Stopped),
    /// The connection is closing: nothing staged can matter any more.
    Failed,
}

/// One of our unidirectional streams and the octets staged for it.
pub(super) struct OwnStream {
    state: State,
    /// Staged octets quinn has not taken yet.
    pub(super) out: Vec<u8>,
}

impl OwnStream {
    pub(super) fn new() -> Self {
        OwnStream {
            state: State::Unopened,
            out: Vec::new(),
        }
    }

    /// Whether everything staged was taken by quinn (or can no longer be sent).
    pub(super) fn is_flushed(&self) -> bool {
        self.out.is_empty()
    }

    /// Opens the stream if it has octets to carry and writes them; `Ok(true)` if
    /// anything moved. Once open, the stream is watched: the client stopping it is
    /// `Err(ClosedCritical)`.
    pub(super) fn poll_flush(
        &mut self,
        quic: &quinn::Connection,
        cx: &mut Context<'_>,
    ) -> Result<bool, ClosedCritical> {
        if let State::Unopened = self.state {
            if self.out.is_empty() {
                return Ok(false);
            }
            let quic = quic.clone();
            self.state = State::Opening(Box::pin(async move { quic.open_uni().await }));
        }
        if let State::Opening(opening) = &mut self.state {
            match opening.as_mut().poll(cx) {
                Poll::Pending => return Ok(false),
                Poll::Ready(Ok(send)) => {
                    let stopped = Box::pin(send.stopped());
                    self.state = State::Open(send, stopped);
                }
                Poll::Ready(Err(_)) => self.state = State::Failed,
            }
        }
        let State::Open(send, stopped) = &mut self.state else {
            self.out.clear();
            return Ok(false);
        };
        // Never finished by us, so the only way it ends is the client's STOP_SENDING
        // (or the connection going, which is not the client closing it).
        if let Poll::Ready(why) = stopped.as_mut().poll(cx) {
            self.state = State::Failed;
            self.out.clear();
            return match why {
                Ok(_) => Err(ClosedCritical),
                Err(_) => Ok(true),
            };
        }
        let mut progress = false;
        while !self.out.is_empty() {
            match Pin::new(&mut *send).poll_write(cx, &self.out) {
                Poll::Ready(Ok(n)) => {
                    self.out.drain(..n);
                    progress = true;
                }
                Poll::Ready(Err(err)) => {
                    self.state = State::Failed;
                    self.out.clear();
                    return match err {
                        quinn::WriteError::Stopped(_) => Err(ClosedCritical),
                        _ => Ok(true),
                    };
                }
                Poll::Pending => break,
            }
        }
        Ok(progress)
    }
}
