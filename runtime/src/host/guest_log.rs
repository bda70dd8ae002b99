//! Guest stdout/stderr, forwarded line by line to wedge's log and tagged with
//! the app's name.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Longest line kept before it is logged anyway, so a guest that never writes
/// a newline cannot grow host memory.
const MAX_LINE: usize = 4096;

/// Which of the guest's output streams a line came from.
#[derive(Debug, Clone, Copy)]
pub enum Channel {
    Stdout,
    Stderr,
}

/// A `StdoutStream` for one app and one channel.
#[derive(Clone)]
pub struct GuestLog {
    app: Arc<str>,
    channel: Channel,
}

impl GuestLog {
    pub fn new(app: Arc<str>, channel: Channel) -> Self {
        GuestLog { app, channel }
    }

    fn writer(&self) -> LineWriter {
        LineWriter {
            log: self.clone(),
            line: Vec::new(),
        }
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.writer())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.writer())
    }
}

/// Buffers bytes until a newline, then emits one log event per line.
struct LineWriter {
    log: GuestLog,
    line: Vec<u8>,
}

impl LineWriter {
    fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match bytes.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    self.line.extend_from_slice(&bytes[..end]);
                    self.emit();
                    bytes = &bytes[end + 1..];
                }
                None => {
                    let room = MAX_LINE.saturating_sub(self.line.len());
                    let take = room.min(bytes.len());
                    self.line.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if self.line.len() >= MAX_LINE {
                        self.emit();
                    }
                }
            }
        }
    }

    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let text = text.trim_end_matches('\r');
        let app = &*self.log.app;
        match self.log.channel {
            Channel::Stdout => tracing::info!(target: "guest", "[{app}] {text}"),
            Channel::Stderr => tracing::warn!(target: "guest", "[{app} stderr] {text}"),
        }
        self.line.clear();
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }
}

#[async_trait::async_trait]
impl Pollable for LineWriter {
    async fn ready(&mut self) {}
}

impl OutputStream for LineWriter {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(MAX_LINE)
    }
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
