//! Guest stdout/stderr, forwarded line by line to wedge's log and tagged with
//! the app's name, within the app's output budget (`limits::guest_output`). The
//! lines wedge itself writes because of a guest's calls or its clients' requests (an
//! outbound request denied, a fault) are the app's too: a guest can cause one per host
//! call. They have a budget of their own, of the same size, so that what a guest
//! prints can never crowd out the line telling why it was stopped; and that line (a
//! fault) has a third, so that the notices a guest causes cannot either.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

use super::limits::Size;
use super::limits::guest_output::OutputBudget;
use crate::log_text::{printable, shown};
use crate::metrics::AppMetrics;

/// Longest line kept before it is logged anyway, so a guest that never writes
/// a newline cannot grow host memory.
const MAX_LINE: usize = 4096;

/// What a line costs besides its text: what wedge writes around it (time, level,
/// the app's tag), so that a flood of empty lines is charged what it takes.
const LINE_OVERHEAD: u64 = 64;

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
    /// For the guest's stdout and stderr.
    budget: Arc<OutputBudget>,
    /// For wedge's lines about the app.
    notices: Arc<OutputBudget>,
    /// For the lines saying why a request or an instance of the app failed: a guest
    /// can make a notice once per host call (an outbound request refused), and such a
    /// flood must not crowd out the line saying why the guest was stopped.
    faults: Arc<OutputBudget>,
    metrics: Arc<AppMetrics>,
}

impl GuestOutput {
    pub fn new(app: Arc<str>, budget: OutputBudget, metrics: Arc<AppMetrics>) -> Self {
        GuestOutput {
            app,
            notices: Arc::new(OutputBudget::new(budget.rate(), budget.burst())),
            faults: Arc::new(OutputBudget::new(budget.rate(), budget.burst())),
            budget: Arc::new(budget),
            metrics,
        }
    }

    pub fn app(&self) -> &str {
        &self.app
    }

    /// The same output and budget, counted in `metrics`.
    pub fn with_metrics(self: &Arc<Self>, metrics: Arc<AppMetrics>) -> Arc<Self> {
        Arc::new(GuestOutput {
            app: self.app.clone(),
            budget: self.budget.clone(),
            notices: self.notices.clone(),
            faults: self.faults.clone(),
            metrics,
        })
    }

    /// Whether a line of `text` octets fits `budget` (the guest's, or wedge's notices',
    /// named by `what`); one that does not is counted as `dropped` octets of the app's
    /// output.
    fn admit(&self, budget: &OutputBudget, what: &str, text: usize, dropped: u64) -> bool {
        let cost = text as u64 + LINE_OVERHEAD;
        let verdict = budget.line(cost, Instant::now());
        if !verdict.kept {
            self.metrics.guest_output_dropped(dropped);
        }
        if let Some(over) = verdict.report {
            tracing::warn!(
                "app `{}`: guest output over its budget ({}/s, burst {}): \
                 {over} bytes of {what} dropped",
                self.app,
                Size(budget.rate()),
                Size(budget.burst()),
            );
        }
        verdict.kept
    }

    /// One line the guest wrote (without its newline), if the budget has room for it.
    fn line(&self, channel: Channel, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = printable(text.trim_end_matches('\r'));
        if !self.admit(
            &self.budget,
            "stdout/stderr",
            text.len(),
            line.len() as u64 + 1,
        ) {
            return;
        }
        let app = &*self.app;
        match channel {
            Channel::Stdout => tracing::info!(target: "guest", "[{app}] {text}"),
            Channel::Stderr => tracing::warn!(target: "guest", "[{app} stderr] {text}"),
        }
    }

    /// A warning wedge writes about the app (something its guest did, a fault, a
    /// refusal), within the app's budget: `app `NAME`: message`. A guest or a client
    /// can cause one per call or request, so these are budgeted like guest output.
    pub fn warn(&self, message: fmt::Arguments<'_>) {
        if let Some(text) = self.admit_text(&self.notices, "wedge's lines about it", message) {
            tracing::warn!("app `{}`: {text}", self.app);
        }
    }

    /// [`GuestOutput::warn`] at level info.
    pub fn info(&self, message: fmt::Arguments<'_>) {
        if let Some(text) = self.admit_text(&self.notices, "wedge's lines about it", message) {
            tracing::info!("app `{}`: {text}", self.app);
        }
    }

    /// Why a request or an instance of the app failed, as [`GuestOutput::warn`] but
    /// within a budget of its own.
    pub fn fault(&self, message: fmt::Arguments<'_>) {
        if let Some(text) = self.admit_text(&self.faults, "wedge's fault lines about it", message) {
            tracing::warn!("app `{}`: {text}", self.app);
        }
    }

    fn admit_text(
        &self,
        budget: &OutputBudget,
        what: &str,
        message: fmt::Arguments<'_>,
    ) -> Option<String> {
        // What a guest chose (a name, an error's text) may be in it: cut as a guest's
        // line is, and escaped.
        let text = shown(message, MAX_LINE);
        self.admit(budget, what, text.len(), text.len() as u64 + 1)
            .then_some(text)
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
    fn push(&mut self, bytes: &[u8]) {
        let LineWriter { log, line } = self;
        split_lines(line, bytes, |text| log.output.line(log.channel, text));
    }

    fn emit(&mut self) {
        self.log.output.line(self.log.channel, &self.line);
        self.line.clear();
    }
}

/// Adds `bytes` to the `line` being built, handing `emit` each line that ends (its
/// newline left out) or reaches `MAX_LINE` octets: no line is longer, and no octet is
/// looked at twice, whatever one write hands over. A full line waits for the next
/// octet, so that a newline right after it (in the next write: writes come 4 KiB at a
/// time) ends it rather than making an empty line of its own.
fn split_lines(line: &mut Vec<u8>, mut bytes: &[u8], mut emit: impl FnMut(&[u8])) {
    while !bytes.is_empty() {
        if line.len() == MAX_LINE {
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
            emit(line);
            line.clear();
            continue;
        }
        let room = MAX_LINE - line.len();
        let window = &bytes[..bytes.len().min(room + 1)];
        match window.iter().position(|&b| b == b'\n') {
            Some(end) => {
                line.extend_from_slice(&bytes[..end]);
                emit(line);
                line.clear();
                bytes = &bytes[end + 1..];
            }
            None => {
                let take = room.min(bytes.len());
                line.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
            }
        }
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
    /// Past `check-write`'s permit a write traps, as WASI 0.2 says it does: the work
    /// of one call stays bounded, as `poll_write` bounds WASI 0.3's.
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if bytes.len() > MAX_LINE {
            return Err(StreamError::Trap(wasmtime::format_err!(
                "the guest wrote {} bytes to its log where check-write permitted {MAX_LINE}",
                bytes.len()
            )));
        }
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
    /// Takes at most `MAX_LINE` octets, as WASI 0.2's `check-write` allows: WASI 0.3
    /// hands over the guest's whole write (any size) in one call, and the work of
    /// one call must stay small, for it runs on the worker outside the guest's CPU
    /// and wall-time limits. The guest writes the rest again, as for any short write.
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let taken = &buf[..buf.len().min(MAX_LINE)];
        self.push(taken);
        Poll::Ready(Ok(taken.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(writes: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let (mut line, mut lines) = (Vec::new(), Vec::new());
        for bytes in writes {
            split_lines(&mut line, bytes, |text| lines.push(text.to_vec()));
        }
        (lines, line)
    }

    #[test]
    fn a_line_is_cut_at_max_line_even_when_its_newline_came_in_the_same_write() {
        let mut huge = vec![b'x'; 3 * MAX_LINE + 10];
        huge.push(b'\n');
        let (lines, rest) = lines_of(&[&huge]);
        let lengths: Vec<usize> = lines.iter().map(Vec::len).collect();
        assert_eq!(lengths, [MAX_LINE, MAX_LINE, MAX_LINE, 10]);
        assert!(rest.is_empty());
    }

    #[test]
    fn a_line_of_exactly_max_line_and_its_newline_is_one_line() {
        let mut exact = vec![b'x'; MAX_LINE];
        exact.extend_from_slice(b"\nnext");
        let (lines, rest) = lines_of(&[&exact]);
        assert_eq!(lines, [vec![b'x'; MAX_LINE]]);
        assert_eq!(rest, b"next");
    }

    #[test]
    fn a_full_line_and_its_newline_in_the_next_write_are_one_line() {
        let full = vec![b'x'; MAX_LINE];
        let (lines, rest) = lines_of(&[&full, b"\nnext"]);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0], full);
        assert_eq!(rest, b"next");
        // Without a newline after it, the next octet starts the next line.
        let (lines, rest) = lines_of(&[&full, b"y"]);
        assert_eq!(lines, [full]);
        assert_eq!(rest, b"y");
    }

    #[test]
    fn lines_span_writes_and_empty_lines_are_lines() {
        let (lines, rest) = lines_of(&[b"a", b"b\n\nc", b"d\n"]);
        assert_eq!(lines, [b"ab".to_vec(), Vec::new(), b"cd".to_vec()]);
        assert!(rest.is_empty());
    }

    #[test]
    fn one_poll_takes_at_most_one_line_of_a_write() {
        let output = Arc::new(GuestOutput::new(
            "test".into(),
            OutputBudget::new(0, 0),
            AppMetrics::detached(),
        ));
        let mut writer = GuestLog::new(output, Channel::Stdout).writer();
        let huge = vec![b'x'; 64 * MAX_LINE];
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let taken = Pin::new(&mut writer).poll_write(&mut cx, &huge);
        assert!(matches!(taken, Poll::Ready(Ok(MAX_LINE))), "{taken:?}");
    }
}
