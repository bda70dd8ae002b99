//! A WAGI program's stdout: its CGI response. The head is read as the program writes
//! it and handed on once its empty line arrives; from then on what the program writes
//! is the body, handed to the client as it is written through a small queue. The
//! program waits (its `check-write` is 0, its pollable parks) while the queue holds
//! `cgi_output_buffer` bytes the client has not taken, and a write past what
//! `check-write` permitted traps it: memory per request is bounded whatever the
//! program writes (and the head by `max_cgi_head`), also after the program ended.
//! Output that is not a CGI response traps the program (a [`MalformedCgi`] fault,
//! `502`).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::io::AsyncWrite;
use tokio::sync::oneshot;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

use super::cgi_head::{self, CgiHead, MalformedCgi};

/// How much of a program's output wedge holds at most.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputBounds {
    /// The longest head before its empty line (`max_cgi_head`).
    pub max_head: usize,
    /// Body bytes written and not yet taken by the client (`cgi_output_buffer`):
    /// `check-write` permits no more, and a write past it traps.
    pub queue: usize,
}

/// The program's stdout (every stream it opens on it shares one state).
#[derive(Clone)]
pub(crate) struct CgiStdout(Arc<Mutex<Output>>);

/// The response the program writes: its head once parsed, then its body.
pub(crate) struct CgiResponse {
    pub head: oneshot::Receiver<CgiHead>,
    pub body: CgiBody,
}

struct Output {
    /// The head so far, until its empty line.
    head: Option<Vec<u8>>,
    /// Where the head is sent once parsed.
    head_tx: Option<oneshot::Sender<CgiHead>>,
    /// A `HEAD` request's, or a `204`/`304` response's: its `Content-Length` describes
    /// a body it does not send, and a body it writes anyway is dropped (as CGI servers
    /// do), not queued for a client that takes none (HTTP/2 and HTTP/3 clients reset
    /// a stream whose `204` has a body).
    bodiless: bool,
    bounds: OutputBounds,
    /// The body's length as the head declared it (not for a `HEAD` request).
    content_length: Option<u64>,
    /// Body bytes written so far.
    written: u64,
    queue: VecDeque<Bytes>,
    queued: usize,
    /// The program ended: the body ends once the queue is taken.
    ended: bool,
    /// The client's side is gone: writes fail.
    reader_gone: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl CgiStdout {
    /// A stdout for a program answering a request (`head_request`: a `HEAD`, whose
    /// `Content-Length` describes a body it does not send), and the response it writes.
    pub(crate) fn new(head_request: bool, bounds: OutputBounds) -> (CgiStdout, CgiResponse) {
        let (head_tx, head) = oneshot::channel();
        let output = Arc::new(Mutex::new(Output {
            head: Some(Vec::new()),
            head_tx: Some(head_tx),
            bodiless: head_request,
            bounds,
            content_length: None,
            written: 0,
            queue: VecDeque::new(),
            queued: 0,
            ended: false,
            reader_gone: false,
            reader: None,
            writer: None,
        }));
        let body = CgiBody(output.clone());
        (CgiStdout(output), CgiResponse { head, body })
    }

    fn lock(&self) -> MutexGuard<'_, Output> {
        crate::sync::lock(&self.0)
    }

    /// The program ended: its body ends with what it wrote. Its output was not a
    /// whole CGI response if the head never ended, or the body fell short of its
    /// `Content-Length`.
    pub(crate) fn end(&self) -> Result<(), MalformedCgi> {
        let mut output = self.lock();
        output.ended = true;
        output.head_tx = None;
        if let Some(waker) = output.reader.take() {
            waker.wake();
        }
        match (&output.head, output.content_length) {
            (Some(head), _) if head.is_empty() => Err(MalformedCgi(
                "the program wrote no CGI response on stdout".into(),
            )),
            (Some(_), _) => Err(MalformedCgi(
                "the program ended before its CGI response head did (no empty line)".into(),
            )),
            (None, Some(length)) if output.written < length => Err(MalformedCgi(format!(
                "the program wrote {} body bytes of the {length} its Content-Length said",
                output.written
            ))),
            (None, _) => Ok(()),
        }
    }
}

impl Output {
    /// How much the program may write now.
    fn permit(&self) -> Result<usize, StreamError> {
        if self.reader_gone {
            return Err(StreamError::Closed);
        }
        Ok(self.bounds.queue.saturating_sub(self.queued))
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.reader_gone || self.queued < self.bounds.queue {
            return Poll::Ready(());
        }
        self.writer = Some(cx.waker().clone());
        Poll::Pending
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        let permit = self.permit()?;
        if bytes.len() > permit {
            // WASI lets a stream refuse a write past `check-write`; the queue bounds
            // what is held for the client only if it does (a component may write
            // without asking; the preview 1 adapter and standard libraries ask).
            return Err(StreamError::Trap(wasmtime::format_err!(
                "the program wrote {} bytes to stdout where check-write permitted {permit}",
                bytes.len()
            )));
        }
        let body = match &mut self.head {
            None => bytes,
            Some(head) => {
                let searched = head.len();
                head.extend_from_slice(bytes);
                // Past the limit whether its empty line is still to come or came in
                // the write that took it there.
                match cgi_head::head_end(head, searched) {
                    None if head.len() <= self.bounds.max_head => return Ok(()),
                    Some(end) if end <= self.bounds.max_head => {
                        let head = self.head.take().unwrap_or_default();
                        let parsed = cgi_head::parse(&head[..end]).map_err(trap)?;
                        self.bodiless |= matches!(parsed.status.as_u16(), 204 | 304);
                        if !self.bodiless {
                            self.content_length = parsed.content_length;
                        }
                        if let Some(head_tx) = self.head_tx.take() {
                            let _ = head_tx.send(parsed);
                        }
                        // What followed the empty line in this write is body.
                        &bytes[bytes.len() - (head.len() - end)..]
                    }
                    _ => {
                        return Err(trap(MalformedCgi(format!(
                            "the CGI response head is longer than {} bytes (max_cgi_head)",
                            self.bounds.max_head
                        ))));
                    }
                }
            }
        };
        if body.is_empty() || self.bodiless {
            return Ok(());
        }
        self.written = self.written.saturating_add(body.len() as u64);
        if let Some(length) = self.content_length
            && self.written > length
        {
            return Err(trap(MalformedCgi(format!(
                "the program wrote more body than its Content-Length ({length})"
            ))));
        }
        self.queued += body.len();
        self.queue.push_back(Bytes::copy_from_slice(body));
        if let Some(waker) = self.reader.take() {
            waker.wake();
        }
        Ok(())
    }
}

/// A fault of the program's output: it traps the program in the write that made it.
fn trap(malformed: MalformedCgi) -> StreamError {
    StreamError::Trap(malformed.into())
}

impl IsTerminal for CgiStdout {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CgiStdout {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for CgiStdout {
    async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.lock().poll_ready(cx)).await
    }
}

impl OutputStream for CgiStdout {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.lock().write(&bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        // Written bytes are the client's to take already.
        self.lock().permit().map(drop)
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.lock().permit()
    }
}

impl AsyncWrite for CgiStdout {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut output = self.lock();
        if output.poll_ready(cx).is_pending() {
            return Poll::Pending;
        }
        let io_error = |err: StreamError| std::io::Error::other(err.to_string());
        let room = output.permit().map_err(io_error)?.max(1);
        let n = buf.len().min(room);
        output.write(&buf[..n]).map_err(io_error)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The response body: what the program writes after its head, as it writes it.
/// Dropping it (the client went away) makes the program's next write fail.
pub(crate) struct CgiBody(Arc<Mutex<Output>>);

impl Body for CgiBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut output = crate::sync::lock(&self.0);
        if let Some(chunk) = output.queue.pop_front() {
            output.queued -= chunk.len();
            if let Some(waker) = output.writer.take() {
                waker.wake();
            }
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if output.ended {
            return Poll::Ready(None);
        }
        output.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        let output = crate::sync::lock(&self.0);
        output.ended && output.queue.is_empty()
    }
}

impl Drop for CgiBody {
    fn drop(&mut self) {
        let mut output = crate::sync::lock(&self.0);
        output.reader_gone = true;
        if let Some(waker) = output.writer.take() {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Smaller than the defaults, so that the tests show the bounds are the ones given.
    const BOUNDS: OutputBounds = OutputBounds {
        max_head: 1024,
        queue: 4096,
    };

    fn poll_body(body: &mut CgiBody) -> Poll<Option<Bytes>> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(body)
            .poll_frame(&mut cx)
            .map(|frame| frame.map(|f| f.unwrap().into_data().unwrap()))
    }

    #[test]
    fn the_head_is_handed_on_at_its_empty_line_and_the_rest_is_body_as_written() {
        let (mut stdout, mut response) = CgiStdout::new(false, BOUNDS);
        stdout
            .write(Bytes::from_static(b"Content-Type: text/plain\r\n"))
            .unwrap();
        assert!(response.head.try_recv().is_err(), "no head before its end");
        stdout.write(Bytes::from_static(b"\r\nhello")).unwrap();
        let head = response.head.try_recv().unwrap();
        assert_eq!(head.headers["content-type"], "text/plain");
        assert_eq!(
            poll_body(&mut response.body),
            Poll::Ready(Some(Bytes::from("hello")))
        );
        assert_eq!(poll_body(&mut response.body), Poll::Pending);
        stdout.write(Bytes::from_static(b" world")).unwrap();
        assert_eq!(
            poll_body(&mut response.body),
            Poll::Ready(Some(Bytes::from(" world")))
        );
        stdout.end().unwrap();
        assert_eq!(poll_body(&mut response.body), Poll::Ready(None));
    }

    #[test]
    fn the_program_waits_while_the_queue_is_full_and_fails_once_the_client_is_gone() {
        let (mut stdout, mut response) = CgiStdout::new(false, BOUNDS);
        stdout
            .write(Bytes::from_static(b"Status: 200\n\n"))
            .unwrap();
        assert_eq!(stdout.check_write().unwrap(), BOUNDS.queue);
        stdout.write(Bytes::from(vec![b'x'; BOUNDS.queue])).unwrap();
        assert_eq!(
            stdout.check_write().unwrap(),
            0,
            "a full queue permits nothing"
        );
        let err = stdout.write(Bytes::from_static(b"x")).unwrap_err();
        assert!(
            matches!(&err, StreamError::Trap(e) if e.to_string().contains("check-write permitted 0")),
            "a write it did not permit traps: {err:?}"
        );
        let mut cx = Context::from_waker(Waker::noop());
        assert!(stdout.lock().poll_ready(&mut cx).is_pending());
        assert!(matches!(
            poll_body(&mut response.body),
            Poll::Ready(Some(_))
        ));
        assert_eq!(
            stdout.check_write().unwrap(),
            BOUNDS.queue,
            "taken: room again"
        );
        drop(response);
        assert!(matches!(stdout.check_write(), Err(StreamError::Closed)));
        assert!(matches!(
            stdout.write(Bytes::from_static(b"more")),
            Err(StreamError::Closed)
        ));
    }

    #[test]
    fn output_that_is_no_cgi_response_traps_or_fails_the_end() {
        let malformed = |err: StreamError| match err {
            StreamError::Trap(err) => err.downcast::<MalformedCgi>().unwrap().0,
            other => panic!("not a trap: {other:?}"),
        };
        let (mut stdout, _response) = CgiStdout::new(false, BOUNDS);
        let err = stdout.write(Bytes::from_static(b"<html>\n\n")).unwrap_err();
        assert!(malformed(err).contains("not a `Name: value` field"));

        let (mut stdout, _response) = CgiStdout::new(false, BOUNDS);
        let err = stdout
            .write(Bytes::from(vec![b'x'; BOUNDS.max_head + 1]))
            .unwrap_err();
        assert!(malformed(err).contains("longer than 1024 bytes (max_cgi_head)"));

        // Its empty line in the same write does not make a long head shorter.
        let long = format!("Content-Type: {}\n\nbody", "a".repeat(BOUNDS.max_head));
        let (mut stdout, _response) = CgiStdout::new(false, BOUNDS);
        let err = stdout.write(Bytes::from(long)).unwrap_err();
        assert!(malformed(err).contains("longer than 1024 bytes (max_cgi_head)"));
        // A head of the limit exactly, then body, is one.
        let exact = format!("Content-Type: {}\n\nbody", "a".repeat(BOUNDS.max_head - 16));
        let (mut stdout, mut response) = CgiStdout::new(false, BOUNDS);
        stdout.write(Bytes::from(exact)).unwrap();
        assert!(response.head.try_recv().is_ok());

        let (stdout, _response) = CgiStdout::new(false, BOUNDS);
        assert!(
            stdout
                .end()
                .unwrap_err()
                .0
                .contains("wrote no CGI response")
        );

        let (mut stdout, _response) = CgiStdout::new(false, BOUNDS);
        stdout.write(Bytes::from_static(b"Status: 200\n")).unwrap();
        assert!(stdout.end().unwrap_err().0.contains("no empty line"));
    }

    #[test]
    fn the_body_is_held_to_its_content_length_and_dropped_for_head() {
        let (mut stdout, _response) = CgiStdout::new(false, BOUNDS);
        stdout
            .write(Bytes::from_static(b"Status: 200\nContent-Length: 4\n\nabc"))
            .unwrap();
        assert!(
            stdout
                .end()
                .unwrap_err()
                .0
                .contains("wrote 3 body bytes of the 4")
        );

        let (mut stdout, _response) = CgiStdout::new(false, BOUNDS);
        let err = stdout
            .write(Bytes::from_static(b"Status: 200\nContent-Length: 2\n\nabc"))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("more body than its Content-Length"),
            "{err}"
        );

        let (mut stdout, mut response) = CgiStdout::new(true, BOUNDS);
        stdout
            .write(Bytes::from_static(
                b"Status: 200\nContent-Length: 4\n\nabcdef",
            ))
            .unwrap();
        for _ in 0..2 {
            stdout.write(Bytes::from(vec![b'x'; BOUNDS.queue])).unwrap();
            assert_eq!(
                stdout.check_write().unwrap(),
                BOUNDS.queue,
                "nothing queued for HEAD"
            );
        }
        stdout.end().unwrap();
        assert_eq!(poll_body(&mut response.body), Poll::Ready(None));

        for status in ["204", "304"] {
            let (mut stdout, mut response) = CgiStdout::new(false, BOUNDS);
            stdout
                .write(Bytes::from(format!("Status: {status}\n\nabc")))
                .unwrap();
            stdout.end().unwrap();
            assert_eq!(
                poll_body(&mut response.body),
                Poll::Ready(None),
                "no body for {status}"
            );
        }
    }
}
