//! A WAGI program's stdin: the request body, read from the client only as the
//! program reads it (one frame ahead at most), so a program that never reads holds
//! back its own request and nothing else. The body arrives bounded by the app's
//! `max_body` (a [`LimitedBody`](crate::host::request_body::LimitedBody)): past it, the read
//! fails.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::io::{AsyncRead, ReadBuf};
use wasmtime_wasi::cli::{IsTerminal, StdinStream};
use wasmtime_wasi::p2::{InputStream, Pollable, StreamError, StreamResult};

/// The request body as stdin (every stream the program opens on it shares it).
#[derive(Clone)]
pub(crate) struct BodyStdin(Arc<Mutex<Reader>>);

struct Reader {
    body: UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>,
    /// Taken from the body, not yet read by the program.
    buffered: Bytes,
    end: Option<End>,
}

enum End {
    Closed,
    /// The body failed (the client went away, or it is past `max_body`): said once,
    /// then the stream is closed.
    Failed(String),
}

impl BodyStdin {
    pub(crate) fn new<B>(body: B) -> BodyStdin
    where
        B: Body<Data = Bytes, Error = wasmtime_wasi_http::Error> + Send + 'static,
    {
        BodyStdin(Arc::new(Mutex::new(Reader {
            body: body.boxed_unsync(),
            buffered: Bytes::new(),
            end: None,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Reader> {
        crate::sync::lock(&self.0)
    }
}

impl Reader {
    /// Ready once there are bytes to read or the body ended.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while self.buffered.is_empty() && self.end.is_none() {
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                None => self.end = Some(End::Closed),
                Some(Err(err)) => self.end = Some(End::Failed(err.to_string())),
                // Trailers are not a CGI program's.
                Some(Ok(frame)) => self.buffered = frame.into_data().unwrap_or_default(),
            }
        }
        Poll::Ready(())
    }

    /// Up to `size` bytes of what arrived; none when nothing did yet.
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if !self.buffered.is_empty() {
            let n = size.min(self.buffered.len());
            return Ok(self.buffered.split_to(n));
        }
        match self.end.take() {
            None => Ok(Bytes::new()),
            Some(End::Failed(why)) => {
                self.end = Some(End::Closed);
                Err(StreamError::LastOperationFailed(wasmtime::format_err!(
                    "reading the request body: {why}"
                )))
            }
            Some(End::Closed) => {
                self.end = Some(End::Closed);
                Err(StreamError::Closed)
            }
        }
    }
}

impl IsTerminal for BodyStdin {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdinStream for BodyStdin {
    fn p2_stream(&self) -> Box<dyn InputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for BodyStdin {
    async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.lock().poll_fill(cx)).await
    }
}

impl InputStream for BodyStdin {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        self.lock().read(size)
    }
}

impl AsyncRead for BodyStdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let mut reader = self.lock();
        ready!(reader.poll_fill(cx));
        match reader.read(buf.remaining()) {
            Ok(bytes) => buf.put_slice(&bytes),
            Err(StreamError::Closed) => {}
            Err(err) => return Poll::Ready(Err(std::io::Error::other(err.to_string()))),
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    fn body(frames: Vec<Result<&'static [u8], wasmtime_wasi_http::Error>>) -> BodyStdin {
        let frames = frames
            .into_iter()
            .map(|frame| frame.map(|data| http_body::Frame::data(Bytes::from_static(data))));
        BodyStdin::new(StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync())
    }

    #[tokio::test]
    async fn the_body_is_read_as_it_arrives_then_closes() {
        let mut stdin = body(vec![Ok(b"hello "), Ok(b"world")]);
        assert_eq!(
            stdin.read(100).unwrap(),
            "",
            "nothing taken before it is asked for"
        );
        stdin.ready().await;
        assert_eq!(stdin.read(3).unwrap(), "hel");
        assert_eq!(stdin.read(100).unwrap(), "lo ");
        stdin.ready().await;
        assert_eq!(stdin.read(100).unwrap(), "world");
        stdin.ready().await;
        assert!(matches!(stdin.read(100), Err(StreamError::Closed)));
    }

    #[tokio::test]
    async fn a_failed_body_fails_one_read_then_is_closed() {
        let limit = wasmtime_wasi_http::Error::HttpRequestBodySize(Some(4));
        let mut stdin = body(vec![Ok(b"abc"), Err(limit)]);
        stdin.ready().await;
        assert_eq!(stdin.read(100).unwrap(), "abc");
        stdin.ready().await;
        assert!(matches!(
            stdin.read(100),
            Err(StreamError::LastOperationFailed(_))
        ));
        assert!(matches!(stdin.read(100), Err(StreamError::Closed)));
    }
}
