//! An HTTP/1.1 connection whose client stopped reading (DESIGN 4.6: a response dies
//! with its request, however slowly the peer reads).
//!
//! hyper polls a response body only while it can write: while its write buffer waits
//! on the socket it polls nothing that would show the body was cut off meanwhile (its
//! wall time up, its guest failed), and it has no write timeout. A client that sent a
//! request, or a pipeline of them, and never read so held its connection, its
//! buffers and, on a reused instance, the request's slot, until it read or left.
//! The HTTP/2 and HTTP/3 engines ask a stream stalled on flow control
//! [`ResponseStream::poll_cut_off`] and drop a peer that takes nothing for their
//! write timeout; here the connection does both while a write to the socket waits,
//! and the socket is then reset (a FIN would leave the kernel holding what waits for
//! the client: `tcp_socket`).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep, sleep_until};

use crate::net::handler::ResponseStream;
use crate::net::tcp_socket::ResetOnClose;
use crate::sync::lock;

/// Why a stalled connection is given up.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stalled {
    /// The response waiting on the socket was cut off.
    CutOff,
    /// The client took nothing written for the write timeout.
    WriteTimeout,
}

/// What the socket, the response bodies and the watch share.
struct Shared<B> {
    /// The latest write (or flush) to the socket found it full.
    write_waits: AtomicBool,
    /// Octets the socket has taken: progress, however slow.
    written: AtomicU64,
    /// The connection was given up: its socket is reset when dropped.
    given_up: AtomicBool,
    /// The body hyper is sending, for as long as hyper holds it.
    response: Mutex<Weak<Mutex<B>>>,
}

/// The connection's side: watches while a write waits.
pub(super) struct StallWatch<B> {
    shared: Arc<Shared<B>>,
    write_timeout: Duration,
    /// Since when the socket has taken nothing, and what it had taken by then.
    stuck: Option<(Instant, u64)>,
    timer: Option<Pin<Box<Sleep>>>,
}

/// The requests' side: hands the watch each response body.
pub(super) struct Responses<B> {
    shared: Arc<Shared<B>>,
}

impl<B> Clone for Responses<B> {
    fn clone(&self) -> Self {
        Responses {
            shared: self.shared.clone(),
        }
    }
}

impl<B: ResponseStream> Responses<B> {
    /// `body`, as hyper sends it: the latest response, which the watch asks.
    pub(super) fn watched(&self, body: B) -> WatchedBody<B> {
        let body = Arc::new(Mutex::new(body));
        *lock(&self.shared.response) = Arc::downgrade(&body);
        WatchedBody { body }
    }
}

impl<B: ResponseStream> StallWatch<B> {
    /// A watch that gives a connection up once its client took nothing written for
    /// `write_timeout`, or once the response it does not take is cut off.
    pub(super) fn new(write_timeout: Duration) -> (Self, Responses<B>) {
        let shared = Arc::new(Shared {
            write_waits: AtomicBool::new(false),
            written: AtomicU64::new(0),
            given_up: AtomicBool::new(false),
            response: Mutex::new(Weak::new()),
        });
        let responses = Responses {
            shared: shared.clone(),
        };
        let watch = StallWatch {
            shared,
            write_timeout,
            stuck: None,
            timer: None,
        };
        (watch, responses)
    }

    /// `io`, telling the watch whether its writes wait on the peer.
    pub(super) fn io<IO: ResetOnClose>(&self, io: IO) -> WatchedIo<IO, B> {
        WatchedIo {
            io,
            shared: self.shared.clone(),
        }
    }

    /// Ready once the connection is given up (its socket is then reset when dropped).
    /// Must be polled after the connection in each turn of its task: only the
    /// connection's poll changes what this looks at.
    pub(super) fn poll_stalled(&mut self, cx: &mut Context<'_>) -> Poll<Stalled> {
        let stalled = self.stalled(cx);
        if stalled.is_ready() {
            self.shared.given_up.store(true, Ordering::Relaxed);
        }
        stalled
    }

    fn stalled(&mut self, cx: &mut Context<'_>) -> Poll<Stalled> {
        if !self.shared.write_waits.load(Ordering::Relaxed) {
            self.stuck = None;
            return Poll::Pending;
        }
        let response = lock(&self.shared.response).upgrade();
        if let Some(body) = response
            && lock(&body).poll_cut_off(cx).is_ready()
        {
            return Poll::Ready(Stalled::CutOff);
        }
        let written = self.shared.written.load(Ordering::Relaxed);
        let since = match self.stuck {
            Some((since, at)) if at == written => since,
            _ => {
                let now = Instant::now();
                self.stuck = Some((now, written));
                now
            }
        };
        let deadline = since + self.write_timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        timer.as_mut().poll(cx).map(|()| Stalled::WriteTimeout)
    }
}

/// A connection's socket, telling its [`StallWatch`] whether writes wait.
pub(super) struct WatchedIo<IO: ResetOnClose, B> {
    io: IO,
    shared: Arc<Shared<B>>,
}

impl<IO: ResetOnClose, B> Drop for WatchedIo<IO, B> {
    fn drop(&mut self) {
        if self.shared.given_up.load(Ordering::Relaxed) {
            self.io.reset_on_close();
        }
    }
}

impl<IO: ResetOnClose, B> WatchedIo<IO, B> {
    fn noted<T>(
        &self,
        poll: Poll<io::Result<T>>,
        taken: impl Fn(&T) -> usize,
    ) -> Poll<io::Result<T>> {
        let shared = &self.shared;
        shared
            .write_waits
            .store(poll.is_pending(), Ordering::Relaxed);
        if let Poll::Ready(Ok(done)) = &poll {
            shared
                .written
                .fetch_add(taken(done) as u64, Ordering::Relaxed);
        }
        poll
    }
}

impl<IO: AsyncRead + ResetOnClose + Unpin, B> AsyncRead for WatchedIo<IO, B> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + ResetOnClose + Unpin, B> AsyncWrite for WatchedIo<IO, B> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        this.noted(poll, |n| *n)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.noted(poll, |n| *n)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_flush(cx);
        this.noted(poll, |()| 0)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // TLS writes its close_notify here, which can wait like any write.
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_shutdown(cx);
        this.noted(poll, |()| 0)
    }
}

/// A response body shared with the connection's [`StallWatch`].
pub(super) struct WatchedBody<B> {
    body: Arc<Mutex<B>>,
}

impl<B: ResponseStream> Body for WatchedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut *lock(&self.body)).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        lock(&self.body).is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        lock(&self.body).size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use bytes::Bytes;
    use tokio::io::AsyncWriteExt;

    use super::*;

    impl ResetOnClose for tokio::io::DuplexStream {
        fn reset_on_close(&self) {}
    }

    /// A body that is cut off once `cut` is set.
    struct Cuttable {
        cut: Arc<AtomicBool>,
    }

    impl Body for Cuttable {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    impl ResponseStream for Cuttable {
        fn poll_cut_off(&mut self, _: &mut Context<'_>) -> Poll<()> {
            match self.cut.load(Ordering::Relaxed) {
                true => Poll::Ready(()),
                false => Poll::Pending,
            }
        }
    }

    const AN_HOUR: Duration = Duration::from_secs(3600);

    #[tokio::test]
    async fn only_a_response_cut_off_while_a_write_waits_gives_the_connection_up() {
        let (mut watch, responses) = StallWatch::new(AN_HOUR);
        let cut = Arc::new(AtomicBool::new(true));
        let mut cx = Context::from_waker(Waker::noop());
        // A socket that takes 16 octets and then waits for a reader that never comes.
        let (near, _far) = tokio::io::duplex(16);
        let mut io = watch.io(near);

        let body = responses.watched(Cuttable { cut: cut.clone() });
        assert!(
            watch.poll_stalled(&mut cx).is_pending(),
            "cut off, but nothing waits"
        );
        io.write_all(&[0; 16]).await.unwrap();
        assert!(watch.poll_stalled(&mut cx).is_pending(), "written: no wait");
        let mut write = std::pin::pin!(io.write_all(b"more"));
        assert!(write.as_mut().poll(&mut cx).is_pending());
        cut.store(false, Ordering::Relaxed);
        assert!(watch.poll_stalled(&mut cx).is_pending(), "not cut off");
        cut.store(true, Ordering::Relaxed);
        drop(body);
        assert!(
            watch.poll_stalled(&mut cx).is_pending(),
            "a response hyper let go of is done with"
        );
        assert!(!watch.shared.given_up.load(Ordering::Relaxed));
        let _body = responses.watched(Cuttable { cut });
        assert_eq!(watch.poll_stalled(&mut cx), Poll::Ready(Stalled::CutOff));
        assert!(watch.shared.given_up.load(Ordering::Relaxed), "to be reset");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_nothing_for_the_write_timeout_is_given_up() {
        let timeout = Duration::from_secs(30);
        let (mut watch, _) = StallWatch::<Cuttable>::new(timeout);
        let mut cx = Context::from_waker(Waker::noop());
        let (near, mut far) = tokio::io::duplex(16);
        let mut io = watch.io(near);
        let mut write = std::pin::pin!(io.write_all(&[0; 64]));
        assert!(write.as_mut().poll(&mut cx).is_pending());
        assert!(watch.poll_stalled(&mut cx).is_pending());
        // Some taken just before the limit: the wait starts again from there.
        tokio::time::advance(timeout - Duration::from_secs(1)).await;
        assert!(watch.poll_stalled(&mut cx).is_pending());
        let mut taken = [0; 8];
        tokio::io::AsyncReadExt::read_exact(&mut far, &mut taken)
            .await
            .unwrap();
        assert!(write.as_mut().poll(&mut cx).is_pending());
        assert!(watch.poll_stalled(&mut cx).is_pending());
        tokio::time::advance(timeout - Duration::from_secs(1)).await;
        assert!(watch.poll_stalled(&mut cx).is_pending(), "progress counts");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            watch.poll_stalled(&mut cx),
            Poll::Ready(Stalled::WriteTimeout)
        );
        assert!(watch.shared.given_up.load(Ordering::Relaxed));
    }
}
