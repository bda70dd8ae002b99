//! Our unidirectional streams (the control stream, the QPACK decoder stream): opened
//! when they first have octets to carry, written as quinn takes them, never finished
//! (RFC 9114 §6.2.1, RFC 9204 §4.2).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use quinn::SendStream;

type Opening = Pin<Box<dyn Future<Output = Result<SendStream, quinn::ConnectionError>> + Send>>;

enum State {
    Unopened,
    Opening(Opening),
    Open(SendStream),
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

    /// Opens the stream if it has octets to carry and writes them; `true` if anything
    /// moved.
    pub(super) fn poll_flush(&mut self, quic: &quinn::Connection, cx: &mut Context<'_>) -> bool {
        if self.out.is_empty() {
            return false;
        }
        if let State::Unopened = self.state {
            let quic = quic.clone();
            self.state = State::Opening(Box::pin(async move { quic.open_uni().await }));
        }
        if let State::Opening(opening) = &mut self.state {
            match opening.as_mut().poll(cx) {
                Poll::Pending => return false,
                Poll::Ready(Ok(send)) => self.state = State::Open(send),
                Poll::Ready(Err(_)) => self.state = State::Failed,
            }
        }
        let State::Open(send) = &mut self.state else {
            self.out.clear();
            return false;
        };
        let mut progress = false;
        while !self.out.is_empty() {
            match Pin::new(&mut *send).poll_write(cx, &self.out) {
                Poll::Ready(Ok(n)) => {
                    self.out.drain(..n);
                    progress = true;
                }
                Poll::Ready(Err(_)) => {
                    self.state = State::Failed;
                    self.out.clear();
                    return true;
                }
                Poll::Pending => break,
            }
        }
        progress
    }
}
