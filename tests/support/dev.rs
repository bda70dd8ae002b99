//! What the `wedge dev` tests share: requests with curl, and the builds a log shows
//! (a server's stderr, or a terminal's screen).

use std::time::{Duration, Instant};

use crate::{curl, poll_until};

/// The `http://` URL `wedge dev` printed in `text` (its start-up line), without the
/// trailing `/`.
pub fn served_url(text: &str) -> String {
    let url = text
        .split_whitespace()
        .find(|word| word.starts_with("http://"));
    let url = url.unwrap_or_else(|| panic!("no http:// URL in {text}"));
    url.trim_end_matches('/').to_string()
}

/// curl's status and body for `url`.
pub fn get(url: &str) -> (String, String) {
    let out = curl(&["--write-out", "\n%{http_code}", url]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or((&text, ""));
    (status.to_string(), body.to_string())
}

/// Polls until `url` answers `expected` (a reload may be building meanwhile).
pub fn wait_for_body(url: &str, expected: &str) {
    poll_until(&format!("{url} answering {expected:?}"), || {
        (get(url) == ("200".to_string(), expected.to_string())).then_some(())
    });
}

/// curl's response head (lowercase) and body for `url`.
pub fn head_and_body(url: &str) -> (String, String) {
    let out = curl(&["--include", url]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_ascii_lowercase(), body.to_string())
}

/// Builds a log shows: `wedge: building` is printed once per build.
pub fn builds(log: &str) -> usize {
    log.matches("wedge: building").count()
}

/// Watches `log` for `window` and returns it, failing as soon as it shows another
/// number of builds than `expected`: the assertion is on the count; the window is how
/// long nothing may happen, polled, not a wait for something.
pub fn builds_stay(log: &dyn Fn() -> String, expected: usize, window: Duration) -> String {
    let end = Instant::now() + window;
    loop {
        let log = log();
        assert_eq!(builds(&log), expected, "builds in the log:\n{log}");
        if Instant::now() > end {
            return log;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls until `log` shows `n` builds, the last one done: every build after the
/// first logs its outcome (the first one's here succeeds).
pub fn wait_for_builds(log: &dyn Fn() -> String, n: usize) -> String {
    poll_until(&format!("{n} builds"), || {
        let log = log();
        let outcomes = ["reloaded `", "did not change", "failed to build"]
            .iter()
            .map(|outcome| log.matches(outcome).count())
            .sum::<usize>();
        (builds(&log) == n && outcomes == n - 1).then_some(log)
    })
}
