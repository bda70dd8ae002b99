//! Per-app resource limits and their defaults.

use std::time::Duration;

/// Default memory per instance: 128 MiB.
pub const DEFAULT_MEMORY: u64 = 128 * 1024 * 1024;
/// Default CPU time per request (time spent running guest code).
pub const DEFAULT_CPU_TIME: Duration = Duration::from_secs(1);
/// Default wall-clock time per request.
pub const DEFAULT_WALL_TIME: Duration = Duration::from_secs(60);
/// Default maximum request body: 100 MiB.
pub const DEFAULT_MAX_BODY: u64 = 100 * 1024 * 1024;

/// What one request of an app may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory an instance may grow to, in bytes.
    pub memory: u64,
    /// Time spent running guest code for one request; waiting on I/O does not count.
    pub cpu_time: Duration,
    /// Time from dispatch until the guest call returns.
    pub wall_time: Duration,
    /// Largest request body accepted, in bytes.
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: DEFAULT_MEMORY,
            cpu_time: DEFAULT_CPU_TIME,
            wall_time: DEFAULT_WALL_TIME,
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// A size written like `128MiB`, `1GB` or `4096`, in bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    text.parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|err| format!("`{text}` is not a size like 128MiB: {err}"))
}

/// A duration written like `1s`, `500ms` or `2m 30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|err| format!("`{text}` is not a duration like 1s or 500ms: {err}"))
}
