//! Guest stdout/stderr, forwarded line by line to wedge's log and tagged with
//! the app's name, within the app's output budget (`limits::guest_output`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::limits::Size;
use super::limits::guest_output::OutputBudget;
use crate::metrics::AppMetrics;

/// Longest line kept before it is logged anyway, so a guest that never writes
/// a newline cannot grow host memory.
const MAX_LINE: usize = 4096;

/// Which of the guest's output streams a line came from.
#[derive(Debug, Clone, Copy)]
pub enum Channel {
    Stdout,
    Stderr,
}

/// Where one app's guest output goes: the log, within the app's budget, and the
/// count of what the budget dropped.
pub struct GuestOutput {
    app: Arc<str>,
    budget: Arc<OutputBudget>,
    metrics: Arc<AppMetrics>,
}

impl GuestOutput {
    pub fn new(app: Arc<str>, budget: OutputBudget, metrics: Arc<AppMetrics>) -> Self {
        GuestOutput {
            app,
            budget: Arc::new(budget),
            metrics,
        }
    }

    pub fn app(&self) -> &Arc<str> {
        &self.app
    }

    /// The same output and budget, counted in `metrics`.
    pub fn with_metrics(self: &Arc<Self>, metrics: Arc<AppMetrics>) -> Arc<Self> {
        Arc::new(GuestOutput {
            app: self.app.clone(),
            budget: self.budget.clone(),
            metrics,
        })
    }

    /// One line (without its newline), if the budget has room for it.
    fn line(&self, channel: Channel, line: &[u8]) {
        let bytes = line.len() as u64 + 1;
        let verdict = self.budget.line(bytes, Instant::now());
        let app = &*self.app;
        if !verdict.kept {
            self.metrics.guest_output_dropped(bytes);
        }
        if let Some(dropped) = verdict.report {
            tracing::warn!(
                "app `{app}`: guest output over its budget ({}/s, burst {}): \
                 {dropped} bytes of stdout/stderr dropped",
                Size(self.budget.rate()),
                Size(self.budget.burst()),
            );
        }
        if !verdict.kept {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        match channel {
            Channel::Stdout => tracing::info!(target: "guest", "[{app}] {text}"),
            Channel::Stderr => tracing::warn!(target: "guest", "[{app} stderr] {text}"),
        }
    }
}

/// A `StdoutStream` for one app and one channel.
#[derive(Clone)]
pub struct GuestLog {
    output: Arc<GuestOutput>,
    channel: Channel,
}

impl GuestLog {
    pub fn new(output: Arc<GuestOutput>, channel: Channel) -> Self {
        GuestLog { output, channel }
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
        self.log.output.line(self.log.channel, &self.line);
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
