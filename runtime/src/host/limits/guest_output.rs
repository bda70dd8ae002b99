//! The guest-output budget: what an app's guests may write to stdout and stderr,
//! which wedge forwards to its own log (DESIGN 4.6: an app must not fill the
//! operator's disk). A token bucket per app, shared by all its instances and both
//! streams: `log_burst` bytes at once, refilled at `log_rate` bytes a second. A line
//! that finds the bucket empty is dropped; what was dropped is reported in one log
//! line at most every `REPORT_INTERVAL`, and counted in `/metrics`.
//!
//! The bucket takes the time as an argument: the same writes at the same instants
//! always get the same verdicts.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often, at most, the dropped bytes are reported in the log.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// What happened to one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the line goes to the log.
    pub kept: bool,
    /// Bytes dropped since the last report, when it is time to report them.
    pub report: Option<u64>,
}

/// One app's budget.
#[derive(Debug)]
pub struct OutputBudget {
    rate: u64,
    burst: u64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// May go below zero: a line is kept whenever the bucket is not empty, so a line
    /// longer than the burst is not dropped forever; the debt is paid before the next.
    tokens: i128,
    refilled: Option<Instant>,
    /// Bytes dropped and not reported yet.
    unreported: u64,
    reported: Option<Instant>,
}

impl OutputBudget {
    /// `rate` bytes a second after a burst of `burst` bytes.
    pub fn new(rate: u64, burst: u64) -> Self {
        OutputBudget {
            rate,
            burst,
            bucket: Mutex::new(Bucket {
                tokens: i128::from(burst),
                refilled: None,
                unreported: 0,
                reported: None,
            }),
        }
    }

    /// A line of `bytes` (its newline included) written at `now`.
    pub fn line(&self, bytes: u64, now: Instant) -> Verdict {
        let mut bucket = crate::sync::lock(&self.bucket);
        if let Some(then) = bucket.refilled {
            let earned = now.saturating_duration_since(then).as_nanos() * u128::from(self.rate)
                / 1_000_000_000;
            let earned = i128::try_from(earned).unwrap_or(i128::MAX);
            bucket.tokens = bucket
                .tokens
                .saturating_add(earned)
                .min(i128::from(self.burst));
        }
        bucket.refilled = Some(now);
        let kept = bucket.tokens > 0;
        if kept {
            bucket.tokens -= i128::from(bytes);
        } else {
            bucket.unreported += bytes;
        }
        let due = bucket
            .reported
            .is_none_or(|then| now.saturating_duration_since(then) >= REPORT_INTERVAL);
        let report = (bucket.unreported > 0 && due).then(|| {
            bucket.reported = Some(now);
            std::mem::take(&mut bucket.unreported)
        });
        Verdict { kept, report }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    pub fn burst(&self) -> u64 {
        self.burst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_passes_then_lines_are_dropped_and_reported_once_per_interval() {
        let budget = OutputBudget::new(1000, 300);
        let start = Instant::now();
        let kept = (0..10)
            .map(|_| budget.line(100, start))
            .filter(|v| v.kept)
            .count();
        assert_eq!(kept, 3, "the burst");
        // The first drop was reported at once (100 bytes), the rest wait.
        let later = budget.line(100, start + 10 * MS);
        assert_eq!(
            later,
            Verdict {
                kept: true,
                report: None
            },
            "10 ms earn 10 bytes"
        );
        let verdict = budget.line(100, start + 20 * MS);
        assert_eq!(
            verdict,
            Verdict {
                kept: false,
                report: None
            }
        );
        // A second after the first report (the rate has refilled the burst): the
        // 700 bytes dropped since.
        let verdict = budget.line(100, start + REPORT_INTERVAL);
        assert_eq!(
            verdict,
            Verdict {
                kept: true,
                report: Some(700)
            }
        );
    }

    #[test]
    fn the_rate_refills_up_to_the_burst_and_no_further() {
        let budget = OutputBudget::new(100, 200);
        let start = Instant::now();
        assert!(budget.line(200, start).kept);
        assert!(!budget.line(1, start).kept);
        // An hour idle earns no more than the burst.
        let later = start + Duration::from_secs(3600);
        assert!(budget.line(150, later).kept);
        assert!(budget.line(50, later).kept);
        assert!(!budget.line(1, later).kept);
    }

    #[test]
    fn a_line_longer_than_the_burst_is_kept_and_paid_for_before_the_next() {
        let budget = OutputBudget::new(100, 10);
        let start = Instant::now();
        assert!(budget.line(4096, start).kept);
        assert!(!budget.line(1, start + Duration::from_secs(10)).kept);
        assert!(budget.line(1, start + Duration::from_secs(41)).kept);
    }

    #[test]
    fn a_zero_budget_drops_everything_and_counts_it() {
        let budget = OutputBudget::new(0, 0);
        let start = Instant::now();
        let dropped: u64 = (0..100)
            .map(|i| budget.line(10, start + i * 20 * MS))
            .map(|v| {
                assert!(!v.kept);
                v.report.unwrap_or(0)
            })
            .sum();
        // Reported at 0 ms, at 1 s; the last 49 lines wait for the next report.
        assert_eq!(dropped, 10 + 50 * 10);
    }
}
