//! Ctrl-C and SIGTERM: the first stops accepting and drains the requests in flight
//! (bounded by `--drain-timeout`); the second exits at once, cutting them off.

use anyhow::{Context, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::serve::tally::InFlight;

/// The exit status after a second signal: 128 + SIGINT's number, as a shell reports a
/// command Ctrl-C ended.
pub const EXIT_FORCED: i32 = 130;

/// Ctrl-C (SIGINT) and SIGTERM, caught from now on.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    pub fn catch() -> Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("catching Ctrl-C")?,
            terminate: signal(SignalKind::terminate()).context("catching SIGTERM")?,
        })
    }

    /// Resolves on the next signal, with its name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "Ctrl-C",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }

    /// Resolves on the first signal: time to drain.
    pub async fn first(&mut self) {
        let signal = self.next().await;
        tracing::info!(
            "{signal}: shutting down: no new connections, finishing requests in flight \
             (Ctrl-C again to exit at once)"
        );
    }

    /// Runs `drain` to its end, unless a second signal comes first: then exits the
    /// process at once with [`EXIT_FORCED`], saying how many requests it cut off.
    pub async fn unless_second(&mut self, drain: impl Future<Output = ()>) {
        tokio::select! {
            () = drain => {}
            signal = self.next() => {
                tracing::warn!(
                    "{signal} again: exiting at once, cutting off {}",
                    requests(InFlight::count())
                );
                std::process::exit(EXIT_FORCED);
            }
        }
    }
}

/// `1 request in flight`, `2 requests in flight`.
fn requests(n: usize) -> String {
    match n {
        1 => "1 request in flight".to_string(),
        n => format!("{n} requests in flight"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_in_words() {
        assert_eq!(requests(0), "0 requests in flight");
        assert_eq!(requests(1), "1 request in flight");
        assert_eq!(requests(3), "3 requests in flight");
    }
}
